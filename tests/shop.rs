//! The orders example's shop behind a dispatcher with both of its tools:
//! the setup the suites about the pipeline (pipeline/, retries_and_races/
//! and the reference's suite) start from.

// Each binary that includes this module uses its own part of it.
#![allow(dead_code)]

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use orders::{Shop, get_order, refund_order};
use toolcall::store::Store;
use toolcall::{Arguments, Call, Dispatcher, DispatcherBuilder, Policy, ToolResult, tools};

/// Both tools, refunds up to 50 000 cents, no backoff between retries (the
/// reference's `make_dispatcher`).
pub fn shop_dispatcher(shop: &Arc<Shop>) -> DispatcherBuilder<Shop> {
    Dispatcher::builder(tools![get_order, refund_order].unwrap(), Arc::clone(shop))
        .part(Shop::reader)
        .policy(
            Policy::new()
                .allow(["get_order", "refund_order"])
                .limit("max_refund_cents", 50_000),
        )
        .retry_backoff(Duration::ZERO)
}

/// A fresh shop and its dispatcher, built by `configure` from
/// [`shop_dispatcher`].
pub fn shop_with(
    configure: impl FnOnce(DispatcherBuilder<Shop>) -> DispatcherBuilder<Shop>,
) -> (Arc<Shop>, Dispatcher<Shop>) {
    let shop = Arc::new(Shop::new());
    let d = configure(shop_dispatcher(&shop)).build().unwrap();
    (shop, d)
}

/// A fresh shop and its dispatcher, as [`shop_dispatcher`] makes it.
pub fn shop_and_dispatcher() -> (Arc<Shop>, Dispatcher<Shop>) {
    shop_with(|builder| builder)
}

/// `args` for `tool` in the session `default`, as a model sends them:
/// confirmed by nobody.
pub async fn in_default<'a, S: Any + Send + Sync, St: Store>(
    d: &Dispatcher<S, St>,
    tool: &'a str,
    args: impl Into<Arguments<'a>>,
) -> ToolResult {
    in_default_with(d, tool, args, |call| call).await
}

/// `args` for `tool` in the session `default`, with what `more` adds to
/// the call (a caller, an approval's id, a person's confirmation).
pub async fn in_default_with<'a, S: Any + Send + Sync, St: Store>(
    d: &Dispatcher<S, St>,
    tool: &'a str,
    args: impl Into<Arguments<'a>>,
    more: impl FnOnce(Call<'a>) -> Call<'a>,
) -> ToolResult {
    d.execute(more(Call::new(tool, args).session("default")))
        .await
}
