//! The schema a tool exports and the validator that runs agree.
//!
//! For every tool of the examples, thousands of argument objects, built from
//! the exported schema and then mutated, get the same verdict from an
//! independent JSON Schema validator (the `jsonschema` crate, draft 2020-12,
//! formats asserted) as from the dispatcher's own validator.
//!
//! One difference is intended, and tested on its own below: JSON Schema calls
//! `2590.0` an integer, the dispatcher does not (an integer never comes from
//! a float). The generators here never put an integral float where an
//! integer is expected; `integral_floats_are_the_one_intended_difference`
//! covers that case.

use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value, json};
use toolcall::{Tool, ToolSpec};

fn tools() -> Vec<&'static ToolSpec> {
    vec![
        <orders::get_order as Tool>::spec(),
        <orders::refund_order as Tool>::spec(),
        <toolcall_tests::place as Tool>::spec(),
    ]
}

fn independent_validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("the exported schema is a valid draft 2020-12 schema")
}

/// Strings of each format both sides accept.
fn valid_format(format: &str) -> BoxedStrategy<Value> {
    let pool: &[&str] = match format {
        "email" => &[
            "ana@example.com",
            "first.last+tag@sub.example.org",
            "x@y.io",
        ],
        "date" => &["2026-12-01", "2024-02-29", "1999-12-31"],
        "date-time" => &[
            "2026-11-29T20:08:40Z",
            "2026-11-29T20:08:40.5+01:00",
            "2000-01-01T00:00:00-03:00",
        ],
        "uuid" => &[
            "67e55044-10b1-426f-9247-bb680e5fe0c8",
            "00000000-0000-0000-0000-000000000000",
        ],
        "uri" => &[
            "https://example.com/a?b=c",
            "urn:isbn:0451450523",
            "mailto:ana@example.com",
        ],
        _ => &["x"],
    };
    prop::sample::select(pool).prop_map(Value::from).boxed()
}

/// A value the schema accepts.
fn valid(schema: &Value) -> BoxedStrategy<Value> {
    let Value::Object(s) = schema else {
        return Just(Value::Null).boxed();
    };
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = s.get(key) {
            return Union::new(branches.iter().map(valid)).boxed();
        }
    }
    if let Some(value) = s.get("const") {
        return Just(value.clone()).boxed();
    }
    if let Some(Value::Array(values)) = s.get("enum") {
        return prop::sample::select(values.clone()).boxed();
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec!["object"],
    };
    Union::new(types.into_iter().map(|t| valid_of_type(s, t))).boxed()
}

fn valid_of_type(s: &Map<String, Value>, t: &str) -> BoxedStrategy<Value> {
    let num = |k: &str| s.get(k).and_then(Value::as_f64);
    match t {
        "null" => Just(Value::Null).boxed(),
        "boolean" => any::<bool>().prop_map(Value::from).boxed(),
        "integer" => {
            let low = num("minimum")
                .unwrap_or(-1e9)
                .max(num("exclusiveMinimum").map_or(f64::MIN, |x| x + 1.0));
            let high = num("maximum")
                .unwrap_or(1e9)
                .min(num("exclusiveMaximum").map_or(f64::MAX, |x| x - 1.0));
            let (low, high) = (low.max(-1e15) as i64, high.min(1e15) as i64);
            (low..=high).prop_map(Value::from).boxed()
        }
        "number" => {
            let low = num("minimum")
                .or(num("exclusiveMinimum").map(|x| x + 1e-6))
                .unwrap_or(-1e6);
            let high = num("maximum")
                .or(num("exclusiveMaximum").map(|x| x - 1e-6))
                .unwrap_or(1e6);
            (low..=high).prop_map(Value::from).boxed()
        }
        "string" => {
            if let Some(format) = s.get("format").and_then(Value::as_str) {
                return valid_format(format);
            }
            if let Some(pattern) = s.get("pattern").and_then(Value::as_str) {
                let body = pattern.trim_start_matches('^').trim_end_matches('$');
                return proptest::string::string_regex(body)
                    .unwrap()
                    .prop_map(Value::from)
                    .boxed();
            }
            let min = num("minLength").unwrap_or(0.0) as usize;
            let max = num("maxLength").map_or(min + 12, |m| m as usize);
            proptest::string::string_regex(&format!("\\PC{{{min},{max}}}"))
                .unwrap()
                .prop_map(Value::from)
                .boxed()
        }
        "array" => {
            let items = s
                .get("items")
                .map_or_else(|| Just(Value::Null).boxed(), valid);
            let min = num("minItems").unwrap_or(0.0) as usize;
            let max = num("maxItems").map_or(min + 3, |m| m as usize);
            prop::collection::vec(items, min..=max)
                .prop_map(Value::from)
                .boxed()
        }
        _ => {
            let empty = Map::new();
            let properties = s
                .get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            let required: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let members: Vec<BoxedStrategy<Option<(String, Value)>>> = properties
                .iter()
                .map(|(name, schema)| {
                    let is_required = required.contains(&name.as_str());
                    let name = name.clone();
                    let value = valid(schema).prop_map(move |v| (name.clone(), v));
                    if is_required {
                        value.prop_map(Some).boxed()
                    } else {
                        prop::option::of(value).boxed()
                    }
                })
                .collect();
            members
                .prop_map(|members| Value::Object(members.into_iter().flatten().collect()))
                .boxed()
        }
    }
}

