//! `App`: the whole command line of an application that has none, driven
//! in-process, with the backend's side effects counted.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use toolcall::{AuditRecord, Caller, Ctx, Policy, Rejection, tool, tools};
use toolcall_cli::{App, Error};
// The backend: counts the transfers it applied. This application's own
// tools over it (no recipient, no question asked) stay here.
use toolcall_testkit::bank::Bank;
use toolcall_testkit::contract::locked_tool;
use toolcall_testkit::run::block_on;

/// Moves money between two accounts.
#[tool(side_effect)]
fn transfer(
    ctx: &Ctx<Bank>,
    /// Amount in cents.
    #[arg(min = 1)]
    amount_cents: i64,
) -> Result<Value, Rejection> {
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"moved_cents": amount_cents}))
}

/// The balance of the account, in cents.
#[tool]
fn balance(ctx: &Ctx<Bank>) -> Result<Value, Rejection> {
    Ok(json!({"transfers": ctx.state.transfers.load(Ordering::SeqCst)}))
}

fn app(bank: &Arc<Bank>) -> App<Bank> {
    App::new("bank", tools![transfer, balance].unwrap(), Arc::clone(bank)).version("2.4.1")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolcall-cli-app-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(bank: &Arc<Bank>, args: &[&str]) -> Result<(), Error> {
    app(bank).run_from(std::iter::once("bank").chain(args.iter().copied()))
}

#[test]
fn definitions_follow_the_format_and_the_allowlist() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("definitions");
    let file = dir.join("tools.json");
    let path = file.to_str().unwrap();
    run(&bank, &["definitions", "--format", "openai", "-o", path]).unwrap();
    let tools: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["transfer", "balance"], "all tools by default");
    assert_eq!(tools[0]["function"]["strict"], true);

    run(
        &bank,
        &[
            "definitions",
            "--format",
            "mcp",
            "--allow",
            "balance",
            "-o",
            path,
        ],
    )
    .unwrap();
    let tools: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    assert_eq!(tools[0]["name"], "balance");
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
}

#[test]
fn replay_runs_each_side_effect_once_and_audits_every_call() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("replay");
    let calls = dir.join("calls.jsonl");
    let audit = dir.join("audit.jsonl");
    std::fs::write(
        &calls,
        [
            json!({"tool": "transfer", "arguments": {"amount_cents": 500}, "call_id": "c1"}),
            json!({"tool": "transfer", "arguments": "{\"amount_cents\": 500}", "call_id": "c2"}),
            json!({"tool": "transfer", "arguments": {"amount_cents": 5.5}}),
            json!({"tool": "balance"}),
        ]
        .iter()
        .map(|c| format!("{c}\n"))
        .collect::<String>(),
    )
    .unwrap();
    run(
        &bank,
        &[
            "replay",
            calls.to_str().unwrap(),
            "--session-id",
            "s1",
            "--audit",
            audit.to_str().unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(
        bank.transfers.load(Ordering::SeqCst),
        1,
        "the identical transfer was replayed"
    );

    let records: Vec<AuditRecord> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let seen: Vec<(&str, &str, bool, Option<&str>)> = records
        .iter()
        .map(|r| {
            (
                r.session_id.as_str(),
                r.code.as_str(),
                r.replayed,
                r.call_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("s1", "OK", false, Some("c1")),
            ("s1", "OK", true, Some("c2")),
            ("s1", "INVALID_ARGUMENTS", false, None),
            ("s1", "OK", false, None),
        ]
    );
}

#[test]
fn configure_changes_the_dispatcher() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("configure");
    let calls = dir.join("calls.jsonl");
    let audit = dir.join("audit.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 1}}\n\
         {\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 2}}\n",
    )
    .unwrap();
    app(&bank)
        .configure(|builder| builder.max_steps(1))
        .run_from([
            "bank",
            "replay",
            calls.to_str().unwrap(),
            "--audit",
            audit.to_str().unwrap(),
        ])
        .unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(
        log.lines()
            .nth(1)
            .unwrap()
            .contains("\"code\":\"STEP_LIMIT\""),
        "{log}"
    );
}

#[test]
fn lock_then_check_and_a_broken_contract_is_exit_code_1() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("lock");
    let lock = dir.join("tools.lock.json");
    let path = lock.to_str().unwrap();
    run(&bank, &["lock", "--file", path]).unwrap();
    run(&bank, &["check", "--file", path]).unwrap();

    // A contract in which `transfer` also took a required `memo`: the
    // current tool no longer has it.
    let mut locked: Value = serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    let transfer = locked_tool(&mut locked, "transfer");
    transfer["fields"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "memo", "required": true, "type": "string"}));
    std::fs::write(&lock, serde_json::to_vec_pretty(&locked).unwrap()).unwrap();
    let error = run(&bank, &["check", "--file", path]).unwrap_err();
    assert!(matches!(error, Error::Breaking { count: 1, .. }), "{error}");
    assert_eq!(error.exit_code(), 1);

    let missing = run(
        &bank,
        &["check", "--file", dir.join("none").to_str().unwrap()],
    )
    .unwrap_err();
    assert_eq!(missing.exit_code(), 2);
    assert!(missing.to_string().contains("run `lock`"), "{missing}");
}

