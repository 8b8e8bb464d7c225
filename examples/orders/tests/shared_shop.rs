//! The shop as a shared backend: `orders` processes on one SQLite file or
//! one Postgres database share the shop's orders, refunds and notes, not
//! only the pipeline's memory. What these tests count is read from the
//! shop's own tables (`orders_refunds`), never from the pipeline.
//!
//! The Postgres tests need `TOOLCALL_POSTGRES_URL` (CI sets it); without it
//! they say loudly that they were skipped. Each works in a database of its
//! own and drops it.

#[path = "support/refunds.rs"]
mod refunds;
#[path = "support/fresh_database.rs"]
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use orders::{BackendError, Shop};
use serde_json::{Value, json};
use toolcall_testkit::run::{self, one_thread as runtime, unique};

use refunds::{postgres_refunds, sqlite_refunds};

/// A scratch directory of this test process, emptied first.
fn scratch(name: &str) -> PathBuf {
    run::fresh_dir(&format!("orders-shared-{name}"))
}

/// `orders replay -` over `store` in conversation `session`, with `calls`
/// written to its standard input (closed after them).
fn spawn_replay(store: &str, session: &str, flags: &[&str], calls: &[Value]) -> Child {
    spawn_replay_env(store, session, flags, calls, &[])
}

fn spawn_replay_env(
    store: &str,
    session: &str,
    flags: &[&str],
    calls: &[Value],
    env: &[(&str, &str)],
) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orders"));
    command
        .args([
            "replay",
            "-",
            "--retry-backoff-ms",
            "0",
            "--store",
            store,
            "--session-id",
            session,
            "--allow",
            "get_order,refund_order",
        ])
        .args(flags);
    for (name, value) in env {
        command.env(name, value);
    }
    let input: String = calls.iter().map(|c| format!("{c}\n")).collect();
    run::spawn_fed(&mut command, &input)
}

/// The answers a replay printed, one a line; the process must succeed.
fn answers(child: Child) -> Vec<Value> {
    run::printed_json(child.wait_with_output().unwrap())
}

fn refund(amount_cents: i64) -> Value {
    let args = json!({"order_id": "ORD-1001", "amount_cents": amount_cents, "currency": "BRL", "reason": "damaged"});
    json!({"tool": "refund_order", "arguments": args.to_string(), "confirmed": true})
}

fn code(answer: &Value) -> &str {
    answer.get("code").and_then(Value::as_str).unwrap_or("OK")
}

/// Three processes refunding 7000 of ORD-1001 (12000) at once, each in a
/// conversation of its own: one refund fits, so exactly one answers ok and
/// two AMOUNT_EXCEEDS_REFUNDABLE.
fn three_processes_race(store: &str) -> Vec<Value> {
    let children: Vec<Child> = (0..3)
        .map(|i| spawn_replay(store, &unique(&format!("race{i}")), &[], &[refund(7000)]))
        .collect();
    let answers: Vec<Value> = children
        .into_iter()
        .flat_map(|child| {
            let answers = answers(child);
            assert_eq!(answers.len(), 1, "{answers:?}");
            answers
        })
        .collect();
    let mut codes: Vec<&str> = answers.iter().map(code).collect();
    codes.sort_unstable();
    assert_eq!(
        codes,
        [
            "AMOUNT_EXCEEDS_REFUNDABLE",
            "AMOUNT_EXCEEDS_REFUNDABLE",
            "OK"
        ],
        "{answers:?}"
    );
    let ok = answers.iter().find(|a| code(a) == "OK").unwrap();
    assert_eq!(ok["data"]["remaining_refundable_cents"], 5000, "{ok}");
    answers
}

