//! Stage 2: from the model's text to a JSON object, strictly and within bounds.

use std::borrow::Cow;
use std::fmt;

use crate::args::MemberValue;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The arguments of a call, as the host received them.
#[derive(Clone, Copy, Debug)]
pub enum Arguments<'a> {
    /// The raw JSON text the model produced. An empty string means `{}`:
    /// providers send it for tools without parameters.
    Raw(&'a str),
    /// Arguments the host (or a provider SDK) already parsed.
    Parsed(&'a Value),
}

impl<'a> From<&'a str> for Arguments<'a> {
    fn from(raw: &'a str) -> Self {
        Arguments::Raw(raw)
    }
}

impl<'a> From<&'a String> for Arguments<'a> {
    fn from(raw: &'a String) -> Self {
        Arguments::Raw(raw)
    }
}

impl<'a> From<&'a Value> for Arguments<'a> {
    fn from(parsed: &'a Value) -> Self {
        Arguments::Parsed(parsed)
    }
}

impl Arguments<'_> {
    /// The arguments as text, for the audit record.
    pub(crate) fn to_text(self) -> String {
        match self {
            Arguments::Raw(raw) => raw.to_owned(),
            Arguments::Parsed(value) => value.to_string(),
        }
    }

    /// The arguments as the audit keeps them for `spec`: every sensitive
    /// value replaced by `"[redacted]"`. Text that is not a JSON object
    /// cannot be redacted value by value, so none of it is kept.
    pub(crate) fn to_redacted_text(self, spec: &crate::ToolSpec) -> String {
        let parsed = match self {
            Arguments::Raw(raw) => serde_json::from_str::<Value>(raw).ok(),
            Arguments::Parsed(value) => Some(value.clone()),
        };
        match parsed {
            Some(mut object @ Value::Object(_)) => {
                spec.redact_arguments(&mut object);
                object.to_string()
            }
            _ => crate::redact::REDACTED.to_owned(),
        }
    }
}

/// Why the arguments are not a usable JSON object.
#[derive(Debug)]
pub(crate) enum ParseError {
    TooLarge { size: usize, limit: usize },
    TooDeep { limit: usize },
    Syntax(String),
    NotAnObject,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::TooLarge { size, limit } => write!(
                f,
                "Arguments are {size} bytes, over the limit of {limit}. Send only the fields the tool takes."
            ),
            ParseError::TooDeep { limit } => write!(
                f,
                "Arguments are nested more than {limit} levels deep. Send only the fields the tool takes."
            ),
            ParseError::Syntax(error) => write!(f, "Arguments are not valid JSON: {error}."),
            ParseError::NotAnObject => f.write_str("Arguments must be a JSON object."),
        }
    }
}

/// Parses the arguments into an object: at most `max_bytes` of text, at most
/// `max_depth` levels of nesting, no member name twice in one object.
///
/// Arguments that arrive parsed are held to the same bounds: their compact
/// JSON text at most `max_bytes`, their nesting at most `max_depth`. (Their
/// duplicate members, if the text had any, were lost by whoever parsed it:
/// a transport that can keep the raw text passes [`Arguments::Raw`].)
pub(crate) fn parse_object<'a>(
    arguments: Arguments<'a>,
    max_bytes: usize,
    max_depth: usize,
) -> Result<Cow<'a, Map<String, Value>>, ParseError> {
    match arguments {
        Arguments::Parsed(value @ Value::Object(map)) => {
            if depth(value) > max_depth {
                return Err(ParseError::TooDeep { limit: max_depth });
            }
            let size = compact_len(value, max_bytes);
            if size > max_bytes {
                return Err(ParseError::TooLarge {
                    size,
                    limit: max_bytes,
                });
            }
            Ok(Cow::Borrowed(map))
        }
        Arguments::Parsed(_) => Err(ParseError::NotAnObject),
        Arguments::Raw("") => Ok(Cow::Owned(Map::new())),
        Arguments::Raw(raw) => {
            if raw.len() > max_bytes {
                return Err(ParseError::TooLarge {
                    size: raw.len(),
                    limit: max_bytes,
                });
            }
            match parse_strict(raw, max_depth)? {
                Value::Object(map) => Ok(Cow::Owned(map)),
                _ => Err(ParseError::NotAnObject),
            }
        }
    }
}

