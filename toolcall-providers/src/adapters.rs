//! Tool calls in and tool results out, in each provider's message shapes.
//!
//! A host that talks to a model API gets back an assistant message that may
//! ask for several tool calls at once. [`Provider::run`] reads every call out
//! of that message, runs each through the [`Dispatcher`] in the order the
//! model wrote them (each with the provider's call id, so it lands in the
//! [`AuditRecord`](toolcall_core::AuditRecord)), and returns a [`Turn`]: the
//! [`ToolResult`] of every call, for the host, and
//! [`Turn::messages`], what to append to the conversation before the next
//! request, for the model.
//!
//! | provider | tool calls read from | results written as |
//! |---|---|---|
//! | [`Provider::OpenAi`] | `tool_calls[]` of the assistant message | one `{"role": "tool", "tool_call_id", "content"}` message per call |
//! | [`Provider::OpenAiResponses`] | `function_call` items of `output` | one `{"type": "function_call_output", "call_id", "output"}` item per call |
//! | [`Provider::Anthropic`] | `tool_use` blocks of `content` | one `{"role": "user", "content": [tool_result, ...]}` message for the whole turn |
//! | [`Provider::Gemini`] | `functionCall` parts of the content | one `{"role": "user", "parts": [{"functionResponse": ...}, ...]}` content for the whole turn |
//!
//! # What the model reads back
//!
//! The model always reads the whole [`ToolResult`]: `ok`, `code`, `message`,
//! `data`, `replayed`, exactly the JSON of [`ToolResult::to_model_text`].
//! Where the provider takes text (OpenAI, Anthropic) that text is sent as
//! is; Gemini takes a JSON object, so the same result goes in as an object,
//! under `output` when it succeeded and under `error` when it did not (the
//! two keys Gemini's documentation gives for a function's output and its
//! failure). Anthropic's `is_error` is set exactly when `ok` is false, which
//! includes `CONFIRMATION_REQUIRED`: nothing ran yet. The OpenAI APIs have no
//! error flag; the model reads `"ok": false` and the code in the text.
//!
//! # Arguments
//!
//! OpenAI sends arguments as JSON text, which goes to the pipeline verbatim
//! ([`Arguments::Raw`]): malformed text is the pipeline's `INVALID_JSON`,
//! with its message for the model, not an error of the adapter. Anthropic
//! (`input`) and Gemini (`args`) send an object inside the message's JSON.
//! Gemini leaves `args` out for a call without arguments, which is read as
//! `{}`; a value that is not an object is `INVALID_JSON`.
//!
//! Each operation comes in two forms, and the form decides how fully the
//! arguments are checked:
//!
//! | the host has | read with | the arguments reach the pipeline as |
//! |---|---|---|
//! | the message's text (the HTTP body) | [`Provider::calls_str`], [`Provider::run_str`] | the text the model wrote, for every provider: a member written twice at any depth is `INVALID_JSON`, the 64 KiB and depth limits measure that text |
//! | a parsed [`Value`] | [`Provider::calls`], [`Provider::run`] | text for OpenAI; for Anthropic and Gemini a parsed value ([`Arguments::Parsed`]), held to the same size (its compact JSON) and depth limits, but a member written twice was already merged by the host's parser and cannot be seen |
//!
//! Prefer the text form when the host has the text: a model that writes
//! `{"amount_cents": 100, "amount_cents": 20000}` is refused, instead of
//! being read as whichever member the host's parser kept.
//!
//! # Malformed messages
//!
//! A message that does not have the provider's shape (no id, no name, a
//! string where an array belongs) is an [`AdapterError`] that names the
//! member and where it is, and nothing runs: the whole message is read
//! before the first call is made. Two calls with the same id in one message
//! are an error too, since their results could not be told apart, and so is,
//! in a message read from text, a member given twice in one of the
//! message's own objects ([`Problem::DuplicateMember`]: which `name`, which
//! `input`?). A member twice inside a call's arguments is not the message's
//! problem but that call's `INVALID_JSON`.
//!
//! # Approvals
//!
//! A high-risk call answers `CONFIRMATION_REQUIRED`. [`Turn::pending`] lists
//! those calls; the host asks a person, passes the decision to
//! [`Dispatcher::approve`] or [`Dispatcher::deny`], and puts the outcome in
//! place with [`Turn::resolve`] before sending [`Turn::messages`]. Or it
//! sends the messages as they are: the model then reads that the call waits
//! for a person.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use toolcall::{tool, tools, Code, Dispatcher, Rejection};
//! use toolcall_providers::adapters::{Provider, RunOptions};
//!
//! /// Looks up the stock of a product.
//! #[tool]
//! fn stock(
//!     /// The product, for example SKU-12.
//!     sku: String,
//! ) -> Result<u32, Rejection> {
//!     Ok(if sku == "SKU-12" { 4 } else { 0 })
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dispatcher = Dispatcher::builder(tools![stock]?, Arc::new(())).build()?;
//!
//! // The assistant message of a Messages API response, as the host received it.
//! let message = json!({
//!     "role": "assistant",
//!     "content": [
//!         {"type": "text", "text": "Let me check both."},
//!         {"type": "tool_use", "id": "toolu_a1", "name": "stock", "input": {"sku": "SKU-12"}},
//!         {"type": "tool_use", "id": "toolu_a2", "name": "stock", "input": {"sku": 12}}
//!     ]
//! });
//! let turn = Provider::Anthropic
//!     .run(&dispatcher, &message, RunOptions::new().session("chat-9"))
//!     .await?;
//!
//! assert!(turn.outcomes[0].result.ok);
//! assert_eq!(turn.outcomes[1].result.code, Code::InvalidArguments);
//! let reply = turn.messages();
//! assert_eq!(reply.len(), 1, "one user message for the whole turn");
//! assert_eq!(reply[0]["content"][0]["tool_use_id"], "toolu_a1");
//! assert_eq!(reply[0]["content"][0]["is_error"], false);
//! assert_eq!(reply[0]["content"][1]["is_error"], true);
//! # Ok(())
//! # }
//! ```

