//! The measured workloads, shared by the criterion benchmarks (`benches/`)
//! and the release binaries (`src/bin/`).
//!
//! The four scenarios mirror the reference's `bench.py` call for call: the
//! same shop (10,000 orders `ORD-0000`..`ORD-9999` with a huge total), the
//! same raised limits, the same argument texts (written the way Python's
//! `json.dumps` writes them), one session, the calls built before the clock
//! starts.
//!
//! Two things are measured besides the pipeline:
//!
//! * **The floor** ([`floor`]): what any strict implementation must do at
//!   least, with no toolcall code in it. `serde_json::from_str` straight into
//!   a `#[derive(Deserialize)] #[serde(deny_unknown_fields)]` struct of the
//!   tool's fields (strict types: `i64` cents, the currency and reason enums),
//!   what serde's derive does not refuse checked by hand (an array instead of
//!   an object; `ORD-` and four digits; at least one cent), then, for valid
//!   arguments, the struct serialized after `session|tool|` and SHA-256 over
//!   those bytes, streamed: the idempotency key, as a 32-byte digest (no
//!   hex: a table would add about 50 ns, criterion
//!   `floor_parts/hex_with_table`). For invalid arguments, the failed parse
//!   (serde stops at the first problem).
//! * **Ours** ([`ours`]): toolcall's own validator and key on the same
//!   texts, the former floor: parse into a `serde_json` map, build the
//!   generated struct (`ToolArgs::from_object` plus
//!   `FieldErrors::unknown_fields`, every problem reported), convert it back
//!   to a `Value` and `canonical::idempotency_key` (canonical JSON, SHA-256,
//!   hex). It is a breakdown of the pipeline's cost, not a floor.

#![forbid(unsafe_code)]

mod scenario;

pub use scenario::{ORDERS, Scenario, chosen, median, ns_per_call, order_id, time_scenarios};

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use orders::{
    Currency, GetOrderArgs, Order, RefundOrderArgs, RefundReason, Shop, get_order, refund_order,
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolcall::__private::ToolArgs;
use toolcall::{
    AuditRecord, AuditSink, Call, Code, Dispatcher, FieldErrors, MemoryAudit, Policy, ToolResult,
    tools,
};
use toolcall_core::canonical::idempotency_key;

/// The session every scenario runs in, as in `bench.py`.
pub const SESSION: &str = "bench";

/// Calls per scenario run in `bench.py` (its `N`).
pub const REFERENCE_CALLS: usize = 20_000;

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

/// A dispatcher over `shop` with `bench.py`'s settings: both tools allowed,
/// a refund cap of 10^12 cents, budgets of 10^9 steps and duplicate calls,
/// no wait between retries.
pub fn dispatcher(shop: Arc<Shop>, audit: Audit) -> Dispatcher<Shop> {
    let registry = tools![get_order, refund_order].expect("two distinct tools");
    let policy = Policy::new()
        .allow(["get_order", "refund_order"])
        .limit("max_refund_cents", 1_000_000_000_000);
    let builder = Dispatcher::builder(registry, shop)
        .part(Shop::reader)
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

/// A single-threaded runtime, the kind a benchmark drives the pipeline
/// with. Its timer is on: a call that waits for another (two threads
/// refunding the same order wait for its resource lock) sleeps between
/// looks, and tokio's sleep needs the timer.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

impl Scenario {
    /// Whether the host confirmed the calls (all refunds are confirmed in `bench.py`).
    pub fn confirmed(self) -> bool {
        self != Scenario::GetOrderOk
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

/// `get_order`'s arguments as any strict implementation would declare them.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TypedGetOrder {
    /// `ORD-` and four digits.
    pub order_id: String,
}

/// `refund_order`'s arguments as any strict implementation would declare
/// them: integer cents (`25.9` does not parse), the two enums of the
/// orders example (`BRL`/`USD`, `damaged`/...), no other member.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TypedRefund {
    /// `ORD-` and four digits.
    pub order_id: String,
    /// At least 1.
    pub amount_cents: i64,
    /// The order's currency.
    pub currency: Currency,
    /// Why.
    pub reason: RefundReason,
}

/// The constraints of the schema that serde's types do not carry.
pub trait Constrained {
    /// Whether the value satisfies them.
    fn within_constraints(&self) -> bool;
}

impl Constrained for TypedGetOrder {
    fn within_constraints(&self) -> bool {
        is_order_id(&self.order_id)
    }
}

impl Constrained for TypedRefund {
    fn within_constraints(&self) -> bool {
        is_order_id(&self.order_id) && self.amount_cents >= 1
    }
}

/// `^ORD-[0-9]{4}$`, by hand.
pub fn is_order_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    bytes.len() == 8 && bytes.starts_with(b"ORD-") && bytes[4..].iter().all(u8::is_ascii_digit)
}

/// The floor for one call: parse the text into the typed struct (unknown
/// members refused), check the two constraints, and for valid arguments
/// return the idempotency key, SHA-256 over `session|tool|` and the
/// serialized struct. `None` for invalid arguments.
pub fn floor(scenario: Scenario, raw: &str) -> Option<[u8; 32]> {
    match scenario {
        Scenario::GetOrderOk => typed_key::<TypedGetOrder>("get_order", raw),
        _ => typed_key::<TypedRefund>("refund_order", raw),
    }
}

fn typed_key<A: DeserializeOwned + Serialize + Constrained>(
    tool: &str,
    raw: &str,
) -> Option<[u8; 32]> {
    // A derived struct also reads a JSON array, by position: refuse it.
    if !raw
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    let args: A = serde_json::from_str(raw).ok()?;
    if !args.within_constraints() {
        return None;
    }
    Some(key_of(tool, &args))
}

/// SHA-256 over `session|tool|` and `args` serialized, the floor's key. The
/// serializer writes straight into the hasher: no buffer (criterion
/// `floor_parts/typed_key`; through a `Vec` first it is slower).
pub fn key_of<A: Serialize>(tool: &str, args: &A) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(SESSION.as_bytes());
    hasher.update(b"|");
    hasher.update(tool.as_bytes());
    hasher.update(b"|");
    serde_json::to_writer(&mut hasher, args).expect("a struct of strings, integers and enums");
    hasher.finalize().into()
}

