//! Nanoseconds per call of toolcall's peers on the reference's four
//! scenarios, printed as one JSON line:
//! `{"rmcp": {"get_order_ok": 1234, ...}, "rig": {...}}`.
//!
//! * `rmcp`: rmcp 3.11, a `#[tool_router]` server called through
//!   `ToolRouter::call`, no transport (`rmcp_peer.rs`);
//! * `rig`: rig 0.44, two `Tool`s in a `ToolSet`, called through
//!   `ToolSet::execute` (`rig_peer.rs`);
//! * `direct` (only when asked, `--what direct`): no framework, the text
//!   parsed straight into the strict struct, the same tool body, its answer
//!   as a `serde_json::Value`: what the tool's own work costs.
//!
//! Both serve the same shop with the same strict argument structs and the
//! same tool bodies (`domain.rs`), on the argument texts `toolcall-bench`
//! sends. The method is that of `toolcall-bench`'s `scenarios` binary:
//! each repetition runs every scenario once, `--calls` calls (default `$N`,
//! else 20,000), with a fresh shop and server for each peer, the peers in
//! turn so that they share the machine's noise, each batch inside one
//! `block_on` of a current-thread runtime, the texts built before the clock
//! starts; one untimed round first; the median over `--repeat` repetitions.
//!
//! ```sh
//! cargo run --release --manifest-path bench/peers/Cargo.toml -- --repeat 11
//! ```

mod domain;
mod rig_peer;
mod rmcp_peer;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use rig_agent::tool::ToolContext;
use serde_json::{Map, Value};

use domain::{Scenario, Shop, chosen, time_scenarios};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Peer {
    /// rmcp's `ToolRouter::call`.
    Rmcp,
    /// rig's `ToolSet::execute`.
    Rig,
    /// No framework: `serde_json::from_str` into the struct, the tool's body,
    /// the answer as a `Value`.
    Direct,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Rmcp => "rmcp",
            Peer::Rig => "rig",
            Peer::Direct => "direct",
        }
    }
}

#[derive(Debug, Parser)]
#[command(about = "Nanoseconds per call of rmcp and rig on bench.py's scenarios, as one JSON line")]
struct Args {
    /// The peers to measure, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rmcp,rig")]
    what: Vec<Peer>,
    /// Calls per scenario and repetition (default: $N, else 20000).
    #[arg(long)]
    calls: Option<usize>,
    /// Only this scenario (by its key, e.g. `refund_replay`), for profiling.
    #[arg(long)]
    only: Option<String>,
    /// Serve rmcp's shop server over standard input and output instead of
    /// measuring: the peer of `orders mcp` for `toolcall-mcp`'s `mcp_load`
    /// example (calls per second over a transport).
    #[arg(long)]
    serve_stdio: bool,
    /// Serve rmcp's shop server over streamable HTTP at `http://ADDR/mcp`
    /// instead of measuring: the peer of `orders mcp --http` for
    /// `bench/http/keepalive.py`.
    #[arg(long, value_name = "ADDR")]
    serve_http: Option<std::net::SocketAddr>,
    /// With `--serve-http`: `get_order` reads the orders example's shop in
    /// this database (`sqlite:PATH` or a Postgres URL), opened as `orders
    /// mcp --http --store` opens it, instead of the shop in memory.
    #[arg(long, value_name = "STORE", requires = "serve_http")]
    shop: Option<String>,
    /// Repetitions; the median is printed.
    #[arg(long, default_value_t = 11)]
    repeat: usize,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
}

/// The time of `texts` through rmcp's router over a fresh shop.
fn time_rmcp(scenario: Scenario, texts: &[String]) -> Duration {
    let server = rmcp_peer::ShopServer::new(Arc::new(Shop::bench()));
    let tool = scenario.tool();
    runtime().block_on(async {
        let peer = rmcp_peer::PeerHandle::new();
        let started = Instant::now();
        for (id, raw) in texts.iter().enumerate() {
            let answer = rmcp_peer::call(&server, &peer, id as i64, tool, black_box(raw)).await;
            black_box(answer.ok());
        }
        started.elapsed()
    })
}

/// The time of `texts` through rig's tool set over a fresh shop.
fn time_rig(scenario: Scenario, texts: &[String]) -> Duration {
    let set = rig_peer::toolset(Arc::new(Shop::bench()));
    let tool = scenario.tool();
    let owned: Vec<String> = texts.to_vec();
    runtime().block_on(async {
        let mut context = ToolContext::new();
        let started = Instant::now();
        for raw in owned {
            black_box(rig_peer::call(&set, &mut context, tool, black_box(raw)).await);
        }
        started.elapsed()
    })
}

