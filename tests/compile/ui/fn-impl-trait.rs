use toolcall::{tool, Rejection};

/// Echoes a value.
#[tool]
fn echo(
    /// The value.
    value: impl Into<String>,
) -> Result<String, Rejection> {
    Ok(value.into())
}

fn main() {}
