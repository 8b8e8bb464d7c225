//! `chaos`: the fleet under random faults. K replicas of `orders mcp
//! --http` over one store (a Postgres of the harness's own, or one SQLite
//! file), M clients making reads, refunds, notes and refunds as durable
//! tasks, a scripted person deciding in the inbox (`orders serve`'s JSON
//! API), and a fault injector choosing from the seed: SIGKILL of a replica,
//! SIGSTOP past its lease then SIGCONT, connections terminated on the
//! server, a Postgres restart, the example's crash points switched on for
//! one process. Invariants are checked from the shop's tables, the store
//! and the audit logs at intervals and at the end; the run prints its
//! figures and exits 1 on any violation. See docs/chaos.md.

mod check;
mod fleet;
// The testkit's, included rather than depended on: the harness takes no
// test crate into its dependencies.
#[path = "../../toolcall-testkit/src/postgres_programs.rs"]
mod postgres_programs;
mod shop;
mod world;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;

use fleet::{Db, Launcher, PgServer, Role, Slot};
use world::{Fault, Kind, Rng, World};

#[derive(Parser, Clone)]
#[command(about = "The fleet under random faults, with invariants")]
struct Args {
    /// `postgres` (a server of the harness's own) or `sqlite` (one file).
    #[arg(long, default_value = "postgres")]
    store: String,
    /// The seed of the faults and the clients' choices (printed; random
    /// when not given).
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds of faults.
    #[arg(long, default_value_t = 60)]
    secs: u64,
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// The `orders` binary (default: beside this one).
    #[arg(long)]
    orders: Option<PathBuf>,
    /// The replicas' claim lease.
    #[arg(long, default_value_t = 3000)]
    lease_ms: u64,
    /// The pause between two faults, at least and at most.
    #[arg(long, default_value_t = 1000)]
    fault_min_ms: u64,
    #[arg(long, default_value_t = 4000)]
    fault_max_ms: u64,
    /// Seconds to drive the operations still open to their end.
    #[arg(long, default_value_t = 90)]
    drain_secs: u64,
    /// Seconds between two rounds of checks.
    #[arg(long, default_value_t = 10)]
    check_secs: u64,
    /// Append the run's report (Markdown) to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Keep the run's directory (audit logs, stderr of each process).
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // reqwest speaks plain HTTP here; it still wants a TLS provider.
    // rustls 0.23.48 deprecates ring's provider (no post-quantum key
    // exchange); plain HTTP to localhost does not need any.
    #[allow(deprecated)]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(why) => {
            eprintln!("chaos: {why}");
            ExitCode::from(2)
        }
    }
}

fn seed_now() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Rng::new(t ^ u64::from(std::process::id())).next() % 1_000_000_000
}

