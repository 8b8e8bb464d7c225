use toolcall::{tool, Rejection};

/// Deletes an account.
#[tool(side_effect, high_risk)]
fn delete_account(
    /// The account id.
    account: String,
    /// Whether a person confirmed.
    confirmed: bool,
    /// The key.
    idempotency_key: String,
) -> Result<String, Rejection> {
    let _ = (confirmed, idempotency_key);
    Ok(account)
}

fn main() {}
