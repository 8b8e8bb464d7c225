use toolcall::{tool, tools, Rejection};

/// Lists orders.
#[tool]
fn list_orders(
    /// How many, at most.
    #[arg(min = -5, max = 5000000000)]
    limit: u32,
) -> Result<u32, Rejection> {
    Ok(limit)
}

/// Cancels an order: the parameter has no doc comment.
#[tool(side_effect)]
fn cancel_order(order_id: String) -> Result<String, Rejection> {
    Ok(order_id)
}

/// An account's balance, in cents.
#[tool]
fn get_balance(
    /// The account, for example ACC-1.
    account: String,
) -> Result<String, Rejection> {
    Ok(account)
}

// Only the misdeclarations are reported: naming the tools here adds no
// error of its own.
fn main() {
    let _ = tools![list_orders, cancel_order, get_balance];
}
