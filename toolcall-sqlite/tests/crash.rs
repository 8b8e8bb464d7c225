//! A process is killed (SIGKILL) after the backend committed a refund and
//! before the dispatcher recorded the result. Restarted on the same SQLite
//! file, the same call runs again under the same idempotency key, and the
//! backend, which deduplicates by key, still holds exactly one refund.
//!
//! The test runs this same binary as the child process: `child` is the
//! program, run only when the parent asks for it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension};
use serde_json::{Value, json};
use toolcall::{Call, Ctx, Dispatcher, ToolError, tool, tools};
use toolcall_sqlite::SqliteStore;

const DB: &str = "TOOLCALL_CRASH_DB";
const HANG: &str = "TOOLCALL_CRASH_HANG";
const CALL: &str = r#"{"order_id": "ORD-1001", "amount_cents": 2590}"#;

/// A payment backend that deduplicates by idempotency key, in the same file:
/// the tool says so (`idempotent_backend`), so a call whose outcome is
/// unknown runs again under its key instead of waiting for a person.
struct Ledger {
    conn: Mutex<Connection>,
    hang_after_commit: bool,
}

/// Refunds an order, in cents.
#[tool(side_effect, idempotent_backend, timeout_ms = 300)]
async fn refund(
    ctx: &Ctx<Ledger>,
    /// The order's id.
    order_id: String,
    /// The amount to refund, in cents.
    amount_cents: i64,
) -> Result<Value, ToolError> {
    {
        let conn = ctx.state.conn.lock().unwrap();
        conn.execute(
            "INSERT OR IGNORE INTO ledger (key, order_id, amount_cents) VALUES (?1, ?2, ?3)",
            rusqlite::params![&*ctx.idempotency_key, order_id, amount_cents],
        )
        .map_err(ToolError::transient)?;
    }
    if ctx.state.hang_after_commit {
        // Committed; the answer never comes back. The parent kills us here.
        println!("committed");
        std::thread::sleep(Duration::from_secs(3600));
    }
    Ok(json!({"order_id": order_id, "refunded_cents": amount_cents}))
}

fn ledger(path: &Path, hang_after_commit: bool) -> Ledger {
    let conn = Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS ledger (key TEXT PRIMARY KEY, order_id TEXT, amount_cents INTEGER)")
        .unwrap();
    Ledger {
        conn: Mutex::new(conn),
        hang_after_commit,
    }
}

/// The child program: one refund call through a dispatcher on the file.
#[test]
#[ignore = "run by `killed_after_commit_then_restarted_still_refunds_once` as a separate process"]
fn child() {
    let path = PathBuf::from(std::env::var(DB).expect("run by the parent test"));
    let hang = std::env::var(HANG).is_ok();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dispatcher = Dispatcher::builder(tools![refund].unwrap(), Arc::new(ledger(&path, hang)))
        .store(SqliteStore::open(&path).unwrap())
        .max_retries(0)
        .retry_backoff(Duration::ZERO)
        .build()
        .unwrap();
    let result = runtime.block_on(dispatcher.execute(Call::new("refund", CALL).session("s")));
    println!("{}", result.to_model_text());
}

fn spawn_child(path: &Path, hang: bool) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DB, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if hang {
        command.env(HANG, "1");
    }
    command
}

fn refunds(path: &Path) -> i64 {
    let conn = Connection::open(path).unwrap();
    conn.query_row("SELECT COUNT(*) FROM ledger", [], |row| row.get(0))
        .optional()
        .unwrap()
        .unwrap_or(0)
}

fn record_state(path: &Path) -> Option<String> {
    let conn = Connection::open(path).unwrap();
    conn.query_row("SELECT state FROM toolcall_records", [], |row| row.get(0))
        .optional()
        .unwrap()
}

#[test]
fn killed_after_commit_then_restarted_still_refunds_once() {
    let dir = std::env::temp_dir().join(format!("toolcall-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("shop.db");

    // First process: the backend commits, then the process is killed.
    let mut first = spawn_child(&path, true).spawn().unwrap();
    let started = Instant::now();
    while refunds_or_zero(&path) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the first process never committed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap(); // SIGKILL on Unix: no destructor, no flush, nothing recorded
    first.wait().unwrap();
    assert_eq!(refunds(&path), 1, "the backend committed once");
    assert_eq!(
        record_state(&path).as_deref(),
        Some("in_flight"),
        "the dispatcher never recorded the result"
    );

    // Second process: the same call. It waits out the dead process's lease,
    // runs again under the same key, and the backend recognises it.
    let second = spawn_child(&path, false).output().unwrap();
    let text = String::from_utf8_lossy(&second.stdout);
    // libtest prints `test child ... ` before the child's own line.
    let start = text
        .find("{\"ok\"")
        .unwrap_or_else(|| panic!("no result in {text}"));
    let line = text[start..].lines().next().unwrap_or_default();
    let result: Value = serde_json::from_str(line).unwrap();
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(refunds(&path), 1, "still exactly one refund");
    assert_eq!(record_state(&path).as_deref(), Some("completed"));

    // Third process: now a replay, not a run.
    let third = spawn_child(&path, false).output().unwrap();
    assert!(String::from_utf8_lossy(&third.stdout).contains("\"replayed\":true"));
    assert_eq!(refunds(&path), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Zero until the child has created the ledger.
fn refunds_or_zero(path: &Path) -> i64 {
    if !path.exists() {
        return 0;
    }
    let Ok(conn) = Connection::open(path) else {
        return 0;
    };
    conn.query_row("SELECT COUNT(*) FROM ledger", [], |row| row.get(0))
        .unwrap_or(0)
}
