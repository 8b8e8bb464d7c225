//! `orders mcp --http`: the MCP server over streamable HTTP, driven with
//! raw HTTP requests as a client would send them (initialize, the session
//! id rmcp gives, then `tools/list` and `tools/call`, answers framed as
//! server-sent events). What is counted is read from the shop's own tables
//! (`orders_refunds`), never from the answers alone. A refund asked as a
//! durable task survives the kill of the process that asked it.
//!
//! The Postgres test needs `TOOLCALL_POSTGRES_URL` (CI sets it); without
//! it, it says loudly that it was skipped. It works in a database of its
//! own and drops it.

#[path = "support/fresh_database.rs"]
mod support;

#[path = "mcp_http/oauth.rs"]
mod oauth;

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use toolcall::store::Store;
use toolcall::store::{DecideOutcome, now_ms};
use toolcall_testkit::mcp_http::Answer;
use toolcall_testkit::mcp_http::blocking::{post, send as send_http};
use toolcall_testkit::run::{self, one_thread as runtime};
use toolcall_testkit::store::yes;

const TOKEN: &str = "token-of-the-support-desk-0123456789";

/// A scratch directory of this test process, emptied first.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mcp-http-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A token file in `dir` giving [`TOKEN`] to the default caller.
fn token_file(dir: &Path) -> PathBuf {
    let path = dir.join("tokens");
    std::fs::write(&path, format!("# the support desk\ndefault {TOKEN}\n")).unwrap();
    path
}

// ------------------------------------------------------------------ server

/// An `orders mcp --http 127.0.0.1:0` process, killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
    /// What it printed on standard error before serving.
    start: Vec<String>,
    /// What it prints on standard error after that, line by line.
    log: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `orders mcp --http 127.0.0.1:0` with `args`, and waits (at
    /// most 60 s) for the line naming the address it serves.
    fn start(args: &[&str]) -> Server {
        Server::start_with(args, &[])
    }

    /// [`Server::start`], with `env` set in the process's environment.
    fn start_with(args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_orders"))
            .args(["mcp", "--http", "127.0.0.1:0", "--retry-backoff-ms", "0"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the orders binary runs");
        let stderr = child.stderr.take().unwrap();
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut start = Vec::new();
        loop {
            match received.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    let served = line
                        .split_once("http://")
                        .map(|(_, rest)| rest.split(['/', ' ']).next().unwrap_or_default());
                    start.push(line.clone());
                    if let Some(addr) = served {
                        let addr = addr.parse().unwrap_or_else(|_| panic!("{line}"));
                        return Server {
                            child,
                            addr,
                            start,
                            log: received,
                        };
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("the server never said where it serves: {start:?}");
                }
            }
        }
    }

    /// Whether the process prints a line holding `text` within `wait`.
    fn prints(&self, text: &str, wait: Duration) -> bool {
        let until = std::time::Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(text) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }

    /// Kills the process (SIGKILL) and waits for it.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------------ raw HTTP

const PROTOCOL: &str = "2025-11-25";

/// An MCP client session on one server, over raw HTTP.
struct Client {
    addr: SocketAddr,
    auth: String,
    session: String,
    next_id: u64,
}

impl Client {
    /// `initialize` with [`TOKEN`], then `notifications/initialized`.
    fn open(addr: SocketAddr) -> Client {
        Client::open_with(addr, json!({}))
    }

    /// [`Client::open`], declaring `capabilities`.
    fn open_with(addr: SocketAddr, capabilities: Value) -> Client {
        Client::open_as(addr, &format!("Bearer {TOKEN}"), capabilities)
    }

    /// [`Client::open_with`], with `auth` as its `Authorization` header.
    fn open_as(addr: SocketAddr, auth: &str, capabilities: Value) -> Client {
        let auth = auth.to_owned();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": capabilities,
            "clientInfo": {"name": "raw-http", "version": "1"}}});
        let opened = post(addr, &[("Authorization", &auth)], &init.to_string());
        assert_eq!(opened.status, 200, "{opened:?}");
        assert_eq!(
            opened.message()["result"]["serverInfo"]["name"],
            "orders",
            "{opened:?}"
        );
        let session = opened
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        let client = Client {
            addr,
            auth,
            session,
            next_id: 2,
        };
        let initialized = client.send(&json!({"jsonrpc": "2.0",
            "method": "notifications/initialized"}));
        assert_eq!(initialized.status, 202, "{initialized:?}");
        client
    }

    fn send(&self, message: &Value) -> Answer {
        post(
            self.addr,
            &[
                ("Authorization", &self.auth),
                ("Mcp-Session-Id", &self.session),
                ("MCP-Protocol-Version", PROTOCOL),
            ],
            &message.to_string(),
        )
    }

    /// A request's `result`.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let answer = self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method,
            "params": params}));
        assert_eq!(answer.status, 200, "{answer:?}");
        let message = answer.message();
        assert_eq!(message["id"], id, "{message}");
        message
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("no result: {message}"))
    }

    /// A tool call's result as the pipeline gave it (`structuredContent`),
    /// checked against `isError`.
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let structured = result["structuredContent"].clone();
        assert_eq!(
            result["isError"],
            json!(structured["ok"] != json!(true)),
            "{result}"
        );
        structured
    }
}

