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
//! The input files are read as the dispatcher reads a call's raw arguments
//! (`canonical_json_from_text`): the test covers the reading of numbers
//! (each the double nearest to its text, whatever serde_json's features) as
//! well as the writing.
//!
//! The tests of this crate always build serde_json with `preserve_order`
//! (a dev-dependency turns it on, and cargo cannot turn a feature off for
//! one test). Neither the reading nor the writing depends on it (members
//! are sorted, numbers read from their text); the same tests pass with the
//! dev-dependency's feature removed, and with `--features
//! serde_json/arbitrary_precision` or `serde_json/float_roundtrip`.

use std::fs;

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use serde_json::{Number, Value};

use sha2::{Digest, Sha256};

use toolcall_core::canonical::{canonical_json, canonical_json_from_text};

#[path = "support/numbers.rs"]
mod numbers;

use numbers::{ONE_HUNDRED, forms_of, number_text};

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

/// Each RFC 8785 test file, in name order: its name, its input and the
/// output it canonicalizes to.
fn rfc8785_cases() -> Vec<(std::ffi::OsString, String, String)> {
    let root = data("rfc8785");
    let mut names: Vec<_> = fs::read_dir(root.join("input"))
        .expect("an input directory")
        .map(|entry| entry.expect("a directory entry").file_name())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let input = fs::read_to_string(root.join("input").join(&name)).expect("readable input");
            let want = fs::read_to_string(root.join("output").join(&name)).expect("an output file");
            (name, input, want)
        })
        .collect()
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
fn numbers_are_read_as_the_double_nearest_to_their_text() {
    let cases = [
        ("333333333.33333329", "333333333.3333333"),
        ("333333333.33333333", "333333333.3333333"),
        (
            "[1e2, 100, 100.0, 1.00e+2, 10000e-2, 0.1E3]",
            "[100,100,100,100,100,100]",
        ),
        ("[-0, -0.0, 0e5]", "[0,0,0]"),
        ("18446744073709551615", "18446744073709551615"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("18446744073709551616", "18446744073709552000"),
        ("9007199254740993", "9007199254740993"),
        ("9007199254740993.0", "9007199254740992"),
        ("2.2250738585072011e-308", "2.225073858507201e-308"),
        ("4.9e-324", "5e-324"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        (
            r#"{"s": "1.5 \" 2e3", "n": [0.1, {"x": 333333333.33333329}]}"#,
            r#"{"n":[0.1,{"x":333333333.3333333}],"s":"1.5 \" 2e3"}"#,
        ),
    ];
    for (text, want) in cases {
        assert_eq!(canonical_json_from_text(text).expect(text), want, "{text}");
    }
    // Numbers serde_json without `float_roundtrip` reads one unit off.
    for text in [
        "0.90073403272434e188",
        "4.5818920535891263e85",
        "0.080100230201321225",
        "-333333333.33333329e-300",
    ] {
        let nearest = Value::from(text.parse::<f64>().expect("a number"));
        assert_eq!(
            canonical_json_from_text(text).expect(text),
            canonical_json(&nearest),
            "{text}"
        );
    }
    for refused in ["1e400", "[1,]", "\"\\ud83d\"", "01", r#"{"a": 1, "a": 2}"#] {
        assert!(canonical_json_from_text(refused).is_err(), "{refused}");
    }
}

/// What RFC 8785 writes for a number's text: an integer in the 64-bit
/// range exactly (this crate's one difference), anything else as the
/// nearest double.
fn expected(text: &str) -> Option<String> {
    let plain = !text.contains(['.', 'e', 'E']) && text != "-0";
    if plain {
        if let Ok(n) = text.parse::<i64>() {
            return Some(canonical_json(&Value::from(n)));
        }
        if let Ok(n) = text.parse::<u64>() {
            return Some(canonical_json(&Value::from(n)));
        }
    }
    let double = text.parse::<f64>().ok()?;
    Number::from_f64(double).map(|n| canonical_json(&Value::Number(n)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// Any number's text, alone or among others in an array and an object.
    #[test]
    fn any_number_text_is_read_as_its_nearest_double(
        texts in prop::collection::vec(number_text(330), 1..6),
    ) {
        let wants: Option<Vec<String>> = texts.iter().map(|t| expected(t)).collect();
        match wants {
            Some(wants) => {
                prop_assert_eq!(canonical_json_from_text(&texts[0]).unwrap(), wants[0].clone(), "{}", texts[0]);
                let array = format!("[{}]", texts.join(" , "));
                prop_assert_eq!(canonical_json_from_text(&array).unwrap(), format!("[{}]", wants.join(",")));
                let object = format!(r#"{{"s": "{}", "v": {array}, "t": true}}"#, texts.join(" "));
                prop_assert_eq!(
                    canonical_json_from_text(&object).unwrap(),
                    format!(r#"{{"s":"{}","t":true,"v":[{}]}}"#, texts.join(" "), wants.join(","))
                );
            }
            // Out of the double range: refused, as serde_json refuses it.
            None => {
                let array = format!("[{}]", texts.join(","));
                prop_assert!(canonical_json_from_text(&array).is_err(), "{}", array);
            }
        }
    }

    /// A double written as Rust writes it (`{:e}`, `{:?}`, 17 digits) is
    /// read back as itself, and written as ECMAScript writes it.
    #[test]
    fn any_double_printed_by_rust_reads_back_as_itself(bits in any::<u64>()) {
        let double = f64::from_bits(bits);
        prop_assume!(double.is_finite());
        let want = canonical_json(&Value::from(double));
        for text in [format!("{double:e}"), format!("{double:?}"), format!("{double:.16e}"), format!("{double:E}")] {
            prop_assert_eq!(canonical_json_from_text(&text).unwrap(), want.clone(), "{}", text);
        }
    }
}

// ------------------------------------- the key of a call, through the dispatcher
//
// The tools below are written out as `#[tool]` would write them (this crate's
// tests cannot use the attribute). Each answers with the idempotency key it
// ran under; the tests compare it with SHA-256 over the documented digest
// input, computed here from the expected canonical text.

mod tools {
    use serde_json::{Value, json};
    use toolcall_core::__private::{BoxFuture, Members, ToolArgs};
    use toolcall_core::__private::{CallContext, Data, SpecParts};
    use toolcall_core::fields::FieldMeta;
    use toolcall_core::{FieldErrors, Tool, ToolError, ToolSpec};

    /// A tool of one field of type `T`, named `name` in JSON.
    macro_rules! one_field_tool {
        ($tool:ident, $args:ident, $name:literal, $field:ident: $ty:ty) => {
            #[derive(serde::Serialize, schemars::JsonSchema)]
            #[serde(deny_unknown_fields)]
            pub struct $args {
                $field: $ty,
            }

            impl ToolArgs for $args {
                fn fields() -> &'static [FieldMeta] {
                    static FIELDS: [FieldMeta; 1] = [FieldMeta {
                        name: stringify!($field),
                        description: "The value.",
                        constraints: &[],
                        sensitive: false,
                        resource: None,
                    }];
                    &FIELDS
                }

                fn from_members(members: &Members<'_>, errors: &mut FieldErrors) -> Option<Self> {
                    let $field = errors.field::<$ty>(members, &Self::fields()[0]);
                    Some($args { $field: $field? })
                }
            }

            pub struct $tool;

            impl Tool for $tool {
                type Args = $args;

                fn spec() -> &'static ToolSpec {
                    static SPEC: ToolSpec = ToolSpec::__new::<$tool>(
                        SpecParts {
                            name: $name,
                            description: "Answers with its idempotency key.",
                            side_effect: false,
                            high_risk: false,
                            untrusted_output: false,
                            idempotent_backend: false,
                            timeout_ms: None,
                            max_output_bytes: None,
                            state: None,
                            reconcile: false,
                            check_state: None,
                            reconcile_state: None,
                        },
                        &[],
                    );
                    &SPEC
                }

                fn check(_: &$args, _: &CallContext<'_>) -> Result<(), ToolError> {
                    Ok(())
                }

                fn call<'a>(_: $args, cx: &'a CallContext<'_>) -> BoxFuture<'a, Result<Data, ToolError>> {
                    let key = cx.idempotency_key.to_string();
                    Box::pin(async move { Ok(Data::from_value(json!({ "key": key }))) })
                }
            }
        };
    }

    one_field_tool!(Reading, ReadingArgs, "reading", value: f64);
    one_field_tool!(Series, SeriesArgs, "series", values: Vec<f64>);
    one_field_tool!(Tally, TallyArgs, "tally", count: i64);
    one_field_tool!(Document, DocumentArgs, "document", body: Value);
}

use std::sync::Arc;

use std::sync::atomic::{AtomicUsize, Ordering};

use toolcall_core::{Call, Code, Dispatcher, Registry, Tool, ToolResult};

struct Keys {
    runtime: tokio::runtime::Runtime,
    dispatcher: Dispatcher<()>,
    calls: AtomicUsize,
}

impl Keys {
    fn new() -> Self {
        let registry = Registry::from_specs([
            tools::Reading::spec(),
            tools::Series::spec(),
            tools::Tally::spec(),
            tools::Document::spec(),
        ])
        .expect("a registry");
        let dispatcher = Dispatcher::builder(registry, Arc::new(()))
            .max_steps(1_000_000)
            .build()
            .expect("a dispatcher");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        Keys {
            runtime,
            dispatcher,
            calls: AtomicUsize::new(0),
        }
    }

    /// Calls `tool` with the raw `arguments`, in a session of its own (no
    /// loop guard between calls): the key it ran under, and the key of the
    /// canonical text `canonical` in that session; or the refusal.
    fn call(
        &self,
        tool: &str,
        arguments: &str,
        canonical: &str,
    ) -> Result<(String, String), Box<ToolResult>> {
        let session = format!("s{}", self.calls.fetch_add(1, Ordering::Relaxed));
        let result = self.runtime.block_on(
            self.dispatcher
                .execute(Call::new(tool, arguments).session(&session)),
        );
        if !result.ok {
            return Err(Box::new(result));
        }
        let got = result.data["key"].as_str().expect("the key").to_owned();
        Ok((got, documented_key("default", &session, tool, canonical)))
    }

    fn assert_key(&self, tool: &str, arguments: &str, canonical: &str) {
        match self.call(tool, arguments, canonical) {
            Ok((got, want)) => {
                assert_eq!(got, want, "{tool} {arguments}: not the key of {canonical}")
            }
            Err(refused) => panic!("{tool} {arguments}: {refused:?}"),
        }
    }

    /// The number `text`, the member of a `reading`, is keyed as the number
    /// `canonical`.
    fn assert_reading(&self, text: &str, canonical: &str) {
        self.assert_key(
            "reading",
            &format!(r#"{{"value": {text}}}"#),
            &format!(r#"{{"value":{canonical}}}"#),
        );
    }
}

/// The idempotency key as the canonical module documents it, computed here.
fn documented_key(caller: &str, session: &str, tool: &str, canonical: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"toolcall/idempotency/v2\n");
    for part in [caller, session, tool] {
        hasher.update(format!("{}:{part}", part.len()));
    }
    hasher.update(canonical);
    hex(&hasher.finalize())
}

/// ECMAScript's text of a double (`JSON.stringify`): ryu-js's, `-0` as `0`.
fn es(double: f64) -> String {
    if double == 0.0 {
        "0".to_owned()
    } else {
        ryu_js::Buffer::new().format_finite(double).to_owned()
    }
}

#[test]
fn every_rfc8785_input_as_a_call_is_keyed_by_the_rfc_output() {
    let keys = Keys::new();
    let cases = rfc8785_cases();
    assert!(cases.iter().any(|(name, ..)| name == "values.json"));
    for (_, input, want) in &cases {
        keys.assert_key(
            "document",
            &format!(r#"{{"body": {input}}}"#),
            &format!(r#"{{"body":{want}}}"#),
        );
    }
}

#[test]
fn a_long_fraction_is_keyed_as_its_nearest_double_on_every_path() {
    let keys = Keys::new();
    for text in [
        "333333333.33333329",
        "333333333.33333333",
        "333333333.3333333",
    ] {
        // The one-pass reading of a member, a list, and the full parse.
        keys.assert_reading(text, "333333333.3333333");
        keys.assert_key(
            "series",
            &format!(r#"{{"values": [4.50, {text}, 2e-3, 1E30]}}"#),
            r#"{"values":[4.5,333333333.3333333,0.002,1e+30]}"#,
        );
        keys.assert_key(
            "document",
            &format!(r#"{{"body": {{"n": [{text}], "s": "{text}"}}}}"#),
            &format!(r#"{{"body":{{"n":[333333333.3333333],"s":"{text}"}}}}"#),
        );
        // Refused by the one-pass reading for another reason (a member that
        // is no field): the call is refused, whatever its numbers.
        let refused = keys
            .call(
                "reading",
                &format!(r#"{{"value": {text}, "other": 1}}"#),
                "",
            )
            .expect_err("an unknown member");
        assert_eq!(refused.code, Code::InvalidArguments);
    }
}

#[test]
fn one_hundred_written_any_way_is_one_key() {
    let keys = Keys::new();
    let forms = ONE_HUNDRED;
    for form in forms {
        keys.assert_reading(form, "100");
        keys.assert_key(
            "series",
            &format!(r#"{{"values": [{form}, -{form}]}}"#),
            r#"{"values":[100,-100]}"#,
        );
    }
    // An integer field takes the integer, and refuses a fraction or an exponent.
    keys.assert_key("tally", r#"{"count": 100}"#, r#"{"count":100}"#);
    for form in &forms[1..] {
        let refused = keys
            .call("tally", &format!(r#"{{"count": {form}}}"#), "")
            .expect_err("not an integer");
        assert_eq!(refused.code, Code::InvalidArguments, "{form}");
    }
    // In a `Value`, an integer stays an integer; a double is written as one.
    keys.assert_key(
        "document",
        r#"{"body": [100, 100.0, 1e2, 9007199254740993]}"#,
        r#"{"body":[100,100,100,9007199254740993]}"#,
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A double written any of many ways is keyed as the double itself
    /// (its shortest ECMAScript form), alone, in a list and in a document.
    #[test]
    fn a_double_written_any_way_is_keyed_as_its_double(bits in any::<u64>()) {
        let f = f64::from_bits(bits);
        prop_assume!(f.is_finite());
        let keys = Keys::new();
        let shortest = es(f);
        for form in forms_of(f) {
            prop_assert_eq!(form.parse::<f64>().unwrap().to_bits(), f.to_bits(), "{}", form);
            let (got, want) = keys.call("reading", &format!(r#"{{"value": {form}}}"#), &format!(r#"{{"value":{shortest}}}"#)).unwrap();
            prop_assert_eq!(got, want, "reading {}", form);
            let (got, want) = keys.call("series", &format!(r#"{{"values": [{form}, 0.5]}}"#), &format!(r#"{{"values":[{shortest},0.5]}}"#)).unwrap();
            prop_assert_eq!(got, want, "series {}", form);
            let (got, want) = keys.call("document", &format!(r#"{{"body": {{"x": {form}}}}}"#), &format!(r#"{{"body":{{"x":{}}}}}"#, expected(&form).unwrap())).unwrap();
            prop_assert_eq!(got, want, "document {}", form);
        }
    }

    /// Any number's text in an `f64` field is keyed as the double nearest
    /// to it (Rust's `f64::from_str` rounds correctly).
    #[test]
    fn any_number_text_is_keyed_as_its_nearest_double(texts in prop::collection::vec(number_text(330), 1..4)) {
        let doubles: Vec<f64> = texts.iter().map(|t| t.parse().unwrap()).collect();
        prop_assume!(doubles.iter().all(|f| f.is_finite()));
        let keys = Keys::new();
        let (got, want) = keys.call("reading", &format!(r#"{{"value": {}}}"#, texts[0]), &format!(r#"{{"value":{}}}"#, es(doubles[0]))).unwrap();
        prop_assert_eq!(got, want, "reading {}", texts[0]);
        let shortest: Vec<String> = doubles.iter().map(|f| es(*f)).collect();
        let list = texts.join(", ");
        let (got, want) = keys.call("series", &format!(r#"{{"values": [{list}]}}"#), &format!(r#"{{"values":[{}]}}"#, shortest.join(","))).unwrap();
        prop_assert_eq!(got, want, "series {}", list);
        let exact: Vec<String> = texts.iter().map(|t| expected(t).unwrap()).collect();
        let (got, want) = keys.call("document", &format!(r#"{{"body": [{list}]}}"#), &format!(r#"{{"body":[{}]}}"#, exact.join(","))).unwrap();
        prop_assert_eq!(got, want, "document {}", list);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// The RFC's files, in a module of their own beside this binary (the
// property tests stay here, with their regressions file).
#[path = "canonical_rfc8785/rfc_files.rs"]
mod rfc_files;
