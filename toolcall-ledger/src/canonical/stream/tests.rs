use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use serde::Serialize;
use serde_json::{Value, json};

use super::canonical_text;
use crate::canonical::{canonical_json, idempotency_key, idempotency_key_of};

/// The key both ways: streamed (or its fallback) and through `to_value`.
fn both_keys<T: Serialize>(value: &T) -> (String, String) {
    let via_value = idempotency_key(
        "c",
        "s",
        "t",
        &serde_json::to_value(value).expect("to_value"),
    );
    let streamed = idempotency_key_of("c", "s", "t", value).expect("a key");
    (streamed.as_str().to_owned(), via_value)
}

fn same_as_value_path<T: Serialize>(value: &T) {
    let text = canonical_text(value).expect("the writer takes this shape");
    let want = canonical_json(&serde_json::to_value(value).expect("to_value"));
    assert_eq!(text, want);
    let (streamed, via_value) = both_keys(value);
    assert_eq!(streamed, via_value);
}

#[derive(Serialize)]
enum Shape {
    Unit,
    Newtype(u8),
    Tuple(i32, String),
    Struct { z: bool, a: Option<f64> },
}

#[derive(Serialize)]
struct Inner {
    zeta: Vec<Shape>,
    alpha: char,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
}

#[derive(Serialize)]
struct Args {
    order_id: String,
    amount_cents: i64,
    currency: &'static str,
    reason: Shape,
    nested: Inner,
    map: HashMap<String, u64>,
    bytes: serde_bytes_like::Bytes,
    big: u64,
    whole: f64,
    small: f32,
    nothing: Option<()>,
    unit: (),
    tuple: (u8, &'static str),
}

/// `serialize_bytes` without a dependency.
mod serde_bytes_like {
    pub struct Bytes(pub Vec<u8>);
    impl serde::Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }
}

