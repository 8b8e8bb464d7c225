//! The message as the provider's text: a member named twice, oversized or
//! deeply nested arguments, and the same calls read as from the value.

use super::*;

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

/// The turn's first call was answered `INVALID_JSON`, its message saying
/// `says`.
#[track_caller]
fn assert_invalid_json(turn: &Turn, provider: Provider, says: &str) {
    let result = &turn.outcomes[0].result;
    assert_eq!(result.code, Code::InvalidJson, "{provider}: {result:?}");
    assert!(
        result.message.contains(says),
        "{provider}: {}",
        result.message
    );
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
            assert_invalid_json(&turn, provider, "over the limit");
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
                assert_invalid_json(&turn, provider, "deep");
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
