use toolcall::{tool, Rejection};

/// Reads an order.
#[tool]
fn read_order(
    /// The id.
    #[arg(pattern = "^[0-9]{4}$")]
    order_id: u32,
) -> Result<u32, Rejection> {
    Ok(order_id)
}

fn main() {}
