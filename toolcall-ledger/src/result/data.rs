//! [`Data`]: a result's JSON object, kept as the text a tool's output was
//! serialized to until someone reads it as a map.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{LazyLock, OnceLock};

use serde::de::Deserializer;
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The `data` of a [`ToolResult`](crate::ToolResult): the tool's output, or
/// the details of a rejection. Always a JSON object.
///
/// A tool's output is serialized once, to JSON text, and kept as that text:
/// the dispatcher stores it, replays it and writes it into the model's
/// answer without building a [`Map`] of it. Reading it as a map (`Data`
/// dereferences to [`Map<String, Value>`], so `data["order_id"]`,
/// `data.get(..)` and `data.len()` work as on a map) parses the text once,
/// on first use; changing it (`data.insert(..)`) makes it a map for good.
///
/// ```
/// use toolcall_ledger::{Data, ToolResult};
///
/// let data = Data::from_serialize(&serde_json::json!({"order_id": "ORD-1001"})).unwrap();
/// let result = ToolResult::success("get_order", data);
/// assert_eq!(result.data["order_id"], "ORD-1001");
/// assert_eq!(result.to_model_text(), r#"{"ok":true,"tool":"get_order","data":{"order_id":"ORD-1001"}}"#);
/// ```
///
/// Serialized, it writes its text as it is (with `serde_json`; it is a
/// [`RawValue`] until it becomes a map), members in the order the output
/// wrote them: a struct's field order, whether or not `serde_json`'s
/// `preserve_order` is on (a `HashMap`'s order is arbitrary: a struct or a
/// `BTreeMap` gives the model the same text every time). Two `Data` are
/// equal when their maps are.
#[derive(Default)]
pub struct Data {
    repr: Repr,
}

/// Boxed, so that a `Data` (and every [`ToolResult`](crate::ToolResult),
/// moved from stage to stage) stays a few words.
enum Repr {
    /// A map: the details of a rejection, data read back from a durable
    /// store, or data somebody changed. `None` is the empty object, which
    /// most rejections carry: no allocation.
    Map(Option<Box<Map<String, Value>>>),
    /// The text of a JSON object, written by `serde_json` (compact, valid),
    /// and its map once somebody asked for it.
    Text {
        text: Box<RawValue>,
        parsed: OnceLock<Box<Map<String, Value>>>,
    },
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Map(None)
    }
}

/// What an empty `Data` reads as.
static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

/// The member a value that is not an object is wrapped in.
const WRAPPED: &str = "result";

impl Data {
    /// An empty object.
    pub fn new() -> Self {
        Data::default()
    }

    /// A tool's output as data: `value` serialized once, to text. An object
    /// is the data as it is, `null` (or `()`) is no data, and any other value
    /// is wrapped as `{"result": value}`.
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        // Not checked again: serde_json wrote it, compact, so an object's
        // text starts with its brace.
        let text = serde_json::value::to_raw_value(value)?;
        if text.get().starts_with('{') {
            return Ok(Data {
                repr: Repr::Text {
                    text,
                    parsed: OnceLock::new(),
                },
            });
        }
        // Rare: read back, then wrapped (or nothing, for `null`).
        Ok(Data::from_value(serde_json::from_str(text.get())?))
    }

    /// A tool's output that is already a [`Value`], as data: an object as it
    /// is, `null` as no data, anything else as `{"result": value}`.
    pub fn from_value(value: Value) -> Self {
        match value {
            Value::Object(map) => Data::from(map),
            Value::Null => Data::new(),
            other => {
                let mut map = Map::new();
                map.insert(WRAPPED.into(), other);
                Data::from(map)
            }
        }
    }

    /// The data as a map (parsed now if it was text).
    pub fn into_map(self) -> Map<String, Value> {
        match self.repr {
            Repr::Map(map) => map.map(|map| *map).unwrap_or_default(),
            Repr::Text { text, mut parsed } => {
                parsed.take().map_or_else(|| parse(&text), |map| *map)
            }
        }
    }

    /// The data as JSON text, written now if it is a map.
    pub fn to_json(&self) -> String {
        match &self.repr {
            // A map of strings to values always serializes.
            Repr::Map(_) => serde_json::to_string(&**self).unwrap_or_else(|_| "{}".to_owned()),
            Repr::Text { text, .. } => text.get().to_owned(),
        }
    }

    /// Whether the object has no member. Text is not parsed to tell.
    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Map(map) => map.as_ref().is_none_or(|map| map.is_empty()),
            // Compact when serde_json wrote it; read back, as it was stored.
            Repr::Text { text, .. } => text
                .get()
                .trim()
                .strip_prefix('{')
                .is_some_and(|rest| rest.trim_start() == "}"),
        }
    }

    /// The map, for reading.
    fn map(&self) -> &Map<String, Value> {
        match &self.repr {
            Repr::Map(Some(map)) => map,
            Repr::Map(None) => &EMPTY,
            Repr::Text { text, parsed } => parsed.get_or_init(|| Box::new(parse(text))),
        }
    }

    /// The map, for changing: text becomes a map for good.
    fn map_mut(&mut self) -> &mut Map<String, Value> {
        if !matches!(self.repr, Repr::Map(Some(_))) {
            let map = std::mem::take(self).into_map();
            self.repr = Repr::Map(Some(Box::new(map)));
        }
        match &mut self.repr {
            Repr::Map(Some(map)) => map,
            _ => unreachable!("made a map just above"),
        }
    }
}

