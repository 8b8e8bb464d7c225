//! What a call costs on the Postgres store: transactions per call, read
//! from the server's own statistics, and the latency of calls from 1, 8 and
//! 32 concurrent conversations across two processes, beside a floor.
//!
//! ```text
//! cargo run --release -p toolcall-bench --bin postgres -- \
//!     --url postgres://postgres@127.0.0.1:5432/postgres
//! ```
//!
//! It makes a database of its own on the server (dropped at the end) and:
//!
//! * **Transactions per call.** `xact_commit` of `pg_stat_database` for
//!   that database, over `--xact-calls` calls and over twice as many, each
//!   run on a connection of its own (its statistics are flushed when it
//!   closes): the difference, divided by the number of calls, is what one
//!   call costs, setting up a connection and preparing statements aside.
//!   Read-only: `get_order`, each call in a conversation of its own.
//!   Confirmed refund: `refund_order` with `confirmed`, one cent at a time.
//!   The whole application's refund (`app_refund`): the same with the shop
//!   in the same database, on the store's pool, its refund written in the
//!   call's transaction (`Ctx::transaction`); the other kinds' shop is in
//!   memory, so that they count the pipeline alone.
//!   Beside it, the log's flushes to the disk a call waits for (`wal_sync`
//!   of `pg_stat_wal`, for the whole server: run it on a quiet one): the
//!   durable commits of a call, the calls being made one after another.
//! * **Rows kept** (`--kept N`, 0 by default): the store's tables filled,
//!   before the rates below, with N records and call counts and N/5 steps
//!   that have not expired, as a store in use holds within its retention
//!   window: what the store's statements and its purge cost grows with
//!   them if they read more than they need.
//! * **W.** The server's own rate of single-row inserts (autocommit, each
//!   prepared once) from 8 connections at once: what the store's rates are
//!   compared with. Its connections, and the floor's, are made as the
//!   store makes its own (TLS when the server offers it, unless the URL
//!   says `sslmode=disable`): the same transport on both sides.
//! * **Latency and rate.** For 1, 8 and 32 conversations in one process and
//!   8 processes of one conversation (each process one store, its pool),
//!   each conversation
//!   making `--calls` calls one after another: p50 and p99 of a
//!   `get_order`, of a confirmed refund (each conversation refunds an order
//!   of its own, so that the resource locks do not serialize them), and of
//!   the floor: the bare statements a refund's claim and its record need
//!   (an `INSERT ... ON CONFLICT` claim, then the result's `UPSERT`),
//!   prepared once, sent by the same driver on one connection per process.
//!
//! Each line printed is one JSON object.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
// The examples' own: a database of the benchmark's own, dropped at the end.
#[path = "../../../examples/orders/tests/support/fresh_database.rs"]
mod fresh_database;
use fresh_database::FreshDatabase;
use orders::{Currency, Order, Shop, get_order, refund_order};
use serde_json::json;
use toolcall::{Call, Code, Dispatcher, Policy, tools};
use toolcall_postgres::PostgresStore;

#[derive(Debug, Parser)]
#[command(about = "Transactions per call and latency on the Postgres store")]
struct Args {
    /// A database on the server, to make one of the benchmark's own from.
    #[arg(long)]
    url: String,
    /// Calls per conversation, for the latency.
    #[arg(long, default_value_t = 200)]
    calls: usize,
    /// Calls of the shorter run, for the transactions per call.
    #[arg(long, default_value_t = 200)]
    xact_calls: usize,
    /// Rows the store holds before the rates are measured, as a store in
    /// use does within its retention window: this many records and call
    /// counts and a fifth as many steps, touched within the last hour and
    /// laid out in no order of their times (0: a fresh database).
    #[arg(long, default_value_t = 0)]
    kept: u64,
    /// Internal: run as one of the two processes.
    #[arg(long, hide = true)]
    child: Option<String>,
    #[arg(long, hide = true, default_value_t = 0)]
    process: usize,
    #[arg(long, hide = true, default_value_t = 1)]
    conversations: usize,
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match &args.child {
        Some(kind) => runtime.block_on(child(&args, kind)),
        None => runtime.block_on(parent(&args)),
    }
}

/// A connection as the store makes one: the same TLS, negotiated the same
/// way (`sslmode`, `prefer` when the URL says nothing), so that W and the
/// floor pay for the transport the store's calls pay for.
async fn connect(url: &str) -> tokio_postgres::Client {
    toolcall_postgres::ConnectionString::parse(url)
        .expect("the URL")
        .connect()
        .await
        .expect("the server")
}

/// The shop of `kind`'s calls: in the store's database for the whole
/// application's refund (`app_refund`), in memory for the other kinds.
async fn shop_of(kind: &str, store: &PostgresStore, process: usize, conversations: usize) -> Shop {
    if kind == "app_refund" {
        Shop::on_postgres_pool(store.pool())
            .await
            .expect("the shop's tables")
    } else {
        shop(process, conversations)
    }
}

