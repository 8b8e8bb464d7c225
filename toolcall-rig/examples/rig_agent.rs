//! A rig agent whose every tool call goes through toolcall's pipeline, on
//! rig's scripted model (no key, no network): a refund sent in reais is
//! refused naming the field, the corrected one is approved and runs once,
//! and its retry is replayed.
//!
//! ```text
//! cargo run -p toolcall-rig --example rig_agent
//! ```

use std::sync::Arc;

use orders::{Shop, get_order, refund_order};
use rig_agent::AgentBuilder;
use rig_core::completion::{AssistantContent, Message};
use rig_core::message::{ToolCall, ToolFunction, ToolName, UserContent};
use rig_core::test_utils::{MockCompletionModel, MockTurn};
use serde_json::{Value, json};
use toolcall::{Dispatcher, Policy, tools};
use toolcall_rig::RigTools;

/// The model asks for a refund of `amount` on ORD-1001.
fn refund(id: &str, amount: Value) -> MockTurn {
    let arguments = json!({"order_id": "ORD-1001", "amount_cents": amount,
                           "currency": "BRL", "reason": "damaged"});
    let name = ToolName::new("refund_order").expect("a tool name");
    MockTurn::from_content(AssistantContent::ToolCall(ToolCall::from_wire(
        id,
        ToolFunction::new(name, arguments),
    )))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = Policy::new()
        .allow(["get_order", "refund_order"])
        .limit("max_refund_cents", 50_000);
    let dispatcher = Arc::new(
        Dispatcher::builder(tools![get_order, refund_order]?, Arc::new(Shop::new()))
            .part(Shop::reader)
            .policy(policy)
            .build()?,
    );
    // One conversation; a person (here: a rule) decides each approval.
    let tools = RigTools::new(Arc::clone(&dispatcher), "chat-42").approver(|pending| {
        println!("approve {}? yes", pending.data["pending"]);
        true
    });
    let model = MockCompletionModel::from_turns([
        refund("call_1", json!(25.90)),
        refund("call_2", json!(2590)),
        refund("call_3", json!(2590)),
        MockTurn::text("I refunded R$ 25.90 on ORD-1001."),
    ]);
    let agent = AgentBuilder::new(model.clone())
        .tool_server_handle(tools.tool_server().run())
        .build();
    let answer = agent
        .prompt("Refund ORD-1001's damaged item.")
        .max_turns(5)
        .await?;
    // What the model read back after each of its calls.
    for request in model.requests().iter().skip(1) {
        if let Some(Message::User { content }) = request.chat_history.last() {
            for item in content {
                if let UserContent::ToolResult(result) = item {
                    println!(
                        "the model reads: {}",
                        result.content[0].as_text().unwrap_or("")
                    );
                }
            }
        }
    }
    println!("model: {}", answer.output());
    println!(
        "refunds applied: {}",
        dispatcher.state().refund_count().await?
    );
    Ok(())
}
