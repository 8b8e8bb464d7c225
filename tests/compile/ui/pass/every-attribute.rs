use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolcall::{Call, Dispatcher, Rejection, tool, tools};

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Line {
    sku: String,
    quantity: u32,
}

/// Places an order.
#[tool(side_effect, name = "place_order", version = 2)]
fn place(
    /// Customer email.
    #[arg(format = "email", sensitive)]
    email: String,
    /// Delivery day.
    #[arg(format = "date")]
    deliver_on: String,
    /// Lines.
    #[arg(min_items = 1, max_items = 20)]
    lines: Vec<Line>,
    /// Discount in percent, strictly between 0 and 100.
    #[arg(exclusive_min = 0, exclusive_max = 100)]
    discount: Option<f64>,
    /// Idempotency token from the client app.
    #[arg(format = "uuid", rename = "requestId")]
    request_id: String,
    /// A link to the cart.
    #[arg(format = "uri", max_length = 2048)]
    cart: Option<String>,
    /// When the cart was saved.
    #[arg(format = "date-time")]
    saved_at: Option<String>,
) -> Result<usize, Rejection> {
    let _ = (email, deliver_on, discount, request_id, cart, saved_at);
    Ok(lines.len())
}

fn main() {
    let registry = tools![place].unwrap();
    assert_eq!(registry.iter().next().unwrap().name(), "place_order_v2");
    let dispatcher = Dispatcher::builder(registry, Arc::new(())).build().unwrap();
    let _ = dispatcher.execute(Call::new("place_order_v2", "{}").session("default"));
}
