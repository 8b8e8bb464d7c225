//! `orders mcp` against a real MCP client: the official Python SDK, driven by
//! `tests/mcp_client.py`.
//!
//! The client runs in a Python with `mcp==2.3.0`. `TOOLCALL_MCP_PYTHON`
//! names one (a path, absolute or relative to the workspace root, or a
//! command name), and then a failure to run it fails the test; `.ci/run`
//! sets it. Without it, the test makes the virtual environment
//! `target/mcp-venv` itself (`python3 -m venv`, then `pip install
//! mcp==2.3.0`), and prints `SKIPPED` if it cannot (no `python3`, no
//! network to PyPI).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longer than the script's own limits (a minute per session), so that the
/// script reports a hang itself; this one only guards against a stuck interpreter.
const DEADLINE: Duration = Duration::from_secs(300);

/// The version of the official Python SDK the test drives `orders mcp` with.
const SDK: &str = "mcp==2.3.0";

/// The workspace root (cargo runs tests in the package's directory).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The interpreter named by `TOOLCALL_MCP_PYTHON`. A relative path is taken
/// from the workspace root, unless it exists from here.
fn named_python() -> Option<PathBuf> {
    let named = PathBuf::from(std::env::var_os("TOOLCALL_MCP_PYTHON")?);
    if named.is_absolute() || named.components().count() == 1 || named.exists() {
        return Some(named);
    }
    Some(workspace().join(named))
}

/// Runs a set-up command; its output is kept for the reason of a skip.
fn setup(program: &Path, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{} {}` failed ({}): {}",
            program.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// `target/mcp-venv/bin/python` with the SDK installed, made if missing.
fn provisioned_python() -> Result<PathBuf, String> {
    let venv = workspace().join("target/mcp-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        setup(
            Path::new("python3"),
            &["-m", "venv", venv.to_str().unwrap()],
        )?;
    }
    if setup(&python, &["-c", "import mcp.client.session"]).is_err() {
        setup(
            &python,
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                SDK,
            ],
        )?;
    }
    Ok(python)
}

#[test]
fn the_python_sdk_lists_validates_and_approves_through_orders_mcp() {
    let python = match named_python().map_or_else(provisioned_python, Ok) {
        Ok(python) => python,
        Err(reason) => {
            use std::io::Write as _;
            // To the real stderr, past the test harness's capture.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: no Python with {SDK} for the MCP client test: {reason}"
            );
            return;
        }
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_orders"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));

    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).map(|_| text)
    });

    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > DEADLINE {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap().unwrap_or_default();
    let stderr = err.join().unwrap().unwrap_or_default();
    let report = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");

    let Some(status) = status else {
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
