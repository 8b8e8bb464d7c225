//! A turn through each provider's adapter: calls run in order, once, with
//! their ids; the reply each provider expects; what the pipeline refuses is
//! an answer, not an error; and a call waiting for approval.

use super::*;

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
