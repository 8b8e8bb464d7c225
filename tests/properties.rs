//! Properties of the idempotency key and of side effects, over generated
//! calls:
//!
//! * the key of a call does not change with the member order, white space
//!   or string escapes of the raw JSON, and differs for different validated
//!   arguments;
//! * no call the pipeline refuses has a side effect (the fuzz harness's
//!   checks, on generated conversations);
//! * whatever the sequence of calls, a side effect completes at most once
//!   per idempotency key, and so do two identical calls in flight at once;
//! * a number is keyed as the double nearest to its text, however it is
//!   written (`1e2`, `100.0`, `100`, `10000e-2`, long fractions);
//! * the inputs kept from fuzzing (`fuzz/seeds`, `fuzz/regressions`) pass.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orders::{Currency, RefundReason};
use proptest::prelude::*;
use serde_json::{Value, json};
use toolcall::{Call, Code, Ctx, Dispatcher, ToolError, ToolResult, tool, tools};
use toolcall_core::canonical::idempotency_key;
use toolcall_testkit::run::one_thread as runtime;

#[path = "../fuzz/harness.rs"]
mod harness;
#[path = "../toolcall-core/tests/support/numbers.rs"]
mod numbers;
use numbers::{ONE_HUNDRED, forms_of, number_text};

// ------------------------------------------------------- a recording tool

/// A payment backend that does not deduplicate: it counts, per idempotency
/// key, the payments it completed. It can be told to fail its next calls
/// before doing anything (a transient error the dispatcher retries).
#[derive(Debug, Default)]
struct Ledger {
    completed: Mutex<HashMap<String, u32>>,
    keys: Mutex<Vec<String>>,
    fail_next: AtomicU32,
}

impl Ledger {
    fn completed(&self) -> HashMap<String, u32> {
        self.completed.lock().unwrap().clone()
    }

    fn last_key(&self) -> Option<String> {
        self.keys.lock().unwrap().last().cloned()
    }
}

/// Pays a saved payee. Amount in cents.
#[tool(side_effect)]
fn pay(
    ctx: &Ctx<Ledger>,
    /// Payee id, for example P-07.
    #[arg(pattern = r"^P-[0-9]{2}$")]
    payee: String,
    /// Amount in cents.
    #[arg(min = 1)]
    amount_cents: i64,
    /// The payment's currency.
    currency: Currency,
    /// Why the payment is made.
    reason: RefundReason,
) -> Result<Value, ToolError> {
    let ledger = &ctx.state;
    let key = ctx.idempotency_key.to_string();
    ledger.keys.lock().unwrap().push(key.clone());
    if ledger
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(ToolError::transient("the ledger is busy"));
    }
    *ledger.completed.lock().unwrap().entry(key).or_default() += 1;
    Ok(json!({"payee": payee, "paid_cents": amount_cents, "currency": currency, "reason": reason}))
}

/// `pay`, but it waits for the runtime once before paying, as a real
/// backend call would.
#[tool(side_effect)]
async fn pay_slowly(
    ctx: &Ctx<Ledger>,
    /// Payee id, for example P-07.
    #[arg(pattern = r"^P-[0-9]{2}$")]
    payee: String,
) -> Result<Value, ToolError> {
    tokio::task::yield_now().await;
    let key = ctx.idempotency_key.to_string();
    *ctx.state.completed.lock().unwrap().entry(key).or_default() += 1;
    Ok(json!({"payee": payee}))
}

fn ledger_dispatcher(ledger: &Arc<Ledger>) -> Dispatcher<Ledger> {
    Dispatcher::builder(tools![pay].unwrap(), Arc::clone(ledger))
        .max_steps(1_000)
        .retry_backoff(Duration::ZERO)
        .build()
        .unwrap()
}

fn execute<S: Send + Sync + 'static>(
    runtime: &tokio::runtime::Runtime,
    dispatcher: &Dispatcher<S>,
    session: &str,
    raw: &str,
) -> ToolResult {
    runtime.block_on(dispatcher.execute(Call::new("pay", raw).session(session)))
}

