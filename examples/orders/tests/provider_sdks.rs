//! The tool definitions against the providers' own official Python SDKs:
//! `tests/sdk_check.py` validates each item of every format's `tools` value
//! with the SDK's type for it (`google-genai`, `openai`, `anthropic`, `mcp`),
//! for the committed golden files and for what `orders definitions` prints
//! now, and must reject a broken Gemini definition.
//!
//! The script runs in the Python of `python/mod.rs`: `TOOLCALL_PYTHON`
//! names one, and then a failure to run it fails the test (`.ci/run` sets
//! it); without it, the test makes the virtual environment `target/sdk-venv`
//! itself, and prints `SKIPPED` if it cannot (no `python3`, no network to PyPI).

mod python;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Importing the SDKs takes seconds; this only guards against a stuck interpreter.
const DEADLINE: Duration = Duration::from_secs(300);

/// Every format `orders definitions` prints.
const FORMATS: [&str; 6] = [
    "neutral",
    "openai",
    "openai-responses",
    "anthropic",
    "gemini",
    "mcp",
];

/// The script's summary when every provider format was checked (`neutral`
/// is toolcall's own shape, with no provider SDK to hold it to).
const ALL_CHECKED: &str = "formats checked: anthropic gemini mcp openai openai-responses";

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// A fresh directory of this test's own under the system's temporary one.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("orders-sdk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `sdk_check.py ARGS...`, or `None` when there is no Python for it
/// (the test is then skipped, and says so).
fn sdk_check(test: &str, args: &[&OsStr]) -> Option<python::Run> {
    let python = match python::python() {
        Ok(python) => python,
        Err(reason) => {
            python::skipped(test, &reason);
            return None;
        }
    };
    Some(python::run(
        &python,
        &tests_dir().join("sdk_check.py"),
        args,
        DEADLINE,
    ))
}

/// The script passed every check, on every provider format.
fn assert_all_passed(run: &python::Run) {
    let report = run.report();
    let Some(status) = run.status else {
        panic!("sdk_check.py did not finish within {DEADLINE:?}\n{report}");
    };
    assert!(status.success(), "sdk_check.py failed ({status})\n{report}");
    assert!(!run.stdout.contains("not ok"), "a check failed\n{report}");
    assert!(
        run.stdout.lines().any(|line| line == ALL_CHECKED),
        "not every provider format was checked\n{report}"
    );
    assert!(
        run.stdout
            .lines()
            .any(|line| line.ends_with(" passed, 0 failed") && !line.starts_with("0 ")),
        "no summary line\n{report}"
    );
}

/// The script rejected the file with exit code 1, naming `expected` in a
/// failed check.
fn assert_rejected(run: &python::Run, expected: &str) {
    let report = run.report();
    let Some(status) = run.status else {
        panic!("sdk_check.py did not finish within {DEADLINE:?}\n{report}");
    };
    assert_eq!(status.code(), Some(1), "not rejected\n{report}");
    assert!(
        run.stdout
            .lines()
            .any(|line| line.starts_with("not ok") && line.contains(expected)),
        "no failed check naming {expected:?}\n{report}"
    );
}

/// Where the example commits its definitions, one file a format.
fn definitions_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("definitions")
}

/// The committed Gemini definitions, parsed.
fn golden_gemini() -> serde_json::Value {
    let path = definitions_dir().join("gemini.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

#[test]
fn the_golden_definitions_pass_the_provider_sdks() {
    let golden = definitions_dir();
    for format in FORMATS {
        let file = golden.join(format!("{format}.json"));
        assert!(file.exists(), "{} is missing", file.display());
    }
    let Some(run) = sdk_check("the provider SDK check", &[golden.as_os_str()]) else {
        return;
    };
    assert_all_passed(&run);
}

#[test]
fn the_printed_definitions_pass_the_provider_sdks() {
    let dir = scratch("printed");
    for format in FORMATS {
        let output = Command::new(env!("CARGO_BIN_EXE_orders"))
            .args(["definitions", "--format", format])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "orders definitions --format {format}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::write(
            dir.join(format!("definitions-{format}.json")),
            output.stdout,
        )
        .unwrap();
    }
    let Some(run) = sdk_check("the provider SDK check", &[dir.as_os_str()]) else {
        return;
    };
    assert_all_passed(&run);
    std::fs::remove_dir_all(&dir).ok();
}

/// The check can fail: a lower-case JSON Schema type (which google-genai's
/// case-insensitive enum would quietly upper-case) and a member Gemini does
/// not know are each rejected.
#[test]
fn a_broken_gemini_definition_fails_the_provider_sdk_check() {
    let dir = scratch("broken");

    let mut lower_case = golden_gemini();
    lower_case[0]["functionDeclarations"][0]["parameters"]["type"] = "object".into();
    let lower_case_file = dir.join("lower-case.json");
    std::fs::write(&lower_case_file, lower_case.to_string()).unwrap();

    let mut unknown_member = golden_gemini();
    unknown_member[0]["functionDeclarations"][1]["strict"] = true.into();
    let unknown_member_file = dir.join("unknown-member.json");
    std::fs::write(&unknown_member_file, unknown_member.to_string()).unwrap();

    let arg = |file: &Path| format!("gemini={}", file.display());
    let Some(run) = sdk_check("the provider SDK check", &[arg(&lower_case_file).as_ref()]) else {
        return;
    };
    assert_rejected(&run, "parameters.type: 'object' came back as 'OBJECT'");

    let run = sdk_check(
        "the provider SDK check",
        &[arg(&unknown_member_file).as_ref()],
    )
    .unwrap();
    assert_rejected(
        &run,
        "functionDeclarations.1.strict Extra inputs are not permitted",
    );
    std::fs::remove_dir_all(&dir).ok();
}
