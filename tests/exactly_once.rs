//! Exactly once under concurrency, timeouts and slow humans: in-flight
//! claims, outcome-unknown records, and server-owned approvals. The backend
//! here counts every execution and does not deduplicate, so the counts below
//! are the pipeline's doing alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use orders::{Shop, get_order, refund_order};
use serde_json::{Value, json};
use toolcall::{
    Call, Caller, Code, Ctx, Decision, Dispatcher, MemoryAudit, Policy, Rejection, ToolResult,
    tool, tools,
};
use toolcall_testkit::answer::assert_code_says;
use toolcall_testkit::run::{all_at_once, block_on, on_threads};

/// A backend that counts executions and can be slow.
#[derive(Default)]
struct Counter {
    runs: AtomicU32,
    delay_ms: AtomicU32,
}

impl Counter {
    fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }
}

/// Sends money, slowly, with no deduplication of its own.
#[tool(side_effect, high_risk)]
async fn pay(
    ctx: &Ctx<Counter>,
    /// Who to pay, a payee id.
    to: String,
    /// The amount, in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    let run = ctx.state.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let delay = ctx.state.delay_ms.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(u64::from(delay))).await;
    Ok(json!({"to": to, "cents": cents, "run": run}))
}

/// Records a note, slowly; times out after 50 ms. Its backend keeps one
/// note per idempotency key, so a note in doubt may be sent again.
#[tool(side_effect, idempotent_backend, timeout_ms = 50)]
async fn note(
    ctx: &Ctx<Counter>,
    /// The note's text.
    text: String,
) -> Result<Value, Rejection> {
    ctx.state.runs.fetch_add(1, Ordering::SeqCst);
    let delay = ctx.state.delay_ms.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(u64::from(delay))).await;
    Ok(json!({"noted": text, "key": ctx.idempotency_key.to_string()}))
}

fn counter(delay_ms: u32) -> Arc<Counter> {
    let counter = Counter::default();
    counter.delay_ms.store(delay_ms, Ordering::SeqCst);
    Arc::new(counter)
}

const PAY: &str = r#"{"to": "ana", "cents": 2590}"#;

/// The payment, with the host's say-so: nothing stops it but its twins.
async fn pay_confirmed(d: &Dispatcher<Counter>, session: &str) -> ToolResult {
    d.execute(Call::new("pay", PAY).session(session).confirmed(true))
        .await
}

#[test]
fn identical_calls_at_the_same_moment_execute_once_and_all_get_the_result() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let backend = counter(100);
    let dispatcher = Arc::new(
        Dispatcher::builder(tools![pay].unwrap(), Arc::clone(&backend))
            .max_duplicate_calls(100)
            .max_steps(100)
            .build()
            .unwrap(),
    );
    let results: Vec<ToolResult> = runtime.block_on(all_at_once(16, || {
        let d = Arc::clone(&dispatcher);
        async move { pay_confirmed(&d, "s").await }
    }));
    assert_eq!(backend.runs(), 1, "sixteen identical calls, one execution");
    assert!(
        results.iter().all(|r| r.ok && r.data == results[0].data),
        "{results:?}"
    );
    assert_eq!(
        results.iter().filter(|r| !r.replayed).count(),
        1,
        "one ran, the others were replays"
    );
}

