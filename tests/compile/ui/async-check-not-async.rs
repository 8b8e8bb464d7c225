use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels the next event.
#[tool(side_effect, async_check = check_cancel)]
fn cancel_event(_ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    Ok(())
}

/// Answers at once: a `check`, not an `async_check`.
fn check_cancel(_args: &CancelEventArgs, _ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    Ok(())
}

fn main() {}