#[test]
fn usage_errors_and_help_do_not_exit_the_process() {
    let bank = Arc::new(Bank::default());
    let help = run(&bank, &["--help"]).unwrap_err();
    assert_eq!(help.exit_code(), 0);
    let text = help.to_string();
    for command in ["definitions", "replay", "report", "lock", "check", "mcp"] {
        assert!(
            text.contains(command),
            "{command} missing from --help: {text}"
        );
    }
    assert!(text.contains("Usage: bank"), "{text}");
    // The usage line names the application, whatever argv[0] is.
    let renamed = app(&bank)
        .run_from(["/usr/local/bin/other", "--help"])
        .unwrap_err();
    assert!(renamed.to_string().contains("Usage: bank"), "{renamed}");

    let version = run(&bank, &["--version"]).unwrap_err();
    assert_eq!(
        (version.exit_code(), version.to_string()),
        (0, "bank 2.4.1\n".to_owned())
    );

    let typo = run(
        &bank,
        &["definitions", "--format", "openai", "--allow", "transfr"],
    )
    .unwrap_err();
    assert_eq!(typo.exit_code(), 2);
    assert!(typo.to_string().contains("`transfr`"), "{typo}");

    let unknown = run(&bank, &["frobnicate"]).unwrap_err();
    assert_eq!(unknown.exit_code(), 2);
    let bad_format = run(&bank, &["definitions", "--format", "cohere"]).unwrap_err();
    assert_eq!(bad_format.exit_code(), 2);
    assert!(
        bad_format.to_string().contains("unknown format `cohere`"),
        "{bad_format}"
    );
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
}

/// An allowlist that is given but names nothing (`--allow ""`, `","`, `" "`)
/// is refused by every command, before anything runs; it never means every
/// tool. `--allow` left out is the application's default (here every tool).
#[test]
fn an_allowlist_that_names_no_tool_is_refused_by_every_command() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("empty-allow");
    let calls = dir.join("calls.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 1}}\n",
    )
    .unwrap();
    let audit = dir.join("audit.jsonl");
    std::fs::write(&audit, "").unwrap();
    let lock = dir.join("tools.lock.json");
    let out = dir.join("tools.json");
    let (calls, audit, lock, out) = (
        calls.to_str().unwrap(),
        audit.to_str().unwrap(),
        lock.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    let commands: [&[&str]; 6] = [
        &["definitions", "--format", "openai", "-o", out],
        &["replay", calls],
        &["report", audit],
        &["lock", "--file", lock],
        &["check", "--file", lock],
        &["mcp"],
    ];
    for empty in ["", ",", " ", " , ", ",,"] {
        for command in commands {
            let mut args = command.to_vec();
            args.extend(["--allow", empty]);
            let error = run(&bank, &args).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{args:?}: {error}");
            let message = error.to_string();
            assert!(
                message.contains("--allow names no tool")
                    && message.contains("comma-separated")
                    && message.contains("transfer,balance"),
                "{args:?}: {message}"
            );
        }
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0, "nothing ran");
    assert!(!std::path::Path::new(out).exists() && !std::path::Path::new(lock).exists());

    // Empty names beside real ones are skipped; no --allow is every tool.
    run(
        &bank,
        &[
            "definitions",
            "--format",
            "neutral",
            "-o",
            out,
            "--allow",
            "balance, ,",
        ],
    )
    .unwrap();
    let tools: Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    run(&bank, &["replay", calls]).unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
}