mod anthropic;
mod gemini;
mod openai_chat;
mod openai_responses;
mod raw;
mod shape;

use std::any::Any;
use std::fmt;

use serde_json::Value;
use toolcall_core::store::Store;
use toolcall_core::{Arguments, Call, Caller, Code, Dispatcher, ToolResult};

/// A model API whose tool-call messages the adapters read and answer.
///
/// Each variant's documentation gives the shapes it accepts and the shape of
/// the reply. Every variant offers the same three operations:
/// [`calls`](Provider::calls) (read only), [`run`](Provider::run) (read,
/// execute, reply) and [`reply`](Provider::reply) (build the reply for
/// outcomes the host already has).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions.
    ///
    /// Reads the assistant message, `{"role": "assistant", "tool_calls":
    /// [{"id", "type": "function", "function": {"name", "arguments"}}]}`, or
    /// a whole completion, whose `choices[0].message` is that message. A
    /// message without `tool_calls` asks for nothing. `arguments` is JSON
    /// text. An entry of another `type` than `function` (a custom tool) is an
    /// error: the reply must answer every entry and this adapter cannot.
    ///
    /// Replies with one message per call, in order:
    /// `{"role": "tool", "tool_call_id", "content": "<the result's JSON>"}`.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolcall_providers::adapters::Provider;
    /// let message = json!({
    ///     "role": "assistant",
    ///     "content": null,
    ///     "tool_calls": [{
    ///         "id": "call_7Qd",
    ///         "type": "function",
    ///         "function": {"name": "stock", "arguments": "{\"sku\": \"SKU-12\"}"}
    ///     }]
    /// });
    /// let calls = Provider::OpenAi.calls(&message)?;
    /// assert_eq!(calls[0].id(), Some("call_7Qd"));
    /// assert_eq!(calls[0].name(), "stock");
    /// # Ok::<(), toolcall_providers::adapters::AdapterError>(())
    /// ```
    OpenAi,
    /// OpenAI Responses.
    ///
    /// Reads the `output` of a response: the whole response object
    /// (`{"output": [...]}`), the array of items, or one item. Items of
    /// `type` `function_call`, `{"call_id", "name", "arguments"}`, are calls;
    /// other items (`reasoning`, `message`, tools the server ran) are
    /// skipped. A call the client must answer with an item this adapter
    /// cannot write is an error, as in Chat Completions: `custom_tool_call`,
    /// `computer_call`, `local_shell_call`, `shell_call`, `apply_patch_call`
    /// and `mcp_approval_request` (without their answer, the next request is
    /// refused).
    /// `arguments` is JSON text.
    ///
    /// Replies with one input item per call, in order:
    /// `{"type": "function_call_output", "call_id", "output": "<the result's JSON>"}`.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolcall_providers::adapters::Provider;
    /// let response = json!({
    ///     "object": "response",
    ///     "output": [
    ///         {"type": "reasoning", "id": "rs_1", "summary": []},
    ///         {"type": "function_call", "id": "fc_1", "call_id": "call_Zr4",
    ///          "name": "stock", "arguments": "{\"sku\": \"SKU-12\"}"}
    ///     ]
    /// });
    /// let calls = Provider::OpenAiResponses.calls(&response)?;
    /// assert_eq!(calls.len(), 1);
    /// assert_eq!(calls[0].id(), Some("call_Zr4"));
    /// # Ok::<(), toolcall_providers::adapters::AdapterError>(())
    /// ```
    OpenAiResponses,
    /// Anthropic Messages.
    ///
    /// Reads the assistant message (or the whole Messages API response,
    /// which has the same shape): `tool_use` blocks of `content`, `{"id",
    /// "name", "input"}`. Other blocks (`text`, `thinking`, server tools) are
    /// skipped; a `content` that is a string asks for nothing.
    ///
    /// Replies with one user message holding every result, in order, as
    /// Anthropic requires: `{"role": "user", "content": [{"type":
    /// "tool_result", "tool_use_id", "content": "<the result's JSON>",
    /// "is_error"}]}`. No calls, no message.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolcall_providers::adapters::Provider;
    /// let message = json!({
    ///     "role": "assistant",
    ///     "content": [{"type": "tool_use", "id": "toolu_01", "name": "stock", "input": {"sku": "SKU-12"}}]
    /// });
    /// let calls = Provider::Anthropic.calls(&message)?;
    /// assert_eq!(calls[0].id(), Some("toolu_01"));
    /// # Ok::<(), toolcall_providers::adapters::AdapterError>(())
    /// ```
    Anthropic,
    /// Google Gemini (`generateContent`).
    ///
    /// Reads a whole response (`candidates[0].content`), a candidate
    /// (`{"content": ...}`) or a content (`{"role": "model", "parts":
    /// [...]}`): parts with a `functionCall`, `{"name", "args", "id"}`, where
    /// `args` may be left out (no arguments) and `id` may be absent (it is
    /// then absent from the reply too). Other parts are skipped.
    ///
    /// Replies with one content holding every result, in order: `{"role":
    /// "user", "parts": [{"functionResponse": {"name", "id", "response":
    /// {"output": <the result>}}}]}`, with `error` instead of `output` when
    /// the result is not `ok`. No calls, no content.
    ///
    /// ```
    /// # use serde_json::json;
    /// # use toolcall_providers::adapters::Provider;
    /// let response = json!({
    ///     "candidates": [{
    ///         "content": {
    ///             "role": "model",
    ///             "parts": [{"functionCall": {"name": "stock", "args": {"sku": "SKU-12"}}}]
    ///         },
    ///         "finishReason": "STOP"
    ///     }]
    /// });
    /// let calls = Provider::Gemini.calls(&response)?;
    /// assert_eq!((calls[0].name(), calls[0].id()), ("stock", None));
    /// # Ok::<(), toolcall_providers::adapters::AdapterError>(())
    /// ```
    Gemini,
}

