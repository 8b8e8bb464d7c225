use toolcall::{tool, Ctx, Rejection};

struct Bank;

/// Moves money.
#[tool(side_effect, reconcile = find)]
fn transfer(
    ctx: &Ctx<Bank>,
    /// The account id.
    account: String,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(account)
}

fn find(ctx: &Ctx<Bank>, key: &str) -> Result<Option<String>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

fn main() {}
