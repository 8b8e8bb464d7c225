//! Defects of the operators' controls the model-based test (tests/model/)
//! found, each minimized to the operations that show it and kept here: each
//! failed before its fix, and names the seed of the run that found it
//! (`TOOLCALL_MODEL_SEED`, `TOOLCALL_MODEL_CASES`) or how it was reached. Each runs
//! on the memory store and SQLite (and Postgres with
//! `TOOLCALL_POSTGRES_URL`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolcall::store::{MemoryStore, Store};
use toolcall::{
    Approvals, Call, Caller, Code, Ctx, Decision, Dispatcher, Policy, ToolError, ToolResult, tool,
    tools,
};
use toolcall_core::controls::{self, Target};
use toolcall_core::life::{Answer, Decided};
use toolcall_sqlite::SqliteStore;
use toolcall_testkit::count::counted;
use toolcall_tests::person_answers;

/// Counts what ran.
#[derive(Default)]
struct Ledger {
    pages: AtomicU32,
    wipes: AtomicU32,
    /// The next wipe's answer is lost, and it did nothing.
    lose: AtomicU32,
}

/// Wipes a disk, for good.
#[tool(side_effect, high_risk)]
async fn wipe(
    ctx: &Ctx<Ledger>,
    /// Which disk.
    arg: i64,
) -> Result<Value, ToolError> {
    if ctx.state.lose.swap(0, Ordering::SeqCst) == 1 {
        return Err(ToolError::transient("the answer was lost"));
    }
    counted(&ctx.state.wipes, json!({"wiped": arg}))
}

/// Pages the person on call.
#[tool(side_effect)]
async fn page(
    ctx: &Ctx<Ledger>,
    /// Which page.
    arg: i64,
) -> Result<Value, ToolError> {
    counted(&ctx.state.pages, json!({"paged": arg}))
}

type Replica<St> = Dispatcher<Ledger, Arc<St>>;

/// A fresh ledger, and a replica over `store` whose host decides.
fn replica<St: Store>(store: &Arc<St>) -> (Arc<Ledger>, Replica<St>) {
    replica_in(store, Approvals::Host)
}

/// A fresh ledger, and a replica over `store` where `mode` decides.
fn replica_in<St: Store>(store: &Arc<St>, mode: Approvals) -> (Arc<Ledger>, Replica<St>) {
    let ledger = Arc::new(Ledger::default());
    let d = Dispatcher::builder(tools![page, wipe].unwrap(), Arc::clone(&ledger))
        .store(Arc::clone(store))
        .caller(alice())
        .approvals(mode)
        .build()
        .unwrap();
    (ledger, d)
}

fn alice() -> Caller {
    Caller::new("alice", Policy::new().allow(["page", "wipe"]))
}

async fn wipe_call<St: Store>(d: &Replica<St>, arg: i64, confirmed: bool) -> ToolResult {
    d.execute(
        Call::new("wipe", json!({ "arg": arg }).to_string().as_str())
            .session("c0")
            .confirmed(confirmed),
    )
    .await
}

/// The operators stop `tool` for an incident, through `store`.
async fn stop_tool<St: Store>(store: &St, tool: &str) {
    controls::stop(store, Target::Tool(tool.into()), "incident", "ops")
        .await
        .unwrap();
}

fn wipes(ledger: &Ledger) -> u32 {
    ledger.wipes.load(Ordering::SeqCst)
}

async fn page_call<St: Store>(d: &Replica<St>, arg: i64) -> ToolResult {
    d.execute(Call::new("page", json!({ "arg": arg }).to_string().as_str()).session("c0"))
        .await
}

/// Runs `scenario` on two handles of one memory store, of one SQLite file,
/// and of one Postgres schema when `TOOLCALL_POSTGRES_URL` is set.
/// A number of this process's own for each scenario run: the scenarios of
/// every test share one name, and run at once.
static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

macro_rules! on_every_store {
    ($scenario:ident) => {{
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let memory = Arc::new(MemoryStore::default());
            $scenario(Arc::clone(&memory), memory).await;
            let dir = std::env::temp_dir().join(format!(
                "toolcall-controls-regressions-{run}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("one.db");
            $scenario(
                Arc::new(SqliteStore::open(&path).unwrap()),
                Arc::new(SqliteStore::open(&path).unwrap()),
            )
            .await;
            let _ = std::fs::remove_dir_all(&dir);
            if let Some(url) = toolcall_tests::postgres_url() {
                let schema = toolcall_tests::postgres_schema(&format!("ctlreg{run}"));
                let connect = || toolcall_postgres::PostgresStore::connect_in_schema(&url, &schema);
                $scenario(
                    Arc::new(connect().await.unwrap()),
                    Arc::new(connect().await.unwrap()),
                )
                .await;
                connect().await.unwrap().drop_schema().await.unwrap();
            }
        });
    }};
}

