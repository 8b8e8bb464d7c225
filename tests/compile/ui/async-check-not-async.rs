use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels an event.
#[tool(side_effect, async_check = check_cancel)]
fn cancel_event(
    ctx: &Ctx<Cal>,
    /// The event id.
    event_id: String,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(event_id)
}

/// Answers at once: a `check`, not an `async_check`.
fn check_cancel(args: &CancelEventArgs, ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    let _ = (args, ctx);
    Ok(())
}

fn main() {}