async fn run(args: Args) -> Result<bool, String> {
    let seed = args.seed.unwrap_or_else(seed_now);
    let replay = format!(
        "chaos --store {} --seed {seed} --secs {} --replicas {} --clients {}",
        args.store, args.secs, args.replicas, args.clients
    );
    println!("chaos: seed {seed} (replay: {replay})");
    let orders = match &args.orders {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("orders"),
    };
    if !orders.exists() {
        return Err(format!(
            "no orders binary at {} (cargo build -p orders)",
            orders.display()
        ));
    }
    let dir = std::env::temp_dir().join(format!("chaos-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let db = match args.store.as_str() {
        "postgres" => {
            let pg = PgServer::start(&dir)?;
            Db::Postgres { url: pg.url(), pg }
        }
        "sqlite" => Db::Sqlite {
            path: dir.join("shop.db"),
        },
        other => return Err(format!("--store {other}: postgres or sqlite")),
    };
    let outcome = fleet_run(&args, seed, &replay, &orders, &dir, db.clone()).await;
    if let Db::Postgres { pg, .. } = &db {
        pg.stop();
    }
    match &outcome {
        Ok(true) if !args.keep => {
            let _ = std::fs::remove_dir_all(&dir);
        }
        _ => println!("chaos: the run's files are in {}", dir.display()),
    }
    outcome
}

async fn fleet_run(
    args: &Args,
    seed: u64,
    replay: &str,
    orders: &std::path::Path,
    dir: &std::path::Path,
    db: Db,
) -> Result<bool, String> {
    std::fs::write(
        dir.join("tokens"),
        format!("default {}\n", fleet::CLIENT_TOKEN),
    )
    .map_err(|e| e.to_string())?;
    std::fs::write(dir.join("people"), format!("ana {}\n", fleet::PERSON_TOKEN))
        .map_err(|e| e.to_string())?;
    let store = db.store_arg();
    // The tables (the store's and the shop's), then the seeded orders.
    let made = std::process::Command::new(orders)
        .args(["replay", "--store", &store])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if !made.status.success() {
        return Err(format!(
            "orders replay: {}",
            String::from_utf8_lossy(&made.stderr)
        ));
    }
    seed_orders(&db).await?;

    let launcher = Arc::new(Launcher {
        orders: orders.to_owned(),
        dir: dir.to_owned(),
        store,
        lease_ms: args.lease_ms,
    });
    let world = Arc::new(World::new(seed, db, args.replicas));
    let mut slots: Vec<Slot> = (0..args.replicas)
        .map(|i| Slot::new(Role::Replica, i))
        .collect();
    for slot in &mut slots {
        launcher.start(slot, None).await?;
    }
    let mut inbox = Slot::new(Role::Inbox, 0);
    launcher.start(&mut inbox, None).await?;
    publish(&world, &slots, &inbox);
    println!(
        "chaos: {} replicas over {}, {} clients, {} s of faults",
        args.replicas,
        if matches!(world.db, Db::Postgres { .. }) {
            "Postgres (the harness's own)"
        } else {
            "one SQLite file"
        },
        args.clients,
        args.secs
    );

    let mut rng = Rng::new(seed);
    let mut clients = Vec::new();
    for i in 0..args.clients {
        let world = world.clone();
        let rng = Rng::new(rng.next());
        clients.push(tokio::spawn(
            async move { world::client(&world, i, rng).await },
        ));
    }
    let person = {
        let world = world.clone();
        let rng = Rng::new(rng.next());
        let lease = args.lease_ms;
        tokio::spawn(async move { world::person(&world, rng, lease).await })
    };
    let checking = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let checker = {
        let world = world.clone();
        let checking = checking.clone();
        let (lease, every, dir) = (args.lease_ms, args.check_secs, dir.to_owned());
        tokio::spawn(async move {
            let mut checker = check::Checker::default();
            while checking.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_secs(every)).await;
                if checking.load(Ordering::Relaxed) {
                    check::round(&world, &mut checker, lease, false, &dir).await;
                }
            }
            checker
        })
    };

    // The faults, one after another, for `secs`.
    let faults_from = world.ms();
    let mut faults_rng = Rng::new(rng.next());
    inject(
        args,
        &world,
        &launcher,
        &mut slots,
        &mut inbox,
        &mut faults_rng,
    )
    .await;
    let faults_to = world.ms();

    // Everything up again; no new operations; the open ones driven to
    // their end, the person still deciding.
    world.stop_new.store(true, Ordering::Relaxed);
    let drained = Instant::now();
    let deadline = Duration::from_secs(args.drain_secs);
    for client in &mut clients {
        let left = deadline.saturating_sub(drained.elapsed());
        if tokio::time::timeout(left, &mut *client).await.is_err() {
            world.give_up.store(true, Ordering::Relaxed);
            let _ = client.await;
        }
    }
    let drain_ms = drained.elapsed().as_millis() as u64;
    // Let the person settle what is left, then stop deciding.
    tokio::time::sleep(Duration::from_secs(2)).await;
    world.person_stop.store(true, Ordering::Relaxed);
    let _ = person.await;
    checking.store(false, Ordering::Relaxed);
    let mut checker = checker.await.map_err(|e| e.to_string())?;
    check::round(&world, &mut checker, args.lease_ms, true, dir).await;
    for slot in slots.iter_mut().chain(std::iter::once(&mut inbox)) {
        slot.kill().await;
    }
    let report = figures(args, &world, replay, faults_from, faults_to, drain_ms);
    print!("{report}");
    if let Some(path) = &args.report {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| e.to_string())?;
        let _ = file.write_all(report.as_bytes());
    }
    Ok(world.violations.lock().unwrap().is_empty())
}

