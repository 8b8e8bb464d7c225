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

async fn find(key: &str, ctx: &Ctx<Bank>) -> Result<Option<String>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

fn main() {}
