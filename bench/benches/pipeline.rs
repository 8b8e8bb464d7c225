//! Criterion benchmarks of the full pipeline and of the floor, on the
//! reference's four scenarios.
//!
//! ```sh
//! cargo bench -p toolcall-bench                       # everything
//! cargo bench -p toolcall-bench -- pipeline/refund    # a filter
//! ```
//!
//! Each sample builds a fresh shop and dispatcher and the argument texts
//! before the clock starts, then sends the sample's calls inside one
//! `block_on` of a current-thread runtime: the time is the pipeline's, not
//! the runtime's entry and exit per call (see BENCHMARKS.md).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use toolcall_bench::{Audit, Scenario, time_floor, time_pipeline};

fn pipeline(c: &mut Criterion) {
    for (group, audit) in [
        ("pipeline", Audit::Memory),
        ("pipeline_noop_audit", Audit::Noop),
    ] {
        let mut group = c.benchmark_group(group);
        for scenario in Scenario::ALL {
            group.bench_function(scenario.name(), |b| {
                b.iter_custom(|iters| {
                    let calls = scenario.calls(0, iters as usize);
                    time_pipeline(scenario, &calls, audit)
                })
            });
        }
        group.finish();
    }
}

fn floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("floor");
    for scenario in Scenario::ALL {
        group.bench_function(scenario.name(), |b| {
            b.iter_custom(|iters| {
                let calls = scenario.calls(0, iters as usize);
                black_box(time_floor(scenario, &calls))
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = pipeline, floor
}
criterion_main!(benches);
