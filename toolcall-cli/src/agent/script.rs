//! A scripted model: an OpenAI-compatible (and Anthropic-compatible) server
//! that plays a conversation from a JSON file, for tests and for trying the
//! agent loop without a key.
//!
//! # The script
//!
//! A JSON object (or only its `turns` array):
//!
//! ```json
//! {
//!   "description": "a lookup, then a refund sent in reais",
//!   "model": "scripted",
//!   "turns": [
//!     {"content": "Let me look.",
//!      "tool_calls": [
//!        {"id": "call_1", "name": "get_order", "arguments": {"order_id": "ORD-1001"}},
//!        {"id": "call_2", "name": "refund_order",
//!         "arguments": "{\"order_id\": \"ORD-1001\", \"amount_cents\": 25.90}"}
//!      ]},
//!     {"content": "Refunded."},
//!     {"status": 503, "body": "overloaded"},
//!     {"raw": "{not json"}
//!   ],
//!   "after": "error"
//! }
//! ```
//!
//! Request n to the model (counting from 0, every `POST`) is answered with
//! turn n:
//!
//! * `content` (text, optional) and `tool_calls` (optional): the assistant
//!   message. Each call has an `id` (default `call_<turn>_<index>`), a
//!   `name`, and `arguments`: a JSON string is the very text the model
//!   writes (so `25.90` stays `25.90`), any other value is written as its
//!   JSON (default `{}`). A turn without `tool_calls` is the model's final
//!   answer. The assistant message may also be written as either API
//!   writes it: `"role": "assistant"`, calls as `{"id", "type":
//!   "function", "function": {"name", "arguments"}}`, or `content` as
//!   Messages API blocks (`text`, and `tool_use` with `id`, `name` and
//!   `input`). Over Chat Completions the calls are `tool_calls` of
//!   `choices[0].message` (`finish_reason` `tool_calls`, else `stop`); over
//!   the Messages API they are `tool_use` blocks after a `text` block
//!   (`stop_reason` `tool_use`, else `end_turn`), their `input` the
//!   arguments' text as written.
//! * `status` (an HTTP status, default 200) with `body` (text, or any JSON
//!   value written as JSON): an error answer, as a server that fails;
//!   `retry_after` (seconds) adds a `Retry-After` header to it, as a server
//!   that limits its rate.
//! * `raw`: a body sent as it is, with status 200 and the JSON content
//!   type, as a server that answers what is not a completion.
//! * `delay_ms` (with any of the above): the server waits this many
//!   milliseconds before it answers, as a slow model.
//!
//! `description` is for people, `model` the model name the answers carry
//! (`scripted` unless given). `after` says what a request past the last
//! turn gets: `error` (the default: HTTP 500 with a JSON error naming the
//! request's number) or `repeat` (the last turn again, as a model that
//! never stops). A member the format does not know is an error naming it.
//!
//! # The server
//!
//! It answers `POST /v1/chat/completions` and `POST /chat/completions`
//! (OpenAI Chat Completions: give the agent `--base-url
//! http://ADDR/v1`), and `POST /v1/messages` (Anthropic Messages:
//! `--provider anthropic --base-url http://ADDR`). It records every request
//! it got, in order: `GET /requests` answers them as a JSON array of
//! `{"path", "headers", "body"}` (the body parsed as JSON, or as text when
//! it is not; of the headers, `authorization`, `x-api-key` and
//! `anthropic-version` when sent), and [`ScriptServer::requests`] gives
//! them in process.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::Error;

/// A conversation script (see the [module](self) documentation).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// What the script plays, for people; the server does not read it.
    #[serde(default)]
    pub description: Option<String>,
    /// The model name the answers carry.
    #[serde(default = "default_model")]
    pub model: String,
    /// The answers, one per request.
    pub turns: Vec<ScriptTurn>,
    /// What a request past the last turn gets.
    #[serde(default)]
    pub after: After,
}

fn default_model() -> String {
    "scripted".to_owned()
}

/// What a request past a script's last turn gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum After {
    /// HTTP 500, with an error naming the request's number.
    #[default]
    Error,
    /// The last turn again.
    Repeat,
}

