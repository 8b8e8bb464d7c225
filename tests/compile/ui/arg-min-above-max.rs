use toolcall::{tool, Rejection};

/// Lists recent orders.
#[tool]
fn list_orders(
    /// How many.
    #[arg(min = 10, max = 5)]
    limit: u32,
) -> Result<u32, Rejection> {
    Ok(limit)
}

fn main() {}
