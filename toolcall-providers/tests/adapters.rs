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
}

/// Reads an order.
#[tool]
fn get_order(
    ctx: &Ctx<Shop>,
    /// Order id, for example ORD-1001.
    #[arg(pattern = r"^ORD-\d{4}$")]
    order_id: String,
) -> Result<Value, Rejection> {
    ctx.state
        .log
        .lock()
        .unwrap()
        .push(format!("get_order:{order_id}"));
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
    ctx.state
        .log
        .lock()
        .unwrap()
        .push(format!("refund_order:{order_id}"));
    Ok(json!({"refund_id": format!("RF-{n}"), "amount_cents": amount_cents}))
}

/// Closes an account. Irreversible.
#[tool(side_effect, high_risk)]
fn close_account(
    ctx: &Ctx<Shop>,
    /// Account id.
    account: String,
) -> Result<Value, Rejection> {
    ctx.state
        .log
        .lock()
        .unwrap()
        .push(format!("close_account:{account}"));
    Ok(json!({"closed": account}))
}

/// Answers a constant; takes nothing.
#[tool]
fn ping(ctx: &Ctx<Shop>) -> Result<&'static str, Rejection> {
    ctx.state.log.lock().unwrap().push("ping".to_owned());
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

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn two_calls_run_in_order_and_each_id_reaches_the_audit() {
    for provider in Provider::ALL {
        let f = fixture();
        let msg = message(
            provider,
            &[
                ("id_lookup", "get_order", json!({"order_id": "ORD-1001"})),
                (
                    "id_refund",
                    "refund_order",
                    json!({"order_id": "ORD-2002", "amount_cents": 2590}),
                ),
            ],
        );
        let turn = run(&f, provider, &msg).await;

        assert_eq!(
            f.shop.log(),
            ["get_order:ORD-1001", "refund_order:ORD-2002"],
            "{provider}"
        );
        let records = f.audit.records();
        assert_eq!(
            records.iter().map(|r| r.tool.as_ref()).collect::<Vec<_>>(),
            ["get_order", "refund_order"],
            "{provider}"
        );
        assert_eq!(
            audited_call_ids(&f.audit),
            [Some("id_lookup".into()), Some("id_refund".into())],
            "{provider}"
        );
        assert!(records.iter().all(|r| r.session_id == "chat-1"));

        assert_eq!(turn.provider, provider);
        assert_eq!(turn.outcomes.len(), 2);
        assert_eq!(turn.outcomes[0].call.id(), Some("id_lookup"));
        assert!(turn.results().all(|r| r.ok), "{provider}: {turn:?}");

        let reply = turn.messages();
        for (i, id) in ["id_lookup", "id_refund"].into_iter().enumerate() {
            let (result, answered, flag) = model_reads(provider, &reply, i);
            assert_eq!(answered, id, "{provider}");
            assert_eq!(result, as_json(&turn.outcomes[i].result), "{provider}");
            assert_ne!(flag, Some(true), "{provider}: a success is not an error");
        }
        assert_eq!(
            model_reads(provider, &reply, 1).0["data"]["refund_id"],
            "RF-1"
        );
    }
}

#[tokio::test]
async fn an_identical_side_effect_twice_in_one_turn_executes_once() {
    for provider in Provider::ALL {
        let f = fixture();
        let refund = json!({"order_id": "ORD-1001", "amount_cents": 2590});
        // The second copy has its members in another order: still the same call.
        let again = json!({"amount_cents": 2590, "order_id": "ORD-1001"});
        let msg = message(
            provider,
            &[
                ("first", "refund_order", refund),
                ("second", "refund_order", again),
            ],
        );
        let turn = run(&f, provider, &msg).await;

        assert_eq!(
            f.shop.refunds(),
            1,
            "{provider}: the backend saw one refund"
        );
        let [first, second] = [&turn.outcomes[0].result, &turn.outcomes[1].result];
        assert!(first.ok && !first.replayed, "{provider}: {first:?}");
        assert!(second.ok && second.replayed, "{provider}: {second:?}");
        assert_eq!(
            second.data, first.data,
            "{provider}: the same refund, replayed"
        );

        let reply = turn.messages();
        let (read, id, flag) = model_reads(provider, &reply, 1);
        assert_eq!(id, "second");
        assert_eq!(read["replayed"], true, "{provider}");
        assert_ne!(flag, Some(true), "{provider}: a replay is not an error");

        let records = f.audit.records();
        assert_eq!(
            records.iter().map(|r| r.replayed).collect::<Vec<_>>(),
            [false, true]
        );
        assert_eq!(records[1].call_id.as_deref(), Some("second"));

        // The model retries in its next turn: still replayed, still one refund.
        let retry = message(
            provider,
            &[(
                "third",
                "refund_order",
                json!({"order_id": "ORD-1001", "amount_cents": 2590}),
            )],
        );
        let turn = run(&f, provider, &retry).await;
        assert!(turn.outcomes[0].result.replayed, "{provider}");
        assert_eq!(f.shop.refunds(), 1, "{provider}");
    }
}