/// ORD-2000 onwards, each of a large total, before the replicas read the
/// shop's orders.
async fn seed_orders(db: &Db) -> Result<(), String> {
    let rows: Vec<String> = (0..world::SEEDED_ORDERS)
        .map(|i| {
            format!(
                "('ORD-{}', 'CUS-{}', {}, 'BRL')",
                world::FIRST_ORDER + i,
                100 + i,
                world::SEEDED_TOTAL
            )
        })
        .collect();
    let sql = format!(
        "INSERT INTO orders_orders (order_id, customer_id, total_cents, currency) VALUES {} ON CONFLICT DO NOTHING",
        rows.join(", ")
    );
    match db {
        Db::Postgres { url, .. } => {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            client.batch_execute(&sql).await.map_err(|e| e.to_string())
        }
        Db::Sqlite { path } => {
            let c = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            c.execute_batch(&sql).map_err(|e| e.to_string())
        }
    }
}

fn publish(world: &World, slots: &[Slot], inbox: &Slot) {
    let mut replicas = world.replicas.write().unwrap();
    for (i, slot) in slots.iter().enumerate() {
        replicas[i] = slot.addr.clone();
    }
    *world.inbox.write().unwrap() = inbox.addr.clone();
}

const REPLICA_POINTS: [&str; 9] = [
    "after_start",
    "after_claim",
    "before_complete",
    "after_complete",
    "awaiting_approval",
    "refund_before_commit",
    "refund_after_commit",
    "note_before_commit",
    "note_after_commit",
];
const INBOX_POINTS: [&str; 2] = ["before_decision", "after_decision"];

