use toolcall::{tool, Rejection};

const CHECK_CANCEL: bool = true;

/// Cancels an event.
#[tool(side_effect, check = CHECK_CANCEL)]
fn cancel_event(
    /// The event id.
    event_id: String,
) -> Result<String, Rejection> {
    Ok(event_id)
}

fn main() {}
