use toolcall::{tool, Rejection};

/// Moves an order.
#[tool(side_effect)]
fn move_order(
    /// From.
    order_id: String,
    /// To.
    #[arg(rename = "order_id")]
    target: String,
) -> Result<String, Rejection> {
    Ok(order_id + &target)
}

fn main() {}
