//! The fuzz harness as a property, and the inputs kept from fuzzing.

use super::*;

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
