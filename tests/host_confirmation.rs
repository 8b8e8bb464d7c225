//! What the host confirms and what a call leaves: a person's decision brought
//! back with the host's say-so, an unknown outcome left by a call that died
//! after its claim (or lost its answer), settled as the tool's backend
//! allows, and a call that names no conversation. The assertion that
//! matters is how many times each backend applied each key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;
use toolcall::store::prelude::*;
use toolcall::store::{
    ApprovalDecision, ApprovalLookup, Binding, PendingOrder, PendingQuery, now_ms,
};
use toolcall::{
    Approvals, Call, Code, Ctx, Decision, Dispatcher, DispatcherBuilder, MemoryAudit, ToolError,
    ToolResult, tool, tools,
};
use toolcall_testkit::answer::assert_code_says;

/// A backend that records each write under the idempotency key it came
/// with, and can be made to hang right after it committed one (the process
/// "dies" there: the test drops the call's task).
#[derive(Default)]
struct Ledger {
    /// Every write, in order: (key, what).
    writes: Mutex<Vec<(String, String)>>,
    /// Hang after the next commit, for ever.
    hang_after_commit: AtomicBool,
    /// Lose the answer of the next commit (a transient error after it).
    lose_after_commit: AtomicBool,
    committed: Notify,
}

impl Ledger {
    fn writes(&self) -> usize {
        self.writes.lock().unwrap().len()
    }

    fn keys(&self) -> HashMap<String, usize> {
        let mut keys = HashMap::new();
        for (key, _) in self.writes.lock().unwrap().iter() {
            *keys.entry(key.clone()).or_default() += 1;
        }
        keys
    }

    /// Commits `what` under `key` (once per key when `dedupe`), then hangs
    /// or loses the answer if told to.
    async fn write(&self, key: &str, what: &str, dedupe: bool) -> Result<Value, ToolError> {
        {
            let mut writes = self.writes.lock().unwrap();
            if !(dedupe && writes.iter().any(|(k, _)| k == key)) {
                writes.push((key.to_owned(), what.to_owned()));
            }
        }
        self.committed.notify_one();
        if self.hang_after_commit.swap(false, Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if self.lose_after_commit.swap(false, Ordering::SeqCst) {
            return Err(ToolError::transient("the answer was lost"));
        }
        Ok(json!({"written": what}))
    }
}

/// Writes `what` under the call's idempotency key (once per key when the
/// backend `dedupe`s).
async fn write(ctx: &Ctx<Ledger>, what: &str, dedupe: bool) -> Result<Value, ToolError> {
    ctx.state.write(&ctx.idempotency_key, what, dedupe).await
}

/// Posts a message; the backend keeps one message per idempotency key.
#[tool(side_effect, idempotent_backend)]
async fn post_keyed(
    ctx: &Ctx<Ledger>,
    /// The message.
    text: String,
) -> Result<Value, ToolError> {
    write(ctx, &text, true).await
}

/// Posts a message; the backend can be asked what a key did.
#[tool(side_effect, reconcile = find_post)]
async fn post_checked(
    ctx: &Ctx<Ledger>,
    /// The message.
    text: String,
) -> Result<Value, ToolError> {
    write(ctx, &text, false).await
}

async fn find_post(ctx: &Ctx<Ledger>, key: &str) -> Result<Option<Value>, ToolError> {
    let writes = ctx.state.writes.lock().unwrap();
    Ok(writes
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, what)| json!({"written": what, "found": true})))
}

/// Posts a message; the backend neither deduplicates nor can be asked.
#[tool(side_effect)]
async fn post_plain(
    ctx: &Ctx<Ledger>,
    /// The message.
    text: String,
) -> Result<Value, ToolError> {
    write(ctx, &text, false).await
}

/// Wires money; a person approves each wire; the bank neither deduplicates
/// nor can be asked.
#[tool(side_effect, high_risk)]
async fn wire(
    ctx: &Ctx<Ledger>,
    /// The amount, in cents.
    cents: i64,
) -> Result<Value, ToolError> {
    write(ctx, &cents.to_string(), false).await
}

const HELLO: &str = r#"{"text": "hello"}"#;
const WIRE: &str = r#"{"cents": 335}"#;
const CHAT: &str = "chat-1";