#[tokio::test]
async fn a_float_for_an_integer_is_an_error_result_flagged_as_one() {
    for provider in Provider::ALL {
        let f = fixture();
        let msg = message(
            provider,
            &[
                (
                    "bad_amount",
                    "refund_order",
                    json!({"order_id": "ORD-1001", "amount_cents": 25.9}),
                ),
                ("lookup", "get_order", json!({"order_id": "ORD-1001"})),
            ],
        );
        let turn = run(&f, provider, &msg).await;

        let bad = &turn.outcomes[0].result;
        assert_eq!(bad.code, Code::InvalidArguments, "{provider}: {bad:?}");
        assert!(
            bad.message.starts_with("amount_cents: ") && bad.message.contains("25.90 is 2590"),
            "{provider}: {}",
            bad.message
        );
        assert_eq!(f.shop.refunds(), 0, "{provider}");
        assert!(turn.outcomes[1].result.ok, "the next call still runs");

        let reply = turn.messages();
        let (read, id, flag) = model_reads(provider, &reply, 0);
        assert_eq!(id, "bad_amount");
        assert_eq!(read["ok"], false, "{provider}");
        assert_eq!(read["code"], "INVALID_ARGUMENTS", "{provider}");
        match provider {
            Provider::Anthropic | Provider::Gemini => {
                assert_eq!(flag, Some(true), "{provider}: flagged as an error")
            }
            _ => assert_eq!(flag, None, "{provider} has no error flag"),
        }
        assert_ne!(model_reads(provider, &reply, 1).2, Some(true));
    }
}

#[tokio::test]
async fn anthropic_reply_is_one_user_message_with_is_error() {
    let f = fixture();
    // As the Messages API returns it, parallel tool use after some text.
    let response = json!({
        "id": "msg_013Zva",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "I'll look up the order and refund it."},
            {"type": "tool_use", "id": "toolu_01A", "name": "get_order", "input": {"order_id": "ORD-1001"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "refund_order", "input": {"order_id": "ORD-1001", "amount_cents": 0}}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {"input_tokens": 530, "output_tokens": 121}
    });
    let turn = run(&f, Provider::Anthropic, &response).await;
    let [lookup, refund] = [&turn.outcomes[0].result, &turn.outcomes[1].result];
    assert_eq!(refund.code, Code::InvalidArguments);
    assert_eq!(
        turn.messages(),
        [json!({
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A",
                    "content": lookup.to_model_text(),
                    "is_error": false
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": refund.to_model_text(),
                    "is_error": true
                }
            ]
        })]
    );
}

