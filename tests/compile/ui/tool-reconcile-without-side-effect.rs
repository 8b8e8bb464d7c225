use toolcall::{tool, Ctx, Rejection};

struct Bank;

/// Reads a balance.
#[tool(reconcile = find)]
fn read_balance(
    ctx: &Ctx<Bank>,
    /// The account id.
    account: String,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(account)
}

async fn find(ctx: &Ctx<Bank>, key: &str) -> Result<Option<String>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

fn main() {}
