//! The server's span of a `tools/call`, as OpenTelemetry's MCP conventions
//! name it, carries the method, the request id, the protocol version and
//! the client's trace context, and holds the pipeline's `execute_tool`
//! span.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, RequestMetaObject};
use rmcp::{ClientHandler, ServiceExt as _};
use serde_json::{Map, Value, json};
use toolcall::{Dispatcher, Policy, Rejection, tool, tools};
use toolcall_mcp::Options;
use toolcall_testkit::spans::Capture;

mod client;

/// The balance of an account, in cents. No side effects.
#[tool]
fn balance(
    /// The account, for example ACC-7.
    account: String,
) -> Result<Value, Rejection> {
    Ok(json!({"account": account, "cents": 1200}))
}

#[derive(Clone)]
struct Plain;

impl ClientHandler for Plain {}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn a_tools_call_has_a_server_span_with_the_clients_trace_context() {
    let capture = Capture::default();
    let spans = Arc::clone(&capture.spans);
    capture.around(|| async {
        let dispatcher = Arc::new(
            Dispatcher::builder(tools![balance].unwrap(), Arc::new(()))
                .policy(Policy::new().allow(["balance"]))
                .build()
                .unwrap(),
        );
        let (client_io, server) = client::serve_piped(dispatcher, Options::conversation("desk-1"));
        let client = Plain.serve(client_io).await.unwrap();
        let Value::Object(args) = json!({"account": "ACC-7"}) else {
            unreachable!()
        };
        let mut params = CallToolRequestParams::new("balance").with_arguments(args);
        let mut meta = Map::new();
        meta.insert("traceparent".into(), Value::from(TRACEPARENT));
        params.meta = Some(RequestMetaObject::from(meta));
        let result = client.call_tool(params).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{result:?}");
        client.cancel().await.unwrap();
        server.await.unwrap().unwrap();
    });

    let spans = spans.lock().unwrap();
    let (at, call) = spans
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == "tools/call")
        .expect("a tools/call span");
    let field = |name: &str| call.field(name);
    assert_eq!(field("otel.name"), Some("tools/call balance"));
    assert_eq!(field("otel.kind"), Some("server"));
    assert_eq!(field("mcp.method.name"), Some("tools/call"));
    assert_eq!(field("gen_ai.tool.name"), Some("balance"));
    assert_eq!(field("traceparent"), Some(TRACEPARENT));
    assert!(field("jsonrpc.request.id").is_some(), "{call:?}");
    assert!(
        field("mcp.protocol.version").is_some_and(|v| v.starts_with("20")),
        "{call:?}"
    );
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool")
        .expect("the pipeline's span");
    assert_eq!(
        tool.parent,
        Some(at as u64 + 1),
        "the pipeline's span is opened inside the server's: {spans:#?}"
    );
}