#[tokio::test]
async fn openai_chat_replies_one_tool_message_per_call() {
    let f = fixture();
    // The assistant message alone, as a host keeps it in its history.
    let assistant = json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [
            {"id": "call_Kx1", "type": "function", "function": {"name": "get_order", "arguments": "{\"order_id\":\"ORD-1001\"}"}},
            {"id": "call_Kx2", "type": "function", "function": {"name": "ping", "arguments": ""}}
        ]
    });
    let turn = run(&f, Provider::OpenAi, &assistant).await;
    assert!(turn.results().all(|r| r.ok), "{turn:?}");
    assert_eq!(
        turn.messages(),
        [
            json!({"role": "tool", "tool_call_id": "call_Kx1", "content": turn.outcomes[0].result.to_model_text()}),
            json!({"role": "tool", "tool_call_id": "call_Kx2", "content": r#"{"ok":true,"tool":"ping","data":{"result":"pong"}}"#}),
        ]
    );
}

#[tokio::test]
async fn openai_responses_skips_other_items_and_answers_function_calls() {
    let f = fixture();
    let output = json!([
        {"type": "reasoning", "id": "rs_0a", "summary": []},
        {"type": "message", "id": "msg_0b", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "id": "fc_0c", "call_id": "call_R1", "name": "get_order",
         "arguments": "{\"order_id\": \"ORD-1001\"}", "status": "completed"}
    ]);
    // The bare output array and the whole response read the same.
    let whole = json!({"id": "resp_0", "object": "response", "output": output.clone()});
    assert_eq!(
        Provider::OpenAiResponses.calls(&output).unwrap(),
        Provider::OpenAiResponses.calls(&whole).unwrap()
    );
    // And one item alone.
    assert_eq!(
        Provider::OpenAiResponses.calls(&output[2]).unwrap(),
        Provider::OpenAiResponses.calls(&whole).unwrap()
    );

    let turn = run(&f, Provider::OpenAiResponses, &whole).await;
    assert_eq!(f.shop.log(), ["get_order:ORD-1001"]);
    assert_eq!(
        turn.messages(),
        [json!({
            "type": "function_call_output",
            "call_id": "call_R1",
            "output": turn.outcomes[0].result.to_model_text()
        })]
    );
}

#[tokio::test]
async fn gemini_reply_keeps_ids_when_given_and_reads_missing_args_as_none() {
    let f = fixture();
    let content = json!({
        "role": "model",
        "parts": [
            {"functionCall": {"name": "ping"}, "thoughtSignature": "c2lnbmF0dXJl"},
            {"functionCall": {"id": "fc-7", "name": "refund_order", "args": {"order_id": "ORD-1001", "amount_cents": 25.9}}},
            {"text": "Done."}
        ]
    });
    let turn = run(&f, Provider::Gemini, &content).await;
    assert_eq!(turn.outcomes.len(), 2);
    assert!(turn.outcomes[0].result.ok, "{turn:?}");
    assert_eq!(turn.outcomes[1].result.code, Code::InvalidArguments);
    assert_eq!(audited_call_ids(&f.audit), [None, Some("fc-7".into())]);
    assert_eq!(
        turn.messages(),
        [json!({
            "role": "user",
            "parts": [
                {"functionResponse": {
                    "name": "ping",
                    "response": {"output": {"ok": true, "tool": "ping", "data": {"result": "pong"}}}
                }},
                {"functionResponse": {
                    "name": "refund_order",
                    "id": "fc-7",
                    "response": {"error": as_json(&turn.outcomes[1].result)}
                }}
            ]
        })]
    );
    // A candidate ({"content": ...}) reads the same as its content.
    assert_eq!(
        Provider::Gemini
            .calls(&json!({"content": content, "finishReason": "STOP"}))
            .unwrap(),
        Provider::Gemini.calls(&content).unwrap()
    );
}

#[tokio::test]
async fn malformed_openai_arguments_are_the_pipelines_invalid_json() {
    for provider in [Provider::OpenAi, Provider::OpenAiResponses] {
        let f = fixture();
        let broken = [
            r#"{"order_id": "ORD-1001", "amount_cents": 2590"#,
            "{'order_id': 'ORD-1001'}",
            r#"{"order_id": "ORD-1001", "order_id": "ORD-2002", "amount_cents": 1}"#,
            "[2590]",
        ];
        let msg = match provider {
            Provider::OpenAi => json!({
                "role": "assistant",
                "tool_calls": broken.iter().enumerate().map(|(i, raw)| json!({
                    "id": format!("call_{i}"),
                    "type": "function",
                    "function": {"name": "refund_order", "arguments": raw}
                })).collect::<Vec<_>>()
            }),
            _ => json!({
                "output": broken.iter().enumerate().map(|(i, raw)| json!({
                    "type": "function_call",
                    "call_id": format!("call_{i}"),
                    "name": "refund_order",
                    "arguments": raw
                })).collect::<Vec<_>>()
            }),
        };
        let turn = run(&f, provider, &msg).await;
        assert_eq!(turn.outcomes.len(), broken.len());
        for (i, outcome) in turn.outcomes.iter().enumerate() {
            assert_eq!(
                outcome.result.code,
                Code::InvalidJson,
                "{provider} {}: {:?}",
                broken[i],
                outcome.result
            );
            let (read, id, _) = model_reads(provider, &turn.messages(), i);
            assert_eq!(read["code"], "INVALID_JSON");
            assert_eq!(id, format!("call_{i}"));
        }
        // The audit keeps the text exactly as the model sent it.
        assert_eq!(f.audit.records()[0].arguments, broken[0]);
        assert_eq!(f.shop.refunds(), 0);
    }
}

#[tokio::test]
async fn non_object_arguments_from_anthropic_or_gemini_are_invalid_json() {
    for provider in [Provider::Anthropic, Provider::Gemini] {
        let f = fixture();
        let msg = message(provider, &[("x1", "get_order", json!(["ORD-1001"]))]);
        let turn = run(&f, provider, &msg).await;
        assert_eq!(
            turn.outcomes[0].result.code,
            Code::InvalidJson,
            "{provider}"
        );
        assert_eq!(model_reads(provider, &turn.messages(), 0).2, Some(true));
    }
}

#[tokio::test]
async fn unknown_tools_and_the_callers_allowlist_are_answered_not_errors() {
    for provider in Provider::ALL {
        let f = fixture();
        let reader = Caller::new("read-only", Policy::new().allow(["get_order"]));
        let msg = message(
            provider,
            &[
                ("a", "drop_tables", json!({})),
                (
                    "b",
                    "refund_order",
                    json!({"order_id": "ORD-1001", "amount_cents": 100}),
                ),
            ],
        );
        let turn = provider
            .run(
                &f.dispatcher,
                &msg,
                RunOptions::new().session("chat-2").caller(&reader),
            )
            .await
            .unwrap();
        assert_eq!(turn.outcomes[0].result.code, Code::UnknownTool);
        assert_eq!(turn.outcomes[1].result.code, Code::ToolNotAllowed);
        assert_eq!(f.shop.refunds(), 0);
        let records = f.audit.records();
        assert!(
            records
                .iter()
                .all(|r| r.caller == "read-only" && r.session_id == "chat-2")
        );
        assert_eq!(
            audited_call_ids(&f.audit),
            [Some("a".into()), Some("b".into())]
        );
    }
}

#[tokio::test]
async fn a_call_waiting_for_approval_is_pending_and_can_be_resolved() {
    for provider in Provider::ALL {
        let f = fixture();
        let msg = message(
            provider,
            &[
                ("lookup", "get_order", json!({"order_id": "ORD-1001"})),
                ("close", "close_account", json!({"account": "ACC-7"})),
            ],
        );
        let mut turn = run(&f, provider, &msg).await;
        let pending: Vec<_> = turn.pending().collect();
        assert_eq!(pending.len(), 1, "{provider}");
        assert_eq!(pending[0].call.id(), Some("close"));
        let id = pending[0].result.question_id.clone().unwrap();
        assert!(!f.shop.log().contains(&"close_account:ACC-7".to_owned()));

        // As sent now, the model reads that it waits for a person.
        let (read, _, flag) = model_reads(provider, &turn.messages(), 1);
        assert_eq!(read["code"], "CONFIRMATION_REQUIRED", "{provider}");
        assert_ne!(flag, Some(false), "{provider}: nothing ran yet");

        // A person approves; the reply then carries what happened.
        let done = f
            .dispatcher
            .approve(Decision::new(&id, "chat-1").by("ana"))
            .await;
        assert!(done.ok, "{provider}: {done:?}");
        assert!(!turn.resolve("not-an-id", done.clone()));
        assert!(turn.resolve(&id, done));
        assert_eq!(turn.pending().count(), 0);
        let (read, answered, flag) = model_reads(provider, &turn.messages(), 1);
        assert_eq!(answered, "close");
        assert_eq!(read["data"]["closed"], "ACC-7", "{provider}");
        assert_ne!(flag, Some(true));
        assert_eq!(f.shop.log().last().unwrap(), "close_account:ACC-7");
    }
}

#[tokio::test]
async fn a_message_without_tool_calls_runs_nothing_and_replies_nothing() {
    let f = fixture();
    let cases = [
        (
            Provider::OpenAi,
            json!({"role": "assistant", "content": "Your order shipped yesterday."}),
        ),
        (
            Provider::OpenAi,
            json!({"role": "assistant", "content": "Hi.", "tool_calls": null}),
        ),
        (
            Provider::OpenAiResponses,
            json!({"output": [{"type": "message", "role": "assistant", "content": []}]}),
        ),
        (
            Provider::Anthropic,
            json!({"role": "assistant", "content": [{"type": "text", "text": "Hello."}]}),
        ),
        (
            Provider::Anthropic,
            json!({"role": "assistant", "content": "Hello."}),
        ),
        (
            Provider::Gemini,
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello."}]}}]}),
        ),
    ];
    for (provider, msg) in cases {
        let turn = run(&f, provider, &msg).await;
        assert!(turn.outcomes.is_empty(), "{provider}");
        assert!(turn.messages().is_empty(), "{provider}: {msg}");
    }
    assert!(f.audit.is_empty());
}

// ------------------------------------------------------ malformed messages

#[tokio::test]
async fn malformed_messages_are_errors_that_name_the_place_and_run_nothing() {
    let good_call = json!({"id": "call_1", "type": "function",
        "function": {"name": "refund_order", "arguments": "{\"order_id\":\"ORD-1001\",\"amount_cents\":5}"}});
    let good_block = json!({"type": "tool_use", "id": "toolu_1", "name": "refund_order",
        "input": {"order_id": "ORD-1001", "amount_cents": 5}});
    let good_part = json!({"functionCall": {"name": "refund_order",
        "args": {"order_id": "ORD-1001", "amount_cents": 5}}});
    let cases: Vec<(Provider, Value, &str, &str)> = vec![
        // OpenAI Chat Completions
        (
            Provider::OpenAi,
            json!({"role": "assistant", "tool_calls": [good_call, {"type": "function", "function": {"name": "ping", "arguments": "{}"}}]}),
            "tool_calls[1].id",
            "OpenAI Chat Completions message: `tool_calls[1].id` is missing",
        ),
        (
            Provider::OpenAi,
            json!({"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"arguments": "{}"}}]}),
            "tool_calls[0].function.name",
            "`tool_calls[0].function.name` is missing",
        ),
        (
            Provider::OpenAi,
            json!({"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ping", "arguments": {}}}]}),
            "tool_calls[0].function.arguments",
            "`tool_calls[0].function.arguments` should be a string, found an object",
        ),
        (
            Provider::OpenAi,
            json!({"role": "assistant", "tool_calls": {"id": "call_1"}}),
            "tool_calls",
            "`tool_calls` should be an array, found an object",
        ),
        (
            Provider::OpenAi,
            json!({"role": "assistant", "tool_calls": [{"id": "call_9", "type": "custom", "custom": {"name": "sql", "input": "DROP"}}]}),
            "tool_calls[0].type",
            "`tool_calls[0].type` is `custom`",
        ),
        (
            Provider::OpenAi,
            json!({"role": "user", "content": "refund it"}),
            "role",
            "`role` is `user`; expected `assistant`",
        ),
        (
            Provider::OpenAi,
            json!({"object": "chat.completion", "choices": []}),
            "choices[0]",
            "`choices[0]` is missing",
        ),
        (
            Provider::OpenAi,
            json!([good_call]),
            "",
            "the message should be an object, found an array",
        ),
        (
            Provider::OpenAi,
            json!({"role": "assistant", "tool_calls": [{"id": "", "type": "function", "function": {"name": "ping", "arguments": ""}}]}),
            "tool_calls[0].id",
            "should be a non-empty string, found an empty string",
        ),
        // OpenAI Responses
        (
            Provider::OpenAiResponses,
            json!({"output": [{"type": "function_call", "name": "ping", "arguments": "{}"}]}),
            "output[0].call_id",
            "OpenAI Responses message: `output[0].call_id` is missing",
        ),
        (
            Provider::OpenAiResponses,
            json!([{"type": "function_call", "call_id": "call_1", "arguments": "{}"}]),
            "[0].name",
            "`[0].name` is missing",
        ),
        (
            Provider::OpenAiResponses,
            json!({"id": "resp_1", "status": "completed"}),
            "output",
            "`output` is missing",
        ),
        (
            Provider::OpenAiResponses,
            json!({"output": [{"call_id": "call_1", "name": "ping", "arguments": "{}"}]}),
            "output[0].type",
            "`output[0].type` is missing",
        ),
        (
            Provider::OpenAiResponses,
            json!({"output": [
                {"type": "function_call", "call_id": "call_1", "name": "ping", "arguments": "{}"},
                {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "sql", "input": "DROP"}
            ]}),
            "output[1].type",
            "`output[1].type` is `custom_tool_call`; expected `function_call`",
        ),
        (
            Provider::OpenAiResponses,
            json!({"output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "computer_call", "id": "cu_1", "call_id": "call_3",
                 "action": {"type": "screenshot"}, "pending_safety_checks": [], "status": "completed"}
            ]}),
            "output[1].type",
            "`output[1].type` is `computer_call`; expected `function_call`",
        ),
        (
            Provider::OpenAiResponses,
            json!("function_call"),
            "",
            "the message should be a response, an array of output items or one item, found a string",
        ),
        // Anthropic Messages
        (
            Provider::Anthropic,
            json!({"role": "assistant", "content": [good_block, {"type": "tool_use", "name": "ping", "input": {}}]}),
            "content[1].id",
            "Anthropic Messages message: `content[1].id` is missing",
        ),
        (
            Provider::Anthropic,
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "ping"}]}),
            "content[0].input",
            "`content[0].input` is missing",
        ),
        (
            Provider::Anthropic,
            json!({"role": "assistant", "content": [good_block, good_block]}),
            "content[1].id",
            "`content[1].id` is `toolu_1`, the id of an earlier call too",
        ),
        (
            Provider::Anthropic,
            json!({"role": "assistant", "stop_reason": "tool_use"}),
            "content",
            "`content` is missing",
        ),
        (
            Provider::Anthropic,
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_3", "name": 7, "input": {}}]}),
            "content[0].name",
            "`content[0].name` should be a string, found a number",
        ),
        // Gemini
        (
            Provider::Gemini,
            json!({"candidates": [], "promptFeedback": {"blockReason": "SAFETY"}}),
            "candidates[0]",
            "Gemini message: `candidates[0]` is missing",
        ),
        (
            Provider::Gemini,
            json!({"candidates": [{"content": {"role": "model", "parts": [good_part, {"functionCall": {"args": {}}}]}}]}),
            "candidates[0].content.parts[1].functionCall.name",
            "`candidates[0].content.parts[1].functionCall.name` is missing",
        ),
        (
            Provider::Gemini,
            json!({"role": "model", "parts": {"functionCall": {"name": "ping"}}}),
            "parts",
            "`parts` should be an array, found an object",
        ),
        (
            Provider::Gemini,
            json!({"role": "model", "parts": [{"functionCall": {"name": "ping", "id": 3}}]}),
            "parts[0].functionCall.id",
            "`parts[0].functionCall.id` should be a string, found a number",
        ),
        (
            Provider::Gemini,
            json!({"candidates": [{"finishReason": "SAFETY"}]}),
            "candidates[0].content",
            "`candidates[0].content` is missing",
        ),
        (
            Provider::Gemini,
            json!({"role": "user", "parts": [good_part]}),
            "role",
            "`role` is `user`; expected `model`",
        ),
    ];
    let f = fixture();
    for (provider, msg, path, display) in cases {
        let error: AdapterError = match provider
            .run(&f.dispatcher, &msg, RunOptions::new().session("default"))
            .await
        {
            Ok(turn) => panic!("{provider}: {msg} was read as {turn:?}"),
            Err(error) => error,
        };
        assert_eq!(error.provider(), provider);
        assert_eq!(error.path(), path, "{provider}: {error}");
        let shown = error.to_string();
        assert!(
            shown.contains(display),
            "{provider}: `{shown}` lacks `{display}`"
        );
        // `calls` says the same, without a dispatcher, and so do the text
        // forms.
        assert_eq!(provider.calls(&msg).unwrap_err(), error);
        assert_eq!(provider.calls_str(&msg.to_string()).unwrap_err(), error);
        let from_text = provider
            .run_str(
                &f.dispatcher,
                &msg.to_string(),
                RunOptions::new().session("default"),
            )
            .await;
        assert_eq!(from_text.unwrap_err(), error);
    }
    // Not even the well-formed calls before the malformed one ran.
    assert!(f.audit.is_empty(), "{:?}", f.audit.records());
    assert_eq!(f.shop.refunds(), 0);
    assert!(f.shop.log().is_empty());
}

