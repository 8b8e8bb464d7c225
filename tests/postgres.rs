//! The Postgres store, against a real server: the conformance suite every
//! store passes, claims raced by many tasks, two dispatchers (two replicas)
//! on one database, and a connection cut in the middle of a call.
//!
//! The server's URL comes from `TOOLCALL_POSTGRES_URL` (CI sets it); without
//! it every test here says loudly that it was skipped. Each test works in a
//! schema of its own and drops it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use toolcall_testkit::bank::{Bank, send};
use toolcall_testkit::store::asked;
use toolcall_tests::{key, postgres_schema, postgres_url};

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use toolcall::store::prelude::*;
use toolcall::store::{AskApproval, Claim, DecideOutcome, Lease, PendingQuery, now_ms};
use toolcall::{Call, Code, Ctx, Dispatcher, Rejection, ToolResult, tool, tools};
use toolcall_postgres::PostgresStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
}

/// Two stores on one schema of `test`'s own: two replicas.
async fn two_replicas(url: &str, test: &str) -> (PostgresStore, PostgresStore) {
    let schema = postgres_schema(test);
    let first = PostgresStore::connect_in_schema(url, &schema)
        .await
        .unwrap();
    let second = PostgresStore::connect_in_schema(url, &schema)
        .await
        .unwrap();
    (first, second)
}

/// Drops the schema of [`two_replicas`].
async fn drop_both(first: PostgresStore, second: PostgresStore) {
    drop(second);
    first.drop_schema().await.unwrap();
}

/// `count` stores on one schema of `test`'s own, shared by tasks.
async fn replicas(url: &str, test: &str, count: usize) -> Vec<Arc<PostgresStore>> {
    let schema = postgres_schema(test);
    let mut stores = Vec::new();
    for _ in 0..count {
        let store = PostgresStore::connect_in_schema(url, &schema).await;
        stores.push(Arc::new(store.unwrap()));
    }
    stores
}

/// Drops the schema of [`replicas`], once every task let go of its store.
async fn drop_all(mut stores: Vec<Arc<PostgresStore>>) {
    drop(stores.split_off(1));
    Arc::into_inner(stores.pop().unwrap())
        .unwrap()
        .drop_schema()
        .await
        .unwrap();
}

/// Runs `race` on `count` replicas of one schema, `test`'s own, when the
/// tests have a Postgres server; then drops the schema.
fn race_on_replicas<Race>(
    test: &str,
    count: usize,
    race: impl FnOnce(Vec<Arc<PostgresStore>>) -> Race,
) where
    Race: std::future::Future<Output = ()>,
{
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let stores = replicas(&url, test, count).await;
        race(stores.clone()).await;
        drop_all(stores).await;
    });
}

/// Runs `task(i, store)` for each `i` below `count` at once, the stores
/// taken in turn: what each answered, in order.
async fn at_once<T, Task, Answer>(stores: &[Arc<PostgresStore>], count: usize, task: Task) -> Vec<T>
where
    Task: Fn(usize, Arc<PostgresStore>) -> Answer,
    Answer: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = (0..count)
        .map(|i| tokio::spawn(task(i, Arc::clone(&stores[i % stores.len()]))))
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// Runs the shared suite `$suite` on two stores of one schema, `$test`'s
/// own: a macro, as the suites are generic `async fn`s over borrowed stores.
macro_rules! passes {
    ($suite:ident, $test:literal) => {{
        let Some(url) = postgres_url() else { return };
        runtime().block_on(async {
            let (first, second) = two_replicas(&url, $test).await;
            toolcall_tests::$suite(&first, &second).await;
            drop_both(first, second).await;
        });
    }};
}

#[test]
fn postgres_store_conforms_across_two_connections() {
    passes!(conformance, "conformance");
}

#[test]
fn claims_raced_by_many_tasks_have_one_winner() {
    race_on_replicas("race", 6, |stores| async move {
        let now = now_ms();
        let claims = at_once(&stores, stores.len(), |_, store| async move {
            store
                .claim(
                    &key("race"),
                    Lease {
                        now_ms: now,
                        lease_ms: 60_000,
                    },
                )
                .await
                .unwrap()
        })
        .await;
        let winners = claims.iter().filter(|c| **c == Claim::Acquired).count();
        assert_eq!(winners, 1);
    });
}

