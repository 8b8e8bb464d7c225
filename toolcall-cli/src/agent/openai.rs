//! The loop over an OpenAI-compatible Chat Completions server, with
//! async-openai.

use std::any::Any;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionTools, CreateChatCompletionRequest,
};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use toolcall_core::{Dispatcher, Store};
use toolcall_providers::{Format, Provider};

use super::{Settings, Transcript, excerpt, http_client, run_options, settle};
use crate::Error;

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
    let definitions =
        toolcall_providers::definitions(dispatcher.registry(), policy, Format::OpenAi);
    let tools: Vec<ChatCompletionTools> = serde_json::from_value(definitions)
        .map_err(|e| Error::Input(format!("the tools' OpenAI definitions: {e}")))?;
    // async-openai reads OPENAI_API_KEY itself (empty when it is not set).
    let config = OpenAIConfig::new().with_api_base(&settings.base_url);
    let client = Client::build(http_client(settings.timeout)?, config);
    let url = format!("{}/chat/completions", settings.base_url);

    let mut messages: Vec<Value> = Vec::new();
    if let Some(system) = &settings.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": settings.prompt}));
    for _ in 0..settings.max_turns {
        let request = CreateChatCompletionRequest {
            model: settings.model.clone(),
            messages: typed(&messages)?,
            tools: (!tools.is_empty()).then(|| tools.clone()),
            max_completion_tokens: Some(settings.max_tokens),
            ..CreateChatCompletionRequest::default()
        };
        let raw: Box<RawValue> = client
            .chat()
            .create_byot(request)
            .await
            .map_err(|e| failed(&url, e))?;
        let completion: Value = serde_json::from_str(raw.get())
            .map_err(|e| Error::Model(format!("the model server at {url}: not JSON: {e}")))?;
        let message = completion
            .pointer("/choices/0/message")
            .cloned()
            .ok_or_else(|| {
                Error::Model(format!(
                    "the model server at {url} answered no choices[0].message: {}",
                    excerpt(raw.get())
                ))
            })?;
        // The text form: a member written twice in the message is an error.
        let mut turn = Provider::OpenAi
            .run_str(dispatcher, raw.get(), run_options(session))
            .await
            .map_err(|e| Error::Model(format!("the model server at {url}: {e}")))?;
        let text = message
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !text.is_empty() {
            transcript.line(format!("assistant: {text}"));
        }
        messages.push(assistant(&message));
        if turn.outcomes.is_empty() {
            transcript.messages(&messages);
            return Ok(text);
        }
        transcript.turn(&turn);
        settle(dispatcher, session, settings, &mut turn, transcript).await?;
        messages.extend(turn.messages());
        transcript.messages(&messages);
    }
    Err(super::no_answer(settings.max_turns))
}

/// The assistant message as the next request sends it back: its role,
/// content and tool calls, nothing the server added.
fn assistant(message: &Value) -> Value {
    let mut sent = json!({"role": "assistant", "content": message.get("content").cloned().unwrap_or(Value::Null)});
    if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
        sent["tool_calls"] = calls.clone();
    }
    sent
}

/// The conversation in async-openai's types.
fn typed(messages: &[Value]) -> Result<Vec<ChatCompletionRequestMessage>, Error> {
    messages
        .iter()
        .map(|message| {
            serde_json::from_value(message.clone()).map_err(|e| {
                Error::Model(format!(
                    "a message of the conversation is not a Chat Completions message ({e}): {}",
                    excerpt(&message.to_string())
                ))
            })
        })
        .collect()
}

/// async-openai's error, for a person.
fn failed(url: &str, error: OpenAIError) -> Error {
    match error {
        OpenAIError::Reqwest(error) => super::unreachable(url, &error),
        OpenAIError::ApiError(api) => Error::Model(format!(
            "the model server at {url} answered HTTP {}: {}",
            api.status_code,
            excerpt(&api.api_error.message)
        )),
        OpenAIError::JSONDeserialize(error, body) => Error::Model(format!(
            "the model server at {url} answered what is not JSON ({error}): {}",
            excerpt(&body)
        )),
        other => Error::Model(format!("the model server at {url}: {other}")),
    }
}
