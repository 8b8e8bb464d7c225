use toolcall::{tool, Rejection};

/// Charges a card.
#[tool(side_effect, high_risk)]
fn charge(
    /// What to charge.
    amount: f64,
    /// The tip, if any.
    tip_amount: Option<f32>,
    /// An exchange rate is not money: no error here.
    rate: f64,
) -> Result<f64, Rejection> {
    Ok(amount + f64::from(tip_amount.unwrap_or(0.0)) * rate)
}

/// Converts a price, as a float on purpose.
#[tool]
fn convert(
    /// The price in a float, accepted knowingly.
    #[arg(allow_float)]
    price: f64,
) -> Result<f64, Rejection> {
    Ok(price)
}

fn main() {}
