use toolcall::{tool, Rejection};

/// Reads a balance.
#[tool(idempotent_backend)]
fn read_balance(
    /// The account id.
    account: String,
) -> Result<String, Rejection> {
    Ok(account)
}

fn main() {}