/// The library function fails closed too: no names is an error, not every
/// tool; `every_tool` is the explicit way to allow everything.
#[test]
fn allowlist_without_names_is_an_error_and_every_tool_is_explicit() {
    let registry = tools![transfer, balance].unwrap();
    let none: [&str; 0] = [];
    for names in [&none[..], &[""], &[",", " "], &["  "]] {
        let error = toolcall_cli::allowlist(&registry, names).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("names no tool"), "{error}");
    }
    let one = toolcall_cli::allowlist(&registry, &[" balance "]).unwrap();
    assert_eq!(one.allowed().collect::<Vec<_>>(), ["balance"]);
    let every = toolcall_cli::every_tool(&registry);
    assert_eq!(every.allowed().collect::<Vec<_>>(), ["balance", "transfer"]);
}

/// Arguments written as an object in a replay line reach the pipeline as
/// the line's own text: a member twice, at any depth, is INVALID_JSON (not
/// the last one silently), and an object over 64 KiB is refused by size.
/// The audit keeps a cut record of the oversized one, and `report
/// --rejected-calls` writes the calls it kept whole, leaving that one out.
#[test]
fn replay_object_arguments_are_checked_as_the_text_the_line_has() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("object-form");
    let calls = dir.join("calls.jsonl");
    let audit = dir.join("audit.jsonl");
    let big = format!(
        "{{\"amount_cents\": 1, \"memo\": \"{}\"}}",
        "x".repeat(200_000)
    );
    std::fs::write(
        &calls,
        [
            r#"{"tool": "transfer", "arguments": {"amount_cents": 100, "amount_cents": 200}}"#.to_owned(),
            r#"{"tool": "transfer", "arguments": {"amount_cents": 100, "n": {"a": [{"b": 1, "b": 2}]}}}"#.to_owned(),
            format!(r#"{{"tool": "transfer", "arguments": {big}}}"#),
            r#"{"tool": "transfer", "arguments": "{\"amount_cents\": 7, \"amount_cents\": 8}"}"#.to_owned(),
            r#"{"tool": "transfer", "arguments": null}"#.to_owned(),
            r#"{"tool": "transfer", "arguments":   {"amount_cents": 5.5}  }"#.to_owned(),
        ]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect::<String>(),
    )
    .unwrap();
    run(
        &bank,
        &[
            "replay",
            calls.to_str().unwrap(),
            "--audit",
            audit.to_str().unwrap(),
        ],
    )
    .unwrap();
    assert_eq!(
        bank.transfers.load(Ordering::SeqCst),
        0,
        "nothing was moved"
    );
    let records: Vec<AuditRecord> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let codes: Vec<&str> = records.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(
        codes,
        [
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_JSON",
            "INVALID_ARGUMENTS"
        ]
    );
    // The audit keeps the arguments as the line wrote them.
    assert_eq!(
        records[0].arguments,
        r#"{"amount_cents": 100, "amount_cents": 200}"#
    );
    assert!(records[2].arguments.len() < 4096, "the big one is cut");
    assert_eq!(records[5].arguments, r#"{"amount_cents": 5.5}"#);

    let rejected = dir.join("rejected.jsonl");
    run(
        &bank,
        &[
            "report",
            audit.to_str().unwrap(),
            "--rejected-calls",
            rejected.to_str().unwrap(),
        ],
    )
    .unwrap();
    let lines: Vec<Value> = std::fs::read_to_string(&rejected)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let written: Vec<&str> = lines
        .iter()
        .map(|line| line["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(
        written,
        [
            r#"{"amount_cents": 100, "amount_cents": 200}"#,
            r#"{"amount_cents": 100, "n": {"a": [{"b": 1, "b": 2}]}}"#,
            r#"{"amount_cents": 7, "amount_cents": 8}"#,
            "null",
            r#"{"amount_cents": 5.5}"#,
        ],
        "the cut one is left out"
    );
}

/// Two members of the same name in a replay line itself (not in its
/// arguments) make it no replay call: an error naming the line, never the
/// last one silently.
#[test]
fn a_replay_line_with_a_member_twice_is_an_input_error_naming_the_line() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("line-twice");
    let calls = dir.join("calls.jsonl");
    for (line, member) in [
        (
            r#"{"tool": "balance", "tool": "transfer", "arguments": {"amount_cents": 1}}"#,
            "tool",
        ),
        (
            r#"{"tool": "transfer", "arguments": {"amount_cents": 1}, "arguments": {"amount_cents": 9}}"#,
            "arguments",
        ),
        (
            r#"{"tool": "transfer", "arguments": "{}", "confirmed": false, "confirmed": true}"#,
            "confirmed",
        ),
        (
            r#"{"tool": "transfer", "call_id": "a", "call_id": "b"}"#,
            "call_id",
        ),
    ] {
        std::fs::write(&calls, format!("\n{line}\n")).unwrap();
        let error = run(&bank, &["replay", calls.to_str().unwrap()]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let message = error.to_string();
        assert!(
            message.contains("line 2: not a replay call")
                && message.contains(&format!("duplicate field `{member}`")),
            "{message}"
        );
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
}

/// The codes of the audit records in this file.
fn audited_codes(audit: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(audit)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str::<AuditRecord>(line)
                .unwrap()
                .code
                .as_str()
                .to_owned()
        })
        .collect()
}

/// The policy the code sets, in `configure` as with `App::policy`, is the
/// ceiling: `--allow` narrows it (a transfer is TOOL_NOT_ALLOWED, nothing
/// moves), and naming a tool it does not allow is an error naming what it
/// allows, for every command.
#[test]
fn the_code_s_policy_is_a_ceiling_allow_only_narrows() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("ceiling");
    let calls = dir.join("calls.jsonl");
    let audit = dir.join("audit.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 1}}\n",
    )
    .unwrap();
    let (calls, audit) = (calls.to_str().unwrap(), audit.to_str().unwrap());
    let both = || Policy::new().allow(["transfer", "balance"]);
    app(&bank)
        .configure(move |builder| builder.policy(both()))
        .run_from([
            "bank", "--allow", "balance", "replay", calls, "--audit", audit,
        ])
        .unwrap();
    assert_eq!(audited_codes(audit.as_ref()), ["TOOL_NOT_ALLOWED"]);
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0, "nothing moved");

    let balance_only = || Policy::new().allow(["balance"]);
    for command in [&["replay", calls][..], &["definitions", "--format", "mcp"]] {
        for app in [
            app(&bank).policy(balance_only()),
            app(&bank).configure(move |builder| builder.policy(balance_only())),
        ] {
            let mut args = vec!["bank", "--allow", "transfer"];
            args.extend(command);
            let error = app.run_from(args).unwrap_err();
            assert_eq!(error.exit_code(), 2);
            assert_eq!(
                error.to_string(),
                "--allow names `transfer`, which the code does not allow caller `default`: \
                 --allow can only narrow the code's policy, which allows balance"
            );
        }
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0, "nothing moved");
}

