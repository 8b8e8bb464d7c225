//! Unknown outcomes: a refund that went through is in doubt and the retry
//! completes it, claim waits and leases never overflow, reconcile turns a
//! lost answer into the answer, and a timeout is in doubt too.

use super::*;

// ------------------------------------------------------------ in doubt

#[tokio::test]
async fn a_refund_that_went_through_is_in_doubt_and_the_models_retry_completes_it() {
    let shop = Arc::new(Shop::new());
    shop.lose_next_responses(1);
    let audit = MemoryAudit::new();
    let d = shop_dispatcher(&shop)
        .max_retries(0)
        .audit(audit.clone())
        .build()
        .unwrap();

    let lost = confirmed_refund(&d, REFUND_ALL).await;
    assert_eq!(lost.code, Code::UpstreamUnavailable);
    assert_eq!(lost.data["in_doubt"], json!(true), "{lost:?}");
    assert!(
        lost.message.contains("unknown") && lost.message.contains("same arguments"),
        "the message tells the truth and the way out: {}",
        lost.message
    );
    assert_eq!(shop.applied_refunds(), 1, "the backend did refund");
    assert!(audit.records()[0].in_doubt);

    // The model retries the identical call (unconfirmed, as a model would):
    // it is the same, already-approved operation, so it is not asked again,
    // and the check (which would now say "nothing left to refund") is not
    // what answers: the backend, under the same key, does.
    let retry = in_default(&d, "refund_order", REFUND_ALL).await;
    assert!(retry.ok && !retry.replayed, "{retry:?}");
    assert_eq!(retry.data["remaining_refundable_cents"], 0);
    assert_eq!(shop.applied_refunds(), 1, "one refund in all");
    assert_eq!(shop.order("ORD-1001").unwrap().refunded_cents, 12_000);

    let again = in_default(&d, "refund_order", REFUND_ALL).await;
    assert!(again.ok && again.replayed, "completed now: {again:?}");
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn a_confirmed_retry_of_an_in_doubt_call_completes_it_too() {
    // Almost all of the refund, so that the check, if it ran again, would
    // refuse the retry: only 1 cent is left once the first went through.
    let refund = REFUND_ALL.replace("12000", "11999");
    let shop = Arc::new(Shop::new());
    shop.lose_next_responses(1);
    let d = shop_dispatcher(&shop).max_retries(0).build().unwrap();
    let lost = confirmed_refund(&d, &refund).await;
    assert_eq!(lost.data["in_doubt"], json!(true));
    let retry = confirmed_refund(&d, &refund).await;
    assert!(retry.ok, "{retry:?}");
    assert_eq!(retry.data["remaining_refundable_cents"], 1);
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn an_in_doubt_call_still_answers_to_the_allowlist_and_the_loop_guard() {
    let shop = Arc::new(Shop::new());
    shop.lose_next_responses(1);
    let d = shop_dispatcher(&shop)
        .max_retries(0)
        .max_duplicate_calls(1)
        .build()
        .unwrap();
    let lost = confirmed_refund(&d, REFUND_ALL).await;
    assert_eq!(lost.data["in_doubt"], json!(true));
    let looped = in_default(&d, "refund_order", REFUND_ALL).await;
    assert_eq!(looped.code, Code::LoopDetected);

    let reader = toolcall::Caller::new("reader", Policy::new().allow(["get_order"]));
    let refused = in_default_with(&d, "refund_order", REFUND_ALL, |c| c.caller(&reader)).await;
    assert_eq!(refused.code, Code::ToolNotAllowed);
    assert_eq!(shop.applied_refunds(), 1);
}

/// A payment API that cannot deduplicate by key, but can be asked what it
/// did with one: "retrieve by idempotency key".
#[derive(Default)]
struct Gateway {
    charges: Mutex<HashMap<String, i64>>,
    runs: AtomicU32,
    /// Commit, then lose the answer.
    lose_after_commit: AtomicU32,
    /// Fail before committing anything.
    fail_before_commit: AtomicU32,
    /// The lookup itself fails.
    lookup_down: AtomicU32,
    lookups: AtomicU32,
}

fn take(flag: &AtomicU32) -> bool {
    flag.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Charges a card. Amount in cents.
#[tool(side_effect, reconcile = find_charge)]
async fn charge(
    ctx: &Ctx<Gateway>,
    /// The amount, in cents.
    cents: i64,
) -> Result<Value, ToolError> {
    let gateway = &ctx.state;
    if take(&gateway.fail_before_commit) {
        return Err(ToolError::transient("connection refused"));
    }
    gateway.runs.fetch_add(1, Ordering::SeqCst);
    gateway
        .charges
        .lock()
        .unwrap()
        .insert(ctx.idempotency_key.to_string(), cents);
    if take(&gateway.lose_after_commit) {
        return Err(ToolError::transient("gateway timeout"));
    }
    Ok(json!({"charged": cents}))
}

async fn find_charge(ctx: &Ctx<Gateway>, key: &str) -> Result<Option<Value>, ToolError> {
    ctx.state.lookups.fetch_add(1, Ordering::SeqCst);
    if take(&ctx.state.lookup_down) {
        return Err(ToolError::transient("lookup unavailable"));
    }
    let found = ctx.state.charges.lock().unwrap().get(key).copied();
    Ok(found.map(|cents| json!({"charged": cents})))
}

fn gateway_dispatcher(gateway: &Arc<Gateway>) -> Dispatcher<Gateway> {
    Dispatcher::builder(tools![charge].unwrap(), Arc::clone(gateway))
        .max_retries(0)
        .build()
        .unwrap()
}

/// A gateway `set` up to fail as a test needs, and its dispatcher.
fn gateway_where(set: impl FnOnce(&Gateway)) -> (Arc<Gateway>, Dispatcher<Gateway>) {
    let gateway = Arc::new(Gateway::default());
    set(&gateway);
    let d = gateway_dispatcher(&gateway);
    (gateway, d)
}

/// The one charge these tests make, of 500 cents: each identical to the
/// others, so that a retry is the same call.
async fn charge_500(d: &Dispatcher<Gateway>) -> ToolResult {
    in_default(d, "charge", r#"{"cents": 500}"#).await
}

/// A `claim_wait` beyond what an `Instant` holds (a host's "wait as long
/// as it takes") used to panic wherever a call waits for another: the
/// claim of a side effect, its resource locks, and the loop guard. It now
/// means no deadline.
#[tokio::test]
async fn a_claim_wait_of_any_length_never_overflows() {
    let (shop, d) = shop_with(|b| b.claim_wait(Duration::MAX));
    let refund = confirmed_refund(&d, REFUND_ALL).await;
    assert!(refund.ok && !refund.replayed, "{refund:?}");
    let again = confirmed_refund(&d, REFUND_ALL).await;
    assert!(again.ok && again.replayed, "{again:?}");
    assert_eq!(shop.applied_refunds(), 1);
    // The fourth identical lookup is a loop, answered at once.
    let mut codes = Vec::new();
    for _ in 0..4 {
        let lookup = in_default(&d, "get_order", r#"{"order_id": "ORD-1001"}"#).await;
        codes.push(lookup.code);
    }
    assert_eq!(codes[..3], [Code::Ok, Code::Ok, Code::Ok]);
    assert_eq!(codes[3], Code::LoopDetected);
}

/// Retry settings too large for the lease's arithmetic (it multiplied in
/// 32 bits, and `Duration * u32` panics on overflow) used to panic at the
/// first side effect with a timeout: they now give long bounds, and the
/// call runs, once.
#[tokio::test]
async fn large_retry_settings_bound_the_lease_without_overflowing() {
    let builders: [fn(DispatcherBuilder<Gateway>) -> DispatcherBuilder<Gateway>; 3] = [
        |b| b.max_retries(100_000).retry_backoff(Duration::ZERO),
        |b| b.max_retries(u32::MAX).retry_backoff(Duration::ZERO),
        |b| b.max_retries(2).retry_backoff(Duration::MAX),
    ];
    for (i, settings) in builders.into_iter().enumerate() {
        let gateway = Arc::new(Gateway::default());
        if i < 2 {
            // Two transient failures before it goes through: retried at once.
            gateway.fail_before_commit.store(2, Ordering::SeqCst);
        }
        let builder = Dispatcher::builder(tools![charge].unwrap(), Arc::clone(&gateway))
            .timeout(Some(Duration::from_secs(5)));
        let d = settings(builder).build().unwrap();
        let first = charge_500(&d).await;
        assert!(first.ok && !first.replayed, "settings {i}: {first:?}");
        let again = charge_500(&d).await;
        assert!(again.ok && again.replayed, "settings {i}: {again:?}");
        assert_eq!(gateway.runs.load(Ordering::SeqCst), 1, "settings {i}");
        assert_eq!(gateway.charges.lock().unwrap().len(), 1, "settings {i}");
    }
}

#[tokio::test]
async fn reconcile_turns_a_lost_answer_into_the_answer() {
    let (gateway, d) = gateway_where(|g| g.lose_after_commit.store(1, Ordering::SeqCst));
    let first = charge_500(&d).await;
    assert!(first.ok, "the lookup found the charge: {first:?}");
    assert_eq!(first.data["charged"], 500);
    assert_eq!(gateway.lookups.load(Ordering::SeqCst), 1);
    let again = charge_500(&d).await;
    assert!(again.replayed);
    assert_eq!(gateway.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reconcile_that_finds_nothing_means_not_done_and_the_call_is_free_again() {
    let (gateway, d) = gateway_where(|g| g.fail_before_commit.store(1, Ordering::SeqCst));
    let first = charge_500(&d).await;
    assert_eq!(first.code, Code::UpstreamUnavailable);
    assert!(
        !first.data.contains_key("in_doubt"),
        "the gateway says it did nothing: not in doubt: {first:?}"
    );
    assert_eq!(gateway.runs.load(Ordering::SeqCst), 0);
    let second = charge_500(&d).await;
    assert!(second.ok && !second.replayed, "{second:?}");
    assert_eq!(gateway.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_lookup_leaves_the_call_in_doubt_and_the_next_one_asks_again_before_running() {
    let (gateway, d) = gateway_where(|g| {
        g.lose_after_commit.store(1, Ordering::SeqCst);
        g.lookup_down.store(1, Ordering::SeqCst);
    });
    let first = charge_500(&d).await;
    assert_eq!(first.code, Code::UpstreamUnavailable);
    assert_eq!(first.data["in_doubt"], json!(true));
    // The gateway cannot deduplicate: running the charge again would charge
    // twice. The retry asks first, finds it, and answers with it.
    let second = charge_500(&d).await;
    assert!(second.ok, "{second:?}");
    assert_eq!(gateway.runs.load(Ordering::SeqCst), 1, "charged once");
    assert_eq!(gateway.lookups.load(Ordering::SeqCst), 2);
}

/// Writes a line, slowly; gives up after 50 ms. The log keeps one line per
/// idempotency key.
#[tool(side_effect, idempotent_backend, timeout_ms = 50)]
async fn slow_write(
    ctx: &Ctx<AtomicU32>,
    /// The line to write.
    line: String,
) -> Result<Value, Rejection> {
    ctx.state.fetch_add(1, Ordering::SeqCst);
    if ctx.state.load(Ordering::SeqCst) == 1 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(json!({"wrote": line}))
}

#[tokio::test]
async fn a_timeout_is_in_doubt_too() {
    let runs = Arc::new(AtomicU32::new(0));
    let d = Dispatcher::builder(tools![slow_write].unwrap(), Arc::clone(&runs))
        .build()
        .unwrap();
    let timed_out = in_default(&d, "slow_write", r#"{"line": "x"}"#).await;
    assert_eq!(timed_out.code, Code::Timeout);
    assert_eq!(timed_out.data["in_doubt"], json!(true));
    let again = in_default(&d, "slow_write", r#"{"line": "x"}"#).await;
    assert!(again.ok, "{again:?}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "run again, under the same key"
    );
}
