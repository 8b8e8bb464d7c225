use toolcall::{tool, Rejection};

/// Reads an order.
#[tool]
fn read_order(
    /// The id.
    #[arg(pattern = "^ORD-(\\d{4}$")]
    order_id: String,
) -> Result<String, Rejection> {
    Ok(order_id)
}

fn main() {}
