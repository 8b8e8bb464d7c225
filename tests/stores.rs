//! One conformance suite for the `Store` trait, run against every store:
//! the in-memory default and SQLite (in memory, and on a file shared by two
//! handles, as two processes would share it). A store added later runs the
//! same suite.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolcall::store::{Binding, Claim, PendingApproval, TakeApproval, now_ms};
use toolcall::{Call, Ctx, Dispatcher, MemoryStore, Rejection, Store, ToolResult, tool, tools};
use toolcall_sqlite::SqliteStore;

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn temp_db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolcall-stores-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.db")
}

fn result(n: i64) -> ToolResult {
    ToolResult::success("pay", json!({"n": n}).as_object().unwrap().clone())
}

fn approval(id: &str, expires_ms: u64) -> PendingApproval {
    PendingApproval {
        id: id.to_owned(),
        session: "s".into(),
        caller: "c".into(),
        tool: "pay".into(),
        digest: "d1".into(),
        arguments: json!({"cents": 1}),
        step: 3,
        created_ms: now_ms(),
        expires_ms,
    }
}

const BOUND: Binding<'static> = Binding {
    session: "s",
    caller: "c",
    tool: Some("pay"),
    digest: Some("d1"),
};

/// The whole contract, on one store; `other` is a second handle on the same
/// data (the same store, or another connection to the same file).
async fn conformance(store: &impl Store, other: &impl Store) {
    // Counters are per session and per key, and shared by handles.
    assert_eq!(store.next_step("a").await.unwrap(), 1);
    assert_eq!(other.next_step("a").await.unwrap(), 2);
    assert_eq!(store.next_step("b").await.unwrap(), 1);
    assert_eq!(store.count_call("k1").await.unwrap(), 1);
    assert_eq!(other.count_call("k1").await.unwrap(), 2);
    assert_eq!(store.count_call("k2").await.unwrap(), 1);

    // One claim wins; the lease ends it; release frees it.
    let now = now_ms();
    assert_eq!(
        store.claim("k1", now, 1_000).await.unwrap(),
        Claim::Acquired
    );
    assert_eq!(
        other.claim("k1", now, 1_000).await.unwrap(),
        Claim::InFlight
    );
    assert_eq!(
        other.claim("k1", now + 1_001, 1_000).await.unwrap(),
        Claim::Acquired,
        "lease ran out"
    );
    other.release("k1").await.unwrap();
    assert_eq!(
        store.claim("k1", now, 1_000).await.unwrap(),
        Claim::Acquired,
        "released: free again"
    );
    assert_eq!(store.completed("k1").await.unwrap(), None);

    // A completed record is the answer from then on, and release keeps it.
    store.complete("k1", &result(7)).await.unwrap();
    assert_eq!(other.completed("k1").await.unwrap(), Some(result(7)));
    assert_eq!(
        other.claim("k1", now + 10_000_000, 1_000).await.unwrap(),
        Claim::Completed(result(7))
    );
    other.release("k1").await.unwrap();
    assert_eq!(store.completed("k1").await.unwrap(), Some(result(7)));

    // Approvals: bound, single use, expiring.
    store
        .put_approval(&approval("p1", now + 60_000))
        .await
        .unwrap();
    for wrong in [
        Binding {
            session: "other",
            ..BOUND
        },
        Binding {
            caller: "other",
            ..BOUND
        },
        Binding {
            tool: Some("other"),
            ..BOUND
        },
        Binding {
            digest: Some("d2"),
            ..BOUND
        },
    ] {
        assert_eq!(
            other.take_approval("p1", &wrong, now).await.unwrap(),
            TakeApproval::Invalid
        );
    }
    assert_eq!(
        other.take_approval("forged", &BOUND, now).await.unwrap(),
        TakeApproval::Invalid
    );
    match other.take_approval("p1", &BOUND, now).await.unwrap() {
        TakeApproval::Taken(taken) => assert_eq!(
            taken,
            approval("p1", now + 60_000).with_created(taken.created_ms)
        ),
        other => panic!("expected the approval, got {other:?}"),
    }
    assert_eq!(
        store.take_approval("p1", &BOUND, now).await.unwrap(),
        TakeApproval::Invalid,
        "single use"
    );
    let loose = Binding {
        tool: None,
        digest: None,
        ..BOUND
    };
    store.put_approval(&approval("p2", now + 10)).await.unwrap();
    assert_eq!(
        store.take_approval("p2", &loose, now + 10).await.unwrap(),
        TakeApproval::Expired
    );
    assert_eq!(
        store.take_approval("p2", &loose, now).await.unwrap(),
        TakeApproval::Invalid,
        "gone once expired"
    );
}

