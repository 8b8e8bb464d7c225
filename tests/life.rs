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

    /// One attempt of `tool`: fails before, or applies (and maybe loses the
    /// answer).
    fn attempt(&self, tool: &'static str) -> Result<(), ToolError> {
        *self.attempts.lock().unwrap().entry(tool).or_default() += 1;
        if take(&self.fail_before) {
            return Err(ToolError::not_applied("connection refused"));
        }
        *self.applied.lock().unwrap().entry(tool).or_default() += 1;
        if take(&self.lose_after) {
            return Err(ToolError::transient("the answer was lost"));
        }
        Ok(())
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
    ctx.state.attempt("page")?;
    Ok(json!({"paged": text}))
}

/// Restarts a service. The service manager can say whether a restart with
/// this key happened.
#[tool(side_effect, reconcile = restarted)]
async fn restart(
    ctx: &Ctx<Ops>,
    /// The service.
    service: String,
) -> Result<Value, ToolError> {
    ctx.state.attempt("restart")?;
    Ok(json!({"restarted": service}))
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
    ctx.state.attempt("delete_volume")?;
    Ok(json!({"deleted": volume}))
}

/// Detaches a volume from its machine, for good.
#[tool(side_effect, high_risk)]
async fn detach_volume(
    ctx: &Ctx<Ops>,
    /// The volume.
    #[arg(resource = "volume")]
    volume: String,
) -> Result<Value, ToolError> {
    ctx.state.attempt("detach_volume")?;
    Ok(json!({"detached": volume}))
}

