//! One `execute_tool` span a call, with OpenTelemetry's GenAI attribute
//! names, as a subscriber sees it: the tool, the provider's call id, and
//! `error.type` set to the code exactly when the call was not ok.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use orders::{Shop, get_order, refund_order};
use toolcall::{Call, Decision, Dispatcher, Policy, tools};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span as recorded: its name and its fields, as text.
#[derive(Clone, Debug)]
struct Seen {
    name: &'static str,
    fields: BTreeMap<String, String>,
}

/// A subscriber that keeps every span's fields.
#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Seen>>>,
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

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

fn field<'a>(span: &'a Seen, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}

#[test]
fn every_call_has_one_execute_tool_span_with_gen_ai_attributes() {
    let capture = Capture::default();
    let spans = Arc::clone(&capture.spans);
    tracing::subscriber::with_default(capture, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let dispatcher = Dispatcher::builder(
                tools![get_order, refund_order].unwrap(),
                Arc::new(Shop::new()),
            )
            .policy(
                Policy::new()
                    .allow(["get_order", "refund_order"])
                    .limit("max_refund_cents", 50_000),
            )
            .build()
            .unwrap();
            let ok = dispatcher
                .execute(Call::new("get_order", r#"{"order_id": "ORD-1001"}"#).call_id("call_a"))
                .await;
            assert!(ok.ok);
            let float = dispatcher
                .execute(
                    Call::new(
                        "refund_order",
                        r#"{"order_id": "ORD-1001", "amount_cents": 25.9, "currency": "BRL", "reason": "damaged"}"#,
                    )
                    .call_id("toolu_b"),
                )
                .await;
            assert_eq!(float.code.as_str(), "INVALID_ARGUMENTS");
            let pending = dispatcher
                .execute(Call::new(
                    "refund_order",
                    r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#,
                ))
                .await;
            let id = pending.confirmation_id.clone().unwrap();
            let approved = dispatcher
                .approve(Decision::new(&id, "default").by("ana"))
                .await;
            assert!(approved.ok, "{approved:?}");
        });
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
    }
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
