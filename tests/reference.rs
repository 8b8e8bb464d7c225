//! The reference implementation's test suite, test for test: every call goes
//! through the pipeline, and the assertion that matters is how many refunds
//! the backend really applied.

use std::sync::Arc;

use orders::Shop;
use serde_json::json;
use toolcall::{Call, Dispatcher, MemoryAudit, Policy};

const SESSION: &str = "test-session";

/// The reference's `make_dispatcher` is `shop_dispatcher`.
#[path = "shop.rs"]
mod shop;
use shop::*;

fn refund_args(overrides: serde_json::Value) -> String {
    let mut args = json!({"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"});
    for (key, value) in overrides.as_object().unwrap() {
        args[key] = value.clone();
    }
    args.to_string()
}

async fn run(
    d: &Dispatcher<Shop>,
    tool: &str,
    args: &str,
    confirmed: bool,
) -> toolcall::ToolResult {
    d.execute(Call::new(tool, args).session(SESSION).confirmed(confirmed))
        .await
}

#[tokio::test]
async fn valid_refund_executes_once() {
    let (shop, d) = shop_and_dispatcher();
    let result = run(&d, "refund_order", &refund_args(json!({})), true).await;
    assert!(result.ok, "{result:?}");
    assert_eq!(result.data["remaining_refundable_cents"], 12_000 - 2590);
    assert_eq!(shop.applied_refunds(), 1);
}

