use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels an event.
#[tool(side_effect)]
fn cancel_event(
    #[arg(sensitive)]
    ctx: &Ctx<Cal>,
    /// The event id.
    event_id: String,
) -> Result<String, Rejection> {
    let _ = ctx;
    Ok(event_id)
}

fn main() {}
