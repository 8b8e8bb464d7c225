//! A side effect's writes in the store's transaction
//! (`Ctx::transaction`): they commit with the call's recorded result, in
//! one commit, or not at all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolcall::{Call, Ctx, Dispatcher, ToolError, tool, tools};
use toolcall_postgres::{Pool, PostgresStore, Transaction};
use toolcall_tests::{postgres_schema, postgres_url};

use super::{drop_schema, runtime};

/// A payment table in the store's database, and how the next call fails.
#[derive(Debug)]
struct Payments {
    pool: Pool,
    /// The next attempt writes, then fails as a timeout would.
    fail_once: AtomicBool,
    /// The next attempt writes, then its connection is cut.
    cut_once: AtomicBool,
    admin_url: String,
    /// The key of every attempt, in order.
    keys: Mutex<Vec<String>>,
}

/// Take a payment.
#[tool(side_effect, idempotent_backend)]
async fn pay(
    ctx: &Ctx<Payments>,
    /// The amount, in cents.
    cents: i64,
) -> Result<Value, ToolError> {
    let state = &ctx.state;
    state
        .keys
        .lock()
        .unwrap()
        .push(ctx.idempotency_key.to_string());
    let lent = ctx
        .transaction::<Transaction>()
        .expect("a Postgres store lends one");
    let client = lent
        .on(&state.pool)
        .await
        .map_err(ToolError::transient)?
        .expect("the store's own pool");
    client
        .execute(
            "INSERT INTO payments (key, cents) VALUES ($1, $2)",
            &[&&*ctx.idempotency_key, &cents],
        )
        .await
        .map_err(ToolError::transient)?;
    if state.fail_once.swap(false, Ordering::SeqCst) {
        return Err(ToolError::transient("the gateway timed out"));
    }
    if state.cut_once.swap(false, Ordering::SeqCst) {
        let pid: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .map_err(ToolError::transient)?
            .get(0);
        let (admin, connection) = tokio_postgres::connect(&state.admin_url, tokio_postgres::NoTls)
            .await
            .map_err(ToolError::transient)?;
        tokio::spawn(connection);
        admin
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .await
            .map_err(ToolError::transient)?;
    }
    Ok(json!({ "cents": cents }))
}

/// A dispatcher over a store in a schema of `test`'s own, its `payments`
/// table there; the body, then the schema dropped.
fn with_payments<Body, Done>(test: &str, body: Body)
where
    Body: FnOnce(Dispatcher<Payments, Arc<PostgresStore>>, Arc<PostgresStore>) -> Done,
    Done: Future<Output = ()>,
{
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let schema = postgres_schema(test);
        let store = Arc::new(
            PostgresStore::connect_in_schema(&url, &schema)
                .await
                .unwrap(),
        );
        let pool = store.pool();
        pool.get()
            .await
            .unwrap()
            .batch_execute("CREATE TABLE payments (key TEXT NOT NULL, cents BIGINT NOT NULL)")
            .await
            .unwrap();
        let payments = Payments {
            pool,
            fail_once: AtomicBool::new(false),
            cut_once: AtomicBool::new(false),
            admin_url: url.clone(),
            keys: Mutex::default(),
        };
        let dispatcher = Dispatcher::builder(tools![pay].unwrap(), Arc::new(payments))
            .store(Arc::clone(&store))
            .build()
            .unwrap();
        body(dispatcher, store).await;
        drop_schema(&url, &schema).await;
    });
}

/// The payments' rows, with the transaction that wrote each (`xmin`).
async fn rows(store: &PostgresStore) -> Vec<(String, i64, String)> {
    let client = store.pool().get().await.unwrap();
    let rows = client
        .query("SELECT key, cents, xmin::TEXT FROM payments", &[])
        .await
        .unwrap();
    rows.iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// The state of `key`'s record, and the transaction that last wrote it.
async fn record(store: &PostgresStore, key: &str) -> Option<(String, String)> {
    let client = store.pool().get().await.unwrap();
    let row = client
        .query_opt(
            "SELECT state, xmin::TEXT FROM toolcall_records WHERE key = $1",
            &[&key],
        )
        .await
        .unwrap();
    row.map(|r| (r.get(0), r.get(1)))
}

#[test]
fn a_payment_and_its_result_are_one_commit() {
    with_payments("tx_one_commit", |dispatcher, store| async move {
        let call = Call::new("pay", r#"{"cents": 2590}"#).session("s");
        let paid = dispatcher.execute(call).await;
        assert!(paid.ok, "{paid:?}");
        let written = rows(&store).await;
        assert_eq!(written.len(), 1, "{written:?}");
        let (key, cents, xmin) = &written[0];
        assert_eq!(*cents, 2590);
        assert_eq!(
            record(&store, key).await,
            Some(("completed".to_owned(), xmin.clone())),
            "the payment and the result are written by one transaction"
        );
        // The same call again is the recorded answer: no second payment.
        let again = dispatcher.execute(call).await;
        assert!(again.ok && again.replayed, "{again:?}");
        assert_eq!(rows(&store).await.len(), 1);
    });
}

#[test]
fn a_failed_attempt_leaves_nothing_and_the_retry_pays_once() {
    with_payments("tx_retry", |dispatcher, store| async move {
        dispatcher.state().fail_once.store(true, Ordering::SeqCst);
        let paid = dispatcher
            .execute(Call::new("pay", r#"{"cents": 100}"#).session("s"))
            .await;
        assert!(paid.ok, "{paid:?}");
        assert!(
            !dispatcher.state().fail_once.load(Ordering::SeqCst),
            "it failed once"
        );
        assert_eq!(
            rows(&store).await.len(),
            1,
            "the failed attempt's row was rolled back"
        );
    });
}

#[test]
fn a_commit_lost_with_its_connection_keeps_neither_and_leaves_the_call_in_doubt() {
    with_payments("tx_lost", |dispatcher, store| async move {
        dispatcher.state().cut_once.store(true, Ordering::SeqCst);
        let call = Call::new("pay", r#"{"cents": 700}"#).session("s");
        let lost = dispatcher.execute(call).await;
        assert!(!lost.ok, "{lost:?}");
        assert_eq!(lost.data.get("in_doubt"), Some(&json!(true)), "{lost:?}");
        assert!(
            rows(&store).await.is_empty(),
            "the payment went with its commit"
        );
        let key = dispatcher.state().keys.lock().unwrap()[0].clone();
        let (state, _) = record(&store, &key).await.expect("its claim is kept");
        assert_ne!(
            state, "completed",
            "no result recorded outside the transaction"
        );
        // The pool is whole: the next payment commits.
        let next = dispatcher
            .execute(Call::new("pay", r#"{"cents": 1}"#).session("s"))
            .await;
        assert!(next.ok, "{next:?}");
        assert_eq!(rows(&store).await.len(), 1);
    });
}
