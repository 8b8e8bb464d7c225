use toolcall::{tool, Ctx, Rejection};

struct Bank;

/// Moves the day's money.
#[tool(side_effect, reconcile = find)]
fn transfer(_ctx: &Ctx<Bank>) -> Result<u64, Rejection> {
    Ok(0)
}

fn find(_ctx: &Ctx<Bank>, _key: &str) -> Result<Option<u64>, Rejection> {
    Ok(None)
}

fn main() {}
