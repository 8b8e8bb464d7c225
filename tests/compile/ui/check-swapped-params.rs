use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels the next event.
#[tool(side_effect, check = check_cancel)]
fn cancel_event(_ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    Ok(())
}

fn check_cancel(_ctx: &Ctx<Cal>, _args: &CancelEventArgs) -> Result<(), Rejection> {
    Ok(())
}

fn main() {}