impl Provider {
    /// The former name of [`Provider::OpenAi`], which now has the spelling
    /// of [`Format::OpenAi`](crate::export::Format::OpenAi).
    #[deprecated(
        since = "0.1.0",
        note = "renamed `Provider::OpenAi`, as `Format::OpenAi`"
    )]
    #[allow(non_upper_case_globals)]
    pub const OpenAiChat: Provider = Provider::OpenAi;

    /// Every provider.
    pub const ALL: [Provider; 4] = [
        Provider::OpenAi,
        Provider::OpenAiResponses,
        Provider::Anthropic,
        Provider::Gemini,
    ];

    /// The short name, the same as the matching
    /// [`export::Format`](crate::export::Format): `openai`,
    /// `openai-responses`, `anthropic`, `gemini`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// The API's name, for error messages.
    fn title(self) -> &'static str {
        match self {
            Provider::OpenAi => "OpenAI Chat Completions",
            Provider::OpenAiResponses => "OpenAI Responses",
            Provider::Anthropic => "Anthropic Messages",
            Provider::Gemini => "Gemini",
        }
    }

    /// Reads every tool call out of a message, in order, without running
    /// anything.
    ///
    /// The message is already parsed, so are the arguments of Anthropic and
    /// Gemini calls ([`Arguments::Parsed`]): the pipeline holds them to its
    /// size and depth limits, measured on their compact JSON, but cannot
    /// see a member the model wrote twice, which the host's parser already
    /// merged. Pass the message as the provider sent it to
    /// [`calls_str`](Self::calls_str) for the full checks.
    ///
    /// # Errors
    ///
    /// An [`AdapterError`] when the message does not have this provider's
    /// shape (see each variant for what is accepted).
    pub fn calls(self, message: &Value) -> Result<Vec<ProviderCall>, AdapterError> {
        self.read(shape::At::root(self, message, None))
    }

    /// Reads every tool call out of a message given as the text the
    /// provider sent (the body of the HTTP response, or its message), in
    /// order, without running anything.
    ///
    /// This is the form that gives the pipeline's full checks: every call's
    /// arguments go as the model's own text ([`Arguments::Raw`]), so a
    /// member written twice at any depth is `INVALID_JSON` and the 64 KiB
    /// and depth limits measure what was written, for every provider (the
    /// OpenAI APIs send the arguments as text anyway). The message's own
    /// members are read strictly as well: an object of the envelope (a
    /// `tool_use` block, a `functionCall`) with a member twice is an error.
    ///
    /// ```
    /// # use toolcall_providers::adapters::Provider;
    /// let body = r#"{"role": "assistant", "content": [
    ///     {"type": "tool_use", "id": "toolu_01", "name": "refund",
    ///      "input": {"amount_cents": 100, "amount_cents": 20000}}
    /// ]}"#;
    /// let calls = Provider::Anthropic.calls_str(body)?;
    /// // The pipeline reads this text and refuses it as INVALID_JSON.
    /// assert!(matches!(
    ///     calls[0].arguments(),
    ///     toolcall_core::Arguments::Raw(r#"{"amount_cents": 100, "amount_cents": 20000}"#)
    /// ));
    /// # Ok::<(), toolcall_providers::adapters::AdapterError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// An [`AdapterError`] when the text is not JSON ([`Problem::NotJson`];
    /// `serde_json` reads at most 128 levels of nesting), when a member of
    /// the envelope is given twice ([`Problem::DuplicateMember`]), or when
    /// the message does not have this provider's shape.
    pub fn calls_str(self, message: &str) -> Result<Vec<ProviderCall>, AdapterError> {
        let value: Value = serde_json::from_str(message).map_err(|error| {
            AdapterError::new(
                self,
                "",
                Problem::NotJson {
                    error: error.to_string(),
                },
            )
        })?;
        self.read(shape::At::root(self, &value, Some(message)))
    }

    fn read(self, root: shape::At<'_>) -> Result<Vec<ProviderCall>, AdapterError> {
        match self {
            Provider::OpenAi => openai_chat::calls(root),
            Provider::OpenAiResponses => openai_responses::calls(root),
            Provider::Anthropic => anthropic::calls(root),
            Provider::Gemini => gemini::calls(root),
        }
    }

    /// Reads every tool call out of `message` and runs each through the
    /// dispatcher, one after the other in the model's order, in the session
    /// and by the caller of `options`, each with the provider's call id.
    ///
    /// The arguments are checked as [`calls`](Self::calls) says; with the
    /// message's text at hand, [`run_str`](Self::run_str) checks them fully.
    ///
    /// # Errors
    ///
    /// An [`AdapterError`] when the message does not have this provider's
    /// shape; then no call runs. Everything else, whatever the calls ask
    /// for, is a [`Turn`]: the pipeline answers unknown tools, bad arguments
    /// and refusals with a [`ToolResult`].
    pub async fn run<S, St>(
        self,
        dispatcher: &Dispatcher<S, St>,
        message: &Value,
        options: RunOptions<'_>,
    ) -> Result<Turn, AdapterError>
    where
        S: Any + Send + Sync,
        St: Store,
    {
        let calls = self.calls(message)?;
        Ok(self.execute(dispatcher, calls, options).await)
    }

    /// [`run`](Self::run) for a message given as the text the provider
    /// sent: every call's arguments reach the pipeline as the model wrote
    /// them (see [`calls_str`](Self::calls_str)), so a member given twice
    /// is that call's `INVALID_JSON` and the other calls still run.
    ///
    /// # Errors
    ///
    /// An [`AdapterError`] as for [`calls_str`](Self::calls_str); then no
    /// call runs.
    pub async fn run_str<S, St>(
        self,
        dispatcher: &Dispatcher<S, St>,
        message: &str,
        options: RunOptions<'_>,
    ) -> Result<Turn, AdapterError>
    where
        S: Any + Send + Sync,
        St: Store,
    {
        let calls = self.calls_str(message)?;
        Ok(self.execute(dispatcher, calls, options).await)
    }

    async fn execute<S, St>(
        self,
        dispatcher: &Dispatcher<S, St>,
        calls: Vec<ProviderCall>,
        options: RunOptions<'_>,
    ) -> Turn
    where
        S: Any + Send + Sync,
        St: Store,
    {
        let mut outcomes = Vec::with_capacity(calls.len());
        for call in calls {
            let mut request = Call::new(&call.name, call.arguments());
            if let Some(session) = options.session {
                request = request.session(session);
            }
            if let Some(caller) = options.caller {
                request = request.caller(caller);
            }
            if let Some(id) = &call.id {
                request = request.call_id(id);
            }
            let result = dispatcher.execute(request).await;
            outcomes.push(Outcome { call, result });
        }
        Turn {
            provider: self,
            outcomes,
        }
    }

    /// The message(s) that carry these outcomes back to the model, in this
    /// provider's shape (see each variant). No outcomes, no messages.
    pub fn reply(self, outcomes: &[Outcome]) -> Vec<Value> {
        if outcomes.is_empty() {
            return Vec::new();
        }
        match self {
            Provider::OpenAi => openai_chat::reply(outcomes),
            Provider::OpenAiResponses => openai_responses::reply(outcomes),
            Provider::Anthropic => anthropic::reply(outcomes),
            Provider::Gemini => gemini::reply(outcomes),
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where calls of a turn run: the session and the caller.
///
/// ```
/// # use toolcall_core::{Caller, Policy};
/// # use toolcall_providers::adapters::RunOptions;
/// let support = Caller::new("support-bot", Policy::new().allow(["stock"]));
/// let options = RunOptions::new().session("chat-9").caller(&support);
/// # let _ = options;
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RunOptions<'a> {
    session: Option<&'a str>,
    caller: Option<&'a Caller>,
}

impl<'a> RunOptions<'a> {
    /// No conversation named, the dispatcher's default caller: the same
    /// defaults as [`Call::new`] (a dispatcher without a
    /// [`default_session`](toolcall_core::DispatcherBuilder::default_session)
    /// refuses calls that name no conversation).
    pub fn new() -> Self {
        RunOptions {
            session: None,
            caller: None,
        }
    }

    /// The conversation: the scope of the step budget, the loop guard and
    /// the idempotency key. Use the same one for every turn of a conversation.
    #[must_use]
    pub fn session(mut self, session: &'a str) -> Self {
        self.session = Some(session);
        self
    }

    /// Who is calling, with their allowlist and limits.
    #[must_use]
    pub fn caller(mut self, caller: &'a Caller) -> Self {
        self.caller = Some(caller);
        self
    }
}

impl Default for RunOptions<'_> {
    fn default() -> Self {
        RunOptions::new()
    }
}

