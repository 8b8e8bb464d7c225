//! The canonical JSON form of validated arguments and the idempotency key derived from it.
//!
//! # The canonical form
//!
//! It is the JSON Canonicalization Scheme of RFC 8785, with one deliberate
//! difference for integers:
//!
//! * no white space anywhere;
//! * object members sorted by their names compared as UTF-16 code units;
//! * strings written as UTF-8 with only `"`, `\` and the control characters
//!   below U+0020 escaped: `\b`, `\t`, `\n`, `\f`, `\r` by name, every other one as
//!   `\u00xx` with lower-case hex digits;
//! * `null`, `true`, `false` as themselves;
//! * a number that holds an integer in the signed or unsigned 64-bit range is
//!   written in plain decimal, exactly (RFC 8785 would round integers above
//!   2^53 through a double, which could make two different amounts collide);
//! * every other number is a double, written as ECMAScript's
//!   `Number.prototype.toString` writes it (RFC 8785 section 3.2.2.3): the
//!   shortest digits that read back as the same double, a tie between two
//!   such candidates broken toward the even digit, plain notation for
//!   exponents from -6 to 20, otherwise `d.ddde+X` / `d.ddde-X`, and `-0` as
//!   `0`. The digits come from the `ryu-js` crate; the test suite checks them
//!   against RFC 8785's test data and against doubles printed by
//!   `JSON.stringify`.
//!
//! The form is computed over the *validated* arguments, serialized by the
//! argument struct, so spacing, member order and absent-versus-`null`
//! optional fields in what the model sent do not change it.
//!
//! # Every number is read as the double nearest to its text
//!
//! RFC 8785 reads a number with a fraction or an exponent as the double
//! nearest to its text, and so does this crate, whatever features the
//! application turns on in serde_json. serde_json without its
//! `float_roundtrip` feature computes some doubles one unit in the last
//! place off (`333333333.33333329` as `333333333.33333325`, not
//! `333333333.3333333`), and a library must not turn features on for its
//! users, so the crate does not rely on serde_json's doubles where it reads
//! text:
//!
//! * the full parse of a call's raw arguments (and [`canonical_json_from_text`])
//!   reads every such number again from its own text, with Rust's
//!   `f64::from_str`, which rounds correctly (integers serde_json holds
//!   exactly, and are kept as they are);
//! * the one-pass reading of raw arguments, which hands each member's text
//!   to serde_json, is taken only when serde_json reads every number of the
//!   text as `f64::from_str` does (checked for numbers with a fraction, an
//!   exponent or 20 digits, not for the usual integers); otherwise the call
//!   takes the full parse;
//! * JSON text inside the arguments (a field of serde_json's `RawValue`, a
//!   number with serde_json's `arbitrary_precision`) is read by the key's
//!   writer the same way, not by serde_json.
//!
//! So `1e2`, `100`, `100.0` and `10000e-2` in a field of type `f64` are one
//! key, the key of the double 100, and `333333333.33333329` has the key any
//! RFC 8785 implementation computes.
//!
//! Two sources are taken as they are. A [`Value`] handed to this module
//! ([`canonical_json`], [`idempotency_key`]), or arguments the host hands the
//! dispatcher already parsed (`Arguments::Parsed`), hold the doubles of
//! whoever parsed them: a host that wants keys of long-fraction doubles to
//! match other implementations passes the raw text (`Arguments::Raw`), or
//! parses with a correctly rounding parser (serde_json with
//! `float_roundtrip` or `arbitrary_precision`). And an `f32` field holds
//! the double read, rounded to `f32`.
//!
//! # The key
//!
//! The idempotency key is the lower-case hex SHA-256 digest of
//!
//! ```text
//! "toolcall/idempotency/v2\n" || len(caller) ":" caller || len(session) ":" session
//!     || len(tool) ":" tool || canonical
//! ```
//!
//! where `len` is the byte length in decimal. The length prefixes keep
//! `("a|b", "c")` and `("a", "b|c")` apart. The caller is part of a call's
//! identity: two callers' identical calls in one conversation have two keys,
//! so that neither replays, counts or waits for the other's. The form and
//! the digest input are part of the crate's stability promise from `v2` on:
//! a key computed today matches one computed by any later version, in any
//! process. (`v1`, before the caller was part of it, had no caller.)
//!
//! The dispatcher computes the key of a call's typed arguments without the
//! `Value`: their `Serialize` writes the canonical form straight into one
//! reused buffer (members put in order as each object ends), which feeds the
//! digest. It takes the shapes argument structs are made of and hands the
//! rest (a map with keys that are not strings, a double that is not finite,
//! a 128-bit integer, serde_json's raw values) to the `Value` path; the
//! tests hold the two to the same bytes over arbitrary JSON values.

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use crate::hex::{hex, push_hex};
use crate::store::Key;

