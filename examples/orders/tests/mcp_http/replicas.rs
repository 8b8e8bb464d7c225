//! Replicas over one store, SQLite or Postgres: a refund runs once and one
//! replica survives the other's kill; a task outlives its killed process.

use super::*;

/// The store replicas share, as a scenario sees it: its URL or
/// `sqlite:PATH`, the token file, how a person's yes is recorded in the
/// store, and how many refunds (and cents) the shop's table holds.
struct Fleet<'a> {
    store: &'a str,
    tokens: &'a Path,
    decide_in_store: &'a dyn Fn(&str),
    refunds: &'a dyn Fn() -> (i64, i64),
}

impl Fleet<'_> {
    /// A replica over the store: the fleet's tokens, the shared
    /// conversation `desk-1`, approvals in the inbox.
    fn start(&self) -> Server {
        Server::start(&[
            "--store",
            self.store,
            "--token-file",
            self.tokens.to_str().unwrap(),
            "--session-id",
            "desk-1",
            "--approvals",
            "inbox",
        ])
    }

    fn decide_in_store(&self, id: &str) {
        (self.decide_in_store)(id);
    }

    fn refunds(&self) -> (i64, i64) {
        (self.refunds)()
    }
}

/// Two `orders mcp --http` replicas with one `--session-id` over one store:
/// a high-risk refund asked on A waits for a person; once the decision is
/// in the store, the same call on B runs once, and on A is replayed; the
/// shop holds one refund. Then A is killed (SIGKILL) and B serves on: a
/// client of A that reconnects to B gets the refund replayed, not made
/// again.
fn two_replicas(fleet: &Fleet) {
    let a = fleet.start();
    let b = fleet.start();
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
        fleet.refunds(),
        (0, 0),
        "nothing refunded before a person says yes"
    );

    fleet.decide_in_store(&id);

    let made = on_b.call("refund_order", refund(2590));
    assert_eq!(made["ok"], true, "{made}");
    assert!(made.get("replayed").is_none(), "{made}");
    assert_eq!(fleet.refunds(), (1, 2590));

    let again = on_a.call("refund_order", refund(2590));
    assert_eq!(again["ok"], true, "{again}");
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(
        fleet.refunds(),
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
    assert_eq!(fleet.refunds(), (1, 2590));
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
fn a_task_outlives_its_process(fleet: &Fleet) {
    let a = fleet.start();
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
    assert_eq!(fleet.refunds(), (0, 0));
    a.kill();

    fleet.decide_in_store(&id);
    let b = fleet.start();
    let mut on_b = tasks_client(b.addr);
    let done = on_b.request("tasks/get", json!({"taskId": id}));
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"]["structuredContent"];
    assert_eq!(result["ok"], true, "{done}");
    assert_eq!(result["data"]["refunded_cents"], 2590, "{done}");
    assert_eq!(fleet.refunds(), (1, 2590));

    // Asked again, or the call made again: the same refund, never a second.
    let again = on_b.request("tasks/get", json!({"taskId": id}));
    assert_eq!(again["result"], done["result"], "{again}");
    let retried = Client::open(b.addr).call("refund_order", refund(2590));
    assert_eq!(retried["replayed"], true, "{retried}");
    assert_eq!(fleet.refunds(), (1, 2590));
}

/// A scenario of replicas over one store.
type Scenario = fn(&Fleet);

/// Plays `scenario` on a SQLite file of its own.
fn on_sqlite(name: &str, scenario: Scenario) {
    let dir = scratch(name);
    let tokens = token_file(&dir);
    let db = dir.join("shared.db");
    let store = format!("sqlite:{}", db.display());
    let runtime = runtime();
    scenario(&Fleet {
        store: &store,
        tokens: &tokens,
        decide_in_store: &|id| {
            let store = toolcall_sqlite::SqliteStore::open(&db).unwrap();
            runtime.block_on(decide(&store, id));
        },
        refunds: &|| sqlite_refunds(&db),
    });
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

/// Plays `scenario` in a Postgres database of its own (skipped, loudly,
/// without `TOOLCALL_POSTGRES_URL`).
fn on_postgres(name: &str, scenario: Scenario) {
    let Some(url) = postgres_url() else { return };
    let database = support::FreshDatabase::create(&url, name);
    let dir = scratch(name);
    let tokens = token_file(&dir);
    let runtime = runtime();
    scenario(&Fleet {
        store: &database.url,
        tokens: &tokens,
        decide_in_store: &|id| {
            runtime.block_on(async {
                let store = toolcall_postgres::PostgresStore::connect(&database.url)
                    .await
                    .unwrap();
                decide(&store, id).await;
            });
        },
        refunds: &|| runtime.block_on(postgres_refunds(&database.url)),
    });
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
