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
//! * **CPU a call.** Beside W and each rate, where the server runs on this
//!   machine (its processes found in `/proc`): the server's CPU time a call
//!   (or an insert), its backends' and its helpers' (the WAL writer's...),
//!   those that ended included; and the CPU time of the processes making
//!   the calls, their own count around their calls (`/proc/self/task/*/schedstat`).
//!   On a machine whose cores the server and the clients share, the two
//!   add up to what bounds the rate. Every process connects first, and all
//!   start their calls together when the last is ready, so the server's
//!   count is read around the calls, not the connecting; it is read in
//!   clock ticks (10 ms), a fair figure over a run of a second or more,
//!   not over a handful of calls.
//!
//! Each line printed is one JSON object.

use std::io::{BufRead as _, BufReader, Write as _};
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
    let inserts = args.calls * 4;
    let cpu_before = server_cpu();
    let w = raw_insert_rate(&url, 8, inserts).await;
    println!(
        "{}",
        json!({
            "raw_insert_rate": w.round(),
            "connections": 8,
            "postgres_cpu_us_a_call": per_call_us(cpu_before, server_cpu(), 8 * inserts),
        })
    );

    // One process with 1, 8 and 32 conversations; 8 processes of one
    // conversation each.
    for kind in ["read", "refund", "app_refund", "floor"] {
        for (conversations, processes) in [(1usize, 1usize), (8, 1), (32, 1), (8, 8)] {
            let mut children: Vec<_> = (0..processes)
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
                        .stdin(Stdio::piped())
                        .stdout(Stdio::piped())
                        .spawn()
                        .expect("a process")
                })
                .collect();
            // Every process connected and ready before any calls: they
            // start together, and the server's CPU is read around their
            // calls, not around their connecting.
            let mut outputs: Vec<_> = children
                .iter_mut()
                .map(|child| {
                    let mut output = BufReader::new(child.stdout.take().expect("its output"));
                    let mut ready = String::new();
                    output.read_line(&mut ready).expect("its start");
                    assert_eq!(ready.trim(), "ready", "a process did not start");
                    output
                })
                .collect();
            let cpu_before = server_cpu();
            for child in &mut children {
                writeln!(child.stdin.as_mut().expect("its input")).expect("its go");
            }
            let mut lines = Vec::new();
            for output in &mut outputs {
                let mut line = String::new();
                output.read_line(&mut line).expect("its latencies");
                lines.push(line);
            }
            let cpu_after = server_cpu();
            let mut micros: Vec<u64> = Vec::new();
            let mut rate = 0.0;
            let mut clients_cpu = 0.0;
            for (mut child, line) in children.into_iter().zip(lines) {
                drop(child.stdin.take());
                assert!(child.wait().expect("its end").success(), "a process failed");
                let line: serde_json::Value = serde_json::from_str(&line).expect("its latencies");
                let calls: Vec<u64> =
                    serde_json::from_value(line["micros"].clone()).expect("its latencies");
                // The processes run at once: their rates add up.
                rate += calls.len() as f64 / line["seconds"].as_f64().expect("its time");
                clients_cpu += line["cpu_seconds"].as_f64().unwrap_or(f64::NAN);
                micros.extend(calls);
            }
            let server = per_call_us(cpu_before, cpu_after, micros.len());
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
                    "postgres_cpu_us_a_call": server,
                    "clients_cpu_us_a_call": (clients_cpu / micros.len() as f64 * 1e6).round(),
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
    // Ready, then wait for the parent's go (a line on the standard input),
    // so that every process starts its calls at once.
    println!("ready");
    std::io::stdout().flush().expect("the start said");
    std::io::stdin()
        .read_line(&mut String::new())
        .expect("the parent's go");
    let stamp = toolcall::store::now_ms();
    let cpu_before = own_cpu();
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
    let cpu_seconds = own_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    println!(
        "{}",
        json!({ "micros": all, "seconds": seconds, "cpu_seconds": cpu_seconds })
    );
}

/// The CPU seconds this process's threads have run, as the scheduler
/// counts them (nanoseconds, `/proc/self/task/*/schedstat`): its runtime's
/// threads live as long as it does, so the difference of two readings is
/// what the calls between them cost it. `None` without `/proc`, rather
/// than a count of nothing.
fn own_cpu() -> Option<f64> {
    let nanos: u64 = std::fs::read_dir("/proc/self/task")
        .ok()?
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Some(nanos as f64 / 1e9)
}

/// The CPU seconds the Postgres server on this machine has used so far:
/// each of its processes' own time, and the time of the processes each
/// has reaped (a backend ends with its connection, and its time then
/// counts in the postmaster's), read from `/proc/<pid>/stat` in clock
/// ticks (Linux reports them at 100 a second). This benchmark's processes
/// share the server's name and are left out by their executable. `None`
/// where no server process is found: a server on another machine.
fn server_cpu() -> Option<f64> {
    const TICKS_A_SECOND: f64 = 100.0;
    let ours = std::env::current_exe().ok();
    let mut ticks = 0u64;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let path = entry.path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        let Some(its) = postgres_ticks(&stat) else {
            continue;
        };
        if ours.is_some() && std::fs::read_link(path.join("exe")).ok() == ours {
            continue;
        }
        ticks += its;
        found = true;
    }
    found.then(|| ticks as f64 / TICKS_A_SECOND)
}

/// The CPU ticks of a process named `postgres`, its own and its reaped
/// children's (utime, stime, cutime and cstime: fields 14 to 17), from its
/// `/proc/<pid>/stat`; `None` for a process of another name.
fn postgres_ticks(stat: &str) -> Option<u64> {
    // The name is in parentheses and may hold anything, `) ` included: the
    // fields are what follows the last `) `, from the state (field 3) on.
    let (head, rest) = stat.rsplit_once(") ")?;
    if !head.ends_with(" (postgres") {
        return None;
    }
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields
        .get(11..15)?
        .iter()
        .map(|field| field.parse::<u64>().ok())
        .sum()
}

/// Microseconds a call of the server's CPU between two readings of
/// [`server_cpu`], rounded; `None` where it could not be read.
fn per_call_us(before: Option<f64>, after: Option<f64>, calls: usize) -> Option<f64> {
    let (before, after) = (before?, after?);
    Some(((after - before) / calls as f64 * 1e6).round())
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

#[cfg(test)]
mod tests {
    use super::postgres_ticks;

    #[test]
    fn a_servers_ticks_are_its_own_and_its_reaped_backends() {
        // The postmaster: utime 1, stime 24, cutime 4075, cstime 2112.
        let postmaster = "2248 (postgres) S 1 2248 2248 0 -1 4194304 9150 412666 0 26 \
                          1 24 4075 2112 20 0 1 0 1234 218284032 7000";
        assert_eq!(postgres_ticks(postmaster), Some(1 + 24 + 4075 + 2112));
        // A name with a space and a parenthesis is not the server's, and
        // does not shift the fields of one that is.
        let other = "77 (postgres) x) S 1 77 77 0 -1 0 0 0 0 0 5 6 7 8 20 0 1 0 9 1 1";
        assert_eq!(postgres_ticks(other), None);
        assert_eq!(
            postgres_ticks("12 (bash) S 1 12 12 0 -1 0 0 0 0 0 5 6 7 8"),
            None
        );
        // Cut short, or a time that is not a number: nothing read, rather
        // than a wrong count.
        assert_eq!(postgres_ticks("12 (postgres) S 1 12"), None);
        let garbled = "12 (postgres) S 1 12 12 0 -1 0 0 0 0 0 5 x 7 8 20";
        assert_eq!(postgres_ticks(garbled), None);
    }
}