fn ledger_dispatcher(ledger: &Arc<Ledger>) -> DispatcherBuilder<Ledger> {
    Dispatcher::builder(
        tools![post_keyed, post_checked, post_plain, wire].unwrap(),
        Arc::clone(ledger),
    )
    .max_retries(0)
    .retry_backoff(Duration::ZERO)
    // A dead call's claim ends soon; the next call waits it out.
    .claim_lease(Duration::from_millis(150))
    .claim_wait(Duration::from_secs(10))
}

/// A fresh ledger and the dispatcher over it, shared: a call that dies
/// runs on a task of its own.
fn ledger_and_dispatcher() -> (Arc<Ledger>, Arc<Dispatcher<Ledger>>) {
    let ledger = Arc::new(Ledger::default());
    let d = Arc::new(ledger_dispatcher(&ledger).build().unwrap());
    (ledger, d)
}

/// Runs `call` in a task of its own until the backend committed it, then
/// drops the task: the call died after its claim and its commit, with no
/// outcome recorded, as a killed process does.
async fn die_after_commit(
    d: &Arc<Dispatcher<Ledger>>,
    ledger: &Arc<Ledger>,
    tool: &'static str,
    args: &'static str,
    confirmed: bool,
) {
    ledger.hang_after_commit.store(true, Ordering::SeqCst);
    let committed = ledger.committed.notified();
    let task = tokio::spawn({
        let d = Arc::clone(d);
        async move {
            d.execute(Call::new(tool, args).session(CHAT).confirmed(confirmed))
                .await
        }
    });
    tokio::time::timeout(Duration::from_secs(10), committed)
        .await
        .expect("the backend committed");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
}

/// Runs `tool` in the one conversation most of these tests hold.
async fn in_chat(d: &Dispatcher<Ledger>, tool: &str, args: &str) -> ToolResult {
    d.execute(Call::new(tool, args).session(CHAT)).await
}

/// Brings a wire back from `session` with the id of a person's question
/// and the host's say-so as well: the id, not the say-so, must decide.
async fn confirm(d: &Dispatcher<Ledger>, session: &str, args: &str, id: &str) -> ToolResult {
    let call = Call::new("wire", args).session(session).approval(id);
    d.execute(call.confirmed(true)).await
}

/// Records a person's decision on question `id` straight in the store, as
/// the inbox would.
async fn decide(d: &Dispatcher<Ledger>, id: &str, decision: &ApprovalDecision) {
    d.store()
        .decide_approval(&toolcall_tests::deciding_now(id, decision))
        .await
        .unwrap();
}

fn decision(approved: bool) -> ApprovalDecision {
    ApprovalDecision {
        approved,
        by: "ana".into(),
        note: String::new(),
        edited_arguments: None,
        decided_ms: now_ms(),
        lasts_until_ms: None,
    }
}

// ---------------------------------------------- an unknown outcome, by kind

#[tokio::test]
async fn a_call_that_died_after_its_commit_runs_again_under_its_key_when_the_backend_honours_it() {
    let (ledger, d) = ledger_and_dispatcher();
    die_after_commit(&d, &ledger, "post_keyed", HELLO, false).await;
    assert_eq!(ledger.writes(), 1);

    let again = in_chat(&d, "post_keyed", HELLO).await;
    assert!(again.ok && !again.replayed, "{again:?}");
    assert_eq!(ledger.writes(), 1, "the backend applied the key once");
    assert_eq!(ledger.keys().values().copied().collect::<Vec<_>>(), [1]);
    let third = in_chat(&d, "post_keyed", HELLO).await;
    assert!(third.ok && third.replayed, "{third:?}");
    assert_eq!(ledger.writes(), 1);
}

#[tokio::test]
async fn a_call_that_died_after_its_commit_is_reconciled_when_the_backend_can_be_asked() {
    let (ledger, d) = ledger_and_dispatcher();
    die_after_commit(&d, &ledger, "post_checked", HELLO, false).await;

    let again = in_chat(&d, "post_checked", HELLO).await;
    assert!(again.ok, "{again:?}");
    assert_eq!(
        again.data["found"], true,
        "the answer is the backend's: {again:?}"
    );
    assert_eq!(ledger.writes(), 1, "found, not written again");
    let third = in_chat(&d, "post_checked", HELLO).await;
    assert!(third.replayed);
    assert_eq!(ledger.writes(), 1);
}

