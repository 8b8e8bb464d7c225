//! The bank's command line, run as a process: the code's policy is the
//! ceiling the command line can only narrow, the store is shared between
//! processes, and a limit the code forgot is said at start.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use toolcall_testkit::run::spawn_fed;

const BANK: &str = env!("CARGO_BIN_EXE_bankcli");
const FORGETFUL: &str = env!("CARGO_BIN_EXE_bankcli-forgetful");

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bankcli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `program` with `args`, the ledger in `dir`, `stdin` as its input.
fn run(program: &str, dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(program);
    command
        .args(args)
        .env("BANK_LEDGER", dir.join("ledger.jsonl"));
    spawn_fed(&mut command, stdin).wait_with_output().unwrap()
}

/// The answers `replay` printed, one a line.
fn answers(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The transfers the bank applied, from its ledger.
fn ledger(dir: &Path) -> Vec<Value> {
    match std::fs::read_to_string(dir.join("ledger.jsonl")) {
        Ok(text) => text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A confirmed transfer of `cents` from ACC-1 to ACC-2, as a replay line.
fn transfer(cents: i64) -> String {
    let line = json!({
        "tool": "transfer_money",
        "arguments": {"from": "ACC-1", "to": "ACC-2", "amount_cents": cents},
        "confirmed": true,
    });
    format!("{line}\n")
}

/// `--allow` may only keep tools the code allows: naming another, even one
/// the registry has, is a usage error (exit 2) that names what the code
/// allows, and nothing runs. `--limit` may only lower the caller's own
/// limits.
#[test]
fn the_command_line_cannot_widen_the_code_s_policy() {
    let dir = scratch("widen");
    let out = run(
        BANK,
        &dir,
        &["--allow", "get_balance,close_account", "replay"],
        &transfer(500),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains("--allow names `close_account`, which the code does not allow")
            && message.contains("allows get_balance, transfer_money"),
        "{message}"
    );
    assert!(answers(&out).is_empty(), "nothing ran");

    // The branch's own limit (200.00) is its ceiling, not the head office's.
    let out = run(
        BANK,
        &dir,
        &[
            "--caller",
            "branch",
            "--limit",
            "max_transfer_cents=50000",
            "replay",
        ],
        &transfer(500),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "--limit max_transfer_cents=50000 is above the code's max_transfer_cents=20000 \
             for caller `branch`"
        ),
        "{}",
        stderr(&out)
    );
    assert!(ledger(&dir).is_empty(), "nothing was transferred");
}

/// `--allow get_balance` narrows the caller to balances: a transfer line is
/// TOOL_NOT_ALLOWED, and the bank moves nothing.
#[test]
fn allow_get_balance_refuses_a_transfer() {
    let dir = scratch("narrow");
    let balance = json!({"tool": "get_balance", "arguments": {"account": "ACC-1"}});
    let out = run(
        BANK,
        &dir,
        &["--allow", "get_balance", "replay"],
        &format!("{}{balance}\n", transfer(500)),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let answers = answers(&out);
    let codes: Vec<&str> = answers
        .iter()
        .map(|a| a["code"].as_str().unwrap_or("OK"))
        .collect();
    assert_eq!(codes, ["TOOL_NOT_ALLOWED", "OK"]);
    assert_eq!(answers[1]["data"]["balance_cents"], 250_000);
    assert!(ledger(&dir).is_empty(), "nothing was transferred");
}

/// Each caller runs under its own limits, and `--limit` lowers them.
#[test]
fn each_caller_has_its_own_limits_and_limit_lowers_them() {
    let dir = scratch("limits");
    let code = |args: &[&str], cents: i64| -> String {
        let out = run(BANK, &dir, args, &transfer(cents));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        answers(&out)[0]["code"].as_str().unwrap_or("OK").to_owned()
    };
    assert_eq!(code(&["replay"], 30_000), "OK");
    assert_eq!(
        code(&["--caller", "branch", "replay"], 30_001),
        "POLICY_LIMIT"
    );
    assert_eq!(
        code(
            &[
                "--limit",
                "max_transfer_cents=1000",
                "replay",
                "--session-id",
                "low"
            ],
            5_000
        ),
        "POLICY_LIMIT"
    );
    let applied: Vec<i64> = ledger(&dir)
        .iter()
        .map(|entry| entry["amount_cents"].as_i64().unwrap())
        .collect();
    assert_eq!(applied, [30_000], "only the head office's transfer ran");
}

/// Two processes over one `--store sqlite:PATH`: the second replays the
/// first's transfer (`replayed: true`), and the bank applied it once.
#[test]
fn two_processes_over_one_sqlite_store_transfer_once() {
    let dir = scratch("sqlite");
    let store = format!("sqlite:{}", dir.join("bank.db").display());
    let args = ["replay", "--store", &store, "--session-id", "desk-7"];
    let first = run(BANK, &dir, &args, &transfer(2_590));
    let second = run(BANK, &dir, &args, &transfer(2_590));
    for out in [&first, &second] {
        assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    }
    let (first, second) = (answers(&first), answers(&second));
    assert_eq!(first[0]["ok"], true, "{first:?}");
    assert_eq!(first[0].get("replayed"), None, "{first:?}");
    assert_eq!(second[0]["ok"], true, "{second:?}");
    assert_eq!(second[0]["replayed"], true, "the second process replays");
    assert_eq!(second[0]["data"], first[0]["data"]);
    assert_eq!(ledger(&dir).len(), 1, "the bank applied the transfer once");

    // Over `memory`, the default, each process starts with nothing to replay.
    let dir = scratch("memory");
    let args = ["replay", "--session-id", "desk-7"];
    run(BANK, &dir, &args, &transfer(2_590));
    let again = answers(&run(BANK, &dir, &args, &transfer(2_590)));
    assert_eq!(again[0].get("replayed"), None);
    assert_eq!(ledger(&dir).len(), 2);
}

/// A limit the code does not set is said on standard error at start, one
/// line with its fix; `--quiet` silences it. The bank that sets its limits
/// says nothing.
#[test]
fn a_forgotten_limit_is_said_at_start_unless_quiet() {
    let dir = scratch("forgotten");
    let balance = format!(
        "{}\n",
        json!({"tool": "get_balance", "arguments": {"account": "ACC-2"}})
    );
    let out = run(FORGETFUL, &dir, &["replay"], &balance);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let warnings: Vec<String> = stderr(&out)
        .lines()
        .filter(|line| line.contains("warning"))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        warnings,
        [
            "bankcli: warning: caller `branch` may call `transfer_money`, whose argument \
             `amount_cents` is bounded by the limit `max_transfer_cents`, but does not set it: \
             every such call is POLICY_LIMIT (set it with Policy::limit(\"max_transfer_cents\", \
             ...))"
        ]
    );
    assert_eq!(answers(&out)[0]["data"]["balance_cents"], 10_000);

    let quiet = run(FORGETFUL, &dir, &["replay", "--quiet"], &balance);
    assert_eq!(quiet.status.code(), Some(0));
    assert!(!stderr(&quiet).contains("warning"), "{}", stderr(&quiet));
    assert_eq!(answers(&quiet)[0]["data"]["balance_cents"], 10_000);

    let bank = run(BANK, &dir, &["replay"], &balance);
    assert!(!stderr(&bank).contains("warning"), "{}", stderr(&bank));
}
