use toolcall::{tool, Rejection};

/// Reads an order.
#[tool]
fn read_order(
    /// The order id.
    #[arg(rename = "")]
    order_id: String,
) -> Result<String, Rejection> {
    Ok(order_id)
}

fn main() {}
