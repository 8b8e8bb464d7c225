//! `orders`: the reference's support-agent demo, and the command line every
//! toolcall application gets from its registry (definitions, replay, report,
//! lock, check, mcp, serve), over the example's tools.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::{Args, Parser};
use orders::{Shop, add_note, get_order, read_messages, refund_order};
use serde_json::Value;
use toolcall::store::Store;
use toolcall::{
    Approvals, Call, Code, Dispatcher, JsonLinesAudit, Policy, Registry, Taint, ToolResult, tools,
};
use toolcall_cli::{Command, Context, Error, StoreSpec, WithStore};
use toolcall_core::crash;

/// Orders and refunds behind toolcall's deterministic tool pipeline.
///
/// With no subcommand, plays the reference's scripted conversation: a
/// lookup, a refund sent as 25.90 instead of cents, the corrected refund
/// (a person is asked to approve it), and the model's retry of it, which is
/// replayed instead of refunding twice.
///
/// What holds across processes, crashes and reconnects, over one `--store`
/// (SQLite or Postgres): at most one attempt of a call is in flight at a
/// time; a refund is applied exactly once (its backend honours the
/// idempotency key: an unknown outcome, even a process killed after the
/// shop committed, is run again under the key and answered the first
/// refund); a note whose outcome is unknown is never written again on a
/// guess, but waits for a person in `orders serve` (it happened, or it did
/// not), listed there even if the process died; a person's decision is
/// final (a denial answers every identical call, `confirmed: true`
/// included); and one `--session-id` is one conversation in every process
/// and MCP connection, each caller's own (taint, replays, pending
/// approvals).
///
/// The read-only tools (get_order, read_messages) hold only a read-only
/// connection: SQLite's opened read-only; over Postgres, the role
/// TOOLCALL_ORDERS_READER_URL names, granted only SELECT on the shop's
/// tables (without it, they share the shop's pool).
#[derive(Parser)]
#[command(version, propagate_version = true, after_long_help = WHO_DECIDES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Approve confirmations without asking (with no terminal, they are declined).
    #[arg(long)]
    yes: bool,

    /// Append an audit record per call to this file, as JSON lines.
    #[arg(long, value_name = "FILE", global = true)]
    audit: Option<PathBuf>,

    /// Where the pipeline remembers calls and the shop keeps its orders,
    /// refunds and notes: `memory` (this run only: the shop starts fresh),
    /// `sqlite:PATH` (a file that another run, or another process, shares:
    /// what one did, the other replays; the shop's tables `orders_*` are in
    /// it too) or a `postgres://` URL (a database that replicas share, the
    /// shop's tables in it too). For the demo, `replay`, `mcp` and `serve`;
    /// `definitions`, `lock`, `check` and `report` (which reads its audit
    /// file only) open none.
    #[arg(
        long,
        value_name = "memory|sqlite:PATH|postgres://...",
        default_value = "memory",
        global = true
    )]
    store: String,

    #[command(flatten)]
    settings: SettingsArgs,
}

/// Where a question stands and who may answer it, in every mode (`orders
/// --help`): the tables of `toolcall_core::life`.
const WHO_DECIDES: &str = "\
Where a question stands (toolcall_core::life, one state read by every entry point):

  state       approval                              in doubt (did an attempt take effect?)
  open        a person (or N people) decides        a person says it happened / it did not
  signing     some of the N have signed             -
  decided     approve/edit: runs once when carried  happened: done, never run;
              out; deny: every identical call is    it did not: runs once
              denied for --denial-ttl (a day)
  running,    what came of it, replayed to          the same
  done        whoever asks
  expired     not decided or carried out within     never: it stays open to a person
              --approval-ttl: it will not run

