//! The canonical form against RFC 8785's own test data and against doubles
//! printed by ECMAScript.
//!
//! * `tests/data/es6-doubles.txt` holds 4,000 doubles, each as
//!   `hex-bits,text` with the text `JSON.stringify` printed for it in Node.js:
//!   random bit patterns, decimal-looking values in the range written without
//!   an exponent, and values whose two shortest forms tie
//!   (`tests/data/es6-doubles.js` writes it).
//! * `tests/data/rfc8785/` holds the `testdata/{input,output}` files of the
//!   RFC's reference implementation (github.com/cyberphone/json-canonicalization,
//!   Apache-2.0, its LICENSE beside them).
//! * The RFC's ES6 number test file is not stored: its doubles come from a
//!   published deterministic sequence (fixed values, 2,000 consecutive
//!   subnormal-to-normal bit patterns, then a SHA-256 chain), and the
//!   reference publishes the SHA-256 of the file's first N lines. The test
//!   writes those lines with our canonical form and compares the hash, so one
//!   wrong digit in a million numbers fails it.
//!
//! The input files are read with the exact parser below, not serde_json:
//! what is under test is the writing of a `Value`, and serde_json's float
//! parsing depends on its features (see the canonical module's docs).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use toolcall_core::canonical::canonical_json;

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
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

