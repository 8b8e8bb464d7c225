//! rmcp 3.11's direct route: a `#[tool_router]` server with the tools
//! `get_order` and `refund_order` (`#[tool]` methods taking
//! `Parameters<Args>` and answering `Json<View>`), called through
//! `ToolRouter::call` with no transport.
//!
//! Per call, measured: the argument text parsed into a `JsonObject` (what
//! rmcp's transport does when it reads a `tools/call` frame; rmcp's entry
//! takes the parsed map), a `CallToolRequestParams`, a `RequestContext`
//! (request id, a clone of the peer handle, a fresh cancellation token) and
//! a `ToolCallContext`, then `ToolRouter::call`: the route's lookup, the
//! boxed handler future, `serde_json::from_value` of the map into the
//! strict struct, the tool's body (`domain`), the answer as a `Value`
//! (`structuredContent`) and as its text (`content`).
//!
//! Not measured: the JSON-RPC frame around the arguments and writing the
//! response. The peer handle comes from a service started once per run on
//! an in-memory duplex (`serve_directly`); rmcp offers no other way to make
//! one, and the calls never touch it.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, JsonObject, NumberOrString, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RoleServer, RunningService, serve_directly};
use rmcp::{Json, ServerHandler, ServiceExt as _, tool, tool_handler, tool_router};

use crate::domain::{self, GetOrderArgs, OrderView, Refund, RefundOrderArgs, Shop};

/// The shop's MCP server.
#[derive(Clone)]
pub struct ShopServer {
    shop: Arc<Shop>,
    /// The orders example's shop in a database, when served with `--shop`:
    /// `get_order` then reads the order there, as `orders mcp --http
    /// --store` does.
    stored: Option<Arc<orders::Shop>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl ShopServer {
    /// A server over `shop`.
    pub fn new(shop: Arc<Shop>) -> Self {
        ShopServer {
            shop,
            stored: None,
            tool_router: Self::tool_router(),
        }
    }

    /// A server whose `get_order` reads the orders example's shop `stored`.
    pub fn over_stored(shop: Arc<Shop>, stored: Arc<orders::Shop>) -> Self {
        ShopServer {
            stored: Some(stored),
            ..ShopServer::new(shop)
        }
    }

    /// Read one order: total, amount already refunded and currency. No side effects.
    #[tool]
    async fn get_order(
        &self,
        Parameters(args): Parameters<GetOrderArgs>,
    ) -> Result<Json<OrderView>, String> {
        if let Some(stored) = &self.stored {
            return domain::get_stored_order(stored, args)
                .await
                .map(Json)
                .map_err(|rejection| rejection.to_string());
        }
        domain::get_order(&self.shop, args)
            .map(Json)
            .map_err(|rejection| rejection.to_string())
    }

    /// Refund part or all of an order. Call get_order first. Amount in cents, in the order currency.
    #[tool]
    async fn refund_order(
        &self,
        Parameters(args): Parameters<RefundOrderArgs>,
    ) -> Result<Json<Refund>, String> {
        domain::refund_order(&self.shop, args)
            .map(Json)
            .map_err(|rejection| rejection.to_string())
    }
}

/// The same server as an MCP server of its own, for a transport to serve.
#[tool_handler]
impl ServerHandler for ShopServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// Serves the shop's server over standard input and output until the
/// client goes, on a current-thread runtime as `orders mcp` does: what
/// `toolcall-mcp`'s `mcp_load` measures beside `orders mcp`.
pub fn serve_stdio() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let server = ShopServer::new(Arc::new(Shop::bench()))
            .serve((tokio::io::stdin(), tokio::io::stdout()))
            .await?;
        server.waiting().await?;
        Ok(())
    })
}

/// Serves the shop's server over streamable HTTP at `http://ADDR/mcp`
/// until the process ends: rmcp's `StreamableHttpService` under
/// `axum::serve`, on a multi-threaded runtime as `orders mcp --http` runs,
/// each connection with `TCP_NODELAY` (as any server should): the peer of
/// `orders mcp --http` for `bench/http/run.sh` and `keepalive.py`.
///
/// `shop`: `sqlite:PATH` or a Postgres URL, the orders example's shop
/// there, opened as `orders mcp --http --store` opens it (created and
/// seeded when missing); `get_order` then reads the order from it.
pub fn serve_http(
    addr: std::net::SocketAddr,
    shop: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    use axum::serve::ListenerExt as _;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let shop_spec = shop;
    runtime.block_on(async {
        let shop = Arc::new(Shop::bench());
        let stored = match shop_spec {
            None => None,
            Some(spec) => Some(Arc::new(match spec.strip_prefix("sqlite:") {
                Some(path) => orders::Shop::open_sqlite(path)?,
                None => orders::Shop::connect_postgres(spec).await?,
            })),
        };
        let service = StreamableHttpService::new(
            move || {
                Ok(match &stored {
                    Some(stored) => ShopServer::over_stored(Arc::clone(&shop), Arc::clone(stored)),
                    None => ShopServer::new(Arc::clone(&shop)),
                })
            },
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "rmcp over streamable HTTP: http://{}/mcp",
            listener.local_addr()?
        );
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, router).await?;
        Ok(())
    })
}

/// A handler with nothing in it: only there to obtain a `Peer<RoleServer>`.
struct PeerSource;

impl ServerHandler for PeerSource {}

/// The handle every `RequestContext` needs, from a service started on an
/// in-memory duplex and kept alive (with the other end) while it is used.
/// Must be made inside a tokio runtime.
pub struct PeerHandle {
    peer: Peer<RoleServer>,
    _service: RunningService<RoleServer, PeerSource>,
    _other_end: tokio::io::DuplexStream,
}

impl PeerHandle {
    /// Starts the service.
    pub fn new() -> Self {
        let (ours, other_end) = tokio::io::duplex(4096);
        let service = serve_directly(PeerSource, ours, None);
        PeerHandle {
            peer: service.peer().clone(),
            _service: service,
            _other_end: other_end,
        }
    }
}

/// One call through the router: the raw text, parsed as the transport
/// would, then `ToolRouter::call`. `Ok(true)` for a successful tool result,
/// `Ok(false)` for a tool error result (`isError`), `Err` for a protocol
/// error (unknown tool, arguments not an object).
pub async fn call(
    server: &ShopServer,
    peer: &PeerHandle,
    id: i64,
    tool: &'static str,
    raw: &str,
) -> Result<bool, rmcp::ErrorData> {
    let arguments: JsonObject = serde_json::from_str(raw)
        .map_err(|e| rmcp::ErrorData::invalid_params(e.to_string(), None))?;
    let params = CallToolRequestParams::new(tool).with_arguments(arguments);
    let request = RequestContext::new(NumberOrString::Number(id), peer.peer.clone());
    let context = ToolCallContext::new(server, params, request);
    match server.tool_router.call(context).await? {
        CallToolResponse::Complete(result) => Ok(result.is_error != Some(true)),
        _ => Ok(false),
    }
}
