//! `mcp --http ADDR`: the MCP server over streamable HTTP
//! (`toolcall_mcp::http`), its tokens, hosts and origins from the command
//! line.

use std::any::Any;
use std::net::SocketAddr;
use std::sync::Arc;

use toolcall_core::Dispatcher;
use toolcall_core::store::Store;
use toolcall_mcp::Options;
#[cfg(feature = "oauth")]
use toolcall_mcp::http::OAuth;
use toolcall_mcp::http::{HttpOptions, Limits, MCP_PATH, router};

use crate::{Error, McpArgs};

/// The server's options from `args`, for a server bound to `addr`: the
/// token file's tokens, the hosts and origins allowed, and the bound
/// address's own host when it is not loopback. An address other than
/// loopback without a token file is refused.
pub(crate) fn http_options(
    program: &str,
    args: &McpArgs,
    addr: SocketAddr,
) -> Result<HttpOptions, Error> {
    let ip = addr.ip();
    if !ip.is_loopback() && args.token_file.is_none() && args.oauth_issuer.is_none() {
        return Err(Error::Input(format!(
            "--http {addr} is not a loopback address: serving other machines needs \
             --token-file (each request then needs its caller's token) or --oauth-issuer \
             (an access token from an authorization server); or bind to 127.0.0.1 and put \
             a TLS proxy in front"
        )));
    }
    let mut http = HttpOptions::new();
    #[cfg(feature = "oauth")]
    if let Some(issuer) = &args.oauth_issuer {
        http = http.oauth(oauth(program, issuer, args)?);
    }
    #[cfg(not(feature = "oauth"))]
    let _ = program;
    if let Some(path) = &args.token_file {
        http = http
            .token_file(path)
            .map_err(|e| Error::Input(format!("--token-file {e}")))?;
    }
    for host in &args.allow_host {
        http = http.allow_host(host.clone());
    }
    for origin in &args.allow_origin {
        http = http.allow_origin(origin.clone());
    }
    if let Some(max) = args.max_sessions_per_caller {
        http = http.max_sessions_per_caller(max as usize);
    }
    // Clients of a bind to a real address name it in `Host`; a bind to
    // every address (0.0.0.0, [::]) is reached by names only `--allow-host`
    // can give.
    if !ip.is_loopback() && !ip.is_unspecified() {
        http = http.allow_host(match addr {
            SocketAddr::V4(v4) => v4.ip().to_string(),
            SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
        });
    }
    Ok(http)
}

/// The resource server's settings from `args`: the issuer, the audience,
/// the scopes (`PROGRAM.read`, `PROGRAM.write` unless given), the caller
/// rules and the keys' refresh.
#[cfg(feature = "oauth")]
fn oauth(program: &str, issuer: &str, args: &McpArgs) -> Result<OAuth, Error> {
    let audience = args.oauth_audience.as_deref().unwrap_or_default();
    let mut oauth = OAuth::new(issuer, audience)
        .map_err(|e| Error::Input(format!("--oauth-issuer/--oauth-audience: {e}")))?
        .scopes(
            args.oauth_read_scope
                .clone()
                .unwrap_or_else(|| format!("{program}.read")),
            args.oauth_write_scope
                .clone()
                .unwrap_or_else(|| format!("{program}.write")),
        );
    for rule in &args.oauth_caller {
        oauth = oauth
            .caller_rule(rule)
            .map_err(|e| Error::Input(format!("--oauth-caller: {e}")))?;
    }
    if let Some(seconds) = args.oauth_keys_refresh {
        oauth = oauth.keys_refresh(std::time::Duration::from_secs(u64::from(seconds)));
    }
    Ok(oauth)
}

/// Serves the dispatcher's tools over streamable HTTP on `addr` until the
/// listener fails. Every check (the token file, its callers, the hosts and
/// origins) is made before binding; the URL served, with the port bound, is
/// printed on standard error once listening.
pub(crate) async fn serve<S, St>(
    program: &str,
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
    args: &McpArgs,
    addr: SocketAddr,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    let http = http_options(program, args, addr)?;
    let callers: Vec<String> = http
        .token_callers()
        .into_iter()
        .map(str::to_owned)
        .collect();
    if let Some(unknown) = callers.iter().find(|id| dispatcher.caller(id).is_none()) {
        let path = args.token_file.as_deref().unwrap_or_else(|| "".as_ref());
        return Err(Error::Input(format!(
            "--token-file {}: the caller `{unknown}` is not one this application knows \
             (`{}`, the caller this command runs as, or one its code gives the dispatcher)",
            path.display(),
            dispatcher.default_caller().id()
        )));
    }
    let default = dispatcher.default_caller().id().to_owned();
    let app =
        router(dispatcher, options, http).map_err(|e| Error::Input(format!("--http: {e}")))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(Error::io(format!("listen on {addr}")))?;
    let bound = listener
        .local_addr()
        .map_err(Error::io(format!("read the address bound for {addr}")))?;
    let who = if let Some(issuer) = &args.oauth_issuer {
        format!(
            "OAuth: access tokens of {issuer} for {}",
            args.oauth_audience.as_deref().unwrap_or_default()
        )
    } else if callers.is_empty() {
        format!("no tokens: clients on this machine only, as the caller `{default}`")
    } else {
        format!("tokens for: {}", callers.join(", "))
    };
    eprintln!("MCP over streamable HTTP: http://{bound}{MCP_PATH} ({who})");
    let mut limits = Limits::new();
    if let Some(max) = args.max_connections {
        limits = limits.max_connections(max as usize);
    }
    toolcall_mcp::http::serve_with(listener, app, limits)
        .await
        .map_err(Error::io(format!("serve MCP on {bound}")))
}