/// One tool call as the provider's message asked for it.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderCall {
    id: Option<String>,
    name: String,
    arguments: CallArguments,
}

#[derive(Clone, Debug, PartialEq)]
enum CallArguments {
    Raw(String),
    Parsed(Value),
}

impl ProviderCall {
    /// The provider's id of the call (`tool_calls[].id`, `call_id`,
    /// `tool_use.id`, `functionCall.id`). Always there but for Gemini, whose
    /// calls may have none.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The tool the model asked for.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments as the provider sent them: the model's JSON text for
    /// OpenAI, and for every provider read with
    /// [`Provider::calls_str`]; a parsed value for Anthropic and Gemini
    /// read with [`Provider::calls`] (a Gemini call without `args` is `{}`).
    pub fn arguments(&self) -> Arguments<'_> {
        match &self.arguments {
            CallArguments::Raw(raw) => Arguments::Raw(raw),
            CallArguments::Parsed(value) => Arguments::Parsed(value),
        }
    }
}

/// One call of a turn and what the dispatcher answered.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// The call, as the model asked for it.
    pub call: ProviderCall,
    /// The pipeline's answer.
    pub result: ToolResult,
}

/// What [`Provider::run`] did with one assistant message.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Turn {
    /// The provider whose shapes the reply takes.
    pub provider: Provider,
    /// Every call of the message with its result, in the model's order.
    pub outcomes: Vec<Outcome>,
}