// ------------------------------------------------- generated arguments

/// Valid arguments of `pay`, as the argument struct serializes them.
fn payment() -> impl Strategy<Value = Value> {
    (
        "P-[0-9]{2}",
        1i64..=i64::MAX,
        prop_oneof![Just("BRL"), Just("USD")],
        prop_oneof![
            Just("damaged"),
            Just("not_delivered"),
            Just("customer_request")
        ],
    )
        .prop_map(|(payee, amount, currency, reason)| {
            json!({"payee": payee, "amount_cents": amount, "currency": currency, "reason": reason})
        })
}

/// One way to write `value` as JSON text: members in the order given by
/// `order`, white space from `spaces` between tokens, and some string
/// characters written as `\uXXXX` escapes.
fn render(value: &Value, order: &[usize], spaces: &[&str], escapes: &[bool]) -> String {
    let object = value.as_object().expect("an object");
    let members: Vec<(&String, &Value)> = object.iter().collect();
    let mut space = spaces.iter().cycle();
    let mut escape = escapes.iter().cycle();
    let mut string = |text: &str| {
        let mut out = String::from("\"");
        for c in text.chars() {
            if *escape.next().unwrap_or(&false) {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                out.push(c);
            }
        }
        out.push('"');
        out
    };
    let mut out = String::new();
    out.push_str(space.next().unwrap());
    out.push('{');
    for (n, &i) in order.iter().enumerate() {
        let (name, item) = members[i % members.len()];
        if n > 0 {
            out.push(',');
        }
        out.push_str(space.next().unwrap());
        out.push_str(&string(name));
        out.push_str(space.next().unwrap());
        out.push(':');
        out.push_str(space.next().unwrap());
        match item {
            Value::String(text) => out.push_str(&string(text)),
            other => out.push_str(&other.to_string()),
        }
        out.push_str(space.next().unwrap());
    }
    out.push('}');
    out.push_str(space.next().unwrap());
    out
}

