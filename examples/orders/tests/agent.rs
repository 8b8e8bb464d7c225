//! `orders agent`: the whole loop against a scripted OpenAI-compatible (and
//! Anthropic-compatible) model on the loopback, and what the project sent
//! back to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use toolcall::store::DecisionWrite;
use toolcall::store::prelude::*;
use toolcall_cli::agent::script::{Script, ScriptServer};
use toolcall_testkit::run::{block_on, fresh_dir};

/// A script served on its own thread (a runtime of its own), for the
/// length of the test.
fn serve(script: Value) -> ScriptServer {
    let script = Script::from_json(&script.to_string()).expect("a script");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        block_on(async move {
            let server = script.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
            sender.send(server).unwrap();
            std::future::pending::<()>().await;
        });
    });
    receiver.recv().unwrap()
}

fn orders(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_orders"));
    command
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("LLM_MODEL")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the orders binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh SQLite file for the store and the shop, and the `--store`
/// argument that names it.
fn fresh_store(name: &str) -> (PathBuf, String) {
    let path = fresh_dir(&format!("orders-agent-{name}")).join("shop.db");
    let arg = format!("sqlite:{}", path.display());
    (path, arg)
}

/// The refunds the shop in `path` applied.
fn refunds_applied(path: &PathBuf) -> u64 {
    let shop = orders::Shop::open_sqlite(path).unwrap();
    block_on(shop.refund_count()).unwrap()
}

const REFUND_IN_REAIS: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 25.90, "currency": "BRL", "reason": "damaged"}"#;
const REFUND_IN_CENTS: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#;

/// The conversation (the script a user plays with `orders agent
/// --serve-script`): a lookup and a refund in reais in one message, the
/// corrected refund (a person approves it), its retry, the answer.
fn conversation() -> Value {
    serde_json::from_str(include_str!("support/refund_agent_script.json")).unwrap()
}

/// The tool messages at the end of a request, after its last assistant
/// message: `(tool_call_id, the result)`.
fn tool_answers(request: &Value) -> Vec<(String, Value)> {
    let messages = request["body"]["messages"].as_array().unwrap();
    let last_assistant = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .unwrap();
    messages[last_assistant + 1..]
        .iter()
        .map(|m| {
            assert_eq!(m["role"], "tool", "{m}");
            let result: Value = serde_json::from_str(m["content"].as_str().unwrap()).unwrap();
            (m["tool_call_id"].as_str().unwrap().to_owned(), result)
        })
        .collect()
}

