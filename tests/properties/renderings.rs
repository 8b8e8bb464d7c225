//! One call, any rendering: the same arguments written another way (spacing,
//! member order, escapes, numbers) get the same answer.

use super::*;

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