/// A replica that answered `STOPPED` from the controls it read last keeps
/// answering `STOPPED` after the stop is lifted: a call judged stopped by
/// the controls the process holds returns before the call's start, where
/// the store would have told it their version moved, so nothing reads them
/// again (a dry run or a call under a rate limit would).
///
/// Found by tests/model/, `TOOLCALL_MODEL_SEED=20261203
/// TOOLCALL_MODEL_CASES=300` (memory store): a call stopped on a replica,
/// then every call of the model driven to its end after the operators
/// enabled everything, and a wipe a person approved never ran.
#[test]
fn a_replica_sees_a_stop_lifted() {
    async fn scenario<St: Store>(store: Arc<St>, other: Arc<St>) {
        let (ledger, d) = replica(&store);
        // The operator stops `page` through another handle on the store.
        stop_tool(&*other, "page").await;
        // The replica learns it as its call begins.
        let stopped = page_call(&d, 1).await;
        assert_eq!(stopped.code, Code::Stopped, "{stopped:?}");
        // The operator enables it again.
        controls::resume(&*other, Target::Tool("page".into()), "ops")
            .await
            .unwrap();
        // The replica's next call runs.
        let after = page_call(&d, 1).await;
        assert_eq!(
            after.code,
            Code::Ok,
            "page is enabled again, and the replica still says: {after:?}"
        );
        assert_eq!(ledger.pages.load(Ordering::SeqCst), 1);
    }
    on_every_store!(scenario);
}

/// The host's approval carries out a decision a person recorded in the
/// inbox before the tool was stopped: the stopped tool runs. (`life::decide`
/// refuses the host's own approval, and the call itself is `STOPPED`; the
/// decision recorded before is carried out all the same.)
///
/// Read in the code, then run as a case of tests/model/ (its operations,
/// not the random search: seed 20261203 reaches none at 300 cases;
/// `TOOLCALL_MODEL_DEFECTS=host,rule` lets it): an approval in
/// the inbox, a stop of the tool, then the host's `approve` of the same
/// question by another person.
#[test]
fn the_hosts_approve_does_not_run_a_stopped_tool() {
    async fn scenario<St: Store>(store: Arc<St>, other: Arc<St>) {
        let (ledger, inbox) = replica_in(&store, Approvals::Inbox);
        let asked = wipe_call(&inbox, 1, false).await;
        assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
        let id = asked.question_id.unwrap();
        let decided = person_answers(&*other, &id, "ana", &Answer::Approve).await;
        assert!(matches!(decided, Ok(Decided::Recorded)), "{decided:?}");
        stop_tool(&*other, "wipe").await;
        let approved = inbox
            .approve(Decision::new(&id, "c0").caller(&alice()).by("bo"))
            .await;
        assert_eq!(
            wipes(&ledger),
            0,
            "wipe is stopped, and the host's approve ran it: {approved:?}"
        );
    }
    on_every_store!(scenario);
}

/// The host's "it did not happen" (`answer_in_doubt(.., false)`) of an unknown
/// outcome of a stopped tool runs the call again while the tool is
/// stopped (`life::decide` checks the controls only for approvals).
///
/// Read in the code, then run as a case of tests/model/ (its operations,
/// not the random search: seed 20261203 reaches none at 300 cases;
/// `TOOLCALL_MODEL_DEFECTS=host,rule` lets it): a confirmed
/// wipe whose outcome went unknown, its question about the unknown
/// outcome, a stop of the tool, then the host settling "it did not
/// happen".
#[test]
fn settling_an_unknown_outcome_does_not_run_a_stopped_tool() {
    async fn scenario<St: Store>(store: Arc<St>, other: Arc<St>) {
        let (ledger, d) = replica(&store);
        // An attempt whose outcome is unknown: the backend's answer was
        // lost (it did nothing, as the person will find).
        ledger.lose.store(1, Ordering::SeqCst);
        let doubt = wipe_call(&d, 1, true).await;
        assert_eq!(doubt.code, Code::InDoubt, "{doubt:?}");
        let id = doubt.question_id.unwrap();
        stop_tool(&*other, "wipe").await;
        let settled = d
            .answer_in_doubt(Decision::new(&id, "c0").caller(&alice()).by("ana"), false)
            .await;
        assert_eq!(
            wipes(&ledger),
            0,
            "wipe is stopped, and settling its unknown outcome ran it: {settled:?}"
        );
    }
    on_every_store!(scenario);
}

/// An approval rule of the operators' controls approves a question that two
/// people must approve (asked while `[approvals] wipe = 2`), once a policy
/// with the rule replaced it: the rule decides the open question in the
/// store (its id, found by `ask_approval`), with no signature, and the call
/// runs. The question keeps its count (`people:2`) for this: the inbox and
/// `life::decide` still ask two people for it.
///
/// Read in the code, then run as a case of tests/model/ (its operations,
/// not the random search: seed 20261203 reaches none at 300 cases;
/// `TOOLCALL_MODEL_DEFECTS=host,rule` lets it).
#[test]
fn a_rule_does_not_approve_a_question_two_people_must() {
    async fn scenario<St: Store>(store: Arc<St>, other: Arc<St>) {
        let (ledger, d) = replica(&store);
        let load = |document: Value| {
            let policy: controls::Controls = serde_json::from_value(document).unwrap();
            let other = Arc::clone(&other);
            let registry = d.registry();
            async move {
                controls::load_policy(&*other, registry, &[&alice()], &policy, "ops", "p.toml")
                    .await
                    .unwrap();
            }
        };
        load(json!({"approvals": {"wipe": 2}})).await;
        let asked = wipe_call(&d, 0, false).await;
        assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
        load(json!({"approval_rules": [{
            "name": "small-wipes", "tool": "wipe", "arguments": {"arg": {"max": 0}}
        }]}))
        .await;
        let again = wipe_call(&d, 0, false).await;
        assert_eq!(
            wipes(&ledger),
            0,
            "the question needs two people, and a rule approved it: {again:?}"
        );
    }
    on_every_store!(scenario);
}