#[test]
fn the_loop_answers_every_call_in_order_and_refunds_once() {
    let server = serve(conversation());
    let (store, store_arg) = fresh_store("openai");
    let output = orders(
        &[
            "agent",
            "--base-url",
            &server.openai_base_url(),
            "--yes",
            "--store",
            &store_arg,
            "--retry-backoff-ms",
            "0",
            "Refund the damaged item of ORD-1001.",
        ],
        &[
            ("LLM_MODEL", "model-from-env"),
            ("OPENAI_API_KEY", "sk-test-key"),
        ],
    );
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        text(&output.stderr)
    );
    assert!(
        stdout.contains("I refunded R$ 25.90 on ORD-1001."),
        "{stdout}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 4, "one request per turn: {requests:#?}");
    for request in &requests {
        assert_eq!(request["path"], "/v1/chat/completions");
        assert_eq!(request["body"]["model"], "model-from-env");
        assert_eq!(request["headers"]["authorization"], "Bearer sk-test-key");
    }

    // Strict function definitions, for the tools the caller may use.
    let tools = requests[0]["body"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_order", "refund_order"]);
    for tool in tools {
        assert_eq!(tool["type"], "function");
        assert_eq!(tool["function"]["strict"], true, "{tool}");
        let parameters = &tool["function"]["parameters"];
        assert_eq!(parameters["additionalProperties"], false, "{tool}");
        let properties: Vec<&String> = parameters["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        let required: Vec<&str> = parameters["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert_eq!(
            properties.len(),
            required.len(),
            "every property required: {tool}"
        );
    }
    assert_eq!(requests[0]["body"]["messages"][0]["role"], "user");

    // Two calls in one message: one tool message per call id, in the
    // model's order, right after the assistant message that made them.
    let first = tool_answers(&requests[1]);
    let ids: Vec<&str> = first.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["call_lookup", "call_refund_1"]);
    let assistant = &requests[1]["body"]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["tool_calls"][1]["function"]["arguments"], REFUND_IN_REAIS,
        "the model's text is sent back as it wrote it"
    );
    assert_eq!(first[0].1["ok"], true);
    assert_eq!(first[0].1["data"]["order_id"], "ORD-1001");
    // The refusal names the field and the unit.
    let refusal = &first[1].1;
    assert_eq!(refusal["ok"], false);
    assert_eq!(refusal["code"], "INVALID_ARGUMENTS");
    let message = refusal["message"].as_str().unwrap();
    assert!(message.starts_with("amount_cents:"), "{refusal}");
    assert!(message.contains("minor units (cents)"), "{refusal}");
    assert!(
        refusal.to_string().contains("2590"),
        "the fix is suggested: {refusal}"
    );

    // The corrected refund, approved with --yes, ran.
    let second = tool_answers(&requests[2]);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].0, "call_refund_2");
    assert_eq!(second[0].1["ok"], true, "{:?}", second[0].1);
    assert_ne!(second[0].1["replayed"], true);

    // Its retry is the same refund, replayed.
    let third = tool_answers(&requests[3]);
    assert_eq!(third[0].0, "call_refund_3");
    assert_eq!(third[0].1["ok"], true);
    assert_eq!(third[0].1["replayed"], true, "{:?}", third[0].1);
    assert_eq!(third[0].1["data"], second[0].1["data"]);

    // The backend applied the refund exactly once.
    assert_eq!(refunds_applied(&store), 1);
}

#[test]
fn the_anthropic_loop_answers_every_call_in_one_user_message() {
    let server = serve(conversation());
    let (store, store_arg) = fresh_store("anthropic");
    let output = orders(
        &[
            "agent",
            "--provider",
            "anthropic",
            "--base-url",
            &server.anthropic_base_url(),
            "--model",
            "claude-scripted",
            "--yes",
            "--store",
            &store_arg,
            "Refund the damaged item of ORD-1001.",
        ],
        &[("ANTHROPIC_API_KEY", "sk-ant-test")],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0]["path"], "/v1/messages");
    assert_eq!(requests[0]["headers"]["x-api-key"], "sk-ant-test");
    assert_eq!(requests[0]["headers"]["anthropic-version"], "2023-06-01");
    let tools = requests[0]["body"]["tools"].as_array().unwrap();
    assert_eq!(tools[1]["name"], "refund_order");
    assert!(tools[1]["input_schema"]["properties"]["amount_cents"].is_object());

    let messages = requests[1]["body"]["messages"].as_array().unwrap();
    let results = messages.last().unwrap();
    assert_eq!(results["role"], "user");
    let blocks = results["content"].as_array().unwrap();
    let ids: Vec<&str> = blocks
        .iter()
        .map(|b| b["tool_use_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_lookup", "call_refund_1"]);
    assert_eq!(blocks[0]["is_error"], false);
    assert_eq!(blocks[1]["is_error"], true);
    assert!(
        blocks[1]["content"]
            .as_str()
            .unwrap()
            .contains("INVALID_ARGUMENTS")
    );
    let retry = requests[3]["body"]["messages"].as_array().unwrap();
    let retried: Value = serde_json::from_str(
        retry.last().unwrap()["content"][0]["content"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(retried["replayed"], true);
    assert_eq!(refunds_applied(&store), 1);
}

#[test]
fn without_a_person_the_model_reads_that_the_refund_waits() {
    let server = serve(json!([
        {"tool_calls": [{"id": "call_refund", "name": "refund_order", "arguments": REFUND_IN_CENTS}]},
        {"content": "A person has to approve the refund."}
    ]));
    let (store, store_arg) = fresh_store("no-person");
    let output = orders(
        &[
            "agent",
            "--base-url",
            &server.openai_base_url(),
            "--model",
            "m",
            "--store",
            &store_arg,
            "Refund ORD-1001.",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let answers = tool_answers(&server.requests()[1]);
    assert_eq!(answers[0].1["code"], "CONFIRMATION_REQUIRED");
    assert_eq!(refunds_applied(&store), 0);
}

/// The exit code and standard error of `orders agent` against `base_url`.
fn failing(base_url: &str, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["agent", "--base-url", base_url, "--model", "m"];
    args.extend_from_slice(extra);
    args.push("Hello");
    let output = orders(&args, &[]);
    (output.status.code().unwrap(), text(&output.stderr))
}

#[test]
fn a_server_that_is_down_is_exit_code_3() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let (code, stderr) = failing(&url, &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains(&url), "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
    let (code, stderr) = failing(
        &format!("http://127.0.0.1:{port}"),
        &["--provider", "anthropic"],
    );
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

#[test]
fn an_answer_that_is_not_json_is_exit_code_3() {
    let server = serve(json!([{"raw": "{\"choices\": [oops"}]));
    let (code, stderr) = failing(&server.openai_base_url(), &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("not JSON"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let server = serve(json!([{"raw": "{\"content\": [oops"}]));
    let (code, stderr) = failing(&server.anthropic_base_url(), &["--provider", "anthropic"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("not JSON"), "{stderr}");

    let server = serve(json!([{"raw": "{\"id\": \"x\", \"choices\": []}"}]));
    let (code, stderr) = failing(&server.openai_base_url(), &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("choices[0].message"), "{stderr}");

    // A call without an id cannot be answered: nothing runs.
    let completion = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "get_order", "arguments": "{}"}}]}}]});
    let server = serve(json!([{"raw": completion.to_string()}]));
    let (code, stderr) = failing(&server.openai_base_url(), &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("id` is missing"), "{stderr}");
}

