//! The server's byte stream, written by hand: frames rmcp cannot read (too
//! deep, numbers out of range, invalid UTF-8, over the line limit, members
//! given twice) each get an answer, the connection keeps serving, and a
//! call's arguments reach the pipeline as the client wrote them.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, ReadHalf, WriteHalf,
};
use toolcall::{Code, Ctx, Dispatcher, MemoryAudit, Rejection, ToolError, tool, tools};
use toolcall_mcp::{MAX_STDIO_LINE_BYTES, Options};

mod client;

// ------------------------------------------------------------------ tools

/// An account with a counter of the deposits really made.
#[derive(Debug, Default)]
struct Account {
    balance_cents: AtomicI64,
    deposits: AtomicU64,
}

impl Account {
    fn deposits(&self) -> u64 {
        self.deposits.load(Ordering::SeqCst)
    }
}

/// Read the balance. No side effects.
#[tool]
fn balance(ctx: &Ctx<Account>) -> Result<Value, Rejection> {
    Ok(json!({"balance_cents": ctx.state.balance_cents.load(Ordering::SeqCst)}))
}

/// Put money in the account. Amount in cents.
#[tool(side_effect)]
fn deposit(
    ctx: &Ctx<Account>,
    /// Amount in minor units (cents).
    #[arg(min = 1)]
    amount_cents: i64,
) -> Result<Value, ToolError> {
    ctx.state.deposits.fetch_add(1, Ordering::SeqCst);
    let balance = ctx
        .state
        .balance_cents
        .fetch_add(amount_cents, Ordering::SeqCst)
        + amount_cents;
    Ok(json!({"amount_cents": amount_cents, "balance_cents": balance}))
}

// ------------------------------------------------------------------ client

/// How long a test waits for one answer: an unanswered request fails the
/// test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(10);

/// A client that writes bytes and reads lines, over a pipe to a server
/// behind a [`FrameGuard`](toolcall_mcp::FrameGuard).
struct Raw {
    write: WriteHalf<DuplexStream>,
    read: BufReader<ReadHalf<DuplexStream>>,
    server: tokio::task::JoinHandle<Result<(), toolcall_mcp::Error>>,
}

impl Raw {
    /// Connects through a [`FrameGuard`](toolcall_mcp::FrameGuard), and
    /// completes the handshake.
    async fn connect(dispatcher: Arc<Dispatcher<Account>>) -> Raw {
        let (client_io, server) = client::serve_piped(dispatcher, Options::new("frames"));
        Raw::initialize(server, client_io).await
    }

    /// Completes the `initialize` handshake over `client_io`, whose other
    /// end `server` serves.
    async fn initialize(
        server: tokio::task::JoinHandle<Result<(), toolcall_mcp::Error>>,
        client_io: DuplexStream,
    ) -> Raw {
        let (read, write) = tokio::io::split(client_io);
        let mut raw = Raw {
            write,
            read: BufReader::new(read),
            server,
        };
        raw.send(
            br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        )
        .await;
        let initialized = raw.answer().await;
        assert_eq!(initialized["id"], 0, "{initialized}");
        assert!(initialized["result"]["capabilities"]["tools"].is_object());
        raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        raw
    }

    /// Writes one frame and its newline.
    async fn send(&mut self, frame: &[u8]) {
        self.write.write_all(frame).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
        self.write.flush().await.unwrap();
    }

    /// The next line the server writes, as raw bytes.
    async fn line(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        let read = tokio::time::timeout(PATIENCE, self.read.read_until(b'\n', &mut line))
            .await
            .expect("the server answers")
            .unwrap();
        assert!(read > 0, "the server closed the connection");
        line
    }

    /// The next message the server writes.
    async fn answer(&mut self) -> Value {
        let line = self.line().await;
        serde_json::from_slice(&line).unwrap_or_else(|error| {
            panic!(
                "not one JSON message ({error}): {}",
                String::from_utf8_lossy(&line)
            )
        })
    }

