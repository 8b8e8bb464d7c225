//! The measured workloads, shared by the criterion benchmarks (`benches/`)
//! and the release binaries (`src/bin/`).
//!
//! The four scenarios mirror the reference's `bench.py` call for call: the
//! same shop (10,000 orders `ORD-0000`..`ORD-9999` with a huge total), the
//! same raised limits, the same argument texts (written the way Python's
//! `json.dumps` writes them), one session, the calls built before the clock
//! starts. The floor is what any strict implementation must do at least:
//! parse the same text (`serde_json::from_str`), build the generated
//! argument struct from it (`ToolArgs::from_object` and
//! `FieldErrors::unknown_fields`, which together are the validator) and
//! compute the idempotency key over the validated arguments.

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orders::{Currency, GetOrderArgs, Order, RefundOrderArgs, Shop, get_order, refund_order};
use serde_json::{Map, Value};
use toolcall::{
    AuditRecord, AuditSink, Call, Code, Dispatcher, FieldErrors, MemoryAudit, Policy, ToolArgs,
    ToolResult, canonical::idempotency_key, tools,
};

/// The session every scenario runs in, as in `bench.py`.
pub const SESSION: &str = "bench";

/// Calls per scenario run in `bench.py` (its `N`).
pub const REFERENCE_CALLS: usize = 20_000;

/// Orders in the benchmark shop.
pub const ORDERS: usize = 10_000;

/// An audit sink that drops every record: the pipeline without the cost of
/// keeping its log.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopAudit;

impl AuditSink for NoopAudit {
    fn record(&self, record: AuditRecord) {
        black_box(record);
    }
}

/// Where a benchmark dispatcher's audit records go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Audit {
    /// The default in-memory log, as the reference keeps its `audit_log` list.
    Memory,
    /// [`NoopAudit`].
    Noop,
}

impl std::str::FromStr for Audit {
    type Err = String;

    /// `memory` or `noop`.
    fn from_str(text: &str) -> Result<Audit, String> {
        match text {
            "memory" => Ok(Audit::Memory),
            "noop" => Ok(Audit::Noop),
            _ => Err(format!("`{text}` is not `memory` or `noop`")),
        }
    }
}

/// A shop with orders `ORD-0000`..`ORD-9999`, each of 10^12 cents in BRL,
/// so that every refund of the benchmark is valid.
pub fn shop() -> Arc<Shop> {
    Arc::new(Shop::with_orders((0..ORDERS).map(|i| {
        Order::new(&order_id(i), "CUS-1", 1_000_000_000_000, Currency::BRL)
    })))
}

/// `ORD-` and the four digits of `i` modulo 10,000.
pub fn order_id(i: usize) -> String {
    format!("ORD-{:04}", i % ORDERS)
}

/// A dispatcher over `shop` with `bench.py`'s settings: both tools allowed,
/// a refund cap of 10^12 cents, budgets of 10^9 steps and duplicate calls,
/// no wait between retries.
pub fn dispatcher(shop: Arc<Shop>, audit: Audit) -> Dispatcher<Shop> {
    let registry = tools![get_order, refund_order].expect("two distinct tools");
    let policy = Policy::new()
        .allow(["get_order", "refund_order"])
        .limit("max_refund_cents", 1_000_000_000_000);
    let builder = Dispatcher::builder(registry, shop)
        .policy(policy)
        .max_steps(1_000_000_000)
        .max_duplicate_calls(1_000_000_000)
        .retry_backoff(Duration::ZERO);
    let builder = match audit {
        Audit::Memory => builder.audit(MemoryAudit::new()),
        Audit::Noop => builder.audit(NoopAudit),
    };
    builder.build().expect("the orders tools take a Shop")
}

/// A single-threaded runtime, the kind a benchmark drives the pipeline with.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
}

/// One of `bench.py`'s scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// A valid `get_order`, a different order each call.
    GetOrderOk,
    /// A valid, confirmed `refund_order`, different arguments each call, so
    /// nothing is replayed.
    RefundOkConfirmed,
    /// A `refund_order` with `25.9` cents, `EUR` and an extra field `force`.
    RefundInvalidArgs,
    /// The same confirmed refund every call: the first runs, the rest replay.
    RefundReplay,
}

impl Scenario {
    /// Every scenario, in `bench.py`'s order.
    pub const ALL: [Scenario; 4] = [
        Scenario::GetOrderOk,
        Scenario::RefundOkConfirmed,
        Scenario::RefundInvalidArgs,
        Scenario::RefundReplay,
    ];

    /// Its key in `bench.py`'s output.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::GetOrderOk => "get_order_ok",
            Scenario::RefundOkConfirmed => "refund_ok_confirmed",
            Scenario::RefundInvalidArgs => "refund_invalid_args",
            Scenario::RefundReplay => "refund_replay",
        }
    }

    /// The tool called.
    pub fn tool(self) -> &'static str {
        match self {
            Scenario::GetOrderOk => "get_order",
            _ => "refund_order",
        }
    }

    /// Whether the host confirmed the calls (all refunds are confirmed in `bench.py`).
    pub fn confirmed(self) -> bool {
        self != Scenario::GetOrderOk
    }

    /// The raw arguments of call `i`, byte for byte what `bench.py` sends.
    pub fn arguments(self, i: usize) -> String {
        match self {
            Scenario::GetOrderOk => format!(r#"{{"order_id": "{}"}}"#, order_id(i)),
            Scenario::RefundOkConfirmed => refund_text(&order_id(i), 1 + i as u64),
            Scenario::RefundInvalidArgs => r#"{"order_id": "ORD-1001", "amount_cents": 25.9, "currency": "EUR", "reason": "damaged", "force": true}"#.to_owned(),
            Scenario::RefundReplay => refund_text("ORD-0001", 100),
        }
    }

    /// The raw arguments of calls `first..first + n`.
    pub fn calls(self, first: usize, n: usize) -> Vec<String> {
        (first..first + n).map(|i| self.arguments(i)).collect()
    }

    /// Whether `result` is what call `i` of this scenario must answer: the
    /// benchmark measures the path it claims to.
    pub fn answers_as_expected(self, i: usize, result: &ToolResult) -> bool {
        match self {
            Scenario::GetOrderOk | Scenario::RefundOkConfirmed => result.ok && !result.replayed,
            Scenario::RefundInvalidArgs => result.code == Code::InvalidArguments,
            Scenario::RefundReplay => result.ok && result.replayed == (i > 0),
        }
    }
}

