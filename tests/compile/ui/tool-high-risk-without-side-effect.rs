use toolcall::{tool, Rejection};

/// Reads a balance.
#[tool(high_risk)]
fn read_balance(
    /// The account id.
    account: String,
) -> Result<String, Rejection> {
    Ok(account)
}

fn main() {}
