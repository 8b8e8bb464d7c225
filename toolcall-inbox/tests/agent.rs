//! The agent's side of the inbox: a dispatcher learns a person's decision,
//! recorded in the store, on its next call with the approval's id. In
//! `Approvals::Inbox` mode nothing else approves; in `Approvals::Host` mode
//! (the default) the host still may, but a recorded decision is honoured.
//! On every store: memory, SQLite, and Postgres when `TOOLCALL_POSTGRES_URL`
//! is set (SKIPPED otherwise).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use toolcall::store::{ApprovalDecision, ApprovalEntry, DecideOutcome, DecisionWrite, now_ms};
use toolcall::store::{MemoryStore, Store};
use toolcall::{
    Approvals, Call, Code, Ctx, Decision, Dispatcher, MemoryAudit, Policy, Rejection, ToolResult,
    tool, tools,
};
use toolcall_sqlite::SqliteStore;
// The bank counts what it sent; this file's send (checked, limited)
// stays here.
use toolcall_testkit::bank::Bank;
use toolcall_testkit::run::{postgres_url, runtime};

/// Sends money to someone. Amount in cents.
#[tool(side_effect, high_risk, check = check_send)]
async fn send(
    ctx: &Ctx<Bank>,
    /// Who gets it.
    to: String,
    /// The amount, in cents.
    #[arg(min = 1, limit = "max_cents")]
    cents: i64,
) -> Result<Value, Rejection> {
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    ctx.state.sent.lock().unwrap().push((to.clone(), cents));
    Ok(json!({"to": to, "cents": cents}))
}

fn check_send(args: &SendArgs, _ctx: &Ctx<Bank>) -> Result<(), Rejection> {
    if args.to == "mallory" {
        return Err(Rejection::new("PAYEE_BLOCKED", "mallory is blocked."));
    }
    Ok(())
}

struct Agent<St: Store> {
    dispatcher: Dispatcher<Bank, Arc<St>>,
    store: Arc<St>,
    audit: MemoryAudit,
}

fn agent<St: Store>(store: Arc<St>, approvals: Approvals) -> Agent<St> {
    agent_lasting(store, approvals, None)
}

/// An agent whose questions last `ttl` when given, else the default.
fn agent_lasting<St: Store>(
    store: Arc<St>,
    approvals: Approvals,
    ttl: Option<std::time::Duration>,
) -> Agent<St> {
    let audit = MemoryAudit::new();
    let mut builder = Dispatcher::builder(tools![send].unwrap(), Arc::new(Bank::default()))
        .store(Arc::clone(&store))
        .policy(Policy::new().allow(["send"]).limit("max_cents", 10_000))
        .approvals(approvals)
        .audit(audit.clone())
        .max_steps(1_000);
    if let Some(ttl) = ttl {
        builder = builder.approval_ttl(ttl);
    }
    Agent {
        dispatcher: builder.build().unwrap(),
        store,
        audit,
    }
}

impl<St: Store> Agent<St> {
    async fn call(
        &self,
        session: &str,
        to: &str,
        cents: i64,
        approval: Option<&str>,
    ) -> ToolResult {
        let arguments = json!({"to": to, "cents": cents}).to_string();
        let mut call = Call::new("send", arguments.as_str()).session(session);
        if let Some(id) = approval {
            call = call.approval(id);
        }
        self.dispatcher.execute(call).await
    }

    /// 100 cents to bo, said to be confirmed by whoever calls.
    async fn confirmed(&self, session: &str) -> ToolResult {
        let arguments = json!({"to": "bo", "cents": 100}).to_string();
        let call = Call::new("send", arguments.as_str()).session(session);
        self.dispatcher.execute(call.confirmed(true)).await
    }

    async fn ask(&self, session: &str, to: &str, cents: i64) -> String {
        let asked = self.call(session, to, cents, None).await;
        assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
        asked.question_id.unwrap()
    }

