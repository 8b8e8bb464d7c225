//! Resources: checks and handlers on one resource run one at a time, other
//! resources do not wait, a resource held too long is busy, and a handler
//! that outlives its lease keeps its claim and its locks.

use super::*;

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
    counted(&ctx.state.transfers, json!({"withdrew": cents}))
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