/// One answer of a script.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(try_from = "RawTurn")]
pub struct ScriptTurn {
    /// The assistant's text.
    pub content: Option<String>,
    /// The tool calls, in the model's order.
    pub tool_calls: Vec<ScriptCall>,
    /// An HTTP status other than 200: the answer is `body`.
    pub status: Option<u16>,
    /// The body of an error answer.
    pub body: Option<Value>,
    /// A body sent as it is.
    pub raw: Option<String>,
    /// The `Retry-After` of an error answer, in seconds.
    pub retry_after: Option<u64>,
    /// Milliseconds the server waits before it answers.
    pub delay_ms: Option<u64>,
}

/// One tool call of a scripted turn.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "RawCall")]
pub struct ScriptCall {
    /// The call's id; `call_<turn>_<index>` when absent.
    pub id: Option<String>,
    /// The tool.
    pub name: String,
    /// A JSON string is the arguments' text as the model writes it; any
    /// other value is written as JSON.
    pub arguments: Option<Value>,
}

/// A turn as a script writes it: the short form, or an assistant message
/// as Chat Completions (`tool_calls` of `{"type": "function", "function":
/// {...}}`) or the Messages API (`content` blocks) writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ScriptCall>>,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default)]
    body: Option<Value>,
    #[serde(default)]
    raw: Option<String>,
    #[serde(default)]
    retry_after: Option<u64>,
    #[serde(default)]
    delay_ms: Option<u64>,
}

impl TryFrom<RawTurn> for ScriptTurn {
    type Error = String;

    fn try_from(raw: RawTurn) -> Result<Self, String> {
        if let Some(role) = raw.role.as_deref().filter(|r| *r != "assistant") {
            return Err(format!("a turn is the assistant's, not `{role}`'s"));
        }
        let mut tool_calls = raw.tool_calls.unwrap_or_default();
        let content = match raw.content {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text),
            Some(Value::Array(blocks)) => {
                // Messages API blocks: text, and tool_use calls.
                let mut texts = Vec::new();
                for block in blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => texts.push(
                            block
                                .get("text")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                        ),
                        Some("tool_use") => tool_calls.push(ScriptCall {
                            id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: block
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or("a tool_use block has no `name`")?
                                .to_owned(),
                            arguments: block.get("input").cloned(),
                        }),
                        _ => {
                            return Err(format!(
                                "a content block that is no text nor tool_use: {block}"
                            ));
                        }
                    }
                }
                (!texts.is_empty()).then(|| texts.join("\n"))
            }
            Some(other) => return Err(format!("`content` is text or blocks, not {other}")),
        };
        Ok(ScriptTurn {
            content,
            tool_calls,
            status: raw.status,
            body: raw.body,
            raw: raw.raw,
            retry_after: raw.retry_after,
            delay_ms: raw.delay_ms,
        })
    }
}

/// A call as a script writes it: `{"id", "name", "arguments"}`, or as
/// Chat Completions does, `{"id", "type": "function", "function": {"name",
/// "arguments"}}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    function: Option<RawFunction>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

impl TryFrom<RawCall> for ScriptCall {
    type Error = String;

    fn try_from(raw: RawCall) -> Result<Self, String> {
        if let Some(kind) = raw.kind.as_deref().filter(|k| *k != "function") {
            return Err(format!(
                "a tool call of type `{kind}`; only `function` is played"
            ));
        }
        let (name, arguments) = match (raw.name, raw.function) {
            (Some(name), None) => (name, raw.arguments),
            (None, Some(function)) if raw.arguments.is_none() => {
                (function.name, function.arguments)
            }
            (None, None) => return Err("a tool call has no `name`".to_owned()),
            _ => {
                return Err(
                    "a tool call gives `name` and `arguments`, or `function`, not both".to_owned(),
                );
            }
        };
        Ok(ScriptCall {
            id: raw.id,
            name,
            arguments,
        })
    }
}