    async fn decide(&self, id: &str, approved: bool, note: &str, edited: Option<Value>) {
        let decision = ApprovalDecision {
            approved,
            by: "ana".into(),
            note: note.into(),
            edited_arguments: edited,
            decided_ms: now_ms(),
            lasts_until_ms: None,
        };
        assert_eq!(
            self.store
                .decide_approval(&DecisionWrite {
                    id,
                    decision: &decision,
                    now_ms: now_ms()
                })
                .await
                .unwrap(),
            DecideOutcome::Decided
        );
    }

    async fn entry(&self, id: &str) -> Option<ApprovalEntry> {
        self.store.approval(id).await.unwrap()
    }

    fn runs(&self) -> u64 {
        self.dispatcher.state().transfers()
    }
}

/// The whole agent side on one store; `session` keeps runs apart on a
/// shared database.
async fn inbox_mode<St: Store>(store: Arc<St>, session: &str) {
    let agent = agent(store, Approvals::Inbox);

    // `confirmed` approves nothing in inbox mode: it asks.
    let confirmed = agent.confirmed(session).await;
    assert_eq!(confirmed.code, Code::ConfirmationRequired, "{confirmed:?}");
    assert_eq!(agent.runs(), 0);

    // Undecided: asked again under the same id, not used up, and the
    // asking is not a loop (more polls than max_duplicate_calls).
    let id = confirmed.question_id.unwrap();
    for _ in 0..5 {
        let again = agent.call(session, "bo", 100, Some(&id)).await;
        assert_eq!(again.code, Code::ConfirmationRequired, "{again:?}");
        assert_eq!(again.question_id.as_deref(), Some(id.as_str()));
        assert_eq!(again.data["pending"], json!({"to": "bo", "cents": 100}));
    }
    assert!(agent.entry(&id).await.unwrap().is_open(now_ms()), "unused");
    assert_eq!(agent.runs(), 0);

    // An id nobody asked for is refused at once.
    let bogus = agent.call(session, "mallory", 5, Some("bogus")).await;
    assert_eq!(bogus.code, Code::ConfirmationInvalid, "{bogus:?}");

    // Approved: it runs once, with the person's name in the audit.
    agent.decide(&id, true, "fine", None).await;
    let ran = agent.call(session, "bo", 100, Some(&id)).await;
    assert!(ran.ok && !ran.replayed, "{ran:?}");
    assert_eq!(agent.runs(), 1);
    let record = agent.audit.records().pop().unwrap();
    assert_eq!(record.approved_by.as_deref(), Some("ana"));
    assert!(record.confirmed);
    // Used up: another call with the id is refused; the same call again is
    // the stored answer.
    let other = agent.call(session, "bo", 50, Some(&id)).await;
    assert_eq!(other.code, Code::ConfirmationInvalid, "{other:?}");
    let twin = agent.call(session, "bo", 100, Some(&id)).await;
    assert!(twin.ok && twin.replayed, "{twin:?}");
    assert_eq!(agent.runs(), 1, "once");
    let came = agent.entry(&id).await.unwrap();
    assert!(came.used_ms.is_some());
    let result = came.result.unwrap();
    assert!(result.ok && !result.replayed && result.code == "OK");

    // Denied: the model is told, with the note; the id is used up, and the
    // denial is final: the identical call is denied again, with or without
    // the id, and never asked about anew.
    let id = agent.ask(session, "cy", 200).await;
    agent.decide(&id, false, "no receipt", None).await;
    let denied = agent.call(session, "cy", 200, Some(&id)).await;
    assert_eq!(denied.code, Code::ConfirmationDenied);
    assert!(denied.message.contains("no receipt"), "{denied:?}");
    let again = agent.call(session, "cy", 200, Some(&id)).await;
    assert_eq!(again.code, Code::ConfirmationDenied, "{again:?}");
    let unasked = agent.call(session, "cy", 200, None).await;
    assert_eq!(unasked.code, Code::ConfirmationDenied, "{unasked:?}");
    assert_eq!(agent.runs(), 1, "never ran");
    assert_eq!(
        agent.entry(&id).await.unwrap().result.unwrap().code,
        "CONFIRMATION_DENIED"
    );

    // Approved with edits: the edited call runs, validated, checked and
    // policed again, and the answer says a person changed it.
    let id = agent.ask(session, "di", 3_000).await;
    agent
        .decide(&id, true, "half", Some(json!({"to": "di", "cents": 1_500})))
        .await;
    let before = agent.audit.len();
    let edited = agent.call(session, "di", 3_000, Some(&id)).await;
    assert!(edited.ok, "{edited:?}");
    assert_eq!(edited.data["edited_by_person"], true);
    assert_eq!(
        edited.data["edited_arguments"],
        json!({"to": "di", "cents": 1_500})
    );
    assert_eq!(edited.data["cents"], 1_500);
    assert!(edited.message.contains("A person changed the arguments"));
    assert_eq!(
        agent.dispatcher.state().sent.lock().unwrap().last(),
        Some(&("di".to_owned(), 1_500))
    );
    // The audit keeps both versions: the model's call, carried out as the
    // person decided, and the edited call as it ran.
    let records = agent.audit.records();
    assert_eq!(records.len(), before + 2);
    let model = &records[before];
    assert_eq!(model.approved_by.as_deref(), Some("ana"));
    assert_eq!(
        serde_json::from_str::<Value>(&model.arguments).unwrap()["cents"],
        3_000
    );
    let person = &records[before + 1];
    assert_eq!(
        serde_json::from_str::<Value>(&person.arguments).unwrap()["cents"],
        1_500
    );
    assert!(person.ok);

    // Each edit is of a call of its own: an edit stands for the identical
    // calls after it (they get the edited call's answer, as below).
    for (cents, (edit, code)) in (10..).zip([
        // Validated: no negative amounts.
        (json!({"to": "ed", "cents": -5}), Code::InvalidArguments),
        // Policed: over the caller's limit.
        (json!({"to": "ed", "cents": 20_000}), Code::PolicyLimit),
        // Checked: a blocked payee.
        (
            json!({"to": "mallory", "cents": 10}),
            Code::new("PAYEE_BLOCKED"),
        ),
    ]) {
        let id = agent.ask(session, "ed", cents).await;
        agent.decide(&id, true, "", Some(edit.clone())).await;
        let refused = agent.call(session, "ed", cents, Some(&id)).await;
        assert_eq!(refused.code, code, "{edit}: {refused:?}");
        assert_eq!(refused.data["edited_by_person"], true);
        assert_eq!(
            agent.entry(&id).await.unwrap().result.unwrap().code,
            code.as_str()
        );
        // The model's identical call again: the person's edit answers it,
        // and nobody is asked anew.
        let again = agent.call(session, "ed", cents, None).await;
        assert_eq!(again.code, code, "{edit}: {again:?}");
    }
    assert_eq!(agent.runs(), 2, "none of the refused edits ran");

    // A decided approval that expired before the agent came back.
    let short = agent_with_ttl(Arc::clone(&agent.store));
    let id = short.ask(session, "fy", 7).await;
    short.decide(&id, true, "", None).await;
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let late = short.call(session, "fy", 7, Some(&id)).await;
    assert_eq!(late.code, Code::ConfirmationExpired, "{late:?}");
    assert_eq!(
        short.entry(&id).await.unwrap().result.unwrap().code,
        "CONFIRMATION_EXPIRED"
    );
    assert_eq!(short.runs(), 0);

    // The host's own decision goes into the store in inbox mode.
    let id = agent.ask(session, "gi", 9).await;
    let approved = agent
        .dispatcher
        .approve(Decision::new(&id, session).by("host-ops"))
        .await;
    assert!(approved.ok, "{approved:?}");
    let kept = agent.entry(&id).await.unwrap();
    assert_eq!(kept.approval.decision.unwrap().by, "host-ops");
    assert!(kept.result.unwrap().ok);
}