Who may answer which question:

  question       answer                   a person     the host              the MCP client asked
                                          (inbox,      (`confirmed`, a       (elicitation, input_required,
                                          host API)    bare approval id)     tasks/update, tasks/cancel)
  approval       approve, deny            yes, never   where the asking      in its own conversation, where the
                                          the one who  process ran           asking process let clients decide
                                          asked        --approvals host      (host mode, or --elicitation-approves)
                                                                             and so does the answering one
  approval       edit                     yes          no                    no
  in doubt       it happened / it did not yes          never                 never
  in doubt       approve, deny, cancel    never        never                 never

A question is its caller's, its conversation's and its principal's: to anyone
else its id is unknown. A decision is final. A note whose outcome is unknown is
never written again on a guess: it waits for a person, and `orders serve` lists
it even when the process that ran it died.";

/// The pipeline's settings; the defaults are the reference's.
#[derive(Args)]
#[command(next_help_heading = "Pipeline")]
struct SettingsArgs {
    /// The conversation's id: it scopes the step budget, the idempotency
    /// keys (replays), the loop guard, the taint of untrusted output and the
    /// pending approvals. The demo and `replay` run in `demo` without it;
    /// `mcp` runs every connection (and every process over the same
    /// `--store`) in it, and without it gives each connection its own.
    #[arg(long, global = true)]
    session_id: Option<String>,
    /// Tool calls allowed in the conversation.
    #[arg(long, default_value_t = 10, global = true)]
    max_steps: u64,
    /// Times one exact call may be made before LOOP_DETECTED.
    #[arg(long, default_value_t = 3, global = true)]
    max_duplicate_calls: u64,
    /// Retries after a transient backend failure: of a failure before any
    /// effect, and of a refund (its backend honours the key) under the same
    /// key. A note whose outcome is unknown is never retried: a person
    /// answers it.
    #[arg(long, default_value_t = 2, global = true)]
    max_retries: u32,
    /// Callers that name one conversation share its step budget and its
    /// taint (never their replays or questions). Without it, each caller's
    /// calls in a conversation are a conversation of their own.
    #[arg(long, global = true)]
    callers_share_conversations: bool,
    /// Wait before retry n: n times this many milliseconds.
    #[arg(long, default_value_t = 200, global = true)]
    retry_backoff_ms: u64,
    /// The tools the caller may use, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "get_order,refund_order",
        global = true
    )]
    allow: Vec<String>,
    /// Refunds above this many cents are refused (POLICY_LIMIT).
    #[arg(long, default_value_t = 50_000, global = true, value_parser = clap::value_parser!(i64).range(0..))]
    max_refund_cents: i64,
    /// The backend commits its next N new refunds, then loses the answer.
    #[arg(long, default_value_t = 0, value_name = "N", global = true)]
    lose_next_response: u32,
    /// How long a claim on a call, or a lock on an order, holds without
    /// renewal (renewed while the call runs; a dead process's ends after it).
    #[arg(long, default_value_t = 30_000, value_name = "MS", global = true, value_parser = clap::value_parser!(u64).range(1..))]
    claim_lease_ms: u64,
    /// How long a call waits for an identical call, or another call on the
    /// same order, before CALL_IN_PROGRESS or RESOURCE_BUSY.
    #[arg(long, default_value_t = 10_000, value_name = "MS", global = true)]
    claim_wait_ms: u64,
    /// How long a person has to decide a question, and the call to be
    /// carried out once approved. A question whether a note was written
    /// never expires.
    #[arg(long, default_value_t = 900, value_name = "SECONDS", global = true, value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
    approval_ttl: u64,
    /// How long a denial (or an edit) answers the identical calls, from the
    /// decision.
    #[arg(long, default_value_t = 86_400, value_name = "SECONDS", global = true, value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
    denial_ttl: u64,
    /// The most of a result's text the model gets, in bytes: a larger
    /// result is cut to fit, still valid JSON, with `data.truncated`.
    #[arg(long, value_name = "N", global = true, value_parser = clap::value_parser!(u64).range(256..))]
    max_output_bytes: Option<u64>,
    /// Where a refund's approval comes from: `host` (`confirmed: true` in a
    /// replay line, `--yes` in the demo) or `inbox` (only a decision in the
    /// store, made in `orders serve`'s page, approves; a replay line brings
    /// its `"approval": "<question_id>"`).
    #[arg(long, value_enum, default_value = "host", global = true)]
    approvals: ApprovalsArg,
    /// How far messages the customer wrote (`read_messages`, untrusted
    /// output) reach side effects: `session`, the default (every side effect
    /// after reading them waits for a person), `values` (only a note or a
    /// refund carrying an id, amount, URL or text read in them, however
    /// rewritten in case, spacing, separators or encoding, waits) or `off`.
    #[arg(long, default_value = "session", value_name = "LEVEL", global = true)]
    taint: Taint,
}

