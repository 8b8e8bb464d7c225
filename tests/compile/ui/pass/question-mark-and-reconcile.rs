//! `?` in a tool's body converts as Rust's own does, wherever it stands; a
//! `?` that returns from a closure, an `async` block or a nested function
//! is theirs. A `reconcile` finds the tool's own output, and may stand
//! beside `idempotent_backend`: the key is retried first, the backend asked
//! when the retries are spent and when an identical call finds the call in
//! doubt.
#![deny(warnings)]

use std::fmt;
use std::sync::Arc;

use serde::Serialize;
use toolcall::{Ctx, Dispatcher, Rejection, ToolError, tool, tools};

struct Bank;

#[derive(Serialize)]
struct Transfer {
    id: String,
    cents: u64,
}

fn lookup(account: &str) -> Result<u64, Rejection> {
    if account.is_empty() {
        return Err(Rejection::new("NO_ACCOUNT", "name the account"));
    }
    Ok(100)
}

/// Moves money.
#[tool(side_effect, idempotent_backend, reconcile = find_transfer)]
async fn transfer(
    ctx: &Ctx<Bank>,
    /// The account id.
    account: String,
    /// The amount, as text: "250".
    amount: String,
) -> Result<Transfer, ToolError> {
    let _ = &ctx.state;
    // A `Rejection` converts into the tool's `ToolError`.
    let balance = lookup(&account)?;
    let cents: u64 = amount
        .parse()
        .map_err(|_| Rejection::new("BAD_AMOUNT", "a whole number of cents"))?;
    // A `?` that returns from a closure, an async block, a function.
    let double = |n: &str| -> Option<u64> { n.parse::<u64>().ok()?.checked_mul(2) };
    let later = async { Some(amount.parse::<u64>().ok()?.max(1)) };
    fn first(text: &str) -> Option<char> {
        text.chars().next()
    }
    let _ = (double(&amount), later, first(&account));
    // Chained, nested, in a method's receiver.
    let length = Ok::<_, Rejection>(account.clone())?.len();
    let checked = Ok::<_, ToolError>(Ok::<_, Rejection>(cents)?)?.min(balance);
    Ok(Transfer {
        id: format!("{account}-{length}"),
        cents: checked,
    })
}

async fn find_transfer(ctx: &Ctx<Bank>, key: &str) -> Result<Option<Transfer>, Rejection> {
    let _ = (ctx, key);
    Ok(None)
}

/// An error type of the application's own, with its `From`s.
#[derive(Debug)]
struct ShopError(String);

impl fmt::Display for ShopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShopError {}

impl From<std::num::ParseIntError> for ShopError {
    fn from(error: std::num::ParseIntError) -> Self {
        ShopError(error.to_string())
    }
}

impl From<ShopError> for ToolError {
    fn from(error: ShopError) -> Self {
        ToolError::not_applied(error)
    }
}

/// Reads a count.
#[tool]
fn count(
    /// A count, as text: "3".
    text: String,
) -> Result<u32, ShopError> {
    let n: u32 = text.trim().parse()?;
    Ok(n)
}

fn main() {
    let registry = tools![transfer, count].unwrap();
    let _ = Dispatcher::builder(registry, Arc::new(Bank)).build().unwrap();
}
