//! Two tools whose arguments are an enum and a struct of the application's
//! own, their schemas derived through toolcall's re-export of schemars, and
//! one call dispatched to each.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
// Where the derive looks for schemars when a type does not say: toolcall's
// re-export, so that this crate needs no dependency on schemars.
use toolcall::schemars;
use toolcall::{Call, Dispatcher, Policy, Rejection, tool, tools};

/// A currency the shop takes: its derive is told where schemars is.
#[derive(Serialize, Deserialize, toolcall::JsonSchema)]
#[schemars(crate = "toolcall::schemars")]
#[serde(rename_all = "UPPERCASE")]
enum Currency {
    Brl,
    Eur,
}

/// Where a parcel goes: its derive finds schemars by the `use` above.
#[derive(Serialize, Deserialize, toolcall::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Address {
    /// The street and number.
    street: String,
    /// The postal code.
    postal_code: String,
}

/// Converts an amount of cents into another currency.
#[tool]
fn convert(
    /// The amount in cents.
    #[arg(min = 1)]
    amount_cents: i64,
    /// The currency to convert to.
    to: Currency,
) -> Result<String, Rejection> {
    let rate = match to {
        Currency::Brl => 6,
        Currency::Eur => 1,
    };
    Ok(format!("{}", amount_cents * rate))
}

/// Ships an order to an address.
#[tool(side_effect)]
fn ship(
    /// The order, for example ORD-1001.
    #[arg(pattern = r"^ORD-\d{4}$")]
    order_id: String,
    /// Where it goes.
    to: Address,
) -> Result<String, Rejection> {
    Ok(format!("{order_id} to {}, {}", to.street, to.postal_code))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = Policy::new().allow(["convert", "ship"]);
    let tools = Dispatcher::builder(tools![convert, ship]?, Arc::new(()))
        .policy(policy)
        .build()?;
    let calls = [
        Call::new("convert", r#"{"amount_cents": 100, "to": "BRL"}"#).session("outside-app"),
        Call::new("convert", r#"{"amount_cents": 100, "to": "USD"}"#).session("outside-app"),
        Call::new(
            "ship",
            r#"{"order_id": "ORD-1001", "to": {"street": "Rua A, 1", "postal_code": "01000-000"}}"#,
        )
        .session("outside-app"),
    ];
    let mut codes = Vec::new();
    for call in calls {
        let answer = tools.execute(call).await;
        println!("{}", answer.to_model_text());
        codes.push(answer.code.to_string());
    }
    assert_eq!(codes, ["OK", "INVALID_ARGUMENTS", "OK"]);
    Ok(())
}