#[tokio::test]
async fn a_call_that_died_after_its_commit_waits_for_a_person_when_the_backend_is_unprotected() {
    let ledger = Arc::new(Ledger::default());
    let audit = MemoryAudit::new();
    let d = Arc::new(
        ledger_dispatcher(&ledger)
            .audit(audit.clone())
            .build()
            .unwrap(),
    );
    die_after_commit(&d, &ledger, "post_plain", HELLO, false).await;

    let doubt = in_chat(&d, "post_plain", HELLO).await;
    assert_eq!(doubt.code, Code::InDoubt, "{doubt:?}");
    assert_eq!(doubt.data["in_doubt"], true);
    assert_eq!(doubt.data["reason"], "in_doubt");
    assert_eq!(doubt.data["pending"], json!({"text": "hello"}));
    assert!(
        doubt.message.contains("may have taken effect"),
        "{}",
        doubt.message
    );
    let id = doubt.question_id.clone().expect("a question for a person");
    assert_eq!(ledger.writes(), 1, "never run again blindly");

    // Asked again, it is the same question; the person sees it once.
    let again = in_chat(&d, "post_plain", HELLO).await;
    assert_eq!(again.code, Code::InDoubt);
    assert_eq!(again.question_id.as_deref(), Some(id.as_str()));
    let page = d
        .store()
        .pending_page(&PendingQuery {
            session: Some(CHAT),
            ..PendingQuery::new(now_ms(), 10)
        })
        .await
        .unwrap();
    assert_eq!(page.total, 1, "one question: {page:?}");
    assert_eq!(page.items[0].reason.as_deref(), Some("in_doubt"));
    assert_eq!(ledger.writes(), 1);
    assert!(
        audit
            .records()
            .iter()
            .filter(|r| r.tool == "post_plain")
            .all(|r| r.in_doubt || r.code == Code::InDoubt),
        "every answer about the unknown outcome is audited as in doubt"
    );
    assert!(
        audit
            .records()
            .iter()
            .filter(|r| r.code == Code::InDoubt)
            .all(|r| r.in_doubt)
    );

    // The person checked: it happened. The call is answered so, and
    // replayed from then on; nothing runs.
    decide(&d, &id, &decision(false)).await;
    let settled = in_chat(&d, "post_plain", HELLO).await;
    assert!(settled.ok, "{settled:?}");
    assert_eq!(settled.data["happened"], true);
    assert_eq!(settled.data["settled_by"], "ana");
    let replayed = in_chat(&d, "post_plain", HELLO).await;
    assert!(replayed.ok && replayed.replayed, "{replayed:?}");
    assert_eq!(ledger.writes(), 1, "applied once in all");
    let entry = d.store().approval(&id).await.unwrap().unwrap();
    assert!(entry.used_ms.is_some() && entry.result.is_some_and(|r| r.ok));
}

#[tokio::test]
async fn an_unknown_outcome_a_person_says_did_not_happen_runs_once() {
    let (ledger, d) = ledger_and_dispatcher();
    // Lost in the backend before it wrote anything, as far as anyone knows:
    // here the answer of the commit is lost, and the person (wrongly or
    // not) says it did not happen: the call runs once more, and only once.
    ledger.lose_after_commit.store(true, Ordering::SeqCst);
    let lost = in_chat(&d, "post_plain", HELLO).await;
    assert_eq!(
        lost.code,
        Code::InDoubt,
        "a lost answer is settled by a person too: {lost:?}"
    );
    let id = lost.question_id.clone().unwrap();
    assert_eq!(ledger.writes(), 1);

    decide(&d, &id, &decision(true)).await;
    let ran = in_chat(&d, "post_plain", HELLO).await;
    assert!(ran.ok && !ran.replayed, "{ran:?}");
    assert_eq!(ledger.writes(), 2, "run once more, on the person's word");
    let again = in_chat(&d, "post_plain", HELLO).await;
    assert!(again.replayed, "{again:?}");
    assert_eq!(ledger.writes(), 2);
    let entry = d.store().approval(&id).await.unwrap().unwrap();
    assert!(entry.result.is_some_and(|r| r.ok && r.code == "OK"));
}

