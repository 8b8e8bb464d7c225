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

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_lists_reads_and_is_refused_as_the_pipeline_says() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let client = connect(addr, Some(TOKEN_A)).await;

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["balance", "transfer"]);

    let read = outcome(&client, "balance", json!({})).await;
    assert_eq!(read["ok"], true, "{read}");
    assert_eq!(
        read["data"],
        json!({"balance_cents": 100_000, "transfers": 0})
    );

    // A float where cents are due: a tool error naming the field.
    let float = outcome(
        &client,
        "transfer",
        json!({"to": "ACC-7", "amount_cents": 25.9}),
    )
    .await;
    assert_eq!(float["code"], "INVALID_ARGUMENTS", "{float}");
    assert!(
        float["message"].as_str().unwrap().contains("amount_cents"),
        "{float}"
    );

    // High risk, and this client cannot ask a person: nothing runs.
    let transfer = outcome(
        &client,
        "transfer",
        json!({"to": "ACC-7", "amount_cents": 2590}),
    )
    .await;
    assert_eq!(transfer["code"], "CONFIRMATION_REQUIRED", "{transfer}");
    assert!(transfer["question_id"].is_string(), "{transfer}");
    assert_eq!(bank.transfers(), 0);

    let records = audit.records();
    let seen: Vec<(&str, &str, String)> = records
        .iter()
        .map(|r| (r.caller.as_str(), r.tool.as_ref(), r.code.to_string()))
        .collect();
    assert_eq!(
        seen,
        [
            ("agent-a", "balance", "OK".to_owned()),
            ("agent-a", "transfer", "INVALID_ARGUMENTS".to_owned()),
            ("agent-a", "transfer", "CONFIRMATION_REQUIRED".to_owned()),
        ]
    );
    // One session per MCP session, under the prefix.
    let session = &records[0].session_id;
    assert!(session.starts_with("http-test/"), "{session}");
    assert!(records.iter().all(|r| &r.session_id == session));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_token_is_its_callers_and_the_audit_names_it() {
    let (_bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::conversation("desk-7"), with_tokens()).await;

    let a = connect(addr, Some(TOKEN_A)).await;
    let b = connect(addr, Some(TOKEN_B)).await;
    assert_eq!(outcome(&a, "balance", json!({})).await["ok"], true);
    assert_eq!(outcome(&b, "balance", json!({})).await["ok"], true);
    assert_eq!(outcome(&a, "balance", json!({})).await["ok"], true);

    // A conversation named in `_meta` is the caller's own.
    let mut named = CallToolRequestParams::new("balance").with_arguments(Map::new());
    named.meta =
        Some(serde_json::from_value(json!({"toolcall/conversation": "ticket-9"})).unwrap());
    let answer = b.call_tool(named).await.unwrap();
    assert_eq!(result_json(&answer)["ok"], true);

    let seen: Vec<(String, String)> = audit
        .records()
        .into_iter()
        .map(|r| (r.caller, r.session_id))
        .collect();
    assert_eq!(
        seen,
        [
            ("agent-a".to_owned(), "desk-7".to_owned()),
            ("agent-b".to_owned(), "desk-7".to_owned()),
            ("agent-a".to_owned(), "desk-7".to_owned()),
            (
                "agent-b".to_owned(),
                "desk-7/named:7:agent-b/ticket-9".to_owned()
            ),
        ],
        "with Options::conversation every call is that conversation, by its token's caller"
    );
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokens_caller_brings_its_own_policy() {
    const READER: &str = "token-of-the-reader-55555555";
    let (bank, dispatcher, audit) = bank_dispatcher();
    let http = with_tokens().tokens(&format!("reader {READER}")).unwrap();
    let addr = start(dispatcher, Options::new("http-test"), http).await;
    let reader = connect(addr, Some(READER)).await;

    let tools = reader.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        ["balance"],
        "tools/list lists what this caller may call"
    );
    let refused = outcome(
        &reader,
        "transfer",
        json!({"to": "ACC-7", "amount_cents": 1}),
    )
    .await;
    assert_eq!(refused["code"], "TOOL_NOT_ALLOWED", "{refused}");
    assert_eq!(bank.transfers(), 0);
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].caller, "reader");
    reader.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_belongs_to_its_tokens_caller() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;

    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let auth_a = bearer(TOKEN_A);
    let opened = send(addr, "POST", &[("Authorization", &auth_a)], init.as_bytes()).await;
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();

    // Agent b, with a's session id: no such session for b.
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"transfer","arguments":{"to":"ACC-7","amount_cents":1}}}"#;
    let auth_b = bearer(TOKEN_B);
    let stolen = send(
        addr,
        "POST",
        &[
            ("Authorization", &auth_b),
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        call.as_bytes(),
    )
    .await;
    assert_eq!(stolen.status, 404, "{stolen:?}");
    assert!(audit.records().is_empty());
    assert_eq!(bank.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_a_wrong_one_is_401_and_nothing_runs() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let body = stateless_call(1, "balance", "{}");
    let wrong = bearer("token-of-nobody-000000000000");
    let a_with_typo = bearer(&format!("{TOKEN_A}x"));
    for headers in [
        vec![MODERN],
        vec![MODERN, ("Authorization", wrong.as_str())],
        vec![MODERN, ("Authorization", a_with_typo.as_str())],
        vec![MODERN, ("Authorization", TOKEN_A)],
        vec![MODERN, ("Authorization", "Basic YWdlbnQtYTp4")],
    ] {
        let answer = send(addr, "POST", &headers, body.as_bytes()).await;
        assert_eq!(answer.status, 401, "{headers:?}: {answer:?}");
        assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
        assert!(!answer.body.contains(TOKEN_A));
    }
    // Refused before the body is read: even one too large to read.
    let answer = send(addr, "POST", &[("Content-Length", "1073741824")], b"{").await;
    assert_eq!(answer.status, 401, "{answer:?}");

    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);

    // The right token, the same request: served.
    let auth = bearer(TOKEN_A);
    let answer = send(
        addr,
        "POST",
        &modern_call("balance", &auth),
        body.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let message = answer.message();
    assert_eq!(message["id"], 1);
    assert_eq!(
        message["result"]["structuredContent"]["ok"], true,
        "{message}"
    );
    assert_eq!(audit.records().len(), 1);
    assert_eq!(audit.records()[0].caller, "agent-a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_bound_is_413_unread() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let auth = bearer(TOKEN_A);
    let two_mib = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"transfer","arguments":{{"to":"{}","amount_cents":1}}}}}}"#,
        "A".repeat(2 * 1024 * 1024)
    );

    // Declared: refused before a byte of it is read.
    let answer = send(
        addr,
        "POST",
        &[MODERN, ("Authorization", &auth)],
        two_mib.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 413, "{answer:?}");
    let message = answer.message();
    assert_eq!(message["error"]["code"], -32600, "{message}");
    assert_eq!(message["id"], Value::Null);
    assert!(answer.body.len() < 512, "nothing of the body is repeated");

    // Chunked, with no length said: read up to the bound, then refused.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: {auth}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (read, mut write) = stream.into_split();
    let body = two_mib.clone();
    let writer = tokio::spawn(async move {
        for chunk in body.as_bytes().chunks(64 * 1024) {
            let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
            if write.write_all(&framed).await.is_err() {
                return;
            }
        }
        let _ = write.write_all(b"0\r\n\r\n").await;
    });
    let answer = read_answer(read).await;
    writer.await.unwrap();
    assert_eq!(answer.status, 413, "{answer:?}");

    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_or_host_is_403_and_nothing_runs() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let http = with_tokens().allow_origin("https://console.example.com");
    let addr = start(dispatcher, Options::new("http-test"), http).await;
    let auth = bearer(TOKEN_A);
    let body = stateless_call(1, "transfer", r#"{"to":"ACC-7","amount_cents":1}"#);
    let evil_host = format!("evil.example:{}", addr.port());
    let refused: [&[(&str, &str)]; 5] = [
        &[("Origin", "http://evil.example")],
        // Same port, another host: not this server's origin.
        &[("Origin", &format!("http://evil.example:{}", addr.port()))],
        &[("Origin", "null")],
        // DNS rebinding: the browser names the attacker's host.
        &[
            ("Host", &evil_host),
            ("Origin", &format!("http://{evil_host}")),
        ],
        &[("Host", &evil_host)],
    ];
    for extra in refused {
        let mut headers = modern_call("transfer", &auth);
        headers.extend_from_slice(extra);
        let answer = send(addr, "POST", &headers, body.as_bytes()).await;
        assert_eq!(answer.status, 403, "{extra:?}: {answer:?}");
        assert!(
            !answer.body.contains("evil"),
            "nothing of the request is repeated"
        );
    }
    // Refused before the token is looked at, and before the body is read.
    let answer = send(addr, "POST", &[("Origin", "http://evil.example")], b"{").await;
    assert_eq!(answer.status, 403);
    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);

    // The server's own loopback origin (any loopback name, its port), and
    // the configured ones, are allowed; so is no Origin at all.
    let allowed = [
        format!("http://127.0.0.1:{}", addr.port()),
        format!("http://localhost:{}", addr.port()),
        "https://console.example.com".to_owned(),
        "HTTPS://Console.Example.com:443".to_owned(),
    ];
    let body = stateless_call(2, "balance", "{}");
    for origin in &allowed {
        let mut headers = modern_call("balance", &auth);
        headers.push(("Origin", origin));
        let answer = send(addr, "POST", &headers, body.as_bytes()).await;
        assert_eq!(answer.status, 200, "{origin}: {answer:?}");
        assert_eq!(answer.message()["result"]["structuredContent"]["ok"], true);
    }
    let answer = send(
        addr,
        "POST",
        &modern_call("balance", &auth),
        body.as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(audit.records().len(), allowed.len() + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_jsonrpc_errors_and_the_server_keeps_serving() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let auth = bearer(TOKEN_A);
    let long_version = "9".repeat(100_000);
    let cases: Vec<(String, u16, i64, Value)> = vec![
        ("{".to_owned(), 400, -32700, Value::Null),
        ("not json at all".to_owned(), 400, -32700, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"#.to_owned(),
            400,
            -32700,
            json!(7),
        ),
        ("[1, 2]".to_owned(), 400, -32600, Value::Null),
        ("".to_owned(), 400, -32600, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":8}"#.to_owned(),
            400,
            -32600,
            json!(8),
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"id":10,"method":"tools/list"}"#.to_owned(),
            400,
            -32600,
            Value::Null,
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":"{}","method":"tools/list"}}"#,
                "i".repeat(300)
            ),
            400,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"arguments":{}}}"#
                .to_owned(),
            200,
            -32602,
            json!(11),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":12,"method":"initialize","params":{{"protocolVersion":"{long_version}","capabilities":{{}},"clientInfo":{{"name":"x","version":"1"}}}}}}"#
            ),
            200,
            -32602,
            json!(12),
        ),
        (
            stateless_call(13, "balance", "{}").replace(
                r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#,
                &format!(r#""io.modelcontextprotocol/protocolVersion":"{long_version}""#),
            ),
            200,
            -32602,
            json!(13),
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":"m","method":"x/unknown","params":{{"protocolVersion":"{long_version}"}}}}"#
            ),
            200,
            -32602,
            json!("m"),
        ),
    ];
    for (body, status, code, id) in cases {
        let answer = send(addr, "POST", &[("Authorization", &auth)], body.as_bytes()).await;
        let shown = &body[..body.len().min(80)];
        assert_eq!(answer.status, status, "{shown}: {answer:?}");
        let message = answer.message();
        assert_eq!(message["jsonrpc"], "2.0", "{shown}: {message}");
        assert_eq!(message["error"]["code"], code, "{shown}: {message}");
        assert_eq!(message["id"], id, "{shown}: {message}");
        assert!(
            answer.body.len() < 4096,
            "{shown}: nothing the client sent is repeated at length ({} bytes)",
            answer.body.len()
        );
    }
    // A header rmcp would repeat, too long to be one: refused, unrepeated.
    let answer = send(
        addr,
        "POST",
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", &long_version),
        ],
        stateless_call(1, "balance", "{}").as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 400);
    assert!(answer.body.len() < 512, "{answer:?}");

    assert!(audit.records().is_empty(), "the pipeline saw no call");
    assert_eq!(bank.transfers(), 0);
    // Still serving.
    let answer = send(
        addr,
        "POST",
        &modern_call("balance", &auth),
        stateless_call(14, "balance", "{}").as_bytes(),
    )
    .await;
    assert_eq!(answer.message()["result"]["structuredContent"]["ok"], true);
    // A byte order mark before the JSON is no part of it.
    let answer = send(
        addr,
        "POST",
        &modern_call("balance", &auth),
        format!("\u{FEFF}{}", stateless_call(15, "balance", "{}")).as_bytes(),
    )
    .await;
    assert_eq!(answer.message()["id"], 15, "{answer:?}");
    assert_eq!(answer.message()["result"]["structuredContent"]["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_reads_the_arguments_as_sent() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let auth = bearer(TOKEN_A);
    for (id, arguments) in [
        (
            1,
            r#"{"to":"ACC-7","amount_cents":1,"amount_cents":100000}"#,
        ),
        (2, r#"{"to":"ACC-7","amount_cents":1e400}"#),
    ] {
        let answer = send(
            addr,
            "POST",
            &modern_call("transfer", &auth),
            stateless_call(id, "transfer", arguments).as_bytes(),
        )
        .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let message = answer.message();
        assert_eq!(message["id"], id);
        let result = &message["result"]["structuredContent"];
        assert_eq!(result["code"], "INVALID_JSON", "{arguments}: {message}");
        assert_eq!(message["result"]["isError"], true);
    }
    let codes: Vec<String> = audit.records().iter().map(|r| r.code.to_string()).collect();
    assert_eq!(
        codes,
        ["INVALID_JSON", "INVALID_JSON"],
        "audited like any call"
    );
    assert_eq!(bank.transfers(), 0);

    // Each stateless request stands alone: a conversation of its own.
    let records = audit.records();
    assert!(records[0].session_id.starts_with("http-test/"));
    assert_ne!(records[0].session_id, records[1].session_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_loopback_clients_are_the_default_caller() {
    let (_bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), HttpOptions::new()).await;
    let client = connect(addr, None).await;
    assert_eq!(outcome(&client, "balance", json!({})).await["ok"], true);
    assert_eq!(audit.records()[0].caller, "default");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_a_router_served_without_peer_addresses_refuses() {
    let (_bank, dispatcher, audit) = bank_dispatcher();
    let app = router(dispatcher, Options::new("http-test"), HttpOptions::new()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Served without connect info: the peer cannot be told to be local.
    tokio::spawn(async move { axum_serve(listener, app).await });
    let answer = send(
        addr,
        "POST",
        &[
            MODERN,
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "balance"),
        ],
        stateless_call(1, "balance", "{}").as_bytes(),
    )
    .await;
    assert_eq!(answer.status, 403, "{answer:?}");
    assert!(audit.records().is_empty());
}

async fn axum_serve(listener: tokio::net::TcpListener, app: axum::Router) {
    axum::serve(listener, app).await.unwrap();
}

#[test]
fn a_token_for_an_unknown_caller_or_a_bad_token_file_is_an_error_at_start() {
    let (_bank, dispatcher, _audit) = bank_dispatcher();
    let http = HttpOptions::new()
        .tokens("agent-z 0123456789abcdef0123")
        .unwrap();
    let error = router(dispatcher, Options::default(), http).unwrap_err();
    assert!(error.to_string().contains("\"agent-z\""), "{error}");

    for (text, problem) in [
        ("", "no token"),
        ("# only a comment\n", "no token"),
        ("agent-a short", "line 1: a token needs at least 16"),
        ("0123456789abcdef0123", "line 1: expected `CALLER TOKEN`"),
        ("a b c", "line 1: expected `CALLER TOKEN`"),
        (
            "agent-a 0123456789abcdef0123\nagent-b 0123456789abcdef0123",
            "line 2: a token given twice",
        ),
    ] {
        let error = HttpOptions::new().tokens(text).unwrap_err().to_string();
        assert!(error.contains(problem), "{text:?}: {error}");
        assert!(
            !error.contains("0123456789abcdef"),
            "never the token: {error}"
        );
    }
    // A caller may hold several tokens (to rotate them).
    let two = HttpOptions::new()
        .tokens("agent-a 0123456789abcdef0123\nagent-a fedcba9876543210fedc")
        .unwrap();
    assert_eq!(two.token_callers(), ["agent-a"]);
    assert!(
        !format!("{two:?}").contains("0123456789abcdef"),
        "Debug hides tokens"
    );

    let (_bank, dispatcher, _audit) = bank_dispatcher();
    let bad_origin = HttpOptions::new().allow_origin("console.example.com");
    assert!(router(dispatcher, Options::default(), bad_origin).is_err());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_lists_and_reads_over_http() {
    let Some(python) = python() else {
        return;
    };
    let (bank, dispatcher, audit) = bank_dispatcher();
    let addr = start(dispatcher, Options::new("http-test"), with_tokens()).await;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_http_client.py");
    let url = format!("http://{addr}/mcp");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(url)
            .arg(TOKEN_A)
            .stdin(std::process::Stdio::null())
            .output()
    })
    .await
    .unwrap()
    .expect("the Python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK's checks pass:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("checks passed"), "{stdout}");

    // Both sessions read, as agent-a; the client without a token ran nothing.
    let seen: Vec<(String, String)> = audit
        .records()
        .into_iter()
        .map(|r| (r.caller, r.tool.into_owned()))
        .collect();
    let read = ("agent-a".to_owned(), "balance".to_owned());
    assert_eq!(seen, [read.clone(), read], "{stdout}");
    assert_eq!(bank.transfers(), 0);
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
    send(
        addr,
        "POST",
        &modern_call("balance", auth),
        balance_call().as_bytes(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_or_a_body_sent_too_slowly_is_cut_off_and_nothing_runs() {
    let (bank, dispatcher, audit) = bank_dispatcher();
    let http = with_tokens().body_timeout(Duration::from_millis(300));
    let limits = Limits::new().header_timeout(Duration::from_millis(300));
    let addr = start_with(dispatcher, http, limits).await;

    // Half a head, then nothing: closed, before any authentication.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        .await
        .unwrap();
    let said = until_closed(&mut slow).await;
    assert!(!said.contains("200 OK"), "{said:?}");
    // A connection that sends nothing at all holds no place either.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let said = until_closed(&mut silent).await;
    assert!(!said.contains("200 OK"), "{said:?}");

    // The whole head, a tenth of the body it declares, then nothing.
    let auth = bearer(TOKEN_A);
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nAuthorization: {auth}\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: balance\r\nContent-Length: {}\r\n\r\n",
        balance_call().len()
    );
    head.push_str(&balance_call()[..balance_call().len() / 10]);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = read_answer(stream).await;
    assert_eq!(answer.status, 408, "{answer:?}");
    assert!(audit.records().is_empty());

    // The same call sent at once runs, once.
    let answer = read_balance(addr, &auth).await;
    assert_ok(&answer);
    assert_eq!(audit.records().len(), 1);
    assert_eq!(bank.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_bound_is_503_until_one_closes() {
    let (_, dispatcher, audit) = bank_dispatcher();
    let addr = start_with(dispatcher, with_tokens(), Limits::new().max_connections(2)).await;
    let auth = bearer(TOKEN_A);

    // Two connections held open, idle.
    let first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let mut third = TcpStream::connect(addr).await.unwrap();
    let said = until_closed(&mut third).await;
    assert!(said.starts_with("HTTP/1.1 503"), "{said:?}");
    assert!(said.contains("Retry-After: 1"), "{said:?}");

    // One closes: a call is served again (once the server has seen it go).
    drop(first);
    let mut served = None;
    for _ in 0..200 {
        let answer = read_balance(addr, &auth).await;
        if answer.status != 503 {
            served = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let served = served.expect("a connection is served once another closed");
    assert_eq!(served.status, 200, "{served:?}");
    // Nothing of the refused connections ran; the served call did, once.
    assert_eq!(audit.records().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_open_sessions_are_bounded_and_another_callers_are_not() {
    let (_, dispatcher, _) = bank_dispatcher();
    let http = with_tokens().max_sessions_per_caller(2);
    let addr = start_with(dispatcher, http, Limits::new()).await;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (auth_a, auth_b) = (bearer(TOKEN_A), bearer(TOKEN_B));
    let open = |auth: String| async move {
        send(addr, "POST", &[("Authorization", &auth)], init.as_bytes()).await
    };

    // Two at once: both open (one at a time, so never three).
    let (one, two) = tokio::join!(open(auth_a.clone()), open(auth_a.clone()));
    assert_eq!((one.status, two.status), (200, 200), "{one:?} {two:?}");
    let over = open(auth_a.clone()).await;
    assert_eq!(over.status, 429, "{over:?}");
    assert!(over.body.contains("sessions open"), "{over:?}");
    assert_eq!(over.header("retry-after"), Some("60"));
    // Another caller's sessions are its own.
    assert_eq!(open(auth_b.clone()).await.status, 200);
    // A session of a's within it still works: not a new one, not refused.
    let session = one.header("mcp-session-id").unwrap().to_owned();
    let ping = send(
        addr,
        "POST",
        &[
            ("Authorization", &auth_a),
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
    )
    .await;
    assert_ne!(ping.status, 429, "{ping:?}");

    // a ends one: a may open another.
    let ended = send(
        addr,
        "DELETE",
        &[("Authorization", &auth_a), ("Mcp-Session-Id", &session)],
        b"",
    )
    .await;
    assert!(ended.status < 300, "{ended:?}");
    assert_eq!(open(auth_a).await.status, 200);
}

/// `DELETE` ends a session as the MCP SDKs expect: 204 for a session the
/// caller has open, which is then gone (a request in it is 404, as a second
/// `DELETE` is), and 404 for one it does not know: made up, or another
/// caller's, which stays open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_a_known_session_and_is_404_for_an_unknown_one() {
    let (_, dispatcher, _) = bank_dispatcher();
    let addr = start_with(dispatcher, with_tokens(), Limits::new()).await;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let (auth_a, auth_b) = (bearer(TOKEN_A), bearer(TOKEN_B));
    let opened = send(addr, "POST", &[("Authorization", &auth_a)], init.as_bytes()).await;
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.header("mcp-session-id").unwrap().to_owned();
    let in_session = |method: &'static str, auth: String, session: String| async move {
        let body: &[u8] = if method == "POST" {
            br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#
        } else {
            b""
        };
        send(
            addr,
            method,
            &[
                ("Authorization", &auth),
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            body,
        )
        .await
    };

    let made_up = in_session("DELETE", auth_a.clone(), "no-such-session".into()).await;
    assert_eq!(made_up.status, 404, "{made_up:?}");
    let not_b_s = in_session("DELETE", auth_b.clone(), session.clone()).await;
    assert_eq!(not_b_s.status, 404, "{not_b_s:?}");
    let ping = in_session("POST", auth_a.clone(), session.clone()).await;
    assert_eq!(
        ping.status, 200,
        "b's DELETE left a's session open: {ping:?}"
    );

    let ended = in_session("DELETE", auth_a.clone(), session.clone()).await;
    assert_eq!(ended.status, 204, "{ended:?}");
    assert_eq!(ended.body, "", "{ended:?}");
    let gone = in_session("POST", auth_a.clone(), session.clone()).await;
    assert_eq!(gone.status, 404, "{gone:?}");
    let again = in_session("DELETE", auth_a, session).await;
    assert_eq!(again.status, 404, "{again:?}");
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

/// One client's call waits for SQLite's write lock (another connection
/// holds it); another client is answered meanwhile. The server's runtime
/// has one worker thread: before the store's statements ran off it, the
/// waiting call held that thread and every other client waited with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_call_waiting_for_the_store_does_not_stall_another_client() {
    let (path, addr, audit, holder) = locked_sqlite_server("stall").await;

    let auth = bearer(TOKEN_A);
    // A call in a conversation it names, whose step the store keeps (a
    // read that names none is alone in its conversation and writes
    // nothing: it would not wait for the lock, as the next test shows).
    let named = balance_call().replace(
        r#""io.modelcontextprotocol/clientCapabilities":{}"#,
        r#""io.modelcontextprotocol/clientCapabilities":{},"toolcall/conversation":"desk""#,
    );
    let waiting = {
        let auth = auth.clone();
        tokio::spawn(async move {
            send(
                addr,
                "POST",
                &modern_call("balance", &auth),
                named.as_bytes(),
            )
            .await
        })
    };
    // Time for the call to reach the store and wait there (its wait lasts
    // up to the store's busy timeout, 10 s).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let list = r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let other = tokio::time::timeout(
        Duration::from_secs(5),
        send(
            addr,
            "POST",
            &[
                MODERN,
                ("Mcp-Method", "tools/list"),
                ("Authorization", &auth),
            ],
            list.as_bytes(),
        ),
    )
    .await
    .expect("another client is answered while a call waits for the store");
    assert_eq!(other.status, 200, "{other:?}");
    assert!(other.body.contains("balance"), "{other:?}");
    assert!(
        !waiting.is_finished(),
        "the first call still waits for the lock"
    );
    assert!(audit.records().is_empty());

    // The lock is let go: the waiting call runs, once.
    holder.execute_batch("COMMIT").unwrap();
    let answer = waiting.await.unwrap();
    assert_ok(&answer);
    assert_eq!(audit.records().len(), 1);
    let _ = std::fs::remove_file(&path);
}

/// A read alone in its conversation (a stateless request that names none)
/// writes nothing, so it is answered while another connection holds
/// SQLite's write lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_stateless_read_does_not_wait_for_the_write_lock() {
    let (path, addr, audit, holder) = locked_sqlite_server("alone").await;
    let auth = bearer(TOKEN_A);
    let answer = tokio::time::timeout(Duration::from_secs(5), read_balance(addr, &auth))
        .await
        .expect("a read alone takes no write lock");
    assert_ok(&answer);
    assert_eq!(audit.records().len(), 1);
    holder.execute_batch("COMMIT").unwrap();
    let _ = std::fs::remove_file(&path);
}
