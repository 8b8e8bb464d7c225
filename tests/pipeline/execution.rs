//! Execution: retries under the same key, bounded, with growing backoff;
//! rejections and bugs never retried; a panic is an internal error; session
//! budgets, one audit record per call, and the model's text.

use super::*;

#[tokio::test]
async fn exhausted_retries_leave_the_outcome_to_the_backends_key() {
    let shop = Arc::new(Shop::new());
    shop.lose_next_responses(1);
    let d = shop_dispatcher(&shop).max_retries(0).build().unwrap();
    let lost = confirmed(&d, "refund_order", REFUND).await;
    assert_eq!(lost.code, Code::UpstreamUnavailable);
    assert_eq!(
        shop.applied_refunds(),
        1,
        "the backend committed before the answer was lost"
    );
    // Not a completed call, so not replayed: it runs again, under the same
    // key, and the backend recognises it.
    let again = confirmed(&d, "refund_order", REFUND).await;
    assert!(again.ok && !again.replayed, "{again:?}");
    assert_eq!(again.data["remaining_refundable_cents"], 12_000 - 2590);
    assert_eq!(shop.applied_refunds(), 1);
    assert_eq!(shop.order("ORD-1001").unwrap().refunded_cents, 2590);
}

#[tokio::test]
async fn sessions_have_their_own_budget_and_keys() {
    let (shop, d) = shop_with(|b| b.max_steps(1));
    let a = confirmed_in(&d, "a", "refund_order", REFUND).await;
    let b = confirmed_in(&d, "b", "refund_order", REFUND).await;
    assert!(a.ok && b.ok && !b.replayed);
    assert_eq!(
        shop.applied_refunds(),
        2,
        "two conversations asked for two refunds"
    );
    let a_again = d
        .execute(Call::new("get_order", r#"{"order_id": "ORD-1001"}"#).session("a"))
        .await;
    assert_eq!(a_again.code, Code::StepLimit);
}

#[tokio::test]
async fn every_call_leaves_exactly_one_audit_record() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let dir = std::env::temp_dir().join(format!("toolcall-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&path);
    let memory = shop_dispatcher(&shop)
        .audit(audit.clone())
        .max_steps(9)
        .build()
        .unwrap();
    let file = shop_dispatcher(&shop)
        .audit(JsonLinesAudit::open(&path).unwrap())
        .build()
        .unwrap();
    let calls: [(&str, &str, bool); 10] = [
        ("get_order", r#"{"order_id": "ORD-1001"}"#, false),
        ("nope", "{}", false),
        ("get_order", "{", false),
        ("get_order", r#"{"order_id": 1}"#, false),
        ("refund_order", REFUND, false),
        ("refund_order", REFUND, true),
        ("refund_order", REFUND, true),
        ("get_order", r#"{"order_id": "ORD-9999"}"#, false),
        ("refund_order", &REFUND.replace("BRL", "USD"), true),
        ("get_order", r#"{"order_id": "ORD-1001"}"#, false),
    ];
    for d in [&memory, &file] {
        for (tool, args, confirmed) in calls {
            in_default_with(d, tool, args, |c| c.confirmed(confirmed).call_id("call-1")).await;
        }
    }
    let records = audit.records();
    let codes: Vec<String> = records.iter().map(|r| r.code.to_string()).collect();
    assert_eq!(
        codes,
        [
            "OK",
            "UNKNOWN_TOOL",
            "INVALID_JSON",
            "INVALID_ARGUMENTS",
            "CONFIRMATION_REQUIRED",
            "OK",
            "OK",
            "ORDER_NOT_FOUND",
            "CURRENCY_MISMATCH",
            "STEP_LIMIT"
        ]
    );
    let steps: Vec<u64> = records.iter().map(|r| r.step.unwrap()).collect();
    assert_eq!(steps, (1..=10).collect::<Vec<u64>>());
    assert!(records[6].replayed);
    assert!(records[5].confirmed);
    assert_eq!(records[2].arguments, "{");
    assert_eq!(records[0].call_id.as_deref(), Some("call-1"));
    assert_eq!(records[0].session_id, "default");
    assert_eq!(records[0].caller, "default");
    let lines: Vec<toolcall::AuditRecord> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 10);
    assert_eq!(
        lines.iter().map(|r| r.code.to_string()).collect::<Vec<_>>()[..9],
        codes[..9]
    );
    assert_eq!(
        shop.applied_refunds(),
        1,
        "the second dispatcher's key matched the backend's record"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn model_text_leaves_default_fields_out() {
    let (_, d) = shop_and_dispatcher();
    let read = in_default(&d, "get_order", r#"{"order_id": "ORD-1002"}"#).await;
    assert_eq!(
        read.to_model_text(),
        r#"{"ok":true,"tool":"get_order","data":{"order_id":"ORD-1002","total_cents":4500,"refunded_cents":0,"currency":"USD"}}"#
    );
    let unknown = in_default(&d, "x", "").await;
    assert_eq!(
        unknown.to_model_text(),
        r#"{"ok":false,"tool":"x","code":"UNKNOWN_TOOL","message":"No tool named 'x'.","data":{"available":["get_order","refund_order"]}}"#
    );
    let back: ToolResult = serde_json::from_str(&unknown.to_model_text()).unwrap();
    assert_eq!(back, unknown);
}

/// Sends a message through a backend that may time out, and keeps one
/// message per idempotency key.
#[tool(side_effect, idempotent_backend)]
async fn send(
    ctx: &Ctx<Probe>,
    /// The message's text.
    text: String,
) -> Result<serde_json::Value, ToolError> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    ctx.state
        .keys
        .lock()
        .unwrap()
        .push(ctx.idempotency_key.to_string());
    let left = ctx.state.failures_left.load(Ordering::SeqCst);
    if left > 0 {
        ctx.state.failures_left.store(left - 1, Ordering::SeqCst);
        return Err(ToolError::transient("timeout"));
    }
    Ok(json!({"sent": text}))
}

/// Always refuses, as a business rule.
#[tool(side_effect)]
fn refuse(ctx: &Ctx<Probe>) -> Result<(), Rejection> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    Err(Rejection::new("NOT_TODAY", "Not today."))
}

/// Fails with a bug.
#[tool(side_effect)]
fn broken(ctx: &Ctx<Probe>) -> Result<(), ToolError> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    Err(ToolError::internal("invariant violated"))
}

/// Panics in its check.
#[tool(check = panicking_check)]
fn guarded() -> Result<(), Rejection> {
    Ok(())
}

fn panicking_check(_: &GuardedArgs, _: &Ctx<Probe>) -> Result<(), Rejection> {
    panic!("check bug")
}

/// Takes nothing, answers a constant.
#[tool]
fn ping() -> Result<&'static str, Rejection> {
    Ok("pong")
}

fn probe_dispatcher(probe: &Arc<Probe>) -> Dispatcher<Probe> {
    let registry = tools![send, refuse, broken, explode, guarded, ping].unwrap();
    Dispatcher::builder(registry, Arc::clone(probe))
        .retry_backoff(Duration::ZERO)
        .build()
        .unwrap()
}

#[tokio::test]
async fn transient_failures_are_retried_under_the_same_key() {
    let probe = Probe::failing(2);
    let d = probe_dispatcher(&probe);
    let result = in_default(&d, "send", r#"{"text": "hi"}"#).await;
    assert!(result.ok, "{result:?}");
    assert_eq!(result.data["sent"], "hi");
    assert_eq!(probe.attempts(), 3);
    let keys = probe.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|k| *k == keys[0] && k.len() == 64));
}

#[tokio::test]
async fn retries_are_bounded_then_upstream_unavailable() {
    let probe = Probe::failing(10);
    let d = probe_dispatcher(&probe);
    let result = in_default(&d, "send", r#"{"text": "hi"}"#).await;
    assert_eq!(result.code, Code::UpstreamUnavailable);
    assert_eq!(
        probe.attempts(),
        3,
        "one attempt and the default two retries"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_backoff_grows_with_the_attempt() {
    let probe = Probe::failing(2);
    let registry = tools![send].unwrap();
    let d = Dispatcher::builder(registry, Arc::clone(&probe))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    assert!(in_default(&d, "send", r#"{"text": "hi"}"#).await.ok);
    // 200 ms before the first retry, 400 ms before the second (paused clock).
    assert_eq!(started.elapsed(), Duration::from_millis(600));
}

#[tokio::test]
async fn business_rejections_and_bugs_are_never_retried() {
    let probe = Arc::new(Probe::default());
    let d = probe_dispatcher(&probe);
    let refused = in_default(&d, "refuse", "").await;
    assert_eq!(
        (refused.code.as_str(), refused.message.as_str()),
        ("NOT_TODAY", "Not today.")
    );
    assert_eq!(probe.attempts(), 1);
    let broken = in_default(&d, "broken", "{}").await;
    assert_eq!(broken.code, Code::InternalError);
    assert_eq!(probe.attempts(), 2);
}

#[tokio::test]
async fn a_panic_is_an_internal_error_and_the_dispatcher_goes_on() {
    let probe = Arc::new(Probe::default());
    let d = probe_dispatcher(&probe);
    let exploded = in_default(&d, "explode", r#"{"after": 3}"#).await;
    assert_eq!(exploded.code, Code::InternalError);
    assert_eq!(
        exploded.message,
        "The tool failed unexpectedly. Do not retry; tell the user."
    );
    assert_eq!(probe.attempts(), 1, "a panic is not retried");
    assert_eq!(
        in_default(&d, "guarded", "").await.code,
        Code::InternalError
    );
    let pong = in_default(&d, "ping", "").await;
    assert_eq!(pong.data["result"], "pong", "{pong:?}");
}