#[tokio::test]
async fn the_host_settles_an_unknown_outcome_and_never_approves_it() {
    let (ledger, d) = ledger_and_dispatcher();
    die_after_commit(&d, &ledger, "post_plain", HELLO, false).await;
    let doubt = in_chat(&d, "post_plain", HELLO).await;
    let id = doubt.question_id.clone().unwrap();
    // An approval or a denial is not an answer to "did it happen?".
    let approved = d.approve(Decision::new(&id, CHAT).by("ana")).await;
    assert_eq!(approved.code, Code::ConfirmationInvalid, "{approved:?}");
    let denied = d.deny(Decision::new(&id, CHAT).by("ana"), "no").await;
    assert_eq!(denied.code, Code::ConfirmationInvalid, "{denied:?}");
    assert_eq!(ledger.writes(), 1);
    // It happened.
    let settled = d
        .answer_in_doubt(Decision::new(&id, CHAT).by("ana"), true)
        .await;
    assert!(
        settled.ok && settled.data["happened"] == true,
        "{settled:?}"
    );
    assert_eq!(ledger.writes(), 1);
    let replayed = in_chat(&d, "post_plain", HELLO).await;
    assert!(replayed.replayed);

    // Another message: lost, and the host says it did not happen.
    ledger.lose_after_commit.store(true, Ordering::SeqCst);
    let other = r#"{"text": "again"}"#;
    let lost = in_chat(&d, "post_plain", other).await;
    let id = lost.question_id.clone().unwrap();
    let ran = d
        .answer_in_doubt(Decision::new(&id, CHAT).by("ana"), false)
        .await;
    assert!(ran.ok && !ran.replayed, "{ran:?}");
    assert_eq!(ledger.writes(), 3);
    let again = in_chat(&d, "post_plain", other).await;
    assert!(again.replayed);
    assert_eq!(ledger.writes(), 3);
}

#[tokio::test]
async fn an_approved_high_risk_call_that_died_is_never_asked_about_afresh() {
    let (ledger, d) = ledger_and_dispatcher();
    // The host confirmed it; it died after the bank committed.
    die_after_commit(&d, &ledger, "wire", WIRE, true).await;

    // The model's retry, without the confirmation: not a fresh approval
    // that hides the earlier attempt, but the unknown outcome itself.
    let retry = in_chat(&d, "wire", WIRE).await;
    assert_eq!(retry.code, Code::InDoubt, "{retry:?}");
    assert_ne!(retry.code, Code::ConfirmationRequired);
    // Even the host's `confirmed` does not run it blindly.
    let confirmed = d
        .execute(Call::new("wire", WIRE).session(CHAT).confirmed(true))
        .await;
    assert_eq!(confirmed.code, Code::InDoubt, "{confirmed:?}");
    assert_eq!(confirmed.question_id, retry.question_id);
    assert_eq!(ledger.writes(), 1);
}

// ------------------------------------------- a person's decision is final

async fn asked(d: &Dispatcher<Ledger>) -> String {
    let asked = in_chat(d, "wire", WIRE).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    asked.question_id.unwrap()
}

#[tokio::test]
async fn a_persons_denial_stands_whatever_the_host_confirms() {
    let (ledger, d) = ledger_and_dispatcher();
    let id = asked(&d).await;
    decide(&d, &id, &decision(false)).await;
    let overridden = confirm(&d, CHAT, WIRE, &id).await;
    assert_eq!(overridden.code, Code::ConfirmationDenied, "{overridden:?}");
    assert_eq!(ledger.writes(), 0);
    // The id is used up by the denial, which is final: it never runs later
    // either, and the call is denied again.
    let later = confirm(&d, CHAT, WIRE, &id).await;
    assert_eq!(later.code, Code::ConfirmationDenied, "{later:?}");
    assert_eq!(ledger.writes(), 0);
}

#[tokio::test]
async fn a_persons_edit_runs_instead_of_the_models_arguments_whatever_the_host_confirms() {
    let (ledger, d) = ledger_and_dispatcher();
    let id = asked(&d).await;
    let mut edited = decision(true);
    edited.edited_arguments = Some(json!({"cents": 100}));
    decide(&d, &id, &edited).await;
    let ran = confirm(&d, CHAT, WIRE, &id).await;
    assert!(ran.ok, "{ran:?}");
    assert_eq!(ran.data["edited_by_person"], true);
    let writes = ledger.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].1, "100", "the person's 100, not the model's 335");
}

#[tokio::test]
async fn an_expired_id_with_the_hosts_confirmation_is_expired() {
    let ledger = Arc::new(Ledger::default());
    let d = ledger_dispatcher(&ledger)
        .approval_ttl(Duration::from_millis(1))
        .build()
        .unwrap();
    let id = asked(&d).await;
    // The approval lives 1 ms; the wait is for the clock to pass it.
    while d
        .store()
        .approval(&id)
        .await
        .unwrap()
        .is_some_and(|e| e.approval.expires_ms > now_ms())
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let late = confirm(&d, CHAT, WIRE, &id).await;
    assert_eq!(late.code, Code::ConfirmationExpired, "{late:?}");
    assert_eq!(ledger.writes(), 0);
}

