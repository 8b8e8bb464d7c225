use toolcall::{tool, Rejection};

/// Reads an order.
#[tool(timeout_ms = 0)]
fn read_order(
    /// The order id.
    order_id: String,
) -> Result<String, Rejection> {
    Ok(order_id)
}

fn main() {}