/// `--caller` runs as one of the code's callers, under its policy; a
/// caller the code does not name is an error listing those it does, and a
/// `--limit` that is not NAME=VALUE a usage error.
#[test]
fn caller_picks_one_of_the_code_s_callers() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("caller");
    let calls = dir.join("calls.jsonl");
    let audit = dir.join("audit.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 1}}\n",
    )
    .unwrap();
    let (calls, audit) = (calls.to_str().unwrap(), audit.to_str().unwrap());
    let with_reader =
        || app(&bank).callers([Caller::new("reader", Policy::new().allow(["balance"]))]);
    with_reader()
        .run_from([
            "bank", "--caller", "reader", "replay", calls, "--audit", audit,
        ])
        .unwrap();
    let record: AuditRecord = serde_json::from_str(
        std::fs::read_to_string(audit)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (record.caller.as_str(), record.code.as_str()),
        ("reader", "TOOL_NOT_ALLOWED")
    );
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);

    let error = with_reader()
        .run_from(["bank", "--caller", "nobody", "replay", calls])
        .unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert_eq!(
        error.to_string(),
        "--caller `nobody` is no caller of bank: the callers are default, reader"
    );
    let error = with_reader()
        .run_from(["bank", "--limit", "much", "replay", calls])
        .unwrap_err();
    assert!(matches!(error, Error::Usage(_)), "{error}");
    assert_eq!(error.exit_code(), 2);
    assert!(error.to_string().contains("NAME=VALUE"), "{error}");
}

