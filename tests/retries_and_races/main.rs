//! Retries, races and floods, where real agents break promises: calls
//! whose outcome is unknown, check-then-act races, a person's yes after the
//! model asked several times, limits that must not depend on the input's
//! form, and echo that must not grow with the input. The assertion that
//! matters is how many side effects the backend saw.

use std::collections::HashMap;

use std::sync::atomic::{AtomicU32, Ordering};

use std::sync::{Arc, Mutex};

use std::time::Duration;

use orders::Shop;

use serde_json::{Value, json};

use toolcall::store::MemoryStore;

use toolcall::{
    Call, Code, Ctx, Dispatcher, DispatcherBuilder, MemoryAudit, Policy, REDACTED, Registry,
    Rejection, ToolError, ToolResult, tool, tools,
};

use toolcall_testkit::bank::Bank;

const REFUND_ALL: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 12000, "currency": "BRL", "reason": "damaged"}"#;

#[path = "../shop.rs"]
mod shop;
use shop::*;
use toolcall_testkit::answer::assert_code_says;
use toolcall_testkit::count::counted;

/// `arguments` for a refund in the session `default`, confirmed by a
/// person: what most promises here are about.
async fn confirmed_refund(d: &Dispatcher<Shop>, arguments: &str) -> ToolResult {
    in_default_with(d, "refund_order", arguments, |c| c.confirmed(true)).await
}

mod approvals;
mod bounds;
mod resources;
mod unknown_outcomes;