/// `--approvals`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ApprovalsArg {
    /// The host says a person approved.
    Host,
    /// Only a decision recorded in the store approves.
    Inbox,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(command) = cli.command.as_ref().filter(|c| !c.runs_tools()) {
        let outcome = registry().and_then(|registry| {
            let policy = policy(&registry, &cli.settings)?;
            command.run_static(&registry, &policy)
        });
        return finish(outcome);
    }
    // A server (`mcp --http`, `serve`) on a multi-threaded runtime, the
    // others on one thread.
    let runtime = match cli.command.as_ref().map_or_else(
        || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        },
        Command::runtime,
    ) {
        Ok(runtime) => runtime,
        Err(error) => {
            return finish(Err(setup(format!("cannot start the runtime: {error}"))));
        }
    };
    if let Err(error) = crash_points() {
        return finish(Err(error));
    }
    // Parsed here, not by clap, so that a command that opens no store
    // (`definitions`, `lock`, ...) does not read it.
    let outcome = match cli.store.parse::<StoreSpec>() {
        Ok(spec) => runtime
            .block_on(spec.open(Orders { cli: &cli }))
            .and_then(|outcome| outcome),
        Err(error) => Err(error.into()),
    };
    finish(outcome)
}

/// The demo or a command, over the store `--store` opened, with the shop
/// in the same place.
struct Orders<'a> {
    cli: &'a Cli,
}

impl WithStore for Orders<'_> {
    type Output = Result<(), Error>;

    async fn with_store<St: Store + 'static>(
        self,
        store: St,
        spec: &StoreSpec,
    ) -> Result<(), Error> {
        let shop = open_shop(spec, &store).await?;
        run(self.cli, store, shop).await
    }
}

/// The shop, in the same place as the pipeline's store: in this process,
/// or in the tables `orders_*` of the same SQLite file or Postgres database
/// (on the Postgres store's own pool: one pool a process).
async fn open_shop<St: Store + 'static>(spec: &StoreSpec, store: &St) -> Result<Shop, Error> {
    let shop = open_writer(spec, store).await?;
    // Over Postgres, the read-only tools connect as the role this URL
    // names, granted only SELECT on the shop's tables (see Shop::reader).
    match std::env::var("TOOLCALL_ORDERS_READER_URL") {
        Ok(url) if !url.is_empty() => shop
            .with_postgres_reader(&url)
            .await
            .map_err(|e| setup(format!("cannot connect the shop's reader: {e}"))),
        _ => Ok(shop),
    }
}

/// The shop and its writing connection, where the store is.
async fn open_writer<St: Store + 'static>(spec: &StoreSpec, store: &St) -> Result<Shop, Error> {
    if let Some(store) =
        (store as &dyn std::any::Any).downcast_ref::<toolcall_postgres::PostgresStore>()
    {
        return Shop::on_postgres_pool(store.pool())
            .await
            .map_err(|e| setup(format!("cannot open the shop in {spec}: {e}")));
    }
    match spec {
        StoreSpec::Memory => Ok(Shop::new()),
        StoreSpec::Sqlite(path) => Shop::open_sqlite(path)
            .map_err(|e| setup(format!("cannot open the shop in {}: {e}", path.display()))),
        StoreSpec::Postgres(url) => Shop::connect_postgres(url)
            .await
            .map_err(|e| setup(format!("cannot open the shop in {url}: {e}"))),
        other => Err(setup(format!(
            "the shop cannot live in the store `{other}`"
        ))),
    }
}

