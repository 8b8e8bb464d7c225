//! The promises where real agents break them: calls whose outcome is
//! unknown, check-then-act races, a person's yes after the model asked
//! several times, limits that must not depend on the input's form, and
//! echo that must not grow with the input. The assertion that matters is
//! how many side effects the backend saw.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orders::{Shop, get_order, refund_order};
use serde_json::{Value, json};
use toolcall::store::MemoryStore;
use toolcall::{
    Call, Code, Ctx, Dispatcher, DispatcherBuilder, MemoryAudit, Policy, REDACTED, Registry,
    Rejection, ToolError, ToolResult, tool, tools,
};
use toolcall_testkit::bank::Bank;

const REFUND_ALL: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 12000, "currency": "BRL", "reason": "damaged"}"#;

fn shop_dispatcher(shop: &Arc<Shop>) -> DispatcherBuilder<Shop> {
    Dispatcher::builder(tools![get_order, refund_order].unwrap(), Arc::clone(shop))
        .part(Shop::reader)
        .policy(
            Policy::new()
                .allow(["get_order", "refund_order"])
                .limit("max_refund_cents", 50_000),
        )
        .retry_backoff(Duration::ZERO)
}

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

    let lost = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .confirmed(true),
        )
        .await;
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
    let retry = d
        .execute(Call::new("refund_order", REFUND_ALL).session("default"))
        .await;
    assert!(retry.ok && !retry.replayed, "{retry:?}");
    assert_eq!(retry.data["remaining_refundable_cents"], 0);
    assert_eq!(shop.applied_refunds(), 1, "one refund in all");
    assert_eq!(shop.order("ORD-1001").unwrap().refunded_cents, 12_000);

    let again = d
        .execute(Call::new("refund_order", REFUND_ALL).session("default"))
        .await;
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
    let lost = d
        .execute(
            Call::new("refund_order", refund.as_str())
                .session("default")
                .confirmed(true),
        )
        .await;
    assert_eq!(lost.data["in_doubt"], json!(true));
    let retry = d
        .execute(
            Call::new("refund_order", refund.as_str())
                .session("default")
                .confirmed(true),
        )
        .await;
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
    let lost = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .confirmed(true),
        )
        .await;
    assert_eq!(lost.data["in_doubt"], json!(true));
    let looped = d
        .execute(Call::new("refund_order", REFUND_ALL).session("default"))
        .await;
    assert_eq!(looped.code, Code::LoopDetected);

    let reader = toolcall::Caller::new("reader", Policy::new().allow(["get_order"]));
    let refused = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .caller(&reader),
        )
        .await;
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