mod stream;

const KEY_DOMAIN: &str = "toolcall/idempotency/v2\n";

/// Writes `value` in the canonical form described in the [module docs](self).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::with_capacity(64);
    write_value(&mut out, value);
    out
}

/// Reads JSON `text` as the dispatcher reads a call's raw arguments and
/// writes it in the canonical form described in the [module docs](self):
/// every number with a fraction or an exponent is the double nearest to its
/// text (RFC 8785 section 3.2.2.3), whatever serde_json's features, and an
/// object that names a member twice is refused (RFC 8785 takes I-JSON, which
/// has no duplicate names). Any JSON value, nested up to serde_json's limit
/// of 128 levels.
///
/// ```
/// use toolcall_ledger::canonical::canonical_json_from_text;
///
/// let text = r#"{"b": [333333333.33333329, 1E30, 4.50, 2e-3], "a": "\u20ac"}"#;
/// assert_eq!(
///     canonical_json_from_text(text).unwrap(),
///     r#"{"a":"€","b":[333333333.3333333,1e+30,4.5,0.002]}"#
/// );
/// assert!(canonical_json_from_text(r#"{"a": 1, "a": 2}"#).is_err());
/// ```
pub fn canonical_json_from_text(text: &str) -> Result<String, serde_json::Error> {
    crate::json::parse_value(text).map(|value| canonical_json(&value))
}

/// The idempotency key of a call: hex SHA-256 over the caller's id, the
/// session, the tool and the canonical form of the validated arguments (see
/// the [module docs](self)). The numbers of `arguments` are the doubles it
/// holds: a `Value` parsed without a correctly rounding parser may hold one a
/// unit off the text's.
///
/// ```
/// use serde_json::json;
/// use toolcall_ledger::canonical::idempotency_key;
///
/// let args = json!({"order_id": "ORD-1001"});
/// // One conversation, two callers: two calls.
/// assert_ne!(
///     idempotency_key("support", "conversation-42", "get_order", &args),
///     idempotency_key("billing", "conversation-42", "get_order", &args),
/// );
/// ```
pub fn idempotency_key(caller: &str, session: &str, tool: &str, arguments: &Value) -> String {
    idempotency_key_value(caller, session, tool, arguments)
        .as_str()
        .to_owned()
}

/// [`idempotency_key`] of `serde_json::to_value(arguments)`, as the
/// store's [`Key`], written straight from `arguments` when the streaming
/// writer takes its shape (argument structs made of strings, numbers,
/// enums, options, sequences and string-keyed maps), through the `Value`
/// otherwise.
pub fn idempotency_key_of<T: serde::Serialize + ?Sized>(
    caller: &str,
    session: &str,
    tool: &str,
    arguments: &T,
) -> Result<Key, serde_json::Error> {
    let mut hasher = key_hasher(caller, session, tool);
    if stream::hash_canonical(arguments, &mut hasher).is_err() {
        // The writer fed nothing to the hasher before it refused.
        let value = serde_json::to_value(arguments)?;
        hasher.update(canonical_json(&value).as_bytes());
    }
    Ok(Key::from_digest(hasher.finalize().into()))
}

/// [`idempotency_key`] as the store's [`Key`].
pub fn idempotency_key_value(caller: &str, session: &str, tool: &str, arguments: &Value) -> Key {
    let mut hasher = key_hasher(caller, session, tool);
    hasher.update(canonical_json(arguments).as_bytes());
    Key::from_digest(hasher.finalize().into())
}

/// A hasher fed with the key's domain, caller, session and tool.
fn key_hasher(caller: &str, session: &str, tool: &str) -> Sha256 {
    let mut hasher = Sha256::new();
    hasher.update(KEY_DOMAIN.as_bytes());
    for part in [caller, session, tool] {
        let mut digits = [0u8; 20];
        hasher.update(decimal(part.len(), &mut digits));
        hasher.update(b":");
        hasher.update(part.as_bytes());
    }
    hasher
}

