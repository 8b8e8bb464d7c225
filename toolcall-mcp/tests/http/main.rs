//! The MCP server over streamable HTTP (`toolcall_mcp::http`), on a real
//! socket: rmcp's own streamable HTTP client, and hand-written requests for
//! what a client library would never send (no token, a huge body, a hostile
//! origin, malformed JSON). Each test checks what the client got and what
//! the backend and the audit saw.

use std::net::SocketAddr;

use std::sync::Arc;

use std::time::Duration;

use rmcp::ServiceExt as _;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};

use rmcp::service::{RoleClient, RunningService};

use rmcp::transport::StreamableHttpClientTransport;

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use serde_json::{Map, Value, json};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use tokio::net::TcpStream;

use toolcall::{Caller, Dispatcher, MemoryAudit, Policy, tools};

use toolcall_mcp::Options;

use toolcall_mcp::http::{HttpOptions, Limits, router, serve, serve_with};

use toolcall_testkit::bank::{Bank, balance, transfer};

use toolcall_testkit::mcp_http::{Answer, bearer, read_answer, send};

#[path = "../client/mod.rs"]
mod client;

use client::{arguments, result_json};

// ------------------------------------------------------------------ bank

const TOKEN_A: &str = "token-of-agent-a-0123456789";

const TOKEN_B: &str = "token-of-agent-b-9876543210";

/// A dispatcher over a fresh bank with the callers `agent-a` and `agent-b`
/// (both may call everything), and the audit the tests read.
fn bank_dispatcher() -> (Arc<Bank>, Arc<Dispatcher<Bank>>, MemoryAudit) {
    let bank = Bank::new();
    let audit = MemoryAudit::new();
    let everything = || Policy::new().allow(["balance", "transfer"]);
    let dispatcher = Dispatcher::builder(tools![balance, transfer].unwrap(), Arc::clone(&bank))
        .callers([
            Caller::new("agent-a", everything()),
            Caller::new("agent-b", everything()),
            Caller::new("reader", Policy::new().allow(["balance"])),
        ])
        .audit(audit.clone())
        .build()
        .unwrap();
    (bank, Arc::new(dispatcher), audit)
}

fn with_tokens() -> HttpOptions {
    HttpOptions::new()
        .tokens(&format!(
            "# the fleet\nagent-a {TOKEN_A}\n\nagent-b {TOKEN_B}\n"
        ))
        .unwrap()
}

/// Serves `dispatcher` on 127.0.0.1, a free port; the server stops with the
/// test's runtime.
async fn start(
    dispatcher: Arc<Dispatcher<Bank>>,
    options: Options,
    http: HttpOptions,
) -> SocketAddr {
    let app = router(dispatcher, options, http).expect("the router builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app));
    addr
}

// ------------------------------------------------------------------ rmcp client

type Client = RunningService<RoleClient, ClientConfig>;

/// rmcp's streamable HTTP client, with `token` as its bearer token.
async fn connect(addr: SocketAddr, token: Option<&str>) -> Client {
    // reqwest may be built with `rustls-no-provider` (another crate of the
    // workspace asks for it): a client then needs a provider installed.
    // rustls 0.23.48 deprecates ring's provider (no post-quantum key
    // exchange); plain HTTP to localhost does not need any.
    #[allow(deprecated)]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("http-test-client", "0.0.0"),
    )
    .serve(transport)
    .await
    .expect("the client connects")
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments(args)))
        .await
        .expect("every outcome is a tool result, never a protocol error")
}

/// Calls `tool` and answers the `ToolResult` JSON of the result.
async fn outcome(client: &Client, tool: &str, args: Value) -> Value {
    result_json(&call(client, tool, args).await)
}

/// What a transfer of `amount_cents` to ACC-7 through `client` comes to.
async fn transfer_outcome(client: &Client, amount_cents: Value) -> Value {
    outcome(
        client,
        "transfer",
        json!({"to": "ACC-7", "amount_cents": amount_cents}),
    )
    .await
}

// ------------------------------------------------------------------ raw HTTP

