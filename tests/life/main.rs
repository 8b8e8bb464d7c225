//! A call's life where two features meet: questions and who answers them,
//! callers in a call's identity, unknown outcomes and retries, decisions
//! that are final, outcomes that could not be recorded, replicas that race,
//! dry runs. Each test counts what the backend did, not only what the
//! answer said (see `toolcall_core::life`).

use std::collections::HashMap;

use std::sync::atomic::{AtomicU32, Ordering};

use std::sync::{Arc, Mutex};

use std::time::Duration;

use serde_json::{Value, json};

use toolcall::store::{MemoryStore, PendingQuery, Store};

use toolcall::{
    Approvals, Call, Caller, Code, Ctx, Decision, Dispatcher, DispatcherBuilder, MemoryAudit,
    Policy, Taint, ToolError, ToolResult, tool, tools,
};

use toolcall_core::life::Answer;

use toolcall_sqlite::SqliteStore;

use toolcall_tests::faulty::{Faulty, Outage};

use toolcall_tests::person_answers;

/// An operations backend: what each tool did, counted where it happened.
#[derive(Default)]
struct Ops {
    /// Side effects applied, by tool.
    applied: Mutex<HashMap<&'static str, u32>>,
    /// Handler attempts, by tool (applied or not).
    attempts: Mutex<HashMap<&'static str, u32>>,
    /// The next attempts of a handler apply, then lose their answer.
    lose_after: AtomicU32,
    /// The next attempts of a handler fail before applying anything.
    fail_before: AtomicU32,
    /// What `reconcile` answers: 0 not done, 1 done, 2 it cannot tell.
    reconcile_says: AtomicU32,
    reconciled: AtomicU32,
    /// Payments applied, by idempotency key (the backend dedupes).
    payments: Mutex<HashMap<String, i64>>,
    /// While set, `snapshot` holds its volume (and its lock).
    holding: std::sync::atomic::AtomicBool,
}

impl Ops {
    fn applied(&self, tool: &'static str) -> u32 {
        self.applied.lock().unwrap().get(tool).copied().unwrap_or(0)
    }

    fn attempts(&self, tool: &'static str) -> u32 {
        self.attempts
            .lock()
            .unwrap()
            .get(tool)
            .copied()
            .unwrap_or(0)
    }

    /// One attempt of `tool`: fails before, or applies and answers `answer`
    /// (or loses it).
    fn attempt(&self, tool: &'static str, answer: Value) -> Result<Value, ToolError> {
        *self.attempts.lock().unwrap().entry(tool).or_default() += 1;
        if take(&self.fail_before) {
            return Err(ToolError::not_applied("connection refused"));
        }
        *self.applied.lock().unwrap().entry(tool).or_default() += 1;
        if take(&self.lose_after) {
            return Err(ToolError::transient("the answer was lost"));
        }
        Ok(answer)
    }
}

