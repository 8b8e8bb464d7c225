//! The strict schema, the original schema and the validator agree on a
//! corpus of cases, `null` included.

use super::*;

/// What the strict schema is expected to say about a case.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The same as the Rust validator.
    Same,
    /// Accepts it although the validator does not, because the keyword
    /// (second) of the property (first) moved into its description.
    Relaxed(&'static str, &'static str),
}

fn with(base: &Value, pointer: &str, value: Value) -> Value {
    let mut out = base.clone();
    *out.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = value;
    out
}

fn with_member(base: &Value, pointer: &str, name: &str, value: Value) -> Value {
    let mut out = base.clone();
    out.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("{pointer}"))
        .insert(name.into(), value);
    out
}

fn without(base: &Value, pointer: &str, name: &str) -> Value {
    let mut out = base.clone();
    out.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("{pointer}"))
        .remove(name);
    out
}

/// Argument objects as a strict model sends them (every member present),
/// valid and invalid, with what the strict schema should say of each.
fn cases() -> Vec<(&'static str, Value, Expect)> {
    use Expect::{Relaxed, Same};
    let order = json!({"order_id": "ORD-1001"});
    let refund = json!({
        "order_id": "ORD-1001",
        "amount_cents": 2590,
        "currency": "BRL",
        "reason": "damaged",
        "note": null
    });
    let delivery = strict_delivery();
    let full = json!({
        "email": "ana@example.com",
        "deliver_on": "2024-02-29",
        "tracking_url": "https://example.com/track/1",
        "lines": [
            {"sku": "A-1", "quantity": 255, "gift_wrap": true, "priority": "high"},
            {"sku": "B-2", "quantity": 0, "gift_wrap": false, "priority": "low"}
        ],
        "discount": 12.5,
        "request_id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "address": {"street": "Rua A, 1", "city": "Recife", "postcode": "50000-000"},
        "backup_currency": "USD",
        "slots": 10
    });
    let line = delivery["lines"][0].clone();
    let search = json!({
        "filter": {"not": {"status": "cancelled"}},
        "limit": 20,
        "after_id": 1
    });
    // The cases the strict schema answers as the validator does, one
    // closure a tool, named after it.
    let get_order = |arguments| ("get_order", arguments, Same);
    let refund_order = |arguments| ("refund_order", arguments, Same);
    let schedule_delivery = |arguments| ("schedule_delivery", arguments, Same);
    let search_orders = |arguments| ("search_orders", arguments, Same);
    vec![
        get_order(order.clone()),
        get_order(with(&order, "/order_id", json!("ORD-12"))),
        get_order(with(&order, "/order_id", json!(1001))),
        get_order(json!({})),
        get_order(with_member(&order, "", "force", json!(true))),
        refund_order(refund.clone()),
        refund_order(with(&refund, "/note", json!("Box crushed"))),
        (
            "refund_order",
            with(&refund, "/note", json!("ok")),
            Relaxed("note", "minLength"),
        ),
        (
            "refund_order",
            with(&refund, "/note", json!("x".repeat(201))),
            Relaxed("note", "maxLength"),
        ),
        refund_order(with(&refund, "/note", json!("x".repeat(200)))),
        refund_order(with(&refund, "/note", json!(7))),
        refund_order(with(&refund, "/amount_cents", json!(0))),
        refund_order(with(&refund, "/amount_cents", json!(25.9))),
        refund_order(with(&refund, "/amount_cents", json!("2590"))),
        refund_order(with(&refund, "/currency", json!("EUR"))),
        refund_order(with(&refund, "/currency", json!(null))),
        refund_order(with(&refund, "/reason", json!("not_delivered"))),
        refund_order(with(&refund, "/reason", json!("NotDelivered"))),
        refund_order(with(&refund, "/order_id", json!("ord-1001"))),
        refund_order(without(&refund, "", "amount_cents")),
        schedule_delivery(delivery.clone()),
        schedule_delivery(full.clone()),
        schedule_delivery(with(&delivery, "/email", json!("no-at-sign"))),
        schedule_delivery(with(&delivery, "/email", json!(null))),
        schedule_delivery(with(&delivery, "/deliver_on", json!("2026-13-01"))),
        schedule_delivery(with(&delivery, "/request_id", json!("123"))),
        (
            "schedule_delivery",
            with(&delivery, "/tracking_url", json!("not a uri")),
            Relaxed("tracking_url", "format"),
        ),
        (
            "schedule_delivery",
            with(&delivery, "/tracking_url", json!("/relative")),
            Relaxed("tracking_url", "format"),
        ),
        schedule_delivery(with(&delivery, "/lines", json!([]))),
        schedule_delivery(with(&delivery, "/lines", json!([line, line, line, line]))),
        schedule_delivery(with(&delivery, "/lines/0/quantity", json!(256))),
        schedule_delivery(with(&delivery, "/lines/0/quantity", json!(-1))),
        schedule_delivery(with(&delivery, "/lines/0/priority", json!("urgent"))),
        schedule_delivery(with(&delivery, "/lines/0/gift_wrap", json!("yes"))),
        schedule_delivery(with_member(&delivery, "/lines/0", "colour", json!("red"))),
        schedule_delivery(with(&delivery, "/discount", json!(0))),
        schedule_delivery(with(&delivery, "/discount", json!(100))),
        schedule_delivery(with(&delivery, "/discount", json!(99.5))),
        schedule_delivery(with(&delivery, "/backup_currency", json!("EUR"))),
        schedule_delivery(with(&delivery, "/address/city", json!(null))),
        schedule_delivery(without(&delivery, "/address", "city")),
        schedule_delivery(with_member(&delivery, "/address", "zip", json!("1"))),
        schedule_delivery(with(&delivery, "/slots", json!(11))),
        schedule_delivery(with(&delivery, "/slots", json!(0))),
        schedule_delivery(with(&delivery, "/slots", json!(2.5))),
        schedule_delivery(with(&delivery, "/slots", json!(3_000_000_000_i64))),
        schedule_delivery(with_member(&delivery, "", "priority", json!("high"))),
        schedule_delivery(json!([])),
        search_orders(search.clone()),
        search_orders(with(
            &search,
            "/filter",
            json!({"not": {"not": {"status": "paid"}}}),
        )),
        search_orders(with(&search, "/filter", json!({"not": {"state": "paid"}}))),
        search_orders(with(
            &search,
            "/filter",
            json!({"status": "paid", "not": {"status": "new"}}),
        )),
        search_orders(with(&search, "/limit", json!(u64::MAX))),
        search_orders(with(&search, "/limit", json!(-1))),
        search_orders(with(
            &search,
            "/after_id",
            json!(10_000_000_000_000_000_i64),
        )),
        (
            "search_orders",
            with(&search, "/after_id", json!(10_000_000_000_000_001_i64)),
            Relaxed("after_id", "maximum"),
        ),
        search_orders(with(&search, "/after_id", json!(0))),
    ]
}