/// The orders every process's conversations refund, in the shop's tables
/// (made first), for the whole application's refund.
async fn seed_orders(url: &str) {
    let store = PostgresStore::connect(url).await.expect("the store");
    drop(
        Shop::on_postgres_pool(store.pool())
            .await
            .expect("the shop's tables"),
    );
    let client = connect(url).await;
    for process in 0..8 {
        for conversation in 0..32 {
            client
                .execute(
                    "INSERT INTO orders_orders (order_id, customer_id, total_cents, currency)
                     VALUES ($1, 'CUS-1', 1000000000, 'BRL') ON CONFLICT DO NOTHING",
                    &[&order_of(process, conversation)],
                )
                .await
                .expect("an order");
        }
    }
}

/// Orders of their own for the conversations of process `process`.
fn shop(process: usize, conversations: usize) -> Shop {
    Shop::with_orders(
        (0..conversations.max(1))
            .map(|c| Order::new(&order_of(process, c), "CUS-1", 1_000_000_000, Currency::BRL)),
    )
}

fn order_of(process: usize, conversation: usize) -> String {
    format!("ORD-{}{conversation:03}", process + 2)
}

fn dispatcher(store: PostgresStore, shop: Shop) -> Dispatcher<Shop, PostgresStore> {
    Dispatcher::builder(
        tools![get_order, refund_order].expect("the tools"),
        Arc::new(shop),
    )
    .part(Shop::reader)
    .policy(
        Policy::new()
            .allow(["get_order", "refund_order"])
            .limit("max_refund_cents", 1_000_000_000),
    )
    .store(store)
    .max_steps(u64::MAX / 2)
    .build()
    .expect("a dispatcher")
}

async fn read_call(d: &Dispatcher<Shop, PostgresStore>, session: &str, order: &str) {
    let args = json!({ "order_id": order }).to_string();
    let answer = d
        .execute(Call::new("get_order", &args).session(session))
        .await;
    assert!(answer.ok, "{answer:?}");
}

async fn refund_call(d: &Dispatcher<Shop, PostgresStore>, session: &str, order: &str, n: usize) {
    // A new amount each time: a new call, never a replay.
    let args = json!({
        "order_id": order, "amount_cents": 1 + n, "currency": "BRL", "reason": "customer_request"
    })
    .to_string();
    let answer = d
        .execute(
            Call::new("refund_order", &args)
                .session(session)
                .confirmed(true),
        )
        .await;
    assert_eq!(answer.code, Code::Ok, "{answer:?}");
}

async fn xact_commit(admin: &tokio_postgres::Client, database: &str) -> i64 {
    admin
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await
        .expect("a snapshot cleared");
    admin
        .query_one(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1",
            &[&database],
        )
        .await
        .expect("the database's statistics")
        .get(0)
}

/// How many times the server has flushed its log to the disk (`wal_sync`
/// of `pg_stat_wal`, Postgres 14 and later; `None` before): a commit that
/// waits for the log is one, unless it shares another's.
async fn log_flushes(admin: &tokio_postgres::Client) -> Option<i64> {
    admin
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await
        .ok()?;
    let row = admin
        .query_one("SELECT wal_sync FROM pg_stat_wal", &[])
        .await
        .ok()?;
    Some(row.get(0))
}

/// Transactions of `calls` calls of `kind` on a store of its own, setup
/// included (read once the connection closed and its statistics are in).
async fn xacts_of(
    admin: &tokio_postgres::Client,
    url: &str,
    database: &str,
    kind: &str,
    calls: usize,
) -> (i64, u64, Option<i64>) {
    let before = xact_commit(admin, database).await;
    let flushed = log_flushes(admin).await;
    let store = Arc::new(PostgresStore::connect(url).await.expect("the store"));
    let shop = shop_of(kind, &store, 0, 1).await;
    let d = Dispatcher::builder(
        tools![get_order, refund_order].expect("the tools"),
        Arc::new(shop),
    )
    .part(Shop::reader)
    .policy(
        Policy::new()
            .allow(["get_order", "refund_order"])
            .limit("max_refund_cents", 1_000_000_000),
    )
    .store(Arc::clone(&store))
    .max_steps(u64::MAX / 2)
    .build()
    .expect("a dispatcher");
    let order = order_of(0, 0);
    let stamp = toolcall::store::now_ms();
    for n in 0..calls {
        let session = format!("{kind}-{stamp}-{calls}-{n}");
        let args = match kind {
            "read" => json!({ "order_id": order }),
            _ => json!({
                "order_id": order, "amount_cents": 1, "currency": "BRL", "reason": "customer_request"
            }),
        }
        .to_string();
        let tool = if kind == "read" {
            "get_order"
        } else {
            "refund_order"
        };
        let answer = d
            .execute(Call::new(tool, &args).session(&session).confirmed(true))
            .await;
        assert_eq!(answer.code, Code::Ok, "{answer:?}");
    }
    let sent = store.round_trips();
    drop(d);
    drop(store);
    // The closed connection's backend reports its statistics as it exits.
    let mut after = xact_commit(admin, database).await;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = xact_commit(admin, database).await;
        if now == after {
            break;
        }
        after = now;
    }
    let flushes = flushed
        .zip(log_flushes(admin).await)
        .map(|(before, after)| after - before);
    (after - before, sent, flushes)
}

