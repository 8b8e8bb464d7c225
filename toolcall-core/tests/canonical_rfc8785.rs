//! The canonical form against RFC 8785's own test data and against doubles
//! printed by ECMAScript.
//!
//! * `tests/data/es6-doubles.txt` (in this crate) holds 4,000 doubles, each
//!   as `hex-bits,text` with the text `JSON.stringify` printed for it in
//!   Node.js: random bit patterns, decimal-looking values in the range written
//!   without an exponent, and values whose two shortest forms tie
//!   (`tests/data/es6-doubles.js` writes it). It always runs.
//! * The shared test data, beside the repository, holds the RFC's
//!   `testdata/{input,output}` files (`json-canonicalization/`) and the first
//!   1,000,000 lines of the RFC's ES6 number test file (`es6-numbers.txt`, in
//!   the same `hex-bits,text` form). Where they are absent these tests print
//!   `SKIPPED: ...` and pass, unless `TOOLCALL_REQUIRE_TESTDATA=1` is set.
//!
//! The input files are read with the exact parser below, not serde_json:
//! what is under test is the writing of a `Value`, and serde_json's float
//! parsing depends on its features (see the canonical module's docs).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Number, Value};
use toolcall_core::canonical::canonical_json;

fn shared_testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata")
}

/// Whether a test whose data is missing should fail rather than skip.
fn require_testdata() -> bool {
    std::env::var("TOOLCALL_REQUIRE_TESTDATA").is_ok_and(|v| v == "1")
}

/// `Some(path)` if `path` exists; otherwise skips (or fails, when required).
fn shared(relative: &str) -> Option<PathBuf> {
    let path = shared_testdata().join(relative);
    if path.exists() {
        return Some(path);
    }
    assert!(
        !require_testdata(),
        "TOOLCALL_REQUIRE_TESTDATA=1 but {} is missing",
        path.display()
    );
    println!("SKIPPED: {} is missing", path.display());
    None
}

/// Checks every `hex-bits,text` line; returns how many lines there were.
fn check_doubles(text: &str, source: &str) -> usize {
    let mut failures = Vec::new();
    let mut lines = 0;
    for (number, line) in text.lines().enumerate() {
        let (hex, want) = line
            .split_once(',')
            .unwrap_or_else(|| panic!("{source}:{}: not `hex,text`: {line:?}", number + 1));
        let bits = u64::from_str_radix(hex, 16)
            .unwrap_or_else(|e| panic!("{source}:{}: {hex:?}: {e}", number + 1));
        let double = f64::from_bits(bits);
        let value = Value::Number(Number::from_f64(double).expect("a finite double"));
        let got = canonical_json(&value);
        if got != want {
            failures.push(format!("{hex}: want {want}, got {got}"));
        }
        lines += 1;
    }
    assert!(
        failures.is_empty(),
        "{source}: {} of {lines} doubles differ from ECMAScript, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    lines
}

#[test]
fn doubles_match_json_stringify() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/es6-doubles.txt");
    let text = fs::read_to_string(path).expect("the committed sample of doubles");
    assert_eq!(check_doubles(&text, "es6-doubles.txt"), 4000);
}

#[test]
fn doubles_match_the_rfc_es6_number_file() {
    let Some(path) = shared("es6-numbers.txt") else {
        return;
    };
    let text = fs::read_to_string(&path).expect("readable");
    let lines = check_doubles(&text, "es6-numbers.txt");
    assert!(lines >= 1000, "{} holds only {lines} lines", path.display());
}

#[test]
fn rfc8785_test_data_is_canonicalized_byte_for_byte() {
    let Some(root) = shared("json-canonicalization") else {
        return;
    };
    let mut names: Vec<_> = fs::read_dir(root.join("input"))
        .expect("an input directory")
        .map(|entry| entry.expect("a directory entry").file_name())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no files in {}", root.display());
    for name in &names {
        let input = fs::read_to_string(root.join("input").join(name)).expect("readable input");
        let want = fs::read_to_string(root.join("output").join(name)).expect("an output file");
        let value = parse_exact(&input).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert_eq!(canonical_json(&value), want, "{name:?}");
    }
}

