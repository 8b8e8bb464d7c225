//! Stage 2: from the model's text to a JSON object, strictly and within bounds.

use std::borrow::Cow;
use std::fmt;

use crate::args::MemberValue;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};
use toolcall_ledger::json::{self, LiteralScan};

/// The arguments of a call, as the host received them.
#[derive(Clone, Copy, Debug)]
pub enum Arguments<'a> {
    /// The raw JSON text the model produced. An empty string means `{}`:
    /// providers send it for tools without parameters.
    Raw(&'a str),
    /// Arguments the host (or a provider SDK) already parsed. Their numbers
    /// are the doubles the host's parser made: serde_json without its
    /// `float_roundtrip` feature makes some of them one unit in the last
    /// place off the text's (`333333333.33333329` as `333333333.33333325`),
    /// and the idempotency key is then that double's. The raw text
    /// ([`Arguments::Raw`]) is read as RFC 8785 reads it, every number the
    /// double nearest to its text.
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
/// arrays nested no deeper than the limit allows, member names unique,
/// and every number one that serde_json reads as the double nearest to its
/// text (see [`reads_exactly`]). `None` means "take the full parse", which
/// also says what is wrong.
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
        .deserialize_map(CollectMembers {
            capacity: colons.min(64),
            duplicates: false,
        })
        .ok()?;
    deserializer.end().ok()?;
    // Each member's text as serde_json found it: a string is passed over at
    // its first byte; a number or a list is scanned for its numbers.
    let exact = members.iter().all(|(_, value)| {
        let text = value.get();
        text.starts_with('"') || LiteralScan::new(text).all(reads_exactly)
    });
    exact.then_some(members)
}

/// Whether serde_json reads the number `literal` as the double nearest to
/// its text, which is what the canonical form writes (RFC 8785 section
/// 3.2.2.3): always for an integer of up to 19 digits (it is held exactly,
/// and a double made of it is rounded correctly); for any other number,
/// when serde_json's double is `f64::from_str`'s. Without its
/// `float_roundtrip` feature serde_json may land one unit in the last place
/// off (`333333333.33333329` read as `333333333.33333325`): the fast path,
/// which reads each member's text with serde_json, then gives the call to
/// the full parse, whose numbers are read from their text ([`Literals`]).
/// Only a number with a fraction, an exponent or 20 digits is parsed here.
fn reads_exactly(literal: &str) -> bool {
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    if digits.len() <= 19 && digits.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    match (serde_json::from_str::<f64>(literal), literal.parse::<f64>()) {
        (Ok(theirs), Ok(nearest)) => theirs.to_bits() == nearest.to_bits(),
        _ => false,
    }
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
    let parse = |raw: &str| json::parse_within(raw, depth_left).ok();
    // Sized at once: a collect through `Option` starts from no size hint
    // and grows (a copy of the members read so far) past four.
    let mut values = Vec::with_capacity(members.len());
    for (name, raw) in members {
        values.push((name.clone(), MemberValue::of(raw.get(), parse)?));
    }
    Some(values)
}

/// Member names and raw values, in the order given.
pub type RawMembers<'a> = Vec<(Cow<'a, str>, &'a serde_json::value::RawValue)>;

/// Collects the members, with room for `capacity`; a name twice is an
/// error unless `duplicates` keeps every member.
struct CollectMembers {
    capacity: usize,
    duplicates: bool,
}

/// The members of the JSON object `text`, in order, each name decoded and
/// each value as its text, every one of them even when a name comes twice
/// (a map would keep one). An error when `text` is not one JSON object.
/// What the readers of arguments as written (the providers' adapters, the
/// contract's report) share with the pipeline's parser.
pub fn members_of(text: &str) -> Result<RawMembers<'_>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let members = deserializer.deserialize_map(CollectMembers {
        capacity: 8,
        duplicates: true,
    })?;
    deserializer.end()?;
    Ok(members)
}

impl<'de> Visitor<'de> for CollectMembers {
    type Value = RawMembers<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<RawMembers<'de>, A::Error> {
        let mut members: RawMembers<'de> = Vec::with_capacity(self.capacity);
        while let Some(Name(name)) = access.next_key()? {
            if !self.duplicates && members.iter().any(|(seen, _)| *seen == name) {
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
/// the depth [`json::parse_within`] bounds in text. Iterative, so that a value
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
    json::parse_within(raw, max_depth).map_err(|error| {
        let error = error.to_string();
        ParseError::Syntax(crate::echo::cut(&error, crate::echo::MAX_VALUE_ECHO).into_owned())
    })
}

#[cfg(test)]
mod tests;
