//! OpenAI-compatible Chat Completions, with async-openai.

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::types::chat::{
    ChatCompletionRequestMessage, ChatCompletionTools, CreateChatCompletionRequest,
};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use toolcall_providers::{Format, ToolChoice};

use super::{Reply, Settings, excerpt, http_client};
use crate::Error;

/// A Chat Completions server, and the tools every request sends.
pub(crate) struct OpenAi {
    client: Client<OpenAIConfig>,
    url: String,
    model: String,
    max_tokens: u32,
    /// The field the bound on the answer's tokens goes in.
    tokens_field: &'static str,
    tools: Vec<ChatCompletionTools>,
}

/// The field that bounds the answer's tokens for the server at `base_url`:
/// OpenAI's own API (and Azure OpenAI) take `max_completion_tokens`, which
/// their reasoning models require; every other server `max_tokens`, the
/// field OpenAI-compatible servers read (llama-cpp-python reads no other,
/// and without it writes until its context is full).
pub(crate) fn tokens_field(base_url: &str) -> &'static str {
    let rest = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = host
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if host == "api.openai.com" || host.ends_with(".openai.azure.com") {
        "max_completion_tokens"
    } else {
        "max_tokens"
    }
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
            tokens_field: tokens_field(&settings.base_url),
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
    pub(crate) async fn complete(
        &self,
        messages: &[Value],
        choice: &ToolChoice,
    ) -> Result<Reply, Error> {
        let url = &self.url;
        let request = CreateChatCompletionRequest {
            model: self.model.clone(),
            messages: typed(messages)?,
            tools: (!self.tools.is_empty()).then(|| self.tools.clone()),
            ..CreateChatCompletionRequest::default()
        };
        let mut request = serde_json::to_value(request)
            .map_err(|e| Error::Input(format!("the request to {url}: {e}")))?;
        request[self.tokens_field] = json!(self.max_tokens);
        if !self.tools.is_empty() {
            request["tool_choice"] = choice.value(Format::OpenAi).unwrap_or(Value::Null);
        }
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
        // the server added; a message of calls without words with `""`
        // (async-openai would leave a null out, and llama-cpp-python's
        // chat templates need the member, and a string: HTTP 500 otherwise).
        let content = message
            .get("content")
            .filter(|c| !c.is_null())
            .cloned()
            .unwrap_or(json!(""));
        let mut assistant = json!({"role": "assistant", "content": content});
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

#[cfg(test)]
mod tests {
    use super::tokens_field;

    #[test]
    fn openais_own_api_gets_max_completion_tokens_the_others_max_tokens() {
        for url in [
            "https://api.openai.com/v1",
            "https://API.OpenAI.com:443/v1",
            "https://mine.openai.azure.com/openai/deployments/x",
        ] {
            assert_eq!(tokens_field(url), "max_completion_tokens", "{url}");
        }
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "https://api.openai.com.example.net/v1",
            "https://user@api.example.com/v1?x=api.openai.com",
            "api.openai.com.evil",
        ] {
            assert_eq!(tokens_field(url), "max_tokens", "{url}");
        }
    }
}
