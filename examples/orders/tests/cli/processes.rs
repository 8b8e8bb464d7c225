//! The demo and processes sharing a store: refunds once over SQLite and
//! Postgres, the inbox's address, an operator's stop seen by every process,
//! and the questions' time to live.

use super::*;

#[test]
fn the_demo_declines_without_a_terminal_and_refunds_once_with_yes() {
    let declined = orders(&[], "");
    assert!(declined.status.success());
    let text = String::from_utf8_lossy(&declined.stdout);
    assert!(text.contains("declined"), "{text}");
    assert!(text.contains("The backend applied 0 refund(s)"), "{text}");

    let approved = orders(&["--yes"], "");
    let text = String::from_utf8_lossy(&approved.stdout);
    assert!(text.contains("\"replayed\":true"), "{text}");
    assert!(
        text.contains("The backend applied 1 refund(s); ORD-1001 has 9410 cents left"),
        "{text}"
    );
}

#[test]
fn two_processes_on_one_sqlite_store_replay_instead_of_refunding_twice() {
    let dir = std::env::temp_dir().join(format!("orders-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite:{}", dir.join("store.db").display());
    let calls = [refund(json!(2590), true)];
    let first = replay(&["--store", &store], &calls);
    let second = replay(&["--store", &store], &calls);
    assert_eq!(outcomes(&first), [(true, "OK".to_owned(), false)]);
    assert_eq!(
        outcomes(&second),
        [(true, "OK".to_owned(), true)],
        "the second process replays"
    );
    assert_eq!(second[0]["data"], first[0]["data"]);
    let bad = orders(&["replay", "-", "--store", "redis://x"], "");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("expected `memory`, `sqlite:PATH` or `postgres://...`")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two `orders replay` processes at the same moment on one Postgres: each
/// call runs in exactly one of them; the other answers `replayed: true`.
#[test]
fn two_processes_on_one_postgres_run_each_call_once() {
    let Some(url) = run::postgres_url("the two-process test") else {
        return;
    };
    // A database of the test's own: the shop's refunds live there too.
    let database = support::FreshDatabase::create(&url, "cli_two_processes");
    let url = database.url.clone();
    let session = run::unique("cli");
    let calls: Vec<Value> = (1..=6)
        .map(|cents| refund(json!(cents * 100), true))
        .collect();
    let input: String = calls.iter().map(|c| format!("{c}\n")).collect();
    let args = [
        "replay",
        "-",
        "--retry-backoff-ms",
        "0",
        "--max-steps",
        "100",
        "--store",
        &url,
        "--session-id",
        &session,
    ];
    let (a, b) = (spawn_orders(&args, &input), spawn_orders(&args, &input));
    let (a, b) = (
        results(a.wait_with_output().unwrap()),
        results(b.wait_with_output().unwrap()),
    );
    assert_eq!((a.len(), b.len()), (6, 6));
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (x["ok"].as_bool(), y["ok"].as_bool()),
            (Some(true), Some(true)),
            "{x} {y}"
        );
        let replays = [x, y].iter().filter(|r| r["replayed"] == true).count();
        assert_eq!(replays, 1, "exactly one of the two ran it: {x} {y}");
        assert_eq!(x["data"], y["data"]);
    }
}

/// `serve` says where the inbox is on standard error, as every notice is:
/// standard output is for results, and `serve` has none.
#[test]
fn the_inbox_s_address_is_a_notice_on_standard_error() {
    use std::io::{BufRead as _, BufReader};
    let dir = scratch("serve-streams");
    let store = format!("sqlite:{}", dir.join("store.db").display());
    let args = ["serve", "--listen", "127.0.0.1:0", "--store", &store];
    let mut child = spawn_orders(&args, "");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let first = BufReader::new(stderr).lines().next();
        let _ = tx.send(first);
    });
    let first = rx.recv_timeout(std::time::Duration::from_secs(20));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = match first {
        Ok(Some(Ok(line))) => line,
        other => panic!("no line on stderr ({other:?}); stdout: {stdout:?}"),
    };
    assert!(
        first.starts_with("orders inbox: http://127.0.0.1:"),
        "{first}"
    );
    assert!(first.contains("/?token="), "{first}");
    assert_eq!(stdout, "", "nothing on standard output");
}

/// The operators' commands from one process, obeyed by another over the
/// same store on its next call: the policy file checks, a stop and its
/// reason, a bad file refused whole, the history.
#[test]
fn an_operator_stops_refunds_for_every_process_over_the_store() {
    let dir = scratch("admin");
    let store = format!("sqlite:{}", dir.join("store.db").display());
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/policy.toml");
    let checked = orders(&["admin", "policy", "check", policy], "");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    let stop = orders(
        &[
            "admin",
            "disable",
            "refund_order",
            "--reason",
            "fraud wave",
            "--by",
            "oncall",
            "--store",
            &store,
        ],
        "",
    );
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let stopped = replay(&["--store", &store], &[refund(json!(2590), true)]);
    assert_eq!(stopped[0]["code"], "STOPPED", "{stopped:?}");
    assert_eq!(stopped[0]["data"]["reason"], "fraud wave");

    let enable = orders(&["admin", "enable", "refund_order", "--store", &store], "");
    assert!(
        enable.status.success(),
        "{}",
        String::from_utf8_lossy(&enable.stderr)
    );
    let loaded = orders(&["admin", "policy", "load", policy, "--store", &store], "");
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    // The loaded rule approves a small refund nobody confirmed; the
    // lowered limit refuses a large one.
    let after = replay(
        &["--store", &store],
        &[refund(json!(900), false), refund(json!(11000), true)],
    );
    assert_eq!(
        outcomes(&after)[0],
        (true, "OK".to_owned(), false),
        "{after:?}"
    );
    assert_eq!(after[1]["code"], "POLICY_LIMIT", "{after:?}");

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[callers.default]\nallow = [\"refund_ordr\"]\n").unwrap();
    let refused = orders(
        &[
            "admin",
            "policy",
            "load",
            bad.to_str().unwrap(),
            "--store",
            &store,
        ],
        "",
    );
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("did you mean `refund_order`"), "{said}");

    let history = orders(&["admin", "history", "--store", &store], "");
    let history = String::from_utf8_lossy(&history.stdout);
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 3, "{history}");
    assert!(
        lines[2].contains("oncall") && lines[2].contains("stopped tool refund_order: fraud wave")
    );
    assert!(lines[0].contains("loaded the policy from"), "{history}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_questions_time_to_live_is_a_flag() {
    let dir = scratch("ttl");
    let db = dir.join("store.db");
    let store = format!("sqlite:{}", db.display());
    let asked = replay(
        &[
            "--store",
            &store,
            "--approvals",
            "inbox",
            "--approval-ttl",
            "90",
        ],
        &[refund(json!(2590), false)],
    );
    assert_eq!(asked[0]["code"], "CONFIRMATION_REQUIRED", "{asked:?}");
    let store = toolcall_sqlite::SqliteStore::open(&db).unwrap();
    let pending = run::block_on(toolcall::store::QuestionStore::pending_approvals(
        &store,
        toolcall::store::now_ms(),
        10,
    ))
    .unwrap();
    assert_eq!(pending[0].expires_ms - pending[0].created_ms, 90_000);
    let refused = orders(&["replay", "-", "--approval-ttl", "0"], "");
    assert_eq!(refused.status.code(), Some(2));
}
