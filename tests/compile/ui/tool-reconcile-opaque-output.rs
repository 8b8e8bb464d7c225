use toolcall::{tool, Ctx, Rejection};

struct Bank;

/// Moves money.
#[tool(side_effect, reconcile = find_transfer)]
fn transfer(
    ctx: &Ctx<Bank>,
    /// The account id.
    account: String,
) -> Result<impl serde::Serialize, Rejection> {
    let _ = ctx;
    Ok(account)
}

async fn find_transfer(ctx: &Ctx<Bank>, key: &str) -> Result<Option<String>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

fn main() {}