#[test]
fn three_processes_on_one_sqlite_file_refund_ord_1001_once() {
    let dir = scratch("race");
    let path = dir.join("shop.db");
    three_processes_race(&format!("sqlite:{}", path.display()));
    assert_eq!(
        sqlite_refunds(&path),
        (1, 7000),
        "one refund row, 7000 refunded"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Shop handles on one file, as separate processes would hold them, race
/// refunds of ORD-1001 straight at the backend, with no pipeline (no
/// resource lock, no check) in between: the transaction alone keeps the
/// refunded sum within the total.
#[test]
fn racing_handles_never_refund_a_sqlite_order_beyond_its_total() {
    let dir = scratch("handles");
    let path = dir.join("shop.db");
    let outcomes: Vec<Result<i64, BackendError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let path = &path;
                scope.spawn(move || {
                    let shop = Shop::open_sqlite(path).unwrap();
                    (0..5)
                        .map(|k| shop.refund("ORD-1001", 1000, &format!("key-{t}-{k}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    // 20 refunds of 1000 on 12000: 12 fit, 8 are refused.
    let applied = outcomes.iter().filter(|o| o.is_ok()).count();
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Err(BackendError::ExceedsRefundable { .. })))
        .count();
    assert_eq!((applied, refused), (12, 8), "{outcomes:?}");
    assert_eq!(sqlite_refunds(&path), (12, 12_000));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The backend honours the idempotency key: the same key applied twice
/// answers the first refund and inserts nothing; the key on another refund
/// is refused.
#[test]
fn a_sqlite_shop_applies_a_key_once() {
    let dir = scratch("key");
    let path = dir.join("shop.db");
    let first = Shop::open_sqlite(&path).unwrap();
    let second = Shop::open_sqlite(&path).unwrap();
    assert_eq!(first.refund("ORD-1001", 7000, "k1"), Ok(5000));
    assert_eq!(second.refund("ORD-1001", 1000, "k2"), Ok(4000));
    assert_eq!(
        second.refund("ORD-1001", 7000, "k1"),
        Ok(5000),
        "the first answer"
    );
    assert_eq!(
        second.refund("ORD-1002", 7000, "k1"),
        Err(BackendError::KeyReused)
    );
    assert_eq!(sqlite_refunds(&path), (2, 8000));
    let runtime = runtime();
    let refunds = runtime.block_on(first.refunds()).unwrap();
    let keys: Vec<(&str, i64, i64)> = refunds
        .iter()
        .map(|r| {
            (
                r.idempotency_key.as_str(),
                r.amount_cents,
                r.remaining_cents,
            )
        })
        .collect();
    assert_eq!(keys, [("k1", 7000, 5000), ("k2", 1000, 4000)]);
    let order = runtime
        .block_on(first.load_order("ORD-1001"))
        .unwrap()
        .unwrap();
    assert_eq!((order.total_cents, order.refunded_cents), (12_000, 8000));
    // The synchronous view reads the file too.
    assert_eq!(first.order("ORD-1001").unwrap().refunded_cents, 8000);
    assert_eq!(first.applied_refunds(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The answer of a committed refund is lost and nothing retries it: the
/// call is in doubt, but the shop holds the refund. A second process's
/// identical call (same conversation, same key) ends with the one refund.
#[test]
fn a_lost_answer_in_one_process_is_one_refund_after_the_next() {
    let dir = scratch("lost");
    let path = dir.join("shop.db");
    let store = format!("sqlite:{}", path.display());
    let session = unique("lost");
    let lost = answers(spawn_replay(
        &store,
        &session,
        &["--lose-next-response", "1", "--max-retries", "0"],
        &[refund(7000)],
    ));
    assert_eq!(code(&lost[0]), "UPSTREAM_UNAVAILABLE", "{lost:?}");
    assert_eq!(lost[0]["data"]["in_doubt"], true, "{lost:?}");
    assert_eq!(
        sqlite_refunds(&path),
        (1, 7000),
        "committed before the answer was lost"
    );
    // `refund_order`'s backend honours the key (`idempotent_backend`): the
    // call in doubt runs again under its key, and the shop answers the
    // refund it holds instead of making another.
    let again = answers(spawn_replay(&store, &session, &[], &[refund(7000)]));
    assert_eq!(code(&again[0]), "OK", "{again:?}");
    assert_eq!(
        again[0]["data"]["remaining_refundable_cents"], 5000,
        "{again:?}"
    );
    assert_eq!(sqlite_refunds(&path), (1, 7000), "{again:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads `child`'s standard error until the line `crash point: NAME`, for
/// at most 60 seconds; the lines read are returned if it never comes.
fn wait_for_crash_point(child: &mut Child, name: &str) -> Result<(), Vec<String>> {
    let read = run::lines(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let wanted = format!("crash point: {name}");
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match read.recv_timeout(left) {
            Ok(line) if line == wanted => return Ok(()),
            Ok(line) => seen.push(line),
            Err(_) => return Err(seen),
        }
    }
}

/// `ORDERS_CRASH_AT` stops the process at the shop's crash point, which
/// says so; killed there (SIGKILL), the refund it committed is in the
/// table, and one it had not committed is not.
#[test]
fn a_process_killed_at_a_refund_crash_point_leaves_what_it_committed() {
    for (point, rows) in [("refund_after_commit", 1), ("refund_before_commit", 0)] {
        let dir = scratch(point);
        let path = dir.join("shop.db");
        let mut child = spawn_replay_env(
            &format!("sqlite:{}", path.display()),
            &unique(point),
            &[],
            &[refund(7000)],
            &[("ORDERS_CRASH_AT", point)],
        );
        let reached = wait_for_crash_point(&mut child, point);
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            reached,
            Ok(()),
            "{point}: the process never said it stopped"
        );
        assert!(!status.success(), "{point}: killed, not finished");
        assert_eq!(
            sqlite_refunds(&path),
            (rows, rows * 7000),
            "{point}: what the killed process committed"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn note(text: &str) -> Value {
    json!({"tool": "add_note", "arguments": {"order_id": "ORD-1002", "text": text}})
}

fn sqlite_notes(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT COUNT(*) FROM orders_notes", [], |row| row.get(0))
        .unwrap()
}

/// `add_note` is a plain insert into the shared table: a second process's
/// note is the shop's second; killed at its crash points, the note is
/// there if it was committed and not if it was not.
#[test]
fn notes_are_shared_and_a_killed_process_leaves_what_it_committed() {
    let dir = scratch("notes");
    let path = dir.join("shop.db");
    let store = format!("sqlite:{}", path.display());
    let allow = ["--allow", "add_note"];
    for (i, expected) in [(0, 1), (1, 2)] {
        let added = answers(spawn_replay(
            &store,
            &unique(&format!("note{i}")),
            &allow,
            &[note("checked")],
        ));
        assert_eq!(added[0]["data"]["notes"], expected, "{added:?}");
    }
    assert_eq!(sqlite_notes(&path), 2);
    for (point, notes) in [("note_after_commit", 3), ("note_before_commit", 3)] {
        let mut child = spawn_replay_env(
            &store,
            &unique(point),
            &allow,
            &[note(point)],
            &[("ORDERS_CRASH_AT", point)],
        );
        let reached = wait_for_crash_point(&mut child, point);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            reached,
            Ok(()),
            "{point}: the process never said it stopped"
        );
        assert_eq!(sqlite_notes(&path), notes, "{point}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The demo's closing line reads the backend: run twice on one file, the
/// second run's refund is replayed, and the shop still holds one.
#[test]
fn the_demo_twice_on_one_sqlite_file_reports_the_one_refund_of_the_shop() {
    let dir = scratch("demo");
    let store = format!("sqlite:{}", dir.join("shop.db").display());
    for _ in 0..2 {
        let output = Command::new(env!("CARGO_BIN_EXE_orders"))
            .args(["--yes", "--store", &store])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(output.status.success());
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            text.contains("The backend applied 1 refund(s); ORD-1001 has 9410 cents left"),
            "{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_crash_point_is_a_usage_error() {
    let dir = scratch("unknown-point");
    let child = spawn_replay_env(
        &format!("sqlite:{}", dir.join("shop.db").display()),
        "unknown-point",
        &[],
        &[],
        &[("ORDERS_CRASH_AT", "refund_after_comit")],
    );
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`refund_after_comit` is not a crash point"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------- Postgres

fn postgres_url() -> Option<String> {
    run::postgres_url("the shop")
}

use support::FreshDatabase;

/// A plain connection to `url`, driven on the current runtime.
async fn plain_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

#[test]
fn three_processes_on_one_postgres_database_refund_ord_1001_once() {
    let Some(url) = postgres_url() else { return };
    let runtime = runtime();
    let database = FreshDatabase::create(&url, "race");
    three_processes_race(&database.url);
    assert_eq!(
        runtime.block_on(postgres_refunds(&database.url)),
        (1, 7000),
        "one refund row, 7000 refunded"
    );
    drop(database);
}

/// Killed (SIGKILL) at each point of a refund on Postgres, where the shop is
/// on the store's pool and writes the refund in the call's transaction:
/// nothing of the refund is kept until the call's one commit, which keeps
/// the refund and the call's recorded result together (so the two counts
/// move as one); and the same call made again by the next process (same
/// conversation, same arguments: the same key) leaves exactly one refund.
#[test]
fn a_refund_killed_on_postgres_commits_with_its_result_or_not_at_all() {
    let Some(url) = postgres_url() else { return };
    let runtime = runtime();
    let database = FreshDatabase::create(&url, "crash");
    let completed = || {
        runtime.block_on(async {
            let client = plain_client(&database.url).await;
            let row = client
                .query_one(
                    "SELECT COUNT(*) FROM toolcall_records WHERE state = 'completed'",
                    &[],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0)
        })
    };
    let mut refunds = 0;
    for (point, kept) in [
        ("refund_before_commit", 0),
        ("refund_after_commit", 0),
        ("before_complete", 0),
        ("after_complete", 1),
    ] {
        let session = unique(point);
        // The killed process's claim and lock end soon after it.
        let flags = ["--claim-lease-ms", "1000"];
        let mut child = spawn_replay_env(
            &database.url,
            &session,
            &flags,
            &[refund(1000)],
            &[("ORDERS_CRASH_AT", point)],
        );
        let reached = wait_for_crash_point(&mut child, point);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            reached,
            Ok(()),
            "{point}: the process never said it stopped"
        );
        refunds += kept;
        assert_eq!(
            runtime.block_on(postgres_refunds(&database.url)),
            (refunds, refunds * 1000),
            "{point}: what the killed process committed"
        );
        assert_eq!(completed(), refunds, "{point}: the results kept with them");

        let again = answers(spawn_replay(
            &database.url,
            &session,
            &flags,
            &[refund(1000)],
        ));
        assert_eq!(code(&again[0]), "OK", "{point}: {again:?}");
        refunds += 1 - kept;
        assert_eq!(
            runtime.block_on(postgres_refunds(&database.url)),
            (refunds, refunds * 1000),
            "{point}: the same call again refunds once in all"
        );
        assert_eq!(completed(), refunds, "{point}: {again:?}");
    }
    drop(database);
}

/// Handles connected at once (each creating the tables if missing) race
/// refunds straight at the backend: the order's row lock alone keeps the
/// refunded sum within the total, and a key applies once.
#[test]
fn racing_handles_never_refund_a_postgres_order_beyond_its_total() {
    let Some(url) = postgres_url() else { return };
    let runtime = runtime();
    runtime.block_on(async {
        let database = FreshDatabase::create(&url, "handles");
        let shops = futures_join_all((0..4).map(|_| Shop::connect_postgres(&database.url))).await;
        let shops: Vec<Shop> = shops.into_iter().map(Result::unwrap).collect();
        let outcomes = futures_join_all(shops.iter().enumerate().flat_map(|(t, shop)| {
            (0..5).map(move |k| async move {
                shop.apply_refund("ORD-1001", 1000, &format!("key-{t}-{k}"))
                    .await
            })
        }))
        .await;
        let applied = outcomes.iter().filter(|o| o.is_ok()).count();
        let refused = outcomes
            .iter()
            .filter(|o| matches!(o, Err(BackendError::ExceedsRefundable { .. })))
            .count();
        assert_eq!((applied, refused), (12, 8), "{outcomes:?}");
        assert_eq!(postgres_refunds(&database.url).await, (12, 12_000));

        // The same key again: the first refund's answer, nothing inserted.
        let first = shops[1].refunds().await.unwrap().remove(0);
        assert_eq!(
            shops[2]
                .apply_refund("ORD-1001", 1000, &first.idempotency_key)
                .await,
            Ok(first.remaining_cents)
        );
        assert_eq!(
            shops[2]
                .apply_refund("ORD-1002", 1000, &first.idempotency_key)
                .await,
            Err(BackendError::KeyReused)
        );
        assert_eq!(shops[3].refund_count().await, Ok(12));
        let order = shops[0].load_order("ORD-1001").await.unwrap().unwrap();
        assert_eq!(order.refunded_cents, 12_000);
        drop(shops);
        drop(database);
    });
}

/// Polls every future to its end, on this task: the handles' queries
/// interleave on the one thread as they would in separate processes.
async fn futures_join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    let mut pending: Vec<_> = futures.into_iter().enumerate().collect();
    std::future::poll_fn(|cx| {
        pending.retain_mut(|(i, future)| match future.as_mut().poll(cx) {
            std::task::Poll::Ready(output) => {
                outputs[*i] = Some(output);
                false
            }
            std::task::Poll::Pending => true,
        });
        if pending.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outputs.into_iter().map(Option::unwrap).collect()
}

/// Server processes connected to `url`'s database, this connection aside.
async fn postgres_connections(url: &str) -> i64 {
    plain_client(url)
        .await
        .query_one(
            "SELECT COUNT(*) FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// One process, one pool: the shop's tables are read and written on the
/// Postgres store's own pool, so that a process holds at most the
/// connection string's `pool_max_size` connections (a hosted Postgres
/// counts them), not that many for the store and as many again for the
/// application. A read and a refund, each needing a connection of the
/// store and one of the shop, with the process still running.
#[test]
fn the_shop_and_the_store_hold_one_pool_of_pool_max_size_connections() {
    let Some(url) = postgres_url() else { return };
    let runtime = runtime();
    let database = FreshDatabase::create(&url, "onepool");
    let separator = if database.url.contains('?') { '&' } else { '?' };
    let store = format!("{}{separator}pool_max_size=2", database.url);
    let mut child = Command::new(env!("CARGO_BIN_EXE_orders"))
        .args([
            "replay",
            "-",
            "--store",
            &store,
            "--session-id",
            &unique("onepool"),
        ])
        .args(["--allow", "get_order,refund_order"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the orders binary runs");
    let mut stdin = child.stdin.take().unwrap();
    let get = json!({"tool": "get_order", "arguments": r#"{"order_id": "ORD-1001"}"#});
    writeln!(stdin, "{get}\n{}", refund(3000)).unwrap();
    stdin.flush().unwrap();
    let answered = run::lines(child.stdout.take().unwrap());
    let answers: Vec<Value> = (0..2)
        .map(|_| {
            let line = answered
                .recv_timeout(Duration::from_secs(60))
                .expect("an answer within 60 s");
            serde_json::from_str(&line).unwrap()
        })
        .collect();
    let connections = runtime.block_on(postgres_connections(&database.url));
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(
        answers.iter().map(code).collect::<Vec<_>>(),
        ["OK", "OK"],
        "{answers:?}"
    );
    assert_eq!(answers[1]["data"]["remaining_refundable_cents"], 9000);
    assert!(
        (1..=2).contains(&connections),
        "the process held {connections} connections, its pool_max_size 2"
    );
    assert_eq!(runtime.block_on(postgres_refunds(&database.url)), (1, 3000));
    drop(database);
}
