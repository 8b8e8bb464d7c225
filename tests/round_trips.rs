//! How often the pipeline asks its store per call, on the orders example:
//! a read-only call asks once (its step and its count together), a
//! confirmed refund three times (the call's start, which takes the order's
//! lock; the claim; the result, which frees the lock), and a session that
//! never read untrusted output is never asked about its taint. On SQLite
//! each ask is one transaction; on Postgres one statement, prepared once
//! per connection (its round trips counted by the store).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use orders::{Shop, get_order, read_messages, refund_order};
use serde_json::{Value, json};
use toolcall::store::CallStore;
use toolcall::store::ControlStore;
use toolcall::store::LockStore;
use toolcall::store::QuestionStore;
use toolcall::store::Store;
use toolcall::store::TaintStore;
use toolcall::store::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, AskApproval, Binding, CallBegun, CallStart,
    Claim, ControlsChange, DecideOutcome, Key, OpenBounds, PendingApproval, PendingPage,
    PendingQuery, RecordedOutcome, SignOutcome, Signature, StoreError, StoredControls, TaintHit,
    TaintSource, TakeApproval, now_ms,
};
use toolcall::{Call, Code, Dispatcher, Policy, ToolResult, tools};
use toolcall_postgres::PostgresStore;
use toolcall_sqlite::SqliteStore;
use toolcall_tests::{postgres_schema, postgres_url};

/// A store that counts the methods the pipeline calls, by name.
struct Counting<S> {
    inner: S,
    calls: Mutex<BTreeMap<&'static str, u32>>,
}

impl<S> Counting<S> {
    fn new(inner: S) -> Self {
        Counting {
            inner,
            calls: Mutex::new(BTreeMap::new()),
        }
    }

    fn count(&self, name: &'static str) {
        *self.calls.lock().unwrap().entry(name).or_default() += 1;
    }

    /// The calls counted since the last take, by name.
    fn take(&self) -> BTreeMap<&'static str, u32> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl<S: Store> CallStore for Counting<S> {
    async fn begin_call(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        self.count("begin_call");
        self.inner.begin_call(start).await
    }

    async fn complete_unlocking(
        &self,
        key: &Key,
        result: &ToolResult,
        resource: &Key,
        holder: &str,
    ) -> Result<bool, StoreError> {
        self.count("complete_unlocking");
        self.inner
            .complete_unlocking(key, result, resource, holder)
            .await
    }

    async fn next_step(&self, session: &str, now_ms: u64) -> Result<u64, StoreError> {
        self.count("next_step");
        self.inner.next_step(session, now_ms).await
    }

    async fn peek_step(&self, session: &str) -> Result<u64, StoreError> {
        self.count("peek_step");
        self.inner.peek_step(session).await
    }

    async fn count_call(&self, key: &Key, now_ms: u64) -> Result<u64, StoreError> {
        self.count("count_call");
        self.inner.count_call(key, now_ms).await
    }

    async fn uncount_call(&self, key: &Key) -> Result<(), StoreError> {
        self.count("uncount_call");
        self.inner.uncount_call(key).await
    }

    async fn outcome(&self, key: &Key) -> Result<Option<RecordedOutcome>, StoreError> {
        self.count("outcome");
        self.inner.outcome(key).await
    }

    async fn claim(&self, key: &Key, now_ms: u64, lease_ms: u64) -> Result<Claim, StoreError> {
        self.count("claim");
        self.inner.claim(key, now_ms, lease_ms).await
    }

    async fn renew(&self, key: &Key, now_ms: u64, lease_ms: u64) -> Result<bool, StoreError> {
        self.count("renew");
        self.inner.renew(key, now_ms, lease_ms).await
    }

    async fn complete(&self, key: &Key, result: &ToolResult) -> Result<(), StoreError> {
        self.count("complete");
        self.inner.complete(key, result).await
    }

    async fn release(&self, key: &Key) -> Result<(), StoreError> {
        self.count("release");
        self.inner.release(key).await
    }

    async fn doubt(&self, key: &Key) -> Result<(), StoreError> {
        self.count("doubt");
        self.inner.doubt(key).await
    }
}

impl<S: Store> QuestionStore for Counting<S> {
    async fn put_approval(&self, approval: &PendingApproval) -> Result<(), StoreError> {
        self.count("put_approval");
        self.inner.put_approval(approval).await
    }

