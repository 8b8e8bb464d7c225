use serde_json::Value;
use toolcall::{tool, Rejection};

/// Moves money between two accounts.
#[tool(side_effect, max_repeats = 20)]
fn transfer_money(
    /// Amount in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    Ok(Value::from(cents))
}

/// Where a transfer is.
#[tool(max_repeats = 0)]
fn transfer_status(
    /// The transfer's id.
    transfer_id: String,
) -> Result<String, Rejection> {
    Ok(transfer_id)
}

fn main() {}
