use std::sync::Arc;

use toolcall::{Call, Ctx, Dispatcher, Rejection, ToolError, tool, tools};

struct Shop {
    stock: u32,
}

/// Reserves items.
#[tool(side_effect, high_risk, check = check_reserve)]
async fn reserve(
    ctx: &Ctx<Shop>,
    /// How many.
    #[arg(min = 1, max = 10, limit = "max_items")]
    count: u32,
    /// A note for the warehouse.
    note: Option<String>,
) -> Result<u32, ToolError> {
    let _ = note;
    Ok(ctx.state.stock - count)
}

fn check_reserve(args: &ReserveArgs, ctx: &Ctx<Shop>) -> Result<(), Rejection> {
    if args.count > ctx.state.stock {
        return Err(Rejection::new("OUT_OF_STOCK", "Not enough items."));
    }
    Ok(())
}

/// Says hello.
#[tool(crate = ::toolcall)]
pub fn hello(
    /// Who to greet.
    name: String,
) -> Result<String, Rejection> {
    Ok(format!("hello {name}"))
}

fn main() {
    let registry = tools![reserve, hello].unwrap();
    let dispatcher = Dispatcher::builder(registry, Arc::new(Shop { stock: 3 }))
        .build()
        .unwrap();
    let future = dispatcher.execute(Call::new("hello", r#"{"name": "x"}"#).session("default"));
    fn is_send<T: Send>(_: &T) {}
    is_send(&future);
    drop(future);
}