/// `value` written twice, each time with its own member order, white space
/// and escapes.
fn two_renderings() -> impl Strategy<Value = (Value, String, String)> {
    let form = || {
        (
            Just((0..4).collect::<Vec<usize>>()).prop_shuffle(),
            prop::collection::vec(
                prop_oneof![Just(""), Just(" "), Just("\n"), Just("\t "), Just("\r\n")],
                1..12,
            ),
            prop::collection::vec(prop::bool::weighted(0.2), 1..8),
        )
    };
    (payment(), form(), form()).prop_map(|(value, (o1, s1, e1), (o2, s2, e2))| {
        let first = render(&value, &o1, &s1, &e1);
        let second = render(&value, &o2, &s2, &e2);
        (value, first, second)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Member order, white space and escapes do not make two calls out of one.
    #[test]
    fn the_key_ignores_member_order_white_space_and_escapes(
        (value, first, second) in two_renderings(),
    ) {
        let runtime = runtime();
        let ledger = Arc::new(Ledger::default());
        let dispatcher = ledger_dispatcher(&ledger);
        let one = execute(&runtime, &dispatcher, "s", &first);
        prop_assert!(one.ok, "{first} -> {one:?}");
        let key = ledger.last_key().unwrap();
        prop_assert_eq!(&key, &idempotency_key("default", "s", "pay", &value), "the documented key");
        let two = execute(&runtime, &dispatcher, "s", &second);
        prop_assert!(two.ok && two.replayed, "{second} is the same call as {first}: {two:?}");
        prop_assert_eq!(ledger.completed().len(), 1);
    }

    /// Different validated arguments, or another session, are another call.
    #[test]
    fn different_validated_arguments_give_different_keys(
        a in payment(),
        b in payment(),
    ) {
        prop_assume!(a != b);
        let runtime = runtime();
        let ledger = Arc::new(Ledger::default());
        let dispatcher = ledger_dispatcher(&ledger);
        let mut keys = Vec::new();
        for (session, value) in [("s", &a), ("s", &b), ("t", &a)] {
            let result = execute(&runtime, &dispatcher, session, &value.to_string());
            prop_assert!(result.ok && !result.replayed, "{value} -> {result:?}");
            keys.push(ledger.last_key().unwrap());
        }
        prop_assert!(keys[0] != keys[1] && keys[0] != keys[2] && keys[1] != keys[2], "{keys:?}");
    }
}

// ------------------------------------ the fast path agrees with the full one

/// One member's text: valid values and near misses of every kind the full
/// parse and validation tell apart (types, bounds, patterns, nulls, nesting,
/// braces in strings, escapes, numbers written as floats).
fn member_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "P-[0-9]{2}".prop_map(|p| format!("\"{p}\"")),
        Just(r#""P-\u0030\u0037""#.to_owned()),
        Just(r#""P-7""#.to_owned()),
        Just(r#""{P-07}""#.to_owned()),
        (1i64..=i64::MAX).prop_map(|n| n.to_string()),
        (i64::MIN..=0i64).prop_map(|n| n.to_string()),
        Just("25.9".to_owned()),
        Just("2590.0".to_owned()),
        Just("1e3".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just(r#""BRL""#.to_owned()),
        Just(r#""usd""#.to_owned()),
        Just(r#""damaged""#.to_owned()),
        Just(r#""customer_request""#.to_owned()),
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just("[1, [2, [3]]]".to_owned()),
        Just(r#"{"a": 1}"#.to_owned()),
        Just(r#"{"a": 1, "a": 2}"#.to_owned()),
        // Text a raw value lets through and the full parse refuses.
        Just("1e400".to_owned()),
        Just(r#""\ud800""#.to_owned()),
        Just(r#"["x", -1e999]"#.to_owned()),
    ]
}

/// Argument texts: the four fields (each sometimes left out) with any of
/// those values, sometimes a member that is no field, in any order.
fn argument_text() -> impl Strategy<Value = String> {
    let names = [
        "payee",
        "amount_cents",
        "currency",
        "reason",
        "memo",
        "Amount",
    ];
    let valid = |field: usize| -> BoxedStrategy<String> {
        match field {
            0 => "P-[0-9]{2}".prop_map(|p| format!("\"{p}\"")).boxed(),
            1 => (1i64..=i64::MAX).prop_map(|n| n.to_string()).boxed(),
            2 => prop_oneof![Just(r#""BRL""#.to_owned()), Just(r#""USD""#.to_owned())].boxed(),
            _ => prop_oneof![
                Just(r#""damaged""#.to_owned()),
                Just(r#""not_delivered""#.to_owned())
            ]
            .boxed(),
        }
    };
    // Each field mostly valid, so that whole calls often are.
    let field = move |i: usize| prop_oneof![8 => valid(i), 2 => member_text()];
    (
        (
            (any::<bool>(), field(0)),
            (any::<bool>(), field(1)),
            (any::<bool>(), field(2)),
            (any::<bool>(), field(3)),
            (prop::bool::weighted(0.15), member_text()),
            (prop::bool::weighted(0.15), member_text()),
        )
            .prop_map(|(a, b, c, d, e, f)| vec![a, b, c, d, e, f]),
        Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
    )
        .prop_map(move |(members, order)| {
            let parts: Vec<String> = order
                .iter()
                .filter(|&&i| {
                    if i < 4 {
                        members[i].0 || members[i].1.len() % 7 != 0
                    } else {
                        members[i].0
                    }
                })
                .map(|&i| format!("\"{}\": {}", names[i], members[i].1))
                .collect();
            format!("{{{}}}", parts.join(", "))
        })
}

/// How many generated calls were accepted: the property must see valid calls too.
static ACCEPTED: AtomicU32 = AtomicU32::new(0);

#[test]
fn the_same_answer_property_sees_accepted_calls() {
    raw_and_parsed_arguments_get_the_same_answer();
    assert!(
        ACCEPTED.load(Ordering::Relaxed) >= 50,
        "{}",
        ACCEPTED.load(Ordering::Relaxed)
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The dispatcher reads raw arguments in one pass when it can, and a
    /// parsed object always the full way: the same arguments, raw or
    /// parsed, get the same answer, the same key and the same payments.
    #[test]
    fn raw_and_parsed_arguments_get_the_same_answer(text in argument_text()) {
        let runtime = runtime();
        if text.contains(r#""a": 1, "a": 2"#) {
            // A parsed object cannot hold a duplicate member: raw, it is refused.
            let ledger = Arc::new(Ledger::default());
            let result = runtime.block_on(ledger_dispatcher(&ledger).execute(Call::new("pay", text.as_str()).session("default")));
            prop_assert_eq!(&result.code, &Code::InvalidJson, "{}", text);
            return Ok(());
        }
        let Ok(parsed) = serde_json::from_str::<Value>(&text) else {
            // A number out of range, a lone surrogate: not JSON a parser
            // keeps, whichever way the dispatcher reads the rest.
            let ledger = Arc::new(Ledger::default());
            let result = runtime.block_on(ledger_dispatcher(&ledger).execute(Call::new("pay", text.as_str()).session("default")));
            prop_assert_eq!(&result.code, &Code::InvalidJson, "{}", text);
            prop_assert!(ledger.completed().is_empty());
            return Ok(());
        };
        let (raw_ledger, parsed_ledger) = (Arc::new(Ledger::default()), Arc::new(Ledger::default()));
        let raw_dispatcher = ledger_dispatcher(&raw_ledger);
        let parsed_dispatcher = ledger_dispatcher(&parsed_ledger);
        let from_raw = runtime.block_on(raw_dispatcher.execute(Call::new("pay", text.as_str()).session("default")));
        let from_parsed = runtime.block_on(parsed_dispatcher.execute(Call::new("pay", &parsed).session("default")));
        prop_assert_eq!(from_raw.ok, from_parsed.ok, "{} -> {:?} / {:?}", text, from_raw, from_parsed);
        prop_assert_eq!(&from_raw.code, &from_parsed.code, "{}", text);
        prop_assert_eq!(from_raw.to_model_text(), from_parsed.to_model_text(), "{}", text);
        prop_assert_eq!(raw_ledger.last_key(), parsed_ledger.last_key(), "{}", text);
        prop_assert_eq!(raw_ledger.completed().len(), parsed_ledger.completed().len());
        ACCEPTED.fetch_add(u32::from(from_raw.ok), Ordering::Relaxed);
    }
}

// ------------------------------------------- at most one effect per key

#[derive(Debug, Clone)]
enum Step {
    /// Pay arguments number `n` of a small pool, written in form `form`.
    Pay {
        session: bool,
        n: usize,
        form: usize,
    },
    /// Raw text that is anything but valid arguments.
    Junk { session: bool, text: String },
    /// Make the ledger fail its next calls before doing anything.
    FailNext(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (any::<bool>(), 0usize..6, 0usize..4).prop_map(|(session, n, form)| Step::Pay { session, n, form }),
        2 => (any::<bool>(), prop_oneof![
            Just(r#"{"payee": "P-01", "amount_cents": 25.9, "currency": "BRL", "reason": "damaged"}"#.to_owned()),
            Just(r#"{"payee": "P-1", "amount_cents": 100, "currency": "BRL", "reason": "damaged"}"#.to_owned()),
            Just(r#"{"payee": "P-01", "amount_cents": 0, "currency": "EUR", "reason": "damaged"}"#.to_owned()),
            Just(r#"{"payee": "P-01", "payee": "P-02", "amount_cents": 1, "currency": "BRL", "reason": "damaged"}"#.to_owned()),
            "\\PC{0,30}",
        ]).prop_map(|(session, text)| Step::Junk { session, text }),
        1 => (0u32..5).prop_map(Step::FailNext),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Repeats, rewritten repeats, junk, loops and transient failures in two
    /// sessions: the ledger completes each idempotency key at most once, and
    /// every successful answer stands for exactly one completion.
    #[test]
    fn at_most_one_side_effect_per_idempotency_key(
        pool in prop::collection::vec(payment(), 6),
        steps in prop::collection::vec(step(), 1..40),
    ) {
        let runtime = runtime();
        let ledger = Arc::new(Ledger::default());
        let dispatcher = ledger_dispatcher(&ledger);
        let forms = [
            (vec![0, 1, 2, 3], vec![""], vec![false]),
            (vec![3, 2, 1, 0], vec![" ", "\n"], vec![false]),
            (vec![1, 3, 0, 2], vec!["\t"], vec![true, false, false]),
            (vec![2, 0, 3, 1], vec!["", "  "], vec![false, true]),
        ];
        for step in &steps {
            let (session, raw, key) = match step {
                Step::FailNext(n) => {
                    ledger.fail_next.store(*n, Ordering::SeqCst);
                    continue;
                }
                Step::Pay { session, n, form } => {
                    let session = if *session { "b" } else { "a" };
                    let (order, spaces, escapes) = &forms[*form];
                    let raw = render(&pool[*n], order, spaces, escapes);
                    (session, raw, Some(idempotency_key("default", session, "pay", &pool[*n])))
                }
                Step::Junk { session, text } => (if *session { "b" } else { "a" }, text.clone(), None),
            };
            let before = ledger.completed();
            let result = execute(&runtime, &dispatcher, session, &raw);
            let after = ledger.completed();
            for (k, &count) in &after {
                prop_assert!(count <= 1, "key {k} completed {count} times");
            }
            let new: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
            match (&key, result.ok && !result.replayed) {
                (Some(key), true) => prop_assert_eq!(new, vec![key], "{:?}", result),
                _ => prop_assert!(new.is_empty(), "{raw} -> {result:?} completed {new:?}"),
            }
            if result.ok {
                let key = key.as_ref().expect("only valid arguments succeed");
                prop_assert_eq!(after.get(key), Some(&1), "an ok answer without its effect");
            }
            if key.is_none() {
                prop_assert!(matches!(result.code, Code::InvalidJson | Code::InvalidArguments), "{result:?}");
            }
        }
    }
}

/// Two identical calls in flight at once (a model's parallel tool calls, or
/// a host retrying before the first answer): one claims the key and runs,
/// the other must not run the handler too.
#[test]
fn concurrent_identical_calls_complete_once() {
    let runtime = runtime();
    let ledger = Arc::new(Ledger::default());
    let dispatcher = Dispatcher::builder(tools![pay_slowly].unwrap(), Arc::clone(&ledger))
        .build()
        .unwrap();
    let call = Call::new("pay_slowly", r#"{"payee": "P-01"}"#).session("default");
    let (one, two) = runtime
        .block_on(async { tokio::join!(dispatcher.execute(call), dispatcher.execute(call)) });
    assert!(one.ok || two.ok, "{one:?} {two:?}");
    let completed = ledger.completed();
    assert_eq!(completed.values().sum::<u32>(), 1, "{one:?} {two:?}");
}

// ------------------------------------- the fuzz harness, on generated calls

fn fuzz_call() -> impl Strategy<Value = harness::FuzzCall> {
    let refund = (
        prop_oneof![Just("ORD-1001"), Just("ORD-1002"), Just("ORD-9999"), Just("ORD-10")],
        prop_oneof![Just(json!(100)), Just(json!(2590)), Just(json!(25.9)), Just(json!(5001)), Just(json!(0)), Just(json!("100"))],
        prop_oneof![Just("BRL"), Just("USD"), Just("EUR")],
        prop_oneof![Just("damaged"), Just("not_delivered"), Just("other")],
        prop::option::weighted(0.1, Just(("force", json!(true)))),
    )
        .prop_map(|(order_id, amount, currency, reason, extra)| {
            let mut args = json!({"order_id": order_id, "amount_cents": amount, "currency": currency, "reason": reason});
            if let Some((name, value)) = extra {
                args[name] = value;
            }
            args.to_string()
        });
    let arguments = prop_oneof![
        6 => refund,
        1 => prop_oneof![Just("ORD-1001"), Just("ORD-7")].prop_map(|id| json!({"order_id": id}).to_string()),
        1 => "\\PC{0,24}",
    ];
    (
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec![0u32, 0, 0, 1, 3]),
        arguments,
    )
        .prop_map(
            |(tool, confirmed, session, parsed, lose, arguments)| harness::FuzzCall {
                tool: ["get_order", "refund_order", "refund_order", "refund"][tool],
                confirmed,
                session: if session { "b" } else { "a" },
                parsed,
                lose,
                arguments,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// No refused call has a side effect, one audit record per call, and
    /// the rest of the fuzz harness's checks, on realistic conversations.
    #[test]
    fn no_rejected_call_has_a_side_effect(calls in prop::collection::vec(fuzz_call(), 1..harness::MAX_CALLS)) {
        let input = harness::encode(&calls);
        prop_assert_eq!(harness::decode(&input).len(), calls.len());
        harness::run(&input, &runtime());
    }
}

// ------------------------------------------------ inputs kept from fuzzing

#[test]
fn inputs_kept_from_fuzzing_pass_the_harness() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let runtime = runtime();
    let mut replayed = 0;
    for folder in ["seeds/dispatch", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(folder)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_file() && path.file_name().is_some_and(|n| n != "README.md") {
                let input = std::fs::read(&path).unwrap();
                let outcome = std::panic::catch_unwind(|| harness::run(&input, &runtime));
                assert!(outcome.is_ok(), "{} fails the harness", path.display());
                replayed += 1;
            }
        }
    }
    assert!(replayed >= 6, "the seeds are missing: {replayed} inputs");
}

// ------------------------------------------ a number's key is its double's
//
// The tools of this crate as `#[tool]` writes them. This crate's tests build
// serde_json with `float_roundtrip` (`jsonschema`, a dev-dependency, turns
// it on), so serde_json's own doubles are right here; toolcall-core's
// `tests/canonical_rfc8785.rs` runs the same checks through the dispatcher
// in a build without it, where serde_json misreads some numbers.

/// The keys the number tools were called with, in order.
#[derive(Debug, Default)]
struct Keys(Mutex<Vec<String>>);

/// Records a reading.
#[tool]
fn reading(
    ctx: &Ctx<Keys>,
    /// The reading.
    value: f64,
) -> Result<Value, ToolError> {
    ctx.state
        .0
        .lock()
        .unwrap()
        .push(ctx.idempotency_key.to_string());
    Ok(json!({"value": value}))
}

/// Records a series of readings.
#[tool]
fn series(
    ctx: &Ctx<Keys>,
    /// The readings.
    values: Vec<f64>,
) -> Result<Value, ToolError> {
    ctx.state
        .0
        .lock()
        .unwrap()
        .push(ctx.idempotency_key.to_string());
    Ok(json!({"count": values.len()}))
}

/// Counts something.
#[tool]
fn tally(
    ctx: &Ctx<Keys>,
    /// The count.
    count: i64,
) -> Result<Value, ToolError> {
    ctx.state
        .0
        .lock()
        .unwrap()
        .push(ctx.idempotency_key.to_string());
    Ok(json!({"count": count}))
}

/// Keeps any JSON document.
#[tool]
fn document(
    ctx: &Ctx<Keys>,
    /// The document.
    body: Value,
) -> Result<Value, ToolError> {
    ctx.state
        .0
        .lock()
        .unwrap()
        .push(ctx.idempotency_key.to_string());
    Ok(json!({"kept": body.is_object()}))
}

/// Calls the number tools, each call in a session of its own (no loop
/// guard between them), and says the key each call ran under.
struct NumberTools {
    runtime: tokio::runtime::Runtime,
    keys: Arc<Keys>,
    dispatcher: Dispatcher<Keys>,
    calls: AtomicU32,
}

impl NumberTools {
    fn new() -> Self {
        let keys = Arc::new(Keys::default());
        let dispatcher = Dispatcher::builder(
            tools![reading, series, tally, document].unwrap(),
            Arc::clone(&keys),
        )
        .max_steps(1_000_000)
        .build()
        .unwrap();
        NumberTools {
            runtime: runtime(),
            keys,
            dispatcher,
            calls: AtomicU32::new(0),
        }
    }

    /// The key `tool` ran under for `raw`, with the key the documented
    /// form gives `expected` in the same session; or the refusal.
    fn keys(
        &self,
        tool: &str,
        raw: &str,
        expected: &Value,
    ) -> Result<(String, String), Box<ToolResult>> {
        let session = format!("n{}", self.calls.fetch_add(1, Ordering::Relaxed));
        let result = self.runtime.block_on(
            self.dispatcher
                .execute(Call::new(tool, raw).session(&session)),
        );
        if !result.ok {
            return Err(Box::new(result));
        }
        let got = self
            .keys
            .0
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the tool ran");
        Ok((got, idempotency_key("default", &session, tool, expected)))
    }

    /// Asserts that `raw` ran `tool` under the key of `expected`.
    fn assert_key(&self, tool: &str, raw: &str, expected: &Value) {
        match self.keys(tool, raw, expected) {
            Ok((got, want)) => assert_eq!(got, want, "{tool} {raw}: not the key of {expected}"),
            Err(result) => panic!("{tool} {raw} refused: {result:?}"),
        }
    }
}

/// RFC 8785's `values.json` numbers: `333333333.33333329` is the double
/// `333333333.3333333`, which serde_json without `float_roundtrip` reads one
/// unit in the last place lower (`333333333.33333325`).
#[test]
fn a_long_fraction_is_keyed_as_its_nearest_double() {
    let tools = NumberTools::new();
    let third = 333_333_333.333_333_3_f64;
    for text in [
        "333333333.33333329",
        "333333333.33333333",
        "333333333.3333333",
    ] {
        assert_eq!(text.parse::<f64>().unwrap(), third);
        // Alone: the one-pass reading of raw members.
        tools.assert_key(
            "reading",
            &format!(r#"{{"value": {text}}}"#),
            &json!({"value": third}),
        );
        // In a list, beside other floats.
        tools.assert_key(
            "series",
            &format!("{{\"values\": [4.50, {text}, 2e-3, 1E30]}}"),
            &json!({"values": [4.5, third, 0.002, 1e30]}),
        );
        // In a nested document: the full parse.
        tools.assert_key(
            "document",
            &format!(r#"{{"body": {{"numbers": [{text}, 1E30], "n": {{"x": {text}}}}}}}"#),
            &json!({"body": {"numbers": [third, 1e30], "n": {"x": third}}}),
        );
    }
    // The whole of RFC 8785's values.json, as a document: its key is the
    // key of the RFC's own output.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../toolcall-core/tests/data/rfc8785");
    let input = std::fs::read_to_string(data.join("input/values.json")).unwrap();
    let output: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("output/values.json")).unwrap())
            .unwrap();
    assert_eq!(output["numbers"][0], json!(third), "the RFC's output, read");
    tools.assert_key(
        "document",
        &format!(r#"{{"body": {input}}}"#),
        &json!({"body": output}),
    );
}

/// `100` written every way JSON allows is one key, the double 100's, in
/// an `f64` field; in an `i64` field the integer forms are its key and a
/// fraction or an exponent is refused.
#[test]
fn one_hundred_written_any_way_is_one_key() {
    let tools = NumberTools::new();
    let forms = ONE_HUNDRED;
    for form in forms {
        tools.assert_key(
            "reading",
            &format!(r#"{{"value": {form}}}"#),
            &json!({"value": 100.0}),
        );
        tools.assert_key(
            "series",
            &format!(r#"{{"values": [{form}, -{form}]}}"#),
            &json!({"values": [100.0, -100.0]}),
        );
        tools.assert_key(
            "document",
            &format!(r#"{{"body": {{"a": [{form}]}}}}"#),
            &json!({"body": {"a": [100.0]}}),
        );
    }
    tools.assert_key("tally", r#"{"count": 100}"#, &json!({"count": 100}));
    for form in &forms[1..] {
        let refused = tools
            .keys(
                "tally",
                &format!(r#"{{"count": {form}}}"#),
                &json!({"count": 100}),
            )
            .expect_err("a fraction or an exponent is not an integer");
        assert_eq!(refused.code, Code::InvalidArguments, "{form}: {refused:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A double written any of many ways is keyed as the double itself,
    /// alone, in a list and in a nested document.
    #[test]
    fn a_double_written_any_way_is_keyed_as_its_double(
        f in any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ) {
        let tools = NumberTools::new();
        for form in forms_of(f) {
            prop_assert_eq!(form.parse::<f64>().unwrap(), f, "{}", form);
            let (got, want) = tools.keys("reading", &format!(r#"{{"value": {form}}}"#), &json!({"value": f})).unwrap();
            prop_assert_eq!(got, want, "reading {}", form);
            let (got, want) = tools.keys("series", &format!(r#"{{"values": [{form}, 0.5]}}"#), &json!({"values": [f, 0.5]})).unwrap();
            prop_assert_eq!(got, want, "series {}", form);
            let (got, want) = tools.keys("document", &format!(r#"{{"body": {{"x": {form}}}}}"#), &json!({"body": {"x": f}})).unwrap();
            prop_assert_eq!(got, want, "document {}", form);
        }
    }

    /// Any number's text is keyed as the double nearest to it (Rust's
    /// `f64::from_str`, which rounds correctly), as RFC 8785 reads it.
    #[test]
    fn any_number_text_is_keyed_as_its_nearest_double(
        texts in prop::collection::vec(number_text(250), 1..4),
    ) {
        let tools = NumberTools::new();
        let doubles: Vec<f64> = texts.iter().map(|t| t.parse().unwrap()).collect();
        prop_assume!(doubles.iter().all(|f| f.is_finite()));
        // In a document (a `Value`), an integer in the 64-bit range stays
        // that integer, exactly; any other number is its nearest double.
        let exact: Vec<Value> = texts
            .iter()
            .zip(&doubles)
            .map(|(text, double)| {
                let integer = !text.contains(['.', 'e', 'E']) && text != "-0";
                match (text.parse::<i64>(), text.parse::<u64>()) {
                    (Ok(n), _) if integer => json!(n),
                    (_, Ok(n)) if integer => json!(n),
                    _ => json!(double),
                }
            })
            .collect();
        let (got, want) = tools
            .keys("reading", &format!(r#"{{"value": {}}}"#, texts[0]), &json!({"value": doubles[0]}))
            .unwrap();
        prop_assert_eq!(got, want, "reading {}", texts[0]);
        let list = texts.join(", ");
        let (got, want) = tools
            .keys("series", &format!(r#"{{"values": [{list}]}}"#), &json!({"values": doubles}))
            .unwrap();
        prop_assert_eq!(got, want, "series {}", list);
        let (got, want) = tools
            .keys("document", &format!(r#"{{"body": {{"a": [{list}], "b": {{}}}}}}"#), &json!({"body": {"a": exact, "b": {}}}))
            .unwrap();
        prop_assert_eq!(got, want, "document {}", list);
    }
}