/// The members of a raw arguments object, each as its raw text: the fast
/// path's parse, taken only when the text is plainly within every bound
/// the full parse enforces: an object with no object inside it (so no
/// duplicate member can hide at depth; a `{` in a string counts too),
/// arrays nested no deeper than the limit allows, member names unique.
/// `None` means "take the full parse", which also says what is wrong.
pub(crate) fn raw_members(raw: &str, max_depth: usize) -> Option<RawMembers<'_>> {
    let (mut braces, mut brackets, mut colons) = (0usize, 0usize, 0usize);
    for &byte in raw.as_bytes() {
        match byte {
            b'{' => braces += 1,
            b'[' => brackets += 1,
            b':' => colons += 1,
            _ => {}
        }
    }
    if braces != 1 || brackets >= max_depth {
        return None;
    }
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    // One `:` a member, and some in strings: room for every member at once.
    let members = deserializer
        .deserialize_map(CollectMembers(colons.min(64)))
        .ok()?;
    deserializer.end().ok()?;
    Some(members)
}

/// The members the fast path read, each value parsed as the full parse
/// parses a member of the object (the same checks, the same depth): the
/// object without the map, for reading arguments the fast path refused.
/// `None` if a value would fail the full parse (a number out of range, a
/// lone surrogate, which a raw value lets through): that parse then says
/// what is wrong.
pub(crate) fn member_values<'a>(
    members: &[(Cow<'a, str>, &'a serde_json::value::RawValue)],
    max_depth: usize,
) -> Option<Vec<(Cow<'a, str>, MemberValue<'a>)>> {
    // The object is one level: its members are read one level down.
    let depth_left = max_depth.checked_sub(1)?;
    let parse = |raw: &str| {
        let mut deserializer = serde_json::Deserializer::from_str(raw);
        let value = StrictValue { depth_left }
            .deserialize(&mut deserializer)
            .ok()?;
        deserializer.end().ok()?;
        Some(value)
    };
    members
        .iter()
        .map(|(name, raw)| Some((name.clone(), MemberValue::of(raw.get(), parse)?)))
        .collect()
}

/// Member names and raw values, in the order given.
pub(crate) type RawMembers<'a> = Vec<(Cow<'a, str>, &'a serde_json::value::RawValue)>;

/// Collects the members, with room for this many.
struct CollectMembers(usize);

impl<'de> Visitor<'de> for CollectMembers {
    type Value = RawMembers<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<RawMembers<'de>, A::Error> {
        let mut members: RawMembers<'de> = Vec::with_capacity(self.0);
        while let Some(Name(name)) = access.next_key()? {
            if members.iter().any(|(seen, _)| *seen == name) {
                return Err(de::Error::custom("duplicate member"));
            }
            members.push((name, access.next_value()?));
        }
        Ok(members)
    }
}

/// A member name, borrowed from the text unless it has escapes.
struct Name<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Name<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Borrowed(v)))
            }

            fn visit_str<E>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v.to_owned())))
            }

            fn visit_string<E>(self, v: String) -> Result<Name<'de>, E> {
                Ok(Name(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

/// How many arrays and objects are nested in `value`, itself included:
/// the depth [`StrictValue`] bounds in text. Iterative, so that a value
/// nested deeper than the stack cannot overflow it.
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        deepest = deepest.max(level);
        stack.extend(children.map(|child| (child, level + 1)));
    }
    deepest
}

/// The length of `value`'s compact JSON text, counted without building it;
/// counting stops a little past `limit`.
fn compact_len(value: &Value, limit: usize) -> usize {
    struct Count {
        bytes: usize,
        limit: usize,
    }
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes += buf.len();
            if self.bytes > self.limit {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count { bytes: 0, limit };
    let _ = serde_json::to_writer(&mut count, value);
    count.bytes
}

fn parse_strict(raw: &str, max_depth: usize) -> Result<Value, ParseError> {
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    let value = StrictValue {
        depth_left: max_depth,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value))
    .map_err(|error| {
        let error = error.to_string();
        ParseError::Syntax(crate::echo::cut(&error, crate::echo::MAX_VALUE_ECHO).into_owned())
    })?;
    Ok(value)
}

/// A `serde_json::Value` that refuses duplicate member names (a classic
/// parser-differential attack: two parsers that keep different duplicates
/// disagree on what was approved) and nesting deeper than a bound.
struct StrictValue {
    depth_left: usize,
}