    /// Sends a `tools/call` whose `arguments` are `arguments`, verbatim, and
    /// returns its result's `structuredContent` (the `ToolResult`), checked
    /// to be a tool result for request `id`.
    async fn call(&mut self, id: u64, tool: &str, arguments: &[u8]) -> Value {
        let mut frame = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":"#
        )
        .into_bytes();
        frame.extend_from_slice(arguments);
        frame.extend_from_slice(b"}}");
        self.send(&frame).await;
        self.result(id).await
    }

    /// The next answer, a tool result for request `id`: its `ToolResult`.
    async fn result(&mut self, id: u64) -> Value {
        let answer = self.answer().await;
        assert_eq!(answer["id"], id, "{answer}");
        let result = &answer["result"];
        let structured = result["structuredContent"].clone();
        assert!(structured.is_object(), "a tool result: {answer}");
        assert_eq!(
            result["isError"],
            structured["ok"] != json!(true),
            "{answer}"
        );
        structured
    }

    /// Sends `frame` and checks the answer is a JSON-RPC error with `id`
    /// and `code`. The message quotes the frame's start: some are huge.
    async fn refuses(&mut self, id: Value, code: i64, frame: &[u8]) {
        self.send(frame).await;
        let start = String::from_utf8_lossy(&frame[..frame.len().min(200)]).into_owned();
        assert_eq!(self.error().await, (id, code), "{start}");
    }

    /// The next answer, a JSON-RPC error: its id and code.
    async fn error(&mut self) -> (Value, i64) {
        let answer = self.answer().await;
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        let code = answer["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("a JSON-RPC error: {answer}"));
        assert!(answer["error"]["message"].is_string(), "{answer}");
        (answer["id"].clone(), code)
    }

    /// Checks that the connection still serves: a well-formed call is
    /// answered normally.
    async fn still_serves(&mut self, id: u64) {
        let read = self.call(id, "balance", b"{}").await;
        assert_eq!(read["ok"], true, "{read}");
    }

    /// Closes the connection; the server stops without error.
    async fn hang_up(self) {
        drop(self.write);
        drop(self.read);
        tokio::time::timeout(PATIENCE, self.server)
            .await
            .expect("the server stops when the client leaves")
            .unwrap()
            .expect("without error");
    }
}

/// The account, a connected [`Raw`] client, and the audit.
async fn open() -> (Arc<Account>, Raw, MemoryAudit) {
    let (account, dispatcher, audit) = setup();
    (account, Raw::connect(dispatcher).await, audit)
}

fn setup() -> (Arc<Account>, Arc<Dispatcher<Account>>, MemoryAudit) {
    let account = Arc::new(Account::default());
    let audit = MemoryAudit::new();
    let dispatcher = Dispatcher::builder(tools![balance, deposit].unwrap(), Arc::clone(&account))
        .max_steps(1000)
        .audit(audit.clone())
        .build()
        .unwrap();
    (account, Arc::new(dispatcher), audit)
}

/// Asserts that `result` is refused with `code`, its message saying `says`.
fn assert_refused(result: &Value, expected: &str, says: &str) {
    assert_eq!(code(result), expected, "{result}");
    let message = result["message"].as_str().unwrap();
    assert!(message.contains(says), "{result}");
}

/// Asserts that no call of `deposit` reached the audit.
fn assert_no_deposit(audit: &MemoryAudit) {
    let records = audit.records();
    assert!(records.iter().all(|record| record.tool != "deposit"));
}

/// Checks that the connection still serves (call `id`), that no deposit
/// ran or reached the audit, and that the server stops cleanly.
async fn served_having_run_nothing(mut raw: Raw, id: u64, account: &Account, audit: &MemoryAudit) {
    raw.still_serves(id).await;
    assert_eq!(account.deposits(), 0);
    assert_no_deposit(audit);
    raw.hang_up().await;
}

fn code(result: &Value) -> &str {
    result.get("code").and_then(Value::as_str).unwrap_or("OK")
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// `levels` nested arrays.
fn nested(levels: usize) -> String {
    format!("{}{}", "[".repeat(levels), "]".repeat(levels))
}

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn a_frame_nested_deeper_than_serde_json_reads_is_answered() {
    let (account, mut raw, audit) = open().await;

    // Too deep outside the arguments: the frame is no JSON rmcp can read.
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{{"name":"balance","arguments":{{}},"_meta":{{"x":{}}}}}}}"#,
        nested(200)
    );
    raw.refuses(json!(11), PARSE_ERROR, frame.as_bytes()).await;
    raw.still_serves(12).await;

    // Too deep inside the arguments: the pipeline's INVALID_JSON, audited.
    let arguments = format!(r#"{{"amount_cents":1,"x":{}}}"#, nested(200));
    let refused = raw.call(13, "deposit", arguments.as_bytes()).await;
    assert_eq!(code(&refused), "INVALID_JSON", "{refused}");
    assert!(
        audit
            .records()
            .iter()
            .any(|record| record.tool == "deposit" && record.code == Code::InvalidJson),
        "{:?}",
        audit.records()
    );
    raw.still_serves(14).await;
    assert_eq!(account.deposits(), 0);

    raw.hang_up().await;
}

