//! Reading one value into a field's type with serde, and serde's words for
//! what is wrong, in JSON's terms.

use std::fmt;

use serde::de::{DeserializeOwned, Error as _, Expected, Unexpected, Visitor};
use serde_json::Value;

/// The text of a raw JSON string that has no escapes: what lies between
/// its quotes. `None` for any other raw value.
pub(super) fn plain_string(raw: &str) -> Option<&str> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// `value` read as a `T`, or where inside it the reading failed (`""` for
/// the value itself, `items[0].sku` inside a nested one) and what the model
/// is told of it: serde's words, the types in JSON's terms. Only an array
/// or an object has an inside: a scalar is read straight, without the
/// path-tracking deserializer, which costs more than the reading itself and
/// would find an empty path.
pub(super) fn read_value<T: DeserializeOwned>(value: &Value) -> Result<T, (String, String)> {
    if !(value.is_array() || value.is_object()) {
        // serde_json's own error formats its text through a search for a
        // line and a column it does not have; [`Scalar`] says the same in
        // one buffer. (Text left empty: that reading declined.)
        if let Some(scalar) = Scalar::of(value) {
            match T::deserialize(scalar) {
                Ok(typed) => return Ok(typed),
                Err(Problem(text)) if !text.is_empty() => {
                    return Err((String::new(), plain_type_error(text)));
                }
                Err(_) => {}
            }
        }
        return T::deserialize(value).map_err(|error| (String::new(), type_problem(&error)));
    }
    serde_path_to_error::deserialize::<_, T>(value).map_err(|error| {
        let path = match error.path().iter().next() {
            None => String::new(),
            Some(_) => error.path().to_string(),
        };
        (path, type_problem(error.inner()))
    })
}

/// A JSON scalar (not an array, not an object) as a deserializer that
/// reads as `&Value`'s does, method by method, to the same values and the
/// same words when it fails, with [`Problem`] for its error; a string is
/// read as [`PlainStr`] reads its text. Not made when serde_json's numbers
/// are text (`arbitrary_precision`), whose reading it leaves to serde_json.
#[derive(Clone, Copy)]
pub(super) struct Scalar<'a>(&'a Value);

impl<'a> Scalar<'a> {
    fn of(value: &'a Value) -> Option<Self> {
        let scalar = !(value.is_array() || value.is_object());
        (scalar && !toolcall_ledger::json::numbers_are_text()).then_some(Scalar(value))
    }

    /// serde's name for what the value is, as `Value::unexpected` says it.
    fn unexpected(self) -> Unexpected<'a> {
        match self.0 {
            Value::Bool(b) => Unexpected::Bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => Unexpected::Unsigned(u),
                (None, Some(i)) => Unexpected::Signed(i),
                _ => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Unexpected::Str(s),
            Value::Array(_) => Unexpected::Seq,
            Value::Object(_) => Unexpected::Map,
            Value::Null => Unexpected::Unit,
        }
    }

    fn refuse<V: Visitor<'a>>(self, visitor: &V) -> Problem {
        Problem::invalid_type(self.unexpected(), visitor)
    }

    /// A number as serde_json's `Number` hands it on: by what it holds.
    fn visit_number<V: Visitor<'a>>(
        n: &serde_json::Number,
        visitor: V,
    ) -> Result<V::Value, Problem> {
        match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => visitor.visit_u64(u),
            (None, Some(i)) => visitor.visit_i64(i),
            _ => visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN)),
        }
    }
}

/// The numeric methods of [`Scalar`]: a number, or a type error.
macro_rules! scalar_numbers {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Problem> {
            match self.0 {
                Value::Number(n) => Scalar::visit_number(n, visitor),
                Value::String(s) => PlainStr(s).$method(visitor),
                _ => Err(self.refuse(&visitor)),
            }
        }
    )*};
}

/// The methods of [`Scalar`] that take a string or a list or a map: a
/// string as [`PlainStr`] reads it, any other scalar a type error.
macro_rules! scalar_refusing {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'a>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Problem> {
            match self.0 {
                Value::String(s) => PlainStr(s).$method($($arg,)* visitor),
                _ => Err(self.refuse(&visitor)),
            }
        }
    )*};
}

impl<'a> serde::Deserializer<'a> for Scalar<'a> {
    type Error = Problem;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => Scalar::visit_number(n, visitor),
            Value::String(s) => PlainStr(s).deserialize_any(visitor),
            Value::Array(_) | Value::Object(_) => Err(self.refuse(&visitor)),
        }
    }

    scalar_numbers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    scalar_refusing! {
        deserialize_char(), deserialize_str(), deserialize_string(),
        deserialize_identifier(), deserialize_bytes(), deserialize_byte_buf(),
        deserialize_seq(), deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize), deserialize_map(),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
    }

    fn deserialize_bool<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.0 {
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::String(s) => PlainStr(s).deserialize_bool(visitor),
            _ => Err(self.refuse(&visitor)),
        }
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::String(s) => PlainStr(s).deserialize_unit(visitor),
            _ => Err(self.refuse(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Problem> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Problem> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Problem> {
        // serde_json's own types (a `RawValue`) are read by serde_json:
        // declined, with no text.
        if name.starts_with("$serde_json::") {
            return Err(Problem(String::new()));
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Problem> {
        match self.0 {
            Value::String(s) => PlainStr(s).deserialize_enum(name, variants, visitor),
            _ => Err(Problem::invalid_type(self.unexpected(), &"string or map")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Problem> {
        visitor.visit_unit()
    }
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

    /// serde_json's words: `null` for a unit, a float as serde_json writes
    /// numbers.
    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Problem::unlike("invalid type: ", unexpected, expected)
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Problem::unlike("invalid value: ", unexpected, expected)
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

impl Problem {
    /// `{head}{unexpected}, expected {expected}`, as serde_json writes it
    /// (its `JsonUnexpected`), in one buffer.
    fn unlike(head: &str, unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        use fmt::Write as _;
        let mut text = String::with_capacity(96);
        text.push_str(head);
        match unexpected {
            Unexpected::Unit => text.push_str("null"),
            Unexpected::Float(f) => {
                text.push_str("floating point `");
                // A finite double is written as serde_json writes a number.
                let _ = match serde_json::Number::from_f64(f) {
                    Some(n) => write!(text, "{n}"),
                    None => write!(text, "{f}"),
                };
                text.push('`');
            }
            other => {
                let _ = write!(text, "{other}");
            }
        }
        text.push_str(", expected ");
        let _ = write!(text, "{expected}");
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
