//! What a crash of the Postgres server may take back, now that a call's
//! start commits without waiting for the log: a step, a count, a lock;
//! never an effect, a claim or a decision, and nothing runs twice; and
//! never half of a side effect written in the call's transaction.
//!
//! Each test starts a server of its own (`initdb`, `pg_ctl`), holds its log
//! writer so that a commit that does not wait stays in the server's memory,
//! and crashes it (`pg_ctl -m immediate`), which loses exactly those.
//! Without the server's programs each test says loudly that it was skipped;
//! with `TOOLCALL_REQUIRE_POSTGRES_SERVER=1` (CI) that is a failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolcall::store::prelude::*;
use toolcall::store::{CallStart, Lease, LockAsk, now_ms};
use toolcall::{Call, Code, Ctx, Dispatcher, Rejection, ToolError, ToolResult, tool, tools};
use toolcall_postgres::PostgresStore;
use toolcall_testkit::postgres_server::PostgresServer;
use toolcall_testkit::store::asked;
use toolcall_tests::key;

/// Nothing but a held log writer and a crash may write the log between a
/// start and its crash: no autovacuum, no background writer.
fn crashable(test: &str) -> Option<Arc<PostgresServer>> {
    PostgresServer::start(
        test,
        "autovacuum = off\nbgwriter_lru_maxpages = 0",
        "TOOLCALL_REQUIRE_POSTGRES_SERVER",
    )
    .map(Arc::new)
}

/// `body` with a crashable server of `test`'s own and a store on it; a
/// test without the server's programs is skipped (see [`crashable`]).
fn on_crashable<Body, Done>(test: &str, body: Body)
where
    Body: FnOnce(Arc<PostgresServer>, PostgresStore) -> Done,
    Done: Future<Output = ()>,
{
    let Some(server) = crashable(test) else {
        return;
    };
    toolcall_testkit::run::runtime().block_on(async {
        let store = PostgresStore::connect(&server.url()).await.unwrap();
        body(server, store).await;
    });
}

