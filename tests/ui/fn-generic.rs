use toolcall::{tool, Rejection};

/// Echoes a value.
#[tool]
fn echo<T: serde::Serialize>(value: T) -> Result<T, Rejection> {
    Ok(value)
}

fn main() {}
