//! `orders mcp` against a real MCP client: the official Python SDK, driven by
//! `tests/mcp_client.py`; and against frames written by hand, the ones rmcp
//! cannot read included, which need no Python.
//!
//! The client runs in the Python of `python/mod.rs`, with the pinned
//! official SDKs (here `mcp==2.3.0`): `TOOLCALL_PYTHON` names one, and then
//! a failure to run it fails the test (`.ci/run` sets it); without it, the
//! test makes the virtual environment `target/sdk-venv` itself, and prints
//! `SKIPPED` if it cannot (no `python3`, no network to PyPI).

mod python;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

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

/// `orders mcp` answers every request of a client that writes its own
/// frames, including the ones rmcp cannot read, and keeps serving: no
/// Python needed, the bytes are written here.
#[test]
fn orders_mcp_answers_every_frame_and_keeps_serving() {
    let audit = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mcp-frames-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&audit);
    let mut server = Frames::start(&audit);

    server.send(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"frames","version":"0"}}}"#);
    assert_eq!(server.answer()["id"], 0);
    server.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    // Nested deeper than serde_json reads (128), outside the arguments.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"get_order","arguments":{{"order_id":"ORD-1001"}},"_meta":{{"x":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    server.send(deep.as_bytes());
    assert_eq!(server.error(), (json!(1), -32700));

    // A number out of range in the arguments: the pipeline's INVALID_JSON.
    server.send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"refund_order","arguments":{"order_id":"ORD-1001","amount_cents":1e400,"currency":"BRL","reason":"damaged"}}}"#);
    assert_eq!(server.tool_code(2), "INVALID_JSON");

    // Invalid UTF-8.
    server.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"get_order\",\"arguments\":{\"order_id\":\"ORD-1001\xff\"}}}");
    assert_eq!(server.error(), (json!(3), -32700));

    // Over the 1 MiB line limit, its id last (as the TypeScript SDK writes).
    let big = format!(
        r#"{{"method":"tools/call","params":{{"name":"get_order","arguments":{{"order_id":"{}"}}}},"jsonrpc":"2.0","id":"big"}}"#,
        "x".repeat(1024 * 1024)
    );
    server.send(big.as_bytes());
    assert_eq!(server.error(), (json!("big"), -32600));

    // A member given twice: refused as sent, not the last one refunded.
    server.send(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"refund_order","arguments":{"order_id":"ORD-1001","amount_cents":100,"amount_cents":200,"currency":"BRL","reason":"damaged"}}}"#);
    assert_eq!(server.tool_code(4), "INVALID_JSON");

    // A 200 KB tool name gets a small answer.
    let name = "n".repeat(200 * 1000);
    server.send(format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#).as_bytes());
    let line = server.line();
    assert!(line.len() < 8 * 1024, "{} bytes", line.len());
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["code"], "UNKNOWN_TOOL",
        "{answer}"
    );

    // Still serving, and nothing was refunded.
    server.send(br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"get_order","arguments":{"order_id":"ORD-1001"}}}"#);
    assert_eq!(server.tool_code(6), "OK");
    assert_eq!(
        server.last["result"]["structuredContent"]["data"]["refunded_cents"],
        0
    );

    server.finish();
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let codes: Vec<(&str, &str)> = records
        .iter()
        .map(|record| {
            let tool = record["tool"].as_str().unwrap_or("");
            (
                if tool.len() > 20 { "<long>" } else { tool },
                record["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("refund_order", "INVALID_JSON"),
            ("refund_order", "INVALID_JSON"),
            ("<long>", "UNKNOWN_TOOL"),
            ("get_order", "OK"),
        ],
        "{records:?}"
    );
    let _ = std::fs::remove_file(&audit);
}

/// `orders mcp` as a child process, written to and read from by hand.
struct Frames {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    /// The last answer read.
    last: Value,
}

impl Frames {
    fn start(audit: &Path) -> Frames {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_orders"))
            .arg("mcp")
            .arg("--audit")
            .arg(audit)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("orders mcp starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Frames {
            child,
            stdin,
            lines,
            last: Value::Null,
        }
    }

    fn send(&mut self, frame: &[u8]) {
        use std::io::Write as _;
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(frame).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line `orders mcp` writes; an unanswered request fails here.
    fn line(&mut self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .expect("orders mcp answers")
    }

    fn answer(&mut self) -> Value {
        let line = self.line();
        self.last = serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line}"));
        self.last.clone()
    }

    /// The next answer, a JSON-RPC error: its id and code.
    fn error(&mut self) -> (Value, i64) {
        let answer = self.answer();
        let code = answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("a JSON-RPC error: {answer}"));
        (answer["id"].clone(), code)
    }

    /// The next answer, a tool result for request `id`: its code.
    fn tool_code(&mut self, id: u64) -> String {
        let answer = self.answer();
        assert_eq!(answer["id"], id, "{answer}");
        let result = &answer["result"]["structuredContent"];
        assert_eq!(
            answer["result"]["isError"],
            result["ok"] != json!(true),
            "{answer}"
        );
        result["code"].as_str().unwrap_or("OK").to_owned()
    }

    /// Closes standard input; the server exits cleanly.
    fn finish(mut self) {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "orders mcp exited with {status}");
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "orders mcp did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
