//! Calls made through a dispatcher whose audit is wrapped in
//! `MetricsAudit`, read back from an in-memory exporter: the duration
//! histogram by tool and `error.type`, the counters by code, the decisions.

use std::sync::Arc;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::{KeyValue, Value as OtelValue};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use serde_json::{Value, json};
use toolcall::{Call, Code, Decision, Dispatcher, MemoryAudit, Rejection, tool, tools};
use toolcall_metrics::MetricsAudit;

/// Adds two numbers.
#[tool]
fn add(
    /// The first.
    a: i64,
    /// The second.
    #[arg(max = 1000)]
    b: i64,
) -> Result<Value, Rejection> {
    Ok(json!({"sum": a + b}))
}

/// Pays someone. Amount in cents.
#[tool(side_effect, high_risk)]
fn pay(
    /// Who gets the money.
    to: String,
    /// The amount, in cents.
    amount_cents: i64,
) -> Result<Value, Rejection> {
    Ok(json!({"paid": amount_cents, "to": to}))
}

struct Setup {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
    dispatcher: Dispatcher<()>,
    log: MemoryAudit,
}

fn setup() -> Setup {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let meter = provider.meter("test");
    let log = MemoryAudit::new();
    let audit = MetricsAudit::with_meter(log.clone(), &meter).tools(["add", "pay"]);
    let dispatcher = Dispatcher::builder(tools![add, pay].unwrap(), Arc::new(()))
        .audit(audit)
        .build()
        .unwrap();
    Setup {
        provider,
        exporter,
        dispatcher,
        log,
    }
}

impl Setup {
    /// The metrics exported so far, the latest export's.
    fn metrics(&self) -> ResourceMetrics {
        self.provider.force_flush().unwrap();
        self.exporter
            .get_finished_metrics()
            .unwrap()
            .pop()
            .expect("an export")
    }
}

fn metric<'a>(metrics: &'a ResourceMetrics, name: &str) -> &'a Metric {
    metrics
        .scope_metrics()
        .flat_map(|scope| scope.metrics())
        .find(|metric| metric.name() == name)
        .unwrap_or_else(|| panic!("no metric {name}"))
}

/// The attributes as sorted (key, value) strings.
fn attributes<'a>(kvs: impl Iterator<Item = &'a KeyValue>) -> Attributes {
    let mut out: Attributes = kvs
        .map(|kv| {
            let value = match &kv.value {
                OtelValue::String(s) => s.as_str().to_owned(),
                other => other.to_string(),
            };
            (kv.key.as_str().to_owned(), value)
        })
        .collect();
    out.sort();
    out
}

fn pairs(pairs: &[(&str, &str)]) -> Attributes {
    let mut out: Attributes = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    out.sort();
    out
}

/// Attributes as sorted (key, value) strings.
type Attributes = Vec<(String, String)>;

/// Each data point of the histogram: its attributes, its count, its sum.
fn histogram(metrics: &ResourceMetrics, name: &str) -> Vec<(Attributes, u64, f64)> {
    let metric = metric(metrics, name);
    let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = metric.data() else {
        panic!("{name} is no f64 histogram");
    };
    let mut points: Vec<_> = histogram
        .data_points()
        .map(|p| (attributes(p.attributes()), p.count(), p.sum()))
        .collect();
    points.sort_by(|a, b| a.0.cmp(&b.0));
    points
}

/// Each data point of the counter: its attributes and its value.
fn counter(metrics: &ResourceMetrics, name: &str) -> Vec<(Attributes, u64)> {
    let metric = metric(metrics, name);
    let AggregatedMetrics::U64(MetricData::Sum(sum)) = metric.data() else {
        panic!("{name} is no u64 sum");
    };
    assert!(sum.is_monotonic(), "{name} is a counter");
    let mut points: Vec<_> = sum
        .data_points()
        .map(|p| (attributes(p.attributes()), p.value()))
        .collect();
    points.sort();
    points
}

