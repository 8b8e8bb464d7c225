use toolcall::{tool, Rejection};

/// Emails a receipt.
#[tool(side_effect)]
fn email_receipt(
    /// Where to.
    #[arg(format = "e-mail")]
    to: String,
) -> Result<String, Rejection> {
    Ok(to)
}

fn main() {}
