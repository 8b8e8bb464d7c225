//! MCP over streamable HTTP: an axum [`Router`] that serves a dispatcher's
//! tools at `/mcp`, each caller authenticated by a bearer token (see the
//! [crate docs](crate#streamable-http)).

use std::any::Any;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request};
use axum::http::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderValue, ORIGIN, RETRY_AFTER,
    WWW_AUTHENTICATE,
};
use axum::http::request::Parts;
use axum::http::uri::Authority;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse as _, Response};
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, GetMeta as _, JsonRpcMessage,
    JsonRpcNotification, JsonRpcRequest,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use toolcall_core::store::Store;
use toolcall_core::{Caller, Dispatcher, Principal};

use crate::frame::{self, INVALID_PARAMS, INVALID_REQUEST, Outcome, RawArguments};
use crate::server::Memory;
use crate::{Error, McpServer, Options};

#[cfg(feature = "oauth")]
mod gate;
#[cfg(feature = "oauth")]
mod oauth;
mod options;

#[cfg(feature = "oauth")]
pub use oauth::{Admit, CLOCK_SKEW, KEYS_MAX_AGE, KEYS_REFRESH, OAuth};
pub use options::{
    BODY_TIMEOUT, HttpOptions, MAX_HTTP_BODY_BYTES, MAX_SESSIONS_PER_CALLER,
    MAX_SESSIONS_PER_PRINCIPAL, MIN_TOKEN_LEN,
};
use options::{same, sha256};
pub use toolcall_listen::Limits;

/// The path the router serves MCP at.
pub const MCP_PATH: &str = "/mcp";

/// The longest protocol version a request may name (in `initialize`'s
/// `params.protocolVersion`, its `_meta`, or the `MCP-Protocol-Version`
/// header), in bytes; real ones are 10. A longer one is refused unrepeated.
const MAX_PROTOCOL_VERSION_BYTES: usize = 64;

/// The longest value of an `Mcp-*` header (the session id, the protocol
/// version, the method and name headers), in bytes; a longer one is refused
/// with `400`, unrepeated.
const MAX_MCP_HEADER_BYTES: usize = 1024;

/// The hosts a request may name in its `Host` header by default: the
/// loopback names, at any port.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// An origin or host as compared: lowercase scheme and host (no brackets),
/// and the port (the scheme's default when none is written).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

fn parse_origin(text: &str) -> Option<Origin> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = Authority::try_from(rest).ok()?;
    if authority.as_str().contains('@') {
        return None;
    }
    Some(Origin {
        scheme,
        host: bare_host(authority.host()),
        port: authority.port_u16().unwrap_or(default_port),
    })
}

fn bare_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// An allowed `Host`: a name, at any port or at one.
#[derive(Clone, Debug)]
struct AllowedHost {
    host: String,
    port: Option<u16>,
}

fn parse_allowed_host(text: &str) -> Option<AllowedHost> {
    let authority = Authority::try_from(text).ok()?;
    if authority.as_str().contains('@') {
        return None;
    }
    Some(AllowedHost {
        host: bare_host(authority.host()),
        port: authority.port_u16(),
    })
}

/// The servers' memories of one caller's principals, each principal's its
/// own, at most [`Memories::MAX`] (the oldest forgotten first).
#[cfg(feature = "oauth")]
#[derive(Default)]
struct Memories {
    by_principal: HashMap<toolcall_core::Principal, Arc<Memory>>,
    order: std::collections::VecDeque<toolcall_core::Principal>,
}

#[cfg(feature = "oauth")]
impl Memories {
    const MAX: usize = 4096;

    fn of(&mut self, principal: &toolcall_core::Principal) -> Arc<Memory> {
        if let Some(memory) = self.by_principal.get(principal) {
            return Arc::clone(memory);
        }
        if self.order.len() >= Self::MAX
            && let Some(oldest) = self.order.pop_front()
        {
            self.by_principal.remove(&oldest);
        }
        let memory = Arc::new(Memory::default());
        self.by_principal
            .insert(principal.clone(), Arc::clone(&memory));
        self.order.push_back(principal.clone());
        memory
    }
}

