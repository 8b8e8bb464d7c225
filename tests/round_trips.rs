//! How often the pipeline asks its store per call, on the orders example:
//! a read-only call asks once (its step and its count together), a
//! confirmed refund three times (the call's start, which takes the order's
//! lock; the claim; the result, which frees the lock), and a session that
//! never read untrusted output is never asked about its taint. On SQLite
//! each ask is one transaction; on Postgres one statement, prepared once
//! per connection (its round trips counted by the store).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orders::{Shop, get_order, read_messages, refund_order};
use serde_json::json;
use toolcall::store::{
    CallStart, Claim, Completion, Exposure, Lease, LockAsk, LockStore, MemoryStore,
    RecordedOutcome, Store,
};
use toolcall::store::{TaintSource, now_ms};
use toolcall::{Call, Code, Dispatcher, Policy, ToolResult, tools};
use toolcall_core::canonical;
use toolcall_postgres::PostgresStore;
use toolcall_sqlite::SqliteStore;
use toolcall_testkit::wrap::{Access, Hook, Pass, Wrapped};
use toolcall_tests::{postgres_schema, postgres_url};

/// A store that counts the methods the pipeline calls, by name.
type Counting<S> = Wrapped<S, Counts>;

/// The calls a [`Counting`] store saw, by name.
#[derive(Debug, Default)]
struct Counts(Mutex<BTreeMap<&'static str, u32>>);

impl Counts {
    /// The calls counted since the last take, by name.
    fn take(&self) -> BTreeMap<&'static str, u32> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Hook for Counts {
    fn before(&self, method: &'static str, _: Access) -> Pass {
        *self.0.lock().unwrap().entry(method).or_default() += 1;
        Pass::On
    }
}

fn dispatcher<S: Store>(store: S) -> Dispatcher<Shop, S> {
    Dispatcher::builder(
        tools![get_order, refund_order, read_messages].unwrap(),
        Arc::new(Shop::new()),
    )
    .part(Shop::reader)
    .policy(
        Policy::new()
            .allow(["get_order", "refund_order", "read_messages"])
            .limit("max_refund_cents", 50_000),
    )
    .store(store)
    .max_steps(1_000)
    .build()
    .unwrap()
}

fn get_order_call(session: &str) -> Call<'_> {
    Call::new("get_order", r#"{"order_id":"ORD-1001"}"#).session(session)
}

/// A refund of `cents` of ORD-1001 in `session`, confirmed by a person.
async fn confirmed_refund<S: Store>(
    d: &Dispatcher<Shop, S>,
    session: &str,
    cents: i64,
) -> ToolResult {
    let args = json!({"order_id": "ORD-1001", "amount_cents": cents, "currency": "BRL", "reason": "customer_request"})
        .to_string();
    d.execute(
        Call::new("refund_order", &args)
            .session(session)
            .confirmed(true),
    )
    .await
}

fn asked(list: &[(&'static str, u32)]) -> BTreeMap<&'static str, u32> {
    list.iter().copied().collect()
}

/// What the pipeline asks of `store` for a read-only call, a confirmed
/// refund, its replay, and a refund in a session that read untrusted output.
async fn asks_per_call<S: Store>(store: Counting<S>) {
    let d = dispatcher(store);
    let store = d.store();

    // A session that read untrusted output: its taint is looked up.
    let read = d
        .execute(Call::new("read_messages", r#"{"order_id":"ORD-1002"}"#).session("s2"))
        .await;
    assert!(read.ok, "{read:?}");
    store.take();
    // What the injection in those messages asks for.
    let args = json!({"order_id": "ORD-1001", "amount_cents": 12000, "currency": "BRL", "reason": "customer_request"})
        .to_string();
    let tainted = d
        .execute(Call::new("refund_order", &args).session("s2"))
        .await;
    assert_eq!(tainted.code, Code::ConfirmationRequired, "{tainted:?}");
    let asks = store.take();
    // The session's mark came with the start: at most its values are asked.
    assert!(asks.get("tainted").is_none_or(|n| *n <= 1), "{asks:?}");
    assert_eq!(asks.get("begin_call"), Some(&1), "{asks:?}");
    assert_eq!(asks.get("lock_resource"), None, "{asks:?}");
    assert_eq!(asks.get("unlock_resource"), Some(&1), "{asks:?}");

    let read = d.execute(get_order_call("s1")).await;
    assert!(read.ok, "{read:?}");
    assert_eq!(
        store.take(),
        asked(&[("begin_call", 1)]),
        "a read-only call: its start, which makes sure of the operators' controls' version"
    );

    let refunded = confirmed_refund(&d, "s1", 500).await;
    assert_eq!(refunded.code, Code::Ok, "{refunded:?}");
    assert_eq!(
        store.take(),
        asked(&[("begin_call", 1), ("complete_unlocking", 1)]),
        "a confirmed refund: its start (with the order's lock and its key's claim), \
         its result (with the unlock)"
    );

    let replayed = confirmed_refund(&d, "s1", 500).await;
    assert!(replayed.replayed, "{replayed:?}");
    assert_eq!(
        store.take(),
        asked(&[("begin_call", 1)]),
        "a replay is answered from the call's start"
    );
    assert_eq!(d.state().applied_refunds(), 1);

    assert_eq!(d.state().applied_refunds(), 1);
}

#[tokio::test]
async fn sqlite_is_asked_once_per_read_and_twice_per_refund() {
    asks_per_call(Counting::new(SqliteStore::open_in_memory().unwrap())).await;
}

/// In this process a lock taken with the call's start saves no request:
/// the memory store asks for none (`CallStore::locks_at_start`). A
/// confirmed refund claims its key with its start and locks its order as
/// its check begins; its replay, answered from its start, locks nothing.
#[tokio::test]
async fn memory_locks_a_refund_as_its_check_begins_and_a_replay_not_at_all() {
    let d = dispatcher(Counting::new(MemoryStore::default()));
    let store = d.store();
    let refunded = confirmed_refund(&d, "s1", 500).await;
    assert_eq!(refunded.code, Code::Ok, "{refunded:?}");
    assert_eq!(
        store.take(),
        asked(&[
            ("begin_call", 1),
            ("lock_resource", 1),
            ("complete_unlocking", 1)
        ]),
        "a confirmed refund: its start (with its key's claim), its order's lock, \
         its result (with the unlock)"
    );
    let replayed = confirmed_refund(&d, "s1", 500).await;
    assert!(replayed.replayed, "{replayed:?}");
    assert_eq!(store.take(), asked(&[("begin_call", 1)]));
    assert_eq!(d.state().applied_refunds(), 1);
}

/// A refund whose start claimed its key without its order's lock (the
/// memory store's way), while another holds that lock past the wait,
/// gives its claim back: nothing ran, and the same call, once the lock is
/// free, runs once.
#[tokio::test]
async fn memory_gives_back_a_claim_whose_lock_another_holds() {
    let d = Dispatcher::builder(tools![refund_order].unwrap(), Arc::new(Shop::new()))
        .policy(
            Policy::new()
                .allow(["refund_order"])
                .limit("max_refund_cents", 50_000),
        )
        .store(Counting::new(MemoryStore::default()))
        .claim_wait(Duration::from_millis(30))
        .build()
        .unwrap();
    let order = canonical::resource_digest("order", &json!("ORD-1001"));
    let other = LockAsk {
        resource: &order,
        holder: "another call",
        lease_ms: 60_000,
    };
    assert!(d.store().lock_resource(&other, now_ms()).await.unwrap());
    d.store().take();
    let waited = confirmed_refund(&d, "s", 700).await;
    assert_eq!(waited.code, Code::ResourceBusy, "{waited:?}");
    let asks = d.store().take();
    assert_eq!(asks.get("release"), Some(&1), "{asks:?}");
    assert_eq!(asks.get("complete_unlocking"), None, "{asks:?}");
    assert_eq!(d.state().applied_refunds(), 0);

    d.store()
        .unlock_resource(&order, "another call")
        .await
        .unwrap();
    let refunded = confirmed_refund(&d, "s", 700).await;
    assert_eq!(refunded.code, Code::Ok, "{refunded:?}");
    assert_eq!(d.state().applied_refunds(), 1);
}

#[tokio::test]
async fn postgres_is_asked_once_per_read_and_twice_per_refund() {
    let Some(url) = postgres_url() else { return };
    let schema = postgres_schema("asks");
    let store = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    asks_per_call(Counting::new(store)).await;
    let store = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    store.drop_schema().await.unwrap();
}

/// On Postgres a confirmed refund claims its key with its start; refused
/// after it (here by the business check: the wrong currency), it gives the
/// claim back: nothing is left recorded of the key, and the same call made
/// again is refused by the check again rather than waiting on a claim
/// nobody holds. The refund made right after runs, once.
#[tokio::test]
async fn postgres_gives_back_the_claim_of_a_call_refused_after_its_start() {
    let Some(url) = postgres_url() else { return };
    let schema = postgres_schema("given_back");
    let store = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let pool = store.pool();
    let d = dispatcher(Counting::new(store));
    let wrong = json!({"order_id": "ORD-1001", "amount_cents": 700, "currency": "USD", "reason": "damaged"})
        .to_string();
    let refund = || {
        Call::new("refund_order", &wrong)
            .session("s")
            .confirmed(true)
    };
    for attempt in 0..2 {
        let refused = d.execute(refund()).await;
        assert_eq!(
            refused.code.as_str(),
            "CURRENCY_MISMATCH",
            "{attempt}: {refused:?}"
        );
        let asks = d.store().take();
        assert_eq!(asks.get("release"), Some(&1), "{attempt}: {asks:?}");
        assert_eq!(asks.get("claim"), None, "{attempt}: {asks:?}");
        let client = pool.get().await.unwrap();
        let kept: i64 = client
            .query_one(
                &format!("SELECT count(*) FROM \"{schema}\".toolcall_records"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            kept, 0,
            "{attempt}: nothing recorded of a call that did not run"
        );
    }
    let refunded = confirmed_refund(&d, "s", 700).await;
    assert_eq!(refunded.code, Code::Ok, "{refunded:?}");
    assert_eq!(d.state().applied_refunds(), 1);
    drop(d);
    let store = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    store.drop_schema().await.unwrap();
}

/// On Postgres, what those asks cost in round trips (each one transaction):
/// after the first calls prepared their statements, a read-only call is
/// one, a confirmed refund two (its start claims its key); no statement is
/// prepared again.
#[tokio::test]
async fn postgres_prepares_each_statement_once_and_sends_one_per_ask() {
    let Some(url) = postgres_url() else { return };
    let schema = postgres_schema("round_trips");
    let store = Arc::new(
        PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    let d = dispatcher(Arc::clone(&store));
    // The first of each prepares its statements.
    assert!(d.execute(get_order_call("warm")).await.ok);
    let warm = confirmed_refund(&d, "warm", 100).await;
    assert_eq!(warm.code, Code::Ok, "{warm:?}");

    let before = store.round_trips();
    for n in 0..10 {
        let session = format!("read-{n}");
        assert!(d.execute(get_order_call(&session)).await.ok);
    }
    assert_eq!(store.round_trips() - before, 10, "one per read-only call");

    let before = store.round_trips();
    for n in 0..10 {
        let refunded = confirmed_refund(&d, "refunds", 200 + n).await;
        assert_eq!(refunded.code, Code::Ok, "{refunded:?}");
    }
    assert_eq!(store.round_trips() - before, 20, "two per confirmed refund");
    drop(d);
    Arc::into_inner(store).unwrap().drop_schema().await.unwrap();
}

/// Reads alone in their conversations that start together while the
/// controls' version is being read share the next read of it (one sent
/// after they all started): eight calls, two statements, where each call
/// alone sends one.
#[tokio::test]
async fn postgres_reads_alone_that_start_together_share_a_read_of_the_controls() {
    let Some(url) = postgres_url() else { return };
    let schema = postgres_schema("rt_alone");
    let store = Arc::new(
        PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    let d = dispatcher(Arc::clone(&store));
    let alone = |session: &'static str| d.execute(get_order_call(session).alone(true));
    // The first on each shared connection prepares the statement there.
    for _ in 0..32 {
        assert!(alone("warm").await.ok);
    }
    let before = store.round_trips();
    for _ in 0..8 {
        assert!(alone("one").await.ok);
    }
    assert_eq!(store.round_trips() - before, 8, "a read alone sends one");

    let before = store.round_trips();
    // Polled in turn on one task: the first sends the read, the seven
    // after it find it on its way and wait for the next.
    let answers = tokio::join!(
        alone("s1"),
        alone("s2"),
        alone("s3"),
        alone("s4"),
        alone("s5"),
        alone("s6"),
        alone("s7"),
        alone("s8"),
    );
    let answers = [
        answers.0, answers.1, answers.2, answers.3, answers.4, answers.5, answers.6, answers.7,
    ];
    assert!(answers.iter().all(|answer| answer.ok), "{answers:?}");
    assert_eq!(
        store.round_trips() - before,
        2,
        "eight reads alone together, two reads of the controls"
    );
    drop(d);
    Arc::into_inner(store).unwrap().drop_schema().await.unwrap();
}

/// `begin_call` and `complete_unlocking` mean, on every store, what the
/// methods they stand for mean one after the other. `combined`: whether the
/// store makes them its own way (locking and looking at the taint and the
/// approvals) rather than by the trait's defaults.
async fn begin_conformance(store: &impl Store, other: &impl Store, combined: bool) {
    let now = now_ms();
    let (session, k, resource) = (
        format!("begin-{now}"),
        toolcall_tests::key(&format!("begin-{now}")),
        toolcall_tests::key(&format!("order-{now}")),
    );
    let mut start = CallStart::new(&session, &k, now, 2);
    start.max_calls = 2;
    start.outcome = true;
    start.taint = true;
    start.questions = true;
    let h1 = LockAsk {
        resource: &resource,
        holder: "h1",
        lease_ms: 60_000,
    };
    let h2 = LockAsk { holder: "h2", ..h1 };
    start.lock = Some(h1);

    // A free key: counted, nothing recorded, locked (by a store that locks).
    let begun = store.begin_call(&start).await.unwrap();
    assert_eq!(
        (begun.step, begun.calls, begun.outcome.clone()),
        (1, Some(1), None)
    );
    assert_eq!(begun.locked, combined);
    if combined {
        assert_eq!(begun.tainted, Some(false));
        assert_eq!(begun.questions, Some(false));
        assert!(
            !other.lock_resource(&h2, now).await.unwrap(),
            "held by the call"
        );
    }

    // Claimed: in flight, and no lock is taken for it.
    assert_eq!(
        store
            .claim(
                &k,
                Lease {
                    now_ms: now,
                    lease_ms: 60_000
                }
            )
            .await
            .unwrap(),
        Claim::Acquired
    );
    store.unlock_resource(&resource, "h1").await.unwrap();
    let begun = other.begin_call(&start).await.unwrap();
    assert_eq!((begun.step, begun.calls), (2, Some(2)));
    assert_eq!(begun.outcome, Some(RecordedOutcome::InFlight));
    assert!(!begun.locked, "an identical call is running");

    // Completed, and the lock freed with it when the store can.
    store.lock_resource(&h1, now).await.unwrap();
    let result = ToolResult::success("pay", serde_json::Map::new());
    let freed = store
        .complete_unlocking(&Completion {
            key: &k,
            result: &result,
            resource: &resource,
            holder: "h1",
        })
        .await
        .unwrap();
    assert_eq!(freed, combined);
    assert_eq!(
        other.lock_resource(&h2, now).await.unwrap(),
        freed,
        "free once freed, else still held"
    );
    other.unlock_resource(&resource, "h2").await.unwrap();
    store.unlock_resource(&resource, "h1").await.unwrap();
    assert_eq!(
        other.outcome(&k).await.unwrap(),
        Some(RecordedOutcome::Completed(Box::new(result)))
    );

    // Over the bound of identical calls: counted, nothing read, no lock.
    let begun = store.begin_call(&start).await.unwrap();
    assert_eq!(
        (begun.step, begun.calls, begun.outcome),
        (3, None, None),
        "over the steps"
    );
    let mut wide = start;
    wide.max_steps = 100;
    let begun = store.begin_call(&wide).await.unwrap();
    assert_eq!(
        (begun.step, begun.calls),
        (4, Some(3)),
        "the step over the budget counted no call"
    );
    assert_eq!(begun.outcome, None, "over the bound: not read");
    assert!(!begun.locked);

    // Taint: what `tainted` says of the session.
    let source = TaintSource::from_output("t", None, 0, &serde_json::json!({}), &[]);
    store
        .add_taint(&Exposure {
            session: &session,
            fingerprints: &[],
            source: &source,
        })
        .await
        .unwrap();
    let begun = other.begin_call(&wide).await.unwrap();
    if combined {
        assert_eq!(begun.tainted, Some(true));
    } else {
        assert_eq!(begun.tainted, None);
    }
}

/// A start asked to claim its key (`CallStart::claim`), on `store`, seen
/// from `other` (another replica, or the same store): it claims a free key
/// with the lock it took, and the claim holds as one of its own would; it
/// does not claim a key that is held, completed or over the bound of
/// identical calls, nor in a session that read untrusted output, nor when
/// the lock asked for is another's.
async fn claim_conformance(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let lease = Lease {
        now_ms: now,
        lease_ms: 60_000,
    };
    let (session, k, resource) = (
        format!("claim-{now}"),
        toolcall_tests::key(&format!("claim-{now}")),
        toolcall_tests::key(&format!("claimed-order-{now}")),
    );
    let mut start = CallStart::new(&session, &k, now, 100);
    start.max_calls = 2;
    start.outcome = true;
    start.taint = true;
    start.questions = true;
    start.claim = Some(now + 60_000);
    let h1 = LockAsk {
        resource: &resource,
        holder: "h1",
        lease_ms: 60_000,
    };
    start.lock = Some(h1);

    let begun = store.begin_call(&start).await.unwrap();
    assert!(begun.locked && begun.claimed, "a free key: {begun:?}");
    assert_eq!(begun.outcome, None, "read before the claim: {begun:?}");
    assert_eq!(other.claim(&k, lease).await.unwrap(), Claim::InFlight);
    let again = other.begin_call(&start).await.unwrap();
    assert!(!again.claimed, "held by the first: {again:?}");
    assert_eq!(again.outcome, Some(RecordedOutcome::InFlight));

    // Given back, it is free again: the next start claims it.
    store.release(&k).await.unwrap();
    store.unlock_resource(&resource, "h1").await.unwrap();
    let mut third = start;
    third.max_calls = 3;
    let begun = other.begin_call(&third).await.unwrap();
    assert!(begun.claimed, "released: {begun:?}");
    let result = ToolResult::success("pay", serde_json::Map::new());
    other.complete(&k, &result).await.unwrap();
    other.unlock_resource(&resource, "h1").await.unwrap();
    let mut fourth = third;
    fourth.max_calls = 4;
    let begun = store.begin_call(&fourth).await.unwrap();
    assert!(!begun.claimed, "completed: {begun:?}");
    let begun = store.begin_call(&start).await.unwrap();
    assert!(
        !begun.claimed && begun.calls == Some(5),
        "over the bound: {begun:?}"
    );

    // A fresh key whose lock another holds, then in a tainted session.
    let fresh = toolcall_tests::key(&format!("claim-fresh-{now}"));
    let h2 = LockAsk { holder: "h2", ..h1 };
    assert!(other.lock_resource(&h2, now).await.unwrap());
    let mut locked_out = start;
    locked_out.key = &fresh;
    let begun = store.begin_call(&locked_out).await.unwrap();
    assert!(
        !begun.locked && !begun.claimed,
        "the lock is another's: {begun:?}"
    );
    other.unlock_resource(&resource, "h2").await.unwrap();
    let source = TaintSource::from_output("t", None, 0, &serde_json::json!({}), &[]);
    store
        .add_taint(&Exposure {
            session: &session,
            fingerprints: &["a-value-print".to_owned()],
            source: &source,
        })
        .await
        .unwrap();
    let begun = other.begin_call(&locked_out).await.unwrap();
    assert!(!begun.claimed, "a tainted session: {begun:?}");
    assert_eq!(
        other.outcome(&fresh).await.unwrap(),
        None,
        "nothing claimed"
    );
}

#[tokio::test]
async fn every_store_begins_and_completes_a_call_as_its_parts_do() {
    let memory = toolcall::store::MemoryStore::default();
    begin_conformance(&memory, &memory, true).await;
    claim_conformance(&memory, &memory).await;
    let sqlite = SqliteStore::open_in_memory().unwrap();
    begin_conformance(&sqlite, &sqlite, true).await;
    claim_conformance(&sqlite, &sqlite).await;
    let Some(url) = postgres_url() else { return };
    let schema = postgres_schema("begin");
    let first = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let second = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    begin_conformance(&first, &second, true).await;
    claim_conformance(&first, &second).await;
    drop(second);
    first.drop_schema().await.unwrap();
}
