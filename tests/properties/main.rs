//! Properties of the idempotency key and of side effects, over generated
//! calls:
//!
//! * the key of a call does not change with the member order, white space
//!   or string escapes of the raw JSON, and differs for different validated
//!   arguments;
//! * no call the pipeline refuses has a side effect (the fuzz harness's
//!   checks, on generated conversations);
//! * whatever the sequence of calls, a side effect completes at most once
//!   per idempotency key, and so do two identical calls in flight at once;
//! * a number is keyed as the double nearest to its text, however it is
//!   written (`1e2`, `100.0`, `100`, `10000e-2`, long fractions);
//! * the inputs kept from fuzzing (`fuzz/seeds`, `fuzz/regressions`) pass.

use std::collections::HashMap;

use std::path::Path;

use std::sync::atomic::{AtomicU32, Ordering};

use std::sync::{Arc, Mutex};

use std::time::Duration;

use orders::{Currency, RefundReason};

use proptest::prelude::*;

use serde_json::{Value, json};

use toolcall::{Call, Code, Ctx, Dispatcher, ToolError, ToolResult, tool, tools};

use toolcall_core::canonical::idempotency_key;

use toolcall_testkit::run::one_thread as runtime;

#[path = "../../fuzz/harness.rs"]
mod harness;

#[path = "../../toolcall-core/tests/support/numbers.rs"]
mod numbers;

use numbers::{ONE_HUNDRED, forms_of, number_text};

// ------------------------------------------------------- a recording tool

/// A payment backend that does not deduplicate: it counts, per idempotency
/// key, the payments it completed. It can be told to fail its next calls
/// before doing anything (a transient error the dispatcher retries).
#[derive(Debug, Default)]
struct Ledger {
    completed: Mutex<HashMap<String, u32>>,
    keys: Mutex<Vec<String>>,
    fail_next: AtomicU32,
}

impl Ledger {
    fn completed(&self) -> HashMap<String, u32> {
        self.completed.lock().unwrap().clone()
    }

    fn last_key(&self) -> Option<String> {
        self.keys.lock().unwrap().last().cloned()
    }
}

/// Pays a saved payee. Amount in cents.
#[tool(side_effect)]
fn pay(
    ctx: &Ctx<Ledger>,
    /// Payee id, for example P-07.
    #[arg(pattern = r"^P-[0-9]{2}$")]
    payee: String,
    /// Amount in cents.
    #[arg(min = 1)]
    amount_cents: i64,
    /// The payment's currency.
    currency: Currency,
    /// Why the payment is made.
    reason: RefundReason,
) -> Result<Value, ToolError> {
    let ledger = &ctx.state;
    let key = ctx.idempotency_key.to_string();
    ledger.keys.lock().unwrap().push(key.clone());
    if ledger
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(ToolError::transient("the ledger is busy"));
    }
    *ledger.completed.lock().unwrap().entry(key).or_default() += 1;
    Ok(json!({"payee": payee, "paid_cents": amount_cents, "currency": currency, "reason": reason}))
}

/// `pay`, but it waits for the runtime once before paying, as a real
/// backend call would.
#[tool(side_effect)]
async fn pay_slowly(
    ctx: &Ctx<Ledger>,
    /// Payee id, for example P-07.
    #[arg(pattern = r"^P-[0-9]{2}$")]
    payee: String,
) -> Result<Value, ToolError> {
    tokio::task::yield_now().await;
    let key = ctx.idempotency_key.to_string();
    *ctx.state.completed.lock().unwrap().entry(key).or_default() += 1;
    Ok(json!({"payee": payee}))
}

fn ledger_dispatcher(ledger: &Arc<Ledger>) -> Dispatcher<Ledger> {
    Dispatcher::builder(tools![pay].unwrap(), Arc::clone(ledger))
        .max_steps(1_000)
        .retry_backoff(Duration::ZERO)
        .build()
        .unwrap()
}

fn execute<S: Send + Sync + 'static>(
    runtime: &tokio::runtime::Runtime,
    dispatcher: &Dispatcher<S>,
    session: &str,
    raw: &str,
) -> ToolResult {
    runtime.block_on(dispatcher.execute(Call::new("pay", raw).session(session)))
}

// ------------------------------------------------- generated arguments

/// Valid arguments of `pay`, as the argument struct serializes them.
fn payment() -> impl Strategy<Value = Value> {
    (
        "P-[0-9]{2}",
        1i64..=i64::MAX,
        prop_oneof![Just("BRL"), Just("USD")],
        prop_oneof![
            Just("damaged"),
            Just("not_delivered"),
            Just("customer_request")
        ],
    )
        .prop_map(|(payee, amount, currency, reason)| {
            json!({"payee": payee, "amount_cents": amount, "currency": currency, "reason": reason})
        })
}

/// One way to write `value` as JSON text: members in the order given by
/// `order`, white space from `spaces` between tokens, and some string
/// characters written as `\uXXXX` escapes.
fn render(value: &Value, order: &[usize], spaces: &[&str], escapes: &[bool]) -> String {
    let object = value.as_object().expect("an object");
    let members: Vec<(&String, &Value)> = object.iter().collect();
    let mut space = spaces.iter().cycle();
    let mut escape = escapes.iter().cycle();
    let mut string = |text: &str| {
        let mut out = String::from("\"");
        for c in text.chars() {
            if *escape.next().unwrap_or(&false) {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                out.push(c);
            }
        }
        out.push('"');
        out
    };
    let mut out = String::new();
    out.push_str(space.next().unwrap());
    out.push('{');
    for (n, &i) in order.iter().enumerate() {
        let (name, item) = members[i % members.len()];
        if n > 0 {
            out.push(',');
        }
        out.push_str(space.next().unwrap());
        out.push_str(&string(name));
        out.push_str(space.next().unwrap());
        out.push(':');
        out.push_str(space.next().unwrap());
        match item {
            Value::String(text) => out.push_str(&string(text)),
            other => out.push_str(&other.to_string()),
        }
        out.push_str(space.next().unwrap());
    }
    out.push('}');
    out.push_str(space.next().unwrap());
    out
}

mod fuzzing;
mod number_keys;
mod renderings;
mod sequences;
