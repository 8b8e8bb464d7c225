use toolcall::{tool, Rejection};

/// Refunds an order.
#[tool(side_effect, high_risk, untrusted_output)]
fn refund(
    /// The order id.
    order_id: String,
) -> Result<String, Rejection> {
    Ok(order_id)
}

fn main() {}
