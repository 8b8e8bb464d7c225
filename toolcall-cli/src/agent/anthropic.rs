//! The loop over an Anthropic-compatible Messages server, with reqwest.

use std::any::Any;

use serde_json::{Value, json};
use toolcall_core::{Dispatcher, Store};
use toolcall_providers::{Format, Provider};

use super::{Settings, Transcript, excerpt, http_client, run_options, settle};
use crate::Error;

/// The Messages API version the requests name.
const VERSION: &str = "2023-06-01";

/// Runs the loop; the model's answer.
pub(crate) async fn run<S, St>(
    dispatcher: &Dispatcher<S, St>,
    session: &str,
    settings: &Settings,
    transcript: &mut Transcript,
) -> Result<String, Error>
where
    S: Any + Send + Sync,
    St: Store,
{
    let policy = dispatcher.default_caller().policy();
    let tools = toolcall_providers::definitions(dispatcher.registry(), policy, Format::Anthropic);
    let client = http_client(settings.timeout)?;
    let url = format!("{}/v1/messages", settings.base_url);
    let key = std::env::var("ANTHROPIC_API_KEY").unwrap_or_default();

    let mut messages = vec![json!({"role": "user", "content": settings.prompt})];
    for _ in 0..settings.max_turns {
        let mut body = json!({
            "model": settings.model,
            "max_tokens": settings.max_tokens,
            "messages": messages,
        });
        if tools.as_array().is_some_and(|t| !t.is_empty()) {
            body["tools"] = tools.clone();
        }
        if let Some(system) = &settings.system {
            body["system"] = json!(system);
        }
        let mut request = client
            .post(&url)
            .header("anthropic-version", VERSION)
            .json(&body);
        if !key.is_empty() {
            request = request.header("x-api-key", &key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| super::unreachable(&url, &e))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| super::unreachable(&url, &e))?;
        if !status.is_success() {
            return Err(Error::Model(format!(
                "the model server at {url} answered HTTP {status}: {}",
                excerpt(&text)
            )));
        }
        let message: Value = serde_json::from_str(&text).map_err(|e| {
            Error::Model(format!(
                "the model server at {url} answered what is not JSON ({e}): {}",
                excerpt(&text)
            ))
        })?;
        // The text form: each `input` reaches the pipeline as the model wrote it.
        let mut turn = Provider::Anthropic
            .run_str(dispatcher, &text, run_options(session))
            .await
            .map_err(|e| Error::Model(format!("the model server at {url}: {e}")))?;
        let content = message.get("content").cloned().unwrap_or(Value::Null);
        let said: Vec<&str> = content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect();
        let said = said.join("\n");
        if !said.is_empty() {
            transcript.line(format!("assistant: {said}"));
        }
        messages.push(json!({"role": "assistant", "content": content}));
        if turn.outcomes.is_empty() {
            transcript.messages(&messages);
            return Ok(said);
        }
        transcript.turn(&turn);
        settle(dispatcher, session, settings, &mut turn, transcript).await?;
        messages.extend(turn.messages());
        transcript.messages(&messages);
    }
    Err(super::no_answer(settings.max_turns))
}