/// The map of text `serde_json` wrote for an object. (Text that is no
/// object never becomes `Data`: see [`Data::from_serialize`].)
fn parse(text: &RawValue) -> Map<String, Value> {
    serde_json::from_str(text.get()).unwrap_or_default()
}

impl Deref for Data {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        self.map()
    }
}

impl DerefMut for Data {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.map_mut()
    }
}

impl Clone for Data {
    /// Text is cloned as text (one allocation), however it was read.
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Map(map) => Data {
                repr: Repr::Map(map.clone()),
            },
            Repr::Text { text, .. } => Data {
                repr: Repr::Text {
                    text: text.clone(),
                    parsed: OnceLock::new(),
                },
            },
        }
    }
}

impl From<Map<String, Value>> for Data {
    fn from(map: Map<String, Value>) -> Self {
        Data {
            repr: Repr::Map((!map.is_empty()).then(|| Box::new(map))),
        }
    }
}

impl From<Data> for Map<String, Value> {
    fn from(data: Data) -> Self {
        data.into_map()
    }
}

impl From<Data> for Value {
    fn from(data: Data) -> Self {
        Value::Object(data.into_map())
    }
}

impl PartialEq for Data {
    fn eq(&self, other: &Data) -> bool {
        match (&self.repr, &other.repr) {
            (Repr::Text { text: a, .. }, Repr::Text { text: b, .. }) if a.get() == b.get() => true,
            _ => self.map() == other.map(),
        }
    }
}

impl PartialEq<Map<String, Value>> for Data {
    fn eq(&self, other: &Map<String, Value>) -> bool {
        self.map() == other
    }
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Map(_) => fmt::Debug::fmt(&**self, f),
            Repr::Text { text, .. } => f.write_str(text.get()),
        }
    }
}

impl Serialize for Data {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.repr {
            Repr::Map(_) => (**self).serialize(serializer),
            Repr::Text { text, .. } => text.serialize(serializer),
        }
    }
}