/// `--store sqlite:PATH`: a second run over the same file replays the
/// first's transfer instead of moving the money again. SQLite is an opt-in
/// feature (not a default): `cargo test -p toolcall-cli --features sqlite`
/// runs this test, as `cargo test --workspace` does (the `orders` example
/// turns the feature on).
#[cfg(feature = "sqlite")]
#[test]
fn store_sqlite_keeps_what_was_done_across_runs() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("store");
    let calls = dir.join("calls.jsonl");
    let audit = dir.join("audit.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 7}}\n",
    )
    .unwrap();
    let store = format!("sqlite:{}", dir.join("store.db").display());
    for _ in 0..2 {
        run(
            &bank,
            &[
                "replay",
                calls.to_str().unwrap(),
                "--store",
                &store,
                "--audit",
                audit.to_str().unwrap(),
            ],
        )
        .unwrap();
    }
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1, "moved once");
    let replayed: Vec<bool> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<AuditRecord>(line).unwrap().replayed)
        .collect();
    assert_eq!(replayed, [false, true]);
}

/// A store the command line cannot name is a usage error, whatever the
/// features.
#[test]
fn an_unknown_store_is_a_usage_error() {
    let bank = Arc::new(Bank::default());
    let error = run(&bank, &["replay", "--store", "redis://x"]).unwrap_err();
    assert_eq!(error.exit_code(), 2);
    assert!(
        error.to_string().contains(
            "unknown store `redis://x`: expected `memory`, `sqlite:PATH` or `postgres://...`"
        ),
        "{error}"
    );
}

/// `App::from_store`: the state is built from `--store`'s spec, once, and
/// only by a command that runs tools.
mod from_store {
    use super::*;
    use std::sync::Mutex;
    use toolcall_cli::StoreSpec;

    /// What the builder saw: the specs it was handed.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<StoreSpec>>>);

    fn app_from_store(seen: &Seen, bank: &Arc<Bank>, fail: bool) -> App<Bank> {
        let (seen, bank) = (seen.clone(), Arc::clone(bank));
        App::from_store(
            "bank",
            tools![transfer, balance].unwrap(),
            move |spec: StoreSpec| async move {
                seen.0.lock().unwrap().push(spec);
                if fail {
                    return Err("the ledger database is down".to_owned());
                }
                let state = Bank::default();
                state
                    .transfers
                    .store(bank.transfers.load(Ordering::SeqCst), Ordering::SeqCst);
                Ok(state)
            },
        )
    }

