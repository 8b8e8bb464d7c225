//! `crashy`: side-effecting calls through a dispatcher over a shared store
//! (SQLite or Postgres), one process a call, so that the crash matrix
//! (`tests/crash_matrix.rs`) can kill a process at a named point and ask
//! another what survived.
//!
//! Four tools, all high-risk, write to a ledger in the same database as the
//! store, one for each kind of backend:
//!
//! * `keyed` honours the idempotency key (`#[tool(idempotent_backend)]`):
//!   a key it has seen is not applied again;
//! * `asked` can be asked what a key did (`reconcile`);
//! * `plain` neither: a person answers its unknown outcomes;
//! * `lent` can be asked, and on Postgres writes in the call's transaction
//!   (`Ctx::transaction`), which commits with the call's result: its
//!   ledger's crash points are then before that commit.
//!
//! ```text
//! crashy call    --store S [--schema X] --session ID --tool T --text X
//!                [--confirmed] [--approval ID] [--inbox] [--lose]
//!                [--max-retries N] [--lease-ms N] [--audit FILE]
//! crashy applied --store S [--schema X] --tool T --text X
//! crashy pending --store S [--schema X] --session ID
//! crashy decide  --store S [--schema X] --id ID --approved true|false
//! crashy serve   --store S [--schema X] --token TOKEN
//! ```
//!
//! `serve` is the approval inbox over the store (`toolcall_inbox`), on a
//! loopback port it prints as `listening ADDR`, for the person `on-call`
//! who signs in with TOKEN.
//!
//! With `CRASHY_CRASH_AT=point[,point]` in the environment, a call that
//! reaches a named point (the pipeline's, `toolcall_core::crash`, or the
//! ledger's `before_commit` and `after_commit`) writes `crash point: NAME`
//! on standard error and stops there for ever: the test kills it.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolcall::store::{ApprovalDecision, PendingQuery, Store, now_ms};
use toolcall::{Approvals, Call, Ctx, Dispatcher, JsonLinesAudit, Policy, ToolError, tool, tools};
use toolcall_postgres::PostgresStore;
use toolcall_sqlite::SqliteStore;

/// The ledger's crash point before its transaction commits.
const BEFORE_COMMIT: &str = "before_commit";
/// The ledger's crash point after its transaction committed.
const AFTER_COMMIT: &str = "after_commit";

fn crash_hook(point: &'static str) {
    let named = std::env::var("CRASHY_CRASH_AT").unwrap_or_default();
    if named.split(',').any(|name| name.trim() == point) {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "crash point: {point}");
        let _ = stderr.flush();
        loop {
            std::thread::park();
        }
    }
}

/// Where the tools write: tables beside the store's.
enum Ledger {
    Sqlite(Mutex<rusqlite::Connection>),
    Postgres(tokio_postgres::Client),
}

struct Backend {
    ledger: Ledger,
    /// The Postgres store's pool, for the call's transaction.
    pool: Option<toolcall_postgres::Pool>,
    /// Lose the answer of the next commit (a transient error after it).
    lose: AtomicBool,
}