async fn parent(args: &Args) {
    let fresh = FreshDatabase::create(&args.url, "bench_postgres");
    let url = fresh.url.clone();
    let database = url
        .rsplit('/')
        .next()
        .and_then(|tail| tail.split('?').next())
        .expect("a database name")
        .to_owned();
    let admin = connect(&args.url).await;
    // The tables, made once, and the orders the shop's tables hold.
    seed_orders(&url).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let server: String = admin
        .query_one("SHOW server_version", &[])
        .await
        .expect("the server's version")
        .get(0);
    println!("{}", json!({ "postgres": server }));
    for kind in ["read", "refund", "app_refund"] {
        let short = args.xact_calls;
        let (few, few_sent, few_flushes) = xacts_of(&admin, &url, &database, kind, short).await;
        let (many, many_sent, many_flushes) =
            xacts_of(&admin, &url, &database, kind, 2 * short).await;
        // One call after another: no two commits share a flush.
        let flushes = few_flushes
            .zip(many_flushes)
            .map(|(few, many)| (many - few) as f64 / short as f64);
        println!(
            "{}",
            json!({
                "transactions_per_call": kind,
                "calls": [short, 2 * short],
                "xact_commit": [few, many],
                "per_call": (many - few) as f64 / short as f64,
                "round_trips_per_call": (many_sent - few_sent) as f64 / short as f64,
                "log_flushes_per_call": flushes,
            })
        );
    }

    if args.kept > 0 {
        keep_rows(&url, args.kept).await;
        println!("{}", json!({ "kept": args.kept }));
    }
    let w = raw_insert_rate(&url, 8, args.calls * 4).await;
    println!(
        "{}",
        json!({ "raw_insert_rate": w.round(), "connections": 8 })
    );

    // One process with 1, 8 and 32 conversations; 8 processes of one
    // conversation each.
    for kind in ["read", "refund", "app_refund", "floor"] {
        for (conversations, processes) in [(1usize, 1usize), (8, 1), (32, 1), (8, 8)] {
            let children: Vec<_> = (0..processes)
                .map(|process| {
                    Command::new(std::env::current_exe().expect("this program"))
                        .args([
                            "--url",
                            &url,
                            "--child",
                            kind,
                            "--process",
                            &process.to_string(),
                            "--conversations",
                            &(conversations / processes).to_string(),
                            "--calls",
                            &args.calls.to_string(),
                        ])
                        .stdout(Stdio::piped())
                        .spawn()
                        .expect("a process")
                })
                .collect();
            let mut micros: Vec<u64> = Vec::new();
            let mut rate = 0.0;
            for child in children {
                let out = child.wait_with_output().expect("its output");
                assert!(out.status.success(), "a process failed");
                let line: serde_json::Value =
                    serde_json::from_slice(&out.stdout).expect("its latencies");
                let calls: Vec<u64> =
                    serde_json::from_value(line["micros"].clone()).expect("its latencies");
                // The processes run at once: their rates add up.
                rate += calls.len() as f64 / line["seconds"].as_f64().expect("its time");
                micros.extend(calls);
            }
            micros.sort_unstable();
            let at = |q: f64| micros[((micros.len() as f64 * q) as usize).min(micros.len() - 1)];
            println!(
                "{}",
                json!({
                    "latency": kind,
                    "conversations": conversations,
                    "processes": processes,
                    "calls": micros.len(),
                    "calls_per_s": rate.round(),
                    "of_raw_insert_rate": (rate / w * 100.0).round() / 100.0,
                    "p50_us": at(0.50),
                    "p99_us": at(0.99),
                })
            );
        }
    }
    drop(admin);
    drop(fresh);
}

