use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels an event.
#[tool(side_effect, check = check_cancel, async_check = check_calendar)]
fn cancel_event(
    ctx: &Ctx<Cal>,
    /// The event id.
    event_id: String,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(event_id)
}

fn check_cancel(args: &CancelEventArgs, ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    let _ = (args, ctx);
    Ok(())
}

async fn check_calendar(args: &CancelEventArgs, ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    let _ = (args, ctx);
    Ok(())
}

fn main() {}
