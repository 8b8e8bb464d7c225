//! A small bank written from the guide: what a newcomer meets when the
//! build goes wrong (the error's sentence and its fix, printed by `?` in
//! `main`), a status polled more often than the loop guard's default, a
//! dry run of a transfer that needs a person, and the audit read back.

use std::process::Command;

const MISBUILT: &str = env!("CARGO_BIN_EXE_misbuilt");

/// Runs `misbuilt CASE`; its exit success and its standard error.
fn misbuilt(case: &str) -> (bool, String) {
    let output = Command::new(MISBUILT)
        .arg(case)
        .output()
        .expect("misbuilt runs");
    (
        output.status.success(),
        String::from_utf8(output.stderr).expect("standard error is UTF-8"),
    )
}

#[test]
fn main_with_question_mark_prints_an_unknown_tool_with_the_name_meant() {
    let (ok, stderr) = misbuilt("unknown-tool");
    assert!(!ok, "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "Error: caller `default` is allowed `transfer_mony`, but no tool has that name; \
         did you mean `transfer_money`?"
    );
    assert!(!stderr.contains("UnknownTool {"), "{stderr}");
}

#[test]
fn main_with_question_mark_prints_an_unknown_limit_with_the_name_meant() {
    let (ok, stderr) = misbuilt("unknown-limit");
    assert!(!ok, "{stderr}");
    assert!(
        stderr.starts_with("Error: caller `default` sets the limit `max_transfer_cent`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("did you mean `max_transfer_cents`?"),
        "{stderr}"
    );
    assert!(!stderr.contains("UnknownLimit {"), "{stderr}");
}

#[test]
fn main_with_question_mark_prints_an_open_schema_with_its_fix() {
    let (ok, stderr) = misbuilt("open-schema");
    assert!(!ok, "{stderr}");
    assert!(
        stderr.starts_with(
            "Error: tool `transfer_for`: the object at `/properties/requester` of its parameters schema accepts unknown members"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("add #[serde(deny_unknown_fields)] to that type"),
        "{stderr}"
    );
    assert!(!stderr.contains("OpenSchema {"), "{stderr}");
}

#[test]
fn main_with_question_mark_prints_a_duplicate_name_with_its_fix() {
    let (ok, stderr) = misbuilt("duplicate-name");
    assert!(!ok, "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "Error: two tools are named `transfer_money`; rename one with #[tool(name = \"...\")]"
    );
}

#[test]
fn a_warning_printed_with_debug_is_its_sentence() {
    let (ok, stderr) = misbuilt("warning");
    assert!(ok, "{stderr}");
    assert!(
        stderr.starts_with(
            "Warning: caller `default` may call `transfer_money`, whose argument `cents` is bounded by the limit `max_transfer_cents`"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("Policy::limit(\"max_transfer_cents\", ...)"),
        "{stderr}"
    );
    assert!(!stderr.contains("LimitNotSet {"), "{stderr}");
}

#[test]
fn the_fields_are_still_there_with_the_alternate_form() {
    let error = toolcall::BuildError::UnknownTool {
        caller: "default".into(),
        tool: "transfer_mony".into(),
        closest: Some("transfer_money"),
    };
    let fields = format!("{error:#?}");
    assert!(fields.starts_with("UnknownTool {"), "{fields}");
    assert!(
        fields.contains("closest: Some(\n        \"transfer_money\",\n    ),"),
        "{fields}"
    );
    assert_eq!(format!("{error:?}"), error.to_string());
    let error = toolcall::RegistryError::OpenSchema {
        tool: "transfer_for",
        path: "/properties/requester".into(),
    };
    assert!(format!("{error:#?}").starts_with("OpenSchema {"));
    assert_eq!(format!("{error:?}"), error.to_string());
}
