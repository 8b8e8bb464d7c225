use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels the next event.
#[tool(side_effect)]
fn cancel_event(#[arg(sensitive)] _ctx: &Ctx<Cal>) -> Result<(), Rejection> {
    Ok(())
}

fn main() {}