fn refund(amount_cents: i64) -> Value {
    json!({"order_id": "ORD-1001", "amount_cents": amount_cents, "currency": "BRL",
           "reason": "damaged"})
}

/// `(rows, refunded cents)` of ORD-1001 in a SQLite file's refunds table.
fn sqlite_refunds(path: &Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM orders_refunds
          WHERE order_id = 'ORD-1001'",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

async fn decide<St: Store>(store: &St, id: &str) {
    assert_eq!(
        store
            .decide_approval(id, &yes("checked the photos"), now_ms())
            .await
            .unwrap(),
        DecideOutcome::Decided
    );
}

// ------------------------------------------------------------------ tests

/// No token, or a wrong one: 401 before anything is read, and the shop
/// refunded nothing.
#[test]
fn without_its_token_a_request_is_401_and_refunds_nothing() {
    let dir = scratch("no-token");
    let tokens = token_file(&dir);
    let db = dir.join("shop.db");
    let store = format!("sqlite:{}", db.display());
    let server = Server::start(&[
        "--store",
        &store,
        "--token-file",
        tokens.to_str().unwrap(),
        "--max-refund-cents",
        "500000",
    ]);
    assert!(
        server.start.last().unwrap().contains("tokens for: default"),
        "{:?}",
        server.start
    );
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "refund_order", "arguments": refund(2590),
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let wrong = "Bearer token-of-nobody-0000000000000";
    for headers in [vec![], vec![("Authorization", wrong)]] {
        let answer = post(server.addr, &headers, &call.to_string());
        assert_eq!(answer.status, 401, "{headers:?}: {answer:?}");
        assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
    }
    assert_eq!(sqlite_refunds(&db), (0, 0), "the shop refunded nothing");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tools/list` lists the tools `--allow` lets the caller use; a refund
/// with a float amount is a tool error naming the field, and nothing is
/// refunded.
#[test]
fn tools_list_lists_the_examples_tools_and_a_float_amount_is_a_tool_error() {
    let dir = scratch("list");
    let tokens = token_file(&dir);
    let db = dir.join("shop.db");
    let store = format!("sqlite:{}", db.display());
    let server = Server::start(&[
        "--store",
        &store,
        "--token-file",
        tokens.to_str().unwrap(),
        "--allow",
        "get_order,refund_order,read_messages",
    ]);
    let mut client = Client::open(server.addr);
    let listed = client.request("tools/list", json!({}));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_order", "refund_order", "read_messages"]);

    let float = client.call(
        "refund_order",
        json!({"order_id": "ORD-1001", "amount_cents": 25.90, "currency": "BRL",
               "reason": "damaged"}),
    );
    assert_eq!(float["ok"], false, "{float}");
    assert_eq!(float["code"], "INVALID_ARGUMENTS", "{float}");
    assert!(
        float["message"].as_str().unwrap().contains("amount_cents"),
        "{float}"
    );
    assert_eq!(sqlite_refunds(&db), (0, 0));

    let order = client.call("get_order", json!({"order_id": "ORD-1001"}));
    assert_eq!(order["ok"], true, "{order}");
    assert_eq!(order["data"]["refunded_cents"], 0, "{order}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The arguments of a replica: `store`, the fleet's tokens, the shared
/// conversation `desk-1`, approvals in the inbox.
fn replica_args<'a>(store: &'a str, tokens: &'a Path) -> [&'a str; 8] {
    [
        "--store",
        store,
        "--token-file",
        tokens.to_str().unwrap(),
        "--session-id",
        "desk-1",
        "--approvals",
        "inbox",
    ]
}

/// Two `orders mcp --http` replicas with one `--session-id` over one store:
/// a high-risk refund asked on A waits for a person; once the decision is
/// in the store, the same call on B runs once, and on A is replayed; the
/// shop holds one refund. Then A is killed (SIGKILL) and B serves on: a
/// client of A that reconnects to B gets the refund replayed, not made
/// again.
fn two_replicas(
    store: &str,
    tokens: &Path,
    decide_in_store: &dyn Fn(&str),
    refunds: &dyn Fn() -> (i64, i64),
) {
    let args = replica_args(store, tokens);
    let a = Server::start(&args);
    let b = Server::start(&args);
    assert!(
        a.start
            .iter()
            .any(|line| line.contains("conversation: desk-1")),
        "{:?}",
        a.start
    );
    let mut on_a = Client::open(a.addr);
    let mut on_b = Client::open(b.addr);

    let asked = on_a.call("refund_order", refund(2590));
    assert_eq!(asked["code"], "CONFIRMATION_REQUIRED", "{asked}");
    let id = asked["question_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{asked}"))
        .to_owned();
    assert_eq!(
        refunds(),
        (0, 0),
        "nothing refunded before a person says yes"
    );

    decide_in_store(&id);

    let made = on_b.call("refund_order", refund(2590));
    assert_eq!(made["ok"], true, "{made}");
    assert!(made.get("replayed").is_none(), "{made}");
    assert_eq!(refunds(), (1, 2590));

    let again = on_a.call("refund_order", refund(2590));
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(
        refunds(),
        (1, 2590),
        "one refund, whichever replica is asked"
    );

    // A dies; B serves on, and a client that was on A reconnects to B.
    a.kill();
    let order = on_b.call("get_order", json!({"order_id": "ORD-1001"}));
    assert_eq!(order["ok"], true, "{order}");
    assert_eq!(order["data"]["refunded_cents"], 2590, "{order}");
    let mut moved = Client::open(b.addr);
    let replayed = moved.call("refund_order", refund(2590));
    assert_eq!(replayed["ok"], true, "{replayed}");
    assert_eq!(replayed["replayed"], true, "{replayed}");
    assert_eq!(refunds(), (1, 2590));
    drop(b);
}

#[test]
fn two_replicas_on_one_sqlite_file_refund_once_and_one_survives_the_others_kill() {
    on_sqlite("replicas", two_replicas);
}

/// A client that declares MCP's tasks extension.
fn tasks_client(addr: SocketAddr) -> Client {
    Client::open_with(
        addr,
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    )
}

/// A refund asked on one process as a durable task, that process killed
/// (SIGKILL) before anyone decides, a person's yes recorded in the store,
/// and a process started afterwards over the same store: its `tasks/get`
/// carries the decision out, once, and answers the refund.
fn a_task_outlives_its_process(
    store: &str,
    tokens: &Path,
    decide_in_store: &dyn Fn(&str),
    refunds: &dyn Fn() -> (i64, i64),
) {
    let args = replica_args(store, tokens);
    let a = Server::start(&args);
    let mut on_a = tasks_client(a.addr);
    let task = on_a.request(
        "tools/call",
        json!({"name": "refund_order", "arguments": refund(2590)}),
    );
    assert_eq!(task["resultType"], "task", "{task}");
    assert_eq!(task["status"], "working", "waiting for the inbox: {task}");
    let id = task["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{task}"))
        .to_owned();
    assert_eq!(refunds(), (0, 0));
    a.kill();

    decide_in_store(&id);
    let b = Server::start(&args);
    let mut on_b = tasks_client(b.addr);
    let done = on_b.request("tasks/get", json!({"taskId": id}));
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"]["structuredContent"];
    assert_eq!(result["ok"], true, "{done}");
    assert_eq!(result["data"]["refunded_cents"], 2590, "{done}");
    assert_eq!(refunds(), (1, 2590));

    // Asked again, or the call made again: the same refund, never a second.
    let again = on_b.request("tasks/get", json!({"taskId": id}));
    assert_eq!(again["result"], done["result"], "{again}");
    let retried = Client::open(b.addr).call("refund_order", refund(2590));
    assert_eq!(retried["replayed"], true, "{retried}");
    assert_eq!(refunds(), (1, 2590));
}

/// A scenario of replicas over one store: its URL or `sqlite:PATH`, the
/// token file, how a person's yes is recorded in the store, and how many
/// refunds (and cents) the shop's table holds.
type Scenario = fn(&str, &Path, &dyn Fn(&str), &dyn Fn() -> (i64, i64));

/// Plays `scenario` on a SQLite file of its own.
fn on_sqlite(name: &str, scenario: Scenario) {
    let dir = scratch(name);
    let tokens = token_file(&dir);
    let db = dir.join("shared.db");
    let store = format!("sqlite:{}", db.display());
    let runtime = runtime();
    scenario(
        &store,
        &tokens,
        &|id| {
            let store = toolcall_sqlite::SqliteStore::open(&db).unwrap();
            runtime.block_on(decide(&store, id));
        },
        &|| sqlite_refunds(&db),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_task_outlives_its_killed_process_on_sqlite() {
    on_sqlite("task", a_task_outlives_its_process);
}

// ------------------------------------------------------------- Postgres

fn postgres_url() -> Option<String> {
    run::postgres_url("MCP over HTTP")
}

/// `(rows, refunded cents)` of ORD-1001 in a database's refunds table.
async fn postgres_refunds(url: &str) -> (i64, i64) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connected = tokio::spawn(async move {
        let _ = connection.await;
    });
    let row = client
        .query_one(
            "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0)::BIGINT FROM orders_refunds
              WHERE order_id = 'ORD-1001'",
            &[],
        )
        .await
        .unwrap();
    drop(client);
    let _ = connected.await;
    (row.get(0), row.get(1))
}

/// Plays `scenario` in a Postgres database of its own (skipped, loudly,
/// without `TOOLCALL_POSTGRES_URL`).
fn on_postgres(name: &str, scenario: Scenario) {
    let Some(url) = postgres_url() else { return };
    let database = support::FreshDatabase::create(&url, name);
    let dir = scratch(name);
    let tokens = token_file(&dir);
    let runtime = runtime();
    scenario(
        &database.url,
        &tokens,
        &|id| {
            runtime.block_on(async {
                let store = toolcall_postgres::PostgresStore::connect(&database.url)
                    .await
                    .unwrap();
                decide(&store, id).await;
            });
        },
        &|| runtime.block_on(postgres_refunds(&database.url)),
    );
    drop(database);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_replicas_on_one_postgres_database_refund_once_and_one_survives_the_others_kill() {
    on_postgres("mcp_http", two_replicas);
}

#[test]
fn a_task_outlives_its_killed_process_on_postgres() {
    on_postgres("mcp_task", a_task_outlives_its_process);
}

// ------------------------------------------------------------- refusals

/// `orders` with `args`: it must fail with exit code 2; its standard error.
fn refused(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_orders"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    stderr
}

/// A bind other than loopback without tokens, a token for a caller
/// `orders` does not have, and a short token are refused at start (exit
/// 2), naming what is wrong and never the token.
#[test]
fn what_cannot_be_served_safely_is_refused_at_start() {
    let stderr = refused(&["mcp", "--http", "0.0.0.0:0"]);
    assert!(
        stderr.contains("--http 0.0.0.0:0 is not a loopback address")
            && stderr.contains("--token-file"),
        "{stderr}"
    );

    let dir = scratch("refusals");
    let unknown = dir.join("unknown");
    std::fs::write(&unknown, format!("agent-7 {TOKEN}\n")).unwrap();
    let stderr = refused(&[
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--token-file",
        unknown.to_str().unwrap(),
    ]);
    assert!(
        stderr.contains("the caller `agent-7` is not one this application knows")
            && stderr.contains("`default`"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN), "{stderr}");

    let short = dir.join("short");
    std::fs::write(&short, "default short-token\n").unwrap();
    let stderr = refused(&[
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--token-file",
        short.to_str().unwrap(),
    ]);
    assert!(
        stderr.contains("line 1") && stderr.contains("at least 16 characters"),
        "{stderr}"
    );
    assert!(!stderr.contains("short-token"), "{stderr}");

    let stderr = refused(&["mcp", "--token-file", short.to_str().unwrap()]);
    assert!(stderr.contains("--http"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--max-connections 1`: with one connection held open, the next is
/// answered 503 and closed, and nothing of it reaches the shop; once the
/// first closes, a call is served.
#[test]
fn a_connection_over_max_connections_is_503() {
    let dir = scratch("bounds");
    let db = dir.join("shop.db");
    let store = format!("sqlite:{}", db.display());
    let server = Server::start(&["--store", &store, "--max-connections", "1"]);
    let held = TcpStream::connect(server.addr).unwrap();
    let mut over = TcpStream::connect(server.addr).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut said = String::new();
    let _ = over.read_to_string(&mut said);
    assert!(said.starts_with("HTTP/1.1 503"), "{said:?}");
    drop(held);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let mut answer = None;
    for _ in 0..200 {
        let headers = [
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ];
        let got = post(server.addr, &headers, &list.to_string());
        if got.status != 503 {
            answer = Some(got);
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let answer = answer.expect("served once the held connection closed");
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("refund_order"), "{answer:?}");
    assert_eq!(sqlite_refunds(&db), (0, 0));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stateless request (protocol 2026-07-28, no `Mcp-Session-Id`) that
/// names no conversation is its conversation's only call: a read leaves
/// nothing in the store (no step, no count), while a conversation the
/// request names in `_meta` keeps its steps, and a side effect its record.
#[test]
fn a_stateless_read_leaves_nothing_in_the_store() {
    let dir = scratch("alone");
    let tokens = token_file(&dir);
    let db = dir.join("shop.db");
    let store = format!("sqlite:{}", db.display());
    let server = Server::start(&["--store", &store, "--token-file", tokens.to_str().unwrap()]);
    let bearer = format!("Bearer {TOKEN}");
    let stateless = |id: u32, meta: Value| {
        let mut meta_all = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}});
        for (k, v) in meta.as_object().unwrap() {
            meta_all[k] = v.clone();
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "get_order", "arguments": {"order_id": "ORD-1001"}, "_meta": meta_all}});
        let answer = post(
            server.addr,
            &[
                ("Authorization", &bearer),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "get_order"),
            ],
            &body.to_string(),
        );
        assert_eq!(answer.status, 200, "{answer:?}");
        let message = answer.message();
        assert_eq!(message["result"]["isError"], false, "{message}");
    };
    let rows = |table: &str| -> i64 {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };
    for id in 0..5 {
        stateless(id, json!({}));
    }
    assert_eq!(
        rows("toolcall_steps"),
        0,
        "five stateless reads kept no step"
    );
    assert_eq!(rows("toolcall_calls"), 0, "nor a count");
    for id in 5..7 {
        stateless(id, json!({"toolcall/conversation": "desk"}));
    }
    assert_eq!(
        rows("toolcall_steps"),
        1,
        "a named conversation keeps its steps"
    );
    let steps: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count FROM toolcall_steps", [], |r| r.get(0))
        .unwrap();
    assert_eq!(steps, 2);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A note that stops inside the shop's write (its transaction open, the