/// One process: its conversations at once, each `calls` calls in a row;
/// prints every call's latency, in microseconds.
async fn child(args: &Args, kind: &str) {
    let conversations = args.conversations;
    let process = args.process;
    let store = PostgresStore::connect(&args.url).await.expect("the store");
    let shop = shop_of(kind, &store, process, conversations).await;
    let d = Arc::new(dispatcher(store, shop));
    let floor = Arc::new(connect(&args.url).await);
    let claim = floor
        .prepare(
            "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
             VALUES ($1, 'in_flight', $2, NULL, $3)
             ON CONFLICT (key) DO UPDATE SET state = 'in_flight', until_ms = $2, result = NULL, touched_ms = $3
             WHERE toolcall_records.state = 'in_doubt'
             RETURNING key",
        )
        .await
        .expect("the claim");
    let record = floor
        .prepare(
            "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
             VALUES ($1, 'completed', 0, $2, $3)
             ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = $2, touched_ms = $3",
        )
        .await
        .expect("the record");
    let stamp = toolcall::store::now_ms();
    let started_all = Instant::now();
    let tasks: Vec<_> = (0..conversations)
        .map(|c| {
            let (d, floor, claim, record) = (
                Arc::clone(&d),
                Arc::clone(&floor),
                claim.clone(),
                record.clone(),
            );
            let kind = kind.to_owned();
            let calls = args.calls;
            tokio::spawn(async move {
                let order = order_of(process, c);
                let session = format!("{kind}-{stamp}-{process}-{c}");
                let mut micros = Vec::with_capacity(calls);
                for n in 0..calls {
                    let started = Instant::now();
                    match kind.as_str() {
                        // A conversation of its own per read: the loop guard
                        // stops a conversation that asks the same thing again.
                        "read" => read_call(&d, &format!("{session}-{n}"), &order).await,
                        "refund" | "app_refund" => refund_call(&d, &session, &order, n).await,
                        _ => {
                            let key = format!("{session}-{n}");
                            let now = toolcall::store::now_ms() as i64;
                            floor
                                .query_opt(&claim, &[&key, &(now + 60_000), &now])
                                .await
                                .expect("a claim");
                            floor
                                .execute(&record, &[&key, &"{}", &now])
                                .await
                                .expect("a record");
                        }
                    }
                    micros.push(started.elapsed().as_micros() as u64);
                }
                micros
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("a conversation"));
    }
    let seconds = started_all.elapsed().as_secs_f64();
    println!("{}", json!({ "micros": all, "seconds": seconds }));
}

/// The server's own rate of single-row inserts, each its own transaction
/// (autocommit), from `connections` connections at once, each statement
/// prepared once: W, what the store's write rates compare with.
/// `rows` records and call counts and a fifth as many steps, none expired,
/// in the store's tables, then the planner's statistics of them.
async fn keep_rows(url: &str, rows: u64) {
    let client = connect(url).await;
    let now = toolcall::store::now_ms();
    // A permutation of the rows' times (7919 is prime to 3,600,000's
    // factors), so that a table's order says nothing of its times, as in
    // a table whose rows are updated where there is room.
    client
        .batch_execute(&format!(
            "INSERT INTO toolcall_calls (key, count, touched_ms)
                 SELECT md5(i::TEXT), 1, {now} - (i::BIGINT * 7919) % 3600000
                 FROM generate_series(1, {rows}) AS i;
             INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 SELECT md5(i::TEXT), 'completed', 0, repeat('x', 200),
                        {now} - (i::BIGINT * 7919) % 3600000
                 FROM generate_series(1, {rows}) AS i;
             INSERT INTO toolcall_steps (session, count, touched_ms)
                 SELECT md5(i::TEXT), 1, {now} - (i::BIGINT * 7919) % 3600000
                 FROM generate_series(1, {rows} / 5) AS i;"
        ))
        .await
        .expect("the rows kept");
    client
        .batch_execute("VACUUM ANALYZE")
        .await
        .expect("their statistics");
}

async fn raw_insert_rate(url: &str, connections: usize, inserts: usize) -> f64 {
    let setup = connect(url).await;
    setup
        .batch_execute(
            "DROP TABLE IF EXISTS bench_raw_inserts;
             CREATE TABLE bench_raw_inserts (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, at BIGINT NOT NULL)",
        )
        .await
        .expect("the table");
    let mut clients = Vec::new();
    for _ in 0..connections {
        let client = connect(url).await;
        let insert = client
            .prepare("INSERT INTO bench_raw_inserts (key, at) VALUES ($1, $2)")
            .await
            .expect("the insert");
        clients.push((client, insert));
    }
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, (client, insert))| {
            tokio::spawn(async move {
                for n in 0..inserts {
                    let key = format!("{c}-{n}");
                    client
                        .execute(&insert, &[&key, &(n as i64)])
                        .await
                        .expect("an insert");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a connection's inserts");
    }
    let rate = (connections * inserts) as f64 / started.elapsed().as_secs_f64();
    setup
        .batch_execute("DROP TABLE bench_raw_inserts")
        .await
        .expect("the table dropped");
    rate
}
