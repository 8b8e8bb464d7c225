//! Stage 2: from the model's text to a JSON object, strictly and within bounds.

use std::borrow::Cow;
use std::fmt;

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

    /// The arguments as text with the values of `sensitive` members replaced
    /// by `"[redacted]"`. Text that is not a JSON object cannot be redacted
    /// member by member, so none of it is kept.
    pub(crate) fn to_redacted_text(self, sensitive: &[&str]) -> String {
        let parsed = match self {
            Arguments::Raw(raw) => serde_json::from_str::<Value>(raw).ok(),
            Arguments::Parsed(value) => Some(value.clone()),
        };
        match parsed {
            Some(Value::Object(mut map)) => {
                for name in sensitive {
                    if let Some(value) = map.get_mut(*name) {
                        *value = Value::from(REDACTED);
                    }
                }
                Value::Object(map).to_string()
            }
            _ => REDACTED.to_owned(),
        }
    }
}

/// What stands in the audit record for a sensitive value.
pub(crate) const REDACTED: &str = "[redacted]";

/// Why the arguments are not a usable JSON object.
#[derive(Debug)]
pub(crate) enum ParseError {
    TooLarge { size: usize, limit: usize },
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
            ParseError::Syntax(error) => write!(f, "Arguments are not valid JSON: {error}."),
            ParseError::NotAnObject => f.write_str("Arguments must be a JSON object."),
        }
    }
}

/// Parses the arguments into an object: at most `max_bytes` of text, at most
/// `max_depth` levels of nesting, no member name twice in one object.
pub(crate) fn parse_object<'a>(
    arguments: Arguments<'a>,
    max_bytes: usize,
    max_depth: usize,
) -> Result<Cow<'a, Map<String, Value>>, ParseError> {
    match arguments {
        Arguments::Parsed(Value::Object(map)) => Ok(Cow::Borrowed(map)),
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

fn parse_strict(raw: &str, max_depth: usize) -> Result<Value, ParseError> {
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    let value = StrictValue {
        depth_left: max_depth,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value))
    .map_err(|error| ParseError::Syntax(error.to_string()))?;
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
    fn trailing_text_is_refused() {
        assert!(parse(r#"{"a": 1} x"#).is_err());
        assert!(parse(r#"{"a": 1}{"b": 2}"#).is_err());
        assert!(parse("{\"a\": 1}\n").is_ok());
    }
}