    async fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> Result<TakeApproval, StoreError> {
        self.count("take_approval");
        self.inner.take_approval(id, binding, now_ms).await
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        self.count("pending_approvals");
        self.inner.pending_approvals(now_ms, limit).await
    }

    async fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> Result<AskApproval, StoreError> {
        self.count("ask_approval");
        self.inner.ask_approval(approval, bounds).await
    }

    async fn find_approval(
        &self,
        binding: &Binding<'_>,
        reason: Option<&str>,
        now_ms: u64,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        self.count("find_approval");
        self.inner.find_approval(binding, reason, now_ms).await
    }

    async fn pending_page(&self, query: &PendingQuery<'_>) -> Result<PendingPage, StoreError> {
        self.count("pending_page");
        self.inner.pending_page(query).await
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> Result<DecideOutcome, StoreError> {
        self.count("decide_approval");
        self.inner.decide_approval(id, decision, now_ms).await
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        self.count("approval");
        self.inner.approval(id).await
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        self.count("decided_approvals");
        self.inner.decided_approvals(limit).await
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        self.count("settle_approval");
        self.inner.settle_approval(id, result).await
    }

    async fn give_back_approval(&self, id: &str) -> Result<bool, StoreError> {
        self.count("give_back_approval");
        self.inner.give_back_approval(id).await
    }

    async fn sign_approval(
        &self,
        id: &str,
        signer: &str,
        needed: u32,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> Result<SignOutcome, StoreError> {
        self.count("sign_approval");
        self.inner
            .sign_approval(id, signer, needed, decision, now_ms)
            .await
    }

    async fn signatures(&self, id: &str) -> Result<Vec<Signature>, StoreError> {
        self.count("signatures");
        self.inner.signatures(id).await
    }
}

impl<S: Store> LockStore for Counting<S> {
    async fn lock_resource(
        &self,
        resource: &Key,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        self.count("lock_resource");
        self.inner
            .lock_resource(resource, holder, now_ms, lease_ms)
            .await
    }

    async fn unlock_resource(&self, resource: &Key, holder: &str) -> Result<(), StoreError> {
        self.count("unlock_resource");
        self.inner.unlock_resource(resource, holder).await
    }
}

impl<S: Store> TaintStore for Counting<S> {
    async fn add_taint(
        &self,
        session: &str,
        prints: &[String],
        source: &TaintSource,
    ) -> Result<(), StoreError> {
        self.count("add_taint");
        self.inner.add_taint(session, prints, source).await
    }

    async fn taint_sources(&self, session: &str) -> Result<Vec<TaintSource>, StoreError> {
        self.count("taint_sources");
        self.inner.taint_sources(session).await
    }

    async fn tainted(&self, session: &str, prints: &[String]) -> Result<TaintHit, StoreError> {
        self.count("tainted");
        self.inner.tainted(session, prints).await
    }
}

impl<S: Store> ControlStore for Counting<S> {
    async fn controls(&self, known: u64) -> Result<Option<StoredControls>, StoreError> {
        self.count("controls");
        self.inner.controls(known).await
    }

    async fn put_controls(
        &self,
        expected: u64,
        document: &str,
        change: &ControlsChange,
    ) -> Result<bool, StoreError> {
        self.count("put_controls");
        self.inner.put_controls(expected, document, change).await
    }

    async fn controls_history(&self, limit: usize) -> Result<Vec<ControlsChange>, StoreError> {
        self.count("controls_history");
        self.inner.controls_history(limit).await
    }

    async fn take_rate(
        &self,
        bucket: &str,
        window_start_ms: u64,
        window_ms: u64,
        limit: u64,
    ) -> Result<bool, StoreError> {
        self.count("take_rate");
        self.inner
            .take_rate(bucket, window_start_ms, window_ms, limit)
            .await
    }

    async fn rate_count(&self, bucket: &str, window_start_ms: u64) -> Result<u64, StoreError> {
        self.count("rate_count");
        self.inner.rate_count(bucket, window_start_ms).await
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

fn refund(cents: i64) -> Value {
    json!({"order_id": "ORD-1001", "amount_cents": cents, "currency": "BRL", "reason": "customer_request"})
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

    let args = refund(500).to_string();
    let refunded = d
        .execute(
            Call::new("refund_order", &args)
                .session("s1")
                .confirmed(true),
        )
        .await;
    assert_eq!(refunded.code, Code::Ok, "{refunded:?}");
    assert_eq!(
        store.take(),
        asked(&[("begin_call", 1), ("claim", 1), ("complete_unlocking", 1)]),
        "a confirmed refund: its start (with the order's lock), its claim, its result (with the unlock)"
    );

    let replayed = d
        .execute(
            Call::new("refund_order", &args)
                .session("s1")
                .confirmed(true),
        )
        .await;
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
async fn sqlite_is_asked_once_per_read_and_three_times_per_refund() {
    asks_per_call(Counting::new(SqliteStore::open_in_memory().unwrap())).await;
}

#[tokio::test]
async fn postgres_is_asked_once_per_read_and_three_times_per_refund() {
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

/// On Postgres, what those asks cost in round trips (each one transaction):
/// after the first calls prepared their statements, a read-only call is
/// one, a confirmed refund three; no statement is prepared again.
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
    let args = refund(100).to_string();
    let warm = d
        .execute(
            Call::new("refund_order", &args)
                .session("warm")
                .confirmed(true),
        )
        .await;
    assert_eq!(warm.code, Code::Ok, "{warm:?}");

    let before = store.round_trips();
    for n in 0..10 {
        let session = format!("read-{n}");
        assert!(d.execute(get_order_call(&session)).await.ok);
    }
    assert_eq!(store.round_trips() - before, 10, "one per read-only call");

    let before = store.round_trips();
    for n in 0..10 {
        let args = refund(200 + n).to_string();
        let refunded = d
            .execute(
                Call::new("refund_order", &args)
                    .session("refunds")
                    .confirmed(true),
            )
            .await;
        assert_eq!(refunded.code, Code::Ok, "{refunded:?}");
    }
    assert_eq!(
        store.round_trips() - before,
        30,
        "three per confirmed refund"
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
    start.lock = Some(toolcall::store::LockAsk {
        resource: &resource,
        holder: "h1",
        lease_ms: 60_000,
    });

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
            !other
                .lock_resource(&resource, "h2", now, 60_000)
                .await
                .unwrap(),
            "held by the call"
        );
    }

    // Claimed: in flight, and no lock is taken for it.
    assert_eq!(store.claim(&k, now, 60_000).await.unwrap(), Claim::Acquired);
    store.unlock_resource(&resource, "h1").await.unwrap();
    let begun = other.begin_call(&start).await.unwrap();
    assert_eq!((begun.step, begun.calls), (2, Some(2)));
    assert_eq!(begun.outcome, Some(RecordedOutcome::InFlight));
    assert!(!begun.locked, "an identical call is running");

    // Completed, and the lock freed with it when the store can.
    store
        .lock_resource(&resource, "h1", now, 60_000)
        .await
        .unwrap();
    let result = ToolResult::success("pay", serde_json::Map::new());
    let freed = store
        .complete_unlocking(&k, &result, &resource, "h1")
        .await
        .unwrap();
    assert_eq!(freed, combined);
    assert_eq!(
        other
            .lock_resource(&resource, "h2", now, 60_000)
            .await
            .unwrap(),
        freed,
        "free once freed, else still held"
    );
    other.unlock_resource(&resource, "h2").await.unwrap();
    store.unlock_resource(&resource, "h1").await.unwrap();
    assert_eq!(
        other.outcome(&k).await.unwrap(),
        Some(RecordedOutcome::Completed(result))
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
    store.add_taint(&session, &[], &source).await.unwrap();
    let begun = other.begin_call(&wide).await.unwrap();
    if combined {
        assert_eq!(begun.tainted, Some(true));
    } else {
        assert_eq!(begun.tainted, None);
    }
}

#[tokio::test]
async fn every_store_begins_and_completes_a_call_as_its_parts_do() {
    let memory = toolcall::store::MemoryStore::default();
    begin_conformance(&memory, &memory, true).await;
    let sqlite = SqliteStore::open_in_memory().unwrap();
    begin_conformance(&sqlite, &sqlite, true).await;
    let Some(url) = postgres_url() else { return };
    let schema = postgres_schema("begin");
    let first = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let second = PostgresStore::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    begin_conformance(&first, &second, true).await;
    drop(second);
    first.drop_schema().await.unwrap();
}
