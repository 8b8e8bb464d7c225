//! The `format` checks against the JSON Schema Test Suite, draft 2020-12,
//! `tests/draft2020-12/optional/format/{uuid,date,date-time,uri,email}.json`.
//!
//! The suite's files are stored in `tests/data/json-schema-test-suite/`
//! (MIT, the suite's LICENSE beside them).
//!
//! Each case goes through [`Constraint::Format`], the way the dispatcher
//! checks an argument: a value that is not a string passes, as the suite's
//! "all string formats ignore ..." cases expect.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use toolcall_core::fields::{Constraint, StringFormat};

/// Cases where this crate decides otherwise than the suite, on purpose, by
/// format and description, with the reason.
const DISAGREEMENTS: &[(&str, &str, &str)] = &[
    (
        "email",
        "a quoted string with a space in the local part is valid",
        QUOTED,
    ),
    (
        "email",
        "a quoted string with a double dot in the local part is valid",
        QUOTED,
    ),
    (
        "email",
        "a quoted string with a @ in the local part is valid",
        QUOTED,
    ),
    (
        "email",
        "an IPv4-address-literal after the @ is valid",
        LITERAL,
    ),
    (
        "email",
        "an IPv6-address-literal after the @ is valid",
        LITERAL,
    ),
];

const QUOTED: &str = "`email` takes a dot-atom local part only: a quoted local part is \
    valid RFC 5321 but almost never a real mailbox, and it lets a model pass spaces, `@` \
    and backslashes through a field meant for an address";
const LITERAL: &str = "`email` takes a host name domain only: an address literal \
    (`user@[127.0.0.1]`) names a machine, not a mail domain, and is how a model would \
    point mail at an internal address";

const FORMATS: [&str; 5] = ["uuid", "date", "date-time", "uri", "email"];

/// The draft 2020-12 `optional/format` files of the JSON Schema Test Suite
/// (github.com/json-schema-org/JSON-Schema-Test-Suite, MIT, its LICENSE
/// beside them), for the formats we check.
fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/json-schema-test-suite/format")
}

fn disagreement(format: &str, description: &str) -> Option<&'static str> {
    DISAGREEMENTS
        .iter()
        .find(|(f, d, _)| *f == format && *d == description)
        .map(|(_, _, reason)| *reason)
}

#[test]
fn json_schema_test_suite_format_cases() {
    let dir = suite_dir();
    let mut failures = Vec::new();
    let mut listed_seen = Vec::new();
    let mut cases = 0;
    for name in FORMATS {
        let format = StringFormat::from_name(name).expect("a format with a check");
        let path = dir.join(format!("{name}.json"));
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let groups: Value = serde_json::from_str(&text).expect("the suite's JSON");
        for group in groups.as_array().expect("an array of test groups") {
            assert_eq!(
                group["schema"]["format"], name,
                "{name}.json: a group about another format"
            );
            for case in group["tests"].as_array().expect("a group's tests") {
                let description = case["description"].as_str().expect("a description");
                let valid = case["valid"].as_bool().expect("a verdict");
                let accepted = Constraint::Format(format)
                    .violation(&case["data"])
                    .is_none();
                cases += 1;
                let listed = disagreement(name, description).is_some();
                if listed {
                    listed_seen.push(format!("{name}: {description}"));
                }
                match (listed, accepted == valid) {
                    (true, true) => failures.push(format!(
                        "{name}: {description:?} now agrees with the suite: \
                         remove it from DISAGREEMENTS"
                    )),
                    (false, false) => failures.push(format!(
                        "{name}: {description:?}: {} should be {}",
                        case["data"],
                        if valid { "accepted" } else { "refused" }
                    )),
                    _ => {}
                }
            }
        }
    }
    for (format, description, _) in DISAGREEMENTS {
        if !listed_seen.contains(&format!("{format}: {description}")) {
            failures.push(format!(
                "{format}: {description:?} is listed in DISAGREEMENTS but not in the suite"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(cases > 100, "only {cases} cases in {}", dir.display());
}

/// The reasons above are part of the contract: each disagreement names one
/// and the strict e-mail check behaves as they say, with or without the suite.
#[test]
fn the_listed_disagreements_hold_without_the_suite() {
    let email = StringFormat::Email;
    for (text, reason) in [
        ("\"joe bloggs\"@example.com", QUOTED),
        ("\"joe..bloggs\"@example.com", QUOTED),
        ("\"joe@bloggs\"@example.com", QUOTED),
        ("joe.bloggs@[127.0.0.1]", LITERAL),
        ("joe.bloggs@[IPv6:::1]", LITERAL),
    ] {
        assert!(!email.accepts(text), "{text} is refused: {reason}");
    }
    assert!(email.accepts("joe.bloggs@example.com"));
    assert!(
        DISAGREEMENTS
            .iter()
            .all(|(f, _, r)| *f == "email" && !r.is_empty())
    );
}
