use toolcall::{tool, Rejection};

/// Greets someone.
#[tool]
fn greet(
    /// Who to greet.
    name: &str,
    /// Nicknames to use.
    nicknames: &[String],
) -> Result<String, Rejection> {
    Ok(format!("hello {name} {nicknames:?}"))
}

fn main() {}
