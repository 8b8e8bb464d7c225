use toolcall::{tool, Rejection};

/// Moves money.
#[tool(side_effect)]
fn transfer(
    /// The account.
    #[arg(resource = "")]
    account: String,
) -> Result<String, Rejection> {
    Ok(account)
}

fn main() {}
