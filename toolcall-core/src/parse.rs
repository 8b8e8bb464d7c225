//! Stage 2: from the model's text to a JSON object, strictly and within bounds.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::sync::OnceLock;

use crate::args::MemberValue;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

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

/// A byte of a JSON number's text, once it has begun.
fn is_number_byte(byte: u8) -> bool {
    matches!(byte, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
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
    let parse = |raw: &str| {
        let mut deserializer = serde_json::Deserializer::from_str(raw);
        let literals = Literals::new(raw);
        let value = StrictValue::new(depth_left, &literals)
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

/// `text` read as [`parse_object`] reads arguments (no member named twice
/// in one object, every number exact: see [`StrictValue`]), whatever JSON
/// value it is, nested as deep as serde_json allows (128 levels).
pub(crate) fn parse_value(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let literals = Literals::new(text);
    let value = StrictValue::new(usize::MAX, &literals).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

fn parse_strict(raw: &str, max_depth: usize) -> Result<Value, ParseError> {
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    let literals = Literals::new(raw);
    let value = StrictValue::new(max_depth, &literals)
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(|error| {
            let error = error.to_string();
            ParseError::Syntax(crate::echo::cut(&error, crate::echo::MAX_VALUE_ECHO).into_owned())
        })?;
    Ok(value)
}

/// The number literals of a JSON text, in the order a parse reads them:
/// where [`StrictValue`] reads each double from. serde_json hands the
/// visitor a double it computed itself, which, without its `float_roundtrip`
/// feature, may be one unit in the last place off the nearest double to the
/// text; RFC 8785 (and so the canonical form and the idempotency key) reads
/// a number as the nearest double, and Rust's `f64::from_str` rounds
/// correctly. Integers are counted, not scanned; the text is scanned (once,
/// from where the last scan stopped) only for a number that is a double.
struct Literals<'t> {
    text: &'t str,
    /// The number tokens the parse has read.
    read: Cell<usize>,
    /// Where the scan stopped, and how many literals lie before that.
    at: Cell<usize>,
    passed: Cell<usize>,
}

impl<'t> Literals<'t> {
    fn new(text: &'t str) -> Self {
        Literals {
            text,
            read: Cell::new(0),
            at: Cell::new(0),
            passed: Cell::new(0),
        }
    }

    /// The parse read a number token as an integer (exactly) or, with
    /// serde_json's `arbitrary_precision`, as its text.
    fn exact(&self) {
        self.read.set(self.read.get() + 1);
    }

    /// The parse read a number token as `theirs`: the double nearest to the
    /// token's text. (`theirs` if the text were not found, or were another
    /// number than the one serde_json read: never, but a slip in the count
    /// must not make one number into another.)
    fn double(&self, theirs: f64) -> f64 {
        let index = self.read.get();
        self.read.set(index + 1);
        match self.literal(index).map(str::parse::<f64>) {
            Some(Ok(nearest)) if same_number(nearest, theirs) => nearest,
            _ => theirs,
        }
    }

    /// The text of number literal `index` (from 0), scanning forward.
    fn literal(&self, index: usize) -> Option<&'t str> {
        let skip = index.checked_sub(self.passed.get())?;
        let mut scan = LiteralScan {
            text: self.text,
            at: self.at.get(),
        };
        let found = scan.nth(skip);
        self.at.set(scan.at);
        self.passed.set(index + 1);
        found
    }
}

/// The number literals of a JSON text, in order, each as its text: what
/// lies outside strings from a `-` or a digit to the end of the number's
/// bytes. (Over JSON serde_json has read, these are its number tokens.)
struct LiteralScan<'t> {
    text: &'t str,
    at: usize,
}

impl<'t> LiteralScan<'t> {
    fn new(text: &'t str) -> Self {
        LiteralScan { text, at: 0 }
    }
}

impl<'t> Iterator for LiteralScan<'t> {
    type Item = &'t str;

    fn next(&mut self) -> Option<&'t str> {
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() {
            match bytes[self.at] {
                b'"' => self.at = string_end(bytes, self.at),
                b'-' | b'0'..=b'9' => {
                    let start = self.at;
                    while self.at < bytes.len() && is_number_byte(bytes[self.at]) {
                        self.at += 1;
                    }
                    // Number bytes are ASCII: the cuts are on boundaries.
                    return self.text.get(start..self.at);
                }
                _ => self.at += 1,
            }
        }
        None
    }
}