/// A replacement value of any kind, never an integral float.
fn anything() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![
            json!(0),
            json!(-1),
            json!(1),
            json!(100),
            json!(u32::MAX),
            json!(u64::from(u32::MAX) + 1),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(9223372036854775808u64),
            json!(u64::MAX),
            json!(0.5),
            json!(25.9),
            json!(-0.25),
            json!(99.999),
            json!(1e-7),
        ]),
        (-1e6f64..1e6).prop_map(|f| Value::from(f.trunc() + 0.5)),
        prop::sample::select(vec![
            "",
            "ORD-1001",
            "ORD-100",
            "ORD-10011",
            "ord-1001",
            "ORD-\u{0661}\u{0660}\u{0660}\u{0661}",
            "BRL",
            "EUR",
            "damaged",
            "ana@example.com",
            "ana@",
            "2026-02-30",
            "2026-12-01T10:00:00",
            "not a uuid",
            "https://example.com",
            "relative/path",
            "x",
            "été",
            "ab",
            "abcdef",
        ])
        .prop_map(Value::from),
        Just(json!([])),
        Just(json!([{"sku": "A", "quantity": 1}])),
        Just(json!({})),
        Just(json!({"sku": "A", "quantity": 1, "extra": 1})),
    ]
    .boxed()
}

/// Values at and around each bound a property schema states: where a
/// schema and a validator that disagree by one would show it.
fn boundary_values(schema: &Value) -> Vec<Value> {
    let mut values = Vec::new();
    let Value::Object(s) = schema else {
        return values;
    };
    for key in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
        if let Some(bound) = s.get(key) {
            if let Some(n) = bound.as_i64() {
                values.extend([n.saturating_sub(1), n, n.saturating_add(1)].map(Value::from));
            } else if let Some(n) = bound.as_u64() {
                values.extend([n - 1, n].map(Value::from));
                values.push(json!(n as f64 * 2.0 + 0.5));
            } else if let Some(x) = bound.as_f64() {
                values.extend([x - 0.5, x, x + 0.5].map(Value::from));
            }
        }
    }
    for key in ["minLength", "maxLength"] {
        if let Some(n) = s.get(key).and_then(Value::as_u64) {
            for len in [n.saturating_sub(1), n, n + 1] {
                values.push(Value::from("é".repeat(len as usize)));
            }
        }
    }
    for key in ["minItems", "maxItems"] {
        if let Some(n) = s.get(key).and_then(Value::as_u64) {
            for len in [n.saturating_sub(1), n, n + 1] {
                values.push(Value::Array(vec![
                    json!({"sku": "A", "quantity": 1});
                    len as usize
                ]));
            }
        }
    }
    values
}

