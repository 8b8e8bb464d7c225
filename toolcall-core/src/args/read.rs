//! Reading one value into a field's type with serde, and serde's words for
//! what is wrong, in JSON's terms.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// The text of a raw JSON string that has no escapes: what lies between
/// its quotes. `None` for any other raw value.
pub(super) fn plain_string(raw: &str) -> Option<&str> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// `value` read as a `T`, or where inside it the reading failed (`""` for
/// the value itself, `items[0].sku` inside a nested one) and serde's error.
/// Only an array or an object has an inside: a scalar is read straight,
/// without the path-tracking deserializer, which costs more than the
/// reading itself and would find an empty path.
pub(super) fn read_value<T: DeserializeOwned>(
    value: &Value,
) -> Result<T, (String, serde_json::Error)> {
    if !(value.is_array() || value.is_object()) {
        return T::deserialize(value).map_err(|error| (String::new(), error));
    }
    serde_path_to_error::deserialize::<_, T>(value).map_err(|error| {
        let path = match error.path().iter().next() {
            None => String::new(),
            Some(_) => error.path().to_string(),
        };
        (path, error.into_inner())
    })
}

/// A plain string's text as a deserializer that reads as a parsed
/// `Value::String` of it does (`&Value`'s deserializer): a string to
/// whatever asks for any value, a string, an identifier or bytes; `Some` of
/// it for an option; itself inside a newtype; a unit variant's name for an
/// enum. Anything else is told it got a string, in the same words.
pub(super) struct PlainStr<'a>(pub(super) &'a str);

impl<'de> serde::Deserializer<'de> for PlainStr<'de> {
    type Error = Problem;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Problem> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Problem> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Problem> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Problem> {
        // A unit variant: any data a variant wants is reported missing.
        visitor.visit_enum(serde::de::value::BorrowedStrDeserializer::<Problem>::new(
            self.0,
        ))
    }

    fn deserialize_ignored_any<V: serde::de::Visitor<'de>>(
        self,
        visitor: V,
    ) -> Result<V::Value, Problem> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier
    }
}

/// What [`PlainStr`] says is wrong: serde's words, as `serde_json` would
/// write them, in one buffer (no error boxed, no text grown from nothing).
#[derive(Debug)]
pub(super) struct Problem(pub(super) String);

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Problem {}

impl serde::de::Error for Problem {
    fn custom<T: fmt::Display>(message: T) -> Self {
        let mut text = String::with_capacity(96);
        let _ = fmt::Write::write_fmt(&mut text, format_args!("{message}"));
        Problem(text)
    }

    /// serde's words for an enum's unknown variant, written straight into
    /// one buffer: a model that sends a value outside an enum is the usual
    /// invalid call, and serde's default formats the list through
    /// `fmt::Formatter` name by name.
    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let mut text = String::with_capacity(
            40 + variant.len() + expected.iter().map(|name| name.len() + 4).sum::<usize>(),
        );
        text.push_str("unknown variant `");
        text.push_str(variant);
        match expected {
            [] => text.push_str("`, there are no variants"),
            [only] => {
                text.push_str("`, expected `");
                text.push_str(only);
                text.push('`');
            }
            [first, second] => {
                text.push_str("`, expected `");
                text.push_str(first);
                text.push_str("` or `");
                text.push_str(second);
                text.push('`');
            }
            names => {
                text.push_str("`, expected one of ");
                push_quoted(&mut text, names.iter().copied());
            }
        }
        Problem(text)
    }
}

/// `names` in backquotes, comma-separated: serde's words for a list of
/// names, which the unknown members' messages use too.
pub(super) fn push_quoted<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
    for (i, name) in names.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('`');
        out.push_str(name);
        out.push('`');
    }
}

/// serde's problem with a value, in JSON's terms, written once into room
/// for a usual message (serde's `to_string` grows its text from nothing,
/// four times over).
pub(super) fn type_problem(error: &serde_json::Error) -> String {
    let mut problem = String::with_capacity(96);
    let _ = fmt::Write::write_fmt(&mut problem, format_args!("{error}"));
    plain_type_error(problem)
}

/// serde names Rust types ("expected i64"); the model knows JSON types.
/// The message is rewritten in its own buffer.
pub(super) fn plain_type_error(mut message: String) -> String {
    const SIGNED: [&str; 6] = ["i8", "i16", "i32", "i64", "i128", "isize"];
    const UNSIGNED: [&str; 6] = ["u8", "u16", "u32", "u64", "u128", "usize"];
    let Some((head, ty)) = rsplit_expected(&message) else {
        return message;
    };
    let plain: [&'static str; 2] = if let Some(ty) = SIGNED.iter().find(|t| **t == ty) {
        ["an integer that fits in ", ty]
    } else if let Some(ty) = UNSIGNED.iter().find(|t| **t == ty) {
        ["a non-negative integer that fits in ", ty]
    } else {
        match ty {
            "f32" | "f64" => ["a number", ""],
            "a boolean" => ["true or false", ""],
            _ => return message,
        }
    };
    // `expected ` stays; what follows it is replaced.
    message.truncate(head.len() + "expected ".len());
    message.push_str(plain[0]);
    message.push_str(plain[1]);
    message
}

/// `message` around its last `expected `, as `str::rsplit_once` would
/// split it, without building a substring searcher for every message.
pub(super) fn rsplit_expected(message: &str) -> Option<(&str, &str)> {
    const NEEDLE: &[u8] = b"expected ";
    let bytes = message.as_bytes();
    let last = bytes.len().checked_sub(NEEDLE.len())?;
    let at = (0..=last).rev().find(|&i| bytes[i..].starts_with(NEEDLE))?;
    Some((&message[..at], &message[at + NEEDLE.len()..]))
}
