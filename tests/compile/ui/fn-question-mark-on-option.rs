use std::collections::HashMap;

use toolcall::{tool, Rejection};

/// The price of a product, in cents.
#[tool]
fn price_of(
    /// The product's SKU, for example `SKU-1`.
    sku: String,
) -> Result<i64, Rejection> {
    let prices = HashMap::from([("SKU-1".to_owned(), 250_i64)]);
    let cents = prices.get(&sku).copied()?;
    Ok(cents)
}

fn main() {}
