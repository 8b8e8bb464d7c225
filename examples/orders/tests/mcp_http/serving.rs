//! What one server serves: a request without its token, the example's tools
//! listed, what cannot be served safely refused at start, a bound on
//! connections, stateless reads, and a stalled write stalling no one else.

use super::*;

/// A scratch folder holding the default caller's token file and the shop's
/// SQLite file.
struct Desk {
    dir: PathBuf,
    tokens: String,
    db: PathBuf,
    store: String,
}

impl Desk {
    fn new(name: &str) -> Desk {
        let dir = scratch(name);
        let tokens = token_file(&dir).to_str().unwrap().to_owned();
        let db = dir.join("shop.db");
        let store = format!("sqlite:{}", db.display());
        Desk {
            dir,
            tokens,
            db,
            store,
        }
    }

    /// The arguments of a server on this desk's store and tokens, then `more`.
    fn args<'a>(&'a self, more: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["--store", &self.store, "--token-file", &self.tokens];
        args.extend_from_slice(more);
        args
    }

    /// Stops `server`, then removes the folder.
    fn close(self, server: Server) {
        drop(server);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a stateless request (protocol 2026-07-28, no session) carries in
/// `_meta` in place of the `initialize` handshake.
fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}})
}

/// Posts `body`, a stateless `tools/call` of `tool`, with `bearer`.
fn post_call(addr: SocketAddr, bearer: &str, tool: &str, body: &Value) -> Answer {
    post(
        addr,
        &[
            ("Authorization", bearer),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &body.to_string(),
    )
}

// ------------------------------------------------------------------ tests

/// No token, or a wrong one: 401 before anything is read, and the shop
/// refunded nothing.
#[test]
fn without_its_token_a_request_is_401_and_refunds_nothing() {
    let desk = Desk::new("no-token");
    let server = Server::start(&desk.args(&["--max-refund-cents", "500000"]));
    assert!(
        server.start.last().unwrap().contains("tokens for: default"),
        "{:?}",
        server.start
    );
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "refund_order", "arguments": refund(2590), "_meta": stateless_meta()}});
    let wrong = "Bearer token-of-nobody-0000000000000";
    for headers in [vec![], vec![("Authorization", wrong)]] {
        let answer = post(server.addr, &headers, &call.to_string());
        assert_eq!(answer.status, 401, "{headers:?}: {answer:?}");
        assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
    }
    assert_eq!(
        sqlite_refunds(&desk.db),
        (0, 0),
        "the shop refunded nothing"
    );
    desk.close(server);
}

/// `tools/list` lists the tools `--allow` lets the caller use; a refund
/// with a float amount is a tool error naming the field, and nothing is
/// refunded.
#[test]
fn tools_list_lists_the_examples_tools_and_a_float_amount_is_a_tool_error() {
    let desk = Desk::new("list");
    let server = Server::start(&desk.args(&["--allow", "get_order,refund_order,read_messages"]));
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
    assert_eq!(sqlite_refunds(&desk.db), (0, 0));

    let order = client.call("get_order", json!({"order_id": "ORD-1001"}));
    assert_eq!(order["ok"], true, "{order}");
    assert_eq!(order["data"]["refunded_cents"], 0, "{order}");
    desk.close(server);
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
    // Each token file: what the refusal names, and the token it never shows.
    for (name, tokens, says, never) in [
        (
            "unknown",
            format!("agent-7 {TOKEN}\n"),
            [
                "the caller `agent-7` is not one this application knows",
                "`default`",
            ],
            TOKEN,
        ),
        (
            "short",
            "default short-token\n".to_owned(),
            ["line 1", "at least 16 characters"],
            "short-token",
        ),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, tokens).unwrap();
        let stderr = refused(&[
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--token-file",
            file.to_str().unwrap(),
        ]);
        assert!(
            says.iter().all(|said| stderr.contains(said)),
            "{name}: {stderr}"
        );
        assert!(!stderr.contains(never), "{name}: {stderr}");
    }

    let short = dir.join("short");
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
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                      "params": {"_meta": stateless_meta()}});
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
    let desk = Desk::new("alone");
    let server = Server::start(&desk.args(&[]));
    let bearer = format!("Bearer {TOKEN}");
    let stateless = |id: u32, meta: Value| {
        let mut meta_all = stateless_meta();
        for (k, v) in meta.as_object().unwrap() {
            meta_all[k] = v.clone();
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "get_order", "arguments": {"order_id": "ORD-1001"}, "_meta": meta_all}});
        let answer = post_call(server.addr, &bearer, "get_order", &body);
        assert_eq!(answer.status, 200, "{answer:?}");
        let message = answer.message();
        assert_eq!(message["result"]["isError"], false, "{message}");
    };
    let rows = |table: &str| -> i64 {
        let conn = rusqlite::Connection::open(&desk.db).unwrap();
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
    let steps: i64 = rusqlite::Connection::open(&desk.db)
        .unwrap()
        .query_row("SELECT count FROM toolcall_steps", [], |r| r.get(0))
        .unwrap();
    assert_eq!(steps, 2);
    desk.close(server);
}

/// A note that stops inside the shop's write (its transaction open, the
/// file's write lock held: `ORDERS_CRASH_AT=note_before_commit` parks the
/// thread there for good) on a server with one runtime thread: another
/// client's read of an order is answered meanwhile. Before the shop's
/// statements ran off the async threads, the note held the one thread, and
/// a read waited for the note's connection too: no answer at all.
#[test]
fn a_shop_write_that_stalls_stalls_neither_a_read_nor_another_client() {
    let desk = Desk::new("stall");
    let server = Server::start_with(
        &desk.args(&["--allow", "get_order,add_note"]),
        &[
            ("ORDERS_CRASH_AT", orders::NOTE_BEFORE_COMMIT),
            ("TOKIO_WORKER_THREADS", "1"),
        ],
    );
    let bearer = format!("Bearer {TOKEN}");
    let stateless = move |id: u32, tool: &'static str, arguments: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": stateless_meta()}});
        let bearer = bearer.clone();
        let addr = server.addr;
        let (sent, answer) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(post_call(addr, &bearer, tool, &body));
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
    let notes: i64 = rusqlite::Connection::open(&desk.db)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM orders_notes", [], |r| r.get(0))
        .unwrap();
    assert_eq!(notes, 0);
    let _ = std::fs::remove_dir_all(&desk.dir);
}