/// The crash points `ORDERS_CRASH_AT` names (comma-separated): the
/// pipeline's (`toolcall_core::crash`) and the shop's (`orders::CRASH_POINTS`).
static CRASH_AT: OnceLock<Vec<&'static str>> = OnceLock::new();

/// Every crash point `ORDERS_CRASH_AT` may name.
const KNOWN_CRASH_POINTS: [&str; 12] = [
    crash::AFTER_START,
    crash::AFTER_CLAIM,
    crash::RETRY_BACKOFF,
    crash::BEFORE_COMPLETE,
    crash::AFTER_COMPLETE,
    crash::AWAITING_APPROVAL,
    crash::BEFORE_DECISION,
    crash::AFTER_DECISION,
    orders::CRASH_POINTS[0],
    orders::CRASH_POINTS[1],
    orders::CRASH_POINTS[2],
    orders::CRASH_POINTS[3],
];

/// With `ORDERS_CRASH_AT` set, installs the hook that stops the process at
/// the points it names: for tests that kill it there, as a crash would.
/// A name that is no crash point is a usage error.
fn crash_points() -> Result<(), Error> {
    let Some(names) = std::env::var_os("ORDERS_CRASH_AT") else {
        return Ok(());
    };
    let names = names.to_string_lossy();
    let mut points = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(point) = KNOWN_CRASH_POINTS.iter().find(|p| **p == name) else {
            return Err(setup(format!(
                "ORDERS_CRASH_AT: `{name}` is not a crash point; expected some of {}",
                KNOWN_CRASH_POINTS.join(", ")
            )));
        };
        points.push(*point);
    }
    let _ = CRASH_AT.set(points);
    crash::set_hook(stop_at);
    Ok(())
}

/// At a point `ORDERS_CRASH_AT` names: says so on standard error, then
/// blocks for ever, until the process is killed.
fn stop_at(point: &'static str) {
    if !CRASH_AT.get().is_some_and(|points| points.contains(&point)) {
        return;
    }
    {
        let mut stderr = io::stderr().lock();
        let _ = writeln!(stderr, "crash point: {point}");
        let _ = stderr.flush();
    }
    loop {
        std::thread::park();
    }
}

/// The conversation the demo and `replay` run in when `--session-id` names none.
const DEMO: &str = "demo";

/// Setting up went wrong (exit code 2).
fn setup(message: String) -> Error {
    Error::Input(message)
}

fn finish(outcome: Result<(), Error>) -> ExitCode {
    toolcall_cli::exit("orders", outcome)
}

fn registry() -> Result<Registry, Error> {
    tools![get_order, refund_order, read_messages, add_note].map_err(|e| setup(e.to_string()))
}

/// The caller's policy: the tools `--allow` names (each must exist), and the
/// refund limit.
fn policy(registry: &Registry, settings: &SettingsArgs) -> Result<Policy, Error> {
    toolcall_cli::allowlist(registry, &settings.allow).map(|policy| {
        policy
            .limit("max_refund_cents", settings.max_refund_cents)
            .taint(settings.taint)
    })
}

async fn run<St: Store + 'static>(cli: &Cli, store: St, shop: Shop) -> Result<(), Error> {
    let session = cli.settings.session_id.as_deref();
    let dispatcher = dispatcher(&cli.settings, cli.audit.as_ref(), store, shop)?;
    match &cli.command {
        None => {
            demo(&dispatcher, session.unwrap_or(DEMO), cli.yes).await;
            Ok(())
        }
        Some(command) => {
            let context = Context {
                program: "orders",
                // An MCP server without `--session-id` gives each connection
                // a conversation of its own; `replay` runs in `demo`.
                session,
                default_session: DEMO,
                audit: cli.audit.as_deref(),
            };
            command.run_in(&context, Arc::new(dispatcher)).await
        }
    }
}