impl StrictValue {
    fn nested<E: de::Error>(&self) -> Result<StrictValue, E> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => Ok(StrictValue { depth_left }),
            None => Err(E::custom("arguments are nested too deeply")),
        }
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(self.nested()?)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(name) = access.next_key::<String>()? {
            if map.contains_key(&name) {
                return Err(de::Error::custom(format_args!("duplicate member `{name}`")));
            }
            let value = access.next_value_seed(self.nested()?)?;
            map.insert(name, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<Map<String, Value>, String> {
        parse_object(Arguments::Raw(raw), 1024, 4)
            .map(Cow::into_owned)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn empty_text_is_an_empty_object() {
        assert_eq!(parse(""), Ok(Map::new()));
    }

    #[test]
    fn white_space_alone_is_not_json() {
        assert!(
            parse("  ")
                .unwrap_err()
                .starts_with("Arguments are not valid JSON")
        );
    }

    #[test]
    fn non_object_roots_are_refused() {
        for raw in ["[]", "1", "\"x\"", "null", "true"] {
            assert_eq!(
                parse(raw).unwrap_err(),
                "Arguments must be a JSON object.",
                "{raw}"
            );
        }
        let array = Value::Array(vec![]);
        assert!(matches!(
            parse_object(Arguments::Parsed(&array), 1024, 4),
            Err(ParseError::NotAnObject)
        ));
    }

    #[test]
    fn the_fast_parse_takes_only_what_is_plainly_within_bounds() {
        let members = raw_members(r#"{"a": "x{", "b": [1, [2]], "c\\u0041": null}"#, 8);
        assert!(
            members.is_none(),
            "a brace in a string sends it to the full parse"
        );
        let members = raw_members(r#"{"a": "x", "b": [1, [2]], "c\u0041": null}"#, 8).unwrap();
        let names: Vec<&str> = members.iter().map(|(n, _)| n.as_ref()).collect();
        assert_eq!(names, ["a", "b", "cA"]);
        assert_eq!(members[1].1.get(), "[1, [2]]");
        for refused in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"a": {"b": 1}}"#,
            r#"{"a": [[[1]]]}"#,
            r#"[1]"#,
            r#"{"a": 1} x"#,
            r#"{"a": 1"#,
            "",
        ] {
            assert!(raw_members(refused, 3).is_none(), "{refused}");
        }
        assert!(raw_members(r#"{"a": [[1]]}"#, 3).is_some());
    }

    #[test]
    fn duplicate_members_are_refused_at_any_depth() {
        assert!(
            parse(r#"{"a": 1, "a": 2}"#)
                .unwrap_err()
                .contains("duplicate member `a`")
        );
        assert!(
            parse(r#"{"x": {"b": 1, "b": 1}}"#)
                .unwrap_err()
                .contains("duplicate member `b`")
        );
        assert!(parse(r#"{"a": 1, "b": {"a": 2}}"#).is_ok());
    }

    #[test]
    fn depth_and_size_are_bounded() {
        assert!(parse(r#"{"a": [[[1]]]}"#).is_ok());
        assert!(
            parse(r#"{"a": [[[[1]]]]}"#)
                .unwrap_err()
                .contains("nested too deeply")
        );
        let big = format!(r#"{{"a": "{}"}}"#, "x".repeat(2000));
        assert!(parse(&big).unwrap_err().contains("over the limit of 1024"));
    }

    #[test]
    fn parsed_arguments_are_held_to_the_same_depth_and_size() {
        let parsed = |value: Value| {
            parse_object(Arguments::Parsed(&value), 1024, 4)
                .map(Cow::into_owned)
                .map_err(|e| e.to_string())
        };
        // The same bounds as the text forms above.
        assert!(parsed(serde_json::json!({"a": [[[1]]]})).is_ok());
        assert!(
            parsed(serde_json::json!({"a": [[[[1]]]]}))
                .unwrap_err()
                .contains("nested more than 4 levels")
        );
        assert!(
            parsed(serde_json::json!({"a": [[[[]]]]}))
                .unwrap_err()
                .contains("nested more than 4 levels"),
            "an empty container counts, as in text"
        );
        assert!(parse(r#"{"a": [[[[]]]]}"#).is_err());
        let big = serde_json::json!({"a": "x".repeat(2000)});
        assert!(parsed(big).unwrap_err().contains("over the limit of 1024"));
        let exact = serde_json::json!({"a": "x".repeat(1024 - 8)});
        assert_eq!(exact.to_string().len(), 1024);
        assert!(parsed(exact).is_ok());
    }

    #[test]
    fn a_long_duplicate_member_name_is_not_echoed_whole() {
        let name = "n".repeat(10_000);
        let raw = format!(r#"{{"{name}": 1, "{name}": 2}}"#);
        let error = parse_object(Arguments::Raw(&raw), 1 << 20, 4)
            .unwrap_err()
            .to_string();
        assert!(error.contains("duplicate member"), "{error}");
        assert!(error.len() < 400, "{} bytes", error.len());
    }

    #[test]
    fn trailing_text_is_refused() {
        assert!(parse(r#"{"a": 1} x"#).is_err());
        assert!(parse(r#"{"a": 1}{"b": 2}"#).is_err());
        assert!(parse("{\"a\": 1}\n").is_ok());
    }
}
