//! Anthropic-compatible Messages, with reqwest.

use serde_json::{Value, json};
use toolcall_providers::{Format, ToolChoice};

use super::{Reply, Settings, excerpt, http_client};
use crate::Error;

/// The Messages API version the requests name.
const VERSION: &str = "2023-06-01";

/// A Messages server, and the tools every request sends.
pub(crate) struct Anthropic {
    client: reqwest::Client,
    url: String,
    key: String,
    model: String,
    max_tokens: u32,
    system: Option<String>,
    tools: Value,
}

impl Anthropic {
    /// The client for `settings`; `definitions` are the tools in the
    /// `anthropic` format. The key is ANTHROPIC_API_KEY's, when set.
    pub(crate) fn new(settings: &Settings, definitions: Value) -> Result<Anthropic, Error> {
        Ok(Anthropic {
            client: http_client(settings.timeout)?,
            url: format!("{}/v1/messages", settings.base_url),
            key: std::env::var("ANTHROPIC_API_KEY").unwrap_or_default(),
            model: settings.model.clone(),
            max_tokens: settings.max_tokens,
            system: settings.system.clone(),
            tools: definitions,
        })
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The conversation's first messages (the system prompt is a field of
    /// each request).
    pub(crate) fn start(settings: &Settings) -> Vec<Value> {
        vec![json!({"role": "user", "content": settings.prompt})]
    }

    /// One request: the model's next assistant message.
    pub(crate) async fn complete(
        &self,
        messages: &[Value],
        choice: &ToolChoice,
    ) -> Result<Reply, Error> {
        let url = &self.url;
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        });
        if self.tools.as_array().is_some_and(|t| !t.is_empty()) {
            body["tools"] = self.tools.clone();
            body["tool_choice"] = choice.value(Format::Anthropic).unwrap_or(Value::Null);
        }
        if let Some(system) = &self.system {
            body["system"] = json!(system);
        }
        let mut request = self
            .client
            .post(url)
            .header("anthropic-version", VERSION)
            .json(&body);
        if !self.key.is_empty() {
            request = request.header("x-api-key", &self.key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| super::unreachable(url, &e))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| super::unreachable(url, &e))?;
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
        let content = message.get("content").cloned().unwrap_or(Value::Null);
        let said: Vec<&str> = content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect();
        let said = said.join("\n");
        Ok(Reply {
            text,
            said,
            assistant: json!({"role": "assistant", "content": content}),
        })
    }
}
