//! The strict reading of JSON text that arguments, the canonical form and
//! so the idempotency key rest on: every number exact, read from its literal
//! text, no member named twice, nesting within a bound.

use std::cell::Cell;
use std::fmt;
use std::sync::OnceLock;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `text` read strictly (no member named twice in one object, every
/// number the double nearest to its literal text, as RFC 8785 reads it,
/// whichever of serde_json's features are on), whatever JSON value it is,
/// nested as deep as serde_json allows (128 levels).
pub fn parse_value(text: &str) -> Result<Value, serde_json::Error> {
    parse_within(text, usize::MAX)
}

/// [`parse_value`] with at most `max_depth` levels of arrays and objects.
pub fn parse_within(text: &str, max_depth: usize) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let literals = Literals::new(text);
    let value = StrictValue::new(max_depth, &literals).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// A byte of a JSON number's text, once it has begun.
fn is_number_byte(byte: u8) -> bool {
    matches!(byte, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
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
pub struct LiteralScan<'t> {
    text: &'t str,
    at: usize,
}

impl<'t> LiteralScan<'t> {
    /// The literals of `text`, from its start.
    pub fn new(text: &'t str) -> Self {
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
/// map of one private member, its text, and a reader that mirrors
/// serde_json's `Value` must leave numbers to it.
pub fn numbers_are_text() -> bool {
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