impl ScriptCall {
    /// The arguments' text, as the model writes it.
    fn text(&self) -> String {
        match &self.arguments {
            None => "{}".to_owned(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        }
    }
}

impl Script {
    /// Reads a script from its JSON text: an object with `turns`, or the
    /// array of turns alone.
    pub fn from_json(text: &str) -> Result<Script, serde_json::Error> {
        let value: Value = serde_json::from_str(text)?;
        if value.is_array() {
            Ok(Script {
                description: None,
                model: default_model(),
                turns: serde_json::from_value(value)?,
                after: After::Error,
            })
        } else {
            serde_json::from_value(value)
        }
    }

    /// Reads a script file.
    pub fn from_file(path: &Path) -> Result<Script, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(Error::io(format!("read the script {}", path.display())))?;
        Script::from_json(&text)
            .map_err(|e| Error::Input(format!("{}: not a script: {e}", path.display())))
    }

    /// Serves the script on `addr` (port 0 picks a free one), on the
    /// current tokio runtime, until the runtime ends.
    pub async fn serve(self, addr: SocketAddr) -> Result<ScriptServer, Error> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::Serve(format!("cannot listen on {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Serve(e.to_string()))?;
        let state = Arc::new(Played {
            script: self,
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .route("/chat/completions", post(answer))
            .route("/v1/messages", post(answer))
            .route("/requests", get(requests))
            .with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(ScriptServer { addr, state })
    }
}

/// A script being served ([`Script::serve`]).
#[derive(Clone)]
pub struct ScriptServer {
    addr: SocketAddr,
    state: Arc<Played>,
}

impl ScriptServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL of its OpenAI-compatible API (`http://ADDR/v1`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL of its Anthropic-compatible API (`http://ADDR`).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request it got, in order: `{"path", "headers", "body"}`.
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests().clone()
    }
}

struct Played {
    script: Script,
    requests: Mutex<Vec<Value>>,
}

impl Played {
    fn requests(&self) -> MutexGuard<'_, Vec<Value>> {
        self.requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

async fn requests(State(state): State<Arc<Played>>) -> Response {
    axum::Json(Value::Array(state.requests().clone())).into_response()
}

/// The headers a request's record keeps, when it has them.
const RECORDED_HEADERS: [&str; 3] = ["authorization", "x-api-key", "anthropic-version"];

async fn answer(
    State(state): State<Arc<Played>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let text = String::from_utf8_lossy(&body);
    let parsed = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text.into_owned()));
    let kept: serde_json::Map<String, Value> = RECORDED_HEADERS
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some(((*name).to_owned(), Value::String(value.to_owned())))
        })
        .collect();
    let index = {
        let mut requests = state.requests();
        requests.push(json!({"path": uri.path(), "headers": kept, "body": parsed}));
        requests.len() - 1
    };
    let turns = &state.script.turns;
    let turn = match turns.get(index) {
        Some(turn) => turn,
        None if state.script.after == After::Repeat && !turns.is_empty() => &turns[turns.len() - 1],
        None => {
            let message = format!(
                "the script has {} turn(s); this is request {}",
                turns.len(),
                index + 1
            );
            return error(StatusCode::INTERNAL_SERVER_ERROR, &json!(message));
        }
    };
    if let Some(delay) = turn.delay_ms {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    if let Some(raw) = &turn.raw {
        return ([(header::CONTENT_TYPE, "application/json")], raw.clone()).into_response();
    }
    if let Some(status) = turn.status.filter(|s| *s != 200) {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = turn.body.clone().unwrap_or(json!("scripted error"));
        let mut answer = error(status, &body);
        if let Some(seconds) = turn.retry_after {
            answer
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
        }
        return answer;
    }
    let body = if uri.path().ends_with("/messages") {
        anthropic(&state.script.model, index, turn)
    } else {
        openai(&state.script.model, index, turn)
    };
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// An error answer: a JSON body as the APIs write theirs, or the text.
fn error(status: StatusCode, body: &Value) -> Response {
    let body = match body {
        Value::String(message) => json!({"error": {"message": message, "type": "scripted_error"}}),
        other => other.clone(),
    };
    (status, axum::Json(body)).into_response()
}

fn call_id(call: &ScriptCall, turn: usize, index: usize) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("call_{turn}_{index}"))
}

