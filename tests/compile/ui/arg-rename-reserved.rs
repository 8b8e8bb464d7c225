use toolcall::{tool, Rejection};

/// Deletes an account.
#[tool(side_effect, high_risk)]
fn delete_account(
    /// The account id.
    account: String,
    /// Whether the user said yes.
    #[arg(rename = "confirmed")]
    user_said_yes: bool,
) -> Result<String, Rejection> {
    let _ = user_said_yes;
    Ok(account)
}

fn main() {}
