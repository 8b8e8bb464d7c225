use toolcall::{tool, Rejection};

/// Lists today's orders.
#[tool]
#[tool]
fn list_orders() -> Result<Vec<String>, Rejection> {
    Ok(Vec::new())
}

fn main() {}