/// Where the string opening at `at` ends (past its closing quote).
fn string_end(bytes: &[u8], at: usize) -> usize {
    let mut at = at + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    at
}

/// Whether `nearest`, a literal's correctly rounded double, is the number
/// serde_json read as `theirs`: equal, or a few units in the last place
/// apart (serde_json's error), never further.
fn same_number(nearest: f64, theirs: f64) -> bool {
    /// The doubles in order as integers: neighbours differ by one.
    fn ordered(f: f64) -> i64 {
        let bits = f.to_bits() as i64;
        if bits < 0 { i64::MIN - bits } else { bits }
    }
    ordered(nearest).abs_diff(ordered(theirs)) <= 16
}

/// Whether serde_json was built with `arbitrary_precision` (some crate of
/// the application may turn it on): then a number reaches a visitor as a
/// map of one private member, its text.
fn numbers_are_text() -> bool {
    /// Whether a number comes as a map.
    struct Probe;
    impl<'de> Visitor<'de> for Probe {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number")
        }

        fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
            Ok(false)
        }

        fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<bool, A::Error> {
            Ok(true)
        }
    }
    static TEXT: OnceLock<bool> = OnceLock::new();
    *TEXT.get_or_init(|| {
        serde_json::Deserializer::from_str("0.5")
            .deserialize_any(Probe)
            .unwrap_or(false)
    })
}

/// The member name serde_json's `arbitrary_precision` gives a number.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A `serde_json::Value` that refuses duplicate member names (a classic
/// parser-differential attack: two parsers that keep different duplicates
/// disagree on what was approved) and nesting deeper than a bound, and
/// whose numbers are exact: an integer as serde_json holds it, any other
/// number as the double nearest to its text ([`Literals`]).
#[derive(Clone, Copy)]
struct StrictValue<'l, 't> {
    depth_left: usize,
    literals: &'l Literals<'t>,
}

impl<'l, 't> StrictValue<'l, 't> {
    fn new(depth_left: usize, literals: &'l Literals<'t>) -> Self {
        StrictValue {
            depth_left,
            literals,
        }
    }