/// The fixed values the RFC's ES6 number sequence starts with (`numgen.js`
/// in the reference implementation's `testdata`).
const ES6_STATIC: [u64; 168] = [
    0x0000000000000000,
    0x8000000000000000,
    0x0000000000000001,
    0x8000000000000001,
    0xc46696695dbd1cc3,
    0xc43211ede4974a35,
    0xc3fce97ca0f21056,
    0xc3c7213080c1a6ac,
    0xc39280f39a348556,
    0xc35d9b1f5d20d557,
    0xc327af4c4a80aaac,
    0xc2f2f2a36ecd5556,
    0xc2be51057e155558,
    0xc28840d131aaaaac,
    0xc253670dc1555557,
    0xc21f0b4935555557,
    0xc1e8d5d42aaaaaac,
    0xc1b3de4355555556,
    0xc17fca0555555556,
    0xc1496e6aaaaaaaab,
    0xc114585555555555,
    0xc0e046aaaaaaaaab,
    0xc0aa0aaaaaaaaaaa,
    0xc074d55555555555,
    0xc040aaaaaaaaaaab,
    0xc00aaaaaaaaaaaab,
    0xbfd5555555555555,
    0xbfa1111111111111,
    0xbf6b4e81b4e81b4f,
    0xbf35d867c3ece2a5,
    0xbf0179ec9cbd821e,
    0xbecbf647612f3696,
    0xbe965e9f80f29212,
    0xbe61e54c672874db,
    0xbe2ca213d840baf8,
    0xbdf6e80fe033c8c6,
    0xbdc2533fe68fd3d2,
    0xbd8d51ffd74c861c,
    0xbd5774ccac3d3817,
    0xbd22c3d6f030f9ac,
    0xbcee0624b3818f79,
    0xbcb804ea293472c7,
    0xbc833721ba905bd3,
    0xbc4ebe9c5db3c61e,
    0xbc18987d17c304e5,
    0xbbe3ad30dfcf371d,
    0xbbaf7b816618582f,
    0xbb792f9ab81379bf,
    0xbb442615600f9499,
    0xbb101e77800c76e1,
    0xbad9ca58cce0be35,
    0xbaa4a1e0a3e6fe90,
    0xba708180831f320d,
    0xba3a68cd9e985016,
    0x446696695dbd1cc3,
    0x443211ede4974a35,
    0x43fce97ca0f21056,
    0x43c7213080c1a6ac,
    0x439280f39a348556,
    0x435d9b1f5d20d557,
    0x4327af4c4a80aaac,
    0x42f2f2a36ecd5556,
    0x42be51057e155558,
    0x428840d131aaaaac,
    0x4253670dc1555557,
    0x421f0b4935555557,
    0x41e8d5d42aaaaaac,
    0x41b3de4355555556,
    0x417fca0555555556,
    0x41496e6aaaaaaaab,
    0x4114585555555555,
    0x40e046aaaaaaaaab,
    0x40aa0aaaaaaaaaaa,
    0x4074d55555555555,
    0x4040aaaaaaaaaaab,
    0x400aaaaaaaaaaaab,
    0x3fd5555555555555,
    0x3fa1111111111111,
    0x3f6b4e81b4e81b4f,
    0x3f35d867c3ece2a5,
    0x3f0179ec9cbd821e,
    0x3ecbf647612f3696,
    0x3e965e9f80f29212,
    0x3e61e54c672874db,
    0x3e2ca213d840baf8,
    0x3df6e80fe033c8c6,
    0x3dc2533fe68fd3d2,
    0x3d8d51ffd74c861c,
    0x3d5774ccac3d3817,
    0x3d22c3d6f030f9ac,
    0x3cee0624b3818f79,
    0x3cb804ea293472c7,
    0x3c833721ba905bd3,
    0x3c4ebe9c5db3c61e,
    0x3c18987d17c304e5,
    0x3be3ad30dfcf371d,
    0x3baf7b816618582f,
    0x3b792f9ab81379bf,
    0x3b442615600f9499,
    0x3b101e77800c76e1,
    0x3ad9ca58cce0be35,
    0x3aa4a1e0a3e6fe90,
    0x3a708180831f320d,
    0x3a3a68cd9e985016,
    0x4024000000000000,
    0x4014000000000000,
    0x3fe0000000000000,
    0x3fa999999999999a,
    0x3f747ae147ae147b,
    0x3f40624dd2f1a9fc,
    0x3f0a36e2eb1c432d,
    0x3ed4f8b588e368f1,
    0x3ea0c6f7a0b5ed8d,
    0x3e6ad7f29abcaf48,
    0x3e35798ee2308c3a,
    0x3ed539223589fa95,
    0x3ed4ff26cd5a7781,
    0x3ed4f95a762283ff,
    0x3ed4f8c60703520c,
    0x3ed4f8b72f19cd0d,
    0x3ed4f8b5b31c0c8d,
    0x3ed4f8b58d1c461a,
    0x3ed4f8b5894f7f0e,
    0x3ed4f8b588ee37f3,
    0x3ed4f8b588e47da4,
    0x3ed4f8b588e3849c,
    0x3ed4f8b588e36bb5,
    0x3ed4f8b588e36937,
    0x3ed4f8b588e368f8,
    0x3ed4f8b588e368f1,
    0x3ff0000000000000,
    0xbff0000000000000,
    0xbfeffffffffffffa,
    0xbfeffffffffffffb,
    0x3feffffffffffffa,
    0x3feffffffffffffb,
    0x3feffffffffffffc,
    0x3feffffffffffffe,
    0xbfefffffffffffff,
    0xbfefffffffffffff,
    0x3fefffffffffffff,
    0x3fefffffffffffff,
    0x3fd3333333333332,
    0x3fd3333333333333,
    0x3fd3333333333334,
    0x0010000000000000,
    0x000ffffffffffffd,
    0x000fffffffffffff,
    0x7fefffffffffffff,
    0xffefffffffffffff,
    0x4340000000000000,
    0xc340000000000000,
    0x4430000000000000,
    0x44b52d02c7e14af5,
    0x44b52d02c7e14af6,
    0x44b52d02c7e14af7,
    0x444b1ae4d6e2ef4e,
    0x444b1ae4d6e2ef4f,
    0x444b1ae4d6e2ef50,
    0x3eb0c6f7a0b5ed8c,
    0x3eb0c6f7a0b5ed8d,
    0x41b3de4355555553,
    0x41b3de4355555554,
    0x41b3de4355555555,
    0x41b3de4355555556,
    0x41b3de4355555557,
    0xbecbf647612f3696,
    0x43143ff3c1cb0959,
];

