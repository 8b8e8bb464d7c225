use toolcall::{tool, Ctx, Rejection};

struct Cal;

/// Cancels the next event.
#[tool(side_effect)]
fn cancel_event(ctx: &'static Ctx<Cal>) -> Result<(), Rejection> {
    let _ = ctx;
    Ok(())
}

fn main() {}
