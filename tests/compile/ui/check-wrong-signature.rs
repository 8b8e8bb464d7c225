use toolcall::{tool, Ctx, Rejection};

struct Shop;

/// Refunds an order.
#[tool(side_effect, check = check_refund)]
fn refund(
    ctx: &Ctx<Shop>,
    /// The order id.
    order_id: String,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(order_id)
}

fn check_refund(order_id: &str, ctx: &Ctx<Shop>) -> Result<(), Rejection> {
    let _ = (order_id, ctx);
    Ok(())
}

fn main() {}
