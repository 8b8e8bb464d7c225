//! One scenario for valgrind's callgrind: the instruction counts of
//! scripts/ci/instructions.sh, CI's guard against a slower pipeline
//! (BENCHMARKS.md, "Instruction counts").
//!
//! ```sh
//! valgrind --tool=callgrind --toggle-collect='instructions::measured_calls' \
//!     target/release/instructions refund_replay 1000
//! ```
//!
//! The scenarios: `bench.py`'s four (`get_order_ok`, `refund_ok_confirmed`,
//! `refund_invalid_args`, `refund_replay`: `Dispatcher::execute`), and
//! `http_get_order`, bench/http/tools_call.lua's stateless MCP `tools/call`
//! of `get_order` sent in process through `toolcall_mcp::http::router` over
//! the memory store (the router, rmcp's streamable HTTP service and the
//! pipeline; no socket, no hyper).
//!
//! Builds the shop, the dispatcher and every request, checks that the first
//! calls answer as the scenario says (ok, replayed, rejected), warms up,
//! then sends the measured calls from `measured_calls` (or
//! `measured_calls_http`) alone: callgrind counts only while it is on the
//! stack (`--toggle-collect`, named exactly: a wildcard would also match
//! the async block inside, and toggle counting off for it), so
//! the shop's 10,000 orders, the runtime's start and the warm-up are not in
//! the count, and the count divided by the calls is per call.

use std::hint::black_box;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use tokio::runtime::Runtime;
use toolcall::Dispatcher;
use toolcall_bench::{Audit, Scenario, dispatcher, run_calls, runtime, shop, verify};
use toolcall_mcp::Options;
use toolcall_mcp::http::{HttpOptions, router};
use tower_service::Service as _;

/// Calls before the measured ones: the first refund of `refund_replay` runs
/// (the rest replay), and the first calls of every scenario grow the
/// session's and the audit's tables from empty.
const WARM_UP: usize = 200;

/// The HTTP scenario's name.
const HTTP: &str = "http_get_order";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(name), Some(calls)) = (args.next(), args.next()) else {
        eprintln!("usage: instructions SCENARIO CALLS (SCENARIO: get_order_ok, ..., {HTTP})");
        return ExitCode::from(2);
    };
    let Ok(calls) = calls.parse::<usize>() else {
        eprintln!("`{calls}` is not a number of calls");
        return ExitCode::from(2);
    };
    if name == HTTP {
        return http(calls);
    }
    let Some(scenario) = Scenario::ALL.into_iter().find(|s| s.name() == name) else {
        eprintln!("unknown scenario `{name}`");
        return ExitCode::from(2);
    };
    if let Err(wrong) = verify(scenario) {
        eprintln!("the scenario does not take its path: {wrong}");
        return ExitCode::FAILURE;
    }
    let dispatcher = dispatcher(shop(), Audit::Memory);
    let runtime = runtime();
    let texts = scenario.calls(0, WARM_UP + calls);
    let (warm, measured) = texts.split_at(WARM_UP);
    runtime.block_on(run_calls(&dispatcher, scenario, warm));
    measured_calls(&runtime, &dispatcher, scenario, measured);
    ExitCode::SUCCESS
}

/// The measured calls, in a function of their own that is never inlined:
/// its symbol is what callgrind's `--toggle-collect` names.
#[inline(never)]
fn measured_calls(
    runtime: &Runtime,
    dispatcher: &Dispatcher<orders::Shop>,
    scenario: Scenario,
    calls: &[String],
) {
    runtime.block_on(run_calls(dispatcher, scenario, calls));
}

fn http(calls: usize) -> ExitCode {
    let dispatcher = Arc::new(dispatcher(shop(), Audit::Memory));
    let mut app = match router(dispatcher, Options::new("bench"), HttpOptions::new()) {
        Ok(app) => app,
        Err(error) => {
            eprintln!("the router: {error}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = runtime();
    let mut requests: Vec<_> = (0..WARM_UP + calls).map(tools_call).collect();
    let measured = requests.split_off(WARM_UP);
    // Every warm-up answer is checked: the count is of the path claimed
    // (an order read), not of a refusal.
    let checked = runtime.block_on(async {
        for request in requests {
            let response = app.call(request).await.expect("the router is infallible");
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .map_err(|e| format!("reading the body: {e}"))?;
            let body = String::from_utf8_lossy(&body);
            if status != StatusCode::OK || !body.contains(r#""isError":false"#) {
                return Err(format!("HTTP {status}: {body}"));
            }
        }
        Ok(())
    });
    if let Err(wrong) = checked {
        eprintln!("the HTTP call does not read the order: {wrong}");
        return ExitCode::FAILURE;
    }
    measured_calls_http(&runtime, &mut app, measured);
    ExitCode::SUCCESS
}

/// The measured HTTP calls (see [`measured_calls`]); each answer's body is
/// read to its end, as a client does.
#[inline(never)]
fn measured_calls_http(runtime: &Runtime, app: &mut Router, requests: Vec<Request<Body>>) {
    runtime.block_on(async {
        for request in requests {
            let response = app.call(request).await.expect("the router is infallible");
            black_box(
                axum::body::to_bytes(response.into_body(), usize::MAX)
                    .await
                    .ok(),
            );
        }
    });
}

/// bench/http/tools_call.lua's request number `id`: the same headers and
/// body (a stateless `tools/call` of `get_order` on `ORD-1001`, protocol
/// 2026-07-28), from a loopback peer, as `toolcall_mcp::http::serve` gives it.
fn tools_call(id: usize) -> Request<Body> {
    let body = format!(
        r#"{{"jsonrpc": "2.0", "id": {id}, "method": "tools/call", "params": {{"name": "get_order", "arguments": {{"order_id": "ORD-1001"}}, "_meta": {{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": {{"name": "keepalive", "version": "1"}}, "io.modelcontextprotocol/clientCapabilities": {{}}}}}}}}"#
    );
    let mut request = Request::post("/mcp")
        .header("host", "127.0.0.1:8808")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "get_order")
        .header("content-length", body.len())
        .body(Body::from(body))
        .expect("a valid request");
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000))));
    request
}
