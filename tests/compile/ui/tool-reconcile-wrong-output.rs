use serde::Serialize;
use toolcall::{tool, Ctx, Rejection};

struct Bank;

#[derive(Serialize)]
struct Transfer {
    id: String,
}

/// Moves money.
#[tool(side_effect, reconcile = find_transfer)]
fn transfer(
    ctx: &Ctx<Bank>,
    /// The account id.
    account: String,
) -> Result<Transfer, Rejection> {
    let _ = ctx;
    Ok(Transfer { id: account })
}

/// What the bank answered, as it answered it: not the tool's output.
async fn find_transfer(
    ctx: &Ctx<Bank>,
    key: &str,
) -> Result<Option<String>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

/// Cancels a booking: a tool without a context of its own.
#[tool(side_effect, reconcile = find_cancel)]
fn cancel(
    /// The booking id.
    booking: String,
) -> Result<String, Rejection> {
    Ok(booking)
}

async fn find_cancel(ctx: &Ctx<Bank>, key: &str) -> Result<Option<u64>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

fn main() {}
