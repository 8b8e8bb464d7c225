use toolcall::{tool, Ctx, Rejection};

/// Credits a customer.
#[tool(side_effect, limits = ["max_credit_cents", ""])]
fn credit(
    ctx: &Ctx<()>,
    /// The amount.
    #[arg(min = 1, limit = "max_credit_cents")]
    amount_cents: u64,
) -> Result<u64, Rejection> {
    let _ = ctx;
    Ok(amount_cents)
}

fn main() {}