#[derive(Clone, Debug)]
enum Mutation {
    Remove(prop::sample::Index),
    Set(prop::sample::Index, Value),
    Boundary(prop::sample::Index, prop::sample::Index),
    Add(String, Value),
    ReplaceNested(prop::sample::Index, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => any::<prop::sample::Index>().prop_map(Mutation::Remove),
        1 => (any::<prop::sample::Index>(), anything()).prop_map(|(i, v)| Mutation::Set(i, v)),
        2 => (any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(|(i, j)| Mutation::Boundary(i, j)),
        1 => (prop_oneof![Just("force".to_owned()), Just("orderId".to_owned()), "[a-z]{1,8}"], anything())
            .prop_map(|(k, v)| Mutation::Add(k, v)),
        1 => (any::<prop::sample::Index>(), anything()).prop_map(|(i, v)| Mutation::ReplaceNested(i, v)),
    ]
}

/// Applies the mutations; `properties` are the schema's, so a mutation can
/// set a field the valid instance left out.
fn apply(mut value: Value, mutations: &[Mutation], properties: &Map<String, Value>) -> Value {
    let Value::Object(map) = &mut value else {
        return value;
    };
    let names: Vec<&String> = properties.keys().collect();
    for mutation in mutations {
        let keys: Vec<String> = map.keys().cloned().collect();
        match mutation {
            Mutation::Remove(i) if !keys.is_empty() => {
                map.remove(&keys[i.index(keys.len())]);
            }
            Mutation::Set(i, v) if !names.is_empty() => {
                map.insert(names[i.index(names.len())].clone(), v.clone());
            }
            Mutation::Boundary(i, j) if !names.is_empty() => {
                let name = names[i.index(names.len())];
                let candidates = boundary_values(&properties[name]);
                if !candidates.is_empty() {
                    map.insert(name.clone(), candidates[j.index(candidates.len())].clone());
                }
            }
            Mutation::Add(k, v) => {
                map.insert(k.clone(), v.clone());
            }
            Mutation::ReplaceNested(i, v) => {
                // Reach into a list of objects: the nested level must be as strict.
                for item in map.values_mut().filter_map(Value::as_array_mut).flatten() {
                    if let Value::Object(inner) = item {
                        let inner_keys: Vec<String> = inner.keys().cloned().collect();
                        if !inner_keys.is_empty() {
                            inner.insert(inner_keys[i.index(inner_keys.len())].clone(), v.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    value
}

fn case_for(spec: &'static ToolSpec) -> impl Strategy<Value = Value> {
    let schema = spec.parameters_schema();
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    (valid(&schema), prop::collection::vec(mutation(), 0..3))
        .prop_map(move |(base, mutations)| apply(base, &mutations, &properties))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn get_order_schema_and_validator_agree(instance in case_for(<orders::get_order as Tool>::spec())) {
        agree(<orders::get_order as Tool>::spec(), &instance)?;
    }

    #[test]
    fn refund_order_schema_and_validator_agree(instance in case_for(<orders::refund_order as Tool>::spec())) {
        agree(<orders::refund_order as Tool>::spec(), &instance)?;
    }

    #[test]
    fn place_order_schema_and_validator_agree(instance in case_for(<toolcall_tests::place as Tool>::spec())) {
        agree(<toolcall_tests::place as Tool>::spec(), &instance)?;
    }
}

fn agree(spec: &ToolSpec, instance: &Value) -> Result<(), TestCaseError> {
    let schema = spec.parameters_schema();
    let theirs = independent_validator(&schema).is_valid(instance);
    let ours = spec.validate_arguments(instance);
    prop_assert_eq!(
        theirs,
        ours.is_ok(),
        "{} disagrees on {}: jsonschema says {}, the dispatcher says {:?}",
        spec.name(),
        instance,
        theirs,
        ours.err().map(|e| e.to_string())
    );
    Ok(())
}

#[test]
fn unmutated_instances_from_the_schema_are_valid() {
    // The generator itself is right: what it builds from a schema passes both.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for spec in tools() {
        let schema = spec.parameters_schema();
        let validator = independent_validator(&schema);
        for _ in 0..200 {
            let instance = valid(&schema).new_tree(&mut runner).unwrap().current();
            assert!(validator.is_valid(&instance), "{}: {instance}", spec.name());
            assert!(
                spec.validate_arguments(&instance).is_ok(),
                "{}: {instance}",
                spec.name()
            );
        }
    }
}

#[test]
fn integral_floats_are_the_one_intended_difference() {
    let refund = <orders::refund_order as Tool>::spec();
    let schema = refund.parameters_schema();
    let instance = json!({"order_id": "ORD-1001", "amount_cents": 2590.0, "currency": "BRL", "reason": "damaged"});
    assert!(
        independent_validator(&schema).is_valid(&instance),
        "JSON Schema: 2590.0 is an integer"
    );
    let ours = refund
        .validate_arguments(&instance)
        .unwrap_err()
        .to_string();
    assert!(
        ours.starts_with("amount_cents: invalid type: floating point `2590.0`"),
        "{ours}"
    );
}
