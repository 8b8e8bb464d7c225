use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels an event.
#[tool(side_effect, check = check_cancel)]
fn cancel_event(
    ctx: &Ctx<Cal>,
    /// The event id.
    event_id: String,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(event_id)
}

fn check_cancel(args: &CancelEventArgs, ctx: &Ctx<Cal>) -> Result<(), String> {
    let _ = (args, ctx);
    Ok(())
}

fn main() {}
