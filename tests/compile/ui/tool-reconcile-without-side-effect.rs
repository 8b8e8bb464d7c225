use toolcall::{tool, Ctx, Rejection};

struct Bank;

/// Reads the balance.
#[tool(reconcile = find)]
fn read_balance(_ctx: &Ctx<Bank>) -> Result<u64, Rejection> {
    Ok(0)
}

async fn find(_ctx: &Ctx<Bank>, _key: &str) -> Result<Option<u64>, Rejection> {
    Ok(None)
}

fn main() {}
