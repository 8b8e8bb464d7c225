//! The fuzz harness: one input is a short conversation of calls through one
//! fresh dispatcher over the reference's shop, and every call is checked.
//!
//! Shared by the fuzz target (`fuzz_targets/dispatch.rs`) and by the normal
//! test that replays the kept inputs (`tests/properties/fuzzing.rs`), so a finding
//! kept in `fuzz/regressions/` is checked by `cargo test`.
//!
//! # Input format
//!
//! The input is split on the byte `0xFF` (never part of UTF-8 text) into at
//! most [`MAX_CALLS`] calls. A call's first byte is a header, the rest its
//! raw arguments (as UTF-8, invalid sequences replaced):
//!
//! | header bits | meaning |
//! |---|---|
//! | 0-1 | the tool: `get_order`, `refund_order`, `refund_order`, or `refund` (no such tool) |
//! | 2 | confirmed by the host |
//! | 3 | session `b` instead of `a` |
//! | 4 | hand the arguments over parsed (when they are JSON) instead of as text |
//! | 5-6 | the backend loses its next 0-3 responses after committing |
//!
//! # What is checked
//!
//! * nothing panics (the fuzzer reports a panic as a crash);
//! * exactly one audit record per call;
//! * `ok` is `code == OK`, and a refusal says why;
//! * the refund backend applies something only for an `ok` refund, or one
//!   whose response was lost (`UPSTREAM_UNAVAILABLE`), and then only for a
//!   confirmed call whose arguments an independent check finds valid: the
//!   handler never runs with arguments the validator rejects, nor without
//!   the host's approval;
//! * one call applies at most one refund, and no idempotency key is
//!   applied twice;
//! * an `ok`, not replayed refund's arguments are valid by that same check.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use orders::{Shop, get_order, refund_order};
use serde_json::{Map, Value};
use toolcall::{Arguments, Call, Code, Dispatcher, MemoryAudit, Policy, tools};
use toolcall_core::canonical::idempotency_key;

/// Calls per input at most.
pub const MAX_CALLS: usize = 16;

/// The refund cap of the fuzzed caller, in cents.
pub const MAX_REFUND_CENTS: i64 = 5_000;

const TOOLS: [&str; 4] = ["get_order", "refund_order", "refund_order", "refund"];

/// One decoded call.
#[derive(Debug, Clone)]
pub struct FuzzCall {
    /// The tool asked for.
    pub tool: &'static str,
    /// Confirmed by the host.
    pub confirmed: bool,
    /// `"a"` or `"b"`.
    pub session: &'static str,
    /// Hand the arguments over parsed.
    pub parsed: bool,
    /// Responses the backend loses before this call.
    pub lose: u32,
    /// The raw arguments.
    pub arguments: String,
}

/// The calls an input stands for.
pub fn decode(data: &[u8]) -> Vec<FuzzCall> {
    data.split(|&b| b == 0xFF)
        .filter(|chunk| !chunk.is_empty())
        .take(MAX_CALLS)
        .map(|chunk| {
            let header = chunk[0];
            FuzzCall {
                tool: TOOLS[usize::from(header & 0b11)],
                confirmed: header & 0b100 != 0,
                session: if header & 0b1000 != 0 { "b" } else { "a" },
                parsed: header & 0b1_0000 != 0,
                lose: u32::from((header >> 5) & 0b11),
                arguments: String::from_utf8_lossy(&chunk[1..]).into_owned(),
            }
        })
        .collect()
}

/// The inverse of [`decode`], for writing seeds and regressions.
#[allow(dead_code)] // used by the tests, not by the fuzz target
pub fn encode(calls: &[FuzzCall]) -> Vec<u8> {
    let mut out = Vec::new();
    for call in calls {
        let tool = TOOLS.iter().position(|&t| t == call.tool).unwrap_or(3) as u8;
        let header = tool
            | u8::from(call.confirmed) << 2
            | u8::from(call.session == "b") << 3
            | u8::from(call.parsed) << 4
            | ((call.lose.min(3) as u8) << 5);
        out.push(header);
        out.extend_from_slice(call.arguments.as_bytes());
        out.push(0xFF);
    }
    out
}