/// One caller's MCP service: its sessions are its own.
type Service<S, St> = StreamableHttpService<McpServer<S, St>, LocalSessionManager>;

/// One caller's way in: its service, the sessions it holds, and the lock
/// that opens them one at a time (so that no bound is ever passed).
struct Lane<S, St> {
    service: Service<S, St>,
    sessions: Arc<LocalSessionManager>,
    opening: tokio::sync::Mutex<()>,
    /// Under OAuth, whose each session is: the principal that opened it
    /// (written under `opening`, so that its bound is never passed either).
    owners: std::sync::Mutex<HashMap<String, Principal>>,
}

struct HttpState<S, St> {
    /// The callers' ways in, one per caller.
    services: Vec<Lane<S, St>>,
    /// The tokens, each with the index of its caller's service.
    tokens: Vec<([u8; 32], usize)>,
    /// The resource server's checks, when it is one.
    #[cfg(feature = "oauth")]
    oauth: Option<gate::Gate>,
    max_body_bytes: usize,
    body_timeout: Duration,
    max_sessions: usize,
    max_sessions_per_principal: usize,
    hosts: Vec<AllowedHost>,
    origins: Vec<Origin>,
}

/// An axum router serving the dispatcher's tools over MCP's streamable HTTP
/// transport at [`MCP_PATH`] (`/mcp`): `POST` for requests, `GET` for the
/// server's stream of a session, `DELETE` to end a session. Each session
/// (each request, for a client that uses none) is served by an
/// [`McpServer`], as a connection on standard input and output is: the same
/// pipeline and the same conversations (see the
/// [crate docs](crate#streamable-http)).
///
/// Errors: an allowed host or origin that cannot be read, and a token for a
/// caller the dispatcher does not know ([`Dispatcher::caller`]: its default
/// caller or one given to its builder's `callers`).
///
/// Serve it with [`serve`] or [`serve_with`], which give the router the
/// peer's address (without tokens, only a loopback peer is served) and hold
/// connections within [`Limits`]; or with
/// `axum::serve(listener, router.into_make_service_with_connect_info::<SocketAddr>())`,
/// which has no read timeouts nor bound on connections.
pub fn router<S, St>(
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
    http: HttpOptions,
) -> Result<Router, Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    let hosts = LOOPBACK_HOSTS
        .iter()
        .map(|host| AllowedHost {
            host: (*host).to_owned(),
            port: None,
        })
        .chain(
            http.allowed_hosts
                .iter()
                .map(|text| {
                    parse_allowed_host(text).ok_or_else(|| {
                        Error(format!(
                            "the allowed host {text:?} is not a host or host:port"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        )
        .collect();
    let origins = http
        .allowed_origins
        .iter()
        .map(|text| {
            parse_origin(text).ok_or_else(|| {
                Error(format!(
                    "the allowed origin {text:?} is not scheme://host[:port] (http or https)"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;

    #[allow(unused_mut)]
    let mut names = http.token_callers();
    #[cfg(feature = "oauth")]
    if let Some(oauth) = &http.oauth {
        if !http.tokens.is_empty() {
            return Err(Error(
                "both bearer tokens and an OAuth issuer are set: a server takes one or the \
                 other (drop the token file, or the issuer)"
                    .to_owned(),
            ));
        }
        names = gate::callers(oauth, dispatcher.default_caller().id());
    }
    let callers: Vec<Caller> = if names.is_empty() {
        vec![dispatcher.default_caller().clone()]
    } else {
        names
            .iter()
            .map(|&id| {
                dispatcher.caller(id).cloned().ok_or_else(|| {
                    Error(format!(
                        "a token or a caller rule names the caller {id:?}, which the dispatcher \
                         does not know (give it to the dispatcher's builder with `callers`)"
                    ))
                })
            })
            .collect::<Result<_, _>>()?
    };
    let index: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(at, name)| (*name, at))
        .collect();
    let tokens = http
        .tokens
        .iter()
        .map(|token| (token.digest, index[token.caller.as_str()]))
        .collect();
    #[cfg(feature = "oauth")]
    let oauth = http
        .oauth
        .clone()
        .map(|oauth| gate::Gate::new(oauth, &index, dispatcher.registry()))
        .transpose()?;

    // The checks of Host and Origin, and the body's bound, are this
    // router's, before rmcp reads anything; rmcp's bound stays as a second
    // one, above ours (the text it reads is what was sent, `{}` in place
    // of a call's arguments: a byte longer at most).
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(http.max_body_bytes.saturating_mul(2).saturating_add(4096));
    let services = callers
        .into_iter()
        .map(|caller| {
            let dispatcher = Arc::clone(&dispatcher);
            let options = options.clone();
            let memory = Arc::new(Memory::default());
            #[cfg(feature = "oauth")]
            let memories: Arc<std::sync::Mutex<Memories>> = Arc::default();
            let sessions = Arc::new(LocalSessionManager::default());
            let service = StreamableHttpService::new(
                move || {
                    // Under OAuth, the session's server is its principal's:
                    // every call it makes records who.
                    // Its memory of questions and named conversations is the
                    // principal's too.
                    #[cfg(feature = "oauth")]
                    let (caller, memory) = match gate::PRINCIPAL.try_with(Clone::clone) {
                        Ok(Some(principal)) => {
                            let memory = memories
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .of(&principal);
                            (caller.with_principal(principal), memory)
                        }
                        _ => (caller.clone(), Arc::clone(&memory)),
                    };
                    #[cfg(not(feature = "oauth"))]
                    let (caller, memory) = (caller.clone(), Arc::clone(&memory));
                    Ok(McpServer::new(Arc::clone(&dispatcher), options.clone())
                        .caller(caller)
                        .memory(memory))
                },
                Arc::clone(&sessions),
                config.clone(),
            );
            Lane {
                service,
                sessions,
                opening: tokio::sync::Mutex::new(()),
                owners: std::sync::Mutex::new(HashMap::new()),
            }
        })
        .collect();
    let state = Arc::new(HttpState {
        services,
        tokens,
        max_body_bytes: http.max_body_bytes,
        body_timeout: http.body_timeout,
        max_sessions: http.max_sessions_per_caller,
        max_sessions_per_principal: http.max_sessions_per_principal,
        hosts,
        origins,
        #[cfg(feature = "oauth")]
        oauth,
    });
    #[allow(unused_mut)]
    let mut router = Router::new();
    #[cfg(feature = "oauth")]
    if let Some(gate) = &state.oauth {
        router = gate::metadata_routes(router, gate, Arc::clone(&state));
    }
    Ok(router.route(
        MCP_PATH,
        axum::routing::any(move |request: Request| handle(Arc::clone(&state), request)),
    ))
}

/// Serves `router` on `listener` until the process ends, handing each
/// request its peer's address (which, without tokens, must be loopback),
/// with the default [`Limits`]: see [`serve_with`].
pub async fn serve(listener: tokio::net::TcpListener, router: Router) -> std::io::Result<()> {
    serve_with(listener, router, Limits::default()).await
}

/// Serves `router` on `listener` until the process ends: every connection
/// with `TCP_NODELAY` (a kept-alive client's small answers are not held
/// back for its delayed acknowledgement), a request's head read within
/// [`Limits::header_timeout`], at most [`Limits::max_connections`] open
/// (one more is answered `503`). HTTP/1.1, kept alive.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: Limits,
) -> std::io::Result<()> {
    toolcall_listen::serve(listener, router, limits).await;
    Ok(())
}

async fn handle<S, St>(state: Arc<HttpState<S, St>>, request: Request) -> Response
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    if let Err(refusal) = check_host(&state, &request) {
        return *refusal;
    }
    #[cfg(feature = "oauth")]
    if let Some(gate) = &state.oauth {
        return gate::handle(&state, gate, request).await;
    }
    let service = match service_of(&state, &request) {
        Ok(service) => service,
        Err(refusal) => return *refusal,
    };
    serve_request(&state, service, request, &|_| None, None).await
}

/// A request, once its caller is known: read within the bounds, guarded,
/// `allow`ed (it sees the tool a `tools/call` names, and may answer in its
/// place), and handed to the caller's MCP service. Under OAuth, `principal`
/// is the token's: a session it opens is counted and recorded as its.
async fn serve_request<S, St>(
    state: &HttpState<S, St>,
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
    let read = tokio::time::timeout(
        state.body_timeout,
        read_body(&parts.headers, body, state.max_body_bytes),
    );
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(refusal)) => return refusal,
        Err(_) => {
            tracing::info!(timeout = ?state.body_timeout, "refused a body that came too slowly");
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the body did not arrive in time",
            );
        }
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
    if live.len() >= state.max_sessions {
        tracing::warn!(
            open = live.len(),
            limit = state.max_sessions,
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
        if held >= state.max_sessions_per_principal {
            tracing::warn!(
                %principal,
                open = held,
                limit = state.max_sessions_per_principal,
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

/// `429` to an `initialize` over a bound of sessions.
fn too_many_sessions(message: &'static str) -> Response {
    let mut response = refuse(StatusCode::TOO_MANY_REQUESTS, message);
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("60"));
    response
}

impl<S, St> Lane<S, St>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    /// The request, handed to rmcp. Its future is boxed: it is large, and
    /// the handler's future (moved whole by axum at each request) then
    /// holds a pointer to it, not all of it.
    async fn handle(&self, request: Request) -> Response {
        Box::pin(self.service.handle(request)).await.map(Body::new)
    }

    /// `DELETE`, as the MCP SDKs read it: a session of this caller's is
    /// ended and answered 204 (rmcp's 202 is a failure to Python's SDK,
    /// which takes 200 and 204); any other session id is 404, as any
    /// request in a session that is gone is, and rmcp's 202 for an id it
    /// never issued would tell a client its session ended when another
    /// caller's, or none, was named. Without a session id, rmcp answers.
    async fn end(&self, request: Request) -> Response {
        let Some(id) = request.headers().get(SESSION_ID) else {
            return self.handle(request).await;
        };
        let known = match id.to_str() {
            Ok(id) => self.sessions.sessions.read().await.contains_key(id),
            Err(_) => false,
        };
        if !known {
            return refuse(StatusCode::NOT_FOUND, "Not Found: no such session");
        }
        let response = self.handle(request).await;
        if response.status().is_success() {
            StatusCode::NO_CONTENT.into_response()
        } else {
            response
        }
    }
}

/// The header that names a request's session.
const SESSION_ID: &str = "mcp-session-id";

/// Against DNS rebinding: the host the request names, and the browser
/// origin it comes from, checked before anything else.
fn check_host<S, St>(state: &HttpState<S, St>, request: &Request) -> Result<(), Box<Response>> {
    let Some(host) = request_host(request) else {
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the Host header is not allowed",
        )));
    };
    if !state.hosts.iter().any(|allowed| {
        allowed.host == host.host && allowed.port.is_none_or(|port| Some(port) == host.port)
    }) {
        tracing::warn!("refused a request naming a host that is not allowed");
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the Host header is not allowed",
        )));
    }
    if let Some(origin) = request.headers().get(ORIGIN)
        && !origin_allowed(&state.origins, &host, origin)
    {
        tracing::warn!("refused a request from a browser origin that is not allowed");
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the Origin is not allowed",
        )));
    }
    Ok(())
}