/// Snapshots a volume: holds it (and its lock) while `Ops::holding` is set.
#[tool(side_effect)]
async fn snapshot(
    ctx: &Ctx<Ops>,
    /// The volume.
    #[arg(resource = "volume")]
    volume: String,
) -> Result<Value, ToolError> {
    ctx.state.attempt("snapshot")?;
    while ctx.state.holding.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(json!({"snapshot": volume}))
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
    ctx.state.attempt("scale")?;
    Ok(json!({"service": service, "replicas": replicas}))
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

// ------------------------------------------- unknown outcomes are never guessed

/// With the default retries, a lost answer of a backend that neither
/// honours the key nor can be asked used to be retried: the page went out
/// twice (three times) and the answer said ok.
#[tokio::test]
async fn a_lost_answer_of_an_unprotected_side_effect_is_in_doubt_at_once() {
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(1, Ordering::SeqCst);
    let audit = MemoryAudit::new();
    let d = builder(&ops).audit(audit.clone()).build().unwrap();
    assert_eq!(d.settings().max_retries, 2, "the default retries");
    let lost = call(&d, "c", "page", json!({"text": "disk full"})).await;
    assert_eq!(ops.applied("page"), 1, "one page went out");
    assert_eq!(
        ops.attempts("page"),
        1,
        "and it was not sent again: {lost:?}"
    );
    assert_eq!(lost.code, Code::InDoubt, "{lost:?}");
    assert_eq!(lost.data["in_doubt"], json!(true));
    assert!(audit.records()[0].in_doubt);
    let asked = open_questions(d.store()).await;
    assert_eq!(asked.len(), 1, "the question reached the inbox");
    assert_eq!(asked[0].reason.as_deref(), Some("in_doubt"));
    // The model's retry is the same question, and sends nothing.
    let again = call(&d, "c", "page", json!({"text": "disk full"})).await;
    assert_eq!(again.code, Code::InDoubt);
    assert_eq!(again.question_id, lost.question_id);
    assert_eq!(ops.attempts("page"), 1);
}

/// A tool that declares `reconcile` used to be retried without asking: the
/// service restarted three times for one key and the answer said ok.
#[tokio::test]
async fn a_reconciling_backend_is_asked_before_any_new_attempt() {
    // It cannot tell: in doubt, one restart.
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(5, Ordering::SeqCst);
    ops.reconcile_says.store(2, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let lost = call(&d, "c", "restart", json!({"service": "api"})).await;
    assert_eq!(ops.attempts("restart"), 1, "{lost:?}");
    assert_eq!(ops.reconciled.load(Ordering::SeqCst), 1);
    assert_eq!(lost.data["in_doubt"], json!(true), "{lost:?}");

    // It says the restart happened: that is the answer, one restart.
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(5, Ordering::SeqCst);
    ops.reconcile_says.store(1, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let found = call(&d, "c", "restart", json!({"service": "api"})).await;
    assert!(found.ok, "{found:?}");
    assert_eq!(ops.attempts("restart"), 1);

    // It says it did not happen: then, and only then, tried again.
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(5, Ordering::SeqCst);
    ops.reconcile_says.store(0, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let gone = call(&d, "c", "restart", json!({"service": "api"})).await;
    assert_eq!(
        ops.attempts("restart"),
        3,
        "the first and two retries: {gone:?}"
    );
    assert_eq!(
        ops.reconciled.load(Ordering::SeqCst),
        3,
        "asked after each of the three attempts"
    );
    assert!(!gone.data.contains_key("in_doubt"), "not done: {gone:?}");
}

/// A failure the handler says came before any effect is retried plainly,
/// whatever the backend; a backend that honours the key is retried under it.
#[tokio::test]
async fn only_a_failure_before_any_effect_or_a_key_the_backend_honours_is_retried() {
    let ops = Arc::new(Ops::default());
    ops.fail_before.store(2, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let sent = call(&d, "c", "page", json!({"text": "disk full"})).await;
    assert!(sent.ok, "{sent:?}");
    assert_eq!(ops.attempts("page"), 3);
    assert_eq!(ops.applied("page"), 1);

    let ops = Arc::new(Ops::default());
    ops.lose_after.store(2, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let paid = call(&d, "c", "pay", json!({"cents": 500})).await;
    assert!(paid.ok, "{paid:?}");
    assert_eq!(ops.attempts("pay"), 3, "retried under one key");
    assert_eq!(ops.applied("pay"), 1, "which the backend applied once");

    // Spent before any effect: nothing happened, nothing is in doubt.
    let ops = Arc::new(Ops::default());
    ops.fail_before.store(9, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let down = call(&d, "c", "page", json!({"text": "disk full"})).await;
    assert_eq!(down.code, Code::UpstreamUnavailable);
    assert!(!down.data.contains_key("in_doubt"), "{down:?}");
    assert!(open_questions(d.store()).await.is_empty());
    assert_eq!(ops.applied("page"), 0);
}

// ------------------------------------------------ the caller is in the identity

fn two_callers(ops: &Arc<Ops>, share: bool) -> Dispatcher<Ops> {
    builder(ops)
        .callers([
            Caller::new("oncall", policy(5)),
            Caller::new("intern", policy(3)),
        ])
        .callers_share_conversations(share)
        .build()
        .unwrap()
}

/// Two callers in one conversation: the one whose limit is 3 replicas asked
/// for 5 and got the other's result, replayed (stage 4 comes before the
/// limit, and the key had no caller in it).
#[tokio::test]
async fn a_replay_never_crosses_callers_nor_skips_the_callers_limit() {
    let ops = Arc::new(Ops::default());
    let d = two_callers(&ops, false);
    let oncall = d.caller("oncall").unwrap().clone();
    let intern = d.caller("intern").unwrap().clone();
    let args = r#"{"service": "api", "replicas": 5}"#;
    let scaled = d
        .execute(Call::new("scale", args).session("war-room").caller(&oncall))
        .await;
    assert!(scaled.ok && !scaled.replayed, "{scaled:?}");
    let theirs = d
        .execute(Call::new("scale", args).session("war-room").caller(&intern))
        .await;
    assert_eq!(theirs.code, Code::PolicyLimit, "{theirs:?}");
    assert!(!theirs.replayed);
    assert_eq!(ops.applied("scale"), 1);
    // Within the intern's limit, the intern's call is the intern's own.
    let small = r#"{"service": "api", "replicas": 2}"#;
    for caller in [&oncall, &intern] {
        let ran = d
            .execute(Call::new("scale", small).session("war-room").caller(caller))
            .await;
        assert!(ran.ok && !ran.replayed, "{} {ran:?}", caller.id());
    }
    assert_eq!(ops.applied("scale"), 3);
}

/// One caller's read of untrusted output tainted the other's calls.
#[tokio::test]
async fn taint_stays_with_the_caller_unless_the_conversation_is_shared() {
    for share in [false, true] {
        let ops = Arc::new(Ops::default());
        let d = two_callers(&ops, share);
        let oncall = d.caller("oncall").unwrap().clone();
        let intern = d.caller("intern").unwrap().clone();
        let read = d
            .execute(
                Call::new("read_ticket", r#"{"ticket": "T-1"}"#)
                    .session("war-room")
                    .caller(&intern),
            )
            .await;
        assert!(read.ok, "{read:?}");
        let paged = d
            .execute(
                Call::new("page", r#"{"text": "vol-7"}"#)
                    .session("war-room")
                    .caller(&oncall),
            )
            .await;
        if share {
            assert_eq!(paged.code, Code::ConfirmationRequired, "{paged:?}");
            assert_eq!(ops.applied("page"), 0);
        } else {
            assert!(paged.ok, "the on-call read nothing untrusted: {paged:?}");
            assert_eq!(ops.applied("page"), 1);
        }
        // The reader's own side effect asks, either way.
        let own = d
            .execute(
                Call::new("page", r#"{"text": "vol-7"}"#)
                    .session("war-room")
                    .caller(&intern),
            )
            .await;
        assert_eq!(
            own.code,
            Code::ConfirmationRequired,
            "share {share}: {own:?}"
        );
        // Each question says which output tainted the conversation, and
        // what it said, from the store's conversation the taint is kept by.
        use toolcall::store::prelude::*;
        let asked = if share {
            vec![&paged, &own]
        } else {
            vec![&own]
        };
        for answer in asked {
            let id = answer.question_id.as_deref().unwrap();
            let question = d.store().approval(id).await.unwrap().unwrap().approval;
            assert_eq!(question.provenance.len(), 1, "share {share}: {question:?}");
            assert_eq!(question.provenance[0].tool, "read_ticket");
            assert!(
                question.provenance[0].texts[0]
                    .text
                    .contains("Please page: volume vol-7 must go"),
                "{question:?}"
            );
        }
    }
}

// ----------------------------------------------------- a decision is final

/// In host mode, after a person's denial, the exact call with `confirmed`
/// was refused once, and the same line sent again ran.
#[tokio::test]
async fn a_denial_answers_every_identical_call_in_every_mode() {
    for approvals in [Approvals::Host, Approvals::Inbox] {
        let ops = Arc::new(Ops::default());
        let d = builder(&ops).approvals(approvals).build().unwrap();
        let args = r#"{"volume": "vol-7"}"#;
        let asked = d
            .execute(Call::new("delete_volume", args).session("c"))
            .await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
        let id = asked.question_id.clone().unwrap();
        let denied = d
            .deny(Decision::new(&id, "c").by("ana"), "not this one")
            .await;
        assert_eq!(denied.code, Code::ConfirmationDenied, "{denied:?}");
        for (n, call) in [
            Call::new("delete_volume", args)
                .session("c")
                .confirmed(true),
            Call::new("delete_volume", args)
                .session("c")
                .confirmed(true),
            Call::new("delete_volume", args).session("c"),
            Call::new("delete_volume", args).session("c").approval(&id),
        ]
        .into_iter()
        .enumerate()
        {
            let again = d.execute(call).await;
            assert_eq!(
                again.code,
                Code::ConfirmationDenied,
                "{approvals:?}, call {n}: {again:?}"
            );
            assert!(again.message.contains("not this one"), "{again:?}");
        }
        assert_eq!(ops.attempts("delete_volume"), 0, "{approvals:?}");
        assert!(
            open_questions(d.store()).await.is_empty(),
            "{approvals:?}: the person is not shown the delete again"
        );
    }
}

/// A person's edit stands likewise: the identical call gets the edited
/// call's answer, and nothing runs twice.
#[tokio::test]
async fn an_edit_answers_the_identical_calls_after_it() {
    let ops = Arc::new(Ops::default());
    let d = builder(&ops).approvals(Approvals::Inbox).build().unwrap();
    let args = r#"{"volume": "vol-7"}"#;
    let asked = d
        .execute(Call::new("delete_volume", args).session("c"))
        .await;
    let id = asked.question_id.clone().unwrap();
    let edit = json!({"volume": "vol-8"});
    person_answers(d.store(), &id, "ana", &Answer::Edit(&edit))
        .await
        .unwrap();
    let ran = d
        .execute(Call::new("delete_volume", args).session("c"))
        .await;
    assert!(ran.ok, "{ran:?}");
    assert_eq!(ran.data["deleted"], "vol-8");
    let again = d
        .execute(Call::new("delete_volume", args).session("c"))
        .await;
    assert!(again.ok && again.replayed, "{again:?}");
    assert_eq!(again.data["deleted"], "vol-8");
    assert_eq!(ops.applied("delete_volume"), 1);
}

/// An approved call that found its resource busy ran nothing, yet the
/// decision was spent: the answer `RESOURCE_BUSY` was recorded as what came
/// of it, and a task carrying it out answered that for good (found by the
/// long chaos run: a refund task stuck for 29 minutes). The decision now
/// waits for the resource: the identical call, once it is free, runs it
/// once, and nobody is asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_that_found_its_resource_busy_keeps_its_approval() {
    for approvals in [Approvals::Host, Approvals::Inbox] {
        let ops = Arc::new(Ops::default());
        let d = Arc::new(
            builder(&ops)
                .approvals(approvals)
                .claim_wait(Duration::from_millis(30))
                .build()
                .unwrap(),
        );
        let args = r#"{"volume": "vol-7"}"#;
        let asked = call(&d, "c", "detach_volume", json!({"volume": "vol-7"})).await;
        assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
        let id = asked.question_id.clone().unwrap();

        // Another call holds the volume while the decision is carried out.
        ops.holding.store(true, Ordering::SeqCst);
        let holder = {
            let d = Arc::clone(&d);
            tokio::spawn(
                async move { call(&d, "other", "snapshot", json!({"volume": "vol-7"})).await },
            )
        };
        while ops.attempts("snapshot") == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let busy = match approvals {
            Approvals::Host => d.approve(Decision::new(&id, "c").by("ana")).await,
            _ => {
                person_approves(d.store(), &id).await;
                d.execute(Call::new("detach_volume", args).session("c"))
                    .await
            }
        };
        assert_eq!(busy.code, Code::ResourceBusy, "{approvals:?}: {busy:?}");
        assert_eq!(ops.attempts("detach_volume"), 0, "{approvals:?}");
        ops.holding.store(false, Ordering::SeqCst);
        assert!(holder.await.unwrap().ok);

        // The volume is free: the identical call runs what was approved.
        let ran = d
            .execute(Call::new("detach_volume", args).session("c"))
            .await;
        assert!(ran.ok, "{approvals:?}: {ran:?}");
        assert_eq!(ran.data["detached"], "vol-7", "{approvals:?}");
        let again = d
            .execute(Call::new("detach_volume", args).session("c"))
            .await;
        assert!(again.ok && again.replayed, "{approvals:?}: {again:?}");
        assert_eq!(ops.applied("detach_volume"), 1, "{approvals:?}");
        assert!(
            open_questions(d.store()).await.is_empty(),
            "{approvals:?}: nobody is asked again"
        );
    }
}

/// The same for a decision carried out while the operators stop the tool:
/// the host's `approve` answers `STOPPED` and runs nothing, and the decision
/// is given back, so once the tool is enabled the identical call carries it
/// out and nobody is asked again.
#[tokio::test]
async fn an_approved_call_stopped_by_the_operators_keeps_its_approval() {
    use toolcall_core::controls::{self, Target};
    let ops = Arc::new(Ops::default());
    let d = builder(&ops).build().unwrap();
    let args = r#"{"volume": "vol-7"}"#;
    let asked = call(&d, "c", "detach_volume", json!({"volume": "vol-7"})).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let id = asked.question_id.clone().unwrap();
    person_approves(d.store(), &id).await;

    let tool = || Target::Tool("detach_volume".to_owned());
    controls::stop(d.store(), tool(), "an incident", "oncall")
        .await
        .unwrap();
    let stopped = d.approve(Decision::new(&id, "c").by("ana")).await;
    assert_eq!(stopped.code, Code::Stopped, "{stopped:?}");
    assert_eq!(ops.attempts("detach_volume"), 0);
    controls::resume(d.store(), tool(), "oncall").await.unwrap();

    let ran = d
        .execute(Call::new("detach_volume", args).session("c"))
        .await;
    assert!(ran.ok, "{ran:?}");
    assert_eq!(ops.applied("detach_volume"), 1);
    assert!(
        open_questions(d.store()).await.is_empty(),
        "nobody is asked again"
    );
}

/// A wait on a question whose call ran meanwhile (by the host's
/// `confirmed`), and the host's answer to it, are what came of the call,
/// read by a look at its key: a look the dispatcher takes for itself, so
/// the audit keeps no record of it. It kept a dry run's, as if someone had
/// made one.
#[tokio::test]
async fn the_look_at_what_came_of_a_call_leaves_no_audit_record() {
    let ops = Arc::new(Ops::default());
    let audit = MemoryAudit::new();
    let d = builder(&ops).audit(audit.clone()).build().unwrap();
    let asked = call(&d, "c", "detach_volume", json!({"volume": "vol-7"})).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let id = asked.question_id.clone().unwrap();
    let args = r#"{"volume": "vol-7"}"#;
    let ran = d
        .execute(
            Call::new("detach_volume", args)
                .session("c")
                .confirmed(true),
        )
        .await;
    assert!(ran.ok, "{ran:?}");

    let waited = d
        .wait_for_decision(
            Call::new("detach_volume", args).session("c"),
            &id,
            toolcall::store::now_ms() + 50,
        )
        .await;
    assert!(waited.ok && waited.replayed, "{waited:?}");
    let approved = d.approve(Decision::new(&id, "c").by("ana")).await;
    assert!(approved.ok && approved.replayed, "{approved:?}");
    assert_eq!(ops.applied("detach_volume"), 1);
    let records = audit.records();
    assert!(
        records.iter().all(|record| !record.dry_run),
        "nobody made a dry run: {records:#?}"
    );
}

// ------------------------------------------------ questions have a kind

/// An in-doubt question is answered only as "it happened" or "it did not":
/// never by an approval, by `confirmed`, or by its id brought as one.
#[tokio::test]
async fn an_in_doubt_question_is_never_an_approval() {
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(1, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let args = r#"{"text": "disk full"}"#;
    let lost = d.execute(Call::new("page", args).session("c")).await;
    assert_eq!(lost.code, Code::InDoubt);
    let id = lost.question_id.clone().unwrap();

    let approved = d.approve(Decision::new(&id, "c").by("ana")).await;
    assert_eq!(approved.code, Code::ConfirmationInvalid, "{approved:?}");
    let denied = d.deny(Decision::new(&id, "c").by("ana"), "no").await;
    assert_eq!(denied.code, Code::ConfirmationInvalid, "{denied:?}");
    for call in [
        Call::new("page", args).session("c").confirmed(true),
        Call::new("page", args).session("c").approval(&id),
    ] {
        let again = d.execute(call).await;
        assert_eq!(again.code, Code::InDoubt, "{again:?}");
    }
    assert_eq!(ops.applied("page"), 1, "nothing was sent again");
    assert_eq!(open_questions(d.store()).await.len(), 1, "still asked");

    // A person says it happened: done, replayed, nothing sent.
    let settled = d
        .answer_in_doubt(Decision::new(&id, "c").by("ana"), true)
        .await;
    assert!(settled.ok, "{settled:?}");
    assert_eq!(settled.data["happened"], json!(true));
    let replay = d.execute(Call::new("page", args).session("c")).await;
    assert!(replay.ok && replay.replayed, "{replay:?}");
    assert_eq!(ops.applied("page"), 1);
}

/// A settlement is not an approval either: `answer_in_doubt` on an approval question
/// changes nothing.
#[tokio::test]
async fn an_approval_question_is_not_settled() {
    let ops = Arc::new(Ops::default());
    let d = builder(&ops).build().unwrap();
    let asked = call(&d, "c", "delete_volume", json!({"volume": "vol-7"})).await;
    let id = asked.question_id.clone().unwrap();
    for happened in [true, false] {
        let settled = d
            .answer_in_doubt(Decision::new(&id, "c").by("ana"), happened)
            .await;
        assert_eq!(settled.code, Code::ConfirmationInvalid, "{settled:?}");
    }
    assert_eq!(ops.attempts("delete_volume"), 0);
    assert_eq!(open_questions(d.store()).await.len(), 1);
}

/// `settle`, the earlier name of `answer_in_doubt`, still answers an
/// in-doubt question the same way.
#[tokio::test]
#[allow(deprecated)]
async fn the_deprecated_settle_still_answers_an_in_doubt_question() {
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(1, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let args = r#"{"text": "disk full"}"#;
    let lost = d.execute(Call::new("page", args).session("c")).await;
    assert_eq!(lost.code, Code::InDoubt);
    let id = lost.question_id.clone().unwrap();
    let answered = d.settle(Decision::new(&id, "c").by("ana"), true).await;
    assert!(answered.ok, "{answered:?}");
    assert_eq!(answered.data["happened"], json!(true));
    assert_eq!(ops.applied("page"), 1, "nothing was sent again");
}

/// A foreign approval id on a tool that needs no approval was silently
/// ignored, and the call ran.
#[tokio::test]
async fn a_foreign_approval_id_is_refused_on_every_tool() {
    let ops = Arc::new(Ops::default());
    let d = builder(&ops).build().unwrap();
    let asked = call(&d, "c", "delete_volume", json!({"volume": "vol-7"})).await;
    let id = asked.question_id.clone().unwrap();
    for id in [id.as_str(), "made-up"] {
        let page = d
            .execute(
                Call::new("page", r#"{"text": "hi"}"#)
                    .session("c")
                    .approval(id),
            )
            .await;
        assert_eq!(page.code, Code::ConfirmationInvalid, "{page:?}");
    }
    assert_eq!(ops.attempts("page"), 0);
}

// ------------------------------------- failing to record is an unknown outcome

/// A result the store failed to record is answered in doubt, never as done
/// nor as not done: when nothing reached the store its question reaches a
/// person; when the write took and only its answer was lost, the store
/// knows, nobody is asked, and the identical call replays it.
#[tokio::test]
async fn an_outcome_that_could_not_be_recorded_is_in_doubt_and_reaches_a_person() {
    for outage in [Outage::Down, Outage::AnswersLost] {
        let ops = Arc::new(Ops::default());
        let audit = MemoryAudit::new();
        let store = Arc::new(Faulty::new(MemoryStore::default()));
        let d = builder(&ops)
            .store(Arc::clone(&store))
            .audit(audit.clone())
            .claim_lease(Duration::from_millis(50))
            .build()
            .unwrap();
        store.fail(outage, Some("complete"), 100);
        let sent = call(&d, "c", "page", json!({"text": "disk full"})).await;
        store.heal();
        assert_eq!(ops.applied("page"), 1);
        match outage {
            // The write took and its answer was lost: the call is answered
            // in doubt (the process cannot know), but the store knows, so
            // no person is asked, and the identical call replays it.
            Outage::AnswersLost => {
                assert_eq!(sent.code, Code::StoreUnavailable, "{sent:?}");
                assert_eq!(sent.data["in_doubt"], json!(true), "{sent:?}");
                assert!(audit.records()[0].in_doubt);
                tokio::time::sleep(Duration::from_millis(80)).await;
                assert_eq!(d.surface_unknown_outcomes().await.unwrap().asked, 0);
                assert!(open_questions(d.store()).await.is_empty());
            }
            Outage::Down => {
                assert_eq!(sent.code, Code::StoreUnavailable, "{sent:?}");
                assert_eq!(sent.data["in_doubt"], json!(true), "{sent:?}");
                assert!(audit.records()[0].in_doubt);
                assert!(
                    sent.message.contains("Do not call it again"),
                    "{}",
                    sent.message
                );
                // The claim's lease runs out with no outcome: the inbox lists
                // the question without waiting for a retry.
                tokio::time::sleep(Duration::from_millis(80)).await;
                let surfaced = d.surface_unknown_outcomes().await.unwrap();
                assert_eq!(surfaced.asked, 1);
                let asked = open_questions(d.store()).await;
                assert_eq!(asked.len(), 1, "{asked:?}");
                assert_eq!(asked[0].reason.as_deref(), Some("in_doubt"));
                assert_eq!(asked[0].arguments, json!({"text": "disk full"}));
                // Surfaced twice, it is one question.
                assert_eq!(d.surface_unknown_outcomes().await.unwrap().asked, 0);
            }
        }
        let retry = call(&d, "c", "page", json!({"text": "disk full"})).await;
        assert_eq!(
            ops.applied("page"),
            1,
            "{outage:?}: never sent twice: {retry:?}"
        );
        if outage == Outage::AnswersLost {
            assert_eq!(retry.code, Code::Ok, "{retry:?}");
            assert!(retry.replayed, "{retry:?}");
        }
    }
}

/// A process that died after its claim left nothing but the claim: the
/// question reaches a person from the claim alone, and a person's "it
/// happened" is recorded as done without any call.
#[tokio::test]
async fn a_claim_left_by_a_dead_process_is_a_question_in_the_inbox() {
    let store = Arc::new(MemoryStore::default());
    // The process "dies" inside the handler: its future is dropped there.
    let hung = Dispatcher::builder(tools![hang].unwrap(), Arc::new(()))
        .store(Arc::clone(&store))
        .claim_lease(Duration::from_millis(30))
        .build()
        .unwrap();
    let dropped = tokio::time::timeout(
        Duration::from_millis(10),
        hung.execute(Call::new("hang", r#"{"what": "x"}"#).session("c")),
    )
    .await;
    assert!(dropped.is_err(), "the call was cut off");
    tokio::time::sleep(Duration::from_millis(60)).await;
    let surfaced = hung.surface_unknown_outcomes().await.unwrap();
    assert_eq!(surfaced.asked, 1);
    let asked = open_questions(store.as_ref()).await;
    assert_eq!(asked.len(), 1);
    let id = asked[0].id.clone();
    assert!(
        person_answers(store.as_ref(), &id, "ana", &Answer::Happened)
            .await
            .is_ok()
    );
    let surfaced = hung.surface_unknown_outcomes().await.unwrap();
    assert_eq!(surfaced.settled, 1, "recorded as done at once");
    let replay = hung
        .execute(Call::new("hang", r#"{"what": "x"}"#).session("c"))
        .await;
    assert!(replay.ok && replay.replayed, "{replay:?}");
    assert_eq!(replay.data["happened"], json!(true));
    assert!(open_questions(store.as_ref()).await.is_empty());
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

// ------------------------------------------------------ replicas that race

/// Two replicas carrying out one approved call: the one that lost answered
/// `CONFIRMATION_INVALID` "Nothing was done" while the other ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_racing_on_one_approved_call_both_answer_what_was_done() {
    let dir = std::env::temp_dir().join(format!("toolcall-life-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    let ops = Arc::new(Ops::default());
    let replica = |ops: &Arc<Ops>| {
        builder(ops)
            .approvals(Approvals::Inbox)
            .store(SqliteStore::open(&path).unwrap())
            .build()
            .unwrap()
    };
    let (one, two) = (Arc::new(replica(&ops)), Arc::new(replica(&ops)));
    // Many rounds, each replica in a task of its own on its own thread: the
    // one that loses the take races the one that runs.
    for round in 0..40u32 {
        let args = format!(r#"{{"volume": "vol-{round}"}}"#);
        let asked = one
            .execute(Call::new("delete_volume", args.as_str()).session("c"))
            .await;
        let id = asked.question_id.clone().unwrap();
        person_approves(one.store(), &id).await;
        let carry = |d: &Arc<Dispatcher<Ops, SqliteStore>>| {
            let (d, args, id) = (Arc::clone(d), args.clone(), id.clone());
            tokio::spawn(async move {
                d.execute(
                    Call::new("delete_volume", args.as_str())
                        .session("c")
                        .approval(&id),
                )
                .await
            })
        };
        let (a, b) = (carry(&one), carry(&two));
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!(
            ops.applied("delete_volume"),
            round + 1,
            "round {round}: {a:?} {b:?}"
        );
        for answer in [&a, &b] {
            assert!(
                answer.ok || answer.code == Code::CallInProgress,
                "round {round}: each answers the call's state, never that nothing was done: \
                 {answer:?}"
            );
        }
        let later = two
            .execute(
                Call::new("delete_volume", args.as_str())
                    .session("c")
                    .approval(&id),
            )
            .await;
        assert!(later.ok && later.replayed, "round {round}: {later:?}");
    }
    assert_eq!(ops.applied("delete_volume"), 40);
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------- dry runs

/// A dry run of an in-doubt call said `would: "run"`; the real call hands
/// it to a person.
#[tokio::test]
async fn a_dry_run_of_an_in_doubt_call_says_a_person_settles_it() {
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(1, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let args = r#"{"text": "disk full"}"#;
    let lost = d.execute(Call::new("page", args).session("c")).await;
    assert_eq!(lost.code, Code::InDoubt);
    let dry = d
        .execute(Call::new("page", args).session("c").dry_run(true))
        .await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "ask_a_person", "{dry:?}");
    assert_eq!(dry.data["reason"], "in_doubt");
    let real = d.execute(Call::new("page", args).session("c")).await;
    assert_eq!(real.code, Code::InDoubt, "the real call agrees: {real:?}");
    assert_eq!(ops.attempts("page"), 1);
}

// ----------------------------------------------------------------- bounds

/// One client made 360 pending questions across 60 conversation names: a
/// caller's open questions are bounded across its conversations.
#[tokio::test]
async fn a_callers_open_questions_are_bounded_across_its_conversations() {
    let ops = Arc::new(Ops::default());
    let d = builder(&ops)
        .max_pending_approvals(5)
        .max_pending_per_caller(12)
        .build()
        .unwrap();
    let mut codes = Vec::new();
    for conversation in 0..6 {
        for volume in 0..4 {
            let asked = call(
                &d,
                &format!("c-{conversation}"),
                "delete_volume",
                json!({"volume": format!("vol-{volume}")}),
            )
            .await;
            codes.push(asked.code);
        }
    }
    let asked = codes
        .iter()
        .filter(|code| **code == Code::ConfirmationRequired)
        .count();
    assert_eq!(asked, 12, "{codes:?}");
    assert_eq!(open_questions(d.store()).await.len(), 12);
    assert!(codes[12..].iter().all(|code| *code == Code::PendingLimit));
    // Another caller is not bounded by this one's.
    let other = Caller::new("other", policy(10));
    let theirs = d
        .execute(
            Call::new("delete_volume", r#"{"volume": "vol-0"}"#)
                .session("c-0")
                .caller(&other),
        )
        .await;
    assert_eq!(theirs.code, Code::ConfirmationRequired, "{theirs:?}");
}
