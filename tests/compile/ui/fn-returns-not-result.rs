use toolcall::tool;

/// Adds two numbers.
#[tool]
fn add(
    /// The first term.
    a: i64,
    /// The second term.
    b: i64,
) -> i64 {
    a + b
}

fn main() {}