/// A store on a server that has just come back: its first statements may
/// find connections the crash ended.
async fn connect_again(url: &str) -> PostgresStore {
    for _ in 0..50 {
        if let Ok(store) = PostgresStore::connect(url).await {
            return store;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the server did not come back");
}

#[test]
fn a_start_the_crash_took_back_takes_its_lock_with_it_and_its_claim_refuses() {
    on_crashable("lost_start", |server, store| async move {
        let call = key("refund-1");
        let order = key("order:1");
        server.hold_the_log();
        let mut start = CallStart::new("chat-1", &call, now_ms(), 10);
        start.lock = Some(LockAsk {
            resource: &order,
            holder: "holder-1",
            lease_ms: 60_000,
        });
        let begun = store.begin_call(&start).await.unwrap();
        assert_eq!((begun.step, begun.calls, begun.locked), (1, Some(1), true));

        server.crash_and_start();
        let after = connect_again(&server.url()).await;
        // What the crash may take back: the start (its step, its count,
        // its lock), which did not wait for the log.
        assert_eq!(after.peek_step("chat-1").await.unwrap(), 0);
        assert!(
            after
                .lock_resource(
                    &LockAsk {
                        resource: &order,
                        holder: "holder-2",
                        lease_ms: 60_000
                    },
                    now_ms()
                )
                .await
                .unwrap()
        );
        after.unlock_resource(&order, "holder-2").await.unwrap();
        // The store that began the call still remembers its lock: its
        // claim confirms it, finds it gone, and refuses (nothing ran), where
        // it would otherwise run the call without the lock it was given.
        let claim = || {
            let lease = Lease {
                now_ms: now_ms(),
                lease_ms: 60_000,
            };
            store.claim(&call, lease)
        };
        let mut claimed = claim().await;
        for _ in 0..50 {
            match &claimed {
                // A connection the crash ended, found by this statement.
                Err(error) if !error.to_string().contains("no longer kept") => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    claimed = claim().await;
                }
                _ => break,
            }
        }
        let refused = claimed.as_ref().err().map(ToString::to_string);
        assert!(
            refused
                .as_deref()
                .is_some_and(|why| why.contains("no longer kept")),
            "{claimed:?}"
        );
        assert_eq!(after.outcome(&call).await.unwrap(), None);
    });
}

/// What the backend really did, and where the next call crashes the server.
struct Till {
    server: Arc<PostgresServer>,
    payments: AtomicU64,
    crash_in_check: AtomicBool,
    crash_after_effect: AtomicBool,
    down_after_effect: AtomicBool,
}

impl Till {
    /// Nothing taken yet, and no crash armed.
    fn on(server: &Arc<PostgresServer>) -> Arc<Till> {
        Arc::new(Till {
            server: Arc::clone(server),
            payments: AtomicU64::new(0),
            crash_in_check: AtomicBool::new(false),
            crash_after_effect: AtomicBool::new(false),
            down_after_effect: AtomicBool::new(false),
        })
    }
}

fn check_pay(_: &PayArgs, ctx: &Ctx<Till>) -> Result<(), Rejection> {
    if ctx.state.crash_in_check.swap(false, Ordering::SeqCst) {
        ctx.state.server.crash_and_start();
    }
    Ok(())
}

/// Takes a payment for an order; one at a time per order.
#[tool(side_effect, check = check_pay)]
async fn pay(
    ctx: &Ctx<Till>,
    /// The order.
    #[arg(resource)]
    order: String,
    /// Cents.
    cents: i64,
) -> Result<Value, Rejection> {
    ctx.state.payments.fetch_add(1, Ordering::SeqCst);
    if ctx.state.crash_after_effect.swap(false, Ordering::SeqCst) {
        ctx.state.server.crash_and_start();
    }
    if ctx.state.down_after_effect.swap(false, Ordering::SeqCst) {
        ctx.state.server.crash();
    }
    Ok(json!({"order": order, "paid": cents}))
}

/// Pays 2590 cents for `order`, in one conversation, with what `dispatcher`
/// answered.
async fn pay_for(dispatcher: &Dispatcher<Till, PostgresStore>, order: &str) -> ToolResult {
    let arguments = json!({"order": order, "cents": 2590}).to_string();
    dispatcher
        .execute(Call::new("pay", &arguments).session("chat-1"))
        .await
}

/// A dispatcher of `registry` over `store` for a crash test: no retry, and a
/// short lease, so that a claim a crash left is found in doubt soon.
fn crash_dispatcher<S: Send + Sync + 'static>(
    registry: toolcall::Registry,
    state: Arc<S>,
    store: PostgresStore,
) -> Dispatcher<S, PostgresStore> {
    Dispatcher::builder(registry, state)
        .store(store)
        .max_retries(0)
        .claim_lease(Duration::from_millis(500))
        .claim_wait(Duration::from_secs(5))
        .build()
        .unwrap()
}

