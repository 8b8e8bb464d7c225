//! One `execute_tool` span a call, with OpenTelemetry's GenAI attribute
//! names, as a subscriber sees it: the tool, the provider's call id, and
//! `error.type` set to the code exactly when the call was not ok; and what
//! the pipeline logs while it runs a call, inside that call's span.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use orders::{Shop, get_order, refund_order};
use toolcall::{Call, Decision, Dispatcher, Policy, tools};
use toolcall_testkit::run::block_on;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span as recorded: its name and its fields, as text.
#[derive(Clone, Debug)]
struct Seen {
    name: &'static str,
    fields: BTreeMap<String, String>,
}

/// A subscriber that keeps every span's fields, and every event's message
/// with the span it was logged in.
#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Seen>>>,
    entered: Arc<Mutex<Vec<u64>>>,
    events: Events,
}

/// Each event's message, and the span it was logged in (by id).
type Events = Arc<Mutex<Vec<(String, Option<u64>)>>>;

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

/// Runs `calls` to the end on a runtime of its own, `capture` seeing all.
fn captured<F: std::future::Future<Output = ()>>(capture: Capture, calls: impl FnOnce() -> F) {
    tracing::subscriber::with_default(capture, || block_on(calls()));
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let mut fields = BTreeMap::new();
        attributes.record(&mut Fields(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push(Seen {
            name: attributes.metadata().name(),
            fields,
        });
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let seen = &mut spans[span.into_u64() as usize - 1];
        values.record(&mut Fields(&mut seen.fields));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        let within = self.entered.lock().unwrap().last().copied();
        self.events.lock().unwrap().push((message, within));
    }

    fn enter(&self, span: &Id) {
        self.entered.lock().unwrap().push(span.into_u64());
    }

    fn exit(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap();
        if let Some(at) = entered.iter().rposition(|id| *id == span.into_u64()) {
            entered.remove(at);
        }
    }
}

fn field<'a>(span: &'a Seen, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}

#[test]
fn every_call_has_one_execute_tool_span_with_gen_ai_attributes() {
    let capture = Capture::default();
    let spans = Arc::clone(&capture.spans);
    captured(capture, || async {
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
        assert_eq!(field(span, "gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(field(span, "otel.kind"), Some("internal"));
        assert_eq!(field(span, "gen_ai.tool.type"), Some("function"));
        let tool = field(span, "gen_ai.tool.name").unwrap();
        assert_eq!(
            field(span, "otel.name").map(str::to_owned),
            Some(format!("execute_tool {tool}")),
            "the span's name, as OpenTelemetry's GenAI conventions write it"
        );
    }
    assert!(
        field(calls[0], "gen_ai.tool.description").is_some_and(|d| d.contains("order")),
        "{:?}",
        calls[0]
    );
    let summary: Vec<(Option<&str>, Option<&str>, Option<&str>)> = calls
        .iter()
        .map(|s| {
            (
                field(s, "gen_ai.tool.name"),
                field(s, "gen_ai.tool.call.id"),
                field(s, "error.type"),
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
    captured(capture, || async {
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
        .position(|s| s.name == "execute_tool" && field(s, "gen_ai.tool.call.id") == Some("call_r"))
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
    captured(capture, || async {
        let dispatcher = dispatcher(Arc::new(Shop::new()));
        let unknown = dispatcher
            .execute(Call::new(&name, "{}").session("default"))
            .await;
        assert_eq!(unknown.code.as_str(), "UNKNOWN_TOOL");
    });
    let spans = spans.lock().unwrap();
    let span = spans.iter().find(|s| s.name == "execute_tool").unwrap();
    let recorded = field(span, "gen_ai.tool.name").unwrap();
    assert!(recorded.len() <= 256, "{} bytes", recorded.len());
    assert!(field(span, "otel.name").unwrap().len() <= 256 + 13);
    assert_eq!(field(span, "gen_ai.tool.description"), None);
}