/// Refund arguments that any strict validator must accept, checked here
/// without the crate's validator: exactly the four fields, `ORD-` and four
/// ASCII digits, an integer amount from 1 to the cap, a known currency and
/// reason. Returns the validated form, as the argument struct serializes it.
pub fn valid_refund(arguments: &Value) -> Option<Value> {
    let object = arguments.as_object()?;
    if object.len() != 4 {
        return None;
    }
    let order_id = object.get("order_id")?.as_str()?;
    let digits = order_id.strip_prefix("ORD-")?;
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount = object.get("amount_cents")?.as_i64()?;
    if !(1..=MAX_REFUND_CENTS).contains(&amount) {
        return None;
    }
    let currency = object.get("currency")?.as_str()?;
    let reason = object.get("reason")?.as_str()?;
    if !["BRL", "USD"].contains(&currency)
        || !["damaged", "not_delivered", "customer_request"].contains(&reason)
    {
        return None;
    }
    let mut validated = Map::new();
    validated.insert("order_id".into(), order_id.into());
    validated.insert("amount_cents".into(), amount.into());
    validated.insert("currency".into(), currency.into());
    validated.insert("reason".into(), reason.into());
    Some(Value::Object(validated))
}

/// A fresh dispatcher over the reference's shop, as the fuzzer drives it.
pub fn dispatcher(shop: &Arc<Shop>, audit: &MemoryAudit) -> Dispatcher<Shop> {
    let policy = Policy::new()
        .allow(["get_order", "refund_order"])
        .limit("max_refund_cents", MAX_REFUND_CENTS);
    Dispatcher::builder(
        tools![get_order, refund_order].expect("two distinct tools"),
        Arc::clone(shop),
    )
    .part(Shop::reader)
    .policy(policy)
    .retry_backoff(Duration::ZERO)
    .audit(audit.clone())
    .build()
    .expect("the orders tools take a Shop")
}

/// Runs the calls of `data` and checks each one; panics on a violation.
pub fn run(data: &[u8], runtime: &tokio::runtime::Runtime) {
    let calls = decode(data);
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let dispatcher = dispatcher(&shop, &audit);
    let mut applied_keys = HashSet::new();
    for (i, call) in calls.iter().enumerate() {
        let parsed: Option<Value> = serde_json::from_str(&call.arguments).ok();
        let arguments = match (&parsed, call.parsed) {
            (Some(value), true) => Arguments::Parsed(value),
            _ => Arguments::Raw(&call.arguments),
        };
        shop.lose_next_responses(call.lose);
        let before = shop.applied_refunds();
        let result = runtime.block_on(
            dispatcher.execute(
                Call::new(call.tool, arguments)
                    .session(call.session)
                    .confirmed(call.confirmed),
            ),
        );
        let applied = shop.applied_refunds() - before;

        assert_eq!(audit.len(), i + 1, "one audit record per call: {call:?}");
        assert_eq!(result.ok, result.code == Code::Ok, "{result:?}");
        assert!(result.ok || !result.message.is_empty(), "{result:?}");
        assert!(applied <= 1, "one call applied {applied} refunds: {call:?}");

        let validated = parsed.as_ref().and_then(valid_refund);
        if applied == 1 {
            assert!(
                result.ok || result.code == Code::UpstreamUnavailable,
                "a refused call had a side effect: {call:?} -> {result:?}"
            );
            assert_eq!(call.tool, "refund_order", "{call:?}");
            assert!(call.confirmed, "applied without approval: {call:?}");
            let validated = validated.as_ref().unwrap_or_else(|| {
                panic!("the handler ran on arguments a strict check rejects: {call:?}")
            });
            let key = idempotency_key("default", call.session, call.tool, validated);
            assert!(
                applied_keys.insert(key),
                "one idempotency key applied twice: {call:?}"
            );
        }
        if result.ok && !result.replayed && call.tool == "refund_order" {
            assert!(
                validated.is_some(),
                "an ok refund with arguments a strict check rejects: {call:?} -> {result:?}"
            );
        }
    }
}