/// Who calls: the service of a bearer token's caller, or (with no tokens)
/// the default caller's, from this machine only.
fn service_of<'a, S, St>(
    state: &'a HttpState<S, St>,
    request: &Request,
) -> Result<&'a Lane<S, St>, Box<Response>> {
    if !state.tokens.is_empty() {
        let Some(at) = bearer(request.headers()).and_then(|token| caller_of(&state.tokens, token))
        else {
            tracing::info!("refused a request without a valid bearer token");
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: a valid `Authorization: Bearer` token is required",
            );
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Err(Box::new(response));
        };
        return Ok(&state.services[at]);
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| *peer);
    match peer {
        Some(peer) if peer.ip().is_loopback() => return Ok(&state.services[0]),
        Some(_) => {
            tracing::warn!("refused a request from another machine: no tokens are set");
        }
        None => {
            tracing::error!(
                "no peer address: serve the router with connect info \
                 (toolcall_mcp::http::serve), or set tokens"
            );
        }
    }
    Err(Box::new(refuse(
        StatusCode::FORBIDDEN,
        "Forbidden: without tokens, only clients on this machine are served",
    )))
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

/// What a request asks, as far as its caller's grants go.
#[cfg_attr(not(feature = "oauth"), allow(dead_code))]
enum Asks {
    /// A call of this tool (`tools/call`).
    Tool(String),
    /// A durable task's state or answer (`tasks/*`): a call waiting for a
    /// person, carried out when one has decided.
    Task,
    /// Anything else (`initialize`, `tools/list`, `ping`, ...).
    Other,
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

/// The request's host, from `Host` (or the URI's authority, in HTTP/2).
fn request_host(request: &Request) -> Option<AllowedHost> {
    match request.headers().get(HOST) {
        Some(host) => parse_allowed_host(host.to_str().ok()?),
        None => {
            let authority = request.uri().authority()?;
            Some(AllowedHost {
                host: bare_host(authority.host()),
                port: authority.port_u16(),
            })
        }
    }
}

/// Whether a request naming `host` may come from the browser origin
/// `origin`: one allowed, or the server's own on a loopback host (any
/// loopback name, the port of `host`).
fn origin_allowed(allowed: &[Origin], host: &AllowedHost, origin: &HeaderValue) -> bool {
    let Some(origin) = origin.to_str().ok().and_then(parse_origin) else {
        return false;
    };
    if allowed.contains(&origin) {
        return true;
    }
    let loopback = |name: &str| LOOPBACK_HOSTS.contains(&name);
    origin.scheme == "http"
        && loopback(&origin.host)
        && loopback(&host.host)
        && Some(origin.port) == Some(host.port.unwrap_or(80))
}

/// The token of an `Authorization: Bearer` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// The caller (its service's index) whose token `token` is. Every token is
/// compared, each in constant time, so the time taken says nothing about
/// the token sent nor which caller it matched.
fn caller_of(tokens: &[([u8; 32], usize)], token: &str) -> Option<usize> {
    let sent = sha256(token.as_bytes());
    let mut found = None;
    for (digest, at) in tokens {
        if same(digest, &sent) && found.is_none() {
            found = Some(*at);
        }
    }
    found
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

fn refuse(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

fn too_large(max: usize) -> Response {
    tracing::warn!(limit = max, "refused a request body over the limit");
    let answer = frame::error_line(
        Value::Null,
        INVALID_REQUEST,
        &format!("Invalid request: the body is over the {max} bytes allowed"),
    );
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        [(CONTENT_TYPE, "application/json")],
        answer,
    )
        .into_response()
}

/// A JSON-RPC error the router writes itself: `400` for a body that is
/// not JSON or not a request, `200` for a request whose params are wrong
/// (as rmcp answers those).
fn jsonrpc_error_response(answer: Vec<u8>) -> Response {
    let code = serde_json::from_slice::<Value>(&answer)
        .ok()
        .and_then(|value| value.pointer("/error/code").and_then(Value::as_i64));
    let status = match code {
        Some(code) if code == i64::from(INVALID_PARAMS) => StatusCode::OK,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, [(CONTENT_TYPE, "application/json")], answer).into_response()
}
