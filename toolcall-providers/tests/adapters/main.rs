//! The provider adapters against each provider's documented message shapes:
//! calls run in the model's order with the provider's ids in the audit, an
//! identical side effect in one turn runs once, errors reach the model
//! flagged, and a malformed message is an error that runs nothing.

use std::sync::atomic::{AtomicU32, Ordering};

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use toolcall::{
    Caller, Code, Ctx, Decision, Dispatcher, MemoryAudit, Policy, Rejection, ToolResult, tool,
    tools,
};

use toolcall_providers::adapters::{AdapterError, Problem, Provider, RunOptions, Turn};

// ------------------------------------------------------------- the backend

/// A shop that counts what reached it.
#[derive(Default)]
struct Shop {
    /// Refunds applied: the side effect that must never happen twice.
    refunds: AtomicU32,
    /// Every execution, in order: `tool:argument`.
    log: Mutex<Vec<String>>,
}

impl Shop {
    fn refunds(&self) -> u32 {
        self.refunds.load(Ordering::SeqCst)
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The tests compare what ran, in order, with this log.
    fn ran(&self, execution: String) {
        self.log.lock().unwrap().push(execution);
    }
}

/// Reads an order.
#[tool]
fn get_order(
    ctx: &Ctx<Shop>,
    /// Order id, for example ORD-1001.
    #[arg(pattern = r"^ORD-\d{4}$")]
    order_id: String,
) -> Result<Value, Rejection> {
    ctx.state.ran(format!("get_order:{order_id}"));
    Ok(json!({"order_id": order_id, "total_cents": 5180, "currency": "BRL"}))
}

/// Refunds part of an order. Amount in cents.
#[tool(side_effect)]
fn refund_order(
    ctx: &Ctx<Shop>,
    /// Order id, for example ORD-1001.
    #[arg(pattern = r"^ORD-\d{4}$")]
    order_id: String,
    /// Refund amount in minor units (cents). 25.90 is 2590.
    #[arg(min = 1)]
    amount_cents: i64,
) -> Result<Value, Rejection> {
    let n = ctx.state.refunds.fetch_add(1, Ordering::SeqCst) + 1;
    ctx.state.ran(format!("refund_order:{order_id}"));
    Ok(json!({"refund_id": format!("RF-{n}"), "amount_cents": amount_cents}))
}

/// Closes an account. Irreversible.
#[tool(side_effect, high_risk)]
fn close_account(
    ctx: &Ctx<Shop>,
    /// Account id.
    account: String,
) -> Result<Value, Rejection> {
    ctx.state.ran(format!("close_account:{account}"));
    Ok(json!({"closed": account}))
}

/// Answers a constant; takes nothing.
#[tool]
fn ping(ctx: &Ctx<Shop>) -> Result<&'static str, Rejection> {
    ctx.state.ran("ping".to_owned());
    Ok("pong")
}

struct Fixture {
    shop: Arc<Shop>,
    audit: MemoryAudit,
    dispatcher: Dispatcher<Shop>,
}

fn fixture() -> Fixture {
    let shop = Arc::new(Shop::default());
    let audit = MemoryAudit::new();
    let registry = tools![get_order, refund_order, close_account, ping].unwrap();
    let dispatcher = Dispatcher::builder(registry, Arc::clone(&shop))
        .audit(audit.clone())
        .build()
        .unwrap();
    Fixture {
        shop,
        audit,
        dispatcher,
    }
}

async fn run(f: &Fixture, provider: Provider, message: &Value) -> Turn {
    provider
        .run(&f.dispatcher, message, RunOptions::new().session("chat-1"))
        .await
        .unwrap_or_else(|e| panic!("{provider}: {e}"))
}

fn audited_call_ids(audit: &MemoryAudit) -> Vec<Option<String>> {
    audit.records().into_iter().map(|r| r.call_id).collect()
}

// ------------------------------------------- messages as each API sends them

