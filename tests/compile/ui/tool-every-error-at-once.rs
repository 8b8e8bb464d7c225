use toolcall::{tool, Rejection};

#[tool(high_risk, retries = 3)]
fn pay(
    /// The session.
    session_id: String,
    /// The amount, in cents.
    #[arg(min = 5, max = 1)]
    amount_cents: i64,
) -> Result<i64, Rejection> {
    let _ = session_id;
    Ok(amount_cents)
}

fn main() {
    // The function is still emitted, so callers type-check.
    let _ = pay(String::new(), 1);
}
