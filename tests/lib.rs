//! Tools shared by the integration tests: one that uses every attribute
//! `#[tool]` offers, for the macro tests and the schema/validator agreement.

use serde_json::json;
use toolcall::{Rejection, tool};

/// One line of an order.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Line {
    /// The product.
    pub sku: String,
    /// How many.
    pub quantity: u32,
}

/// Places an order.
#[tool(side_effect, name = "place_order", version = 2)]
pub fn place(
    /// Customer email.
    #[arg(format = "email", sensitive)]
    email: String,
    /// Delivery day.
    #[arg(format = "date")]
    deliver_on: String,
    /// The lines.
    #[arg(min_items = 1, max_items = 3)]
    lines: Vec<Line>,
    /// Discount in percent, strictly between 0 and 100.
    #[arg(exclusive_min = 0, exclusive_max = 100)]
    discount: Option<f64>,
    /// The client's request id.
    #[arg(format = "uuid", rename = "requestId")]
    request_id: String,
    /// A note for the courier.
    #[arg(min_length = 2, max_length = 5)]
    note: Option<String>,
) -> Result<serde_json::Value, Rejection> {
    let _ = (email, deliver_on, discount, request_id, note);
    Ok(json!({"lines": lines.len()}))
}
