use toolcall::{tool, Rejection};

/// Lists orders.
#[tool]
fn list_orders(
    /// How many.
    #[arg(min = 1)]
    #[arg(max = 50, min = 2)]
    limit: u32,
) -> Result<u32, Rejection> {
    Ok(limit)
}

fn main() {}
