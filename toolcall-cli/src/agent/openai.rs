//! OpenAI-compatible Chat Completions, with async-openai.

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionTools, CreateChatCompletionRequest,
};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::{Reply, Settings, excerpt, http_client};
use crate::Error;

/// A Chat Completions server, and the tools every request sends.
pub(crate) struct OpenAi {
    client: Client<OpenAIConfig>,
    url: String,
    model: String,
    max_tokens: u32,
    tools: Vec<ChatCompletionTools>,
}

impl OpenAi {
    /// The client for `settings`; `definitions` are the tools in the
    /// `openai` format (strict function definitions).
    pub(crate) fn new(settings: &Settings, definitions: Value) -> Result<OpenAi, Error> {
        let tools = serde_json::from_value(definitions)
            .map_err(|e| Error::Input(format!("the tools' OpenAI definitions: {e}")))?;
        // async-openai reads OPENAI_API_KEY itself (empty when it is not set).
        let config = OpenAIConfig::new().with_api_base(&settings.base_url);
        Ok(OpenAi {
            client: Client::build(http_client(settings.timeout)?, config),
            url: format!("{}/chat/completions", settings.base_url),
            model: settings.model.clone(),
            max_tokens: settings.max_tokens,
            tools,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The conversation's first messages.
    pub(crate) fn start(settings: &Settings) -> Vec<Value> {
        let mut messages = Vec::new();
        if let Some(system) = &settings.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.push(json!({"role": "user", "content": settings.prompt}));
        messages
    }

    /// One request: the model's next assistant message.
    pub(crate) async fn complete(&self, messages: &[Value]) -> Result<Reply, Error> {
        let url = &self.url;
        let request = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: typed(messages)?,
            tools: (!self.tools.is_empty()).then(|| self.tools.clone()),
            max_completion_tokens: Some(self.max_tokens),
            ..CreateChatCompletionRequest::default()
        };
        let raw: Box<RawValue> = self
            .client
            .chat()
            .create_byot(request)
            .await
            .map_err(|e| failed(url, e))?;
        let completion: Value = serde_json::from_str(raw.get())
            .map_err(|e| Error::Model(format!("the model server at {url}: not JSON: {e}")))?;
        let message = completion.pointer("/choices/0/message").ok_or_else(|| {
            Error::Model(format!(
                "the model server at {url} answered no choices[0].message: {}",
                excerpt(raw.get())
            ))
        })?;
        let said = message
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // Sent back as it came: its role, content and tool calls, nothing
        // the server added.
        let mut assistant = json!({
            "role": "assistant",
            "content": message.get("content").cloned().unwrap_or(Value::Null),
        });
        if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
            assistant["tool_calls"] = calls.clone();
        }
        Ok(Reply {
            text: raw.get().to_owned(),
            said,
            assistant,
        })
    }
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