    fn nested<E: de::Error>(&self) -> Result<Self, E> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => Ok(StrictValue {
                depth_left,
                ..*self
            }),
            None => Err(E::custom("arguments are nested too deeply")),
        }
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        self.literals.exact();
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        self.literals.exact();
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(self.literals.double(v))
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
            if map.is_empty() && name == NUMBER_TOKEN && numbers_are_text() {
                // A number, as `arbitrary_precision` passes it: its text,
                // which the `Number` keeps (and reads exactly).
                let text: String = access.next_value()?;
                self.literals.exact();
                let number = text.parse::<Number>().map_err(de::Error::custom)?;
                // As without the feature: a number no double holds is refused.
                return match (number.as_i64(), number.as_u64(), number.as_f64()) {
                    (None, None, None) => Err(de::Error::custom("number out of range")),
                    _ => Ok(Value::Number(number)),
                };
            }
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

    /// serde_json's own double for `text` (one unit off without its
    /// `float_roundtrip` feature) and the nearest one.
    fn doubles(text: &str) -> (f64, f64) {
        (
            serde_json::from_str(text).unwrap(),
            text.parse::<f64>().unwrap(),
        )
    }

    const THIRD: &str = "333333333.33333329";

    #[test]
    fn the_full_parse_reads_every_double_from_its_text() {
        let text = format!(
            r#"{{"s": "1.5 \" {THIRD}", "a": [1, {THIRD}, {{"b": -0.0, "c": 2e-3}}], "d": {THIRD}, "n": 18446744073709551616, "t": true}}"#
        );
        let object = parse(&text).unwrap();
        let third = 333_333_333.333_333_3_f64;
        assert_eq!(object["a"][1].as_f64(), Some(third));
        assert_eq!(object["a"][2]["c"].as_f64(), Some(0.002));
        assert_eq!(object["d"].as_f64(), Some(third));
        assert_eq!(object["n"].as_f64(), Some(18446744073709551616.0));
        assert_eq!(object["a"][0].as_u64(), Some(1), "integers stay integers");
        assert_eq!(object["s"], "1.5 \" 333333333.33333329");
        // Read one member at a time, as the fast path's refusals are.
        let flat = format!(r#"{{"a": [1, {THIRD}], "d": {THIRD}, "s": "x"}}"#);
        let raw: RawMembers<'_> = {
            let mut deserializer = serde_json::Deserializer::from_str(&flat);
            deserializer
                .deserialize_map(CollectMembers {
                    capacity: 4,
                    duplicates: false,
                })
                .unwrap()
        };
        let values = member_values(&raw, 8).unwrap();
        let value = |i: usize| match &values[i].1 {
            MemberValue::Parsed(value) => value.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(value(0)[1].as_f64(), Some(third));
        assert_eq!(value(1).as_f64(), Some(third));
    }

    #[test]
    fn the_fast_parse_takes_a_number_only_if_serde_json_reads_it_exactly() {
        let (theirs, nearest) = doubles(THIRD);
        assert_eq!(nearest, 333_333_333.333_333_3);
        let misread = theirs != nearest;
        for text in [
            format!(r#"{{"a": {THIRD}}}"#),
            format!(r#"{{"a": [0.5, {THIRD}]}}"#),
            format!(r#"{{"s": "x\"", "a":{THIRD}}}"#),
            format!(r#"{{"a":{THIRD}}}"#)
                .trim_end_matches('}')
                .to_owned()
                + " }",
        ] {
            assert_eq!(raw_members(&text, 8).is_none(), misread, "{text}");
        }
        // Usual numbers, and numbers inside strings, keep the fast path.
        for text in [
            r#"{"a": 2590, "b": -1, "c": 25.9, "d": 1e3, "e": [0.5, 2.5e-3], "f": 18446744073709551615}"#,
            r#"{"s": "333333333.33333329", "t": "1e400 \" 333333333.33333329", "u": true}"#,
        ] {
            assert!(raw_members(text, 8).is_some(), "{text}");
        }
        // A number serde_json refuses, and a 20-digit one past u64.
        assert!(raw_members(r#"{"a": 1e400}"#, 8).is_none());
        let (theirs, nearest) = doubles("18446744073709551616123");
        assert_eq!(
            raw_members(r#"{"a": 18446744073709551616123}"#, 8).is_none(),
            theirs != nearest
        );
    }

    proptest::proptest! {
        /// Whatever the fast path takes, serde_json reads as the nearest
        /// double; whatever the full parse reads is the nearest double.
        #[test]
        fn every_path_reads_the_nearest_double(
            texts in proptest::collection::vec("-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,20})?([eE][-+]?[0-9]{1,2})?", 1..5),
        ) {
            let list = texts.join(", ");
            let text = format!(r#"{{"s": "{list}", "a": [{list}], "b": {}}}"#, texts[0]);
            let nearest: Vec<f64> = texts.iter().map(|t| t.parse().unwrap()).collect();
            let object = parse(&text).unwrap();
            for (i, want) in nearest.iter().enumerate() {
                proptest::prop_assert_eq!(object["a"][i].as_f64(), Some(*want), "{}", texts[i]);
            }
            proptest::prop_assert_eq!(object["b"].as_f64(), Some(nearest[0]));
            if let Some(members) = raw_members(&text, 8) {
                for (i, want) in nearest.iter().enumerate() {
                    let read: Vec<f64> = serde_json::from_str(members[1].1.get()).unwrap();
                    proptest::prop_assert_eq!(read[i].to_bits(), want.to_bits(), "{}", texts[i]);
                }
            }
        }
    }

    #[test]
    fn a_member_named_as_serde_jsons_private_number_token_is_a_member() {
        let object = parse(r#"{"a": {"$serde_json::private::Number": "1.5"}}"#).unwrap();
        if numbers_are_text() {
            // With `arbitrary_precision`, serde_json itself reads it as 1.5.
            assert_eq!(object["a"].as_f64(), Some(1.5));
        } else {
            assert_eq!(object["a"]["$serde_json::private::Number"], "1.5");
        }
    }

    #[test]
    fn trailing_text_is_refused() {
        assert!(parse(r#"{"a": 1} x"#).is_err());
        assert!(parse(r#"{"a": 1}{"b": 2}"#).is_err());
        assert!(parse("{\"a\": 1}\n").is_ok());
    }
}
