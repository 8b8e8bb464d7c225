use toolcall::tool;

/// Moves money between two accounts.
#[tool(side_effect)]
fn transfer_money(
    /// Amount in cents.
    cents: i64,
) -> Result<i64, String> {
    if cents <= 0 {
        return Err("the amount must be positive".to_owned());
    }
    Ok(cents)
}

fn main() {}
