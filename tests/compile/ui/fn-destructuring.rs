use toolcall::{tool, Rejection};

/// Adds two numbers.
#[tool]
fn add((a, b): (i64, i64)) -> Result<i64, Rejection> {
    Ok(a + b)
}

fn main() {}
