//! What a `tools/call` brings besides its tool: its arguments as sent,
//! what its `_meta` asks (a dry run, a named conversation), the trace it
//! continues, and what the client can show a person.

use std::borrow::Cow;

use rmcp::model::{CallToolRequestParams, ClientCapabilities};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use toolcall_core::__private::echo::{MAX_NAME_ECHO, cut};
use toolcall_core::{Code, ToolResult};

use crate::frame::RawArguments;
use crate::{CONVERSATION_META, MAX_CONVERSATION_NAME_BYTES};

/// The key in a `tools/call` request's `_meta` that asks for a dry run
/// ([`Call::dry_run`](toolcall_core::Call::dry_run)) when it is `true`.
const DRY_RUN_META: &str = "toolcall/dry_run";

/// The server's span of one `tools/call`, as OpenTelemetry's MCP
/// conventions name it: `tools/call {tool}`, kind server, with the method,
/// the JSON-RPC request id, the protocol version the client speaks and the
/// W3C trace context the client sent in `_meta` (`traceparent`, bounded),
/// which an OpenTelemetry layer continues. The pipeline's `execute_tool`
/// span is its child. Its fields are evaluated only when a subscriber wants
/// it.
pub(super) fn call_span(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> tracing::Span {
    let tool = cut(request.name.as_ref(), MAX_NAME_ECHO);
    let meta_text = |key: &str| {
        context
            .meta
            .get(key)
            .or_else(|| request.meta.as_ref().and_then(|meta| meta.get(key)))
            .and_then(Value::as_str)
            .map(|text| cut(text, 256).into_owned())
    };
    tracing::info_span!(
        "tools/call",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "server",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = %tool,
        jsonrpc.request.id = %context.id,
        mcp.protocol.version = context
            .peer
            .peer_info()
            .map(|info| info.protocol_version.to_string()),
        traceparent = meta_text("traceparent"),
        tracestate = meta_text("tracestate"),
    )
}

/// The arguments of a call as JSON text, for the pipeline to parse
/// ([`Arguments::Raw`]): exactly what the client sent when the call came
/// through a [`FrameGuard`](crate::FrameGuard), else (a transport that
/// hands rmcp parsed messages) rmcp's map written out again. No arguments
/// (or `null`) are `{}`.
pub(super) fn raw_arguments<'a>(
    request: &'a CallToolRequestParams,
    context: &'a RequestContext<RoleServer>,
) -> Cow<'a, str> {
    let sent = context.extensions.get::<RawArguments>();
    // Over HTTP, the router keeps them in the request's parts.
    #[cfg(feature = "http")]
    let sent = sent.or_else(|| {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<RawArguments>())
    });
    match sent {
        Some(RawArguments(raw)) => Cow::Borrowed(raw.as_deref().unwrap_or("{}")),
        None => match &request.arguments {
            Some(arguments) => Cow::Owned(Value::Object(arguments.clone()).to_string()),
            None => Cow::Borrowed("{}"),
        },
    }
}

/// Whether the client can show a person a form (an empty elicitation
/// capability means forms, as before modes existed).
pub(super) fn elicits_forms(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .elicitation
        .as_ref()
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// Whether a `tools/call` asks for a dry run: `"toolcall/dry_run": true`
/// in its `_meta` (which rmcp hands over in the request's context; the
/// params' own field is read too, for a request built in process).
pub(super) fn asks_dry_run(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> bool {
    let flag =
        |meta: &serde_json::Map<String, Value>| meta.get(DRY_RUN_META) == Some(&Value::Bool(true));
    flag(&context.meta) || request.meta.as_ref().is_some_and(|meta| flag(meta))
}

/// The conversation a `tools/call` names in its `_meta`
/// ([`CONVERSATION_META`], in the request's context as rmcp hands it over,
/// or the params' own field for a request built in process), if any; a
/// value that is not a usable name is the problem, in words.
pub(super) fn named_conversation<'a>(
    request: &'a CallToolRequestParams,
    context: &'a RequestContext<RoleServer>,
) -> Result<Option<&'a str>, String> {
    let value = context.meta.get(CONVERSATION_META).or_else(|| {
        request
            .meta
            .as_ref()
            .and_then(|meta| meta.get(CONVERSATION_META))
    });
    let name = match value {
        None => return Ok(None),
        Some(Value::String(name)) => name.as_str(),
        Some(other) => return Err(format!("is {}, not a string", crate::frame::kind(other))),
    };
    if name.is_empty() {
        return Err("is empty".to_owned());
    }
    if name.len() > MAX_CONVERSATION_NAME_BYTES {
        return Err(format!(
            "is {} bytes long, over the {MAX_CONVERSATION_NAME_BYTES} allowed",
            name.len()
        ));
    }
    if name.chars().any(char::is_control) {
        return Err("contains a control character".to_owned());
    }
    Ok(Some(name))
}

/// The answer to a call whose `_meta` names a conversation badly: nothing
/// ran (the pipeline never saw the call, so no audit record and no step).
pub(super) fn bad_conversation(tool: &str, problem: &str) -> ToolResult {
    ToolResult::failure(
        tool.to_owned(),
        Code::InvalidArguments,
        format!(
            "Invalid request metadata: `_meta.\"{CONVERSATION_META}\"` {problem}. It names the \
             conversation the call runs in: a non-empty string of at most \
             {MAX_CONVERSATION_NAME_BYTES} bytes with no control characters. Nothing ran; send \
             the call again with a valid name, or without it."
        ),
    )
    .with_data("meta", CONVERSATION_META)
    .with_data("problem", problem)
}
