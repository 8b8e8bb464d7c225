//! `misbuilt`: a bank's `main` that returns a build error with `?`, as
//! the guide writes it, so that a test can read what the program prints.
//!
//! ```text
//! misbuilt unknown-tool   # a policy allows `transfer_mony`
//! misbuilt unknown-limit  # a policy sets `max_transfer_cent`
//! misbuilt open-schema    # a tool takes a struct without deny_unknown_fields
//! misbuilt duplicate-name # two tools named `transfer_money`
//! misbuilt warning        # prints the build's warnings with `{:?}`
//! ```

use std::error::Error;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolcall::{Ctx, Dispatcher, Policy, Rejection, tool, tools};
use toolcall_testkit::bank::Bank;

/// Who asked for a transfer. Open on purpose: no `deny_unknown_fields`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Requester {
    /// Their name.
    name: String,
}

/// Moves money between two accounts.
#[tool(side_effect)]
fn transfer_money(
    ctx: &Ctx<Bank>,
    /// The account the money leaves.
    from: String,
    /// The account it goes to.
    to: String,
    /// Amount in cents.
    #[arg(limit = "max_transfer_cents")]
    cents: i64,
) -> Result<Value, Rejection> {
    let _ = ctx;
    Ok(json!({"from": from, "to": to, "cents": cents}))
}

/// Moves money on someone's behalf.
#[tool(side_effect)]
fn transfer_for(
    /// Who asked.
    requester: Requester,
    /// Amount in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    Ok(json!({"by": requester.name, "cents": cents}))
}

mod again {
    use serde_json::{Value, json};
    use toolcall::{Rejection, tool};

    /// Moves money, again.
    #[tool(side_effect, name = "transfer_money")]
    pub fn transfer_twice(
        /// Amount in cents.
        cents: i64,
    ) -> Result<Value, Rejection> {
        Ok(json!({ "cents": cents }))
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let case = std::env::args().nth(1).unwrap_or_default();
    match case.as_str() {
        "unknown-tool" => {
            let _dispatcher = Dispatcher::builder(tools![transfer_money]?, Bank::new())
                .policy(Policy::new().allow(["transfer_mony"]))
                .build()?;
        }
        "unknown-limit" => {
            let _dispatcher = Dispatcher::builder(tools![transfer_money]?, Bank::new())
                .policy(
                    Policy::new()
                        .allow(["transfer_money"])
                        .limit("max_transfer_cent", 100),
                )
                .build()?;
        }
        "open-schema" => {
            let _registry = tools![transfer_money, transfer_for]?;
        }
        "duplicate-name" => {
            let _registry = tools![transfer_money, again::transfer_twice]?;
        }
        "warning" => {
            let dispatcher = Dispatcher::builder(tools![transfer_money]?, Bank::new())
                .policy(Policy::new().allow(["transfer_money"]))
                .build()?;
            for warning in dispatcher.warnings() {
                eprintln!("Warning: {warning:?}");
            }
        }
        other => return Err(format!("unknown case `{other}`").into()),
    }
    Ok(())
}
