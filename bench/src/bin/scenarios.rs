//! Nanoseconds per call on the reference's four scenarios, printed as one
//! JSON line in the shape `bench.py` prints,
//! `{"get_order_ok": 1234, "refund_ok_confirmed": ..., ...}`, for each thing
//! measured (`--what pipeline,floor` prints two lines, in that order).
//!
//! `pipeline` is `Dispatcher::execute`; `floor` is the typed floor (serde
//! straight into a strict struct, then SHA-256 over it serialized: see the
//! crate's documentation); `ours` is toolcall's own validator and key on
//! the same texts, a breakdown of the pipeline, not a floor.
//!
//! Each repetition runs every scenario once, `--calls` calls each (`bench.py`'s
//! `N`: the environment variable `N`, else 20,000), through a fresh
//! dispatcher, and measures each thing asked for in turn, so that they share
//! the machine's noise; the value printed is the median over `--repeat`
//! repetitions.

use clap::{Parser, ValueEnum};
use serde_json::Value;
use toolcall_bench::{
    Audit, REFERENCE_CALLS, Scenario, chosen, time_floor, time_ours, time_pipeline, time_scenarios,
    verify,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum What {
    /// The full pipeline, `Dispatcher::execute`.
    Pipeline,
    /// The typed floor: serde into a strict struct, then the key.
    Floor,
    /// Ours, not a floor: toolcall's validator (map, generated struct,
    /// unknown fields) and its hex key.
    Ours,
}

#[derive(Debug, Parser)]
#[command(about = "Nanoseconds per call on bench.py's scenarios, as one JSON line")]
struct Args {
    /// What to measure, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "pipeline")]
    what: Vec<What>,
    /// Where the pipeline's audit records go: `memory` (the default sink, as
    /// the reference keeps its log) or `noop`.
    #[arg(long, default_value = "memory")]
    audit: Audit,
    /// Calls per scenario and repetition (default: $N, else 20000).
    #[arg(long)]
    calls: Option<usize>,
    /// Only this scenario (by its key, e.g. `refund_replay`), for profiling.
    #[arg(long)]
    only: Option<String>,
    /// Repetitions; the median is printed.
    #[arg(long, default_value_t = 11)]
    repeat: usize,
}

fn main() {
    let args = Args::parse();
    let calls = args.calls.unwrap_or_else(|| {
        std::env::var("N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(REFERENCE_CALLS)
    });
    let scenarios = chosen(args.only.as_deref(), verify);
    let texts: Vec<Vec<String>> = scenarios.iter().map(|s| s.calls(0, calls)).collect();
    let measure = |what: What, scenario: Scenario, texts: &[String]| match what {
        What::Pipeline => time_pipeline(scenario, texts, args.audit),
        What::Floor => time_floor(scenario, texts),
        What::Ours => time_ours(scenario, texts),
    };
    for times in time_scenarios(&scenarios, &texts, &args.what, args.repeat, measure) {
        println!("{}", Value::Object(times));
    }
}
