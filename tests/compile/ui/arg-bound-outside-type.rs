use toolcall::{tool, Rejection};

/// Lists orders.
#[tool]
fn list_orders(
    /// How many, at most.
    #[arg(min = -5, max = 5000000000)]
    limit: u32,
    /// How many to skip.
    #[arg(max = 300)]
    offset: Option<u8>,
    /// A weight for the ranking.
    #[arg(max = 1e39)]
    weight: f32,
) -> Result<u32, Rejection> {
    let _ = (offset, weight);
    Ok(limit)
}

fn main() {}