async fn assert_invalid_never_reaches_backend(raw: String) {
    let (shop, d) = shop_and_dispatcher();
    let result = run(&d, "refund_order", &raw, true).await;
    assert!(!result.ok);
    assert_eq!(result.code, "INVALID_ARGUMENTS", "{raw}: {result:?}");
    assert_eq!(shop.applied_refunds(), 0, "{raw}");
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_backend_string_for_int() {
    assert_invalid_never_reaches_backend(refund_args(json!({"amount_cents": "25.90"}))).await;
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_backend_float_for_cents() {
    assert_invalid_never_reaches_backend(refund_args(json!({"amount_cents": 25.9}))).await;
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_backend_negative() {
    assert_invalid_never_reaches_backend(refund_args(json!({"amount_cents": -100}))).await;
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_backend_currency_outside_enum() {
    assert_invalid_never_reaches_backend(refund_args(json!({"currency": "EUR"}))).await;
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_backend_invented_id_format() {
    assert_invalid_never_reaches_backend(refund_args(json!({"order_id": "1001"}))).await;
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_backend_extra_field() {
    assert_invalid_never_reaches_backend(refund_args(json!({"force": true}))).await;
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_backend_missing_reason() {
    let raw = json!({"order_id": "ORD-1001", "amount_cents": 100, "currency": "BRL"}).to_string();
    assert_invalid_never_reaches_backend(raw).await;
}

#[tokio::test]
async fn malformed_json() {
    let (_, d) = shop_and_dispatcher();
    let result = run(&d, "get_order", r#"{"order_id": "ORD-1001""#, false).await;
    assert_eq!(result.code, "INVALID_JSON");
}

#[tokio::test]
async fn unknown_and_disallowed_tools() {
    let (shop, d) = shop_with(|b| b.policy(Policy::new().allow(["get_order"])));
    assert_eq!(
        run(&d, "delete_order", "{}", false).await.code,
        "UNKNOWN_TOOL"
    );
    assert_eq!(
        run(&d, "refund_order", &refund_args(json!({})), true)
            .await
            .code,
        "TOOL_NOT_ALLOWED"
    );
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn business_rules() {
    let (shop, d) = shop_and_dispatcher();
    for (overrides, code) in [
        (json!({"currency": "USD"}), "CURRENCY_MISMATCH"),
        (json!({"amount_cents": 99_999}), "AMOUNT_EXCEEDS_REFUNDABLE"),
        (json!({"order_id": "ORD-9999"}), "ORDER_NOT_FOUND"),
    ] {
        let result = run(&d, "refund_order", &refund_args(overrides), true).await;
        assert_eq!(result.code, code, "{result:?}");
    }
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn policy_limit() {
    let strict = Policy::new()
        .allow(["get_order", "refund_order"])
        .limit("max_refund_cents", 1_000);
    let (shop, d) = shop_with(|b| b.policy(strict));
    let result = run(&d, "refund_order", &refund_args(json!({})), true).await;
    assert_eq!(result.code, "POLICY_LIMIT");
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn high_risk_tool_requires_confirmation() {
    let (shop, d) = shop_and_dispatcher();
    let pending = run(&d, "refund_order", &refund_args(json!({})), false).await;
    assert_eq!(pending.code, "CONFIRMATION_REQUIRED");
    assert_eq!(shop.applied_refunds(), 0);
    assert!(
        run(&d, "refund_order", &refund_args(json!({})), true)
            .await
            .ok
    );
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn repeated_side_effect_is_replayed_not_reapplied() {
    let (shop, d) = shop_and_dispatcher();
    let first = run(&d, "refund_order", &refund_args(json!({})), true).await;
    let second = run(&d, "refund_order", &refund_args(json!({})), true).await;
    assert!(first.ok && second.ok);
    assert!(!first.replayed);
    assert!(second.replayed);
    assert_eq!(first.data, second.data);
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn retry_after_lost_response_does_not_double_refund() {
    let shop = Arc::new(Shop::new());
    shop.lose_next_responses(1);
    let d = shop_dispatcher(&shop).build().unwrap();
    let result = run(&d, "refund_order", &refund_args(json!({})), true).await;
    assert!(result.ok, "{result:?}");
    assert_eq!(shop.applied_refunds(), 1);
    assert_eq!(shop.order("ORD-1001").unwrap().refunded_cents, 2590);
}

#[tokio::test]
async fn duplicate_reads_trigger_loop_guard() {
    let (_, d) = shop_with(|b| b.max_duplicate_calls(2));
    let args = r#"{"order_id": "ORD-1001"}"#;
    assert!(run(&d, "get_order", args, false).await.ok);
    assert!(run(&d, "get_order", args, false).await.ok);
    assert_eq!(
        run(&d, "get_order", args, false).await.code,
        "LOOP_DETECTED"
    );
}

#[tokio::test]
async fn step_budget() {
    let (_, d) = shop_with(|b| b.max_steps(2));
    run(&d, "get_order", r#"{"order_id": "ORD-1001"}"#, false).await;
    run(&d, "get_order", r#"{"order_id": "ORD-1002"}"#, false).await;
    assert_eq!(
        run(&d, "get_order", r#"{"order_id": "ORD-1001"}"#, false)
            .await
            .code,
        "STEP_LIMIT"
    );
}

#[tokio::test]
async fn every_call_is_audited() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let d = shop_dispatcher(&shop).audit(audit.clone()).build().unwrap();
    run(&d, "get_order", r#"{"order_id": "ORD-1001"}"#, false).await;
    run(
        &d,
        "refund_order",
        &refund_args(json!({"currency": "EUR"})),
        false,
    )
    .await;
    let codes: Vec<String> = audit.records().iter().map(|r| r.code.to_string()).collect();
    assert_eq!(codes, ["OK", "INVALID_ARGUMENTS"]);
}

// ------------------------------------------------- the deliberate departures
//
// Two behaviours differ from the reference on purpose (README, "The
// reference"); these tests pin them, in the reference's own scenarios.

/// The reference answers the model's retry of a refund whose response was
/// lost with AMOUNT_EXCEEDS_REFUNDABLE, though the refund went through.
#[tokio::test]
async fn departure_a_lost_refund_is_in_doubt_and_the_retry_completes_it() {
    let shop = Arc::new(Shop::new());
    shop.lose_next_responses(1);
    let d = shop_dispatcher(&shop).max_retries(0).build().unwrap();
    let args = refund_args(json!({"amount_cents": 12_000}));
    let lost = run(&d, "refund_order", &args, true).await;
    assert_eq!(lost.code, "UPSTREAM_UNAVAILABLE");
    assert_eq!(lost.data["in_doubt"], json!(true));
    let retry = run(&d, "refund_order", &args, false).await;
    assert!(
        retry.ok,
        "the reference says AMOUNT_EXCEEDS_REFUNDABLE: {retry:?}"
    );
    assert_eq!(retry.data["remaining_refundable_cents"], 0);
    assert_eq!(shop.applied_refunds(), 1);
}

/// The reference counts each CONFIRMATION_REQUIRED as a duplicate, so the
/// confirmed call after three asks is LOOP_DETECTED.
#[tokio::test]
async fn departure_confirmation_required_is_not_a_duplicate() {
    let (shop, d) = shop_and_dispatcher();
    let args = refund_args(json!({}));
    for _ in 0..3 {
        assert_eq!(
            run(&d, "refund_order", &args, false).await.code,
            "CONFIRMATION_REQUIRED"
        );
    }
    let confirmed = run(&d, "refund_order", &args, true).await;
    assert!(
        confirmed.ok,
        "the reference says LOOP_DETECTED: {confirmed:?}"
    );
    assert_eq!(shop.applied_refunds(), 1);
}