#[tokio::test]
async fn a_number_out_of_range_is_answered() {
    let (account, mut raw, audit) = open().await;

    let refused = raw.call(21, "deposit", br#"{"amount_cents":1e400}"#).await;
    assert_eq!(code(&refused), "INVALID_JSON", "{refused}");
    assert_eq!(account.deposits(), 0);
    assert_eq!(
        audit.records().last().map(|record| record.code.clone()),
        Some(Code::InvalidJson)
    );

    // Out of range outside the arguments: a parse error, with the id.
    raw.refuses(json!("x-22"), PARSE_ERROR, br#"{"jsonrpc":"2.0","id":"x-22","method":"tools/call","params":{"name":"balance","_meta":{"n":1e400}}}"#).await;
    raw.still_serves(23).await;

    raw.hang_up().await;
}

#[tokio::test]
async fn invalid_utf8_is_answered() {
    let (account, mut raw, _audit) = open().await;

    raw.refuses(json!(31), PARSE_ERROR, b"{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"tools/call\",\"params\":{\"name\":\"deposit\",\"arguments\":{\"amount_cents\":1,\"note\":\"\xff\xfe\"}}}").await;
    raw.refuses(json!(32), PARSE_ERROR, b"{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{\"name\":\"bal\xc3\"},\"id\":32}").await;
    raw.still_serves(33).await;
    assert_eq!(account.deposits(), 0);

    raw.hang_up().await;
}

#[tokio::test]
async fn a_line_over_the_limit_is_skipped_and_answered_with_its_id() {
    let (account, mut raw, audit) = open().await;
    let padding = "x".repeat(MAX_STDIO_LINE_BYTES + 1000);

    // The id first...
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{{"name":"deposit","arguments":{{"amount_cents":1,"pad":"{padding}"}}}}}}"#
    );
    raw.refuses(json!(41), INVALID_REQUEST, frame.as_bytes())
        .await;

    // ... or last, after the params, as the TypeScript SDK writes it.
    let frame = format!(
        r#"{{"method":"tools/call","params":{{"name":"deposit","arguments":{{"amount_cents":1,"pad":"{padding}","q":"\"}}"}}}},"jsonrpc":"2.0","id":"last"}}"#
    );
    raw.refuses(json!("last"), INVALID_REQUEST, frame.as_bytes())
        .await;

    // No id to be found: null.
    raw.refuses(
        Value::Null,
        INVALID_REQUEST,
        format!(r#"{{"pad":"{padding}"}}"#).as_bytes(),
    )
    .await;

    served_having_run_nothing(raw, 42, &account, &audit).await;
}

#[tokio::test]
async fn a_member_given_twice_in_the_arguments_runs_nothing() {
    let (account, mut raw, audit) = open().await;

    let refused = raw
        .call(
            51,
            "deposit",
            br#"{"amount_cents": 100, "amount_cents": 200}"#,
        )
        .await;
    assert_refused(&refused, "INVALID_JSON", "duplicate member");
    let nested_twice = raw
        .call(
            52,
            "deposit",
            br#"{"amount_cents": 100, "x": {"a": 1, "a": 1}}"#,
        )
        .await;
    assert_eq!(code(&nested_twice), "INVALID_JSON", "{nested_twice}");
    assert_eq!(account.deposits(), 0);

    let records = audit.records();
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(record.code, Code::InvalidJson);
        assert!(!record.ok);
        // The audit keeps what the client sent.
        assert!(
            record.arguments.contains("\"amount_cents\": 100"),
            "{record:?}"
        );
    }

    // The same deposit, well-formed, runs once.
    let done = raw.call(53, "deposit", br#"{"amount_cents": 200}"#).await;
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(done["data"]["balance_cents"], 200);
    assert_eq!(account.deposits(), 1);

    raw.hang_up().await;
}