#[test]
fn errors_expose_what_is_wrong() {
    let error = Provider::Anthropic
        .calls(&json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}, {"type": "tool_use", "id": "t", "name": "x", "input": {}}]}))
        .unwrap_err();
    assert_eq!(error.problem(), &Problem::DuplicateId { id: "t".into() });
    let error = Provider::OpenAi
        .calls(&json!({"tool_calls": "none"}))
        .unwrap_err();
    assert_eq!(
        error.problem(),
        &Problem::WrongType {
            expected: "an array",
            found: "a string"
        }
    );
    let boxed: Box<dyn std::error::Error> = Box::new(error);
    assert!(
        boxed
            .to_string()
            .starts_with("OpenAI Chat Completions message: ")
    );
}

#[test]
fn provider_names_match_the_export_formats() {
    assert_eq!(
        Provider::ALL.map(Provider::name),
        ["openai", "openai-responses", "anthropic", "gemini"]
    );
    assert_eq!(Provider::OpenAiResponses.to_string(), "openai-responses");
    // One dialect, one spelling: the variant of `Provider` and of `Format`
    // agree, as do their names on the command line.
    for provider in Provider::ALL {
        let format: toolcall_providers::Format = provider.name().parse().unwrap();
        assert_eq!(format!("{provider:?}"), format!("{format:?}"));
    }
    #[allow(deprecated)]
    let old = Provider::OpenAiChat;
    assert_eq!(old, Provider::OpenAi);
}