/// The RFC's ES6 number sequence: the fixed values, then 2,000 bit patterns
/// counting up from the smallest normal double, then the doubles read (little
/// endian, eight per block) from a chain of SHA-256 digests starting at 32
/// zero bytes, skipping zeros, infinities and NaNs.
struct Es6Numbers {
    index: usize,
    block: [u8; 32],
    unread: usize,
}

impl Es6Numbers {
    fn new() -> Self {
        Self {
            index: 0,
            block: [0; 32],
            unread: 0,
        }
    }
}

impl Iterator for Es6Numbers {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let index = self.index;
        self.index += 1;
        if let Some(&bits) = ES6_STATIC.get(index) {
            return Some(bits);
        }
        if index < ES6_STATIC.len() + 2000 {
            return Some(0x0010_0000_0000_0000 + (index - ES6_STATIC.len()) as u64);
        }
        loop {
            if self.unread == 0 {
                self.block = Sha256::digest(self.block).into();
                self.unread = 4;
            }
            let at = (4 - self.unread) * 8;
            self.unread -= 1;
            let bits = u64::from_le_bytes(self.block[at..at + 8].try_into().expect("8 bytes"));
            let double = f64::from_bits(bits);
            if double != 0.0 && double.is_finite() {
                return Some(bits);
            }
        }
    }
}

/// The SHA-256 of the file's first lines (`hex-bits,text\n`, hex in lower
/// case without leading zeros) written with our canonical form, at each of
/// `checkpoints` (line counts, ascending).
fn es6_file_digests(checkpoints: &[usize]) -> Vec<String> {
    let last = checkpoints.last().copied().unwrap_or(0);
    let mut hasher = Sha256::new();
    let mut digests = Vec::new();
    for (line, bits) in Es6Numbers::new().take(last).enumerate() {
        let value = Value::Number(Number::from_f64(f64::from_bits(bits)).expect("finite"));
        hasher.update(format!("{bits:x},{}\n", canonical_json(&value)));
        if checkpoints.contains(&(line + 1)) {
            digests.push(hex(&hasher.clone().finalize()));
        }
    }
    digests
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_es6_sequence_starts_as_the_rfc_file_does() {
    // Sample lines the reference's README prints, and the first line.
    let mut numbers = Es6Numbers::new();
    assert_eq!(numbers.next(), Some(0));
    let line = |bits: u64| {
        let value = Value::Number(Number::from_f64(f64::from_bits(bits)).expect("finite"));
        format!("{bits:x},{}", canonical_json(&value))
    };
    assert_eq!(
        line(0x4340000000000001),
        "4340000000000001,9007199254740994"
    );
    assert_eq!(line(0x444b1ae4d6e2ef50), "444b1ae4d6e2ef50,1e+21");
    assert_eq!(line(0x3eb0c6f7a0b5ed8d), "3eb0c6f7a0b5ed8d,0.000001");
    assert_eq!(
        line(0x3eb0c6f7a0b5ed8c),
        "3eb0c6f7a0b5ed8c,9.999999999999997e-7"
    );
    assert_eq!(line(0x8000000000000000), "8000000000000000,0");
}

/// The reference's published checksums of the file's first 1,000 to
/// 1,000,000 lines (about four seconds in a debug build).
#[test]
fn doubles_match_the_rfc_es6_number_file() {
    let published = [
        (
            1_000,
            "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687",
        ),
        (
            10_000,
            "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892",
        ),
        (
            100_000,
            "22776e6d4b49fa294a0d0f349268e5c28808fe7e0cb2bcbe28f63894e494d4c7",
        ),
        (
            1_000_000,
            "49415fee2c56c77864931bd3624faad425c3c577d6d74e89a83bc725506dad16",
        ),
    ];
    let lines: Vec<usize> = published.iter().map(|(lines, _)| *lines).collect();
    let ours = es6_file_digests(&lines);
    for ((lines, want), got) in published.iter().zip(&ours) {
        assert_eq!(got, want, "the first {lines} lines");
    }
}

#[test]
fn rfc8785_test_data_is_canonicalized_byte_for_byte() {
    let root = data("rfc8785");
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