#[test]
fn the_exact_parser_reads_what_serde_json_reads_and_rounds_correctly() {
    let text = r#"{"a": [1, -2, 18446744073709551615, -9223372036854775808, 2.5e-3, -0, 56.0],
        "b": "\u20ac\ud83d\ude02\n\"\\\/", "c": {"": [true, false, null]}}"#;
    let ours = parse_exact(text).expect("valid JSON");
    let theirs: Value = serde_json::from_str(text).expect("valid JSON");
    assert_eq!(ours, theirs);
    // The case serde_json without `float_roundtrip` reads one unit off.
    let third = parse_exact("333333333.33333329").expect("a number");
    assert_eq!(third.as_f64(), Some(333333333.3333333));
    assert!(parse_exact("[1,]").is_err());
    assert!(parse_exact("\"\\ud83d\"").is_err());
    assert!(parse_exact("01").is_err());
}

/// A JSON parser whose numbers are exact: an integer in the 64-bit range as
/// serde_json keeps it, any other number as the nearest double (Rust's
/// `f64::from_str` rounds correctly).
fn parse_exact(text: &str) -> Result<Value, String> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    let value = parser.value()?;
    parser.white();
    if parser.at != parser.bytes.len() {
        return Err(format!("trailing text at byte {}", parser.at));
    }
    Ok(value)
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn white(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.white();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", byte as char, self.at))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.white();
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => {
                for (word, value) in [
                    ("null", Value::Null),
                    ("true", Value::Bool(true)),
                    ("false", Value::Bool(false)),
                ] {
                    if self.bytes[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(value);
                    }
                }
                Err(format!("no value at byte {}", self.at))
            }
        }
    }

    fn object(&mut self) -> Result<Value, String> {
        self.expect(b'{')?;
        let mut members = Map::new();
        self.white();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.white();
            let name = self.string()?;
            self.expect(b':')?;
            let value = self.value()?;
            members.insert(name, value);
            self.white();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(format!("expected ',' or '}}' at byte {}", self.at)),
            }
        }
    }

    fn array(&mut self) -> Result<Value, String> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.white();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.white();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(format!("expected ',' or ']' at byte {}", self.at)),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .ok_or_else(|| format!("short \\u escape at byte {}", self.at))?;
        let code = u32::from_str_radix(digits, 16)
            .map_err(|_| format!("bad \\u escape at byte {}", self.at))?;
        self.at += 4;
        Ok(code)
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.at;
            while !matches!(self.peek(), None | Some(b'"' | b'\\' | 0..=0x1f)) {
                self.at += 1;
            }
            out.push_str(
                std::str::from_utf8(&self.bytes[start..self.at]).map_err(|e| e.to_string())?,
            );
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escape = self.peek().ok_or("unterminated escape")?;
                    self.at += 1;
                    out.push(match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{08}',
                        b'f' => '\u{0C}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let mut code = self.hex4()?;
                            if (0xD800..0xDC00).contains(&code) {
                                if !self.bytes[self.at..].starts_with(b"\\u") {
                                    return Err(format!("lone surrogate before byte {}", self.at));
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&low) {
                                    return Err(format!("lone surrogate before byte {}", self.at));
                                }
                                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            }
                            char::from_u32(code)
                                .ok_or_else(|| format!("lone surrogate before byte {}", self.at))?
                        }
                        other => return Err(format!("bad escape \\{}", other as char)),
                    });
                }
                _ => return Err(format!("unterminated string at byte {}", self.at)),
            }
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        let digits = |p: &mut Self| {
            let from = p.at;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.at += 1;
            }
            p.at - from
        };
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let int_start = self.at;
        let int_digits = digits(self);
        if int_digits == 0 || (int_digits > 1 && self.bytes[int_start] == b'0') {
            return Err(format!("bad number at byte {start}"));
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.at += 1;
            integer = false;
            if digits(self) == 0 {
                return Err(format!("bad fraction at byte {start}"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            integer = false;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return Err(format!("bad exponent at byte {start}"));
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).expect("ASCII");
        if integer {
            // As serde_json: `-0` is the double -0, other integers exact when they fit.
            if text != "-0" {
                if let Ok(n) = text.parse::<u64>() {
                    return Ok(Value::from(n));
                }
                if let Ok(n) = text.parse::<i64>() {
                    return Ok(Value::from(n));
                }
            }
        }
        let double: f64 = text.parse().map_err(|e| format!("{text}: {e}"))?;
        Number::from_f64(double)
            .map(Value::Number)
            .ok_or_else(|| format!("{text} is out of the double range"))
    }
}