#[tokio::test]
async fn the_raw_limits_measure_what_was_sent() {
    let (account, mut raw, _audit) = open().await;

    // 70 KiB of white space: small once parsed and written out again, but
    // over the 64 KiB the pipeline takes.
    let arguments = format!(r#"{{"amount_cents": 5{}}}"#, " ".repeat(70 * 1024));
    let refused = raw.call(61, "deposit", arguments.as_bytes()).await;
    assert_refused(&refused, "INVALID_JSON", "over the limit");
    assert_eq!(account.deposits(), 0);

    // Arguments that are not an object are the pipeline's to refuse too.
    for (id, arguments) in [(62, &b"[1]"[..]), (63, b"\"x\""), (64, b"tru")] {
        let refused = raw.call(id, "balance", arguments).await;
        assert_eq!(code(&refused), "INVALID_JSON", "{refused}");
    }
    // `null`, like no arguments at all, is `{}`.
    let read = raw.call(65, "balance", b"null").await;
    assert_eq!(code(&read), "OK", "{read}");
    raw.send(br#"{"jsonrpc":"2.0","id":66,"method":"tools/call","params":{"name":"balance"}}"#)
        .await;
    assert_eq!(code(&raw.result(66).await), "OK");

    raw.hang_up().await;
}

#[tokio::test]
async fn members_given_twice_outside_the_arguments_are_invalid_requests() {
    let (account, mut raw, audit) = open().await;

    raw.refuses(json!(71), INVALID_REQUEST, br#"{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"balance","name":"deposit","arguments":{"amount_cents":1}}}"#).await;
    raw.refuses(json!(72), INVALID_REQUEST, br#"{"jsonrpc":"2.0","id":72,"method":"tools/call","params":{"name":"deposit","arguments":{"amount_cents":1},"arguments":{"amount_cents":2}}}"#).await;
    // Two ids: which one to answer is unknown, so neither.
    raw.refuses(
        Value::Null,
        INVALID_REQUEST,
        br#"{"jsonrpc":"2.0","id":73,"id":74,"method":"tools/list"}"#,
    )
    .await;
    served_having_run_nothing(raw, 75, &account, &audit).await;
}

#[tokio::test]
async fn a_huge_name_gets_a_small_answer() {
    let (_account, mut raw, _audit) = open().await;
    let name = "n".repeat(200 * 1000);

    // An unknown tool: a tool result, whose echo of the name is bounded.
    let frame = format!(
        r#"{{"jsonrpc":"2.0","id":81,"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
    );
    raw.send(frame.as_bytes()).await;
    let line = raw.line().await;
    assert!(line.len() < 8 * 1024, "{} bytes", line.len());
    let answer: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(answer["id"], 81);
    assert_eq!(
        answer["result"]["structuredContent"]["code"],
        "UNKNOWN_TOOL"
    );

    // An unknown method, and a frame rmcp cannot read: errors of bounded size.
    for frame in [
        format!(r#"{{"jsonrpc":"2.0","id":82,"method":"{name}","params":{{}}}}"#),
        format!(
            r#"{{"jsonrpc":"2.0","id":83,"method":"tools/call","params":{{"name":{{"{name}":1}}}}}}"#
        ),
        format!(r#"{{"jsonrpc":"2.0","id":84,"method":"tools/call","params":"{name}"}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":85,"method":"tools/call","params":{{"name":"{name}"}}"#),
        // rmcp's answer to a protocol version it does not speak names it.
        format!(
            r#"{{"jsonrpc":"2.0","id":86,"method":"tools/list","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{name}"}}}}}}"#
        ),
    ] {
        raw.send(frame.as_bytes()).await;
        let line = raw.line().await;
        assert!(line.len() < 8 * 1024, "{} bytes", line.len());
        let answer: Value = serde_json::from_slice(&line).unwrap();
        assert!(answer["error"]["code"].is_i64(), "{answer}");
    }
    raw.still_serves(87).await;

    raw.hang_up().await;
}

#[tokio::test]
async fn notifications_and_responses_it_cannot_read_are_not_answered() {
    let (_account, mut raw, _audit) = open().await;

    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"x":1e400}}"#)
        .await;
    raw.send(br#"{"jsonrpc":"2.0","id":99,"result":{"x":1e400}}"#)
        .await;
    raw.send(b"").await;
    // The next answer is the call's: nothing was answered before it.
    raw.still_serves(91).await;

    raw.hang_up().await;
}

#[tokio::test]
async fn answers_to_many_frames_at_once_are_whole_lines() {
    let (account, mut raw, _audit) = open().await;

    // Well-formed and malformed frames, written in one go: the guard's
    // errors and rmcp's results come back as whole lines, one per request.
    let mut batch = Vec::new();
    let mut expected = std::collections::BTreeSet::new();
    for id in 100..160u64 {
        let frame = match id % 4 {
            0 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"deposit","arguments":{{"amount_cents":{id}}}}}}}"#
            ),
            1 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","_":{}}}"#,
                nested(150)
            ),
            2 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"balance","arguments":{{"a":1,"a":2}}}}}}"#
            ),
            _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#),
        };
        batch.extend_from_slice(frame.as_bytes());
        batch.push(b'\n');
        expected.insert(id);
    }
    raw.write.write_all(&batch).await.unwrap();
    raw.write.flush().await.unwrap();

    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..expected.len() {
        let answer = raw.answer().await;
        let id = answer["id"]
            .as_u64()
            .expect("every answer names its request");
        match id % 4 {
            1 => assert_eq!(answer["error"]["code"], PARSE_ERROR, "{answer}"),
            2 => assert_eq!(
                answer["result"]["structuredContent"]["code"], "INVALID_JSON",
                "{answer}"
            ),
            _ => assert!(answer["result"].is_object(), "{answer}"),
        }
        assert!(answered.insert(id), "answered twice: {id}");
    }
    assert_eq!(answered, expected);
    assert_eq!(account.deposits(), 15);

    raw.hang_up().await;
}