/// A Chat Completions answer.
fn openai(model: &str, turn_index: usize, turn: &ScriptTurn) -> String {
    let calls: Vec<Value> = turn
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            json!({
                "id": call_id(call, turn_index, i),
                "type": "function",
                "function": {"name": call.name, "arguments": call.text()},
            })
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": turn.content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let finish = if turn.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    json!({
        "id": format!("chatcmpl-scripted-{turn_index}"),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })
    .to_string()
}

/// A Messages answer. Each `input` is the arguments' text as written
/// (when it is JSON; a string of it otherwise).
fn anthropic(model: &str, turn_index: usize, turn: &ScriptTurn) -> String {
    let mut blocks: Vec<String> = Vec::new();
    if let Some(text) = &turn.content {
        blocks.push(json!({"type": "text", "text": text}).to_string());
    }
    for (i, call) in turn.tool_calls.iter().enumerate() {
        let text = call.text();
        let input = match serde_json::from_str::<&RawValue>(&text) {
            Ok(raw) => raw.get().to_owned(),
            Err(_) => Value::String(text).to_string(),
        };
        let head =
            json!({"type": "tool_use", "id": call_id(call, turn_index, i), "name": call.name})
                .to_string();
        // `{"type":...,"name":...}` with `"input": <text>` added before the brace.
        blocks.push(format!("{},\"input\":{input}}}", &head[..head.len() - 1]));
    }
    let stop = if turn.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    let head = json!({
        "id": format!("msg_scripted_{turn_index}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_reason": stop,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    })
    .to_string();
    format!(
        "{},\"content\":[{}]}}",
        &head[..head.len() - 1],
        blocks.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_is_an_object_or_its_turns() {
        let script = Script::from_json(r#"[{"content": "hi"}]"#).unwrap();
        assert_eq!(script.turns.len(), 1);
        assert_eq!(script.after, After::Error);
        let script =
            Script::from_json(r#"{"turns": [{"content": "hi"}], "after": "repeat"}"#).unwrap();
        assert_eq!(script.after, After::Repeat);
        let error = Script::from_json(r#"{"turns": [{"contnet": "hi"}]}"#).unwrap_err();
        assert!(error.to_string().contains("contnet"), "{error}");
        let error = Script::from_json(r#"[{"tool_calls": [{"arguments": {}}]}]"#).unwrap_err();
        assert!(error.to_string().contains("no `name`"), "{error}");
    }

    #[test]
    fn a_turn_may_be_written_as_either_api_writes_it() {
        let script = Script::from_json(
            r#"[
              {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]},
              {"role": "assistant", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "b", "name": "get_order", "input": {"order_id": "ORD-1001"}}]}
            ]"#,
        )
        .unwrap();
        assert_eq!(script.turns[0].tool_calls[0].name, "get_order");
        assert_eq!(script.turns[0].tool_calls[0].text(), "{}");
        assert_eq!(script.turns[1].content.as_deref(), Some("Looking."));
        assert_eq!(script.turns[1].tool_calls[0].id.as_deref(), Some("b"));
        assert_eq!(
            script.turns[1].tool_calls[0].text(),
            r#"{"order_id":"ORD-1001"}"#
        );
        let error = Script::from_json(r#"[{"role": "user", "content": "hi"}]"#).unwrap_err();
        assert!(error.to_string().contains("assistant"), "{error}");
    }

    #[test]
    fn arguments_keep_the_text_the_script_wrote() {
        let script = Script::from_json(
            r#"[{"tool_calls": [{"name": "refund_order", "arguments": "{\"amount_cents\": 25.90}"}]}]"#,
        )
        .unwrap();
        let openai: Value = serde_json::from_str(&openai("m", 0, &script.turns[0])).unwrap();
        let call = &openai["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["id"], "call_0_0");
        assert_eq!(call["function"]["arguments"], "{\"amount_cents\": 25.90}");
        let anthropic = anthropic("m", 0, &script.turns[0]);
        assert!(
            anthropic.contains(r#""input":{"amount_cents": 25.90}"#),
            "{anthropic}"
        );
        let parsed: Value = serde_json::from_str(&anthropic).unwrap();
        assert_eq!(parsed["content"][0]["type"], "tool_use");
        assert_eq!(parsed["stop_reason"], "tool_use");
    }
}