fn agent_with_ttl<St: Store>(store: Arc<St>) -> Agent<St> {
    let ttl = std::time::Duration::from_millis(200);
    agent_lasting(store, Approvals::Inbox, Some(ttl))
}

/// Host mode keeps the reference's behaviour, and honours a decision a
/// person recorded.
async fn host_mode<St: Store>(store: Arc<St>, session: &str) {
    let agent = agent(store, Approvals::Host);
    let confirmed = agent.confirmed(session).await;
    assert!(
        confirmed.ok,
        "the host's confirmation approves: {confirmed:?}"
    );

    // An id the store does not know is stage 7's to refuse, after the
    // check, as it always was.
    let checked = agent.call(session, "mallory", 5, Some("bogus")).await;
    assert_eq!(checked.code, Code::new("PAYEE_BLOCKED"), "{checked:?}");
    let bogus = agent.call(session, "bo", 5, Some("bogus")).await;
    assert_eq!(bogus.code, Code::ConfirmationInvalid, "{bogus:?}");

    // Nobody decided: the host asserts it, and it runs.
    let id = agent.ask(session, "cy", 200).await;
    let ran = agent.call(session, "cy", 200, Some(&id)).await;
    assert!(ran.ok, "{ran:?}");

    // A person denied it in the inbox: the host's id does not override that.
    let id = agent.ask(session, "di", 300).await;
    agent.decide(&id, false, "never", None).await;
    let denied = agent.call(session, "di", 300, Some(&id)).await;
    assert_eq!(denied.code, Code::ConfirmationDenied, "{denied:?}");
    assert!(denied.message.contains("never"));
    let denied = agent
        .dispatcher
        .approve(Decision::new(&id, session).by("host"))
        .await;
    // Used up, and final: the host's approval is answered with the denial.
    assert_eq!(
        denied.code,
        Code::ConfirmationDenied,
        "a decision stands: {denied:?}"
    );
    assert!(denied.message.contains("never"));

    // Edited in the inbox, approved by the host: the edits run.
    let id = agent.ask(session, "ed", 400).await;
    agent
        .decide(&id, true, "", Some(json!({"to": "ed", "cents": 40})))
        .await;
    let edited = agent
        .dispatcher
        .approve(Decision::new(&id, session).by("host"))
        .await;
    assert!(edited.ok, "{edited:?}");
    assert_eq!(edited.data["cents"], 40);
    assert_eq!(edited.data["edited_by_person"], true);
    assert_eq!(agent.runs(), 3);
}

#[test]
fn on_the_memory_store() {
    runtime().block_on(async {
        inbox_mode(Arc::new(MemoryStore::default()), "s").await;
        host_mode(Arc::new(MemoryStore::default()), "s").await;
    });
}

#[test]
fn on_sqlite_shared_by_two_processes_worth_of_handles() {
    let dir = std::env::temp_dir().join(format!("toolcall-inbox-agent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    runtime().block_on(async {
        inbox_mode(Arc::new(SqliteStore::open(&path).unwrap()), "inbox").await;
        host_mode(Arc::new(SqliteStore::open(&path).unwrap()), "host").await;
    });
}

#[test]
fn on_postgres() {
    let Some(url) = postgres_url("the inbox's agent side") else {
        return;
    };
    runtime().block_on(async {
        let schema = format!("toolcall_inbox_agent_{}_{}", std::process::id(), now_ms());
        let store = toolcall_postgres::PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        let store = Arc::new(store);
        inbox_mode(Arc::clone(&store), "inbox").await;
        host_mode(Arc::clone(&store), "host").await;
        let store = Arc::into_inner(store).expect("the agents are gone");
        store.drop_schema().await.unwrap();
    });
}