    #[test]
    fn static_commands_build_no_state_and_need_no_database() {
        let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
        let dir = scratch("from-store-static");
        let file = dir.join("tools.json");
        let lock = dir.join("tools.lock");
        // A Postgres nobody listens on: nothing is opened.
        let down = "postgres://postgres@127.0.0.1:1/none";
        for args in [
            vec![
                "definitions",
                "--format",
                "openai",
                "--store",
                down,
                "-o",
                file.to_str().unwrap(),
            ],
            vec!["lock", "--file", lock.to_str().unwrap(), "--store", down],
            vec!["check", "--file", lock.to_str().unwrap(), "--store", down],
        ] {
            app_from_store(&seen, &bank, true)
                .run_from(std::iter::once("bank").chain(args.iter().copied()))
                .unwrap_or_else(|error| panic!("{args:?}: {error}"));
        }
        assert!(seen.0.lock().unwrap().is_empty(), "no state was built");
        let tools: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(tools.as_array().unwrap().len(), 2);
    }

    /// `agent --serve-script` plays a model and runs no tool: it builds no
    /// state and opens no store, so it serves with the database down.
    #[cfg(feature = "agent")]
    #[test]
    fn the_scripted_model_builds_no_state() {
        use std::io::{Read as _, Write as _};
        use std::time::{Duration, Instant};

        let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
        let script = scratch("serve-script").join("script.json");
        std::fs::write(&script, r#"{"turns": [{"content": "Done."}]}"#).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let args: Vec<String> = [
            "bank",
            "agent",
            "--serve-script",
            script.to_str().unwrap(),
            "--listen",
            &addr,
            "--store",
            "postgres://postgres@127.0.0.1:1/none",
        ]
        .map(str::to_owned)
        .to_vec();
        let server = {
            let (seen, bank) = (seen.clone(), Arc::clone(&bank));
            // Serves until the process ends; its builder fails if called.
            std::thread::spawn(move || app_from_store(&seen, &bank, true).run_from(args))
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let answer = loop {
            assert!(
                !server.is_finished(),
                "it ended: {:?}",
                server.join().unwrap()
            );
            if let Ok(mut stream) = std::net::TcpStream::connect(&addr) {
                stream
                    .write_all(b"GET /requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).unwrap();
                break answer;
            }
            assert!(Instant::now() < deadline, "nothing listens on {addr}");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(seen.0.lock().unwrap().is_empty(), "no state was built");
    }

    /// Over `--store sqlite:` (an opt-in feature), a store a test can open
    /// with no server.
    #[cfg(feature = "sqlite")]
    #[test]
    fn a_command_that_runs_tools_builds_it_from_the_store_it_opens() {
        let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
        let dir = scratch("from-store-run");
        let calls = dir.join("calls.jsonl");
        let audit = dir.join("audit.jsonl");
        std::fs::write(
            &calls,
            "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 7}}\n\
             {\"tool\": \"balance\"}\n",
        )
        .unwrap();
        let db = dir.join("store.db");
        let store = format!("sqlite:{}", db.display());
        let args = [
            "bank",
            "replay",
            calls.to_str().unwrap(),
            "--store",
            &store,
            "--audit",
            audit.to_str().unwrap(),
        ];
        app_from_store(&seen, &bank, false).run_from(args).unwrap();
        assert_eq!(*seen.0.lock().unwrap(), [StoreSpec::Sqlite(db.clone())]);
        assert_eq!(
            audited_codes(&audit),
            ["OK", "OK"],
            "the state built ran the calls"
        );
        let log = std::fs::read_to_string(&audit).unwrap();

        // Its builder's error ends the command before any call, with its words.
        let error = app_from_store(&seen, &bank, true)
            .run_from(args)
            .unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert_eq!(
            error.to_string(),
            "cannot build the application's state: the ledger database is down"
        );
        assert_eq!(std::fs::read_to_string(&audit).unwrap(), log, "no call ran");
    }

    #[test]
    fn a_policy_only_configure_sets_is_refused_where_definitions_could_not_read_it() {
        let (seen, bank) = (Seen::default(), Arc::new(Bank::default()));
        let error = app_from_store(&seen, &bank, false)
            .configure(|builder| builder.policy(Policy::new().allow(["balance"])))
            .run_from(["bank", "replay", "/dev/null"])
            .unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains("App::policy"), "{error}");
        // Given with App::policy, it holds for both kinds of command.
        app_from_store(&seen, &bank, false)
            .policy(Policy::new().allow(["balance"]))
            .run_from(["bank", "replay", "/dev/null"])
            .unwrap();
    }
}

#[test]
fn the_pipeline_flags_only_narrow_the_code_s_settings() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("pipeline-flags");
    let calls = dir.join("calls.jsonl");
    let audit = dir.join("audit.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 1}}\n\
         {\"tool\": \"transfer\", \"arguments\": {\"amount_cents\": 2}}\n",
    )
    .unwrap();
    let (calls, audit_path) = (calls.to_str().unwrap(), audit.to_str().unwrap());
    run(
        &bank,
        &["replay", calls, "--max-steps", "1", "--audit", audit_path],
    )
    .unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1, "one step");
    assert_eq!(audited_codes(&audit), ["OK", "STEP_LIMIT"]);

