use toolcall::{tool, Rejection};

/// Creates an event.
#[tool(side_effect, args = "create event input")]
fn create_event(
    /// The title.
    title: String,
) -> Result<String, Rejection> {
    Ok(title)
}

/// Deletes an event.
#[tool(side_effect, args = "delete_event")]
fn delete_event(
    /// The event id.
    event_id: String,
) -> Result<String, Rejection> {
    Ok(event_id)
}

fn main() {}
