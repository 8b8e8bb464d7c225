//! Sequences of calls against the ledger: every successful answer stands for
//! exactly one completion, and concurrent identical calls complete once.

use super::*;

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