#[test]
fn typed_arguments_are_written_as_their_value_is() {
    let args = Args {
        order_id: "ORD-1001 \"quoted\" \\ \u{1f} é €".into(),
        amount_cents: -2590,
        currency: "BRL",
        reason: Shape::Struct {
            z: true,
            a: Some(0.1),
        },
        nested: Inner {
            zeta: vec![
                Shape::Unit,
                Shape::Newtype(7),
                Shape::Tuple(-1, "x".into()),
                Shape::Struct { z: false, a: None },
            ],
            alpha: '\n',
            skipped: None,
        },
        map: [
            ("b".to_owned(), 2),
            ("a".to_owned(), 1),
            ("\u{e000}".to_owned(), 3),
            ("😀".to_owned(), 4),
        ]
        .into_iter()
        .collect(),
        bytes: serde_bytes_like::Bytes(vec![0, 255]),
        big: u64::MAX,
        whole: 2.0,
        small: 0.1,
        nothing: None,
        unit: (),
        tuple: (1, "two"),
    };
    same_as_value_path(&args);
    // Members in canonical order, nested objects too.
    let text = canonical_text(&args).expect("written");
    assert!(
        text.starts_with(r#"{"amount_cents":-2590,"big":18446744073709551615,"#),
        "{text}"
    );
    // UTF-16 order: U+1F600 is written D83D DE00, before U+E000.
    assert!(
        text.contains("\"map\":{\"a\":1,\"b\":2,\"😀\":4,\"\u{e000}\":3}"),
        "{text}"
    );
}

#[test]
fn shapes_the_writer_refuses_fall_back_to_the_value_path() {
    // A map key that is not a string.
    let numbers: BTreeMap<u32, &str> = [(2, "b"), (10, "a")].into_iter().collect();
    assert!(canonical_text(&numbers).is_err());
    let (streamed, via_value) = both_keys(&numbers);
    assert_eq!(streamed, via_value);
    // A double that is not finite (`to_value` makes it `null`).
    assert!(canonical_text(&f64::NAN).is_err());
    let (streamed, via_value) = both_keys(&vec![f64::INFINITY]);
    assert_eq!(streamed, via_value);
    // A 128-bit integer.
    assert!(canonical_text(&7i128).is_err());
    let (streamed, via_value) = both_keys(&7u128);
    assert_eq!(streamed, via_value);
}

#[test]
fn a_raw_value_is_written_with_each_number_nearest_to_its_text() {
    let raw = |text: &str| serde_json::value::RawValue::from_string(text.to_owned()).expect("raw");
    let plain = raw(r#"{"b": [1, 2.50], "a": "\u00e9"}"#);
    assert_eq!(
        canonical_text(&plain).expect("written"),
        r#"{"a":"é","b":[1,2.5]}"#
    );
    let (streamed, via_value) = both_keys(&plain);
    assert_eq!(streamed, via_value);
    // `to_value` takes serde_json's double, one unit off without
    // `float_roundtrip`; the writer reads the text.
    let third = raw(r#"{"x": 333333333.33333329}"#);
    assert_eq!(
        canonical_text(&third).expect("written"),
        r#"{"x":333333333.3333333}"#
    );
    assert_eq!(
        idempotency_key_of("c", "s", "t", &third)
            .expect("a key")
            .as_str(),
        idempotency_key("c", "s", "t", &json!({"x": 333_333_333.333_333_3_f64}))
    );
    // Inside a struct, as an argument field.
    #[derive(Serialize)]
    struct WithRaw {
        z: Box<serde_json::value::RawValue>,
        a: u8,
    }
    let args = WithRaw {
        z: raw("[1e2, 0.1]"),
        a: 1,
    };
    assert_eq!(
        canonical_text(&args).expect("written"),
        r#"{"a":1,"z":[100,0.1]}"#
    );
    // Text that is no JSON the crate reads falls back to `to_value`.
    let twice = raw(r#"{"a": 1, "a": 2}"#);
    assert!(canonical_text(&twice).is_err());
    assert!(idempotency_key_of("c", "s", "t", &twice).is_ok());
}

/// A map that names a member twice: `to_value` keeps one of them.
struct Twice;

impl Serialize for Twice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("b", &1)?;
        map.serialize_entry("a", &2)?;
        map.serialize_entry("b", &3)?;
        map.end()
    }
}

#[test]
fn a_member_named_twice_falls_back_to_the_value_path() {
    assert!(canonical_text(&Twice).is_err());
    let (streamed, via_value) = both_keys(&Twice);
    assert_eq!(streamed, via_value);
}

#[test]
fn the_buffers_are_reused_without_leaking_one_key_into_the_next() {
    let first = idempotency_key_of(
        "c",
        "s",
        "t",
        &json!({"b": {"y": 1, "x": [1, {"q": 2, "p": 3}]}, "a": 0}),
    );
    let second = idempotency_key_of("c", "s", "t", &json!({"a": 0}));
    assert_eq!(
        second.expect("a key").as_str(),
        idempotency_key("c", "s", "t", &json!({"a": 0}))
    );
    assert_eq!(
        first.expect("a key").as_str(),
        idempotency_key(
            "c",
            "s",
            "t",
            &json!({"a": 0, "b": {"x": [1, {"p": 3, "q": 2}], "y": 1}})
        )
    );
}

#[test]
fn an_ended_object_leaves_nothing_behind_in_the_buffers() {
    let mut writer = super::Writer::default();
    json!({"b": {"z": 1, "y": {"q": [], "p": {}}}, "a": 0})
        .serialize(&mut writer)
        .expect("written");
    assert!(writer.names.is_empty(), "names left: {:?}", writer.names);
    assert!(writer.members.is_empty());
    assert_eq!(writer.out, r#"{"a":0,"b":{"y":{"p":{},"q":[]},"z":1}}"#);
}

fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
        "[\u{0}-\u{1f}\"\\\\a]{0,4}".prop_map(Value::from),
    ];
    let name = prop_oneof![
        "[a-z_]{0,6}",
        "\\PC{0,4}",
        Just("\u{e000}".to_owned()),
        Just("😀".to_owned()),
        Just("\u{ffff}".to_owned()),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            // In the order generated: `preserve_order` keeps it, so the
            // writer sees members out of canonical order.
            prop::collection::vec((name.clone(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_json_value_is_written_as_canonical_json_writes_it(value in any_value()) {
        prop_assert_eq!(canonical_text(&value).expect("a Value's shape"), canonical_json(&value));
        let (streamed, via_value) = both_keys(&value);
        prop_assert_eq!(streamed, via_value);
    }
}

/// A struct whose fields are names from [`FIELD_NAMES`], in the order given,
/// each with its value: any set of fields in any order, a name twice too.
struct Fields(Vec<(&'static str, i64)>);

/// Names that sort differently by bytes, by characters and by UTF-16
/// (a character past U+FFFF before U+E000), and one that is a prefix of another.
const FIELD_NAMES: [&str; 7] = ["b", "a", "aa", "é", "\u{10000}", "\u{e000}", "z"];

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut fields = s.serialize_struct("Fields", self.0.len())?;
        for (name, value) in &self.0 {
            fields.serialize_field(name, value)?;
        }
        fields.end()
    }
}

#[derive(Serialize)]
struct Sometimes {
    zeta: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    middle: Option<u8>,
    alpha: u8,
}

#[test]
fn a_struct_s_order_is_found_once_for_each_set_of_fields_and_kept() {
    let mut writer = super::Writer::default();
    let mut write = |value: Sometimes| {
        writer.clear();
        value.serialize(&mut writer).expect("written");
        writer.out.clone()
    };
    for round in 0..3u8 {
        let with = Sometimes {
            zeta: round,
            middle: Some(1),
            alpha: 2,
        };
        let without = Sometimes {
            zeta: round,
            middle: None,
            alpha: 2,
        };
        assert_eq!(
            write(with),
            format!(r#"{{"alpha":2,"middle":1,"zeta":{round}}}"#)
        );
        assert_eq!(write(without), format!(r#"{{"alpha":2,"zeta":{round}}}"#));
    }
    // One order for each set of fields the struct gave, kept across values.
    assert_eq!(writer.orders.len(), 2);
}

#[test]
fn a_struct_that_names_a_field_twice_is_refused_every_time() {
    let twice = Fields(vec![("b", 1), ("a", 2), ("b", 3)]);
    let mut writer = super::Writer::default();
    for _ in 0..2 {
        writer.clear();
        assert!(twice.serialize(&mut writer).is_err());
        assert!(writer.orders.is_empty(), "a refused order is not kept");
    }
    let (streamed, via_value) = both_keys(&twice);
    assert_eq!(streamed, via_value);
}

#[test]
fn more_structs_than_a_thread_keeps_are_each_written_in_order() {
    // Field names of the program's, one pair a struct: more structs than the
    // writer keeps orders of, each written twice.
    let names: Vec<&'static str> = (0..super::ORDERS * 2)
        .flat_map(|i| [format!("z{i}"), format!("a{i}")])
        .map(|name| &*Box::leak(name.into_boxed_str()))
        .collect();
    let mut writer = super::Writer::default();
    for _ in 0..2 {
        for pair in names.chunks(2) {
            writer.clear();
            Fields(vec![(pair[0], 1), (pair[1], 2)])
                .serialize(&mut writer)
                .expect("written");
            assert_eq!(
                writer.out,
                format!(r#"{{"{}":2,"{}":1}}"#, pair[1], pair[0])
            );
        }
    }
    assert_eq!(writer.orders.len(), super::ORDERS);
}

proptest! {
    /// The thread's writer keeps the orders of the structs it wrote: any
    /// set of fields, in any order, after any others, is keyed as its value is.
    #[test]
    fn any_struct_is_keyed_as_its_value_whatever_was_written_before(
        fields in proptest::collection::vec((0..FIELD_NAMES.len(), any::<i64>()), 0..6),
    ) {
        let fields = Fields(fields.into_iter().map(|(i, v)| (FIELD_NAMES[i], v)).collect());
        let (streamed, via_value) = both_keys(&fields);
        prop_assert_eq!(streamed, via_value);
    }
}