#[test]
fn a_turn_can_run_on_any_thread() {
    fn send<T: Send>(value: T) -> T {
        value
    }
    let f = fixture();
    let msg = message(Provider::Anthropic, &[]);
    // Compiles only if the future is `Send`, so hosts can spawn it.
    let future =
        send(Provider::Anthropic.run(&f.dispatcher, &msg, RunOptions::new().session("default")));
    let turn = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
        .unwrap();
    assert!(turn.outcomes.is_empty());
}

// --------------------------------------- the message as the provider's text

/// `text` with `from` replaced by `to` in the calls' arguments: inside the
/// JSON string of an OpenAI call, in the object of an Anthropic or Gemini one.
fn in_arguments(provider: Provider, text: &str, from: &str, to: &str) -> String {
    let (from, to) = match provider {
        Provider::OpenAi | Provider::OpenAiResponses => {
            let escape = |s: &str| {
                let quoted = Value::from(s).to_string();
                quoted[1..quoted.len() - 1].to_owned()
            };
            (escape(from), escape(to))
        }
        _ => (from.to_owned(), to.to_owned()),
    };
    assert!(text.contains(&from), "{from} not in {text}");
    text.replace(&from, &to)
}

async fn run_str(f: &Fixture, provider: Provider, text: &str) -> Turn {
    provider
        .run_str(&f.dispatcher, text, RunOptions::new().session("chat-1"))
        .await
        .unwrap_or_else(|e| panic!("{provider}: {e}"))
}

