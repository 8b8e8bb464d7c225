use toolcall::{tool, Rejection};

/// Tags an order.
#[tool(side_effect)]
fn tag(
    /// The tags, comma-separated.
    #[arg(min_items = 1, max = 3)]
    tags: String,
) -> Result<String, Rejection> {
    Ok(tags)
}

fn main() {}