#[test]
fn a_crash_before_the_claim_or_after_the_effect_never_runs_a_call_twice() {
    on_crashable("pipeline", |server, store| async move {
        let till = Till::on(&server);
        let dispatcher = crash_dispatcher(tools![pay].unwrap(), Arc::clone(&till), store);

        // The crash between the start and the claim: the call answers that
        // the store failed, ran nothing, and runs once when made again.
        server.hold_the_log();
        till.crash_in_check.store(true, Ordering::SeqCst);
        let crashed = pay_for(&dispatcher, "ORD-1").await;
        assert_eq!(crashed.code, Code::StoreUnavailable, "{crashed:?}");
        assert_eq!(till.payments.load(Ordering::SeqCst), 0);
        // The first calls after the crash may find connections it ended.
        let mut again = pay_for(&dispatcher, "ORD-1").await;
        for _ in 0..50 {
            if again.code != Code::StoreUnavailable {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            again = pay_for(&dispatcher, "ORD-1").await;
        }
        assert!(again.ok, "{again:?}");
        assert_eq!(till.payments.load(Ordering::SeqCst), 1);

        // A crash after the effect, the server back before the result is
        // kept: the result is kept on a new connection, and the identical
        // calls after it are answered with it.
        server.hold_the_log();
        till.crash_after_effect.store(true, Ordering::SeqCst);
        let ran = pay_for(&dispatcher, "ORD-2").await;
        assert!(ran.ok && !ran.replayed, "{ran:?}");
        let again = pay_for(&dispatcher, "ORD-2").await;
        assert!(again.ok && again.replayed, "{again:?}");
        assert_eq!(till.payments.load(Ordering::SeqCst), 2);

        // A crash after the effect, the server still down when the result
        // would be kept: the claim was durable, so once the server is back
        // the identical calls find the outcome unknown and never run it
        // again.
        server.hold_the_log();
        till.down_after_effect.store(true, Ordering::SeqCst);
        let crashed = pay_for(&dispatcher, "ORD-3").await;
        assert!(!crashed.ok, "{crashed:?}");
        assert_eq!(till.payments.load(Ordering::SeqCst), 3);
        server.start_again();
        for _ in 0..6 {
            let again = pay_for(&dispatcher, "ORD-3").await;
            assert!(
                !again.ok,
                "a call whose outcome is unknown was answered ok: {again:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(till.payments.load(Ordering::SeqCst), 3);
    });
}

#[test]
fn a_crash_takes_back_no_decision() {
    on_crashable("decision", |server, store| async move {
        store.put_approval(&asked("q-1")).await.unwrap();
        toolcall_tests::ana_approves(&store, "q-1").await;
        // A start after the decision, lost with the crash, takes nothing
        // of the decision back with it.
        server.hold_the_log();
        let call = key("read-1");
        store
            .begin_call(&CallStart::new("chat-1", &call, now_ms(), 10))
            .await
            .unwrap();
        server.crash_and_start();
        let after = connect_again(&server.url()).await;
        assert_eq!(after.peek_step("chat-1").await.unwrap(), 0);
        let kept = after.decided_approvals(10).await.unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
    });
}

/// A read-only call waits for no flush of the log: its start's commit does
/// not, and it writes nothing else. (It waited for one a call.)
#[test]
fn a_read_waits_for_no_flush_of_the_log() {
    on_crashable("flushes", |server, store| async move {
        let flushes = || {
            server
                .sql("SELECT pg_stat_clear_snapshot(); SELECT wal_sync FROM pg_stat_wal")
                .lines()
                .last()
                .unwrap_or_default()
                .parse::<i64>()
                .unwrap_or(-1)
        };
        let before = flushes();
        for n in 0..100 {
            let call = key(&format!("read-{n}"));
            store
                .begin_call(&CallStart::new(&format!("chat-{n}"), &call, now_ms(), 10))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = flushes();
        assert!(
            after >= before && after - before < 20,
            "{before} -> {after}"
        );

        let till = Till::on(&server);
        let dispatcher = Dispatcher::builder(tools![pay, paid].unwrap(), till)
            .store(store)
            .build()
            .unwrap();
        let before = flushes();
        for n in 0..100 {
            let session = format!("read-{n}");
            let read = dispatcher
                .execute(Call::new("paid", "{}").session(&session))
                .await;
            assert!(read.ok, "{read:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = flushes();
        assert!(
            after >= before && after - before < 20,
            "{before} -> {after}"
        );
    });
}

/// How many payments were taken.
#[tool]
fn paid(ctx: &Ctx<Till>) -> Result<Value, Rejection> {
    Ok(json!({"payments": ctx.state.payments.load(Ordering::SeqCst)}))
}

/// A payment written in the call's transaction (`Ctx::transaction`), in a
/// table of the store's database that honours the call's key, and where
/// the next call crashes the server.
struct Ledger {
    server: Arc<PostgresServer>,
    pool: toolcall_postgres::Pool,
    crash_in_handler: AtomicBool,
}

/// Books a payment, in the call's transaction.
#[tool(side_effect, idempotent_backend)]
async fn book(
    ctx: &Ctx<Ledger>,
    /// Cents.
    cents: i64,
) -> Result<Value, ToolError> {
    let lent = ctx.transaction::<toolcall_postgres::Transaction>();
    let client = lent
        .expect("the Postgres store lends one")
        .on(&ctx.state.pool)
        .await
        .map_err(ToolError::transient)?
        .expect("the store's own pool");
    client
        .execute(
            "INSERT INTO booked (key, cents) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            &[&&*ctx.idempotency_key, &cents],
        )
        .await
        .map_err(ToolError::transient)?;
    if ctx.state.crash_in_handler.swap(false, Ordering::SeqCst) {
        ctx.state.server.crash_and_start();
    }
    Ok(json!({ "cents": cents }))
}

/// The payments booked, and the calls recorded completed, after a crash.
async fn booked_and_completed(url: &str) -> (i64, i64) {
    let store = connect_again(url).await;
    let client = store.pool().get().await.unwrap();
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    (
        count("SELECT COUNT(*) FROM booked").await,
        count("SELECT COUNT(*) FROM toolcall_records WHERE state = 'completed'").await,
    )
}

/// A crash of the server keeps a side effect's writes in the call's
/// transaction and its result together: a crash before their one commit
/// keeps neither (the call is in doubt, and made again books once), a crash
/// after it keeps both (the call made again is answered from the record).
#[test]
fn a_crash_keeps_a_side_effects_writes_and_its_result_together() {
    on_crashable("transaction", |server, store| async move {
        let pool = store.pool();
        pool.get()
            .await
            .unwrap()
            .batch_execute("CREATE TABLE booked (key TEXT PRIMARY KEY, cents BIGINT NOT NULL)")
            .await
            .unwrap();
        let ledger = Arc::new(Ledger {
            server: Arc::clone(&server),
            pool,
            crash_in_handler: AtomicBool::new(false),
        });
        let dispatcher = crash_dispatcher(tools![book].unwrap(), Arc::clone(&ledger), store);
        let book = |cents: i64| {
            let arguments = json!({ "cents": cents }).to_string();
            let dispatcher = &dispatcher;
            async move {
                dispatcher
                    .execute(Call::new("book", &arguments).session("chat-1"))
                    .await
            }
        };

        // Committed, then the server crashes: both were flushed with the
        // commit, the start before them too.
        server.hold_the_log();
        let kept = book(100).await;
        assert!(kept.ok && !kept.replayed, "{kept:?}");
        server.crash_and_start();
        assert_eq!(booked_and_completed(&server.url()).await, (1, 1));
        let mut again = book(100).await;
        for _ in 0..50 {
            if again.code != Code::StoreUnavailable {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            again = book(100).await;
        }
        assert!(again.ok && again.replayed, "{again:?}");

        // The server crashes while the handler's transaction is open:
        // neither the payment nor a result is kept; the claim was durable,
        // so the call is in doubt, and made again (the key honoured) books
        // once.
        server.hold_the_log();
        ledger.crash_in_handler.store(true, Ordering::SeqCst);
        let lost = book(200).await;
        assert!(!lost.ok, "{lost:?}");
        assert_eq!(booked_and_completed(&server.url()).await, (1, 1));
        let mut again = book(200).await;
        for _ in 0..50 {
            if again.ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            again = book(200).await;
        }
        assert!(again.ok && !again.replayed, "{again:?}");
        assert_eq!(booked_and_completed(&server.url()).await, (2, 2));
    });
}

/// The log is held only while its writer sleeps: stopped while it writes
/// or syncs, the writer would keep the lock that every commit waiting for
/// the log needs, and such a commit (a claim, a result) would wait for
/// ever. Commits that do not wait keep the writer busy all along.
#[test]
fn a_commit_that_waits_for_the_log_still_writes_it_while_the_log_is_held() {
    on_crashable("held_log", |server, store| async move {
        let pool = store.pool();
        let filler = pool.get().await.unwrap();
        filler
            .batch_execute(
                "CREATE TABLE filler (n BIGINT, pad TEXT); CREATE TABLE waited (n BIGINT);
                 SET synchronous_commit = off",
            )
            .await
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let filling = tokio::spawn({
            let done = Arc::clone(&done);
            async move {
                while !done.load(Ordering::SeqCst) {
                    filler
                        .batch_execute(
                            "INSERT INTO filler SELECT n, repeat('x', 200)
                             FROM generate_series(1, 200) AS n",
                        )
                        .await
                        .unwrap();
                }
            }
        });
        let waits = pool.get().await.unwrap();
        for n in 0..40_i64 {
            server.hold_the_log();
            let committed = tokio::time::timeout(
                Duration::from_secs(20),
                waits.execute("INSERT INTO waited VALUES ($1)", &[&n]),
            )
            .await;
            server.release_the_log();
            assert!(
                committed.is_ok(),
                "hold {n}: a commit that waits for the log waited 20 s"
            );
            committed.unwrap().unwrap();
        }
        done.store(true, Ordering::SeqCst);
        filling.await.unwrap();
    });
}