/// Read from the provider's text, every provider's arguments reach the
/// pipeline as the model wrote them: a member written twice, at any depth,
/// is that call's INVALID_JSON (the other calls run), never the last one
/// silently; the audit keeps that text.
#[tokio::test]
async fn a_member_twice_in_the_arguments_is_invalid_json_from_every_providers_text() {
    for provider in Provider::ALL {
        let f = fixture();
        let calls = [
            (
                "c_refund",
                "refund_order",
                json!({"order_id": "ORD-1001", "amount_cents": 100}),
            ),
            (
                "c_nested",
                "get_order",
                json!({"order_id": "ORD-1001", "x": {"y": [{"k": 1}]}}),
            ),
            ("c_lookup", "get_order", json!({"order_id": "ORD-2002"})),
        ];
        let text = message(provider, &calls).to_string();
        let text = in_arguments(
            provider,
            &text,
            r#""amount_cents":100"#,
            r#""amount_cents":100,"amount_cents":20000"#,
        );
        let text = in_arguments(provider, &text, r#"{"k":1}"#, r#"{"k":1,"k":2}"#);
        let turn = run_str(&f, provider, &text).await;
        let codes: Vec<&str> = turn.results().map(|r| r.code.as_str()).collect();
        assert_eq!(codes, ["INVALID_JSON", "INVALID_JSON", "OK"], "{provider}");
        for (i, member) in [(0, "amount_cents"), (1, "k")] {
            let message = &turn.outcomes[i].result.message;
            assert!(
                message.contains(&format!("duplicate member `{member}`")),
                "{provider}: {message}"
            );
            let (read, _, flag) = model_reads(provider, &turn.messages(), i);
            assert_eq!(read["code"], "INVALID_JSON");
            assert_ne!(flag, Some(false), "{provider}");
        }
        assert_eq!(f.shop.refunds(), 0, "{provider}: nothing was refunded");
        assert_eq!(f.shop.log(), ["get_order:ORD-2002"], "{provider}");
        assert_eq!(
            f.audit.records()[0].arguments,
            r#"{"order_id":"ORD-1001","amount_cents":100,"amount_cents":20000}"#,
            "{provider}: the audit keeps the model's text"
        );
        // `calls_str` hands the same text out.
        let read = provider.calls_str(&text).unwrap();
        assert!(
            matches!(read[0].arguments(), toolcall::Arguments::Raw(raw) if raw.contains("20000")),
            "{provider}"
        );
    }
}

/// The text form reads the same calls as the value form: same ids, names
/// and (parsed) arguments; white space and member order of the envelope do
/// not matter. A Gemini call without `args` is `{}` in both.
#[test]
fn the_text_form_reads_the_same_calls_as_the_value_form() {
    for provider in Provider::ALL {
        let calls = [
            ("a1", "get_order", json!({"order_id": "ORD-1001"})),
            ("a2", "ping", json!({})),
        ];
        let value = message(provider, &calls);
        let text = serde_json::to_string_pretty(&value).unwrap();
        let from_value = provider.calls(&value).unwrap();
        let from_text = provider.calls_str(&text).unwrap();
        assert_eq!(from_text.len(), from_value.len(), "{provider}");
        for (t, v) in from_text.iter().zip(&from_value) {
            assert_eq!((t.id(), t.name()), (v.id(), v.name()), "{provider}");
            let parse = |arguments| match arguments {
                toolcall::Arguments::Raw(raw) => serde_json::from_str::<Value>(raw).unwrap(),
                toolcall::Arguments::Parsed(value) => value.clone(),
            };
            assert_eq!(parse(t.arguments()), parse(v.arguments()), "{provider}");
        }
    }
    let content =
        r#"{"role": "model", "parts": [{"text": "x"}, {"functionCall": {"name": "ping"}}]}"#;
    let calls = Provider::Gemini.calls_str(content).unwrap();
    assert!(matches!(calls[0].arguments(), toolcall::Arguments::Parsed(v) if v == &json!({})));
}

/// Arguments over the size limit are refused in both forms: by the text's
/// size when read from text, by their compact JSON when parsed.
#[tokio::test]
async fn oversized_arguments_are_refused_in_both_forms() {
    for provider in [Provider::Anthropic, Provider::Gemini] {
        let args = json!({"order_id": "ORD-1001", "note": "x".repeat(200_000)});
        let calls = [("big", "get_order", args)];
        let f = fixture();
        let value = message(provider, &calls);
        let from_value = run(&f, provider, &value).await;
        let from_text = run_str(&f, provider, &value.to_string()).await;
        for turn in [from_value, from_text] {
            let result = &turn.outcomes[0].result;
            assert_eq!(result.code, Code::InvalidJson, "{provider}: {result:?}");
            assert!(
                result.message.contains("over the limit"),
                "{}",
                result.message
            );
        }
        assert!(f.shop.log().is_empty());
    }
}

/// Read from text, the message's own objects are strict too: a member given
/// twice in the envelope (which `name`? which `input`?) is an error naming
/// it, and nothing runs; text that is not JSON is an error as well.
#[tokio::test]
async fn a_member_twice_in_the_envelope_or_text_that_is_not_json_is_an_error() {
    let cases: [(Provider, &str, &str); 7] = [
        (
            Provider::OpenAi,
            r#"{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "refund_order", "arguments": "{\"order_id\": \"ORD-1001\", \"amount_cents\": 5}"}}], "tool_calls": null}"#,
            "tool_calls",
        ),
        (
            Provider::Anthropic,
            r#"{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_order", "name": "refund_order", "input": {"order_id": "ORD-1001", "amount_cents": 5}}]}"#,
            "content[0].name",
        ),
        (
            Provider::Anthropic,
            r#"{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "refund_order", "input": {"order_id": "ORD-1001", "amount_cents": 5}, "input": {"order_id": "ORD-1001", "amount_cents": 9000}}]}"#,
            "content[0].input",
        ),
        (
            Provider::Gemini,
            r#"{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "refund_order", "args": {"order_id": "ORD-1001", "amount_cents": 5}, "args": {}}}]}}]}"#,
            "candidates[0].content.parts[0].functionCall.args",
        ),
        (
            Provider::OpenAi,
            r#"{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "refund_order", "arguments": "{}", "arguments": "{\"order_id\": \"ORD-1001\", \"amount_cents\": 5}"}}]}"#,
            "tool_calls[0].function.arguments",
        ),
        (
            Provider::OpenAiResponses,
            r#"{"output": [{"type": "reasoning", "type": "function_call", "call_id": "c1", "name": "refund_order", "arguments": "{}"}]}"#,
            "output[0].type",
        ),
        (
            Provider::OpenAi,
            r#"{"role": "assistant", "role": "user"}"#,
            "role",
        ),
    ];
    let f = fixture();
    for (provider, text, path) in cases {
        let error = provider
            .run_str(&f.dispatcher, text, RunOptions::new().session("default"))
            .await
            .unwrap_err();
        assert_eq!(
            (error.problem(), error.path()),
            (&Problem::DuplicateMember, path),
            "{provider}: {error}"
        );
        assert!(error.to_string().contains("given twice"), "{error}");
    }
    let error = Provider::Anthropic
        .calls_str(r#"{"content": ["#)
        .unwrap_err();
    assert!(
        matches!(error.problem(), Problem::NotJson { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("is not JSON"), "{error}");
    assert!(f.audit.is_empty());
    assert_eq!(f.shop.refunds(), 0);
}

/// Arguments nested deeper than `serde_json` reads (128 levels) are an
/// error, never a panic or a stack overflow. Inside the JSON string of an
/// OpenAI call they are text: the pipeline refuses them as INVALID_JSON,
/// nested too deeply. In the object of an Anthropic or Gemini call they are part of
/// the message, which `calls_str` then cannot read: [`Problem::NotJson`],
/// saying why, and nothing runs.
#[tokio::test]
async fn arguments_nested_200_deep_are_an_error_not_a_crash() {
    let deep = format!(
        r#"{{"order_id":"ORD-1001","x":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    for provider in Provider::ALL {
        let f = fixture();
        let args = json!({"order_id": "ORD-1001", "x": "DEEP"});
        let text = message(provider, &[("d1", "get_order", args)]).to_string();
        let text = in_arguments(
            provider,
            &text,
            r#"{"order_id":"ORD-1001","x":"DEEP"}"#,
            &deep,
        );
        match provider {
            Provider::OpenAi | Provider::OpenAiResponses => {
                let calls = provider.calls_str(&text).unwrap();
                assert!(
                    matches!(calls[0].arguments(), toolcall::Arguments::Raw(raw) if raw == deep),
                    "{provider}"
                );
                let turn = run_str(&f, provider, &text).await;
                let result = &turn.outcomes[0].result;
                assert_eq!(result.code, Code::InvalidJson, "{provider}: {result:?}");
                assert!(
                    result.message.contains("deep"),
                    "{provider}: {}",
                    result.message
                );
            }
            _ => {
                let error = provider
                    .run_str(&f.dispatcher, &text, RunOptions::new().session("default"))
                    .await
                    .unwrap_err();
                let Problem::NotJson { error: why } = error.problem() else {
                    panic!("{provider}: {error}");
                };
                assert!(
                    why.contains("recursion limit exceeded"),
                    "{provider}: {why}"
                );
                assert_eq!(error.path(), "", "{provider}");
                assert!(error.to_string().contains("is not JSON"), "{error}");
                assert!(f.audit.is_empty(), "{provider}");
            }
        }
        assert!(f.shop.log().is_empty(), "{provider}");
    }
}
