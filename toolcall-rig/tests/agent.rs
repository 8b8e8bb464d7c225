//! A rig agent on rig's scripted completion model, with the orders
//! example's tools: every call goes through the pipeline, and the model
//! reads the pipeline's answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use orders::{Shop, get_order, refund_order};
use rig_agent::AgentBuilder;
use rig_core::completion::{AssistantContent, CompletionRequest, Message};
use rig_core::message::{ToolCall, ToolFunction, ToolName, UserContent};
use rig_core::test_utils::{MockCompletionModel, MockTurn};
use rig_core::tool::ToolContext;
use serde_json::{Value, json};
use toolcall::{Dispatcher, MemoryAudit, Policy, tools};
use toolcall_rig::{Conversation, RigTools};

fn dispatcher(audit: &MemoryAudit) -> Arc<Dispatcher<Shop>> {
    let registry = tools![get_order, refund_order].unwrap();
    Arc::new(
        Dispatcher::builder(registry, Arc::new(Shop::new()))
            .part(Shop::reader)
            .policy(
                Policy::new()
                    .allow(["get_order", "refund_order"])
                    .limit("max_refund_cents", 50_000),
            )
            .audit(audit.clone())
            .build()
            .unwrap(),
    )
}

fn call(id: &str, name: &str, arguments: Value) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall::from_wire(
        id,
        ToolFunction::new(ToolName::new(name).unwrap(), arguments),
    ))
}

fn refund(amount: Value) -> Value {
    json!({"order_id": "ORD-1001", "amount_cents": amount, "currency": "BRL", "reason": "damaged"})
}

/// The tool results the request sends back, after its last assistant
/// message: `(call id, is_error, the pipeline's result)`.
fn results(request: &CompletionRequest) -> Vec<(String, bool, Value)> {
    let last = request
        .chat_history
        .iter()
        .rposition(|m| matches!(m, Message::Assistant(_)))
        .unwrap();
    request.chat_history[last + 1..]
        .iter()
        .flat_map(|message| match message {
            Message::User { content } => content.clone(),
            _ => Vec::new(),
        })
        .filter_map(|content| match content {
            UserContent::ToolResult(result) => Some(result),
            _ => None,
        })
        .map(|result| {
            let text = result.content[0].as_text().unwrap().to_owned();
            let id = result
                .call
                .provider()
                .map(|id| id.as_str().to_owned())
                .unwrap_or_default();
            (id, result.is_error, serde_json::from_str(&text).unwrap())
        })
        .collect()
}

/// An agent over `tools` whose model asks one refund of 2590 cents, then
/// says `then`: the tool results the model read.
async fn one_refund(tools: RigTools<Shop>, then: &str) -> Vec<(String, bool, Value)> {
    let model = MockCompletionModel::from_turns([
        MockTurn::from_content(call("call_refund", "refund_order", refund(json!(2590)))),
        MockTurn::text(then),
    ]);
    let agent = AgentBuilder::new(model.clone())
        .tool_server_handle(tools.tool_server().run())
        .build();
    agent.prompt("Refund ORD-1001.").max_turns(3).await.unwrap();
    results(&model.requests()[1])
}

#[tokio::test]
async fn a_rig_agents_calls_go_through_the_pipeline() {
    let audit = MemoryAudit::new();
    let dispatcher = dispatcher(&audit);
    let model = MockCompletionModel::from_turns([
        MockTurn::from_contents([
            call("call_lookup", "get_order", json!({"order_id": "ORD-1001"})),
            call("call_refund_1", "refund_order", refund(json!(25.90))),
        ]),
        MockTurn::from_content(call("call_refund_2", "refund_order", refund(json!(2590)))),
        MockTurn::from_content(call("call_refund_3", "refund_order", refund(json!(2590)))),
        MockTurn::text("I refunded R$ 25.90 on ORD-1001."),
    ]);
    let asked = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&asked);
    let tools = RigTools::new(Arc::clone(&dispatcher), "chat-42").approver(move |pending| {
        seen.fetch_add(1, Ordering::SeqCst);
        pending.data["pending"]["amount_cents"] == 2590
    });
    let agent = AgentBuilder::new(model.clone())
        .tool_server_handle(tools.tool_server().run())
        .build();
    let response = agent
        .prompt("Refund the damaged item of ORD-1001.")
        .max_turns(6)
        .await
        .unwrap();
    assert_eq!(response.output(), "I refunded R$ 25.90 on ORD-1001.");

    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    // The tools the caller may use, with the schema the validator enforces.
    let names: Vec<String> = requests[0]
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["get_order", "refund_order"]);
    assert_eq!(
        requests[0].tools[1].parameters["properties"]["amount_cents"]["type"],
        "integer"
    );

    // Two calls in one message, answered in the model's order.
    let first = results(&requests[1]);
    let ids: Vec<&str> = first.iter().map(|(id, ..)| id.as_str()).collect();
    assert_eq!(ids, ["call_lookup", "call_refund_1"]);
    assert!(!first[0].1);
    assert_eq!(first[0].2["data"]["order_id"], "ORD-1001");
    // The refusal names the field and the unit; rig marks it an error.
    assert!(first[1].1);
    assert_eq!(first[1].2["code"], "INVALID_ARGUMENTS");
    let message = first[1].2["message"].as_str().unwrap();
    assert!(message.starts_with("amount_cents:"), "{message}");
    assert!(message.contains("minor units (cents)"), "{message}");

    // The approver was asked once; the refund ran, and its retry replayed.
    let second = results(&requests[2]);
    assert_eq!(second[0].0, "call_refund_2");
    assert_eq!(second[0].2["ok"], true, "{:?}", second[0].2);
    let third = results(&requests[3]);
    assert_eq!(third[0].2["replayed"], true, "{:?}", third[0].2);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(dispatcher.state().refund_count().await, Ok(1));

    // Every call was in the conversation the application gave.
    let records = audit.records();
    assert!(records.len() >= 4);
    assert!(records.iter().all(|r| r.session_id == "chat-42"));
}

