//! toolcall's tools in each provider's language.
//!
//! - [`export`]: the value of each API's `tools` field, built from a
//!   [`Registry`](toolcall_core::Registry), with the schema rewritten where a
//!   provider accepts only a subset of JSON Schema (OpenAI's strict mode,
//!   Gemini's OpenAPI subset), never changing what the validator accepts.
//! - [`adapters`]: read the tool calls out of a provider's assistant message,
//!   run each through the [`Dispatcher`](toolcall_core::Dispatcher), and
//!   build the provider's tool-result message.
//! - [`choice`]: whether the model may, must or must not call a tool, as
//!   each API's `tool_choice` field writes it ([`ToolChoice`]).

pub mod adapters;
pub mod choice;
pub mod export;

pub use adapters::{AdapterError, Outcome, Provider, ProviderCall, RunOptions, Turn};
pub use choice::{EmptyToolChoice, ToolChoice};
pub use export::{Format, UnknownFormat, definitions};
