//! Serve a toolcall registry over the Model Context Protocol.
//!
//! [`McpServer`] answers MCP's `tools/list` and `tools/call` from a
//! [`Dispatcher`], so that an MCP client (a desktop assistant, an IDE, an
//! agent framework) gets exactly the guarantees an in-process host gets:
//!
//! * `tools/list` lists the tools the dispatcher's default caller may call,
//!   with their strict input schemas and the annotations of
//!   [`toolcall_providers::export::mcp_tool`] (`readOnlyHint`, `destructiveHint`, ...).
//! * `tools/call` runs [`Dispatcher::execute`] in the session of
//!   [`Options::session`]. Every outcome, a rejection included (an unknown
//!   tool, `25.9` where an integer is due, a loop, a policy limit), is a tool
//!   result, never a JSON-RPC error: `isError` is `true` when the call did not
//!   succeed (SEP-1303), `structuredContent` holds the [`ToolResult`] as JSON,
//!   and a text block holds [`ToolResult::to_model_text`], the same text a
//!   model gets from any other host.
//! * A high-risk tool answers `CONFIRMATION_REQUIRED`. If the client declared
//!   the elicitation capability, the server asks the person through it, naming
//!   the tool and the exact pending arguments, and answers the call with the
//!   outcome of [`Dispatcher::approve`] or [`Dispatcher::deny`]. A client
//!   without elicitation gets the `CONFIRMATION_REQUIRED` result as it is:
//!   nothing runs.
//!
//! Sessions opened with `initialize` (protocol 2025-11-25 and before) are
//! asked with an `elicitation/create` request in the middle of the
//! `tools/call`. Peers on protocol 2026-07-28 or later, which forbids requests
//! from the server, get the same question as an `input_required` result
//! (SEP-2322); their retry carries the answer.
//!
//! ```no_run
//! use std::sync::Arc;
//! # async fn run(dispatcher: toolcall_core::Dispatcher<()>) -> Result<(), toolcall_mcp::Error> {
//! toolcall_mcp::serve_stdio(Arc::new(dispatcher), toolcall_mcp::Options::new("desk-42")).await
//! # }
//! ```
//!
//! The crate depends on [`rmcp`], the official Rust SDK, and re-exports it so
//! that a program using [`serve`] with its own transport names the same version.

#![forbid(unsafe_code)]

mod server;

use std::any::Any;
use std::sync::Arc;

pub use rmcp;
use rmcp::ServiceExt as _;
use rmcp::service::{QuitReason, RoleServer, ServerInitializeError};
use rmcp::transport::IntoTransport;
use toolcall_core::{Dispatcher, Store};

pub use server::McpServer;

#[cfg(doc)]
use toolcall_core::ToolResult;

/// Options of the MCP server.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The conversation id the server's calls run in (it scopes the step
    /// budget and the idempotency keys).
    pub session: String,
    /// The server's name in `initialize`.
    pub name: String,
    /// The server's version in `initialize`.
    pub version: String,
}

impl Options {
    /// The default options with the calls in `session`.
    pub fn new(session: impl Into<String>) -> Self {
        Options {
            session: session.into(),
            ..Options::default()
        }
    }

    /// Sets the name the server gives in `initialize`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the version the server gives in `initialize`.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }
}

impl Default for Options {
    /// Session `"mcp"`, name `"toolcall"`, and this crate's version.
    fn default() -> Self {
        Options {
            session: "mcp".to_owned(),
            name: "toolcall".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// Why the server stopped with an error.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Serves the dispatcher's tools over `transport` until the client closes
/// the connection.
///
/// `transport` is anything [`rmcp`] can serve on: a pair of an async reader
/// and writer (such as the two halves of a [`tokio::io::duplex`], or
/// standard input and output), a sink and stream of messages, or one of
/// rmcp's transports. A client that goes away before completing the
/// handshake is a normal end, not an error.
pub async fn serve<S, St, T, E, A>(
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
    transport: T,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = match McpServer::new(dispatcher, options).serve(transport).await {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            tracing::debug!("the MCP client left before the handshake");
            return Ok(());
        }
        Err(error) => return Err(Error(format!("MCP handshake failed: {error}"))),
    };
    match running.waiting().await {
        Ok(QuitReason::JoinError(error)) | Err(error) => {
            Err(Error(format!("the MCP service failed: {error}")))
        }
        Ok(reason) => {
            tracing::debug!(?reason, "the MCP session ended");
            Ok(())
        }
    }
}

/// Serves the dispatcher's tools on standard input and output until the
/// client closes the connection (the usual way an MCP client runs a local
/// server: as a child process).
///
/// Standard output carries the protocol and nothing else: the server writes
/// no logs there, and the program must not either. Its `tracing` events go to
/// whatever subscriber the program installs, which must write to standard
/// error or a file.
pub async fn serve_stdio<S, St>(
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    serve(dispatcher, options, rmcp::transport::stdio()).await
}