#[tokio::test(flavor = "current_thread")]
async fn calls_through_the_dispatcher_are_measured_by_tool_and_outcome() {
    let s = setup();
    let d = &s.dispatcher;
    for (a, b) in [(1, 2), (3, 4), (5, 6)] {
        let ok = d
            .execute(Call::new("add", &*json!({"a": a, "b": b}).to_string()).session("s1"))
            .await;
        assert_eq!(ok.code, Code::Ok, "{ok:?}");
    }
    let invalid = d
        .execute(Call::new("add", r#"{"a": 1, "b": 5000}"#).session("s1"))
        .await;
    assert_eq!(invalid.code, Code::InvalidArguments);
    // A name the model made up: no series of its own.
    let unknown = d
        .execute(Call::new("no_such_tool_7f3a", "{}").session("s1"))
        .await;
    assert_eq!(unknown.code, Code::UnknownTool);
    // Two questions for a person: one denied, one approved.
    let asked = d
        .execute(Call::new("pay", r#"{"to": "acme", "amount_cents": 10}"#).session("s2"))
        .await;
    assert_eq!(asked.code, Code::ConfirmationRequired);
    let id = asked.question_id.clone().unwrap();
    let denied = d.deny(Decision::new(&id, "s2").by("ana"), "no").await;
    assert_eq!(denied.code, Code::ConfirmationDenied, "{denied:?}");
    let asked = d
        .execute(Call::new("pay", r#"{"to": "bo", "amount_cents": 20}"#).session("s3"))
        .await;
    let id = asked.question_id.clone().unwrap();
    let approved = d.approve(Decision::new(&id, "s3").by("ana")).await;
    assert_eq!(approved.code, Code::Ok, "{approved:?}");

    // The records went on to the wrapped sink, unchanged.
    let records = s.log.records();
    assert_eq!(records.len(), 9, "{records:#?}");

    let metrics = s.metrics();
    let duration = metric(&metrics, "gen_ai.execute_tool.duration");
    assert_eq!(duration.unit(), "s");
    let points = histogram(&metrics, "gen_ai.execute_tool.duration");
    let shape: Vec<(Attributes, u64)> = points.iter().map(|(a, n, _)| (a.clone(), *n)).collect();
    assert_eq!(
        shape,
        vec![
            (
                pairs(&[
                    ("gen_ai.tool.name", "_OTHER"),
                    ("error.type", "UNKNOWN_TOOL")
                ]),
                1
            ),
            (pairs(&[("gen_ai.tool.name", "add")]), 3),
            (
                pairs(&[
                    ("gen_ai.tool.name", "add"),
                    ("error.type", "INVALID_ARGUMENTS")
                ]),
                1
            ),
            (pairs(&[("gen_ai.tool.name", "pay")]), 1),
            (
                pairs(&[
                    ("gen_ai.tool.name", "pay"),
                    ("error.type", "CONFIRMATION_DENIED")
                ]),
                1
            ),
            (
                pairs(&[
                    ("gen_ai.tool.name", "pay"),
                    ("error.type", "CONFIRMATION_REQUIRED")
                ]),
                2
            ),
        ]
        .tap_sort(),
    );
    // The sum is the records' durations, in seconds.
    let ok_add_seconds: f64 = records
        .iter()
        .filter(|r| r.tool == "add" && r.ok)
        .map(|r| r.duration_ms / 1000.0)
        .sum();
    let measured = points
        .iter()
        .find(|(a, _, _)| *a == pairs(&[("gen_ai.tool.name", "add")]))
        .unwrap()
        .2;
    assert!(
        (measured - ok_add_seconds).abs() < 1e-9,
        "{measured} vs {ok_add_seconds}"
    );

    let calls = counter(&metrics, "toolcall.calls");
    let count = |tool: &str, code: &str| {
        calls
            .iter()
            .find(|(a, _)| *a == pairs(&[("gen_ai.tool.name", tool), ("toolcall.code", code)]))
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(count("add", "OK"), 3);
    assert_eq!(count("add", "INVALID_ARGUMENTS"), 1);
    assert_eq!(count("_OTHER", "UNKNOWN_TOOL"), 1);
    assert_eq!(count("pay", "CONFIRMATION_REQUIRED"), 2);
    assert_eq!(count("pay", "CONFIRMATION_DENIED"), 1);
    assert_eq!(count("pay", "OK"), 1);
    assert_eq!(calls.iter().map(|(_, n)| n).sum::<u64>(), 9);

    let decisions = counter(&metrics, "toolcall.approval.decisions");
    assert_eq!(
        decisions,
        vec![
            (
                pairs(&[
                    ("gen_ai.tool.name", "pay"),
                    ("toolcall.approval.decision", "denied")
                ]),
                1
            ),
            (
                pairs(&[
                    ("gen_ai.tool.name", "pay"),
                    ("toolcall.approval.decision", "granted")
                ]),
                1
            ),
        ]
        .tap_sort()
    );
}

#[test]
fn records_from_elsewhere_count_unknown_outcomes_and_an_edit_once() {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let instruments = toolcall_metrics::Instruments::new(&provider.meter("test"));
    let record = |value: Value| -> toolcall::AuditRecord {
        let mut base = json!({
            "session_id": "s", "caller": "default", "step": 1, "tool": "pay",
            "arguments": "{}", "confirmed": false, "ok": true, "code": "OK",
            "replayed": false, "duration_ms": 20.0, "at_ms": 1000,
        });
        for (k, v) in value.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    };
    // A timeout whose outcome is unknown.
    instruments.record(&record(
        json!({"ok": false, "code": "TIMEOUT", "in_doubt": true, "step": 1}),
    ));
    // An edited approval: the model's call carrying the decision, then the
    // call as edited; one execution.
    instruments.record(&record(
        json!({"step": 2, "at_ms": 2000, "confirmed": true, "approved_by": "ana"}),
    ));
    instruments.record(&record(
        json!({"step": 2, "at_ms": 2000, "confirmed": true, "arguments": "{\"edited\":1}"}),
    ));
    // A confirmed call of another step is a call of its own.
    instruments.record(&record(
        json!({"step": 3, "at_ms": 3000, "confirmed": true}),
    ));
    instruments.awaiting(4);

    provider.force_flush().unwrap();
    let metrics = exporter.get_finished_metrics().unwrap().pop().unwrap();
    let calls = counter(&metrics, "toolcall.calls");
    assert_eq!(
        calls,
        vec![
            (
                pairs(&[("gen_ai.tool.name", "pay"), ("toolcall.code", "OK")]),
                2
            ),
            (
                pairs(&[("gen_ai.tool.name", "pay"), ("toolcall.code", "TIMEOUT")]),
                1
            ),
        ]
    );
    let in_doubt = counter(&metrics, "toolcall.calls.in_doubt");
    assert_eq!(
        in_doubt,
        vec![(
            pairs(&[("gen_ai.tool.name", "pay"), ("toolcall.code", "TIMEOUT")]),
            1
        )]
    );
    let decisions = counter(&metrics, "toolcall.approval.decisions");
    assert_eq!(decisions.iter().map(|(_, n)| n).sum::<u64>(), 1);
    let awaiting = metric(&metrics, "toolcall.approval.awaiting");
    let AggregatedMetrics::U64(MetricData::Gauge(gauge)) = awaiting.data() else {
        panic!("awaiting is no u64 gauge");
    };
    assert_eq!(
        gauge.data_points().map(|p| p.value()).collect::<Vec<_>>(),
        [4]
    );
}

trait TapSort {
    fn tap_sort(self) -> Self;
}

impl<T: Ord> TapSort for Vec<T> {
    fn tap_sort(mut self) -> Self {
        self.sort();
        self
    }
}
