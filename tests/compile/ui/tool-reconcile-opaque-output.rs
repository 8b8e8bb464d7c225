use toolcall::{tool, Ctx, Rejection};

struct Bank;

/// Moves the day's money.
#[tool(side_effect, reconcile = find_transfer)]
fn transfer(_ctx: &Ctx<Bank>) -> Result<impl serde::Serialize, Rejection> {
    Ok(0)
}

async fn find_transfer(_ctx: &Ctx<Bank>, _key: &str) -> Result<Option<u64>, Rejection> {
    Ok(None)
}

fn main() {}
