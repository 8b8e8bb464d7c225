use toolcall::{tool, Ctx, Rejection};

/// Cancels the next event.
#[tool(side_effect)]
fn cancel_event(ctx: &Ctx) -> Result<(), Rejection> {
    let _ = ctx;
    Ok(())
}

fn main() {}