#[tokio::test]
async fn a_declined_approval_is_denied_and_nothing_runs() {
    let audit = MemoryAudit::new();
    let dispatcher = dispatcher(&audit);
    let tools = RigTools::new(Arc::clone(&dispatcher), "chat-7").approver(|_| false);
    let answer = one_refund(tools, "The refund was declined.").await;
    assert!(answer[0].1);
    assert_eq!(answer[0].2["code"], "CONFIRMATION_DENIED");
    assert_eq!(dispatcher.state().refund_count().await, Ok(0));
}

#[tokio::test]
async fn without_an_approver_the_model_reads_that_the_call_waits() {
    let audit = MemoryAudit::new();
    let dispatcher = dispatcher(&audit);
    let tools = RigTools::new(Arc::clone(&dispatcher), "chat-8");
    let answer = one_refund(tools, "A person has to approve it.").await;
    assert_eq!(answer[0].2["code"], "CONFIRMATION_REQUIRED");
    assert!(answer[0].2["question_id"].is_string());
    assert_eq!(dispatcher.state().refund_count().await, Ok(0));
}

/// The run's `ToolContext` names the conversation: one toolset, two
/// conversations, each with its own replays.
#[tokio::test]
async fn the_runs_conversation_comes_from_its_tool_context() {
    let audit = MemoryAudit::new();
    let dispatcher = dispatcher(&audit);
    let tools = RigTools::new(Arc::clone(&dispatcher), "unused");
    let model = MockCompletionModel::from_turns([
        MockTurn::from_content(call("c1", "get_order", json!({"order_id": "ORD-1001"}))),
        MockTurn::text("one"),
        MockTurn::from_content(call("c2", "get_order", json!({"order_id": "ORD-1001"}))),
        MockTurn::text("two"),
    ]);
    let agent = AgentBuilder::new(model.clone())
        .tool_server_handle(tools.tool_server().run())
        .build();
    for conversation in ["desk-1", "desk-2"] {
        let mut context = ToolContext::new();
        context
            .insert(Conversation(conversation.to_owned()))
            .unwrap();
        agent
            .prompt("Look ORD-1001 up.")
            .tool_context(context)
            .max_turns(3)
            .await
            .unwrap();
    }
    let sessions: Vec<String> = audit.records().into_iter().map(|r| r.session_id).collect();
    assert_eq!(sessions, ["desk-1", "desk-2"]);
}

/// The `ToolSet` holds the same tools, and runs a call through the pipeline.
#[tokio::test]
async fn the_toolset_runs_the_model_text_as_written() {
    let audit = MemoryAudit::new();
    let dispatcher = dispatcher(&audit);
    let set = RigTools::new(Arc::clone(&dispatcher), "chat-9").toolset();
    let names: Vec<&str> = set.names().collect();
    assert_eq!(names, ["get_order", "refund_order"]);
    let mut context = ToolContext::new();
    // A member written twice is the model's INVALID_JSON, not a guess.
    let result = set
        .execute(
            "get_order",
            r#"{"order_id": "ORD-1001", "order_id": "ORD-1002"}"#,
            &mut context,
        )
        .await;
    assert!(result.is_error());
    let text = result.error().unwrap().model_output().as_text().unwrap();
    let answer: Value = serde_json::from_str(text).unwrap();
    assert_eq!(answer["code"], "INVALID_JSON");
    let result = set
        .execute("get_order", r#"{"order_id": "ORD-1001"}"#, &mut context)
        .await;
    assert!(result.is_success());
    let answer: Value = serde_json::from_str(result.output().as_text().unwrap()).unwrap();
    assert_eq!(answer["data"]["total_cents"], 12000);
}
