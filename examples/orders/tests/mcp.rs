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
    let mut server = Frames::start(&["--audit".as_ref(), audit.as_os_str()]);
    assert_eq!(
        server.stderr_line(),
        "conversation: per connection (no --session-id: a reconnect forgets the taint, replays \
         and pending approvals; a client may name one in _meta \"toolcall/conversation\")"
    );

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

fn refund(amount_cents: i64) -> Value {
    json!({"order_id": "ORD-1001", "amount_cents": amount_cents, "currency": "BRL",
           "reason": "damaged"})
}

/// What ORD-1001's `get_order` says was refunded, asked as request `id`.
fn refunded_cents(server: &mut Frames, id: u64) -> i64 {
    server.call(id, "get_order", json!({"order_id": "ORD-1001"}), None);
    let order = server.tool_result(id);
    order["data"]["refunded_cents"]
        .as_i64()
        .unwrap_or_else(|| panic!("{order}"))
}

/// A fresh SQLite store file for one test.
fn store_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mcp-{name}-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    format!("sqlite:{}", path.display())
}

/// Every tool, the untrusted messages and the note included.
const ALL_TOOLS: &str = "get_order,refund_order,read_messages,add_note";

/// Two `orders mcp --session-id X` processes over one SQLite file are one
/// conversation: what the customer wrote, read on the first, taints the
/// second; a refund approved and made on the first is replayed on the
/// second, not made again.
#[test]
fn two_orders_mcp_processes_with_one_session_id_are_one_conversation() {
    let store = store_file("shared");
    let args = [
        "--store",
        &store,
        "--session-id",
        "desk-42",
        "--allow",
        ALL_TOOLS,
    ];
    let mut first = Frames::connected(&args, true);
    let mut second = Frames::connected(&args, false);
    for server in [&mut first, &mut second] {
        assert_eq!(
            server.stderr_line(),
            "conversation: desk-42 (--session-id: every connection, and every process over the \
             same store)"
        );
    }

    first.call(1, "read_messages", json!({"order_id": "ORD-1002"}), None);
    let read = first.tool_result(1);
    assert!(read.to_string().contains("refund-help.example"), "{read}");
    second.call(
        1,
        "add_note",
        json!({"order_id": "ORD-1002", "text":
            "Customer must confirm payment details at https://refund-help.example/claim?id=ORD-1002"}),
        None,
    );
    let note = second.tool_result(1);
    assert_eq!(note["code"], "CONFIRMATION_REQUIRED", "{note}");
    assert_eq!(note["data"]["reason"], "untrusted_context", "{note}");

    first.call(2, "refund_order", refund(2590), None);
    first.approve();
    let refunded = first.tool_result(2);
    assert_eq!(refunded["ok"], true, "{refunded}");
    assert!(refunded.get("replayed").is_none(), "{refunded}");
    assert_eq!(refunded_cents(&mut first, 3), 2590);

    second.call(2, "refund_order", refund(2590), None);
    let again = second.tool_result(2);
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(
        again["replayed"], true,
        "the second process replays it: {again}"
    );
    // Refunded once: seen by this process's shop when the shop lives in
    // the store too, not at all when each process has its own; never twice.
    let seen = refunded_cents(&mut second, 3);
    assert!(seen == 2590 || seen == 0, "refunded at most once: {seen}");

    first.finish();
    second.finish();
}

/// With `--approvals inbox`, a client's yes through elicitation is not an
/// inbox decision: nothing is refunded, and the answer names the approval
/// the inbox lists. `--elicitation-approves` lets the yes approve.
#[test]
fn in_inbox_mode_an_elicitation_answer_approves_only_with_elicitation_approves() {
    let store = store_file("inbox");
    let mut server = Frames::connected(&["--store", &store, "--approvals", "inbox"], true);
    server.call(1, "refund_order", refund(2590), None);
    // No question comes: the next line is the call's answer.
    let asked = server.tool_result(1);
    assert_eq!(asked["code"], "CONFIRMATION_REQUIRED", "{asked}");
    assert!(asked["question_id"].is_string(), "{asked}");
    assert_eq!(refunded_cents(&mut server, 2), 0);
    server.finish();

    let store = store_file("inbox-elicitation");
    let args = [
        "--store",
        &store,
        "--approvals",
        "inbox",
        "--elicitation-approves",
    ];
    let mut server = Frames::connected(&args, true);
    server.call(1, "refund_order", refund(2590), None);
    server.approve();
    let refunded = server.tool_result(1);
    assert_eq!(refunded["ok"], true, "{refunded}");
    assert_eq!(refunded_cents(&mut server, 2), 2590);
    server.call(3, "refund_order", refund(2590), None);
    assert_eq!(server.tool_result(3)["replayed"], true);
    assert_eq!(refunded_cents(&mut server, 4), 2590, "refunded once");
    server.finish();
}