#[tokio::test]
async fn a_used_id_replays_its_call_or_is_invalid_and_never_runs_again() {
    let (ledger, d) = ledger_and_dispatcher();
    let id = asked(&d).await;
    let ran = d
        .execute(Call::new("wire", WIRE).session(CHAT).approval(&id))
        .await;
    assert!(ran.ok, "{ran:?}");
    let same = confirm(&d, CHAT, WIRE, &id).await;
    assert!(same.ok && same.replayed, "{same:?}");
    let other = confirm(&d, CHAT, r#"{"cents": 999}"#, &id).await;
    assert_eq!(other.code, Code::ConfirmationInvalid, "{other:?}");
    assert_eq!(ledger.writes(), 1);
}

#[tokio::test]
async fn confirmed_approves_only_a_call_without_an_id_and_only_in_host_mode() {
    let ledger = Arc::new(Ledger::default());
    let host = ledger_dispatcher(&ledger).build().unwrap();
    let ran = host
        .execute(Call::new("wire", WIRE).session(CHAT).confirmed(true))
        .await;
    assert!(ran.ok, "{ran:?}");
    let inbox = ledger_dispatcher(&ledger)
        .approvals(Approvals::Inbox)
        .build()
        .unwrap();
    let asked = inbox
        .execute(
            Call::new("wire", r#"{"cents": 7}"#)
                .session(CHAT)
                .confirmed(true),
        )
        .await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    assert_eq!(ledger.writes(), 1);
}

#[tokio::test]
async fn a_decision_recorded_on_a_call_is_carried_out_when_the_call_comes_back_without_its_id() {
    // An MCP client cannot bring the id back: the same call, asked again,
    // learns the person's decision.
    let ledger = Arc::new(Ledger::default());
    let d = ledger_dispatcher(&ledger)
        .approvals(Approvals::Inbox)
        .build()
        .unwrap();
    let id = asked(&d).await;
    assert_eq!(asked(&d).await, id, "the same question, not a second one");
    decide(&d, &id, &decision(true)).await;
    let ran = in_chat(&d, "wire", WIRE).await;
    assert!(ran.ok && !ran.replayed, "{ran:?}");
    let again = in_chat(&d, "wire", WIRE).await;
    assert!(again.replayed, "{again:?}");
    assert_eq!(ledger.writes(), 1);

    // A denial, likewise, stands for the call that comes back without it.
    let other = r#"{"cents": 12}"#;
    let asked = in_chat(&d, "wire", other).await;
    let id = asked.question_id.unwrap();
    decide(&d, &id, &decision(false)).await;
    let denied = in_chat(&d, "wire", other).await;
    assert_eq!(denied.code, Code::ConfirmationDenied, "{denied:?}");
    assert_eq!(ledger.writes(), 1);
    // Another conversation's identical call is not decided by it.
    let elsewhere = d.execute(Call::new("wire", other).session("chat-2")).await;
    assert_eq!(elsewhere.code, Code::ConfirmationRequired);
    let binding = Binding {
        session: "chat-2",
        caller: "default",
        tool: Some("wire"),
        digest: None,
        requester: toolcall::store::Requester::Anyone,
    };
    assert!(
        d.store()
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason: None,
                now_ms: now_ms()
            })
            .await
            .unwrap()
            .is_some_and(|e| e.approval.decision.is_none())
    );
}

// ------------------------------------------------ a conversation is named

#[tokio::test]
async fn a_call_that_names_no_conversation_runs_nothing() {
    let ledger = Arc::new(Ledger::default());
    let audit = MemoryAudit::new();
    let d = ledger_dispatcher(&ledger)
        .audit(audit.clone())
        .build()
        .unwrap();
    for tool in ["post_plain", "post_keyed"] {
        let refused: ToolResult = d.execute(Call::new(tool, HELLO).confirmed(true)).await;
        assert_code_says(
            &refused,
            Code::ConversationRequired,
            "names no conversation",
        );
    }
    assert_eq!(ledger.writes(), 0);
    assert_eq!(d.store().peek_step("").await.unwrap(), 0, "no step taken");
    assert_eq!(d.store().peek_step("default").await.unwrap(), 0);
    let records = audit.records();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.code == Code::ConversationRequired));

    // Two users, each named: the same arguments are two calls.
    let a = d
        .execute(Call::new("post_keyed", HELLO).session("user-a"))
        .await;
    let b = d
        .execute(Call::new("post_keyed", HELLO).session("user-b"))
        .await;
    assert!(a.ok && b.ok && !b.replayed, "{b:?}");
    assert_eq!(ledger.writes(), 2);
}