/// `n` in decimal, written at the end of `buffer` (no allocation).
#[doc(hidden)]
pub fn decimal(n: usize, buffer: &mut [u8; 20]) -> &[u8] {
    decimal_u64(n as u64, buffer)
}

/// Hex SHA-256 of the canonical form of `value`: what binds an approval to
/// the exact arguments it was given for.
pub fn digest(value: &Value) -> String {
    hex(&Sha256::digest(canonical_json(value).as_bytes()))
}

/// The lock key of a resource: [`digest`] of `["resource", kind, value]`,
/// written without building that array: an id that needs no escape at once
/// on the stack, any other value in the thread's canonical buffers.
pub fn resource_digest(kind: &str, value: &Value) -> Key {
    let mut hasher = Sha256::new();
    if let Value::String(id) = value
        && hash_plain_resource(kind, id, &mut hasher)
    {
        return Key::from_digest(hasher.finalize().into());
    }
    if stream::hash_canonical(&("resource", kind, value), &mut hasher).is_err() {
        // Never for a `Value` (the writer refuses only shapes a `Value`
        // cannot take), and it fed nothing to the hasher before refusing.
        let array = Value::Array(vec!["resource".into(), kind.into(), value.clone()]);
        hasher.update(canonical_json(&array).as_bytes());
    }
    Key::from_digest(hasher.finalize().into())
}

