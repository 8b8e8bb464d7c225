//! Throughput of one dispatcher shared by 1 and by 2 threads, each thread
//! its own conversation (session) and its own current-thread runtime.
//!
//! For every scenario of `bench.py`, each repetition runs `--calls` calls
//! on one thread, then `--calls` calls on each of two threads at once, each
//! time through a fresh dispatcher, and prints per scenario the median
//! calls per second of each and their ratio, as one JSON line. The same is
//! measured for the typed floor on the same texts (`floor`): work that
//! shares nothing, so its ratio is what the machine gives a second thread,
//! the ceiling of the pipeline's ratio here.
//!
//! On a machine whose cores are busy with other work the ratio says little,
//! so each worker also reads its scheduler statistics
//! (`/proc/thread-self/schedstat`): the CPU time per call, and the shares of
//! its wall time spent waiting for a core (the machine's load) and blocked
//! (waiting on a lock). The same CPU time per call with one thread and with
//! two, and no time blocked, mean the dispatcher itself does not serialize
//! the threads.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Map, Value, json};
use toolcall_bench::{Audit, ORDERS, Scenario, dispatcher, median, runtime, shop, time_floor};

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

/// Nanoseconds this thread has run on a core, and waited for one.
fn schedstat() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut fields = text.split_whitespace().map(|f| f.parse().unwrap_or(0));
    (fields.next().unwrap_or(0), fields.next().unwrap_or(0))
}

/// One run of `threads` threads.
#[derive(Debug, Clone, Copy)]
struct Run {
    calls_per_s: f64,
    cpu_ns_per_call: f64,
    /// Share of the workers' wall time spent waiting for a core.
    waiting: f64,
    /// Share of the workers' wall time neither running nor runnable: blocked.
    blocked: f64,
}

/// How many times the floor goes over its texts: it is some twenty times
/// faster than the pipeline, and one pass would be over before both threads
/// are running.
const FLOOR_PASSES: usize = 20;

/// What the threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// Calls through one shared dispatcher.
    Pipeline,
    /// The typed floor on the same texts: work that shares nothing between
    /// the threads, so its ratio is what this machine gives two threads.
    Floor,
}

/// `threads` threads, each sending `calls` calls of `scenario` in its own
/// session, through one shared dispatcher (or each running the floor).
fn throughput(scenario: Scenario, threads: usize, calls: usize, audit: Audit, work: Work) -> Run {
    let dispatcher = Arc::new(dispatcher(shop(), audit));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let dispatcher = Arc::clone(&dispatcher);
            let barrier = Arc::clone(&barrier);
            // Distinct arguments per thread too, so no refund is shared;
            // and each thread starts on an order the others reach last, so
            // that two threads moving at the same pace never refund the same
            // order at the same moment (a refund locks its order).
            let texts = scenario.calls(t * calls + t * ORDERS / threads, calls);
            thread::spawn(move || {
                let session = format!("conversation-{t}");
                let runtime = runtime();
                barrier.wait();
                let (ran, waited) = schedstat();
                let started = Instant::now();
                match work {
                    Work::Pipeline => runtime.block_on(async {
                        for raw in &texts {
                            let call = toolcall::Call::new(scenario.tool(), raw.as_str())
                                .session(&session)
                                .confirmed(scenario.confirmed());
                            std::hint::black_box(dispatcher.execute(call).await);
                        }
                    }),
                    Work::Floor => {
                        for _ in 0..FLOOR_PASSES {
                            time_floor(scenario, &texts);
                        }
                    }
                }
                let wall = started.elapsed().as_nanos() as u64;
                let (ran_after, waited_after) = schedstat();
                (Instant::now(), wall, ran_after - ran, waited_after - waited)
            })
        })
        .collect();
    barrier.wait();
    let started = Instant::now();
    let calls = calls * if work == Work::Floor { FLOOR_PASSES } else { 1 };
    let results: Vec<_> = workers
        .into_iter()
        .map(|w| w.join().expect("a worker panicked"))
        .collect();
    let finished = results.iter().map(|r| r.0).max().unwrap_or(started);
    let elapsed = finished
        .duration_since(started)
        .max(Duration::from_nanos(1));
    let wall: u64 = results.iter().map(|r| r.1).sum::<u64>().max(1);
    let ran: u64 = results.iter().map(|r| r.2).sum();
    let waited: u64 = results.iter().map(|r| r.3).sum();
    Run {
        calls_per_s: (threads * calls) as f64 / elapsed.as_secs_f64(),
        cpu_ns_per_call: ran as f64 / (threads * calls) as f64,
        waiting: waited as f64 / wall as f64,
        blocked: wall.saturating_sub(ran + waited) as f64 / wall as f64,
    }
}

/// The median of each measure over the runs.
fn medians(runs: &[Run]) -> Value {
    let of = |f: fn(&Run) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    let round = |x: f64, places: i32| (x * 10f64.powi(places)).round() / 10f64.powi(places);
    json!({
        "calls_per_s": round(of(|r| r.calls_per_s), 0),
        "cpu_ns_per_call": round(of(|r| r.cpu_ns_per_call), 0),
        "waiting_for_a_core": round(of(|r| r.waiting), 2),
        "blocked": round(of(|r| r.blocked), 2),
    })
}

fn main() {
    let args = Args::parse();
    let mut out = Map::new();
    for scenario in Scenario::ALL {
        let mut entry = Map::new();
        for (name, work) in [("pipeline", Work::Pipeline), ("floor", Work::Floor)] {
            let (mut one, mut two) = (Vec::new(), Vec::new());
            throughput(scenario, 2, args.calls / 10 + 1, args.audit, work); // warm-up
            for _ in 0..args.repeat.max(1) {
                one.push(throughput(scenario, 1, args.calls, args.audit, work));
                two.push(throughput(scenario, 2, args.calls, args.audit, work));
            }
            let rate =
                |runs: &[Run]| median(&mut runs.iter().map(|r| r.calls_per_s).collect::<Vec<_>>());
            let scaling = rate(&two) / rate(&one);
            entry.insert(
                name.into(),
                json!({
                    "1_thread": medians(&one),
                    "2_threads": medians(&two),
                    "scaling": (scaling * 100.0).round() / 100.0,
                }),
            );
        }
        out.insert(scenario.name().into(), Value::Object(entry));
    }
    println!("{}", Value::Object(out));
}