fn dispatcher<St: Store>(
    settings: &SettingsArgs,
    audit: Option<&PathBuf>,
    store: St,
    shop: Shop,
) -> Result<Dispatcher<Shop, St>, Error> {
    shop.lose_next_responses(settings.lose_next_response);
    let registry = registry()?;
    let policy = policy(&registry, settings)?;
    let mut builder = Dispatcher::builder(registry, Arc::new(shop))
        // get_order and read_messages hold the read-only connection only.
        .part(Shop::reader)
        .store(store)
        .policy(policy)
        .max_steps(settings.max_steps)
        .max_duplicate_calls(settings.max_duplicate_calls)
        .max_retries(settings.max_retries)
        .callers_share_conversations(settings.callers_share_conversations)
        .retry_backoff(Duration::from_millis(settings.retry_backoff_ms))
        .claim_lease(Duration::from_millis(settings.claim_lease_ms))
        .claim_wait(Duration::from_millis(settings.claim_wait_ms))
        .approval_ttl(Duration::from_secs(settings.approval_ttl))
        .denial_ttl(Duration::from_secs(settings.denial_ttl))
        .approvals(match settings.approvals {
            ApprovalsArg::Host => Approvals::Host,
            ApprovalsArg::Inbox => Approvals::Inbox,
        })
        .max_output_bytes(
            settings
                .max_output_bytes
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        );
    if let Some(path) = audit {
        let sink = JsonLinesAudit::open(path)
            .map_err(|e| setup(format!("cannot open {}: {e}", path.display())))?;
        builder = builder.audit(sink);
    }
    builder.build().map_err(|e| setup(e.to_string()))
}

async fn demo<St: Store>(dispatcher: &Dispatcher<Shop, St>, session: &str, yes: bool) {
    let scripted = [
        ("get_order", r#"{"order_id": "ORD-1001"}"#),
        (
            "refund_order",
            r#"{"order_id": "ORD-1001", "amount_cents": 25.90, "currency": "BRL", "reason": "damaged"}"#,
        ),
        (
            "refund_order",
            r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#,
        ),
        (
            "refund_order",
            r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#,
        ),
    ];
    println!("The model proposes; the code decides. Four scripted tool calls follow.\n");
    for (tool, arguments) in scripted {
        println!("model calls {tool} {arguments}");
        let call = Call::new(tool, arguments).session(session);
        let result = dispatcher.execute(call).await;
        println!("  -> {}", result.to_model_text());
        if result.code == Code::ConfirmationRequired && approve(tool, &result, yes) {
            let confirmed = dispatcher.execute(call.confirmed(true)).await;
            println!("  -> {}", confirmed.to_model_text());
        }
        println!();
    }
    // Read from the backend: over a shared database, what every process did.
    let shop = dispatcher.state();
    match (shop.refund_count().await, shop.load_order("ORD-1001").await) {
        (Ok(applied), Ok(order)) => println!(
            "The backend applied {applied} refund(s); ORD-1001 has {} cents left to refund.",
            order.map_or(0, |o| o.refundable_cents())
        ),
        (Err(error), _) | (_, Err(error)) => {
            println!("The backend could not be read: {error}.");
        }
    }
}

/// Asks the person at the terminal; without one, declines.
fn approve(tool: &str, result: &ToolResult, yes: bool) -> bool {
    let pending = result
        .data
        .get("pending")
        .map(Value::to_string)
        .unwrap_or_default();
    if yes {
        println!("  approved with --yes: {tool} {pending}");
        return true;
    }
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        println!(
            "  no terminal to ask for approval of {tool} {pending}: declined (pass --yes to approve)"
        );
        return false;
    }
    print!("  approve {tool} {pending}? [y/N] ");
    let _ = io::stdout().flush();
    let mut answer = String::new();
    if stdin.lock().read_line(&mut answer).is_err() {
        return false;
    }
    answer.trim().eq_ignore_ascii_case("y")
}