/// The time of the floor over every call of `calls`.
pub fn time_floor(scenario: Scenario, calls: &[String]) -> Duration {
    let started = Instant::now();
    for raw in calls {
        black_box(floor(scenario, black_box(raw)));
    }
    started.elapsed()
}

/// Ours, not a floor: toolcall's own validator and key for one call (parse
/// into a map, build the generated struct with every problem reported,
/// unknown fields included, and for valid arguments the hex idempotency key
/// over its `Value`). The floor before the typed one; kept as a breakdown of
/// what toolcall's validation costs over the typed floor.
pub fn ours(scenario: Scenario, raw: &str) -> Option<String> {
    match scenario {
        Scenario::GetOrderOk => ours_of::<GetOrderArgs>("get_order", raw),
        _ => ours_of::<RefundOrderArgs>("refund_order", raw),
    }
}

fn ours_of<A: ToolArgs>(tool: &str, raw: &str) -> Option<String> {
    let object: Map<String, Value> = serde_json::from_str(raw).ok()?;
    let mut errors = FieldErrors::default();
    let args = A::from_object(&object, &mut errors);
    errors.unknown_fields(&object, A::fields());
    if !black_box(&errors).is_empty() {
        return None;
    }
    let value = serde_json::to_value(args?).ok()?;
    Some(idempotency_key("default", SESSION, tool, &value))
}

/// The time of [`ours`] over every call of `calls`.
pub fn time_ours(scenario: Scenario, calls: &[String]) -> Duration {
    let started = Instant::now();
    for raw in calls {
        black_box(ours(scenario, black_box(raw)));
    }
    started.elapsed()
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
    fn refunds_are_distinct_and_the_floor_and_ours_agree_with_the_validator() {
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
        let ours_keys: Vec<_> = calls
            .iter()
            .map(|raw| ours(Scenario::RefundOkConfirmed, raw).expect("valid"))
            .collect();
        assert!(ours_keys[0] != ours_keys[1] && ours_keys[1] != ours_keys[2]);
        let invalid = Scenario::RefundInvalidArgs.arguments(0);
        assert_eq!(floor(Scenario::RefundInvalidArgs, &invalid), None);
        assert_eq!(ours(Scenario::RefundInvalidArgs, &invalid), None);
        for scenario in [Scenario::GetOrderOk, Scenario::RefundReplay] {
            let raw = scenario.arguments(7);
            assert!(floor(scenario, &raw).is_some() && ours(scenario, &raw).is_some());
        }
    }

    #[test]
    fn the_typed_floor_is_strict() {
        let refund = |raw: &str| floor(Scenario::RefundOkConfirmed, raw);
        let ok = r#"{"order_id": "ORD-0001", "amount_cents": 5, "currency": "BRL", "reason": "damaged"}"#;
        assert!(refund(ok).is_some());
        for bad in [
            r#"{"order_id": "ORD-0001", "amount_cents": 5.0, "currency": "BRL", "reason": "damaged"}"#,
            r#"{"order_id": "ORD-0001", "amount_cents": "5", "currency": "BRL", "reason": "damaged"}"#,
            r#"{"order_id": "ORD-0001", "amount_cents": 0, "currency": "BRL", "reason": "damaged"}"#,
            r#"{"order_id": "ORD-001", "amount_cents": 5, "currency": "BRL", "reason": "damaged"}"#,
            r#"{"order_id": "ORD-00a1", "amount_cents": 5, "currency": "BRL", "reason": "damaged"}"#,
            r#"{"order_id": "ORD-0001", "amount_cents": 5, "currency": "EUR", "reason": "damaged"}"#,
            r#"{"order_id": "ORD-0001", "amount_cents": 5, "currency": "BRL", "reason": "bored"}"#,
            r#"{"order_id": "ORD-0001", "amount_cents": 5, "currency": "BRL"}"#,
            r#"{"order_id": "ORD-0001", "amount_cents": 5, "currency": "BRL", "reason": "damaged", "x": 1}"#,
            r#"["ORD-0001", 5, "BRL", "damaged"]"#,
        ] {
            assert_eq!(refund(bad), None, "{bad}");
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
