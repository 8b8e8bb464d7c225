//! Throughput of one dispatcher shared by 1 and by 2 threads, each thread
//! its own conversation (session) and its own current-thread runtime.
//!
//! For every scenario of `bench.py`, each repetition runs `--calls` calls
//! on one thread, then `--calls` calls on each of two threads at once, each
//! time through a fresh dispatcher, and prints per scenario the median
//! calls per second of each and their ratio, as one JSON line.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Map, Value, json};
use toolcall_bench::{Audit, Scenario, dispatcher, median, runtime, shop};

#[derive(Debug, Parser)]
#[command(about = "Calls per second with 1 and 2 threads on distinct sessions")]
struct Args {
    /// Calls per thread and run.
    #[arg(long, default_value_t = 100_000)]
    calls: usize,
    /// Repetitions; the medians are printed.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// `noop` (the dispatcher alone) or `memory` (one shared in-memory log).
    #[arg(long, default_value = "noop")]
    audit: Audit,
}

/// Calls per second of `threads` threads, each sending `calls` calls of
/// `scenario` in its own session, through one shared dispatcher.
fn throughput(scenario: Scenario, threads: usize, calls: usize, audit: Audit) -> f64 {
    let dispatcher = Arc::new(dispatcher(shop(), audit));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let dispatcher = Arc::clone(&dispatcher);
            let barrier = Arc::clone(&barrier);
            // Distinct arguments per thread too, so no refund is shared.
            let texts = scenario.calls(t * calls, calls);
            thread::spawn(move || {
                let session = format!("conversation-{t}");
                let runtime = runtime();
                barrier.wait();
                runtime.block_on(async {
                    for raw in &texts {
                        let call = toolcall::Call::new(scenario.tool(), raw.as_str())
                            .session(&session)
                            .confirmed(scenario.confirmed());
                        std::hint::black_box(dispatcher.execute(call).await);
                    }
                });
                Instant::now()
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let finished = workers
        .into_iter()
        .map(|w| w.join().expect("a worker panicked"))
        .max()
        .unwrap_or(started);
    let elapsed = finished
        .duration_since(started)
        .max(Duration::from_nanos(1));
    (threads * calls) as f64 / elapsed.as_secs_f64()
}

fn main() {
    let args = Args::parse();
    let mut out = Map::new();
    for scenario in Scenario::ALL {
        let (mut one, mut two) = (Vec::new(), Vec::new());
        throughput(scenario, 2, args.calls / 10 + 1, args.audit); // warm-up
        for _ in 0..args.repeat.max(1) {
            one.push(throughput(scenario, 1, args.calls, args.audit));
            two.push(throughput(scenario, 2, args.calls, args.audit));
        }
        let (one, two) = (median(&mut one), median(&mut two));
        out.insert(
            scenario.name().into(),
            json!({
                "calls_per_s_1_thread": one.round(),
                "calls_per_s_2_threads": two.round(),
                "scaling": (two / one * 100.0).round() / 100.0,
            }),
        );
    }
    println!("{}", Value::Object(out));
}
