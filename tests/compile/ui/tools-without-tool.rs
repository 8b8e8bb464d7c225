use toolcall::{tool, tools, Rejection};

/// An account's balance, in cents.
#[tool]
fn get_balance(
    /// The account, for example ACC-1.
    account: String,
) -> Result<String, Rejection> {
    Ok(account)
}

/// Moves money between two accounts: no `#[tool]`.
fn transfer_money(from: String, to: String, cents: i64) -> Result<String, Rejection> {
    Ok(format!("{from} -> {to}: {cents}"))
}

fn main() {
    let _ = tools![get_balance, transfer_money];
}