    for (flags, says) in [
        (
            ["--max-steps", "11"],
            "--max-steps 11 is above the application's 10",
        ),
        (
            ["--max-retries", "3"],
            "--max-retries 3 is above the application's 2",
        ),
        (["--max-duplicate-calls", "4"], "above the application's 3"),
    ] {
        let error = run(&bank, &["replay", calls, flags[0], flags[1]]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert!(error.to_string().contains(says), "{error}");
    }
    let error = app(&bank)
        .configure(|builder| builder.approvals(toolcall::Approvals::Inbox))
        .run_from(["bank", "replay", calls, "--approvals", "host"])
        .unwrap_err();
    assert!(error.to_string().contains("--approvals host"), "{error}");
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1, "nothing more ran");
}

#[test]
fn the_about_line_is_the_application_s() {
    let bank = Arc::new(Bank::default());
    let Err(Error::Usage(help)) = app(&bank)
        .about("Moves money between the bank's accounts.")
        .run_from(["bank", "--help"])
    else {
        panic!("--help is a usage answer");
    };
    let help = help.render().to_string();
    assert!(
        help.contains("Moves money between the bank's accounts."),
        "{help}"
    );
    assert!(help.contains("--max-steps"), "{help}");
}

#[test]
fn admin_refuses_a_misspelt_name_and_names_the_closest_real_one() {
    let bank = Arc::new(Bank::default());
    for (args, closest) in [
        (
            &[
                "admin", "disable", "--caller", "defualt", "--reason", "loops",
            ][..],
            "did you mean `default`",
        ),
        (
            &["admin", "disable", "transfr", "--reason", "fraud"][..],
            "did you mean `transfer`",
        ),
        (
            &["admin", "enable", "transfr"][..],
            "did you mean `transfer`",
        ),
    ] {
        match run(&bank, args) {
            Err(Error::Input(message)) => assert!(message.contains(closest), "{args:?}: {message}"),
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

/// Closes an account, once a person approves.
#[tool(side_effect, high_risk)]
fn close(
    ctx: &Ctx<Bank>,
    /// The account.
    account: String,
) -> Result<Value, Rejection> {
    let _ = account;
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"closed": true}))
}