impl Turn {
    /// What to append to the conversation for the model: the results of
    /// every outcome, in the provider's shape (see [`Provider::reply`]).
    pub fn messages(&self) -> Vec<Value> {
        self.provider.reply(&self.outcomes)
    }

    /// The results, in the model's order.
    pub fn results(&self) -> impl ExactSizeIterator<Item = &ToolResult> {
        self.outcomes.iter().map(|outcome| &outcome.result)
    }

    /// The calls that wait for a person's approval
    /// (`CONFIRMATION_REQUIRED`); each result's `question_id` is what
    /// [`Dispatcher::approve`] and [`Dispatcher::deny`] take.
    pub fn pending(&self) -> impl Iterator<Item = &Outcome> {
        self.outcomes
            .iter()
            .filter(|outcome| outcome.result.code == Code::ConfirmationRequired)
    }

    /// Replaces the result of the call that waits under `question_id`
    /// with `result` (what the host's approval or denial returned), so the
    /// reply tells the model what finally happened. Returns whether such a
    /// call was found.
    pub fn resolve(&mut self, question_id: &str, result: ToolResult) -> bool {
        let waiting = self.outcomes.iter_mut().find(|outcome| {
            outcome.result.code == Code::ConfirmationRequired
                && outcome.result.question_id.as_deref() == Some(question_id)
        });
        match waiting {
            Some(outcome) => {
                outcome.result = result;
                true
            }
            None => false,
        }
    }
}