trait WithCreated {
    fn with_created(self, created_ms: u64) -> Self;
}

impl WithCreated for PendingApproval {
    fn with_created(mut self, created_ms: u64) -> Self {
        self.created_ms = created_ms;
        self
    }
}

#[test]
fn memory_store_conforms() {
    let store = Arc::new(MemoryStore::default());
    block_on(conformance(&store, &store));
}

#[test]
fn sqlite_store_in_memory_conforms() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    block_on(conformance(&store, &store));
}

#[test]
fn sqlite_store_on_a_file_conforms_across_two_connections() {
    let path = temp_db("conformance");
    let first = SqliteStore::open(&path).unwrap();
    let second = SqliteStore::open(&path).unwrap();
    block_on(conformance(&first, &second));
}

/// Many threads race to claim one key: exactly one wins.
fn one_winner(store: Arc<impl Store>) {
    let now = now_ms();
    let winners = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&store);
            let winners = Arc::clone(&winners);
            std::thread::spawn(move || {
                if block_on(store.claim("race", now, 60_000)).unwrap() == Claim::Acquired {
                    winners.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(winners.load(Ordering::SeqCst), 1);
}

#[test]
fn claims_have_one_winner_under_threads() {
    one_winner(Arc::new(MemoryStore::default()));
    one_winner(Arc::new(SqliteStore::open(temp_db("race")).unwrap()));
}

// ------------------------------------------ the whole pipeline, per store

/// A backend that counts executions, slowly, without deduplicating.
#[derive(Default)]
struct Bank {
    runs: AtomicU32,
}

/// Sends money.
#[tool(side_effect)]
async fn send(ctx: &Ctx<Bank>, cents: i64) -> Result<Value, Rejection> {
    let run = ctx.state.runs.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::time::sleep(Duration::from_millis(60)).await;
    Ok(json!({"cents": cents, "run": run}))
}

fn same_call_from_many_threads<St: Store>(store: St) {
    let bank = Arc::new(Bank::default());
    let dispatcher = Arc::new(
        Dispatcher::builder(tools![send].unwrap(), Arc::clone(&bank))
            .store(store)
            .max_steps(100)
            .max_duplicate_calls(100)
            .build()
            .unwrap(),
    );
    let threads: Vec<_> = (0..12)
        .map(|_| {
            let d = Arc::clone(&dispatcher);
            std::thread::spawn(move || {
                block_on(d.execute(Call::new("send", r#"{"cents": 2590}"#).session("s")))
            })
        })
        .collect();
    let results: Vec<ToolResult> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        bank.runs.load(Ordering::SeqCst),
        1,
        "twelve identical calls, one execution"
    );
    assert!(
        results.iter().all(|r| r.ok && r.data == results[0].data),
        "{results:?}"
    );
}

#[test]
fn the_same_side_effect_from_many_threads_runs_once_on_every_store() {
    same_call_from_many_threads(MemoryStore::default());
    same_call_from_many_threads(SqliteStore::open(temp_db("threads")).unwrap());
}

#[test]
fn a_second_process_on_the_same_file_replays_instead_of_repeating() {
    let path = temp_db("restart");
    let bank = Arc::new(Bank::default());
    let run = |store: SqliteStore| {
        let d = Dispatcher::builder(tools![send].unwrap(), Arc::clone(&bank))
            .store(store)
            .build()
            .unwrap();
        block_on(d.execute(Call::new("send", r#"{"cents": 100}"#).session("s")))
    };
    let first = run(SqliteStore::open(&path).unwrap());
    let second = run(SqliteStore::open(&path).unwrap());
    assert!(first.ok && !first.replayed);
    assert!(second.ok && second.replayed, "{second:?}");
    assert_eq!(second.data, first.data);
    assert_eq!(bank.runs.load(Ordering::SeqCst), 1);
}