/// Every command that can ask a person takes `--approval-ttl`, after its
/// name or before it; `--help` stops the command before it runs.
#[test]
fn every_command_that_can_ask_a_person_takes_the_approval_ttl() {
    let bank = Arc::new(Bank::default());
    for command in ["replay", "mcp", "serve", "agent"] {
        for args in [
            [command, "--approval-ttl", "60", "--help"],
            ["--approval-ttl", "60", command, "--help"],
        ] {
            let Err(Error::Usage(usage)) = run(&bank, &args) else {
                panic!("{args:?}: not stopped by --help");
            };
            assert_eq!(
                usage.kind(),
                clap::error::ErrorKind::DisplayHelp,
                "{args:?}"
            );
            assert!(
                usage
                    .render()
                    .to_string()
                    .contains("--approval-ttl <SECONDS>"),
                "{args:?}"
            );
        }
    }
}

/// The approval's time to live as the store keeps it: over `--store
/// sqlite:` (an opt-in feature), which the test reads back.
#[cfg(feature = "sqlite")]
#[test]
fn the_questions_time_to_live_is_the_command_lines_to_set() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("ttl");
    let calls = dir.join("calls.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"close\", \"arguments\": {\"account\": \"A\"}}\n",
    )
    .unwrap();
    let db = dir.join("store.db");
    let store = format!("sqlite:{}", db.display());
    App::new("bank", tools![close].unwrap(), Arc::clone(&bank))
        .run_from([
            "bank",
            "replay",
            calls.to_str().unwrap(),
            "--store",
            &store,
            "--approval-ttl",
            "90",
            "--denial-ttl",
            "7200",
        ])
        .unwrap();
    let store = toolcall_sqlite::SqliteStore::open(&db).unwrap();
    let pending = block_on(toolcall::store::QuestionStore::pending_approvals(
        &store,
        toolcall::store::now_ms(),
        10,
    ))
    .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].expires_ms - pending[0].created_ms, 90_000);
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
}

/// A time to live of no time, negative, over 30 days or not whole seconds
/// is refused, whatever the store.
#[test]
fn a_time_to_live_of_no_time_is_refused() {
    let bank = Arc::new(Bank::default());
    let calls = scratch("ttl-refused").join("calls.jsonl");
    std::fs::write(
        &calls,
        "{\"tool\": \"close\", \"arguments\": {\"account\": \"A\"}}\n",
    )
    .unwrap();
    for bad in ["0", "-5", "2592001", "1.5"] {
        let flag = format!("--approval-ttl={bad}");
        let error = app(&bank)
            .run_from(["bank", "replay", calls.to_str().unwrap(), &flag])
            .unwrap_err();
        assert!(
            error.to_string().contains("no time to live"),
            "{bad}: {error}"
        );
    }
}

/// What the `deposit_part` tool holds: the bank's counter, nothing else.
struct Teller(Arc<Bank>);

/// Deposits, holding only the teller, a part of the bank.
#[tool(side_effect)]
fn deposit_part(ctx: &Ctx<Teller>) -> Result<Value, Rejection> {
    ctx.state.0.transfers.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"deposited": true}))
}

/// The application's bank, which the teller is made from.
struct Branch {
    bank: Arc<Bank>,
}

#[test]
fn an_application_declares_the_parts_its_tools_take() {
    let bank = Arc::new(Bank::default());
    let dir = scratch("parts");
    let calls = dir.join("calls.jsonl");
    std::fs::write(&calls, "{\"tool\": \"deposit_part\", \"arguments\": {}}\n").unwrap();
    let branch = Arc::new(Branch {
        bank: Arc::clone(&bank),
    });
    let app = || App::new("bank", tools![deposit_part].unwrap(), Arc::clone(&branch));
    let error = app()
        .run_from(["bank", "replay", calls.to_str().unwrap()])
        .unwrap_err();
    assert!(
        error.to_string().contains("DispatcherBuilder::part("),
        "{error}"
    );
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 0);
    app()
        .part(|branch: &Branch| Teller(Arc::clone(&branch.bank)))
        .run_from(["bank", "replay", calls.to_str().unwrap()])
        .unwrap();
    assert_eq!(bank.transfers.load(Ordering::SeqCst), 1);
}
