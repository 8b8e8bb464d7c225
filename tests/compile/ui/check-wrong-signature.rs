use toolcall::{tool, Ctx, Rejection};

struct Shop;

/// Refunds an order.
#[tool(side_effect, check = check_refund)]
fn refund(
    _ctx: &Ctx<Shop>,
    /// The order id.
    order_id: String,
) -> Result<String, Rejection> {
    Ok(order_id)
}

fn check_refund(_order_id: &str, _ctx: &Ctx<Shop>) -> Result<(), Rejection> {
    Ok(())
}

fn main() {}
