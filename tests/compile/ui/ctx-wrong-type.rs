use toolcall::{tool, Rejection};

struct Shop;

/// Reads an order.
#[tool]
fn read_order(
    shop: &Shop,
    /// The order id.
    order_id: String,
) -> Result<String, Rejection> {
    let _ = shop;
    Ok(order_id)
}

fn main() {}
