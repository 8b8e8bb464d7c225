//! Whatever the model sends, the pipeline answers with a code: no panic, one
//! audit record per call, and no side effect from a call it rejected.

use std::sync::Arc;
use std::time::Duration;

use orders::{Shop, get_order, refund_order};
use proptest::prelude::*;
use serde_json::{Value, json};
use toolcall::{Call, Code, Dispatcher, MemoryAudit, Policy, tools};

/// A value of any JSON type, small.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop_oneof![
            Just("ORD-1001".to_owned()),
            Just("ORD-1002".to_owned()),
            Just("ORD-9999".to_owned()),
            Just("BRL".to_owned()),
            Just("USD".to_owned()),
            Just("damaged".to_owned()),
            "\\PC{0,12}",
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Refund arguments with each field kept, dropped, or replaced by anything,
/// and sometimes an extra field.
fn mutated_refund() -> impl Strategy<Value = Value> {
    let field = |good: Value| {
        prop_oneof![
            3 => Just(Some(good)),
            1 => Just(None),
            1 => any_json().prop_map(Some),
        ]
    };
    (
        field(json!("ORD-1001")),
        field(json!(2590)),
        field(json!("BRL")),
        field(json!("damaged")),
        prop::option::weighted(0.2, ("[a-z_]{1,12}", any_json())),
        1i64..20_000,
    )
        .prop_map(|(order_id, amount, currency, reason, extra, cents)| {
            let mut object = serde_json::Map::new();
            let amount = amount.map(|a| if a == json!(2590) { json!(cents) } else { a });
            for (name, value) in [
                ("order_id", order_id),
                ("amount_cents", amount),
                ("currency", currency),
                ("reason", reason),
            ] {
                if let Some(value) = value {
                    object.insert(name.into(), value);
                }
            }
            if let Some((name, value)) = extra {
                object.insert(name, value);
            }
            Value::Object(object)
        })
}

#[derive(Debug, Clone)]
enum Args {
    Text(String),
    Parsed(Value),
}

fn any_call() -> impl Strategy<Value = (String, Args, bool)> {
    let tool = prop_oneof![
        4 => Just("refund_order".to_owned()),
        2 => Just("get_order".to_owned()),
        1 => "\\PC{0,10}",
    ];
    let args = prop_oneof![
        3 => mutated_refund().prop_map(|v| Args::Text(v.to_string())),
        1 => mutated_refund().prop_map(Args::Parsed),
        1 => any_json().prop_map(Args::Parsed),
        1 => any_json().prop_map(|v| Args::Text(v.to_string())),
        1 => "\\PC{0,40}".prop_map(Args::Text),
        1 => mutated_refund().prop_map(|v| {
            // Cut the text anywhere: broken JSON.
            let text = v.to_string();
            let cut = text.len() / 2;
            let cut = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            Args::Text(text[..cut].to_owned())
        }),
    ];
    (tool, args, any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_sequence_of_calls_is_answered_audited_and_never_applied_when_rejected(
        calls in prop::collection::vec(any_call(), 1..14),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let shop = Arc::new(Shop::new());
        let audit = MemoryAudit::new();
        let policy = Policy::new().allow(["get_order", "refund_order"]).limit("max_refund_cents", 5_000);
        let dispatcher = Dispatcher::builder(tools![get_order, refund_order].unwrap(), Arc::clone(&shop)).part(Shop::reader)
            .policy(policy)
            .retry_backoff(Duration::ZERO)
            .audit(audit.clone())
            .build()
            .unwrap();
        for (i, (tool, args, confirmed)) in calls.iter().enumerate() {
            let before = shop.applied_refunds();
            let arguments = match args {
                Args::Text(text) => toolcall::Arguments::Raw(text),
                Args::Parsed(value) => toolcall::Arguments::Parsed(value),
            };
            let result = runtime.block_on(dispatcher.execute(Call::new(tool, arguments).session("default").confirmed(*confirmed)));
            let applied = shop.applied_refunds() - before;
            prop_assert_eq!(result.ok, result.code == Code::Ok, "{:?}", result);
            prop_assert!(!result.code.as_str().is_empty());
            prop_assert!(result.ok || !result.message.is_empty(), "a rejection says why: {:?}", result);
            let fresh_refund = result.ok && !result.replayed && tool == "refund_order";
            prop_assert_eq!(applied, u64::from(fresh_refund), "call {}: {:?}", i, result);
            prop_assert_eq!(audit.len(), i + 1);
        }
        let order = shop.order("ORD-1001").unwrap();
        prop_assert!(order.refunded_cents <= order.total_cents, "never refunds more than paid");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The pipeline reads arguments sent as text in one pass where it can,
    /// and a refused member again on its own: whatever the arguments, the
    /// model is told what it is told of the same arguments parsed, and the
    /// audit keeps the same problems.
    #[test]
    fn arguments_as_text_are_answered_as_the_same_arguments_parsed(
        arguments in prop_oneof![3 => mutated_refund(), 1 => any_json()],
        extra in prop::option::of(("[a-z_]{1,12}", any_json())),
    ) {
        let mut arguments = arguments;
        if let (Some((name, value)), Value::Object(object)) = (extra, &mut arguments) {
            object.insert(name, value);
        }
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let answer = |arguments: toolcall::Arguments<'_>| {
            let shop = Arc::new(Shop::new());
            let audit = MemoryAudit::new();
            let dispatcher = Dispatcher::builder(tools![get_order, refund_order].unwrap(), Arc::clone(&shop))
                .part(Shop::reader)
                .policy(Policy::new().allow(["refund_order"]))
                .audit(audit.clone())
                .build()
                .unwrap();
            let call = Call::new("refund_order", arguments).session("s").dry_run(true);
            let result = runtime.block_on(dispatcher.execute(call));
            let problems: Vec<String> = audit.records()[0].problems.iter().map(|p| p.to_string()).collect();
            (result.code, result.message, result.data, problems)
        };
        let text = arguments.to_string();
        let as_text = answer(toolcall::Arguments::Raw(&text));
        let parsed = answer(toolcall::Arguments::Parsed(&arguments));
        prop_assert_eq!(&as_text, &parsed, "{}", text);
    }
}