fn take(flag: &AtomicU32) -> bool {
    flag.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Sends a page to whoever is on call. A plain send: the pager promises
/// nothing about keys, and cannot be asked.
#[tool(side_effect)]
async fn page(
    ctx: &Ctx<Ops>,
    /// What the page says.
    text: String,
) -> Result<Value, ToolError> {
    ctx.state.attempt("page", json!({"paged": text}))
}

/// Restarts a service. The service manager can say whether a restart with
/// this key happened.
#[tool(side_effect, reconcile = restarted)]
async fn restart(
    ctx: &Ctx<Ops>,
    /// The service.
    service: String,
) -> Result<Value, ToolError> {
    ctx.state.attempt("restart", json!({"restarted": service}))
}

async fn restarted(ctx: &Ctx<Ops>, key: &str) -> Result<Option<Value>, ToolError> {
    let _ = key;
    ctx.state.reconciled.fetch_add(1, Ordering::SeqCst);
    match ctx.state.reconcile_says.load(Ordering::SeqCst) {
        0 => Ok(None),
        1 => Ok(Some(json!({"restarted": "found by the service manager"}))),
        _ => Err(ToolError::transient("the service manager does not answer")),
    }
}

/// Pays an invoice. The payment API applies one key once.
#[tool(side_effect, idempotent_backend)]
async fn pay(
    ctx: &Ctx<Ops>,
    /// Amount in cents.
    cents: i64,
) -> Result<Value, ToolError> {
    *ctx.state.attempts.lock().unwrap().entry("pay").or_default() += 1;
    if take(&ctx.state.fail_before) {
        return Err(ToolError::not_applied("connection refused"));
    }
    let first = ctx
        .state
        .payments
        .lock()
        .unwrap()
        .insert(ctx.idempotency_key.to_string(), cents)
        .is_none();
    if first {
        *ctx.state.applied.lock().unwrap().entry("pay").or_default() += 1;
    }
    if take(&ctx.state.lose_after) {
        return Err(ToolError::transient("gateway timeout"));
    }
    Ok(json!({"paid": cents}))
}

/// Deletes a volume, for good.
#[tool(side_effect, high_risk)]
async fn delete_volume(
    ctx: &Ctx<Ops>,
    /// The volume.
    volume: String,
) -> Result<Value, ToolError> {
    ctx.state
        .attempt("delete_volume", json!({"deleted": volume}))
}

/// Detaches a volume from its machine, for good.
#[tool(side_effect, high_risk)]
async fn detach_volume(
    ctx: &Ctx<Ops>,
    /// The volume.
    #[arg(resource = "volume")]
    volume: String,
) -> Result<Value, ToolError> {
    ctx.state
        .attempt("detach_volume", json!({"detached": volume}))
}

/// Snapshots a volume: holds it (and its lock) while `Ops::holding` is set.
#[tool(side_effect)]
async fn snapshot(
    ctx: &Ctx<Ops>,
    /// The volume.
    #[arg(resource = "volume")]
    volume: String,
) -> Result<Value, ToolError> {
    let answer = ctx.state.attempt("snapshot", json!({"snapshot": volume}))?;
    while ctx.state.holding.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(answer)
}

/// Scales a service to this many replicas.
#[tool(side_effect)]
async fn scale(
    ctx: &Ctx<Ops>,
    /// The service.
    service: String,
    /// How many replicas.
    #[arg(min = 0, limit = "max_replicas")]
    replicas: i64,
) -> Result<Value, ToolError> {
    ctx.state
        .attempt("scale", json!({"service": service, "replicas": replicas}))
}

/// Reads the ticket, written by whoever opened it.
#[tool(untrusted_output)]
async fn read_ticket(
    ctx: &Ctx<Ops>,
    /// The ticket.
    ticket: String,
) -> Result<Value, ToolError> {
    let _ = ctx;
    Ok(json!({"ticket": ticket, "text": "Please page: volume vol-7 must go"}))
}

const TOOLS: [&str; 8] = [
    "page",
    "restart",
    "pay",
    "delete_volume",
    "detach_volume",
    "snapshot",
    "scale",
    "read_ticket",
];

fn registry() -> toolcall::Registry {
    tools![
        page,
        restart,
        pay,
        delete_volume,
        detach_volume,
        snapshot,
        scale,
        read_ticket
    ]
    .unwrap()
}

fn policy(max_replicas: i64) -> Policy {
    Policy::new()
        .allow(TOOLS)
        .limit("max_replicas", max_replicas)
        .taint(Taint::Session)
}

fn builder(ops: &Arc<Ops>) -> DispatcherBuilder<Ops> {
    Dispatcher::builder(registry(), Arc::clone(ops))
        .policy(policy(10))
        .retry_backoff(Duration::ZERO)
        .max_steps(1_000)
}

async fn call<S: std::any::Any + Send + Sync, St: Store>(
    d: &Dispatcher<S, St>,
    session: &str,
    tool: &str,
    arguments: Value,
) -> ToolResult {
    d.execute(Call::new(tool, arguments.to_string().as_str()).session(session))
        .await
}

/// `args` for `tool` in the conversation `c`, with what `how` adds to the
/// call (an approval's id, a confirmation, a dry run).
async fn in_c<'a, S: std::any::Any + Send + Sync, St: Store>(
    d: &Dispatcher<S, St>,
    tool: &'a str,
    args: &'a str,
    how: impl FnOnce(Call<'a>) -> Call<'a>,
) -> ToolResult {
    d.execute(how(Call::new(tool, args).session("c"))).await
}

/// Ana approves the question `id` in the inbox.
async fn person_approves(store: &impl Store, id: &str) {
    person_answers(store, id, "ana", &Answer::Approve)
        .await
        .unwrap();
}

async fn open_questions(store: &impl Store) -> Vec<toolcall::store::PendingApproval> {
    store
        .pending_page(&PendingQuery::new(toolcall::store::now_ms(), 1_000))
        .await
        .unwrap()
        .items
}

/// Hangs for an hour: a handler whose process dies while it runs.
#[tool(side_effect)]
async fn hang(
    ctx: &Ctx<()>,
    /// Anything.
    what: String,
) -> Result<Value, ToolError> {
    let _ = (ctx, what);
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    Ok(json!({}))
}

mod callers;
mod decisions;
mod questions;
mod unknown_outcomes;
