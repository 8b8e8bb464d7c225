use toolcall::{tool, Rejection};

/// Cancels the next event.
#[tool(side_effect, check = "check_cancel", name = cancel)]
fn cancel_event() -> Result<(), Rejection> {
    Ok(())
}

fn main() {}
