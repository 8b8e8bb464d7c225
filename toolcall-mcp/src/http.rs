//! MCP over streamable HTTP: an axum [`Router`] that serves a dispatcher's
//! tools at `/mcp`, each caller authenticated by a bearer token (see the
//! [crate docs](crate#streamable-http)).

use std::any::Any;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;
use axum::http::header::{HeaderValue, WWW_AUTHENTICATE};
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use toolcall_core::store::Store;
use toolcall_core::{Caller, Dispatcher};

use crate::server::Memory;
use crate::{Error, McpServer, Options};

mod answers;
#[cfg(feature = "oauth")]
mod gate;
mod hosts;
mod lane;
#[cfg(feature = "oauth")]
mod oauth;
mod options;
mod request;
mod tokens;

use answers::refuse;
use hosts::{AllowedHost, Origin, check_host};
use lane::Lane;
#[cfg(feature = "oauth")]
pub use oauth::{Admit, CLOCK_SKEW, KEYS_MAX_AGE, KEYS_REFRESH, OAuth};
pub use options::{
    BODY_TIMEOUT, HttpOptions, MAX_HTTP_BODY_BYTES, MAX_SESSIONS_PER_CALLER,
    MAX_SESSIONS_PER_PRINCIPAL, MIN_TOKEN_LEN,
};
use request::{Bounds, serve_request};
use tokens::{bearer, caller_of};
pub use toolcall_listen::Limits;

/// The path the router serves MCP at.
pub const MCP_PATH: &str = "/mcp";

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

struct HttpState<S, St> {
    /// The callers' ways in, one per caller.
    services: Vec<Lane<S, St>>,
    /// The tokens, each with the index of its caller's service.
    tokens: Vec<([u8; 32], usize)>,
    /// The resource server's checks, when it is one.
    #[cfg(feature = "oauth")]
    oauth: Option<gate::Gate>,
    bounds: Bounds,
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
    let hosts = hosts::allowed_hosts(&http.allowed_hosts)?;
    let origins = hosts::allowed_origins(&http.allowed_origins)?;
    let (names, callers) = callers_served(&dispatcher, &http)?;
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
        .map(|caller| lane(&dispatcher, &options, caller, &config))
        .collect();
    let state = Arc::new(HttpState {
        services,
        tokens,
        bounds: Bounds {
            max_body_bytes: http.max_body_bytes,
            body_timeout: http.body_timeout,
            max_sessions: http.max_sessions_per_caller,
            max_sessions_per_principal: http.max_sessions_per_principal,
        },
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

/// The callers the router serves, by name (the tokens', or the OAuth
/// rules'; none: the dispatcher's default caller alone), and each caller.
fn callers_served<'a, S, St>(
    dispatcher: &'a Dispatcher<S, St>,
    http: &'a HttpOptions,
) -> Result<(Vec<&'a str>, Vec<Caller>), Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
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
    Ok((names, callers))
}

/// One caller's way in: its MCP service, each session of which is served
/// by an [`McpServer`] of the caller (under OAuth, of the session's
/// principal, with the principal's memory).
fn lane<S, St>(
    dispatcher: &Arc<Dispatcher<S, St>>,
    options: &Options,
    caller: Caller,
    config: &StreamableHttpServerConfig,
) -> Lane<S, St>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    let dispatcher = Arc::clone(dispatcher);
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
    if let Err(refusal) = check_host(&state.hosts, &state.origins, &request) {
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
    serve_request(&state.bounds, service, request, &|_| None, None).await
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
