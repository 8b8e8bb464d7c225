//! `orders mcp` against a real MCP client: the official Python SDK, driven by
//! `tests/mcp_client.py`.
//!
//! The client runs in the Python of `python/mod.rs`, with the pinned
//! official SDKs (here `mcp==2.3.0`): `TOOLCALL_PYTHON` names one, and then
//! a failure to run it fails the test (`.ci/run` sets it); without it, the
//! test makes the virtual environment `target/sdk-venv` itself, and prints
//! `SKIPPED` if it cannot (no `python3`, no network to PyPI).

mod python;

use std::path::Path;
use std::time::Duration;

/// Longer than the script's own limits (a minute per session), so that the
/// script reports a hang itself; this one only guards against a stuck interpreter.
const DEADLINE: Duration = Duration::from_secs(300);

#[test]
fn the_python_sdk_lists_validates_and_approves_through_orders_mcp() {
    let python = match python::python() {
        Ok(python) => python,
        Err(reason) => {
            python::skipped("the MCP client test", &reason);
            return;
        }
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let run = python::run(
        &python,
        &script,
        &[env!("CARGO_BIN_EXE_orders").as_ref()],
        DEADLINE,
    );
    let (stdout, report) = (&run.stdout, run.report());

    let Some(status) = run.status else {
        panic!("the MCP client did not finish within {DEADLINE:?}\n{report}");
    };
    assert!(
        status.success(),
        "the MCP client failed ({status})\n{report}"
    );
    assert!(!stdout.contains("not ok"), "a check failed\n{report}");
    // Both ways a client may ask the person: an `elicitation/create` request
    // after the `initialize` handshake, and an `input_required` result on 2026-07-28.
    for session in ["ClientSession 2025-11-25", "Client 2026-07-28"] {
        assert!(
            stdout.contains(&format!("{session}: exactly one refund was made")),
            "the {session} session did not finish its checks\n{report}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|line| line.ends_with(" passed, 0 failed")),
        "no summary line\n{report}"
    );
}
