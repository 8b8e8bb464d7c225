use toolcall::{tool, Rejection};

/// Echoes a value.
#[tool]
fn echo<T: serde::Serialize>(
    /// The value.
    value: T,
) -> Result<T, Rejection> {
    Ok(value)
}

fn main() {}
