//! `bench.py`'s four scenarios, the texts of their calls byte for byte as
//! `bench.py` sends them, and how a run of them is timed. The peers
//! (`bench/peers`) include this file by its path, so that they time the
//! very calls toolcall's benchmark times, the same way, without depending
//! on toolcall.

use std::time::Duration;

use serde_json::{Map, Value};

/// Orders in the benchmark shop.
pub const ORDERS: usize = 10_000;

/// `ORD-` and the four digits of `i` modulo 10,000.
pub fn order_id(i: usize) -> String {
    format!("ORD-{:04}", i % ORDERS)
}

/// One of `bench.py`'s scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// A valid `get_order`, a different order each call.
    GetOrderOk,
    /// A valid, confirmed `refund_order`, different arguments each call, so
    /// nothing is replayed.
    RefundOkConfirmed,
    /// A `refund_order` with `25.9` cents, `EUR` and an extra field `force`.
    RefundInvalidArgs,
    /// The same confirmed refund every call: the first runs, the rest replay.
    RefundReplay,
}

impl Scenario {
    /// Every scenario, in `bench.py`'s order.
    pub const ALL: [Scenario; 4] = [
        Scenario::GetOrderOk,
        Scenario::RefundOkConfirmed,
        Scenario::RefundInvalidArgs,
        Scenario::RefundReplay,
    ];

    /// Its key in `bench.py`'s output.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::GetOrderOk => "get_order_ok",
            Scenario::RefundOkConfirmed => "refund_ok_confirmed",
            Scenario::RefundInvalidArgs => "refund_invalid_args",
            Scenario::RefundReplay => "refund_replay",
        }
    }

    /// The tool called.
    pub fn tool(self) -> &'static str {
        match self {
            Scenario::GetOrderOk => "get_order",
            _ => "refund_order",
        }
    }

    /// The raw arguments of call `i`, byte for byte what `bench.py` sends.
    pub fn arguments(self, i: usize) -> String {
        match self {
            Scenario::GetOrderOk => format!(r#"{{"order_id": "{}"}}"#, order_id(i)),
            Scenario::RefundOkConfirmed => refund_text(&order_id(i), 1 + i as u64),
            Scenario::RefundInvalidArgs => r#"{"order_id": "ORD-1001", "amount_cents": 25.9, "currency": "EUR", "reason": "damaged", "force": true}"#.to_owned(),
            Scenario::RefundReplay => refund_text("ORD-0001", 100),
        }
    }
}

fn refund_text(order_id: &str, amount_cents: u64) -> String {
    format!(
        r#"{{"order_id": "{order_id}", "amount_cents": {amount_cents}, "currency": "BRL", "reason": "damaged"}}"#
    )
}

/// The scenarios a run asks for: all, or the one named `only`, each checked
/// first with `verify`. Exits 2 when `only` names no scenario, 1 when one
/// does not answer as expected: a benchmark measures the path it claims to.
pub fn chosen(
    only: Option<&str>,
    verify: impl Fn(Scenario) -> Result<(), String>,
) -> Vec<Scenario> {
    let scenarios: Vec<Scenario> = Scenario::ALL
        .into_iter()
        .filter(|s| only.is_none_or(|only| only == s.name()))
        .collect();
    if scenarios.is_empty() {
        eprintln!("no scenario is named {:?}", only.unwrap_or_default());
        std::process::exit(2);
    }
    for &scenario in &scenarios {
        if let Err(problem) = verify(scenario) {
            eprintln!("scenario does not answer as expected: {problem}");
            std::process::exit(1);
        }
    }
    scenarios
}

/// Times each of `what` on each of `scenarios` (whose calls are `texts`),
/// `repeat` times after one untimed round: per `what`, the median
/// nanoseconds per call of each scenario, by its key in `bench.py`'s
/// output. Each repetition runs every scenario and every `what` in turn,
/// so that they share the machine's noise.
pub fn time_scenarios<W: Copy>(
    scenarios: &[Scenario],
    texts: &[Vec<String>],
    what: &[W],
    repeat: usize,
    measure: impl Fn(W, Scenario, &[String]) -> Duration,
) -> Vec<Map<String, Value>> {
    // One untimed round first: page in the code, grow the allocator's pools.
    for (scenario, texts) in scenarios.iter().zip(texts) {
        for &what in what {
            measure(what, *scenario, texts);
        }
    }
    // samples[what][scenario]: one value per repetition.
    let mut samples = vec![vec![Vec::with_capacity(repeat); scenarios.len()]; what.len()];
    for _ in 0..repeat.max(1) {
        for (s, (scenario, texts)) in scenarios.iter().zip(texts).enumerate() {
            for (w, &what) in what.iter().enumerate() {
                let elapsed = measure(what, *scenario, texts);
                samples[w][s].push(ns_per_call(elapsed, texts.len()));
            }
        }
    }
    samples
        .iter_mut()
        .map(|samples| {
            scenarios
                .iter()
                .zip(samples)
                .map(|(scenario, samples)| {
                    let median = median(samples).round() as u64;
                    (scenario.name().to_owned(), Value::from(median))
                })
                .collect()
        })
        .collect()
}

/// Nanoseconds per call.
pub fn ns_per_call(elapsed: Duration, calls: usize) -> f64 {
    elapsed.as_nanos() as f64 / calls.max(1) as f64
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> f64 {
    assert!(!values.is_empty(), "the median of nothing");
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}
