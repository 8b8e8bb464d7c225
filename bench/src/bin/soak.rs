//! Memory soak: many calls over many sessions through one dispatcher (audit
//! records dropped, unless `--audit memory` keeps them in the default
//! in-memory log), printing the resident memory (`VmRSS`) as it goes, one
//! JSON line per report and a summary line at the end.
//!
//! Call `i` belongs to conversation `i / calls-per-session`. With
//! `--sessions S` (default 10,000) conversation `c` is session `c % S`: a
//! fixed set of sessions, each repeating the same calls, so the store must
//! stop growing once every session has been seen. With `--sessions 0`
//! every conversation is a new session, forever: the store keeps each one
//! until its retention window (24 h) or its capacity per kind of entry
//! (1,000,000 by default, the oldest dropped first) ends it, so memory
//! grows with the calls until every kind is at its capacity.
//!
//! Within a conversation, even calls are `get_order` on the session's order
//! and odd calls are confirmed refunds of 1, 2, 3, ... cents on it.
//!
//! The example's backend remembers the idempotency key of every refund it
//! applied, forever; the soak makes it forget them at each report (as a
//! gateway does after its retention window), so that what grows is the
//! dispatcher's, not the example's. `--keep-backend-keys` keeps them.

use std::time::Instant;

use clap::Parser;
use serde_json::json;
use toolcall::Call;
use toolcall_bench::{Audit, dispatcher, order_id, resident_bytes, runtime, shop};

#[derive(Debug, Parser)]
#[command(about = "Resident memory over many calls through one dispatcher")]
struct Args {
    /// Calls in total.
    #[arg(long, default_value_t = 10_000_000)]
    calls: u64,
    /// Distinct sessions, reused in turn; 0 for a new session per conversation.
    #[arg(long, default_value_t = 10_000)]
    sessions: u64,
    /// Calls per conversation.
    #[arg(long, default_value_t = 10)]
    calls_per_session: u64,
    /// Reports in total (one every calls / reports calls).
    #[arg(long, default_value_t = 20)]
    reports: u64,
    /// `noop` (records dropped) or `memory` (the default in-memory log, which keeps the last 10,000).
    #[arg(long, default_value = "noop")]
    audit: Audit,
    /// Keep every idempotency key the example's backend has seen. By
    /// default it forgets them at each report, as a gateway does after its
    /// retention window: its table of keys (one per refund, forever) is the
    /// example's memory, not the dispatcher's, and would otherwise be a
    /// third of what this measures with new sessions.
    #[arg(long)]
    keep_backend_keys: bool,
}

fn mib(bytes: u64) -> f64 {
    (bytes as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0
}

fn main() {
    let args = Args::parse();
    let per_session = args.calls_per_session.max(1);
    let every = (args.calls / args.reports.max(1)).max(1);
    let shop = shop();
    let dispatcher = dispatcher(std::sync::Arc::clone(&shop), args.audit);
    let mut backend_keys = 0usize;
    let runtime = runtime();
    let rss = || resident_bytes().unwrap_or(0);
    let start_rss = rss();
    let started = Instant::now();
    let (mut last_rss, mut last_calls) = (start_rss, 0u64);
    let mut failures = 0u64;
    println!(
        "{}",
        json!({"calls": 0, "rss_mib": mib(start_rss), "sessions": args.sessions, "calls_per_session": per_session, "audit": format!("{:?}", args.audit)})
    );
    runtime.block_on(async {
        let mut session = String::new();
        for i in 0..args.calls {
            let conversation = i / per_session;
            let index = match args.sessions {
                0 => conversation,
                n => conversation % n,
            };
            let position = i % per_session;
            if position == 0 {
                session = format!("conversation-{index}");
            }
            let order = order_id(index as usize);
            let (tool, raw) = if position % 2 == 0 {
                ("get_order", format!(r#"{{"order_id": "{order}"}}"#))
            } else {
                let cents = position / 2 + 1;
                (
                    "refund_order",
                    format!(
                        r#"{{"order_id": "{order}", "amount_cents": {cents}, "currency": "BRL", "reason": "damaged"}}"#
                    ),
                )
            };
            let call = Call::new(tool, raw.as_str()).session(&session).confirmed(true);
            if !dispatcher.execute(call).await.ok {
                failures += 1;
            }
            let done = i + 1;
            if done % every == 0 || done == args.calls {
                if !args.keep_backend_keys {
                    backend_keys += shop.forget_applied_keys();
                }
                let now = rss();
                let growth = now as f64 - last_rss as f64;
                println!(
                    "{}",
                    json!({
                        "calls": done,
                        "elapsed_s": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
                        "rss_mib": mib(now),
                        "bytes_per_call": (growth / (done - last_calls) as f64).round(),
                    })
                );
                last_rss = now;
                last_calls = done;
            }
        }
    });
    let end_rss = rss();
    let conversations = args.calls.div_ceil(per_session);
    let sessions = match args.sessions {
        0 => conversations,
        n => n.min(conversations),
    };
    println!(
        "{}",
        json!({
            "summary": true,
            "calls": args.calls,
            "sessions_stored": sessions,
            "failed_calls": failures,
            "backend_keys_forgotten": backend_keys,
            "rss_start_mib": mib(start_rss),
            "rss_end_mib": mib(end_rss),
            "bytes_per_call": ((end_rss as f64 - start_rss as f64) / args.calls.max(1) as f64).round(),
            "bytes_per_session": ((end_rss as f64 - start_rss as f64) / sessions.max(1) as f64).round(),
            "ns_per_call": (started.elapsed().as_nanos() as f64 / args.calls.max(1) as f64).round(),
        })
    );
}