#[test]
fn an_http_error_is_exit_code_3_with_the_servers_words() {
    // async-openai retries a 5xx a few times (with backoff) before it fails.
    let server = serve(json!({
        "turns": [{"status": 503, "body": "the model is loading"}],
        "after": "repeat"
    }));
    let (code, stderr) = failing(&server.openai_base_url(), &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("503"), "{stderr}");
    assert!(stderr.contains("the model is loading"), "{stderr}");

    let server = serve(json!([{"status": 401, "body": "invalid x-api-key"}]));
    let (code, stderr) = failing(&server.anthropic_base_url(), &["--provider", "anthropic"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("401") && stderr.contains("invalid x-api-key"),
        "{stderr}"
    );
}

#[test]
fn a_model_that_never_stops_is_exit_code_4_after_the_budget() {
    let server = serve(json!({
        "turns": [{"tool_calls": [{"name": "get_order", "arguments": {"order_id": "ORD-1001"}}]}],
        "after": "repeat"
    }));
    let (code, stderr) = failing(&server.openai_base_url(), &["--max-turns", "3"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("no answer in 3 request(s)"), "{stderr}");
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn a_model_is_needed() {
    let output = orders(&["agent", "--base-url", "http://127.0.0.1:9/v1", "Hi"], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("LLM_MODEL"));
    let output = orders(
        &[
            "agent",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--listen",
            "127.0.0.1:0",
            "Hi",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("--listen goes with --serve-script"));
}

/// `GET /requests` of the server at `addr`, as JSON.
fn recorded(addr: SocketAddr) -> Value {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /requests HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let body = response.split_once("\r\n\r\n").unwrap().1;
    serde_json::from_str(body).unwrap()
}

/// A user tries the loop without a key: `orders agent --serve-script FILE`
/// in one process, `orders agent --base-url` in another. The scripted
/// model runs no tool: it opens no store (a Postgres nobody listens on is
/// never reached) and says where it listens on standard error, a notice,
/// leaving standard output to results.
#[test]
fn the_scripted_model_runs_as_a_command() {
    let dir = fresh_dir("orders-agent-serve-script");
    // The script users play.
    let file = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/refund_agent_script.json"
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_orders"))
        .args([
            "agent",
            "--serve-script",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--store",
            "postgres://postgres@127.0.0.1:1/none",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr: SocketAddr = first.rsplit(" at ").next().unwrap().parse().unwrap();
    let output = orders(
        &[
            "agent",
            "--base-url",
            &format!("http://{addr}/v1"),
            "--model",
            "m",
            "--yes",
            "--json",
            "Refund the damaged item of ORD-1001.",
        ],
        &[],
    );
    let requests = recorded(addr);
    child.kill().unwrap();
    let served = child.wait_with_output().unwrap();
    assert_eq!(text(&served.stdout), "", "no result, no notice on stdout");
    assert!(output.status.success(), "{}", text(&output.stderr));
    let record: Value = serde_json::from_str(text(&output.stdout).trim()).unwrap();
    assert_eq!(record["answer"], "I refunded R$ 25.90 on ORD-1001.");
    assert_eq!(requests.as_array().unwrap().len(), 4);
    assert_eq!(tool_answers(&requests[3])[0].1["replayed"], true);

    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"turns": [{"contnet": "hi"}]}"#).unwrap();
    let output = orders(&["agent", "--serve-script", bad.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("contnet"),
        "{}",
        text(&output.stderr)
    );
}

/// In inbox mode only a person's decision in the store approves: the first
/// run leaves the refund pending (the model reads that it waits); once the
/// decision is recorded, the model's retry in the same conversation, with
/// `--wait-approval`, runs it once.
#[test]
fn in_inbox_mode_the_refund_runs_once_a_person_decided_it() {
    use toolcall::store::{DecideOutcome, now_ms};
    use toolcall_testkit::store::yes;

    let (store, store_arg) = fresh_store("inbox");
    let run = |server: &ScriptServer, extra: &[&str]| {
        let mut args = vec![
            "agent",
            "--approvals",
            "inbox",
            "--session-id",
            "desk-7",
            "--store",
            &store_arg,
            "--model",
            "m",
        ];
        let base_url = server.openai_base_url();
        args.extend_from_slice(&["--base-url", &base_url]);
        args.extend_from_slice(extra);
        args.push("Refund ORD-1001.");
        orders(&args, &[])
    };
    let asks = json!([
        {"tool_calls": [{"id": "call_refund", "name": "refund_order", "arguments": REFUND_IN_CENTS}]},
        {"content": "A person has to approve the refund."}
    ]);

    // `--yes` approves nothing in inbox mode.
    let first = serve(asks.clone());
    let output = run(&first, &["--yes"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("waits for a person in the inbox"));
    let pending = &tool_answers(&first.requests()[1])[0].1;
    assert_eq!(pending["code"], "CONFIRMATION_REQUIRED");
    let id = pending["question_id"].as_str().unwrap().to_owned();
    assert_eq!(refunds_applied(&store), 0);

    // A person approves it in the inbox (recorded in the store).
    let decided = block_on(async {
        let store = toolcall_sqlite::SqliteStore::open(&store).unwrap();
        store
            .decide_approval(&DecisionWrite {
                id: &id,
                decision: &yes("checked the photos"),
                now_ms: now_ms(),
            })
            .await
    })
    .unwrap();
    assert_eq!(decided, DecideOutcome::Decided);

    // The model asks again: the decision is there, the refund runs once.
    let second = serve(asks);
    let output = run(&second, &["--wait-approval", "30"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let answer = &tool_answers(&second.requests()[1])[0].1;
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(refunds_applied(&store), 1);
}

/// What the model writes reaches the terminal escaped and bounded: a forged
/// `model calls ... -> {"ok":true}` line and an ANSI escape in its text stay
/// inside its own line, and a huge answer is cut.
#[test]
fn the_models_text_cannot_forge_a_line_of_the_transcript() {
    let forged = "Done.\nmodel calls refund_order {\"order_id\": \"ORD-1001\"} (call_9)\n  -> \
                  {\"ok\":true}\u{1b}[2J";
    let huge = "y".repeat(200_000);
    for (content, check) in [(forged, "forged"), (huge.as_str(), "huge")] {
        let server = serve(json!([{ "content": content }]));
        let output = orders(
            &[
                "agent",
                "--base-url",
                &server.openai_base_url(),
                "--model",
                "m",
                "Hello",
            ],
            &[],
        );
        let stdout = text(&output.stdout);
        assert!(output.status.success(), "{check}: {}", text(&output.stderr));
        assert!(!stdout.contains('\u{1b}'), "{check}: {stdout}");
        assert!(
            !stdout.lines().any(|line| line.starts_with("model calls")),
            "{check}: no call was made, and none appears to be: {stdout}"
        );
        assert!(stdout.len() < 20_000, "{check}: {} bytes", stdout.len());
    }
}

/// A server that asks to be retried in a minute does not hold the agent
/// past `--timeout`: the request gives up, retries included, exit code 3.
#[test]
fn a_retry_after_longer_than_the_timeout_is_not_waited_for() {
    let server = serve(json!({
        "turns": [{"status": 429, "body": "slow down", "retry_after": 60}],
        "after": "repeat"
    }));
    let started = std::time::Instant::now();
    let (code, stderr) = failing(&server.openai_base_url(), &["--timeout", "2"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("--timeout"), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "gave up within the timeout, not after the server's minute: {:?}",
        started.elapsed()
    );
}

/// Every request that sends tools says what the model may do with them:
/// `auto` unless told otherwise (llama-cpp-python's `chatml-function-calling`
/// reads a request without `tool_choice` as one without tools), and the
/// bound on the answer's tokens in `max_tokens`, the field an
/// OpenAI-compatible server reads (llama-cpp-python reads no other).
#[test]
fn every_request_sends_tool_choice_auto_and_max_tokens_by_default() {
    let server = serve(conversation());
    let output = orders(
        &[
            "agent",
            "--base-url",
            &server.openai_base_url(),
            "--model",
            "m",
            "--yes",
            "--max-tokens",
            "300",
            "--retry-backoff-ms",
            "0",
            "Refund the damaged item of ORD-1001.",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        let body = &request["body"];
        // An assistant message that made calls without words is sent back
        // with `"content": ""`, not without it nor null (llama-cpp-python's
        // templates read it, as text).
        for message in body["messages"].as_array().unwrap() {
            if message["role"] == "assistant" {
                assert!(message["content"].is_string(), "{message}");
            }
        }
        assert_eq!(body["tool_choice"], "auto", "{body}");
        assert_eq!(body["max_tokens"], 300, "{body}");
        assert!(body.get("max_completion_tokens").is_none(), "{body}");
    }

    let server = serve(conversation());
    let output = orders(
        &[
            "agent",
            "--provider",
            "anthropic",
            "--base-url",
            &server.anthropic_base_url(),
            "--model",
            "m",
            "--yes",
            "--retry-backoff-ms",
            "0",
            "Refund the damaged item of ORD-1001.",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    for request in server.requests() {
        assert_eq!(request["body"]["tool_choice"], json!({"type": "auto"}));
    }
}

/// `--tool-choice required` or a tool's name holds until the model has
/// called a tool, then `auto` (so that the loop can end with an answer);
/// `none` holds on every request. Each in its API's words.
#[test]
fn a_forced_tool_choice_holds_until_the_model_called_a_tool() {
    let script = json!([
        {"tool_calls": [{"name": "get_order", "arguments": {"order_id": "ORD-1001"}}]},
        {"content": "ORD-1001 is 120.00 BRL."}
    ]);
    let cases: [(&str, &[&str], Value, Value); 3] = [
        (
            "openai",
            &["--tool-choice", "get_order"],
            json!({"type": "function", "function": {"name": "get_order"}}),
            json!("auto"),
        ),
        (
            "openai",
            &["--tool-choice", "required"],
            json!("required"),
            json!("auto"),
        ),
        (
            "anthropic",
            &["--tool-choice", "required"],
            json!({"type": "any"}),
            json!({"type": "auto"}),
        ),
    ];
    for (provider, flags, forced, after) in cases {
        let server = serve(script.clone());
        let base_url = if provider == "openai" {
            server.openai_base_url()
        } else {
            server.anthropic_base_url()
        };
        let mut args = vec!["agent", "--provider", provider, "--base-url", &base_url];
        args.extend_from_slice(&["--model", "m"]);
        args.extend_from_slice(flags);
        args.push("What is ORD-1001?");
        let output = orders(&args, &[]);
        let stdout = text(&output.stdout);
        assert!(
            output.status.success(),
            "{flags:?}: {}",
            text(&output.stderr)
        );
        assert!(stdout.contains("ORD-1001 is 120.00 BRL."), "{stdout}");
        let choices: Vec<Value> = server
            .requests()
            .iter()
            .map(|r| r["body"]["tool_choice"].clone())
            .collect();
        assert_eq!(choices, [forced, after], "{provider} {flags:?}");
    }

    let server = serve(json!([{"content": "No tools today."}]));
    let (code, stderr) = failing(&server.openai_base_url(), &["--tool-choice", "none"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(server.requests()[0]["body"]["tool_choice"], "none");
}

/// A tool the caller may not use cannot be required: exit code 2, naming
/// the tools it may use, and no request is made.
#[test]
fn a_tool_choice_the_caller_may_not_use_is_exit_code_2() {
    let server = serve(json!([{"content": "unused"}]));
    let (code, stderr) = failing(&server.openai_base_url(), &["--tool-choice", "add_note"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--tool-choice add_note") && stderr.contains("get_order, refund_order"),
        "{stderr}"
    );
    assert!(server.requests().is_empty());
    let (code, stderr) = failing(&server.openai_base_url(), &["--tool-choice", ""]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("auto, required, none"), "{stderr}");
}

/// While the model thinks, standard error says which turn waits and for how
/// long, and when it was answered; `--progress-every 0` says nothing.
#[test]
fn while_a_turn_waits_standard_error_says_so() {
    let script = json!([{"content": "Slow but sure.", "delay_ms": 3000}]);
    let server = serve(script.clone());
    let (code, stderr) = failing(&server.openai_base_url(), &["--progress-every", "1"]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("agent: turn 1/10: "))
        .collect();
    assert!(lines[0].contains("asking the model at http://"), "{stderr}");
    assert!(
        lines[1].starts_with("agent: turn 1/10: waiting for the model, "),
        "{stderr}"
    );
    assert!(lines.last().unwrap().contains(": done in "), "{stderr}");

    let server = serve(json!([{"content": "Quiet."}]));
    let (code, stderr) = failing(&server.openai_base_url(), &["--progress-every", "0"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("agent: turn"), "{stderr}");
}

/// What the server or the model wrote reaches standard error escaped: an
/// error body, or a call id, with terminal escapes in it.
#[test]
fn the_servers_words_in_an_error_are_escaped() {
    let hostile = "\u{1b}[2J\u{1b}]0;owned\u{7}\nagent: turn 9/9: done";
    let server = serve(json!([{"status": 400, "body": hostile}]));
    let (code, stderr) = failing(&server.openai_base_url(), &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(!stderr.contains("\nagent: turn 9/9"), "{stderr:?}");
    assert!(stderr.contains("\\u{1b}[2J"), "{stderr:?}");

    let completion = json!({"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": hostile, "type": "function", "function": {"name": "get_order", "arguments": "{}"}},
        {"id": hostile, "type": "function", "function": {"name": "get_order", "arguments": "{}"}}
    ]}}]});
    let server = serve(json!([{"raw": completion.to_string()}]));
    let (code, stderr) = failing(&server.openai_base_url(), &[]);
    assert_eq!(code, 3, "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}
