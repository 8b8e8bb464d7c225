//! A request, once its caller is known: its headers and body read within
//! the bounds and through the frame's guard, and handed to its caller's
//! MCP service.

use std::any::Any;
use std::borrow::Cow;
use std::collections::HashSet;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::{CONTENT_LENGTH, HeaderValue};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta as _, JsonRpcMessage,
    JsonRpcNotification, JsonRpcRequest,
};
use serde_json::Value;
use toolcall_core::Principal;
use toolcall_core::store::Store;

use super::answers::{jsonrpc_error_response, refuse, too_large, too_many_sessions};
use super::lane::{Lane, SESSION_ID};
use crate::frame::{self, INVALID_PARAMS, INVALID_REQUEST, Outcome, RawArguments};

/// The longest protocol version a request may name (in `initialize`'s
/// `params.protocolVersion`, its `_meta`, or the `MCP-Protocol-Version`
/// header), in bytes; real ones are 10. A longer one is refused unrepeated.
const MAX_PROTOCOL_VERSION_BYTES: usize = 64;

/// The longest value of an `Mcp-*` header (the session id, the protocol
/// version, the method and name headers), in bytes; a longer one is refused
/// with `400`, unrepeated.
const MAX_MCP_HEADER_BYTES: usize = 1024;

/// The bounds a request is served within.
pub(super) struct Bounds {
    pub(super) max_body_bytes: usize,
    pub(super) body_timeout: Duration,
    pub(super) max_sessions: usize,
    pub(super) max_sessions_per_principal: usize,
}

/// What a request asks, as far as its caller's grants go.
#[cfg_attr(not(feature = "oauth"), allow(dead_code))]
pub(super) enum Asks {
    /// A call of this tool (`tools/call`).
    Tool(String),
    /// A durable task's state or answer (`tasks/*`): a call waiting for a
    /// person, carried out when one has decided.
    Task,
    /// Anything else (`initialize`, `tools/list`, `ping`, ...).
    Other,
}

/// A request, once its caller is known: read within the bounds, guarded,
/// `allow`ed (it sees the tool a `tools/call` names, and may answer in its
/// place), and handed to the caller's MCP service. Under OAuth, `principal`
/// is the token's: a session it opens is counted and recorded as its.
pub(super) async fn serve_request<S, St>(
    bounds: &Bounds,
    service: &Lane<S, St>,
    request: Request,
    allow: &(dyn Fn(&Asks) -> Option<Response> + Sync),
    principal: Option<&Principal>,
) -> Response
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    if let Err(refusal) = check_mcp_headers(request.headers()) {
        return *refusal;
    }
    if request.method() == Method::DELETE {
        return service.end(request).await;
    }
    if request.method() != Method::POST {
        return service.handle(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_in_time(bounds, &parts.headers, body).await {
        Ok(bytes) => bytes,
        Err(refusal) => return refusal,
    };
    let opens = !parts.headers.contains_key(SESSION_ID);
    let (request, initialize) = match guarded(parts, &bytes) {
        Ok((request, initialize, asks)) => match allow(&asks) {
            Some(refusal) => return refusal,
            None => (request, initialize),
        },
        Err(answer) => return *answer,
    };
    if !(initialize && opens) {
        return service.handle(request).await;
    }
    open_session(bounds, service, request, principal).await
}

/// The body of a `POST`, read within the bounds: in time, and no longer
/// than allowed.
async fn read_in_time(bounds: &Bounds, headers: &HeaderMap, body: Body) -> Result<Bytes, Response> {
    let read = tokio::time::timeout(
        bounds.body_timeout,
        read_body(headers, body, bounds.max_body_bytes),
    );
    match read.await {
        Ok(read) => read,
        Err(_) => {
            tracing::info!(timeout = ?bounds.body_timeout, "refused a body that came too slowly");
            Err(refuse(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the body did not arrive in time",
            ))
        }
    }
}

/// An `initialize` that opens a session, within its caller's bound of
/// sessions and, under OAuth, its principal's: the session it opens is
/// recorded as the principal's.
async fn open_session<S, St>(
    bounds: &Bounds,
    service: &Lane<S, St>,
    request: Request,
    principal: Option<&Principal>,
) -> Response
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    // An `initialize` that opens a session: one at a time per caller, so
    // that two at once cannot both pass a bound.
    let _opening = service.opening.lock().await;
    let live: HashSet<String> = service
        .sessions
        .sessions
        .read()
        .await
        .keys()
        .map(ToString::to_string)
        .collect();
    if live.len() >= bounds.max_sessions {
        tracing::warn!(
            open = live.len(),
            limit = bounds.max_sessions,
            "refused a session over the caller's bound"
        );
        return too_many_sessions(
            "Too Many Requests: this caller has as many sessions open as allowed; \
             end one (DELETE with its Mcp-Session-Id) or wait for one to idle out",
        );
    }
    let Some(principal) = principal else {
        return service.handle(request).await;
    };
    {
        let mut owners = service.owners.lock().unwrap_or_else(|e| e.into_inner());
        // Sessions ended or idled out are no one's any more.
        owners.retain(|id, _| live.contains(id));
        // Counted by issuer and subject: a person signing in through many
        // clients (registered at will, where the issuer allows it) is one.
        let held = owners
            .values()
            .filter(|owner| owner.issuer == principal.issuer && owner.subject == principal.subject)
            .count();
        if held >= bounds.max_sessions_per_principal {
            tracing::warn!(
                %principal,
                open = held,
                limit = bounds.max_sessions_per_principal,
                "refused a session over the principal's bound"
            );
            return too_many_sessions(
                "Too Many Requests: this token's subject has as many sessions open as \
                 allowed; end one (DELETE with its Mcp-Session-Id) or wait for one to idle out",
            );
        }
    }
    let response = service.handle(request).await;
    if let Some(id) = response
        .headers()
        .get(SESSION_ID)
        .and_then(|id| id.to_str().ok())
    {
        service
            .owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned(), principal.clone());
    }
    response
}