#[tokio::test]
async fn a_transport_without_a_guard_still_serves_calls() {
    // `serve` on a bare pipe: rmcp reads the frames, and the pipeline gets
    // its map of the arguments written out again.
    let (account, dispatcher, _audit) = setup();
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(toolcall_mcp::serve(
        dispatcher,
        Options::new("bare"),
        server_io,
    ));
    let mut raw = Raw::initialize(server, client_io).await;
    let done = raw.call(1, "deposit", br#"{"amount_cents": 7}"#).await;
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(account.deposits(), 1);

    raw.hang_up().await;
}

// ------------------------------------------------------------------ ids

/// A `tools/call` of `deposit` whose `id` is `id`, written verbatim.
fn deposit_with_id(id: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"deposit","arguments":{{"amount_cents":5}}}}}}"#
    )
    .into_bytes()
}

/// The next answer, an invalid request with `id: null` whose message
/// contains `says`: its line, checked to be small.
async fn refused_with_null_id(raw: &mut Raw, says: &str) -> Value {
    let line = raw.line().await;
    assert!(line.len() < 1024, "{} bytes", line.len());
    let answer: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], INVALID_REQUEST, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains(says), "{answer}");
    answer
}

#[tokio::test]
async fn an_id_over_the_bound_is_refused_with_a_null_id_and_a_small_answer() {
    let (account, mut raw, audit) = open().await;

    // 500 KB of id, on a call and on a list: refused, not echoed.
    let huge = format!(r#""{}""#, "i".repeat(500 * 1000));
    raw.send(&deposit_with_id(&huge)).await;
    refused_with_null_id(&mut raw, "longer than 256 bytes").await;
    raw.send(format!(r#"{{"jsonrpc":"2.0","id":{huge},"method":"tools/list"}}"#).as_bytes())
        .await;
    refused_with_null_id(&mut raw, "longer than 256 bytes").await;
    // Just over the bound (257 bytes with its quotes).
    let over = format!(
        r#""{}""#,
        "i".repeat(toolcall_mcp::MAX_REQUEST_ID_BYTES - 1)
    );
    raw.send(&deposit_with_id(&over)).await;
    refused_with_null_id(&mut raw, "longer than 256 bytes").await;
    // A frame the guard answers itself (too deep) does not echo it either.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":{huge},"method":"tools/list","params":{{"_":{}}}}}"#,
        nested(200)
    );
    raw.send(deep.as_bytes()).await;
    let line = raw.line().await;
    assert!(line.len() < 1024, "{} bytes", line.len());
    let answer: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (Value::Null, json!(PARSE_ERROR))
    );
    assert_eq!(account.deposits(), 0);
    assert!(audit.records().is_empty(), "{:?}", audit.records());

    // At the bound (256 bytes with its quotes): served, the id echoed.
    let at = "i".repeat(toolcall_mcp::MAX_REQUEST_ID_BYTES - 2);
    raw.send(&deposit_with_id(&format!(r#""{at}""#))).await;
    let answer = raw.answer().await;
    assert_eq!(answer["id"], json!(at), "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["ok"], true,
        "{answer}"
    );
    assert_eq!(account.deposits(), 1);
    raw.still_serves(1).await;

    raw.hang_up().await;
}

#[tokio::test]
async fn an_integer_id_is_echoed_exactly_or_refused() {
    let (account, mut raw, _audit) = open().await;

    // Ids that do not fit a 64-bit integer, or are not written as one:
    // refused with `id: null`, never answered under another number.
    for id in [
        "123456789012345678901234567890",
        "9223372036854775808",
        "-9223372036854775809",
        "1.5",
        "1.0",
        "1e2",
        "-0",
    ] {
        raw.send(&deposit_with_id(id)).await;
        let answer = refused_with_null_id(&mut raw, "64-bit").await;
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("strings"),
            "{id}: {answer}"
        );
        // Nor in an answer the guard writes itself.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_":{}}}}}"#,
            nested(200)
        );
        raw.send(deep.as_bytes()).await;
        assert_eq!(raw.error().await, (Value::Null, PARSE_ERROR), "{id}");
        raw.send(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","x":"#).as_bytes())
            .await;
        assert_eq!(raw.error().await, (Value::Null, PARSE_ERROR), "{id}");
    }
    assert_eq!(account.deposits(), 0);

    // Integers within 64 bits come back as written, above 2^53 included.
    for id in [
        "9007199254740993",
        "9223372036854775807",
        "-9223372036854775808",
        "0",
        "-1",
    ] {
        raw.send(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#).as_bytes())
            .await;
        let line = String::from_utf8(raw.line().await).unwrap();
        assert!(line.contains(&format!(r#""id":{id},"#)), "{id}: {line}");
        assert!(line.contains(r#""result":"#), "{id}: {line}");
        // And in an answer the guard writes itself.
        raw.send(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","x":"#).as_bytes())
            .await;
        let line = String::from_utf8(raw.line().await).unwrap();
        assert!(
            line.contains(&format!(r#""id":{id}}}"#)) || line.contains(&format!(r#""id":{id},"#)),
            "{id}: {line}"
        );
        assert!(line.contains(&PARSE_ERROR.to_string()), "{id}: {line}");
    }
    raw.send(&deposit_with_id("9007199254740993")).await;
    let line = String::from_utf8(raw.line().await).unwrap();
    assert!(line.contains(r#""id":9007199254740993,"#), "{line}");
    assert_eq!(account.deposits(), 1);
    raw.still_serves(2).await;

    raw.hang_up().await;
}

#[tokio::test]
async fn a_call_without_a_usable_name_is_invalid_params() {
    let (account, mut raw, audit) = open().await;

    let arguments = r#""arguments":{"amount_cents":5}"#;
    let cases = [
        (r#""#.to_owned(), "needs `params`"),
        (r#","params":null"#.to_owned(), "needs `params`"),
        (
            r#","params":"deposit""#.to_owned(),
            "must be an object, not a string",
        ),
        (
            r#","params":["deposit"]"#.to_owned(),
            "must be an object, not an array",
        ),
        (
            format!(r#","params":{{{arguments}}}"#),
            "needs `params.name`",
        ),
        (
            format!(r#","params":{{"name":null,{arguments}}}"#),
            "needs `params.name`",
        ),
        (
            format!(r#","params":{{"name":5,{arguments}}}"#),
            "must be a string, not a number",
        ),
        (
            format!(r#","params":{{"name":{{"deposit":1}},{arguments}}}"#),
            "must be a string, not an object",
        ),
        (
            format!(r#","params":{{"name":"deposit",{arguments},"_meta":5}}"#),
            "`params._meta` must be an object, not a number",
        ),
    ];
    for (id, (params, says)) in (1..).zip(cases) {
        let frame = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"{params}}}"#);
        raw.send(frame.as_bytes()).await;
        let answer = raw.answer().await;
        assert_eq!(answer["id"], id, "{frame}: {answer}");
        assert_eq!(answer["error"]["code"], -32602, "{frame}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("Invalid params"), "{frame}: {answer}");
        assert!(message.contains(says), "{frame}: {answer}");
    }
    // A string id is kept too.
    raw.refuses(
        json!("s-1"),
        -32602,
        br#"{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":7}}"#,
    )
    .await;
    assert_eq!(account.deposits(), 0);
    assert!(audit.records().is_empty(), "{:?}", audit.records());
    raw.still_serves(50).await;

    raw.hang_up().await;
}