/// A `claim_wait` beyond what an `Instant` holds (a host's "wait as long
/// as it takes") used to panic wherever a call waits for another: the
/// claim of a side effect, its resource locks, and the loop guard. It now
/// means no deadline.
#[tokio::test]
async fn a_claim_wait_of_any_length_never_overflows() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop)
        .claim_wait(Duration::MAX)
        .build()
        .unwrap();
    let refund = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .confirmed(true),
        )
        .await;
    assert!(refund.ok && !refund.replayed, "{refund:?}");
    let again = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .confirmed(true),
        )
        .await;
    assert!(again.ok && again.replayed, "{again:?}");
    assert_eq!(shop.applied_refunds(), 1);
    // The fourth identical lookup is a loop, answered at once.
    let mut codes = Vec::new();
    for _ in 0..4 {
        let lookup = d
            .execute(Call::new("get_order", r#"{"order_id": "ORD-1001"}"#).session("default"))
            .await;
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
        let first = d
            .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
            .await;
        assert!(first.ok && !first.replayed, "settings {i}: {first:?}");
        let again = d
            .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
            .await;
        assert!(again.ok && again.replayed, "settings {i}: {again:?}");
        assert_eq!(gateway.runs.load(Ordering::SeqCst), 1, "settings {i}");
        assert_eq!(gateway.charges.lock().unwrap().len(), 1, "settings {i}");
    }
}

#[tokio::test]
async fn reconcile_turns_a_lost_answer_into_the_answer() {
    let gateway = Arc::new(Gateway::default());
    gateway.lose_after_commit.store(1, Ordering::SeqCst);
    let d = gateway_dispatcher(&gateway);
    let first = d
        .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
        .await;
    assert!(first.ok, "the lookup found the charge: {first:?}");
    assert_eq!(first.data["charged"], 500);
    assert_eq!(gateway.lookups.load(Ordering::SeqCst), 1);
    let again = d
        .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
        .await;
    assert!(again.replayed);
    assert_eq!(gateway.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reconcile_that_finds_nothing_means_not_done_and_the_call_is_free_again() {
    let gateway = Arc::new(Gateway::default());
    gateway.fail_before_commit.store(1, Ordering::SeqCst);
    let d = gateway_dispatcher(&gateway);
    let first = d
        .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
        .await;
    assert_eq!(first.code, Code::UpstreamUnavailable);
    assert!(
        !first.data.contains_key("in_doubt"),
        "the gateway says it did nothing: not in doubt: {first:?}"
    );
    assert_eq!(gateway.runs.load(Ordering::SeqCst), 0);
    let second = d
        .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
        .await;
    assert!(second.ok && !second.replayed, "{second:?}");
    assert_eq!(gateway.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failed_lookup_leaves_the_call_in_doubt_and_the_next_one_asks_again_before_running() {
    let gateway = Arc::new(Gateway::default());
    gateway.lose_after_commit.store(1, Ordering::SeqCst);
    gateway.lookup_down.store(1, Ordering::SeqCst);
    let d = gateway_dispatcher(&gateway);
    let first = d
        .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
        .await;
    assert_eq!(first.code, Code::UpstreamUnavailable);
    assert_eq!(first.data["in_doubt"], json!(true));
    // The gateway cannot deduplicate: running the charge again would charge
    // twice. The retry asks first, finds it, and answers with it.
    let second = d
        .execute(Call::new("charge", r#"{"cents": 500}"#).session("default"))
        .await;
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
    let timed_out = d
        .execute(Call::new("slow_write", r#"{"line": "x"}"#).session("default"))
        .await;
    assert_eq!(timed_out.code, Code::Timeout);
    assert_eq!(timed_out.data["in_doubt"], json!(true));
    let again = d
        .execute(Call::new("slow_write", r#"{"line": "x"}"#).session("default"))
        .await;
    assert!(again.ok, "{again:?}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "run again, under the same key"
    );
}

// ------------------------------------------------ confirmation is not a loop

#[tokio::test]
async fn a_persons_yes_after_the_model_asked_three_times_runs_the_call() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    for _ in 0..3 {
        let asked = d
            .execute(Call::new("refund_order", REFUND_ALL).session("default"))
            .await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
    }
    let approved = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .confirmed(true),
        )
        .await;
    assert!(approved.ok, "{approved:?}");
    assert_eq!(shop.applied_refunds(), 1);

    // Repeats of the call that ran still count: replayed, then the guard.
    assert!(
        d.execute(Call::new("refund_order", REFUND_ALL).session("default"))
            .await
            .replayed
    );
    assert!(
        d.execute(Call::new("refund_order", REFUND_ALL).session("default"))
            .await
            .replayed
    );
    assert_eq!(
        d.execute(Call::new("refund_order", REFUND_ALL).session("default"))
            .await
            .code,
        Code::LoopDetected
    );
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn an_approval_by_id_after_many_asks_runs_once() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).max_steps(100).build().unwrap();
    let mut last = None;
    for _ in 0..5 {
        let asked = d
            .execute(Call::new("refund_order", REFUND_ALL).session("default"))
            .await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
        last = asked.question_id;
    }
    let id = last.unwrap();
    let ran = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .approval(&id),
        )
        .await;
    assert!(ran.ok, "{ran:?}");
    let reused = d
        .execute(
            Call::new("refund_order", REFUND_ALL)
                .session("default")
                .approval(&id),
        )
        .await;
    // The call completed: its twin is answered from the store before the
    // approval is looked at, and nothing runs again.
    assert!(reused.ok && reused.replayed, "{reused:?}");
    assert_eq!(shop.applied_refunds(), 1);
}

// ------------------------------------------------- no check-then-act gap

// The kit's Bank, as an account whose backend does NOT enforce its own
// invariant: only the pipeline stands between two withdrawals and an
// overdraft. Its transfers count the withdrawals really made.

fn check_funds(args: &WithdrawArgs, ctx: &Ctx<Bank>) -> Result<(), Rejection> {
    funds(args.cents, ctx)
}

fn check_funds_unlocked(args: &WithdrawUnlockedArgs, ctx: &Ctx<Bank>) -> Result<(), Rejection> {
    funds(args.cents, ctx)
}

fn funds(cents: i64, ctx: &Ctx<Bank>) -> Result<(), Rejection> {
    let balance = ctx.state.balance();
    if cents > balance {
        return Err(Rejection::new(
            "INSUFFICIENT_FUNDS",
            format!("Only {balance} left."),
        ));
    }
    Ok(())
}

async fn debit(ctx: &Ctx<Bank>, cents: i64) -> Value {
    // The gap: the backend is slow between the check and the write.
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.state.balance_cents.fetch_sub(cents, Ordering::SeqCst);
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    json!({"withdrew": cents})
}

/// Withdraws from an account; one at a time per account.
#[tool(side_effect, check = check_funds)]
async fn withdraw(
    ctx: &Ctx<Bank>,
    /// The account.
    #[arg(resource)]
    account: String,
    /// Cents.
    cents: i64,
) -> Result<Value, Rejection> {
    let _ = account;
    Ok(debit(ctx, cents).await)
}

/// Withdraws from an account, with nothing ordering calls on one account.
#[tool(side_effect, check = check_funds_unlocked)]
async fn withdraw_unlocked(
    ctx: &Ctx<Bank>,
    /// The account.
    account: String,
    /// Cents.
    cents: i64,
) -> Result<Value, Rejection> {
    let _ = account;
    Ok(debit(ctx, cents).await)
}

/// One replica of the bank: `registry` over `bank`, configured by
/// `configure`, on the store every replica shares.
fn bank_replica(
    registry: Registry,
    bank: &Arc<Bank>,
    store: &Arc<MemoryStore>,
    configure: impl FnOnce(DispatcherBuilder<Bank>) -> DispatcherBuilder<Bank>,
) -> Arc<Dispatcher<Bank, Arc<MemoryStore>>> {
    Arc::new(
        configure(Dispatcher::builder(registry, Arc::clone(bank)))
            .store(Arc::clone(store))
            .build()
            .unwrap(),
    )
}

/// Two withdrawals of 7000 and 6000 from a balance of 12000, from two
/// dispatchers (two replicas) over one store, at the same moment.
async fn race(tool: &'static str) -> (Arc<Bank>, Vec<ToolResult>) {
    let bank = Bank::new();
    bank.balance_cents.store(12_000, Ordering::SeqCst);
    let store = Arc::new(MemoryStore::default());
    let replica = || {
        bank_replica(
            tools![withdraw, withdraw_unlocked].unwrap(),
            &bank,
            &store,
            |b| b,
        )
    };
    let (a, b) = (replica(), replica());
    let first = tokio::spawn(async move {
        a.execute(Call::new(tool, r#"{"account": "acc-1", "cents": 7000}"#).session("default"))
            .await
    });
    let second = tokio::spawn(async move {
        b.execute(Call::new(tool, r#"{"account": "acc-1", "cents": 6000}"#).session("default"))
            .await
    });
    let results = vec![first.await.unwrap(), second.await.unwrap()];
    (bank, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_resource_two_checks_pass_before_either_acts() {
    // The race is real: this is what `#[arg(resource)]` prevents.
    let (bank, results) = race("withdraw_unlocked").await;
    assert!(results.iter().all(|r| r.ok), "{results:?}");
    assert_eq!(bank.balance(), -1_000, "overdrawn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_on_one_resource_run_their_check_and_handler_one_at_a_time() {
    let (bank, results) = race("withdraw").await;
    assert_eq!(bank.transfers(), 1, "{results:?}");
    assert!(bank.balance() >= 0);
    let refused: Vec<_> = results.iter().filter(|r| !r.ok).collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].code, "INSUFFICIENT_FUNDS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_resources_do_not_wait() {
    let bank = Bank::new();
    bank.balance_cents.store(100_000, Ordering::SeqCst);
    let d = Arc::new(
        Dispatcher::builder(tools![withdraw].unwrap(), Arc::clone(&bank))
            .build()
            .unwrap(),
    );
    let started = std::time::Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let d = Arc::clone(&d);
            tokio::spawn(async move {
                let args = format!(r#"{{"account": "acc-{i}", "cents": 10}}"#);
                d.execute(Call::new("withdraw", args.as_str()).session("default"))
                    .await
            })
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap().ok);
    }
    // Four accounts, 50 ms each, in parallel: well under the 200 ms they
    // would take one at a time.
    assert!(
        started.elapsed() < Duration::from_millis(190),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_held_too_long_is_busy_and_nothing_runs() {
    let bank = Bank::new();
    bank.balance_cents.store(100_000, Ordering::SeqCst);
    let store = Arc::new(MemoryStore::default());
    let dispatcher = |wait| {
        bank_replica(tools![withdraw].unwrap(), &bank, &store, |b| {
            b.claim_wait(wait)
        })
    };
    let patient = dispatcher(Duration::from_secs(10));
    let hasty = dispatcher(Duration::from_millis(5));
    let first = tokio::spawn(async move {
        patient
            .execute(Call::new("withdraw", r#"{"account": "a", "cents": 1}"#).session("default"))
            .await
    });
    tokio::time::sleep(Duration::from_millis(15)).await;
    let busy = hasty
        .execute(Call::new("withdraw", r#"{"account": "a", "cents": 2}"#).session("default"))
        .await;
    assert_eq!(busy.code, Code::ResourceBusy, "{busy:?}");
    assert!(first.await.unwrap().ok);
    assert_eq!(bank.transfers(), 1);
}

#[test]
fn the_example_backend_refuses_a_refund_beyond_what_is_left() {
    let shop = Shop::new();
    assert_eq!(shop.refund("ORD-1001", 7000, "k1"), Ok(5000));
    assert_eq!(
        shop.refund("ORD-1001", 6000, "k2"),
        Err(orders::BackendError::ExceedsRefundable {
            refundable_cents: 5000
        })
    );
    assert_eq!(shop.order("ORD-1001").unwrap().refunded_cents, 7000);
    assert_eq!(shop.applied_refunds(), 1);
}

// ------------------------------------------------------- a live claim

/// Runs for a long time, counting its executions.
#[tool(side_effect)]
async fn long_job(
    ctx: &Ctx<AtomicU32>,
    /// The job's name.
    name: String,
) -> Result<Value, Rejection> {
    ctx.state.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(600)).await;
    Ok(json!({"done": name}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_outlives_its_lease_keeps_its_claim() {
    let runs = Arc::new(AtomicU32::new(0));
    let store = Arc::new(MemoryStore::default());
    let replica = || {
        Arc::new(
            Dispatcher::builder(tools![long_job].unwrap(), Arc::clone(&runs))
                .store(Arc::clone(&store))
                .claim_lease(Duration::from_millis(150))
                .build()
                .unwrap(),
        )
    };
    let (a, b) = (replica(), replica());
    let first = tokio::spawn(async move {
        a.execute(Call::new("long_job", r#"{"name": "x"}"#).session("default"))
            .await
    });
    // Long past the 150 ms lease: without renewals the key would be free.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let second = b
        .execute(Call::new("long_job", r#"{"name": "x"}"#).session("default"))
        .await;
    let first = first.await.unwrap();
    assert!(first.ok && !first.replayed, "{first:?}");
    assert!(
        second.ok && second.replayed,
        "it waited and replayed: {second:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Withdraws slowly: far longer than the lease of its account's lock.
#[tool(side_effect)]
async fn slow_withdraw(
    ctx: &Ctx<Bank>,
    /// The account.
    #[arg(resource)]
    account: String,
    /// Cents.
    cents: i64,
) -> Result<Value, Rejection> {
    let _ = account;
    tokio::time::sleep(Duration::from_millis(600)).await;
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    Ok(json!({"withdrew": cents}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_outlives_its_lease_keeps_its_resource_locked() {
    // The renewals start only once the handler did not finish at its first
    // poll: they must still start, and keep the lock past its lease.
    let bank = Bank::new();
    let store = Arc::new(MemoryStore::default());
    let replica = |wait| {
        bank_replica(tools![slow_withdraw].unwrap(), &bank, &store, |b| {
            b.claim_lease(Duration::from_millis(150)).claim_wait(wait)
        })
    };
    let (a, b) = (
        replica(Duration::from_secs(5)),
        replica(Duration::from_millis(50)),
    );
    let first = tokio::spawn(async move {
        a.execute(Call::new("slow_withdraw", r#"{"account": "a", "cents": 1}"#).session("default"))
            .await
    });
    // Long past the 150 ms lease: without renewals the lock would be free.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let other = b
        .execute(Call::new("slow_withdraw", r#"{"account": "a", "cents": 2}"#).session("default"))
        .await;
    assert_eq!(other.code, Code::ResourceBusy, "{other:?}");
    let first = first.await.unwrap();
    assert!(first.ok, "{first:?}");
    assert_eq!(bank.transfers(), 1);
}

// ------------------------------------------- one set of limits, bounded echo

#[tokio::test]
async fn parsed_arguments_meet_the_same_limits_as_text() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let huge = json!({"order_id": "O".repeat(200_000)});
    let result = d
        .execute(Call::new("get_order", &huge).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidJson);
    assert!(result.to_model_text().len() < 1_000);

    let mut deep = json!("ORD-1001");
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let deep = json!({"order_id": deep});
    assert_eq!(
        d.execute(Call::new("get_order", &deep).session("default"))
            .await
            .code,
        Code::InvalidJson
    );
}

#[tokio::test]
async fn an_enormous_tool_name_is_not_echoed_whole() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let d = shop_dispatcher(&shop).audit(audit.clone()).build().unwrap();
    let name = "x".repeat(200_000);
    let result = d.execute(Call::new(&name, "{}").session("default")).await;
    assert_eq!(result.code, Code::UnknownTool);
    let text = result.to_model_text();
    assert!(text.len() < 1_000, "{} bytes", text.len());
    let record = &audit.records()[0];
    assert!(record.tool.len() < 300);
    assert_eq!(record.cut.len(), 1);
    assert_eq!(record.cut[0].field, "tool");
    assert_eq!(record.cut[0].bytes, 200_000);
    assert_eq!(record.cut[0].sha256.len(), 64);
}

#[tokio::test]
async fn over_limit_arguments_are_cut_in_the_audit_with_their_size_and_digest() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let d = shop_dispatcher(&shop).audit(audit.clone()).build().unwrap();
    let raw = format!(r#"{{"order_id": "{}"}}"#, "O".repeat(100_000));
    let result = d
        .execute(Call::new("get_order", raw.as_str()).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidJson);
    let record = &audit.records()[0];
    assert!(record.arguments.len() < 1_200, "{}", record.arguments.len());
    assert_eq!(record.cut[0].field, "arguments");
    assert_eq!(record.cut[0].bytes, raw.len() as u64);
}

#[tokio::test]
async fn a_flood_of_unknown_or_long_members_gets_a_bounded_answer() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let mut flood = serde_json::Map::new();
    for i in 0..3_000 {
        flood.insert(format!("field_{i}"), json!(i));
    }
    flood.insert("order_id".into(), json!("ORD-1001"));
    let result = d
        .execute(Call::new("get_order", &Value::Object(flood)).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidArguments);
    assert!(
        result.message.contains("more problems"),
        "{}",
        result.message
    );
    assert!(result.message.len() < 4_000, "{}", result.message.len());

    let long_value = json!({"order_id": "ORD-".repeat(10_000)});
    let result = d
        .execute(Call::new("get_order", &long_value).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidArguments);
    assert!(result.message.len() < 1_000, "{}", result.message.len());
    assert!(
        result.message.contains("Order id"),
        "the hint stays: {}",
        result.message
    );
}

// ------------------------------------------------------ sensitive values

/// A card; its number is never kept.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Card {
    /// The card number.
    #[schemars(extend("writeOnly" = true))]
    pub number: String,
    /// The brand.
    pub brand: String,
}

/// Pays with a card and e-mails a receipt.
#[tool(side_effect)]
fn pay_card(
    /// The cards to charge, in order.
    cards: Vec<Card>,
    /// Where the receipt goes.
    #[arg(sensitive)]
    email: String,
) -> Result<Value, Rejection> {
    Ok(
        json!({"receipt_to": email, "charged": cards.iter().map(|c| &c.number[c.number.len() - 4..]).collect::<Vec<_>>(), "echo": cards[0].number}),
    )
}

#[tokio::test]
async fn sensitive_values_are_redacted_at_any_depth_in_the_audit_and_the_stored_result() {
    let audit = MemoryAudit::new();
    let store = Arc::new(MemoryStore::default());
    let d = Dispatcher::builder(tools![pay_card].unwrap(), Arc::new(()))
        .audit(audit.clone())
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let args = r#"{"cards": [{"number": "4111111111111111", "brand": "visa"}], "email": "ana@example.com"}"#;
    let first = d
        .execute(Call::new("pay_card", args).session("default"))
        .await;
    assert!(first.ok, "{first:?}");
    assert_eq!(
        first.data["receipt_to"], "ana@example.com",
        "the model gets its answer"
    );

    for record in audit.records() {
        assert!(
            !record.arguments.contains("4111111111111111"),
            "{}",
            record.arguments
        );
        assert!(
            !record.arguments.contains("ana@example.com"),
            "{}",
            record.arguments
        );
        assert!(
            record.arguments.contains("visa"),
            "the rest is kept: {}",
            record.arguments
        );
    }

    // The stored copy, which replays answer from, holds neither.
    let replay = d
        .execute(Call::new("pay_card", args).session("default"))
        .await;
    assert!(replay.replayed);
    let stored = serde_json::to_string(&replay).unwrap();
    assert!(!stored.contains("4111111111111111"), "{stored}");
    assert!(!stored.contains("ana@example.com"), "{stored}");
    assert_eq!(
        replay.data["charged"],
        json!(["1111"]),
        "what is not secret stays"
    );

    // A nested sensitive value in arguments that fail validation is
    // redacted too.
    let bad =
        r#"{"cards": [{"number": "5500000000000004", "brand": 7}], "email": "ana@example.com"}"#;
    let rejected = d
        .execute(Call::new("pay_card", bad).session("default"))
        .await;
    assert_eq!(rejected.code, Code::InvalidArguments);
    let last = audit.records().pop().unwrap();
    assert!(
        !last.arguments.contains("5500000000000004"),
        "{}",
        last.arguments
    );
}

#[tokio::test]
async fn the_audit_keeps_a_rejected_calls_problems_but_no_sensitive_value_they_quote() {
    let audit = MemoryAudit::new();
    let d = Dispatcher::builder(tools![pay_card].unwrap(), Arc::new(()))
        .audit(audit.clone())
        .build()
        .unwrap();
    let bad = r#"{"cards": [{"number": 5500000000000004, "brand": "visa"}], "email": 912345678, "tip": 1}"#;
    let rejected = d
        .execute(Call::new("pay_card", bad).session("default"))
        .await;
    assert_eq!(rejected.code, Code::InvalidArguments);
    assert!(
        rejected.message.contains("5500000000000004") && rejected.message.contains("912345678"),
        "the model is told what it sent: {}",
        rejected.message
    );

    let record = audit.records().pop().unwrap();
    let paths: Vec<&str> = record.problems.iter().map(|p| p.path.as_ref()).collect();
    assert_eq!(paths, ["cards[0].number", "email", "tip"], "{record:?}");
    assert_eq!(record.problems[0].problem, REDACTED, "a writeOnly value");
    assert_eq!(
        record.problems[1].problem, REDACTED,
        "a sensitive parameter"
    );
    assert!(
        record.problems[2].problem.contains("unknown field"),
        "a member that is no field names no value: {:?}",
        record.problems[2]
    );
    assert_eq!(record.problems[1].description, "Where the receipt goes.");
    let line = serde_json::to_string(&record).unwrap();
    assert!(!line.contains("5500000000000004"), "{line}");
    assert!(!line.contains("912345678"), "{line}");
}
