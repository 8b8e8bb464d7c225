use toolcall::{tool, Rejection};

/// Reads a balance.
#[tool]
fn read_balance(
    /// The account.
    #[arg(resource)]
    account: String,
) -> Result<String, Rejection> {
    Ok(account)
}

fn main() {}