#[tokio::test]
async fn an_explicit_default_conversation_is_the_conversation_of_unnamed_calls() {
    let ledger = Arc::new(Ledger::default());
    let d = ledger_dispatcher(&ledger)
        .default_session("cli")
        .build()
        .unwrap();
    let first = d.execute(Call::new("post_keyed", HELLO)).await;
    assert!(first.ok, "{first:?}");
    let named = d
        .execute(Call::new("post_keyed", HELLO).session("cli"))
        .await;
    assert!(named.replayed, "the same conversation: {named:?}");
    let scope = d.settings().conversation_scope("default", "cli");
    assert_eq!(d.store().peek_step(&scope).await.unwrap(), 2);
    assert_eq!(ledger.writes(), 1);
}

#[tokio::test]
async fn an_unknown_outcome_question_is_never_refused_for_the_conversations_bound() {
    let ledger = Arc::new(Ledger::default());
    let d = ledger_dispatcher(&ledger)
        .max_pending_approvals(1)
        .build()
        .unwrap();
    let _ = asked(&d).await;
    ledger.lose_after_commit.store(true, Ordering::SeqCst);
    let lost = in_chat(&d, "post_plain", HELLO).await;
    assert_eq!(lost.code, Code::InDoubt, "{lost:?}");
    assert!(lost.question_id.is_some());
    let page = d
        .store()
        .pending_page(&PendingQuery {
            session: Some(CHAT),
            order: PendingOrder::NewestFirst,
            ..PendingQuery::new(now_ms(), 10)
        })
        .await
        .unwrap();
    assert_eq!(page.total, 2);
}

#[tokio::test]
async fn an_approval_id_from_another_conversation_runs_nothing_whatever_the_host_confirms() {
    let (ledger, d) = ledger_and_dispatcher();
    let id = asked(&d).await;
    decide(&d, &id, &decision(true)).await;
    let foreign = confirm(&d, "chat-2", WIRE, &id).await;
    assert_eq!(foreign.code, Code::ConfirmationInvalid, "{foreign:?}");
    assert_eq!(ledger.writes(), 0);
    // The approval is still the first conversation's, unused.
    let entry = d.store().approval(&id).await.unwrap().unwrap();
    assert!(entry.used_ms.is_none());
    let own = d
        .execute(Call::new("wire", WIRE).session(CHAT).approval(&id))
        .await;
    assert!(own.ok, "{own:?}");
    assert_eq!(ledger.writes(), 1);
}

#[tokio::test]
async fn a_persons_recorded_denial_stands_over_the_hosts_confirmed_without_an_id() {
    let (ledger, d) = ledger_and_dispatcher();
    let id = asked(&d).await;
    decide(&d, &id, &decision(false)).await;
    // The host brings no id, only its say-so: the person said no.
    let overridden = d
        .execute(Call::new("wire", WIRE).session(CHAT).confirmed(true))
        .await;
    assert_eq!(overridden.code, Code::ConfirmationDenied, "{overridden:?}");
    assert_eq!(ledger.writes(), 0);
    // An edit, likewise, runs in place of the call the host confirmed.
    let other = r#"{"cents": 800}"#;
    let asked = in_chat(&d, "wire", other).await;
    let id = asked.question_id.unwrap();
    let mut edited = decision(true);
    edited.edited_arguments = Some(json!({"cents": 80}));
    decide(&d, &id, &edited).await;
    let ran = d
        .execute(Call::new("wire", other).session(CHAT).confirmed(true))
        .await;
    assert!(ran.ok && ran.data["edited_by_person"] == true, "{ran:?}");
    assert_eq!(ledger.writes.lock().unwrap()[0].1, "80");
    // With no decision recorded, the host's confirmation runs the call.
    let plain = d
        .execute(
            Call::new("wire", r#"{"cents": 5}"#)
                .session(CHAT)
                .confirmed(true),
        )
        .await;
    assert!(plain.ok, "{plain:?}");
    assert_eq!(ledger.writes(), 2);
}
