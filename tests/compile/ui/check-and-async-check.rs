use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels the next event.
#[tool(side_effect, check = check_cancel, async_check = check_calendar)]
fn cancel_event(_ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    Ok(())
}

fn check_cancel(_args: &CancelEventArgs, _ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    Ok(())
}

async fn check_calendar(_args: &CancelEventArgs, _ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    Ok(())
}

fn main() {}