/// rmcp repeats some headers in its errors: an `Mcp-*` header, or the
/// protocol version, too long is refused.
fn check_mcp_headers(headers: &HeaderMap) -> Result<(), Box<Response>> {
    for (name, value) in headers {
        if name.as_str().starts_with("mcp-") && value.len() > MAX_MCP_HEADER_BYTES {
            return Err(Box::new(refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request: an Mcp-* header is too long",
            )));
        }
        if name.as_str() == "mcp-protocol-version" && value.len() > MAX_PROTOCOL_VERSION_BYTES {
            return Err(Box::new(refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request: the MCP-Protocol-Version header is too long",
            )));
        }
    }
    Ok(())
}

/// The body of a `POST`, at most `max` bytes: a declared `Content-Length`
/// over it is refused unread, a chunked body is read up to it.
async fn read_body(headers: &HeaderMap, body: Body, max: usize) -> Result<Bytes, Response> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        return Err(too_large(max));
    }
    axum::body::to_bytes(body, max).await.map_err(|error| {
        // The bound, found by a body without a `Content-Length` (chunked).
        let over = std::iter::successors(
            Some(&error as &(dyn std::error::Error + 'static)),
            |error| error.source(),
        )
        .any(|error| error.to_string().contains("length limit exceeded"));
        if over {
            return too_large(max);
        }
        tracing::debug!(%error, "could not read a request body");
        refuse(
            StatusCode::BAD_REQUEST,
            "Bad Request: the body could not be read",
        )
    })
}

/// The request for rmcp, from a `POST`'s head and body, read through the
/// frame's guard: the body as the guard read it (without a byte order mark,
/// `{}` in place of a call's arguments: rmcp reads the message the guard
/// read), the call's arguments as sent beside it; or the answer to a body
/// the guard (or the bound on protocol versions) refuses.
/// Also says whether the message is an `initialize`, and what it asks.
fn guarded(mut parts: Parts, bytes: &Bytes) -> Result<(Request, bool, Asks), Box<Response>> {
    let (outcome, text) = frame::read_text(bytes);
    let mut message = match outcome {
        Outcome::Message(message) => message,
        Outcome::Answer(answer) => return Err(Box::new(jsonrpc_error_response(answer))),
        Outcome::Drop(what) => {
            tracing::debug!(what, "an unreadable body");
            return Err(Box::new(jsonrpc_error_response(frame::error_line(
                Value::Null,
                INVALID_REQUEST,
                &format!("Invalid request: {what}"),
            ))));
        }
    };
    if let Some(problem) = long_protocol_version(&message) {
        let id = match message.as_ref() {
            JsonRpcMessage::Request(request) => request.id.clone().into_json_value(),
            _ => Value::Null,
        };
        return Err(Box::new(jsonrpc_error_response(frame::error_line(
            id,
            INVALID_PARAMS,
            problem,
        ))));
    }
    let initialize = matches!(
        message.as_ref(),
        JsonRpcMessage::Request(JsonRpcRequest {
            request: ClientRequest::InitializeRequest(_),
            ..
        })
    );
    // The call's arguments as sent travel beside the request, where no
    // client can put anything; rmcp reads `{}` in their place.
    let mut asks = Asks::Other;
    if let JsonRpcMessage::Request(JsonRpcRequest { request, .. }) = message.as_mut() {
        if request.method().starts_with("tasks/") {
            asks = Asks::Task;
        }
        if let ClientRequest::CallToolRequest(call) = request {
            asks = Asks::Tool(call.params.name.to_string());
            if let Some(raw) = call.extensions.remove::<RawArguments>() {
                parts.extensions.insert(raw);
            }
        }
    }
    let body = match text {
        Some(Cow::Borrowed(text)) => bytes.slice_ref(text.as_bytes()),
        Some(Cow::Owned(text)) => Bytes::from(text),
        None => {
            tracing::warn!("the guard read a message without its text");
            return Err(Box::new(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the request could not be handled",
            )));
        }
    };
    parts
        .headers
        .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    Ok((
        Request::from_parts(parts, Body::from(body)),
        initialize,
        asks,
    ))
}

