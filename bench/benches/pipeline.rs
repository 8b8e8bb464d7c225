//! Criterion benchmarks of the full pipeline, of the typed floor and of
//! toolcall's own validator ("ours"), on the reference's four scenarios,
//! and of the floor and of ours step by step.
//!
//! ```sh
//! cargo bench -p toolcall-bench                       # everything
//! cargo bench -p toolcall-bench -- pipeline/refund    # a filter
//! cargo bench -p toolcall-bench -- floor_parts        # the steps
//! ```
//!
//! Groups: `pipeline` and `pipeline_noop_audit` (`Dispatcher::execute`),
//! `floor` (the typed floor: serde straight into a strict struct, SHA-256
//! over it serialized; see the crate's documentation), `ours` (toolcall's
//! validator and hex key, the former floor: a breakdown, not a floor) and
//! `floor_parts` (`typed_*` steps of the floor, `ours_*` steps of ours, and
//! two ways to hex-encode a digest).
//!
//! Each sample builds a fresh shop and dispatcher and the argument texts
//! before the clock starts, then sends the sample's calls inside one
//! `block_on` of a current-thread runtime: the time is the pipeline's, not
//! the runtime's entry and exit per call (see BENCHMARKS.md).

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use orders::RefundOrderArgs;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolcall::__private::ToolArgs;
use toolcall::FieldErrors;
use toolcall_bench::{
    Audit, SESSION, Scenario, TypedRefund, key_of, time_floor, time_ours, time_pipeline,
};
use toolcall_core::canonical::{canonical_json, idempotency_key};

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
    for (group, time) in [
        ("floor", time_floor as fn(Scenario, &[String]) -> Duration),
        ("ours", time_ours),
    ] {
        let mut group = c.benchmark_group(group);
        for scenario in Scenario::ALL {
            group.bench_function(scenario.name(), |b| {
                b.iter_custom(|iters| {
                    let calls = scenario.calls(0, iters as usize);
                    black_box(time(scenario, &calls))
                })
            });
        }
        group.finish();
    }
}

/// One valid refund (and the invalid one), step by step: the typed floor's
/// steps (`typed_*`), ours (`ours_*`: toolcall's validator and key, not a
/// floor), and the hex encoding of a digest done as
/// `canonical::idempotency_key` does it (`write!` per byte) and with a
/// table, to size that step.
fn floor_parts(c: &mut Criterion) {
    let raw = Scenario::RefundOkConfirmed.arguments(1234);
    let invalid = Scenario::RefundInvalidArgs.arguments(0);
    let typed: TypedRefund = serde_json::from_str(&raw).unwrap();
    let mut prefixed = format!("{SESSION}|refund_order|").into_bytes();
    serde_json::to_writer(&mut prefixed, &typed).unwrap();
    let object: Map<String, Value> = serde_json::from_str(&raw).unwrap();
    let args = RefundOrderArgs::from_object(&object, &mut FieldErrors::default()).unwrap();
    let value = serde_json::to_value(&args).unwrap();
    let digest: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
    let mut group = c.benchmark_group("floor_parts");
    group.bench_function("typed_parse", |b| {
        b.iter(|| serde_json::from_str::<TypedRefund>(black_box(&raw)))
    });
    group.bench_function("typed_parse_invalid", |b| {
        b.iter(|| serde_json::from_str::<TypedRefund>(black_box(&invalid)).is_err())
    });
    // The key's two halves, apart: the floor streams one into the other.
    group.bench_function("typed_serialize", |b| {
        b.iter(|| {
            let mut bytes = Vec::with_capacity(128);
            bytes.extend_from_slice(SESSION.as_bytes());
            bytes.extend_from_slice(b"|refund_order|");
            serde_json::to_writer(&mut bytes, black_box(&typed)).unwrap();
            bytes
        })
    });
    group.bench_function("typed_sha256", |b| {
        b.iter(|| Sha256::digest(black_box(&prefixed)))
    });
    group.bench_function("typed_key", |b| {
        b.iter(|| key_of("refund_order", black_box(&typed)))
    });
    group.bench_function("ours_parse_map", |b| {
        b.iter(|| serde_json::from_str::<Map<String, Value>>(black_box(&raw)))
    });
    group.bench_function("ours_from_object", |b| {
        b.iter(|| RefundOrderArgs::from_object(black_box(&object), &mut FieldErrors::default()))
    });
    group.bench_function("ours_to_value", |b| {
        b.iter(|| serde_json::to_value(black_box(&args)))
    });
    group.bench_function("ours_canonical_json", |b| {
        b.iter(|| canonical_json(black_box(&value)))
    });
    group.bench_function("ours_idempotency_key", |b| {
        b.iter(|| idempotency_key("default", SESSION, "refund_order", black_box(&value)))
    });
    group.bench_function("hex_with_write", |b| {
        b.iter(|| {
            let mut hex = String::with_capacity(64);
            for byte in black_box(&digest) {
                let _ = write!(hex, "{byte:02x}");
            }
            hex
        })
    });
    group.bench_function("hex_with_table", |b| {
        b.iter(|| {
            const DIGITS: &[u8; 16] = b"0123456789abcdef";
            let mut hex = String::with_capacity(64);
            for &byte in black_box(&digest) {
                hex.push(DIGITS[usize::from(byte >> 4)] as char);
                hex.push(DIGITS[usize::from(byte & 15)] as char);
            }
            hex
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = pipeline, floor, floor_parts
}
criterion_main!(benches);
