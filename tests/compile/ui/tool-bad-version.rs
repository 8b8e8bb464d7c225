use toolcall::{tool, Rejection};

/// Reads an order.
#[tool(version = 0)]
fn read_order(
    /// The order id.
    order_id: String,
) -> Result<String, Rejection> {
    Ok(order_id)
}

fn main() {}