/// The fault injector: a shuffled round of every kind first (a short run
/// sees each), then kinds at random, for `secs`; then everything up.
async fn inject(
    args: &Args,
    world: &World,
    launcher: &Launcher,
    slots: &mut [Slot],
    inbox: &mut Slot,
    rng: &mut Rng,
) {
    let mut kinds: Vec<&'static str> = vec!["kill", "stop", "crash_point", "crash_point"];
    if matches!(world.db, Db::Postgres { .. }) {
        kinds.extend(["terminate", "pg_restart"]);
    }
    let mut first: Vec<&'static str> = kinds.clone();
    for i in (1..first.len()).rev() {
        first.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let end = Duration::from_secs(args.secs);
    let start = Instant::now();
    let mut n = 0usize;
    let mut crash_points = 0u32;
    while start.elapsed() < end {
        tokio::time::sleep(Duration::from_millis(
            rng.range(args.fault_min_ms, args.fault_max_ms),
        ))
        .await;
        if start.elapsed() >= end {
            break;
        }
        let kind = if n < first.len() {
            first[n]
        } else {
            kinds[rng.below(kinds.len() as u64) as usize]
        };
        n += 1;
        let started = world.ms();
        let (target, detail) = match kind {
            "kill" => {
                let r = rng.below(slots.len() as u64) as usize;
                slots[r].kill().await;
                publish(world, slots, inbox);
                tokio::time::sleep(Duration::from_millis(rng.range(300, 2000))).await;
                let detail = restart(launcher, &mut slots[r], None).await;
                publish(world, slots, inbox);
                (format!("replica {r}"), detail)
            }
            "stop" => {
                let r = rng.below(slots.len() as u64) as usize;
                slots[r].stop();
                let held = args.lease_ms + rng.range(1000, 3000);
                tokio::time::sleep(Duration::from_millis(held)).await;
                slots[r].cont();
                (format!("replica {r}"), format!("stopped {held} ms"))
            }
            "terminate" => (String::from("postgres"), terminate(world).await),
            "pg_restart" => {
                let immediate = rng.chance(50);
                let Db::Postgres { pg, .. } = &world.db else {
                    continue;
                };
                let pg = pg.clone();
                let done = tokio::task::spawn_blocking(move || pg.restart(immediate))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r);
                (
                    String::from("postgres"),
                    format!(
                        "{} restart: {}",
                        if immediate { "immediate" } else { "fast" },
                        done.err().unwrap_or_else(|| "ok".into())
                    ),
                )
            }
            _ => {
                // The example's crash points, switched on for one process.
                // The first two are the points where an effect has
                // happened and its answer is lost: a note's commit, a
                // result not yet stored.
                crash_points += 1;
                let on_inbox = crash_points > 2 && rng.chance(20);
                let (slot, point, target) = if on_inbox {
                    let p = INBOX_POINTS[rng.below(2) as usize];
                    (&mut *inbox, p, String::from("inbox"))
                } else {
                    let r = rng.below(slots.len() as u64) as usize;
                    let p = match crash_points {
                        1 => "note_after_commit",
                        2 => "before_complete",
                        _ => REPLICA_POINTS[rng.below(REPLICA_POINTS.len() as u64) as usize],
                    };
                    (&mut slots[r], p, format!("replica {r}"))
                };
                slot.kill().await;
                let mut detail = restart(launcher, slot, Some(point)).await;
                publish(world, slots, inbox);
                let slot = pick(slots, inbox, on_inbox, &target);
                let waited = Instant::now();
                let mut reached = None;
                while waited.elapsed() < Duration::from_secs(12) {
                    if let Some(p) = slot.at_crash_point() {
                        reached = Some(p);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if reached.is_some() {
                    tokio::time::sleep(Duration::from_millis(rng.range(100, 1500))).await;
                }
                slot.kill().await;
                publish(world, slots, inbox);
                let slot = pick(slots, inbox, on_inbox, &target);
                let again = restart(launcher, slot, None).await;
                publish(world, slots, inbox);
                detail = format!(
                    "{point}: {}{detail}{again}",
                    if reached.is_some() {
                        "reached, killed"
                    } else {
                        "not reached in 12 s, killed"
                    }
                );
                (target, detail)
            }
        };
        let fault = Fault {
            kind,
            target,
            start_ms: started,
            end_ms: world.ms(),
            detail,
        };
        println!(
            "chaos: t={:>6} ms fault {:<11} {:<10} {}",
            fault.start_ms, fault.kind, fault.target, fault.detail
        );
        world.faults.lock().unwrap().push(fault);
    }
    for slot in slots.iter_mut() {
        if slot.stopped {
            slot.cont();
        }
        if slot.child.is_none() {
            let _ = restart(launcher, slot, None).await;
        }
    }
    publish(world, slots, inbox);
}

/// The inbox's slot, or the replica's `target` names.
fn pick<'a>(
    slots: &'a mut [Slot],
    inbox: &'a mut Slot,
    on_inbox: bool,
    target: &str,
) -> &'a mut Slot {
    if on_inbox {
        return inbox;
    }
    let i = slots
        .iter()
        .position(|s| target.ends_with(&format!(" {}", s.index)))
        .unwrap_or(0);
    &mut slots[i]
}