/// One call with no framework: `Some` answer for a success.
fn direct_call(shop: &Shop, scenario: Scenario, raw: &str) -> Option<Value> {
    if scenario == Scenario::GetOrderOk {
        let args = serde_json::from_str(raw).ok()?;
        serde_json::to_value(domain::get_order(shop, args).ok()?).ok()
    } else {
        let args = serde_json::from_str(raw).ok()?;
        serde_json::to_value(domain::refund_order(shop, args).ok()?).ok()
    }
}

/// The time of `texts` with no framework over a fresh shop.
fn time_direct(scenario: Scenario, texts: &[String]) -> Duration {
    let shop = Shop::bench();
    let started = Instant::now();
    for raw in texts {
        black_box(direct_call(&shop, scenario, black_box(raw)));
    }
    started.elapsed()
}

/// Checks that the first calls of `scenario` answer as the scenario says
/// (success, tool error; the replay applied once), on every peer.
fn verify(scenario: Scenario) -> Result<(), String> {
    let texts = scenario.calls(3);
    let applied_expected = match scenario {
        Scenario::GetOrderOk | Scenario::RefundInvalidArgs => 0,
        Scenario::RefundOkConfirmed => 3,
        Scenario::RefundReplay => 1,
    };
    let applied = |peer: &str, shop: &Shop| match shop.applied_refunds() {
        n if n == applied_expected => Ok(()),
        n => Err(format!("{peer}, {}: {n} refunds applied", scenario.name())),
    };
    let rt = runtime();
    // rmcp
    let shop = Arc::new(Shop::bench());
    let server = rmcp_peer::ShopServer::new(shop.clone());
    rt.block_on(async {
        let peer = rmcp_peer::PeerHandle::new();
        for (i, raw) in texts.iter().enumerate() {
            let answer = rmcp_peer::call(&server, &peer, i as i64, scenario.tool(), raw).await;
            if answer.as_ref().ok() != Some(&scenario.succeeds()) {
                return Err(format!("rmcp, {} call {i}: {answer:?}", scenario.name()));
            }
        }
        Ok(())
    })?;
    applied("rmcp", &shop)?;
    // rig
    let shop = Arc::new(Shop::bench());
    let set = rig_peer::toolset(shop.clone());
    rt.block_on(async {
        let mut context = ToolContext::new();
        for (i, raw) in texts.iter().enumerate() {
            let result = rig_peer::call(&set, &mut context, scenario.tool(), raw.clone()).await;
            if result.is_success() != scenario.succeeds() {
                return Err(format!("rig, {} call {i}: {result:?}", scenario.name()));
            }
        }
        Ok(())
    })?;
    applied("rig", &shop)?;
    // direct
    let shop = Shop::bench();
    for (i, raw) in texts.iter().enumerate() {
        let answer = direct_call(&shop, scenario, raw);
        if answer.is_some() != scenario.succeeds() {
            return Err(format!("direct, {} call {i}: {answer:?}", scenario.name()));
        }
    }
    applied("direct", &shop)?;
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Some(addr) = args.serve_http {
        if let Err(error) = rmcp_peer::serve_http(addr, args.shop.as_deref()) {
            eprintln!("serving over streamable HTTP failed: {error}");
            std::process::exit(1);
        }
        return;
    }
    if args.serve_stdio {
        if let Err(error) = rmcp_peer::serve_stdio() {
            eprintln!("serving over standard input and output failed: {error}");
            std::process::exit(1);
        }
        return;
    }
    let calls = args.calls.unwrap_or_else(|| {
        std::env::var("N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(20_000)
    });
    let scenarios = chosen(args.only.as_deref(), verify);
    let texts: Vec<Vec<String>> = scenarios.iter().map(|s| s.calls(calls)).collect();
    let measure = |peer: Peer, scenario: Scenario, texts: &[String]| match peer {
        Peer::Rmcp => time_rmcp(scenario, texts),
        Peer::Rig => time_rig(scenario, texts),
        Peer::Direct => time_direct(scenario, texts),
    };
    let timed = time_scenarios(&scenarios, &texts, &args.what, args.repeat, measure);
    let mut out = Map::new();
    for (peer, times) in args.what.iter().zip(timed) {
        out.insert(peer.name().into(), Value::Object(times));
    }
    println!("{}", Value::Object(out));
}