#[test]
fn threads_with_their_own_runtimes_share_one_dispatcher_and_still_execute_once() {
    let backend = counter(50);
    let dispatcher = Arc::new(
        Dispatcher::builder(tools![pay].unwrap(), Arc::clone(&backend))
            .max_duplicate_calls(100)
            .build()
            .unwrap(),
    );
    // Each thread runs the call on a runtime of its own.
    let results = on_threads(8, move |_| block_on(pay_confirmed(&dispatcher, "s")));
    assert_eq!(backend.runs(), 1);
    assert!(
        results.iter().all(|r| r.ok && r.data["run"] == 1),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waits_only_so_long_for_its_twin() {
    let backend = counter(400);
    let d = Arc::new(
        Dispatcher::builder(tools![pay].unwrap(), Arc::clone(&backend))
            .claim_wait(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    let first = tokio::spawn({
        let d = Arc::clone(&d);
        async move { pay_confirmed(&d, "default").await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = pay_confirmed(&d, "default").await;
    assert_eq!(second.code, Code::CallInProgress);
    assert!(first.await.unwrap().ok);
    assert_eq!(backend.runs(), 1);
    let third = pay_confirmed(&d, "default").await;
    assert!(third.replayed, "once it completed, the twin is a replay");
}

#[tokio::test]
async fn a_timeout_leaves_the_outcome_unknown_and_the_next_call_reuses_the_key() {
    let backend = counter(200);
    let d = Dispatcher::builder(tools![note].unwrap(), Arc::clone(&backend))
        .build()
        .unwrap();
    let note = || d.execute(Call::new("note", r#"{"text": "hi"}"#).session("default"));
    let timed_out = note().await;
    assert_eq!(timed_out.code, Code::Timeout);
    assert_eq!(backend.runs(), 1);
    backend.delay_ms.store(0, Ordering::SeqCst);
    let again = note().await;
    assert!(again.ok && !again.replayed, "{again:?}");
    assert_eq!(backend.runs(), 2, "sent to the backend again...");
    let third = note().await;
    assert!(third.replayed, "...and, once it completed, replayed");
    assert_eq!(backend.runs(), 2);
}

// ---------------------------------------------------------------- approvals

fn pay_dispatcher(backend: &Arc<Counter>) -> Dispatcher<Counter> {
    Dispatcher::builder(tools![pay].unwrap(), Arc::clone(backend))
        .build()
        .unwrap()
}

/// The code of an approval of `id` in session `s`.
async fn approved(d: &Dispatcher<Counter>, id: &str) -> Code {
    d.approve(Decision::new(id, "s")).await.code
}

async fn ask(d: &Dispatcher<Counter>, session: &str, args: &str) -> String {
    let asked = d.execute(Call::new("pay", args).session(session)).await;
    assert_eq!(asked.code, Code::ConfirmationRequired);
    assert_eq!(
        asked.data["pending"],
        serde_json::from_str::<Value>(args).unwrap()
    );
    asked
        .question_id
        .expect("a question id comes with CONFIRMATION_REQUIRED")
}

#[tokio::test]
async fn an_approval_runs_the_exact_call_once() {
    let backend = counter(0);
    let audit = MemoryAudit::new();
    let d = Dispatcher::builder(tools![pay].unwrap(), Arc::clone(&backend))
        .audit(audit.clone())
        .build()
        .unwrap();
    let id = ask(&d, "s", PAY).await;
    let approved = d.approve(Decision::new(&id, "s").by("ana@support")).await;
    assert!(approved.ok, "{approved:?}");
    assert_eq!(approved.data["cents"], 2590);
    assert_eq!(backend.runs(), 1);
    // Single use: a second approval runs nothing, and is answered with what
    // came of the first (never "nothing was done").
    let reused = d.approve(Decision::new(&id, "s").by("ana@support")).await;
    assert!(reused.ok && reused.replayed, "{reused:?}");
    assert_eq!(backend.runs(), 1, "an approval is single use");
    let records = audit.records();
    assert_eq!(records.len(), 3);
    assert_eq!(records[1].approved_by.as_deref(), Some("ana@support"));
    assert!(records[1].confirmed && records[1].ok);
}

#[tokio::test]
async fn forged_cross_session_cross_caller_and_swapped_approvals_execute_nothing() {
    let backend = counter(0);
    let d = pay_dispatcher(&backend);
    let id = ask(&d, "s", PAY).await;
    let forged = "0123456789abcdef0123456789abcdef";
    assert_eq!(
        d.approve(Decision::new(forged, "s")).await.code,
        Code::ConfirmationInvalid
    );
    assert_eq!(
        d.approve(Decision::new(&id, "other-session")).await.code,
        Code::ConfirmationInvalid
    );
    let stranger = Caller::new("stranger", Policy::new().allow(["pay"]));
    assert_eq!(
        d.approve(Decision::new(&id, "s").caller(&stranger))
            .await
            .code,
        Code::ConfirmationInvalid
    );
    assert_eq!(
        d.approve(Decision::new(&id, "s").tool("refund_order"))
            .await
            .code,
        Code::ConfirmationInvalid
    );
    // The model re-sends the call with the id, but with other arguments.
    let swapped = r#"{"to": "mallory", "cents": 2590}"#;
    let result = d
        .execute(Call::new("pay", swapped).session("s").approval(&id))
        .await;
    assert_eq!(result.code, Code::ConfirmationInvalid);
    assert_eq!(backend.runs(), 0);
    // None of that used the approval up: the real one still works, once.
    let result = d
        .execute(Call::new("pay", PAY).session("s").approval(&id))
        .await;
    assert!(result.ok, "{result:?}");
    assert_eq!(backend.runs(), 1);
}

#[tokio::test]
async fn an_expired_approval_executes_nothing() {
    let backend = counter(0);
    let d = Dispatcher::builder(tools![pay].unwrap(), Arc::clone(&backend))
        .approval_ttl(Duration::from_millis(20))
        .build()
        .unwrap();
    let id = ask(&d, "s", PAY).await;
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert_eq!(approved(&d, &id).await, Code::ConfirmationExpired);
    // Still expired the second time: a take that could not carry the
    // question out leaves it as it was.
    assert_eq!(approved(&d, &id).await, Code::ConfirmationExpired);
    assert_eq!(backend.runs(), 0);
}

#[tokio::test]
async fn a_denial_tells_the_model_why_and_executes_nothing() {
    let backend = counter(0);
    let d = pay_dispatcher(&backend);
    let id = ask(&d, "s", PAY).await;
    let denied = d
        .deny(
            Decision::new(&id, "s").by("bob"),
            "the customer already got a voucher",
        )
        .await;
    assert_code_says(
        &denied,
        Code::ConfirmationDenied,
        "the customer already got a voucher",
    );
    assert_eq!(denied.tool, "pay");
    // A denial is final: an approval after it is answered with it.
    assert_eq!(approved(&d, &id).await, Code::ConfirmationDenied);
    assert_eq!(backend.runs(), 0);
}

#[tokio::test]
async fn the_key_can_come_from_the_approval_for_legitimate_repeats() {
    let backend = counter(0);
    let d = Dispatcher::builder(tools![pay].unwrap(), Arc::clone(&backend))
        .max_duplicate_calls(10)
        .build()
        .unwrap();
    for _ in 0..2 {
        let id = ask(&d, "s", PAY).await;
        let paid = d
            .approve(Decision::new(&id, "s").key_from_approval(true))
            .await;
        assert!(paid.ok && !paid.replayed, "{paid:?}");
    }
    assert_eq!(backend.runs(), 2, "two approvals, two payments");
    let id = ask(&d, "s", PAY).await;
    assert!(d.approve(Decision::new(&id, "s")).await.ok);
    let repeat = d.execute(Call::new("pay", PAY).session("s")).await;
    assert!(
        repeat.replayed,
        "keyed by arguments, the repeat is a replay, asked of nobody: {repeat:?}"
    );
    assert_eq!(backend.runs(), 3);
}

#[tokio::test]
async fn an_approval_re_runs_the_check_against_the_current_state() {
    let shop = Arc::new(Shop::new());
    let policy = Policy::new()
        .allow(["get_order", "refund_order"])
        .limit("max_refund_cents", 50_000);
    let d = Dispatcher::builder(tools![get_order, refund_order].unwrap(), Arc::clone(&shop))
        .part(Shop::reader)
        .policy(policy)
        .build()
        .unwrap();
    let big = r#"{"order_id": "ORD-1001", "amount_cents": 10000, "currency": "BRL", "reason": "damaged"}"#;
    let asked = d.execute(Call::new("refund_order", big).session("s")).await;
    let id = asked.question_id.unwrap();
    // Meanwhile another refund drains the order.
    let other = r#"{"order_id": "ORD-1001", "amount_cents": 5000, "currency": "BRL", "reason": "not_delivered"}"#;
    assert!(
        d.execute(
            Call::new("refund_order", other)
                .session("t")
                .confirmed(true)
        )
        .await
        .ok
    );
    let approved = d.approve(Decision::new(&id, "s")).await;
    assert_eq!(approved.code, "AMOUNT_EXCEEDS_REFUNDABLE");
    assert_eq!(shop.applied_refunds(), 1, "only the other refund happened");
}

/// Reads a balance, slowly; refuses an account it does not know.
#[tool(check = known_account)]
async fn balance(
    ctx: &Ctx<Counter>,
    /// The account, `ACC-` and digits.
    account: String,
) -> Result<Value, Rejection> {
    let run = ctx.state.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let delay = ctx.state.delay_ms.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(u64::from(delay))).await;
    Ok(json!({"account": account, "run": run}))
}

fn known_account(args: &BalanceArgs, _: &Ctx<Counter>) -> Result<(), Rejection> {
    if args.account.starts_with("ACC-") {
        Ok(())
    } else {
        Err(Rejection::new("NO_SUCH_ACCOUNT", "No such account."))
    }
}

// A read takes the read-only lane: what it is owed there is what it was owed
// on the driver's way. Identical reads sent at once over their bound wait for
// the ones before them and are loops only once those answered; the business
// check still runs; and each call has its audit record.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn reads_at_once_are_loops_only_after_the_first_answered() {
    let backend = counter(150);
    let audit = MemoryAudit::new();
    let d = Arc::new(
        Dispatcher::builder(tools![balance].unwrap(), Arc::clone(&backend))
            .max_duplicate_calls(1)
            .audit(audit.clone())
            .build()
            .unwrap(),
    );
    let read = r#"{"account": "ACC-7"}"#;
    let answers = all_at_once(3, || {
        let d = Arc::clone(&d);
        async move { d.execute(Call::new("balance", read).session("s")).await }
    })
    .await;
    let mut codes: Vec<String> = answers.iter().map(|r| r.code.to_string()).collect();
    codes.sort();
    assert_eq!(
        codes,
        ["LOOP_DETECTED", "LOOP_DETECTED", "OK"],
        "{answers:?}"
    );
    assert_eq!(backend.runs(), 1, "one read ran");
    let audited: Vec<String> = audit.records().iter().map(|r| r.code.to_string()).collect();
    assert_eq!(audited.len(), 3, "{audited:?}");
    assert_eq!(
        audited[0], "OK",
        "no loop before an answer existed: {audited:?}"
    );

    let refused = d
        .execute(Call::new("balance", r#"{"account": "X-1"}"#).session("s"))
        .await;
    assert_eq!(refused.code, "NO_SUCH_ACCOUNT", "{refused:?}");
    assert_eq!(backend.runs(), 1, "the check refused it before the handler");
    assert_eq!(audit.records().len(), 4);
}
