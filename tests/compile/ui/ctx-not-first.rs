use toolcall::{tool, Ctx, Rejection};

struct Shop;

/// Reads an order.
#[tool]
fn read_order(
    /// The order id.
    order_id: String,
    ctx: &Ctx<Shop>,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(order_id)
}

fn main() {}
