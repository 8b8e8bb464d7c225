use toolcall::{tool, Rejection};

/// What the calendar API takes: not the tool's arguments.
pub struct CreateEventArgs {
    pub title: String,
}

/// Creates an event.
#[tool(side_effect)]
fn create_event(
    /// The title.
    title: String,
) -> Result<String, Rejection> {
    Ok(title)
}

fn main() {}
