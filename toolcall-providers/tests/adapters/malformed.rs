//! Messages that make no sense are errors that name the place and run
//! nothing.

use super::*;

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