/// Read back (a durable store's result, say) as the text it was written
/// as: a replay from any store answers the same text as the call did. With
/// `serde_json` only, like [`RawValue`]; anything but an object is refused.
impl<'de> Deserialize<'de> for Data {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Box::<RawValue>::deserialize(deserializer)?;
        if !text.get().trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("a result's data is a JSON object"));
        }
        Ok(Data {
            repr: Repr::Text {
                text,
                parsed: OnceLock::new(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;
    use serde_json::{Value, json};

    use super::Data;

    #[derive(Serialize)]
    struct View {
        order_id: &'static str,
        total_cents: i64,
        tags: Vec<&'static str>,
    }

    const VIEW: View = View {
        order_id: "ORD-1001",
        total_cents: 2590,
        tags: Vec::new(),
    };

    #[test]
    fn text_reads_as_the_map_the_value_would_be() {
        let data = Data::from_serialize(&VIEW).unwrap();
        let value = serde_json::to_value(&VIEW).unwrap();
        assert_eq!(*data, *value.as_object().unwrap());
        assert_eq!(data["total_cents"], 2590);
        assert_eq!(data.len(), 3);
        assert!(!data.is_empty());
        assert_eq!(
            data.to_json(),
            r#"{"order_id":"ORD-1001","total_cents":2590,"tags":[]}"#
        );
    }

    #[test]
    fn serialized_text_is_written_as_it_is_and_a_map_as_a_map() {
        let text = Data::from_serialize(&VIEW).unwrap();
        let map = Data::from(
            serde_json::to_value(&VIEW)
                .unwrap()
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(text, map);
        assert_eq!(
            serde_json::to_string(&text).unwrap(),
            r#"{"order_id":"ORD-1001","total_cents":2590,"tags":[]}"#
        );
        assert_eq!(
            serde_json::from_str::<Value>(&serde_json::to_string(&map).unwrap()).unwrap(),
            serde_json::from_str::<Value>(&serde_json::to_string(&text).unwrap()).unwrap()
        );
        let back: Data = serde_json::from_str(&serde_json::to_string(&text).unwrap()).unwrap();
        assert_eq!(back, text);
    }

    #[test]
    fn read_back_it_keeps_its_text_and_refuses_what_is_no_object() {
        let text = r#"{"b":1,"a":[true,null]}"#;
        let data: Data = serde_json::from_str(text).unwrap();
        assert_eq!(data.to_json(), text, "the text as it was, in its order");
        assert_eq!(data["a"], json!([true, null]));
        let value: Data = serde_json::from_value(json!({"x": "y"})).unwrap();
        assert_eq!(value["x"], "y");
        let spaced: Data = serde_json::from_str(" { \n } ").unwrap();
        assert!(spaced.is_empty());
        assert_eq!(spaced, Data::new());
        for bad in ["[1]", "1", "\"x\"", "null", "{"] {
            assert!(serde_json::from_str::<Data>(bad).is_err(), "{bad}");
        }
        let result: crate::ToolResult = serde_json::from_str(
            r#"{"ok":true,"tool":"get_order","data":{"total_cents":2590,"order_id":"ORD-1"}}"#,
        )
        .unwrap();
        assert_eq!(
            result.to_model_text(),
            r#"{"ok":true,"tool":"get_order","data":{"total_cents":2590,"order_id":"ORD-1"}}"#
        );
        let empty: crate::ToolResult = serde_json::from_str(r#"{"ok":true,"tool":"t"}"#).unwrap();
        assert!(empty.data.is_empty());
    }

    #[test]
    fn other_values_are_wrapped_and_null_is_nothing() {
        for (value, expected) in [
            (json!(null), json!({})),
            (json!(42), json!({"result": 42})),
            (json!("done"), json!({"result": "done"})),
            (json!([1, {"a": 2}]), json!({"result": [1, {"a": 2}]})),
            (json!({"a": 1}), json!({"a": 1})),
        ] {
            let text = Data::from_serialize(&value).unwrap();
            let parsed = Data::from_value(value.clone());
            assert_eq!(Value::from(text.clone()), expected, "{value}");
            assert_eq!(text, parsed, "{value}");
            assert_eq!(text.is_empty(), expected == json!({}), "{value}");
            let written: Value =
                serde_json::from_str(&serde_json::to_string(&text).unwrap()).unwrap();
            assert_eq!(written, expected, "{value}");
        }
        assert!(Data::from_serialize(&()).unwrap().is_empty());
    }

    #[test]
    fn a_change_makes_text_a_map_and_a_clone_keeps_its_own() {
        let mut data = Data::from_serialize(&VIEW).unwrap();
        let before = data.clone();
        data.insert("extra".into(), json!(true));
        assert_eq!(data["extra"], true);
        assert!(
            data.to_json().ends_with(r#""extra":true}"#)
                || data.to_json().contains(r#""extra":true"#)
        );
        assert!(before.get("extra").is_none(), "the clone is not changed");
        assert_ne!(data, before);
        data.remove("extra");
        assert_eq!(data, before);
    }

    #[test]
    fn data_and_results_stay_a_few_words() {
        // Results move from stage to stage: what they carry inline is copied.
        assert!(std::mem::size_of::<Data>() <= 32);
        let empty = Data::from(serde_json::Map::new());
        assert!(empty.is_empty() && empty == Data::new() && empty.to_json() == "{}");
    }

    #[test]
    fn output_that_does_not_serialize_is_an_error() {
        let mut map = std::collections::HashMap::new();
        map.insert(vec![1u8], 1);
        assert!(Data::from_serialize(&map).is_err());
    }
}