fn refund_text(order_id: &str, amount_cents: u64) -> String {
    format!(
        r#"{{"order_id": "{order_id}", "amount_cents": {amount_cents}, "currency": "BRL", "reason": "damaged"}}"#
    )
}

/// Checks on a fresh dispatcher that the first calls of `scenario` answer
/// as the scenario says (ok, replayed, rejected), so a benchmark measures
/// the path it claims to.
pub fn verify(scenario: Scenario) -> Result<(), String> {
    let dispatcher = dispatcher(shop(), Audit::Memory);
    let runtime = runtime();
    for (i, raw) in scenario.calls(0, 3).iter().enumerate() {
        let call = Call::new(scenario.tool(), raw.as_str())
            .session(SESSION)
            .confirmed(scenario.confirmed());
        let result = runtime.block_on(dispatcher.execute(call));
        if !scenario.answers_as_expected(i, &result) {
            return Err(format!("{} call {i}: {result:?}", scenario.name()));
        }
    }
    Ok(())
}

/// Sends every call of `calls` to `dispatcher`, one after the other.
pub async fn run_calls(dispatcher: &Dispatcher<Shop>, scenario: Scenario, calls: &[String]) {
    let (tool, confirmed) = (scenario.tool(), scenario.confirmed());
    for raw in calls {
        let call = Call::new(tool, raw.as_str())
            .session(SESSION)
            .confirmed(confirmed);
        black_box(dispatcher.execute(black_box(call)).await);
    }
}

/// The time of `calls.len()` calls of `scenario` through a fresh dispatcher
/// (fresh shop, empty session), measured inside one `block_on`.
pub fn time_pipeline(scenario: Scenario, calls: &[String], audit: Audit) -> Duration {
    let dispatcher = dispatcher(shop(), audit);
    let runtime = runtime();
    runtime.block_on(async {
        let started = Instant::now();
        run_calls(&dispatcher, scenario, calls).await;
        started.elapsed()
    })
}

/// The floor for one call: parse the text, build the argument struct (every
/// problem reported, unknown fields included, as the validator does), and
/// for valid arguments compute the idempotency key over them.
pub fn floor(scenario: Scenario, raw: &str) -> Option<String> {
    match scenario {
        Scenario::GetOrderOk => floor_of::<GetOrderArgs>("get_order", raw),
        _ => floor_of::<RefundOrderArgs>("refund_order", raw),
    }
}

fn floor_of<A: ToolArgs>(tool: &str, raw: &str) -> Option<String> {
    let object: Map<String, Value> = serde_json::from_str(raw).ok()?;
    let mut errors = FieldErrors::default();
    let args = A::from_object(&object, &mut errors);
    errors.unknown_fields(&object, A::fields());
    if !black_box(&errors).is_empty() {
        return None;
    }
    let value = serde_json::to_value(args?).ok()?;
    Some(idempotency_key(SESSION, tool, &value))
}

/// The time of the floor over every call of `calls`.
pub fn time_floor(scenario: Scenario, calls: &[String]) -> Duration {
    let started = Instant::now();
    for raw in calls {
        black_box(floor(scenario, black_box(raw)));
    }
    started.elapsed()
}

/// Nanoseconds per call.
pub fn ns_per_call(elapsed: Duration, calls: usize) -> f64 {
    elapsed.as_nanos() as f64 / calls.max(1) as f64
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> f64 {
    assert!(!values.is_empty(), "the median of nothing");
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// This process's resident memory in bytes, from `/proc/self/status`
/// (`VmRSS`); `None` where that file does not exist.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_takes_the_path_it_claims_to() {
        for scenario in Scenario::ALL {
            verify(scenario).unwrap();
        }
    }

    #[test]
    fn refunds_are_distinct_and_the_floor_agrees_with_the_validator() {
        let calls = Scenario::RefundOkConfirmed.calls(0, 3);
        assert_eq!(
            calls[0],
            r#"{"order_id": "ORD-0000", "amount_cents": 1, "currency": "BRL", "reason": "damaged"}"#
        );
        let keys: Vec<_> = calls
            .iter()
            .map(|raw| floor(Scenario::RefundOkConfirmed, raw).expect("valid"))
            .collect();
        assert!(keys[0] != keys[1] && keys[1] != keys[2]);
        let invalid = Scenario::RefundInvalidArgs.arguments(0);
        assert_eq!(floor(Scenario::RefundInvalidArgs, &invalid), None);
        assert!(floor(Scenario::GetOrderOk, &Scenario::GetOrderOk.arguments(7)).is_some());
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
