//! Calls per second of an MCP server, as rmcp's client sees them: over
//! standard input and output (a command this program starts) or over
//! streamable HTTP (a URL). One client sends `--calls` `tools/call`
//! requests with `--in-flight` of them outstanding at any time (pipelined
//! on standard input; concurrent POSTs over HTTP), each in a conversation
//! of its own (`_meta` `toolcall/conversation`), so that no step budget
//! ends the run. It prints one JSON line: calls, seconds, calls per second,
//! and the latency's p50 and p99 in microseconds.
//!
//! ```text
//! cargo build --release -p orders
//! cargo run --release -p toolcall-mcp --features http --example mcp_load -- \
//!     --calls 20000 --in-flight 16 stdio target/release/orders mcp --quiet
//! target/release/orders mcp --quiet --http 127.0.0.1:8808 &
//! cargo run --release -p toolcall-mcp --features http --example mcp_load -- \
//!     --calls 20000 --in-flight 16 http http://127.0.0.1:8808/mcp
//! ```
//!
//! `--tool` and `--arguments` choose the call (`get_order` on `ORD-1001` by
//! default); `--token` sends a bearer token. A call answered with a
//! protocol error stops the run with that error; a tool's refusal is a
//! call like any other (the pipeline answered it), counted in `refused`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{Peer, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};

struct Load {
    calls: usize,
    in_flight: usize,
    tool: String,
    arguments: Map<String, Value>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // reqwest may be built with `rustls-no-provider` (another crate of the
    // workspace asks for it): a client then needs a provider installed.
    // rustls 0.23.48 deprecates ring's provider (no post-quantum key
    // exchange); plain HTTP to localhost does not need any.
    #[allow(deprecated)]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut args = std::env::args().skip(1).collect::<Vec<_>>();
    let mut load = Load {
        calls: 10_000,
        in_flight: 16,
        tool: "get_order".to_owned(),
        arguments: serde_json::from_str(r#"{"order_id": "ORD-1001"}"#)?,
    };
    let mut token = None;
    while args.first().is_some_and(|arg| arg.starts_with("--")) {
        let flag = args.remove(0);
        if args.is_empty() {
            return Err(format!("{flag} needs a value").into());
        }
        let value = args.remove(0);
        match flag.as_str() {
            "--calls" => load.calls = value.parse()?,
            "--in-flight" => load.in_flight = value.parse::<usize>()?.max(1),
            "--tool" => load.tool = value,
            "--arguments" => load.arguments = serde_json::from_str(&value)?,
            "--token" => token = Some(value),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("mcp-load", "0.0.0"),
    );
    let (transport, measured) = match args.first().map(String::as_str) {
        Some("stdio") if args.len() > 1 => {
            let mut child = tokio::process::Command::new(&args[1])
                .args(&args[2..])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()?;
            let (stdout, stdin) = (child.stdout.take(), child.stdin.take());
            let client = config
                .serve((stdout.ok_or("no stdout")?, stdin.ok_or("no stdin")?))
                .await?;
            let measured = run(client.peer().clone(), &load).await?;
            client.cancel().await?;
            drop(child);
            ("stdio", measured)
        }
        Some("http") if args.len() == 2 => {
            let mut http = StreamableHttpClientTransportConfig::with_uri(args[1].clone());
            if let Some(token) = token {
                http = http.auth_header(token);
            }
            let client = config
                .serve(StreamableHttpClientTransport::from_config(http))
                .await?;
            let measured = run(client.peer().clone(), &load).await?;
            client.cancel().await?;
            ("http", measured)
        }
        _ => {
            return Err(
                "usage: mcp_load [--calls N] [--in-flight N] [--tool T] [--arguments JSON] \
                 [--token T] (stdio COMMAND [ARGS...] | http URL)"
                    .into(),
            );
        }
    };
    let Measured {
        seconds,
        mut latencies,
        refused,
    } = measured;
    latencies.sort_unstable();
    let at = |q: f64| {
        let index = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(index).map_or(0, Duration::as_micros)
    };
    println!(
        "{}",
        serde_json::json!({
            "transport": transport,
            "tool": load.tool,
            "calls": load.calls,
            "in_flight": load.in_flight,
            "refused": refused,
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "calls_per_second": (load.calls as f64 / seconds).round(),
            "p50_us": at(0.5),
            "p99_us": at(0.99),
        })
    );
    Ok(())
}

struct Measured {
    seconds: f64,
    latencies: Vec<Duration>,
    refused: usize,
}

/// Sends `load.calls` calls, `load.in_flight` at a time, each in a
/// conversation of its own.
async fn run(peer: Peer<RoleClient>, load: &Load) -> Result<Measured, Box<dyn std::error::Error>> {
    let next = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..load.in_flight {
        let (peer, next, refused) = (peer.clone(), Arc::clone(&next), Arc::clone(&refused));
        let (calls, tool, arguments) = (load.calls, load.tool.clone(), load.arguments.clone());
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= calls {
                    return Ok::<_, rmcp::service::ServiceError>(latencies);
                }
                let mut meta = Map::new();
                meta.insert("toolcall/conversation".into(), format!("load-{n}").into());
                let mut request =
                    CallToolRequestParams::new(tool.clone()).with_arguments(arguments.clone());
                request.meta = Some(meta.into());
                let sent = Instant::now();
                let answer = peer.call_tool(request).await?;
                latencies.push(sent.elapsed());
                if answer.is_error == Some(true) {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let mut latencies = Vec::with_capacity(load.calls);
    for worker in workers {
        latencies.extend(worker.await??);
    }
    Ok(Measured {
        seconds: started.elapsed().as_secs_f64(),
        latencies,
        refused: refused.load(Ordering::Relaxed),
    })
}
