use toolcall::{tool, Rejection};

/// Lists reviews.
#[tool(max_output_bytes = 10)]
fn list_reviews(
    /// The product id.
    product: String,
) -> Result<String, Rejection> {
    Ok(product)
}

fn main() {}
