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

#[path = "../support/refunds.rs"]
mod refunds;
#[path = "../support/fresh_database.rs"]
mod support;

mod oauth;

use std::io::Read;

use std::net::{SocketAddr, TcpStream};

use std::path::{Path, PathBuf};

use std::process::{Child, Command, Stdio};

use std::sync::mpsc;

use std::time::Duration;

use serde_json::{Value, json};

use toolcall::store::{DecisionWrite, Store};

use toolcall::store::{DecideOutcome, now_ms};

use toolcall_testkit::mcp_http::Answer;

use toolcall_testkit::mcp_http::blocking::{post, send as send_http};

use toolcall_testkit::run::{self, one_thread as runtime};

use refunds::{postgres_refunds, sqlite_refunds};

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
        let received = toolcall_testkit::run::lines(child.stderr.take().unwrap());
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

async fn decide<St: Store>(store: &St, id: &str) {
    assert_eq!(
        store
            .decide_approval(&DecisionWrite {
                id,
                decision: &yes("checked the photos"),
                now_ms: now_ms()
            })
            .await
            .unwrap(),
        DecideOutcome::Decided
    );
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

mod replicas;
mod serving;