/// One assistant message asking for `calls` (id, tool, arguments), in the
/// provider's shape, with the kind of surrounding content each API really
/// sends (text, reasoning, usage) that the adapters must skip.
fn message(provider: Provider, calls: &[(&str, &str, Value)]) -> Value {
    match provider {
        Provider::OpenAi => json!({
            "id": "chatcmpl-B9x",
            "object": "chat.completion",
            "model": "gpt-4.1",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "refusal": null,
                    "tool_calls": calls.iter().map(|(id, name, args)| json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}
                    })).collect::<Vec<_>>()
                },
                "finish_reason": "tool_calls"
            }],
            "usage": {"prompt_tokens": 81, "completion_tokens": 40, "total_tokens": 121}
        }),
        Provider::OpenAiResponses => {
            let mut output = vec![json!({"type": "reasoning", "id": "rs_01", "summary": []})];
            output.extend(calls.iter().enumerate().map(|(i, (id, name, args))| {
                json!({
                    "type": "function_call",
                    "id": format!("fc_{i}"),
                    "call_id": id,
                    "name": name,
                    "arguments": args.to_string(),
                    "status": "completed"
                })
            }));
            json!({
                "id": "resp_6a1",
                "object": "response",
                "status": "completed",
                "model": "gpt-4.1",
                "output": output
            })
        }
        Provider::Anthropic => {
            let mut content = vec![json!({"type": "text", "text": "Looking into it."})];
            content.extend(calls.iter().map(|(id, name, args)| {
                json!({"type": "tool_use", "id": id, "name": name, "input": args})
            }));
            json!({
                "id": "msg_01Xf",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": content,
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 412, "output_tokens": 96}
            })
        }
        Provider::Gemini => json!({
            "candidates": [{
                "content": {
                    "role": "model",
                    "parts": calls.iter().map(|(id, name, args)| json!({
                        "functionCall": {"id": id, "name": name, "args": args}
                    })).collect::<Vec<_>>()
                },
                "finishReason": "STOP",
                "index": 0
            }],
            "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 31},
            "modelVersion": "gemini-2.5-flash"
        }),
        other => panic!("no fixture for {other}"),
    }
}

/// What the model reads for call `i` of a reply: the result as JSON, the id
/// it answers, and the provider's error flag where it has one.
fn model_reads(provider: Provider, reply: &[Value], i: usize) -> (Value, String, Option<bool>) {
    let parse = |text: &Value| -> Value {
        serde_json::from_str(text.as_str().expect("results are sent as text")).unwrap()
    };
    match provider {
        Provider::OpenAi => {
            let m = &reply[i];
            assert_eq!(m["role"], "tool");
            (parse(&m["content"]), str_of(&m["tool_call_id"]), None)
        }
        Provider::OpenAiResponses => {
            let item = &reply[i];
            assert_eq!(item["type"], "function_call_output");
            (parse(&item["output"]), str_of(&item["call_id"]), None)
        }
        Provider::Anthropic => {
            assert_eq!(reply.len(), 1, "one user message per turn");
            assert_eq!(reply[0]["role"], "user");
            let block = &reply[0]["content"][i];
            assert_eq!(block["type"], "tool_result");
            let flag = block["is_error"].as_bool().expect("is_error is always set");
            (
                parse(&block["content"]),
                str_of(&block["tool_use_id"]),
                Some(flag),
            )
        }
        Provider::Gemini => {
            assert_eq!(reply.len(), 1, "one content per turn");
            assert_eq!(reply[0]["role"], "user");
            let response = &reply[0]["parts"][i]["functionResponse"];
            let body = response["response"].as_object().unwrap();
            assert_eq!(body.len(), 1, "either output or error: {body:?}");
            let (result, flag) = match (body.get("output"), body.get("error")) {
                (Some(output), None) => (output.clone(), false),
                (None, Some(error)) => (error.clone(), true),
                _ => panic!("{body:?}"),
            };
            assert_eq!(response["name"], result["tool"]);
            (result, str_of(&response["id"]), Some(flag))
        }
        other => panic!("no reader for {other}"),
    }
}

fn str_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn as_json(result: &ToolResult) -> Value {
    serde_json::to_value(result).unwrap()
}

mod malformed;
mod text;
mod turns;
