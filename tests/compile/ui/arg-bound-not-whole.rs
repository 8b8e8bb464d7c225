use toolcall::{tool, Rejection};

/// Lists orders.
#[tool]
fn list_orders(
    /// How many, at least one.
    #[arg(min = 0.5, exclusive_max = 100.5)]
    limit: u32,
) -> Result<u32, Rejection> {
    Ok(limit)
}

fn main() {}