/// What is wrong with a protocol version the message names, if it is too
/// long to be one (rmcp's errors would repeat it): `initialize`'s
/// `params.protocolVersion`, or the protocol version of its `params._meta`
/// (which rmcp keeps in the message's extensions; a method it does not know
/// keeps its `params` as sent).
fn long_protocol_version(message: &ClientJsonRpcMessage) -> Option<&'static str> {
    const META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
    let long = |value: Option<&Value>| {
        value
            .and_then(Value::as_str)
            .is_some_and(|text| text.len() > MAX_PROTOCOL_VERSION_BYTES)
    };
    let (version, meta, params) = match message {
        JsonRpcMessage::Request(JsonRpcRequest { request, .. }) => (
            match request {
                ClientRequest::InitializeRequest(initialize) => {
                    Some(initialize.params.protocol_version.as_str())
                }
                _ => None,
            },
            request.get_meta().get(META_KEY),
            match request {
                ClientRequest::CustomRequest(custom) => custom.params.as_ref(),
                _ => None,
            },
        ),
        JsonRpcMessage::Notification(JsonRpcNotification { notification, .. }) => (
            None,
            notification.get_meta().get(META_KEY),
            match notification {
                ClientNotification::CustomNotification(custom) => custom.params.as_ref(),
                _ => None,
            },
        ),
        _ => return None,
    };
    if version.is_some_and(|text| text.len() > MAX_PROTOCOL_VERSION_BYTES)
        || long(params.and_then(|params| params.get("protocolVersion")))
    {
        return Some("Invalid params: params.protocolVersion is too long to be a protocol version");
    }
    if long(meta)
        || long(
            params
                .and_then(|params| params.get("_meta"))
                .and_then(|meta| meta.get(META_KEY)),
        )
    {
        return Some(
            "Invalid params: the _meta protocolVersion is too long to be a protocol version",
        );
    }
    None
}
