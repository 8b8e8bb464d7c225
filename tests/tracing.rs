//! One `execute_tool` span a call, with OpenTelemetry's GenAI attribute
//! names, as a subscriber sees it: the tool, the provider's call id, and
//! `error.type` set to the code exactly when the call was not ok; and what
//! the pipeline logs while it runs a call, inside that call's span.

use std::sync::Arc;

use orders::{Shop, get_order, refund_order};
use toolcall::{Call, Decision, Dispatcher, Policy, tools};
use toolcall_testkit::spans::{Capture, Seen};

/// A refund of ORD-1001, and one of a fraction of a cent.
const REFUND: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#;
const FLOAT_REFUND: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 25.9, "currency": "BRL", "reason": "damaged"}"#;

/// The orders example's dispatcher over `shop`, both tools allowed.
fn dispatcher(shop: Arc<Shop>) -> Dispatcher<Shop> {
    Dispatcher::builder(tools![get_order, refund_order].unwrap(), shop)
        .part(Shop::reader)
        .policy(
            Policy::new()
                .allow(["get_order", "refund_order"])
                .limit("max_refund_cents", 50_000),
        )
        .build()
        .unwrap()
}

#[test]
fn every_call_has_one_execute_tool_span_with_gen_ai_attributes() {
    let capture = Capture::default();
    let spans = Arc::clone(&capture.spans);
    capture.around(|| async {
        let dispatcher = dispatcher(Arc::new(Shop::new()));
        let ok = dispatcher
            .execute(
                Call::new("get_order", r#"{"order_id": "ORD-1001"}"#)
                    .session("default")
                    .call_id("call_a"),
            )
            .await;
        assert!(ok.ok);
        let float = dispatcher
            .execute(
                Call::new("refund_order", FLOAT_REFUND)
                    .session("default")
                    .call_id("toolu_b"),
            )
            .await;
        assert_eq!(float.code.as_str(), "INVALID_ARGUMENTS");
        let pending = dispatcher
            .execute(Call::new("refund_order", REFUND).session("default"))
            .await;
        let id = pending.question_id.clone().unwrap();
        let approved = dispatcher
            .approve(Decision::new(&id, "default").by("ana"))
            .await;
        assert!(approved.ok, "{approved:?}");
    });

    let spans = spans.lock().unwrap();
    let calls: Vec<&Seen> = spans.iter().filter(|s| s.name == "execute_tool").collect();
    assert_eq!(
        calls.len(),
        4,
        "one span per call and per decision: {spans:#?}"
    );
    for span in &calls {
        assert_eq!(span.field("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(span.field("otel.kind"), Some("internal"));
        assert_eq!(span.field("gen_ai.tool.type"), Some("function"));
        let tool = span.field("gen_ai.tool.name").unwrap();
        assert_eq!(
            span.field("otel.name").map(str::to_owned),
            Some(format!("execute_tool {tool}")),
            "the span's name, as OpenTelemetry's GenAI conventions write it"
        );
    }
    assert!(
        calls[0]
            .field("gen_ai.tool.description")
            .is_some_and(|d| d.contains("order")),
        "{:?}",
        calls[0]
    );
    let summary: Vec<(Option<&str>, Option<&str>, Option<&str>)> = calls
        .iter()
        .map(|s| {
            (
                s.field("gen_ai.tool.name"),
                s.field("gen_ai.tool.call.id"),
                s.field("error.type"),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (Some("get_order"), Some("call_a"), None),
            (
                Some("refund_order"),
                Some("toolu_b"),
                Some("INVALID_ARGUMENTS")
            ),
            (Some("refund_order"), None, Some("CONFIRMATION_REQUIRED")),
            (Some("refund_order"), None, None),
        ]
    );
}

#[test]
fn what_the_pipeline_logs_is_inside_the_calls_span() {
    let capture = Capture::default();
    let (spans, events) = (Arc::clone(&capture.spans), Arc::clone(&capture.events));
    let shop = Arc::new(Shop::new());
    capture.around(|| async {
        let dispatcher = dispatcher(Arc::clone(&shop));
        let read = dispatcher
            .execute(Call::new("get_order", r#"{"order_id": "ORD-1001"}"#).session("default"))
            .await;
        assert!(read.ok);
        // The gateway loses its first answer: the pipeline logs the
        // transient failure and retries under the same key.
        shop.lose_next_responses(1);
        let refund = dispatcher
            .execute(
                Call::new("refund_order", REFUND)
                    .session("default")
                    .confirmed(true)
                    .call_id("call_r"),
            )
            .await;
        assert!(refund.ok, "{refund:?}");
    });
    assert_eq!(shop.applied_refunds(), 1, "one refund, retried once");

    let spans = spans.lock().unwrap();
    let refund_span = spans
        .iter()
        .position(|s| s.name == "execute_tool" && s.field("gen_ai.tool.call.id") == Some("call_r"))
        .map(|at| at as u64 + 1)
        .expect("the refund's span");
    let events = events.lock().unwrap();
    let transient: Vec<&(String, Option<u64>)> = events
        .iter()
        .filter(|(message, _)| message.contains("transient failure"))
        .collect();
    assert!(!transient.is_empty(), "the retry is logged: {events:#?}");
    for (message, within) in transient {
        assert_eq!(
            *within,
            Some(refund_span),
            "{message:?} is logged in the refund's span"
        );
    }
}

#[test]
fn a_made_up_tool_name_is_cut_in_the_span_too() {
    let capture = Capture::default();
    let spans = Arc::clone(&capture.spans);
    let name = "t".repeat(1 << 20);
    capture.around(|| async {
        let dispatcher = dispatcher(Arc::new(Shop::new()));
        let unknown = dispatcher
            .execute(Call::new(&name, "{}").session("default"))
            .await;
        assert_eq!(unknown.code.as_str(), "UNKNOWN_TOOL");
    });
    let spans = spans.lock().unwrap();
    let span = spans.iter().find(|s| s.name == "execute_tool").unwrap();
    let recorded = span.field("gen_ai.tool.name").unwrap();
    assert!(recorded.len() <= 256, "{} bytes", recorded.len());
    assert!(span.field("otel.name").unwrap().len() <= 256 + 13);
    assert_eq!(span.field("gen_ai.tool.description"), None);
}