/// A `tools/call` that stands alone (protocol 2026-07-28: no session, the
/// client's details in `_meta`), with its arguments as written.
fn stateless_call(id: u64, tool: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{{"name":"raw","version":"1"}},"io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

const MODERN: (&str, &str) = ("MCP-Protocol-Version", "2026-07-28");

/// The headers of a stateless `tools/call` of `tool`, with `auth`.
fn modern_call<'a>(tool: &'a str, auth: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        MODERN,
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
        ("Authorization", auth),
    ]
}

async fn axum_serve(listener: tokio::net::TcpListener, app: axum::Router) {
    axum::serve(listener, app).await.unwrap();
}

// ------------------------------------------------------------------ Python SDK

/// The Python to run the official MCP SDK with: `TOOLCALL_PYTHON` (then a
/// failure to run it fails the test), else the workspace's
/// `target/sdk-venv` when it has `mcp` 2.3.0 (the SDK tests of the workspace
/// make it); `None`, and the test is skipped, otherwise.
fn python() -> Option<std::path::PathBuf> {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if let Some(named) = std::env::var_os("TOOLCALL_PYTHON") {
        let named = std::path::PathBuf::from(named);
        return Some(
            if named.is_relative() && !named.exists() && named.components().count() > 1 {
                workspace.join(named)
            } else {
                named
            },
        );
    }
    let venv = workspace.join("target/sdk-venv/bin/python");
    let probe = std::process::Command::new(&venv)
        .args([
            "-c",
            "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '2.3.0')",
        ])
        .output();
    match probe {
        Ok(output) if output.status.success() => Some(venv),
        _ => {
            eprintln!(
                "SKIPPED: no Python with mcp==2.3.0 (set TOOLCALL_PYTHON, or make target/sdk-venv)"
            );
            None
        }
    }
}

// ------------------------------------------------------------------ limits

/// Serves `dispatcher` as [`start`] does, with `limits`.
async fn start_with(
    dispatcher: Arc<Dispatcher<Bank>>,
    http: HttpOptions,
    limits: Limits,
) -> SocketAddr {
    let app = router(dispatcher, Options::new("http-test"), http).expect("the router builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_with(listener, app, limits));
    addr
}

/// Reads until the server closes the connection; what it sent.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw)).await;
    assert!(read.is_ok(), "the server closed the connection within 20 s");
    String::from_utf8_lossy(&raw).into_owned()
}

/// A stateless read: what runs is in the audit.
fn balance_call() -> String {
    stateless_call(3, "balance", "{}")
}

/// Sends [`balance_call`] with `auth`.
async fn read_balance(addr: SocketAddr, auth: &str) -> Answer {
    post_call(addr, "balance", auth, balance_call().as_bytes()).await
}

/// Posts `body`, a call of `tool`, with the headers of [`modern_call`].
async fn post_call(addr: SocketAddr, tool: &str, auth: &str, body: &[u8]) -> Answer {
    send(addr, "POST", &modern_call(tool, auth), body).await
}

/// A server of `balance` for `agent-a` over a SQLite file of its own named
/// after `name`, whose write lock another connection holds: the file, the
/// server's address, its audit, and the connection that holds the lock.
async fn locked_sqlite_server(
    name: &str,
) -> (
    std::path::PathBuf,
    SocketAddr,
    MemoryAudit,
    rusqlite::Connection,
) {
    let path = std::env::temp_dir().join(format!(
        "toolcall-http-{name}-{}-{}.db",
        std::process::id(),
        toolcall::store::now_ms()
    ));
    let store = toolcall_sqlite::SqliteStore::open(&path).unwrap();
    let audit = MemoryAudit::new();
    let dispatcher = Dispatcher::builder(tools![balance, transfer].unwrap(), Bank::new())
        .callers([Caller::new("agent-a", Policy::new().allow(["balance"]))])
        .store(store)
        .audit(audit.clone())
        .build()
        .unwrap();
    let http = HttpOptions::new().token("agent-a", TOKEN_A).unwrap();
    let app = router(Arc::new(dispatcher), Options::new("http-test"), http).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, app));
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    (path, addr, audit, holder)
}

/// Asserts that `answer` is a tool result that is `ok`.
fn assert_ok(answer: &Answer) {
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.message()["result"]["structuredContent"]["ok"],
        json!(true)
    );
}

mod callers;
mod clients;
mod connections;
mod refusals;