#[test]
fn strict_schema_original_schema_and_validator_agree() {
    let mut relaxed = 0;
    for (i, (tool, arguments, expect)) in cases().into_iter().enumerate() {
        let spec = spec(tool);
        let original = spec.parameters_schema();
        let strict = export::openai_strict_schema(&original).expect("a strict form");
        let rust = spec.validate_arguments(&arguments).is_ok();
        let by_original = validator(&original).is_valid(&arguments);
        let by_strict = validator(&strict).is_valid(&arguments);
        let label = format!("case {i} ({tool}): {arguments}");
        assert_eq!(by_original, rust, "original schema vs validator, {label}");
        match expect {
            Expect::Same => assert_eq!(by_strict, rust, "strict schema vs validator, {label}"),
            Expect::Relaxed(property, keyword) => {
                relaxed += 1;
                assert!(!rust, "the validator refuses it, {label}");
                assert!(by_strict, "the strict schema lets it through, {label}");
                // Because `keyword` left the schema for the description ...
                let value = &original["properties"][property][keyword];
                assert!(!value.is_null(), "{label}");
                assert!(strict["properties"][property].get(keyword).is_none());
                let description = strict["properties"][property]["description"]
                    .as_str()
                    .unwrap()
                    .to_lowercase();
                let stated = match value {
                    Value::String(s) => s.to_lowercase(),
                    other => other.to_string(),
                };
                assert!(description.contains(&stated), "{label}: {description}");
                // ... and for no other reason: without it, the original agrees.
                let mut loosened = original.clone();
                loosened["properties"][property]
                    .as_object_mut()
                    .unwrap()
                    .remove(keyword);
                assert!(validator(&loosened).is_valid(&arguments), "{label}");
            }
        }
    }
    assert_eq!(relaxed, 5, "every relaxed case ran");
}

/// Optional arguments a strict model sends as `null` are read as absent by
/// the validator, so "required and nullable" is faithful; the strict schema
/// only insists that the model writes them out.
#[test]
fn null_is_absent_for_the_validator_and_required_for_strict_mode() {
    let mut checked = 0;
    for (tool, arguments, expect) in cases() {
        let Value::Object(members) = &arguments else {
            continue;
        };
        let spec = spec(tool);
        let original = spec.parameters_schema();
        let strict = export::openai_strict_schema(&original).unwrap();
        let optional: Vec<&String> = members
            .keys()
            .filter(|name| {
                !original["required"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(name.as_str()))
            })
            .collect();
        for name in optional {
            let omitted = without(&arguments, "", name);
            let rust = spec.validate_arguments(&arguments).is_ok();
            if members[name].is_null() {
                assert_eq!(
                    spec.validate_arguments(&omitted).is_ok(),
                    rust,
                    "{tool}: `{name}: null` is read as absent"
                );
                assert_eq!(
                    validator(&original).is_valid(&omitted),
                    validator(&original).is_valid(&arguments),
                    "{tool}: the original schema agrees"
                );
                checked += 1;
            }
            if matches!(expect, Expect::Same) && rust {
                assert!(
                    !validator(&strict).is_valid(&omitted),
                    "{tool}: strict mode wants `{name}` written out"
                );
            }
        }
    }
    assert!(checked >= 20, "only {checked} null members checked");
}

#[test]
fn a_tool_without_strict_form_keeps_its_schema_and_agrees() {
    let spec = spec("set_labels");
    let tools = export::definitions(
        &registry(),
        &Policy::new().allow(["set_labels"]),
        Format::OpenAi,
    );
    assert_eq!(tools[0]["function"]["strict"], false);
    let parameters = &tools[0]["function"]["parameters"];
    assert_eq!(parameters, &spec.parameters_schema());
    for (arguments, valid) in [
        (json!({"labels": {}}), true),
        (json!({"labels": {"vip": 3, "late payer": 0}}), true),
        (json!({"labels": {"vip": -1}}), false),
        (json!({"labels": {"vip": "3"}}), false),
        (json!({"labels": null}), false),
        (json!({}), false),
    ] {
        assert_eq!(
            spec.validate_arguments(&arguments).is_ok(),
            valid,
            "{arguments}"
        );
        assert_eq!(
            validator(parameters).is_valid(&arguments),
            valid,
            "{arguments}"
        );
    }
}