/// A provider message that does not have the provider's shape.
///
/// It says which provider, where in the message (a path such as
/// `tool_calls[1].function.name`, empty for the message itself) and what is
/// wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterError {
    provider: Provider,
    path: String,
    problem: Problem,
}

/// What is wrong at the place an [`AdapterError`] names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// A member the provider always sends is not there (or is `null`).
    Missing,
    /// A member has the wrong JSON type, or is an empty string where an id
    /// or a name belongs.
    WrongType {
        /// What the provider's format has there, such as `"an array"`.
        expected: &'static str,
        /// What the message has, such as `"a string"`.
        found: &'static str,
    },
    /// A value the adapter does not accept there, such as a tool call of a
    /// `type` other than `function`, or a message of another role.
    Unsupported {
        /// The value found.
        found: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// A second call with an id an earlier call of the message already has.
    DuplicateId {
        /// The id.
        id: String,
    },
    /// A member given twice in one object of the message (read from text
    /// with [`Provider::calls_str`]); the path names the member. The
    /// arguments of a call are not the message's: a member twice there is
    /// that call's `INVALID_JSON`.
    DuplicateMember,
    /// The text given to [`Provider::calls_str`] is not JSON.
    NotJson {
        /// What `serde_json` found wrong, with the line and column.
        error: String,
    },
}

impl AdapterError {
    fn new(provider: Provider, path: &str, problem: Problem) -> Self {
        AdapterError {
            provider,
            path: path.to_owned(),
            problem,
        }
    }

    /// The provider whose format the message was read as.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// Where in the message: a path such as `content[2].id`; empty for the
    /// message itself.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong there.
    pub fn problem(&self) -> &Problem {
        &self.problem
    }
}

impl fmt::Display for AdapterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} message: ", self.provider.title())?;
        let place = if self.path.is_empty() {
            "the message".to_owned()
        } else {
            format!("`{}`", self.path)
        };
        match &self.problem {
            Problem::Missing => write!(f, "{place} is missing"),
            Problem::WrongType { expected, found } => {
                write!(f, "{place} should be {expected}, found {found}")
            }
            Problem::Unsupported { found, expected } => {
                write!(f, "{place} is `{found}`; expected {expected}")
            }
            Problem::DuplicateId { id } => {
                write!(f, "{place} is `{id}`, the id of an earlier call too")
            }
            Problem::DuplicateMember => write!(f, "{place} is given twice in one object"),
            Problem::NotJson { error } => write!(f, "{place} is not JSON: {error}"),
        }
    }
}

impl std::error::Error for AdapterError {}