/// Feeds `["resource",kind,id]` to `hasher` when neither string needs an
/// escape and the array fits a buffer on the stack: the usual resource, an
/// id, without the writer's serde path. `false`, with nothing fed, for any
/// other.
fn hash_plain_resource(kind: &str, id: &str, hasher: &mut Sha256) -> bool {
    const OPEN: &[u8] = b"[\"resource\",\"";
    let plain = |text: &str| !text.bytes().any(is_escaped);
    let mut buffer = [0u8; 160];
    let parts: [&[u8]; 5] = [OPEN, kind.as_bytes(), b"\",\"", id.as_bytes(), b"\"]"];
    if parts.iter().map(|part| part.len()).sum::<usize>() > buffer.len()
        || !plain(kind)
        || !plain(id)
    {
        return false;
    }
    let mut at = 0;
    for part in parts {
        buffer[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    hasher.update(&buffer[..at]);
    true
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => write_number(out, number),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|a, b| utf16_cmp(a.0, b.0));
            out.push('{');
            for (i, (name, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, name);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

fn utf16_cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.cmp(b)
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

/// Whether canonical text writes `byte` of a string as an escape: a quote,
/// a backslash and the controls below U+0020; every other byte is written
/// as it is.
fn is_escaped(byte: u8) -> bool {
    matches!(byte, b'"' | b'\\' | 0x00..=0x1F)
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    // The text between escapes is copied as it is; every byte escaped is
    // ASCII, so the cuts fall on character boundaries.
    let mut plain = 0;
    for (at, &byte) in s.as_bytes().iter().enumerate() {
        if !is_escaped(byte) {
            continue;
        }
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0C => "\\f",
            b'\r' => "\\r",
            _ => "",
        };
        out.push_str(&s[plain..at]);
        if escaped.is_empty() {
            out.push_str("\\u00");
            push_hex(out, &[byte]);
        } else {
            out.push_str(escaped);
        }
        plain = at + 1;
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

/// Writes an integer in plain decimal, without the formatting machinery.
pub(crate) fn write_integer(out: &mut String, negative: bool, magnitude: u64) {
    let mut digits = [0u8; 20];
    if negative {
        out.push('-');
    }
    let text = decimal_u64(magnitude, &mut digits);
    out.push_str(std::str::from_utf8(text).unwrap_or_default());
}

/// `n` in decimal, written at the end of `buffer`.
fn decimal_u64(mut n: u64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buffer[start..];
        }
    }
}

/// Writes `number` in the canonical form: an integer in the signed or
/// unsigned 64-bit range exactly, in plain decimal; any other number as the
/// double it holds, in ECMAScript's `Number.prototype.toString` form.
pub(crate) fn write_number(out: &mut String, number: &Number) {
    if let Some(n) = number.as_i64() {
        write_integer(out, n < 0, n.unsigned_abs());
    } else if let Some(n) = number.as_u64() {
        write_integer(out, false, n);
    } else if let Some(f) = number.as_f64() {
        write_double(out, f);
    } else {
        // Only reachable with serde_json's `arbitrary_precision`, for a number
        // no double holds: its text as parsed is the closest thing there is.
        let _ = write!(out, "{number}");
    }
}

/// ECMAScript's `Number.prototype.toString` for a double: the shortest
/// digits that read back as the same double, a tie between two such
/// candidates broken toward the even digit, and `-0` written as `0`.
fn write_double(out: &mut String, f: f64) {
    if f == 0.0 {
        // Both zeros; ECMAScript writes `-0` as `0`.
        out.push('0');
    } else if f.is_finite() {
        out.push_str(ryu_js::Buffer::new().format_finite(f));
    } else {
        // A serde_json `Number` never holds NaN or an infinity; JSON has no
        // text for them, and `JSON.stringify` writes them as `null`.
        out.push_str("null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn double(f: f64) -> String {
        let mut out = String::new();
        write_double(&mut out, f);
        out
    }

    #[test]
    fn doubles_follow_ecmascript() {
        // Vectors from RFC 8785 appendix B and ECMAScript's Number::toString.
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (4.50, "4.5"),
            (2e-3, "0.002"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1e23, "1e+23"),
            (123456789012345680000.0, "123456789012345680000"),
            (333333333.3333333, "333333333.3333333"),
            (9007199254740992.0, "9007199254740992"),
            (295147905179352830000.0, "295147905179352830000"),
            (5e-324, "5e-324"),
            (-5e-324, "-5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (-1.7976931348623157e308, "-1.7976931348623157e+308"),
            (25.9, "25.9"),
            (2590.0, "2590"),
            (1.2345e-10, "1.2345e-10"),
            // Exact quarters, each as near to two 17-digit forms: the tie goes
            // to the even digit, as in ECMAScript (Rust's `{:e}` writes ...819.3).
            (-1372088713925819.0 - 0.25, "-1372088713925819.2"),
            (1125899906842624.0 + 0.75, "1125899906842624.8"),
            (4503599627370495.5, "4503599627370495.5"),
        ];
        for (f, want) in cases {
            assert_eq!(double(*f), *want, "for {f:e}");
        }
    }

    #[test]
    fn write_number_keeps_integers_exact_and_writes_doubles_as_ecmascript() {
        let cases: &[(Number, &str)] = &[
            (Number::from(0u64), "0"),
            (Number::from(-1i64), "-1"),
            (Number::from(i64::MIN), "-9223372036854775808"),
            (Number::from(u64::MAX), "18446744073709551615"),
            (Number::from(9007199254740993u64), "9007199254740993"),
            (Number::from_f64(56.0).unwrap(), "56"),
            (Number::from_f64(-0.0).unwrap(), "0"),
            (Number::from_f64(1e30).unwrap(), "1e+30"),
            (Number::from_f64(0.002).unwrap(), "0.002"),
            (
                Number::from_f64(333333333.3333333).unwrap(),
                "333333333.3333333",
            ),
        ];
        for (number, want) in cases {
            let mut out = String::from("[");
            write_number(&mut out, number);
            assert_eq!(out, format!("[{want}"), "for {number:?}");
            assert_eq!(canonical_json(&Value::Number(number.clone())), *want);
        }
    }

    #[test]
    fn objects_are_sorted_by_utf16_code_units() {
        // RFC 8785 section 3.2.3: U+20AC sorts before U+1F600 in UTF-16, after it in UTF-8.
        let value = json!({"\u{1F600}": 1, "\u{20AC}": 2, "b": 3, "a": 4, "\r": 5, "1": 6});
        assert_eq!(
            canonical_json(&value),
            "{\"\\r\":5,\"1\":6,\"a\":4,\"b\":3,\"\u{20AC}\":2,\"\u{1F600}\":1}"
        );
    }

    #[test]
    fn strings_escape_only_what_they_must() {
        let value = json!("a\"b\\c\u{08}\u{0C}\n\r\t\u{01}\u{1F}é€/\u{2028}");
        assert_eq!(
            canonical_json(&value),
            "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001fé€/\u{2028}\""
        );
    }

    #[test]
    fn integers_stay_exact_beyond_two_to_the_53() {
        let value = json!([
            9007199254740993u64,
            -9223372036854775808i64,
            18446744073709551615u64
        ]);
        assert_eq!(
            canonical_json(&value),
            "[9007199254740993,-9223372036854775808,18446744073709551615]"
        );
    }

    #[test]
    fn nested_values_have_no_white_space() {
        let value = json!({"b": [1, {"y": null, "x": true}], "a": {"d": false, "c": "s"}});
        assert_eq!(
            canonical_json(&value),
            r#"{"a":{"c":"s","d":false},"b":[1,{"x":true,"y":null}]}"#
        );
    }

    /// Golden vectors, computed independently of this code (Python's hashlib
    /// over the documented digest input). They are a stability promise: if
    /// this test fails, keys computed by earlier versions no longer match.
    #[test]
    fn a_resource_digest_is_the_digest_of_its_array() {
        for value in [
            json!("ORD-1001"),
            json!(42),
            json!({"b": [1, "x"], "a": null}),
            json!(-0.5),
            json!(1e21),
            json!("quote \" and \u{1} and \u{e9} and \u{1f600}"),
            json!([{"z": 1, "y": {"b": 2, "a": [3]}}]),
        ] {
            for kind in ["order", "odd \"kind\""] {
                assert_eq!(
                    resource_digest(kind, &value).as_str(),
                    digest(&json!(["resource", kind, value])),
                    "{kind} {value}"
                );
            }
        }
        assert_eq!(
            resource_digest("order", &json!("ORD-1001")).as_str(),
            "19db83eb0d8d1966f6a97eb26a88ed9cbc6e7b4b76ea6ebd809c6a2ab4ff8e47"
        );
    }

    proptest::proptest! {
        /// An id's lock key, written at once when it needs no escape and
        /// through the writer otherwise, is the digest of its array as a
        /// `Value` writes it, whatever the id and the kind hold and however
        /// long they are.
        #[test]
        fn any_string_resource_is_the_digest_of_its_array(
            kind in text(24),
            id in text(150),
        ) {
            let value = json!(id);
            let key = resource_digest(&kind, &value);
            proptest::prop_assert_eq!(key.as_str(), digest(&json!(["resource", kind, value])));
        }
    }

    /// Text of up to `chars` characters: half of the time with no byte an
    /// escape is written for, else with quotes, backslashes and controls.
    fn text(chars: usize) -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let plain = format!(r"[ !#-\[\]-~\x7f\u{{e9}}\u{{1f600}}]{{0,{chars}}}");
        let any = format!(r#"[ -~"\\\x00-\x1f\x7f\u{{e9}}\u{{1f600}}]{{0,{chars}}}"#);
        let regex = |pattern: String| {
            proptest::string::string_regex(&pattern).expect("the pattern is a regex")
        };
        prop_oneof![regex(plain), regex(any)]
    }

    #[test]
    fn idempotency_key_golden_vectors() {
        let refund = json!({"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"});
        assert_eq!(
            canonical_json(&refund),
            r#"{"amount_cents":2590,"currency":"BRL","order_id":"ORD-1001","reason":"damaged"}"#
        );
        let cases = [
            (
                "default",
                "demo",
                "refund_order",
                refund.clone(),
                "3715297b90599989c3b352cf92508cc86cba8b5f66b8f4d8f241edd8a4ee3a86",
            ),
            (
                "default",
                "demo",
                "get_order",
                json!({"order_id": "ORD-1001"}),
                "85f39154dcd8de446de80e85d5854f34d9133b65de0f53d672038927211a0ce0",
            ),
            (
                "support",
                "demo",
                "get_order",
                json!({"order_id": "ORD-1001"}),
                "8ae6fbfb5a12770e0c2a13395a2adeb03f287fccc23d7f1b541f59a4377daa8c",
            ),
            (
                "",
                "",
                "t",
                json!({}),
                "dbd57736b3afc23d9a600f8c807623ebb63d6c830e21b6e00b8bf390d1637742",
            ),
        ];
        for (caller, session, tool, args, want) in cases {
            assert_eq!(
                idempotency_key(caller, session, tool, &args),
                want,
                "{caller} {session} {tool} {args}"
            );
        }
    }

    #[test]
    fn key_separates_caller_session_and_tool_unambiguously() {
        let args = json!({});
        for (one, other) in [
            (("x", "a|b", "c"), ("x", "a", "b|c")),
            (("x", "ab", "c"), ("x", "a", "bc")),
            (("xa", "b", "c"), ("x", "ab", "c")),
            (("x", "s", "t"), ("y", "s", "t")),
        ] {
            assert_ne!(
                idempotency_key(one.0, one.1, one.2, &args),
                idempotency_key(other.0, other.1, other.2, &args),
                "{one:?} and {other:?}"
            );
        }
    }
}