/// file's write lock held: `ORDERS_CRASH_AT=note_before_commit` parks the
/// thread there for good) on a server with one runtime thread: another
/// client's read of an order is answered meanwhile. Before the shop's
/// statements ran off the async threads, the note held the one thread, and
/// a read waited for the note's connection too: no answer at all.
#[test]
fn a_shop_write_that_stalls_stalls_neither_a_read_nor_another_client() {
    let dir = scratch("stall");
    let tokens = token_file(&dir);
    let db = dir.join("shop.db");
    let store = format!("sqlite:{}", db.display());
    let server = Server::start_with(
        &[
            "--store",
            &store,
            "--token-file",
            tokens.to_str().unwrap(),
            "--allow",
            "get_order,add_note",
        ],
        &[
            ("ORDERS_CRASH_AT", orders::NOTE_BEFORE_COMMIT),
            ("TOKIO_WORKER_THREADS", "1"),
        ],
    );
    let bearer = format!("Bearer {TOKEN}");
    let stateless = move |id: u32, tool: &'static str, arguments: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        let bearer = bearer.clone();
        let addr = server.addr;
        let (sent, answer) = mpsc::channel();
        std::thread::spawn(move || {
            let answer = post(
                addr,
                &[
                    ("Authorization", &bearer),
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", tool),
                ],
                &body.to_string(),
            );
            let _ = sent.send(answer);
        });
        answer
    };
    let note = stateless(
        1,
        "add_note",
        json!({"order_id": "ORD-1001", "text": "stalls inside the shop"}),
    );
    assert!(
        server.prints("crash point: note_before_commit", Duration::from_secs(30)),
        "the note reaches the shop's write: {:?}",
        note.try_recv()
    );
    let read = stateless(2, "get_order", json!({"order_id": "ORD-1001"}))
        .recv_timeout(Duration::from_secs(10))
        .expect("a read is answered while the shop's write stalls");
    assert_eq!(read.status, 200, "{read:?}");
    let message = read.message();
    assert_eq!(message["result"]["isError"], false, "{message}");
    assert_eq!(
        message["result"]["structuredContent"]["data"]["order_id"], "ORD-1001",
        "{message}"
    );
    drop(server);
    // The note never committed: the shop's table has none.
    let notes: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM orders_notes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(notes, 0);
    let _ = std::fs::remove_dir_all(&dir);
}
