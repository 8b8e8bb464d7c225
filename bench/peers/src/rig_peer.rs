//! rig 0.44's direct route: the tools `get_order` and `refund_order`
//! implementing rig's `Tool` trait (rig-core), registered in a `ToolSet`
//! (which moved from rig-core to rig-agent in 0.44) and called through
//! `ToolSet::execute(name, raw_arguments, &mut ToolContext)`, the inline
//! dispatch rig's agent loop uses, with no model and no bus.
//!
//! Per call, measured: the set's lookup and a clone of the registration
//! (the handler is an `Arc`, but the definition is copied deep: name,
//! description and the JSON schema of the arguments as a `serde_json::Value`,
//! then dropped after the call: most of rig's time here, and it grows with
//! the schema), a dispatch-scoped copy of the context, an
//! `EffectKind::ToolCall` with the tool's name and the arguments (owned),
//! `serve_inline_with`: a `Dispatch` with two scopes, the boxed handler
//! future, `serde_json::from_str` of the text into the strict struct, the
//! tool's body (`domain`), the answer as a JSON content block
//! (`serde_json::to_value`), and the context's result metadata published
//! back.
//!
//! The schemas are schemars' for the argument structs (doc comments as
//! descriptions, the enums under `$defs`), as a rig user would write them.
//!
//! The argument texts are built (and cloned for each repetition) before the
//! clock starts: `execute` takes an owned `String`, so each call moves one in.

use std::sync::Arc;

use rig_agent::tool::{Tool, ToolContext, ToolResult, ToolSet};
use serde_json::Value;

use crate::domain::{self, GetOrderArgs, OrderView, Refund, RefundOrderArgs, Rejection, Shop};

/// `get_order` as a rig tool.
pub struct GetOrder {
    shop: Arc<Shop>,
}

impl Tool for GetOrder {
    const NAME: &'static str = "get_order";
    type Args = GetOrderArgs;
    type Output = OrderView;
    type Error = Rejection;

    fn description(&self) -> String {
        "Read one order: total, amount already refunded and currency. No side effects.".to_owned()
    }

    fn parameters(&self) -> Value {
        serde_json::to_value(schemars::schema_for!(GetOrderArgs)).expect("a schema")
    }

    async fn call(
        &self,
        _context: &mut ToolContext,
        args: GetOrderArgs,
    ) -> Result<OrderView, Rejection> {
        domain::get_order(&self.shop, args)
    }
}

/// `refund_order` as a rig tool.
pub struct RefundOrder {
    shop: Arc<Shop>,
}

impl Tool for RefundOrder {
    const NAME: &'static str = "refund_order";
    type Args = RefundOrderArgs;
    type Output = Refund;
    type Error = Rejection;

    fn description(&self) -> String {
        "Refund part or all of an order. Call get_order first. Amount in cents, in the order currency."
            .to_owned()
    }

    fn parameters(&self) -> Value {
        serde_json::to_value(schemars::schema_for!(RefundOrderArgs)).expect("a schema")
    }

    async fn call(
        &self,
        _context: &mut ToolContext,
        args: RefundOrderArgs,
    ) -> Result<Refund, Rejection> {
        domain::refund_order(&self.shop, args)
    }
}

/// Both tools over `shop`.
pub fn toolset(shop: Arc<Shop>) -> ToolSet {
    let mut set = ToolSet::default();
    set.add_tool(GetOrder { shop: shop.clone() });
    set.add_tool(RefundOrder { shop });
    set
}

/// One call: `ToolSet::execute`.
pub async fn call(
    set: &ToolSet,
    context: &mut ToolContext,
    tool: &'static str,
    raw: String,
) -> ToolResult {
    set.execute(tool, raw, context).await
}
