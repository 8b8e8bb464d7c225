use toolcall::{tool, Rejection};

/// Converts a price.
#[tool]
fn convert(
    /// The price in cents.
    #[arg(allow_float)]
    price_cents: i64,
    /// The exchange rate.
    #[arg(allow_float)]
    rate: f64,
) -> Result<f64, Rejection> {
    Ok(price_cents as f64 * rate)
}

fn main() {}