/// Starts the slot's next process; what went wrong, if anything.
async fn restart(launcher: &Launcher, slot: &mut Slot, crash_at: Option<&str>) -> String {
    for _ in 0..5 {
        match launcher.start(slot, crash_at).await {
            Ok(()) => return String::new(),
            Err(why) => {
                eprintln!("chaos: restart failed, again: {why}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    String::from(" (restart failed 5 times)")
}

/// Every connection to the harness's database ended by the server.
async fn terminate(world: &World) -> String {
    let Db::Postgres { pg, .. } = &world.db else {
        return String::new();
    };
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port);
    let Ok((client, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await
    else {
        return "could not connect".into();
    };
    tokio::spawn(async move {
        let _ = connection.await;
    });
    match client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'chaos' AND pid <> pg_backend_pid()",
            &[],
        )
        .await
    {
        Ok(rows) => format!("{} connections terminated", rows.len()),
        Err(e) => format!("failed: {e}"),
    }
}

fn p99(mut xs: Vec<u64>) -> u64 {
    if xs.is_empty() {
        return 0;
    }
    xs.sort_unstable();
    xs[((xs.len() as f64) * 0.99).ceil() as usize - 1]
}

/// The run's figures, as Markdown.
fn figures(args: &Args, world: &World, replay: &str, from: u64, to: u64, drain_ms: u64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let ops = world.ops.lock().unwrap().clone();
    let faults = world.faults.lock().unwrap().clone();
    let violations = world.violations.lock().unwrap().clone();
    let latencies = world.latencies.lock().unwrap().clone();
    let codes = world.codes.lock().unwrap().clone();
    let intents = world.intents.lock().unwrap().clone();
    // A fault's window: from its start to 2 s after it ended.
    let windows: Vec<(u64, u64)> = faults
        .iter()
        .map(|f| (f.start_ms, f.end_ms + 2000))
        .collect();
    let in_fault = |t: u64| windows.iter().any(|(a, b)| *a <= t && t <= *b);
    let mut union = 0u64;
    let mut last_end = 0u64;
    for (a, b) in &windows {
        let a = (*a).max(last_end);
        if *b > a {
            union += b - a;
            last_end = *b;
        }
    }
    let during: Vec<u64> = latencies
        .iter()
        .filter(|(s, _)| in_fault(*s))
        .map(|(_, l)| *l)
        .collect();
    let outside: Vec<u64> = latencies
        .iter()
        .filter(|(s, _)| !in_fault(*s) && *s >= from && *s <= to)
        .map(|(_, l)| *l)
        .collect();
    let secs = (to.saturating_sub(from)) as f64 / 1000.0;
    let outside_secs = secs - union as f64 / 1000.0;
    let _ = writeln!(out, "\n## Chaos run: seed {}, {}\n", world.seed, args.store);
    let _ = writeln!(
        out,
        "Replay: `cargo run -p chaos -- --seed {} {}`\n",
        world.seed,
        replay
            .split_once(&format!("--seed {} ", world.seed))
            .map_or("", |(_, r)| r)
    );
    let _ = writeln!(
        out,
        "{} replicas, {} clients, {:.0} s of faults, then {:.1} s to drive the open operations to their end.\n",
        args.replicas,
        args.clients,
        secs,
        drain_ms as f64 / 1000.0
    );
    let finished = ops.iter().filter(|o| o.final_code.is_some()).count();
    let _ = writeln!(out, "| figure | value |\n|---|---|");
    let _ = writeln!(
        out,
        "| requests sent | {} |",
        world.requests.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "| tool results received | {} |", latencies.len());
    let _ = writeln!(
        out,
        "| requests without an answer (refused connection, timeout, 5xx) | {} |",
        world.transport_errors.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "| operations | {} ({} driven to a final answer, {} given up) |",
        ops.len(),
        finished,
        ops.len() - finished
    );
    let _ = writeln!(out, "| person's decisions | {} |", intents.len());
    let _ = writeln!(out, "| faults injected | {} |", faults.len());
    let _ = writeln!(
        out,
        "| invariant checks (rounds, items) | {}, {} |",
        world.check_rounds.load(Ordering::Relaxed),
        world.checks.load(Ordering::Relaxed)
    );
    let _ = writeln!(out, "| violations | {} |", violations.len());
    let _ = writeln!(
        out,
        "| throughput during faults / outside | {:.1} / {:.1} results/s |",
        during.len() as f64 / (union as f64 / 1000.0).max(0.001),
        outside.len() as f64 / outside_secs.max(0.001)
    );
    let _ = writeln!(
        out,
        "| p99 latency during faults / outside | {} / {} ms |",
        p99(during.clone()),
        p99(outside.clone())
    );
    let mut by_kind: std::collections::BTreeMap<&str, (u64, Vec<String>)> = Default::default();
    for f in &faults {
        let e = by_kind.entry(f.kind).or_default();
        e.0 += 1;
        if f.kind == "crash_point" {
            e.1.push(
                f.detail.split(':').next().unwrap_or_default().to_owned()
                    + if f.detail.contains("not reached") {
                        " (not reached)"
                    } else {
                        ""
                    },
            );
        }
    }
    let _ = writeln!(out, "\nFaults by kind:\n\n| kind | count |\n|---|---|");
    for (k, (n, points)) in &by_kind {
        // Each crash point once, with how many times it was played.
        let mut counted: std::collections::BTreeMap<&str, u64> = Default::default();
        for point in points {
            *counted.entry(point.as_str()).or_default() += 1;
        }
        let points: Vec<String> = counted
            .iter()
            .map(|(point, times)| format!("{point} {times}"))
            .collect();
        let _ = writeln!(
            out,
            "| {k} | {n}{} |",
            if points.is_empty() {
                String::new()
            } else {
                format!(" ({})", points.join(", "))
            }
        );
    }
    let mut by_op: std::collections::BTreeMap<(String, String), u64> = Default::default();
    for o in &ops {
        let kind = match o.kind {
            Kind::Read => "get_order",
            Kind::Messages => "read_messages",
            Kind::Refund => "refund_order",
            Kind::RefundTask => "refund_order (task)",
            Kind::Note => "add_note",
        };
        *by_op
            .entry((
                kind.to_owned(),
                o.final_code.clone().unwrap_or_else(|| "(given up)".into()),
            ))
            .or_default() += 1;
    }
    let _ = writeln!(
        out,
        "\nOperations by final answer:\n\n| operation | final answer | count |\n|---|---|---|"
    );
    for ((k, c), n) in &by_op {
        let _ = writeln!(out, "| {k} | {c} | {n} |");
    }
    let mut codes: Vec<_> = codes.into_iter().collect();
    codes.sort();
    let _ = writeln!(
        out,
        "\nEvery tool result by code (retries included):\n\n| tool | code | count |\n|---|---|---|"
    );
    for ((t, c), n) in codes {
        let _ = writeln!(out, "| {t} | {c} | {n} |");
    }
    let given_up: Vec<_> = ops.iter().filter(|o| o.final_code.is_none()).collect();
    if !given_up.is_empty() {
        let _ = writeln!(out, "\nOperations given up at the end of the drain:\n");
        for op in given_up {
            let _ = writeln!(out, "* {} {} {}:", op.id, op.tool, op.args);
            for (t, e) in op
                .events
                .iter()
                .take(6)
                .chain(op.events.iter().skip(6).rev().take(3).rev())
            {
                let _ = writeln!(out, "  * {t} ms {e}");
            }
        }
    }
    if violations.is_empty() {
        let _ = writeln!(out, "\nNo violation (seed {}).", world.seed);
    } else {
        let _ = writeln!(out, "\nViolations (seed {}):\n", world.seed);
        for v in &violations {
            let _ = writeln!(out, "* [{}] at {} ms: {}", v.invariant, v.at_ms, v.what);
            for id in &v.ops {
                if let Some(op) = ops.iter().find(|o| &o.id == id) {
                    let _ = writeln!(out, "  * {} {} {}:", op.id, op.tool, op.args);
                    for (t, e) in &op.events {
                        let _ = writeln!(out, "    * {t} ms {e}");
                    }
                }
            }
        }
        let _ = writeln!(out, "\nThe faults of the run:\n");
        for f in &faults {
            let _ = writeln!(
                out,
                "* {}..{} ms {} {} {}",
                f.start_ms, f.end_ms, f.kind, f.target, f.detail
            );
        }
    }
    out
}