const SQLITE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS crashy_writes (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    tool TEXT NOT NULL,
    key  TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS crashy_keys (key TEXT PRIMARY KEY);
";

const POSTGRES_TABLES: &str = "
CREATE TABLE IF NOT EXISTS crashy_writes (
    seq  BIGSERIAL PRIMARY KEY,
    tool TEXT NOT NULL,
    key  TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS crashy_keys (key TEXT PRIMARY KEY);
";

impl Ledger {
    async fn open(store: &str, schema: Option<&str>) -> Result<Ledger, String> {
        if let Some(path) = store.strip_prefix("sqlite:") {
            let conn = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
            conn.busy_timeout(Duration::from_secs(30))
                .map_err(|e| e.to_string())?;
            conn.execute_batch(SQLITE_TABLES)
                .map_err(|e| e.to_string())?;
            return Ok(Ledger::Sqlite(Mutex::new(conn)));
        }
        let (client, connection) = tokio_postgres::connect(store, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(connection);
        if let Some(schema) = schema {
            client
                .batch_execute(&format!(
                    "CREATE SCHEMA IF NOT EXISTS \"{schema}\"; SET search_path TO \"{schema}\""
                ))
                .await
                .map_err(|e| e.to_string())?;
        }
        // Two processes creating the tables at once may race: the loser's
        // error is only that they exist.
        if let Err(error) = client.batch_execute(POSTGRES_TABLES).await {
            let exists = client
                .query_one("SELECT to_regclass('crashy_keys') IS NOT NULL", &[])
                .await
                .is_ok_and(|row| row.get::<_, bool>(0));
            if !exists {
                return Err(error.to_string());
            }
        }
        Ok(Ledger::Postgres(client))
    }

    /// Applies `text` under `key` in one transaction (once per key when
    /// `dedupe`), with the crash points before and after its commit.
    async fn write(&self, tool: &str, key: &str, text: &str, dedupe: bool) -> Result<(), String> {
        match self {
            Ledger::Sqlite(conn) => {
                let mut conn = conn.lock().unwrap();
                let tx = conn
                    .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                    .map_err(|e| e.to_string())?;
                let fresh = !dedupe
                    || tx
                        .execute(
                            "INSERT INTO crashy_keys (key) VALUES (?1) ON CONFLICT DO NOTHING",
                            [key],
                        )
                        .map_err(|e| e.to_string())?
                        == 1;
                if fresh {
                    tx.execute(
                        "INSERT INTO crashy_writes (tool, key, text) VALUES (?1, ?2, ?3)",
                        [tool, key, text],
                    )
                    .map_err(|e| e.to_string())?;
                }
                toolcall_core::crash::point(BEFORE_COMMIT);
                tx.commit().map_err(|e| e.to_string())?;
            }
            Ledger::Postgres(client) => {
                client
                    .batch_execute("BEGIN")
                    .await
                    .map_err(|e| e.to_string())?;
                write_on(client, tool, key, text, dedupe).await?;
                toolcall_core::crash::point(BEFORE_COMMIT);
                client
                    .batch_execute("COMMIT")
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        toolcall_core::crash::point(AFTER_COMMIT);
        Ok(())
    }

    /// What `tool` applied under `key`, if anything.
    async fn find(&self, tool: &str, key: &str) -> Result<Option<String>, String> {
        match self {
            Ledger::Sqlite(conn) => {
                use rusqlite::OptionalExtension as _;
                conn.lock()
                    .unwrap()
                    .query_row(
                        "SELECT text FROM crashy_writes WHERE tool = ?1 AND key = ?2",
                        [tool, key],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(|e| e.to_string())
            }
            Ledger::Postgres(client) => client
                .query_opt(
                    "SELECT text FROM crashy_writes WHERE tool = $1 AND key = $2",
                    &[&tool, &key],
                )
                .await
                .map(|row| row.map(|row| row.get(0)))
                .map_err(|e| e.to_string()),
        }
    }

    /// How many times `tool` applied `text`, under any key.
    async fn applied(&self, tool: &str, text: &str) -> Result<i64, String> {
        match self {
            Ledger::Sqlite(conn) => conn
                .lock()
                .unwrap()
                .query_row(
                    "SELECT count(*) FROM crashy_writes WHERE tool = ?1 AND text = ?2",
                    [tool, text],
                    |row| row.get(0),
                )
                .map_err(|e| e.to_string()),
            Ledger::Postgres(client) => client
                .query_one(
                    "SELECT count(*) FROM crashy_writes WHERE tool = $1 AND text = $2",
                    &[&tool, &text],
                )
                .await
                .map(|row| row.get(0))
                .map_err(|e| e.to_string()),
        }
    }
}

/// The ledger's statements of [`Ledger::write`] on `client`, in a
/// transaction its caller ends.
async fn write_on(
    client: &tokio_postgres::Client,
    tool: &str,
    key: &str,
    text: &str,
    dedupe: bool,
) -> Result<(), String> {
    let fresh = !dedupe
        || client
            .execute(
                "INSERT INTO crashy_keys (key) VALUES ($1) ON CONFLICT DO NOTHING",
                &[&key],
            )
            .await
            .map_err(|e| e.to_string())?
            == 1;
    if fresh {
        client
            .execute(
                "INSERT INTO crashy_writes (tool, key, text) VALUES ($1, $2, $3)",
                &[&tool, &key, &text],
            )
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Applies `text` for `tool` under the call's idempotency key (once per
/// key when the backend `dedupe`s), then loses the answer if told to.
async fn apply(
    ctx: &Ctx<Backend>,
    tool: &str,
    text: &str,
    dedupe: bool,
) -> Result<Value, ToolError> {
    let backend = &ctx.state;
    backend
        .ledger
        .write(tool, &ctx.idempotency_key, text, dedupe)
        .await
        .map_err(ToolError::transient)?;
    if backend.lose.swap(false, Ordering::SeqCst) {
        return Err(ToolError::transient("the answer was lost"));
    }
    Ok(json!({"applied": text}))
}

/// Applies a text; the ledger keeps one write per idempotency key.
#[tool(side_effect, high_risk, idempotent_backend)]
async fn keyed(
    ctx: &Ctx<Backend>,
    /// What to apply.
    text: String,
) -> Result<Value, ToolError> {
    apply(ctx, "keyed", &text, true).await
}

/// Applies a text; the ledger can be asked what a key did.
#[tool(side_effect, high_risk, reconcile = find_asked)]
async fn asked(
    ctx: &Ctx<Backend>,
    /// What to apply.
    text: String,
) -> Result<Value, ToolError> {
    apply(ctx, "asked", &text, false).await
}

async fn find_asked(ctx: &Ctx<Backend>, key: &str) -> Result<Option<Value>, ToolError> {
    reconciled(ctx, "asked", key).await
}

/// What the ledger holds of `tool` under `key`, as a reconciled answer.
async fn reconciled(ctx: &Ctx<Backend>, tool: &str, key: &str) -> Result<Option<Value>, ToolError> {
    let found = ctx
        .state
        .ledger
        .find(tool, key)
        .await
        .map_err(ToolError::transient)?;
    Ok(found.map(|text| json!({"applied": text, "reconciled": true})))
}

/// Applies a text in the call's transaction where the store lends one on
/// the ledger's database (the ledger's crash points then come before the
/// pipeline's commit); elsewhere as `asked` does. The ledger can be asked.
#[tool(side_effect, high_risk, reconcile = find_lent)]
async fn lent(
    ctx: &Ctx<Backend>,
    /// What to apply.
    text: String,
) -> Result<Value, ToolError> {
    let in_call = match (
        ctx.transaction::<toolcall_postgres::Transaction>(),
        &ctx.state.pool,
    ) {
        (Some(lent), Some(pool)) => lent.on(pool).await.map_err(ToolError::not_applied)?,
        _ => None,
    };
    let Some(client) = in_call else {
        return apply(ctx, "lent", &text, false).await;
    };
    write_on(&client, "lent", &ctx.idempotency_key, &text, false)
        .await
        .map_err(ToolError::transient)?;
    toolcall_core::crash::point(BEFORE_COMMIT);
    toolcall_core::crash::point(AFTER_COMMIT);
    Ok(json!({"applied": text}))
}

async fn find_lent(ctx: &Ctx<Backend>, key: &str) -> Result<Option<Value>, ToolError> {
    reconciled(ctx, "lent", key).await
}

/// Applies a text; the ledger neither deduplicates nor can be asked.
#[tool(side_effect, high_risk)]
async fn plain(
    ctx: &Ctx<Backend>,
    /// What to apply.
    text: String,
) -> Result<Value, ToolError> {
    apply(ctx, "plain", &text, false).await
}

struct Args(HashMap<String, String>);

impl Args {
    fn parse(args: impl Iterator<Item = String>) -> Args {
        let mut map = HashMap::new();
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            let Some(name) = arg.strip_prefix("--") else {
                fail(&format!("unexpected argument `{arg}`"));
            };
            let value = match args.peek() {
                Some(next) if !next.starts_with("--") => args.next().unwrap_or_default(),
                _ => "true".to_owned(),
            };
            map.insert(name.to_owned(), value);
        }
        Args(map)
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    fn need(&self, name: &str) -> &str {
        self.get(name)
            .unwrap_or_else(|| fail(&format!("--{name} is required")))
    }

    fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("true")
    }

    fn number(&self, name: &str, default: u64) -> u64 {
        self.get(name).map_or(default, |n| {
            n.parse()
                .unwrap_or_else(|_| fail(&format!("--{name}: not a number")))
        })
    }
}

fn fail(message: &str) -> ! {
    eprintln!("crashy: {message}");
    std::process::exit(2);
}

fn main() {
    toolcall_core::crash::set_hook(crash_hook);
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_default();
    let args = Args::parse(argv);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&e.to_string()));
    let store = args.need("store").to_owned();
    let schema = args.get("schema").map(str::to_owned);
    let outcome = runtime.block_on(async {
        let ledger = Ledger::open(&store, schema.as_deref()).await?;
        if let Some(path) = store.strip_prefix("sqlite:") {
            let store = SqliteStore::open(path).map_err(|e| e.to_string())?;
            run(&command, &args, ledger, None, store).await
        } else {
            let store = match &schema {
                Some(schema) => PostgresStore::connect_in_schema(&store, schema).await,
                None => PostgresStore::connect(&store).await,
            }
            .map_err(|e| e.to_string())?;
            let pool = store.pool();
            run(&command, &args, ledger, Some(pool), store).await
        }
    });
    match outcome {
        Ok(line) => println!("{line}"),
        Err(error) => fail(&error),
    }
}

async fn run<St: Store>(
    command: &str,
    args: &Args,
    ledger: Ledger,
    pool: Option<toolcall_postgres::Pool>,
    store: St,
) -> Result<String, String> {
    match command {
        "call" => {
            let backend = Backend {
                ledger,
                pool,
                lose: AtomicBool::new(args.flag("lose")),
            };
            let mut builder = Dispatcher::builder(
                tools![keyed, asked, plain, lent].map_err(|e| e.to_string())?,
                Arc::new(backend),
            )
            .store(store)
            .policy(Policy::new().allow(["keyed", "asked", "plain", "lent"]))
            .max_retries(u32::try_from(args.number("max-retries", 0)).unwrap_or(0))
            .retry_backoff(Duration::from_millis(10))
            .claim_lease(Duration::from_millis(args.number("lease-ms", 500)))
            .claim_wait(Duration::from_secs(20))
            .approvals(if args.flag("inbox") {
                Approvals::Inbox
            } else {
                Approvals::Host
            });
            if let Some(path) = args.get("audit") {
                builder = builder.audit(JsonLinesAudit::open(path).map_err(|e| e.to_string())?);
            }
            let dispatcher = builder.build().map_err(|e| e.to_string())?;
            let arguments = json!({"text": args.need("text")}).to_string();
            let mut call = Call::new(args.need("tool"), arguments.as_str())
                .session(args.need("session"))
                .confirmed(args.flag("confirmed"));
            if let Some(id) = args.get("approval") {
                call = call.approval(id);
            }
            let result = dispatcher.execute(call).await;
            serde_json::to_string(&result).map_err(|e| e.to_string())
        }
        "applied" => {
            let applied = ledger.applied(args.need("tool"), args.need("text")).await?;
            Ok(applied.to_string())
        }
        "pending" => {
            let page = store
                .pending_page(&PendingQuery {
                    session: Some(args.need("session")),
                    ..PendingQuery::new(now_ms(), 100)
                })
                .await
                .map_err(|e| e.to_string())?;
            let items: Vec<Value> = page
                .items
                .iter()
                .map(|p| json!({"id": p.id, "reason": p.reason, "arguments": p.arguments}))
                .collect();
            Ok(json!({"total": page.total, "items": items}).to_string())
        }
        "decide" => {
            let decision = ApprovalDecision {
                approved: args.need("approved") == "true",
                by: "on-call".into(),
                note: String::new(),
                edited_arguments: None,
                decided_ms: now_ms(),
                lasts_until_ms: None,
            };
            let outcome = store
                .decide_approval(&toolcall_tests::deciding_now(args.need("id"), &decision))
                .await
                .map_err(|e| e.to_string())?;
            Ok(format!("{outcome:?}"))
        }
        "serve" => {
            let token = args.need("token");
            let access = toolcall_inbox::Access::parse(&format!("on-call {token}\n"), "on-call")
                .map_err(|e| e.to_string())?;
            let backend = Arc::new(toolcall_inbox::Parts {
                store,
                registry: tools![keyed, asked, plain, lent].map_err(|e| e.to_string())?,
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| e.to_string())?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            println!("listening {addr}");
            std::io::stdout().flush().map_err(|e| e.to_string())?;
            toolcall_inbox::serve(backend, toolcall_inbox::Options::new(access), listener)
                .await
                .map_err(|e| e.to_string())?;
            Ok(String::new())
        }
        other => Err(format!(
            "unknown command `{other}`: call, applied, pending, decide, serve"
        )),
    }
}
