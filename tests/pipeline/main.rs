//! Every stage and every code of the pipeline, beyond the reference's suite.
//! The assertion that matters is what the backend saw: how many side
//! effects, how many attempts, under which keys.

use std::sync::atomic::{AtomicU32, Ordering};

use std::sync::{Arc, Mutex};

use std::time::Duration;

use orders::Shop;

use serde_json::{Value, json};

use toolcall::store::prelude::*;

use toolcall::{
    Call, Caller, Code, Ctx, Dispatcher, JsonLinesAudit, MemoryAudit, Policy, Rejection, ToolError,
    ToolResult, tool, tools,
};

// ---------------------------------------------------------------- orders

#[path = "../shop.rs"]
mod shop;
use shop::*;
use toolcall_testkit::answer::{assert_code_opens, assert_code_says};

const REFUND: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#;

async fn confirmed(d: &Dispatcher<Shop>, tool: &str, args: &str) -> ToolResult {
    confirmed_in(d, "default", tool, args).await
}

/// `args` for `tool` in `session`, confirmed by a person.
async fn confirmed_in(d: &Dispatcher<Shop>, session: &str, tool: &str, args: &str) -> ToolResult {
    d.execute(Call::new(tool, args).session(session).confirmed(true))
        .await
}

// ------------------------------------------------- tools of this test file

/// A backend that counts what reached it.
#[derive(Default)]
struct Probe {
    attempts: AtomicU32,
    failures_left: AtomicU32,
    keys: Mutex<Vec<String>>,
}

/// Panics.
#[tool(side_effect)]
fn explode(
    ctx: &Ctx<Probe>,
    /// After how many steps it panics, if given.
    after: Option<u32>,
) -> Result<(), ToolError> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    panic!("boom after {after:?}");
}

impl Probe {
    fn failing(times: u32) -> Arc<Probe> {
        let probe = Probe::default();
        probe.failures_left.store(times, Ordering::SeqCst);
        Arc::new(probe)
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

mod approvals;
mod arguments;
mod execution;
