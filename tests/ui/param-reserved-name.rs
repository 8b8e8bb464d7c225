use toolcall::{tool, Rejection};

/// Deletes an account.
#[tool(side_effect, high_risk)]
fn delete_account(account: String, confirmed: bool, idempotency_key: String) -> Result<String, Rejection> {
    let _ = (confirmed, idempotency_key);
    Ok(account)
}

fn main() {}