#[test]
fn two_replicas_on_one_database_run_each_call_once() {
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let schema = postgres_schema("replicas");
        let bank = Bank::new();
        let mut replicas = Vec::new();
        for _ in 0..2 {
            let store = PostgresStore::connect_in_schema(&url, &schema)
                .await
                .unwrap();
            let d = Dispatcher::builder(tools![send].unwrap(), Arc::clone(&bank))
                .store(store)
                .max_steps(1000)
                .max_duplicate_calls(1000)
                .build()
                .unwrap();
            replicas.push(Arc::new(d));
        }
        let mut tasks = Vec::new();
        for cents in 1..=5 {
            for replica in &replicas {
                let d = Arc::clone(replica);
                tasks.push(tokio::spawn(async move {
                    let args = format!(r#"{{"cents": {cents}}}"#);
                    d.execute(Call::new("send", args.as_str()).session("s"))
                        .await
                }));
            }
        }
        let mut results: Vec<ToolResult> = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        assert_eq!(
            bank.transfers(),
            5,
            "five distinct calls, each run once: {results:?}"
        );
        assert!(results.iter().all(|r| r.ok), "{results:?}");
        assert_eq!(
            results.iter().filter(|r| r.replayed).count(),
            5,
            "the other replica replayed each"
        );
        drop(replicas);
        drop_schema(&url, &schema).await;
    });
}

/// Drops a test's schema, through a store of its own.
async fn drop_schema(url: &str, schema: &str) {
    PostgresStore::connect_in_schema(url, schema)
        .await
        .unwrap()
        .drop_schema()
        .await
        .unwrap();
}

/// `url` with `query` added to its query string.
fn with_query(url: &str, query: &str) -> String {
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}{query}")
}

/// The backends the server has open for the connections named `name`.
async fn backends(url: &str, name: &str) -> i64 {
    let (probe, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    probe
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .await
        .unwrap()
        .get(0)
}

/// 32 conversations, each sending its call twice at once (a model's retry),
/// through one dispatcher whose store has a pool of at most `size`
/// connections, named `name`: every call runs once and its twin is
/// replayed. The dispatcher, to ask more of.
async fn thirty_two_conversations(
    url: &str,
    schema: &str,
    name: &str,
    size: usize,
) -> Arc<Dispatcher<Bank, PostgresStore>> {
    let pooled = with_query(
        url,
        &format!("pool_max_size={size}&application_name={name}"),
    );
    let bank = Bank::new();
    let store = PostgresStore::connect_in_schema(&pooled, schema)
        .await
        .unwrap();
    let d = Arc::new(
        Dispatcher::builder(tools![send].unwrap(), Arc::clone(&bank))
            .store(store)
            .build()
            .unwrap(),
    );
    let mut tasks = Vec::new();
    for conversation in 0..32 {
        for _ in 0..2 {
            let d = Arc::clone(&d);
            tasks.push(tokio::spawn(async move {
                let session = format!("c{conversation}");
                d.execute(Call::new("send", r#"{"cents": 7}"#).session(session.as_str()))
                    .await
            }));
        }
    }
    let mut results: Vec<ToolResult> = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    assert!(results.iter().all(|r| r.ok), "{results:?}");
    assert_eq!(bank.transfers(), 32, "one run a conversation");
    assert_eq!(results.iter().filter(|r| r.replayed).count(), 32);
    d
}

/// A pool of at most 4 serves 32 conversations calling at once, and the
/// server never saw more than 4 of the store's connections, nor only one:
/// statements that write take connections of their own, so that their
/// commits wait for the log together. (Sent on one shared connection, as
/// reads are, they waited in turn: a third fewer refunds a second.)
#[test]
fn a_pool_of_four_serves_thirty_two_conversations_each_call_once() {
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let schema = postgres_schema("pool");
        let name = format!("toolcall_pool_{}", std::process::id());
        let d = thirty_two_conversations(&url, &schema, &name, 4).await;
        let open = backends(&url, &name).await;
        assert!(
            (2..=4).contains(&open),
            "{open} connections of the store's pool"
        );
        drop(d);
        drop_schema(&url, &schema).await;
    });
}

/// Reads what was sent: read-only.
#[tool]
async fn sent(
    ctx: &Ctx<Bank>,
    /// Whose.
    account: String,
) -> Result<Value, Rejection> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(json!({"account": account, "runs": ctx.state.transfers()}))
}