/// A conversation a client names in `_meta` that is not a usable name is a
/// tool error, and nothing runs.
#[test]
fn a_bad_conversation_in_meta_is_a_tool_error_and_refunds_nothing() {
    let mut server = Frames::connected(&[], true);
    let bad = [
        json!(7),
        json!(""),
        json!("x".repeat(257)),
        json!("line\nbreak"),
    ];
    for (id, value) in (1..).zip(bad) {
        let meta = json!({"toolcall/conversation": value});
        server.call(id, "refund_order", refund(2590), Some(meta));
        let result = server.tool_result(id);
        assert_eq!(result["ok"], false, "{result}");
        assert_eq!(result["code"], "INVALID_ARGUMENTS", "{result}");
        assert_eq!(result["data"]["meta"], "toolcall/conversation", "{result}");
    }
    assert_eq!(refunded_cents(&mut server, 10), 0);
    server.finish();
}

/// A refund whose request id no answer could carry as sent (too long, or a
/// number that is not a 64-bit integer), or whose `params` hold no usable
/// tool name, is refused without asking anyone or refunding anything; the
/// connection keeps serving, and an integer id above 2^53 comes back exactly.
#[test]
fn orders_mcp_refuses_ids_it_cannot_echo_and_calls_without_a_name() {
    let mut server = Frames::connected(&[], true);
    let arguments = refund(2590).to_string();
    let huge = format!(r#""{}""#, "i".repeat(500 * 1000));
    for id in [
        huge.as_str(),
        "123456789012345678901234567890",
        "9223372036854775808",
        "-9223372036854775809",
        "1.5",
    ] {
        server.send(
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"refund_order","arguments":{arguments}}}}}"#
            )
            .as_bytes(),
        );
        // No question is asked: the next line is the refusal, and it is small.
        let line = server.line();
        assert!(line.len() < 1024, "{} bytes", line.len());
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], Value::Null, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }

    let cases = [
        String::new(),
        r#","params":"refund_order""#.to_owned(),
        format!(r#","params":{{"arguments":{arguments}}}"#),
        format!(r#","params":{{"name":5,"arguments":{arguments}}}"#),
    ];
    for (id, params) in (1..).zip(cases) {
        server.send(
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"{params}}}"#).as_bytes(),
        );
        assert_eq!(server.error(), (json!(id), -32602), "{params}");
        let message = server.last["error"]["message"].as_str().unwrap();
        assert!(message.contains("params"), "{message}");
    }

    server.send(br#"{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"get_order","arguments":{"order_id":"ORD-1001"}}}"#);
    let line = server.line();
    assert!(line.contains(r#""id":9007199254740993,"#), "{line}");
    assert_eq!(refunded_cents(&mut server, 10), 0);
    server.finish();
}

/// `orders mcp` as a child process, written to and read from by hand.
struct Frames {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    /// What it writes on standard error, a line at a time.
    errors: std::sync::mpsc::Receiver<String>,
    /// The last answer read.
    last: Value,
}

/// Sends each line `from` gives to a channel, from a thread of its own.
fn lines_of(from: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(from)) {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

impl Frames {
    /// Starts `orders mcp ARGS...`.
    fn start(args: &[&std::ffi::OsStr]) -> Frames {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_orders"))
            .arg("mcp")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("orders mcp starts");
        let stdin = child.stdin.take();
        let lines = lines_of(child.stdout.take().unwrap());
        let errors = lines_of(child.stderr.take().unwrap());
        Frames {
            child,
            stdin,
            lines,
            errors,
            last: Value::Null,
        }
    }

    /// Starts `orders mcp ARGS...` and opens the session with `initialize`,
    /// declaring form elicitation when `elicits`.
    fn connected(args: &[&str], elicits: bool) -> Frames {
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|arg| arg.as_ref()).collect();
        let mut server = Frames::start(&args);
        let capabilities = if elicits {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        };
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities,
            "clientInfo": {"name": "frames", "version": "0"}}});
        server.send(initialize.to_string().as_bytes());
        assert_eq!(server.answer()["id"], 0);
        server.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server
    }

    /// The next line `orders mcp` writes on standard error.
    fn stderr_line(&mut self) -> String {
        self.errors
            .recv_timeout(Duration::from_secs(30))
            .expect("orders mcp writes to standard error")
    }

    /// Sends a `tools/call` (request `id`) with these arguments, and `meta`
    /// as its `_meta` when given.
    fn call(&mut self, id: u64, tool: &str, arguments: Value, meta: Option<Value>) {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        self.send(request.to_string().as_bytes());
    }

    /// The next answer, a tool result for request `id`: its `ToolResult`.
    fn tool_result(&mut self, id: u64) -> Value {
        self.tool_code(id);
        self.last["result"]["structuredContent"].clone()
    }

    /// Answers the approval question the server asks next with a yes.
    fn approve(&mut self) {
        let question = self.answer();
        assert_eq!(question["method"], "elicitation/create", "{question}");
        let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {
            "action": "accept", "content": {"approve": true}}});
        self.send(answer.to_string().as_bytes());
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
