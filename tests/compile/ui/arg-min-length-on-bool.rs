use toolcall::{tool, Rejection};

/// Toggles a flag.
#[tool(side_effect)]
fn toggle(
    /// On or off.
    #[arg(min_length = 1)]
    on: bool,
) -> Result<bool, Rejection> {
    Ok(on)
}

fn main() {}