/// 32 conversations, each a read alone (a stateless request's), twice at
/// once, through a store with a pool of 8 connections named `name`: every
/// answer ok. The dispatcher, to ask more of.
async fn thirty_two_reads_alone(
    url: &str,
    schema: &str,
    name: &str,
) -> Arc<Dispatcher<Bank, PostgresStore>> {
    let pooled = with_query(url, &format!("pool_max_size=8&application_name={name}"));
    let store = PostgresStore::connect_in_schema(&pooled, schema)
        .await
        .unwrap();
    let d = Arc::new(
        Dispatcher::builder(tools![send, sent].unwrap(), Bank::new())
            .store(store)
            .build()
            .unwrap(),
    );
    let mut tasks = Vec::new();
    for conversation in 0..64 {
        let d = Arc::clone(&d);
        tasks.push(tokio::spawn(async move {
            let session = format!("r{conversation}");
            d.execute(
                Call::new("sent", r#"{"account": "a"}"#)
                    .session(session.as_str())
                    .alone(true),
            )
            .await
        }));
    }
    for task in tasks {
        let answer = task.await.unwrap();
        assert!(answer.ok, "{answer:?}");
    }
    d
}

/// The store's reads share a quarter of its pool: 64 reads alone at once
/// through a pool of 8 are served over 2 connections, what they send at the
/// same moment going out together. (Each on a connection of its own, they
/// took all 8.) When the server ends those connections, the next reads are
/// served over new ones, at most one answering STORE_UNAVAILABLE for each
/// connection ended; and side effects, which take connections of their
/// own, still run once each.
#[test]
fn concurrent_reads_share_a_quarter_of_the_pool_and_outlive_its_connections() {
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let schema = postgres_schema("shared");
        let name = format!("toolcall_shared_{}", std::process::id());
        let d = thirty_two_reads_alone(&url, &schema, &name).await;
        assert_eq!(backends(&url, &name).await, 2, "the shared connections");

        let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let ended: i64 = admin
            .query_one(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
                 FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(ended, 2);
        // The connections' ends reach the store as they do; a read may
        // meet one first and answer that the store is unavailable.
        let mut unavailable = 0;
        let mut done = 0;
        let alone_after = Call::new("sent", r#"{"account": "a"}"#)
            .session("after")
            .alone(true);
        while done < 4 {
            let answer = d.execute(alone_after).await;
            if answer.ok {
                done += 1;
            } else {
                assert_eq!(answer.code, Code::StoreUnavailable, "{answer:?}");
                unavailable += 1;
                assert!(unavailable <= 2, "{answer:?}");
            }
        }
        for conversation in 0..4 {
            let session = format!("w{conversation}");
            let answer = d
                .execute(Call::new("send", r#"{"cents": 9}"#).session(session.as_str()))
                .await;
            assert!(answer.ok, "{answer:?}");
        }
        assert_eq!(d.state().transfers(), 4);
        drop(d);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_connection_cut_mid_call_is_a_clear_code_and_the_next_call_works() {
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let schema = postgres_schema("cut");
        let proxy = Proxy::start(&url).await;
        let bank = Bank::new();
        let store = PostgresStore::connect_in_schema(&proxy.url(&url), &schema)
            .await
            .unwrap();
        let d = Dispatcher::builder(tools![send].unwrap(), Arc::clone(&bank))
            .store(store)
            .build()
            .unwrap();

        assert!(
            d.execute(Call::new("send", r#"{"cents": 1}"#).session("default"))
                .await
                .ok
        );
        // The connection drops while the second call runs: its result cannot be
        // recorded, so it is not reported as a plain success.
        let cutter = Arc::clone(&proxy);
        *bank.during_next_send.lock().unwrap() = Some(Box::new(move || cutter.cut()));
        let cut = d
            .execute(Call::new("send", r#"{"cents": 2}"#).session("default"))
            .await;
        assert_eq!(cut.code, Code::StoreUnavailable, "{cut:?}");
        assert!(!cut.ok);
        assert_eq!(
            bank.transfers(),
            2,
            "it did run: its outcome is what is unknown"
        );
        // The server is back; the store connects again on the next call.
        proxy.restore();
        let next = d
            .execute(Call::new("send", r#"{"cents": 3}"#).session("default"))
            .await;
        assert!(next.ok, "{next:?}");
        assert_eq!(bank.transfers(), 3);
        drop_schema(&url, &schema).await;
    });
}

/// A TCP proxy to the server that can drop every connection it carries.
struct Proxy {
    port: u16,
    generation: AtomicU32,
    down: AtomicBool,
}

impl Proxy {
    async fn start(url: &str) -> Arc<Proxy> {
        let target = server_address(url);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Arc::new(Proxy {
            port: listener.local_addr().unwrap().port(),
            generation: AtomicU32::new(0),
            down: AtomicBool::new(false),
        });
        let shared = Arc::clone(&proxy);
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if shared.down.load(Ordering::SeqCst) {
                    continue; // refused: the socket is dropped at once
                }
                let target = target.clone();
                let proxy = Arc::clone(&shared);
                let born = proxy.generation.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let pump = tokio::io::copy_bidirectional(&mut client, &mut server);
                    tokio::pin!(pump);
                    loop {
                        tokio::select! {
                            _ = &mut pump => break,
                            _ = tokio::time::sleep(Duration::from_millis(5)) => {
                                if proxy.generation.load(Ordering::SeqCst) != born {
                                    // Leaving drops both sockets: the connection is gone.
                                    break;
                                }
                            }
                        }
                    }
                });
            }
        });
        proxy
    }

    /// Drops every connection open now and refuses new ones until `restore`.
    fn cut(&self) {
        self.down.store(true, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Lets connections through again.
    fn restore(&self) {
        self.down.store(false, Ordering::SeqCst);
    }

    fn url(&self, url: &str) -> String {
        url.replacen(&server_address(url), &format!("127.0.0.1:{}", self.port), 1)
    }
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn server_address(url: &str) -> String {
    let rest = url.split("://").nth(1).unwrap_or(url);
    let rest = rest.rsplit('@').next().unwrap_or(rest);
    let host_port = rest.split('/').next().unwrap_or(rest);
    if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:5432")
    }
}

/// A page of the inbox is read from one snapshot: while another replica
/// asks question after question, every page counts exactly what it lists
/// (its count and its items once came from two statements, and a question
/// asked between them made the inbox count 3 and list 4).
#[test]
fn a_page_of_the_inbox_counts_what_it_lists_while_questions_come() {
    race_on_replicas("page_snapshot", 2, |stores| async move {
        const QUESTIONS: u32 = 300;
        let done = Arc::new(AtomicBool::new(false));
        let asking = {
            let (store, done) = (Arc::clone(&stores[0]), Arc::clone(&done));
            tokio::spawn(async move {
                for n in 0..QUESTIONS {
                    store.put_approval(&asked(&format!("q{n}"))).await.unwrap();
                }
                done.store(true, Ordering::SeqCst);
            })
        };
        let (mut pages, mut disagreed) = (0, Vec::new());
        while !done.load(Ordering::SeqCst) || pages < 20 {
            let page = stores[1]
                .pending_page(&PendingQuery::new(now_ms(), 1_000))
                .await
                .unwrap();
            pages += 1;
            if page.total != page.items.len() as u64 {
                disagreed.push((page.total, page.items.len()));
            }
        }
        asking.await.unwrap();
        assert!(pages >= 20, "pages read while questions came: {pages}");
        assert_eq!(
            disagreed,
            Vec::new(),
            "(counted, listed) of the pages that disagreed"
        );
    });
}

#[test]
fn decisions_raced_by_many_replicas_have_one_winner() {
    race_on_replicas("decide_race", 4, |stores| async move {
        stores[0].put_approval(&asked("race")).await.unwrap();
        let decided = at_once(&stores, 8, |i, store| async move {
            let decision = toolcall_tests::decision(true, &format!("p{i}"), now_ms());
            let outcome = store
                .decide_approval(&toolcall_tests::deciding_now("race", &decision))
                .await
                .unwrap();
            (outcome, decision.by)
        })
        .await;
        let mut winners = Vec::new();
        for (outcome, by) in decided {
            match outcome {
                DecideOutcome::Decided => winners.push(by),
                DecideOutcome::AlreadyDecided => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "{winners:?}");
        let kept = stores[0].approval("race").await.unwrap().unwrap();
        assert_eq!(kept.approval.decision.unwrap().by, winners[0]);
    });
}

#[test]
fn postgres_store_asks_once_per_call_and_pages_its_inbox() {
    passes!(approvals_conformance, "approvals");
}

/// Eight tasks on four replicas ask for the same call at once: one
/// approval is created, and every other asker is answered with it.
#[test]
fn askers_racing_with_one_call_on_many_replicas_create_one_approval() {
    race_on_replicas("ask_race", 4, |stores| async move {
        let now = now_ms();
        let answers = at_once(&stores, 8, |i, store| async move {
            let asked = toolcall_tests::asked_call(&format!("race-{i}"), "race", now);
            store.ask_approval(&asked, 20).await.unwrap()
        })
        .await;
        let pending = stores[0].pending_approvals(now, 100).await.unwrap();
        assert_eq!(pending.len(), 1, "{pending:?}");
        let mut created = 0;
        for answer in &answers {
            match answer {
                AskApproval::Created => created += 1,
                AskApproval::Existing(entry) => assert_eq!(entry.approval.id, pending[0].id),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(created, 1, "{answers:?}");
    });
}

/// The agent waits on LISTEN: a decision made by another replica wakes it
/// at once, well before it would look again by itself (every 2 s).
#[test]
fn a_waiting_agent_is_woken_by_the_decision() {
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let schema = postgres_schema("wake");
        let agent = Arc::new(
            PostgresStore::connect_in_schema(&url, &schema)
                .await
                .unwrap(),
        );
        let inbox = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        agent.put_approval(&asked("w1")).await.unwrap();
        let waiting = {
            let agent = Arc::clone(&agent);
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                let entry = agent.wait_approval("w1", now_ms() + 20_000).await.unwrap();
                (entry, started.elapsed())
            })
        };
        // Long enough for the waiter to have looked once and gone to sleep.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let decided_at = std::time::Instant::now();
        let yes = toolcall_tests::ana_approves(&inbox, "w1").await;
        let (entry, waited) = waiting.await.unwrap();
        assert_eq!(entry.unwrap().approval.decision, Some(yes));
        let after_decision = decided_at.elapsed();
        assert!(
            after_decision < Duration::from_millis(1_000),
            "woken {after_decision:?} after the decision (waited {waited:?})"
        );
        drop(agent);
        inbox.drop_schema().await.unwrap();
    });
}

#[test]
fn postgres_store_keeps_the_operators_controls_rates_and_signatures() {
    passes!(controls_conformance, "controls");
}

/// Eight tasks on two replicas give the last of two signatures at once:
/// one decides.
#[test]
fn last_signatures_racing_on_two_replicas_decide_once() {
    let Some(url) = postgres_url() else { return };
    runtime().block_on(async {
        let (first, second) = two_replicas(&url, "sign_race").await;
        let (first, second) = (Arc::new(first), Arc::new(second));
        toolcall_tests::last_signatures_race(vec![first.clone(), second.clone()]).await;
        let both = (Arc::into_inner(first), Arc::into_inner(second));
        drop_both(both.0.unwrap(), both.1.unwrap()).await;
    });
}

#[path = "postgres/transaction.rs"]
mod transaction;
