//! The MCP server waiting for a decision in the store (`Options::wait_approval`):
//! a client that cannot ask a person gets, in the same `tools/call`, what
//! came of a decision taken meanwhile in the approval inbox (here: recorded
//! in the store from another task, or through another handle on the same
//! SQLite file, as the inbox's process does), and the backend runs the call
//! exactly as often as that decision says. An identical retry of a call
//! left pending brings the same approval back on the same connection, so
//! that a decision taken after the wait ran out is carried out by it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use toolcall::store::prelude::*;
use toolcall::store::{ApprovalDecision, DecideOutcome, DecisionWrite, PendingApproval, now_ms};
use toolcall::store::{MemoryStore, Store};
use toolcall::{Approvals, Arguments, Call, Code, Dispatcher, ToolResult, tools};
use toolcall_mcp::Options;
use toolcall_sqlite::SqliteStore;
use toolcall_testkit::bank::{Bank, balance, transfer};

mod client;
use client::{
    Client, Person, Server, code, connect_modern_with, connect_with, hang_up, hang_up_modern,
    refund_args, replayed, request, result_json,
};

// ------------------------------------------------------------------ tools

/// An inbox-mode dispatcher over `store`: only a decision recorded in the
/// store approves.
fn inbox<St: Store + 'static>(bank: &Arc<Bank>, store: St) -> Arc<Dispatcher<Bank, St>> {
    dispatcher(bank, store, Approvals::Inbox, Duration::from_secs(60), 10)
}

/// A dispatcher over `store` with these approvals, approval lifetime and
/// step budget.
fn dispatcher<St: Store + 'static>(
    bank: &Arc<Bank>,
    store: St,
    approvals: Approvals,
    ttl: Duration,
    max_steps: u64,
) -> Arc<Dispatcher<Bank, St>> {
    let registry = tools![balance, transfer].unwrap();
    Arc::new(
        Dispatcher::builder(registry, Arc::clone(bank))
            .approvals(approvals)
            .approval_ttl(ttl)
            .max_steps(max_steps)
            // As many open approvals as steps: the tests that ask many
            // questions measure the connection's memory, not this limit.
            .max_pending_approvals(usize::try_from(max_steps).unwrap())
            .max_pending_per_caller(usize::try_from(max_steps).unwrap())
            .store(store)
            .build()
            .unwrap(),
    )
}

// ------------------------------------------------------------------ client

/// Connects a client to a server over `dispatcher` that waits up to `wait`
/// for a decision, through an in-process pipe, with the handshake.
async fn connect<St: Store + 'static>(
    dispatcher: Arc<Dispatcher<Bank, St>>,
    wait: Duration,
) -> (Client, Server) {
    let options = Options::new("mcp-inbox").wait_approval(wait);
    connect_with(dispatcher, options, &Person::unreachable()).await
}

/// Calls `transfer` in a task of its own, so that the test can decide
/// while the call waits; the task answers the result and how long it took.
fn spawn_call(client: &Client, args: Value) -> tokio::task::JoinHandle<(Value, Duration)> {
    let peer = client.peer().clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let result = peer
            .call_tool(request("transfer", args, None))
            .await
            .expect("every outcome is a tool result");
        (result_json(&result), started.elapsed())
    })
}

/// The one approval pending in `store`, once the call has asked for it.
async fn pending<St: Store>(store: &St) -> PendingApproval {
    for _ in 0..250 {
        let mut pending = store.pending_approvals(now_ms(), 10).await.unwrap();
        if !pending.is_empty() {
            assert_eq!(pending.len(), 1, "{pending:?}");
            return pending.remove(0);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no approval was asked");
}

/// How many approvals are pending in `store`.
async fn pending_count<St: Store>(store: &St) -> usize {
    store.pending_approvals(now_ms(), 1000).await.unwrap().len()
}

/// Calls `transfer` and answers its result.
async fn call(client: &Client, args: Value) -> Value {
    result_json(
        &client
            .call_tool(request("transfer", args, None))
            .await
            .expect("every outcome is a tool result"),
    )
}

/// The `question_id` of a `CONFIRMATION_REQUIRED` result.
fn question_id(result: &Value) -> String {
    assert_eq!(code(result), "CONFIRMATION_REQUIRED", "{result}");
    result["question_id"]
        .as_str()
        .expect("a question names its approval")
        .to_owned()
}

/// A person's decision, as the inbox records it.
fn decision(approved: bool, note: &str, edited: Option<Value>) -> ApprovalDecision {
    ApprovalDecision {
        approved,
        by: "ana".to_owned(),
        note: note.to_owned(),
        edited_arguments: edited,
        decided_ms: now_ms(),
        lasts_until_ms: None,
    }
}

async fn decide<St: Store>(store: &St, id: &str, decision: &ApprovalDecision) {
    assert_eq!(
        store
            .decide_approval(&DecisionWrite {
                id,
                decision,
                now_ms: now_ms()
            })
            .await
            .unwrap(),
        DecideOutcome::Decided
    );
}

type Inbox = Arc<Dispatcher<Bank, MemoryStore>>;

/// A bank, an inbox-mode dispatcher over a memory store, and a client
/// connected to it whose server waits up to `wait` for a decision.
async fn open(wait: Duration) -> (Arc<Bank>, Inbox, Client, Server) {
    let bank = Bank::new();
    let dispatcher = inbox(&bank, MemoryStore::default());
    let (client, server) = connect(Arc::clone(&dispatcher), wait).await;
    (bank, dispatcher, client, server)
}

/// Runs `transfer` of `args` in `asked`'s session with its approval, as
/// another process that carries the decision out does.
async fn carry_out(
    dispatcher: &Dispatcher<Bank, MemoryStore>,
    asked: &PendingApproval,
    args: &Value,
) -> ToolResult {
    let call = Call::new("transfer", Arguments::Parsed(args))
        .session(&asked.session)
        .approval(&asked.id);
    dispatcher.execute(call).await
}

/// The bound the tests that decide give the server: long enough that an
/// answer before it shows the decision woke the wait.
const LONG_WAIT: Duration = Duration::from_secs(20);

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn an_approval_in_the_inbox_while_the_call_waits_runs_it_exactly_once() {
    let (bank, dispatcher, client, server) = open(LONG_WAIT).await;

    let call = spawn_call(&client, refund_args());
    let asked = pending(dispatcher.store()).await;
    assert_eq!(asked.tool, "transfer");
    assert_eq!(asked.arguments, refund_args());
    // The call waits for the person: nothing ran, no answer yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!call.is_finished(), "the call waits for the decision");
    assert_eq!(bank.transfers(), 0);

    decide(dispatcher.store(), &asked.id, &decision(true, "", None)).await;
    let (result, took) = call.await.unwrap();
    assert_eq!(code(&result), "OK", "{result}");
    assert_eq!(result["data"]["amount_cents"], 2590);
    assert!(took < LONG_WAIT / 2, "woken by the decision, not the bound");
    assert_eq!(bank.transfers(), 1);
    assert_eq!(bank.balance(), 100_000 - 2590);

    // The approval is used up: the same call with the same id again is the
    // stored answer, replayed, and the id on any other call is refused.
    let again = carry_out(&dispatcher, &asked, &refund_args()).await;
    assert!(again.ok && again.replayed, "{again:?}");
    let other = json!({"to": "ACC-7", "amount_cents": 2591});
    let refused = carry_out(&dispatcher, &asked, &other).await;
    assert_eq!(refused.code, Code::ConfirmationInvalid, "{refused:?}");
    assert_eq!(bank.transfers(), 1);
    let entry = dispatcher.store().approval(&asked.id).await.unwrap();
    assert!(entry.is_some_and(|entry| entry.used_ms.is_some()));

    hang_up(client, server).await;
}

/// A person approves and another process carries the approval out before
/// the waiting server looks again (the memory store is looked at every
/// 200 ms): the waiting client gets what came of the call, replayed, never
/// "needs approval" for a transfer that ran, and nothing runs twice.
#[tokio::test]
async fn a_decision_carried_out_elsewhere_answers_the_waiting_call() {
    let (bank, dispatcher, client, server) = open(LONG_WAIT).await;

    let call = spawn_call(&client, refund_args());
    let asked = pending(dispatcher.store()).await;
    decide(dispatcher.store(), &asked.id, &decision(true, "", None)).await;
    let elsewhere = carry_out(&dispatcher, &asked, &refund_args()).await;
    assert!(elsewhere.ok && !elsewhere.replayed, "{elsewhere:?}");
    let (result, _) = call.await.unwrap();
    assert_eq!(code(&result), "OK", "{result}");
    assert!(replayed(&result), "{result}");
    assert_eq!(bank.transfers(), 1);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_denial_in_the_inbox_answers_denied_with_the_note_and_runs_nothing() {
    let (bank, dispatcher, client, server) = open(LONG_WAIT).await;

    let call = spawn_call(&client, refund_args());
    let asked = pending(dispatcher.store()).await;
    decide(
        dispatcher.store(),
        &asked.id,
        &decision(false, "wrong account", None),
    )
    .await;
    let (result, took) = call.await.unwrap();
    assert_eq!(code(&result), "CONFIRMATION_DENIED", "{result}");
    assert!(
        result["message"]
            .as_str()
            .is_some_and(|m| m.contains("wrong account")),
        "{result}"
    );
    assert!(took < LONG_WAIT / 2);
    assert_eq!(bank.transfers(), 0);
    assert_eq!(bank.balance(), 100_000);

    hang_up(client, server).await;
}

#[tokio::test]
async fn an_edit_in_the_inbox_runs_the_edited_call_once() {
    let (bank, dispatcher, client, server) = open(LONG_WAIT).await;

    let call = spawn_call(&client, refund_args());
    let asked = pending(dispatcher.store()).await;
    let edited = json!({"to": "ACC-7", "amount_cents": 1000});
    decide(
        dispatcher.store(),
        &asked.id,
        &decision(true, "only the shipping", Some(edited)),
    )
    .await;
    let (result, _) = call.await.unwrap();
    assert_eq!(code(&result), "OK", "{result}");
    assert_eq!(result["data"]["amount_cents"], 1000, "{result}");
    assert_eq!(bank.transfers(), 1);
    assert_eq!(bank.balance(), 100_000 - 1000);

    hang_up(client, server).await;
}

#[tokio::test]
async fn without_a_decision_in_time_the_answer_is_confirmation_required_with_the_id() {
    let wait = Duration::from_millis(400);
    let (bank, dispatcher, client, server) = open(wait).await;

    let started = Instant::now();
    let result = call(&client, refund_args()).await;
    assert!(started.elapsed() >= wait, "it waited the bound");
    assert_eq!(code(&result), "CONFIRMATION_REQUIRED", "{result}");
    let asked = pending(dispatcher.store()).await;
    assert_eq!(result["question_id"], asked.id.as_str());
    assert_eq!(bank.transfers(), 0);

    // A person decides later: the approval still waits for a call that
    // brings its id, and runs once for it.
    decide(dispatcher.store(), &asked.id, &decision(true, "", None)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(bank.transfers(), 0, "nothing runs by itself");
    let late = carry_out(&dispatcher, &asked, &refund_args()).await;
    assert!(late.ok, "{late:?}");
    assert_eq!(bank.transfers(), 1);

    hang_up(client, server).await;
}

#[tokio::test]
async fn without_the_option_the_answer_is_at_once() {
    let (bank, _, client, server) = open(Duration::ZERO).await;

    let started = Instant::now();
    let result = call(&client, refund_args()).await;
    assert_eq!(code(&result), "CONFIRMATION_REQUIRED", "{result}");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_cancelled_call_stops_waiting_and_a_later_decision_runs_nothing() {
    let (bank, dispatcher, client, server) = open(LONG_WAIT).await;

    // The client gives up: dropping the request sends `notifications/cancelled`.
    let waited = tokio::time::timeout(
        Duration::from_millis(400),
        client.call_tool_once(request("transfer", refund_args(), None)),
    );
    assert!(waited.await.is_err(), "nobody decided, so the call waited");
    let asked = pending(dispatcher.store()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Had the server kept waiting, this decision would run the transfer.
    decide(dispatcher.store(), &asked.id, &decision(true, "", None)).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(bank.transfers(), 0);
    let entry = dispatcher
        .store()
        .approval(&asked.id)
        .await
        .unwrap()
        .unwrap();
    assert!(entry.used_ms.is_none(), "nobody used the approval");

    // The connection still serves.
    let balance = client
        .call_tool(CallToolRequestParams::new("balance"))
        .await
        .unwrap();
    assert_eq!(result_json(&balance)["data"]["balance_cents"], 100_000);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_decision_through_another_handle_on_the_sqlite_file_ends_the_wait() {
    let dir = std::env::temp_dir().join(format!(
        "toolcall-mcp-inbox-{}-{}",
        std::process::id(),
        now_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    let bank = Bank::new();
    let dispatcher = inbox(&bank, SqliteStore::open(&path).unwrap());
    // The inbox's own connection to the file, as another process has.
    let inbox_store = SqliteStore::open(&path).unwrap();
    let (client, server) = connect(Arc::clone(&dispatcher), LONG_WAIT).await;

    let call = spawn_call(&client, refund_args());
    let asked = pending(&inbox_store).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!call.is_finished());
    decide(&inbox_store, &asked.id, &decision(true, "", None)).await;
    let (result, took) = call.await.unwrap();
    assert_eq!(code(&result), "OK", "{result}");
    assert!(took < LONG_WAIT / 2);
    assert_eq!(bank.transfers(), 1);

    hang_up(client, server).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn on_2026_07_28_the_call_waits_for_the_inbox_too() {
    let bank = Bank::new();
    let dispatcher = inbox(&bank, MemoryStore::default());
    let (client, server) = connect_modern_with(
        Arc::clone(&dispatcher),
        Options::new("mcp-inbox").wait_approval(LONG_WAIT),
        &Person::unreachable(),
    )
    .await;

    let call = spawn_call(&client, refund_args());
    let asked = pending(dispatcher.store()).await;
    decide(dispatcher.store(), &asked.id, &decision(true, "", None)).await;
    let (result, _) = call.await.unwrap();
    assert_eq!(code(&result), "OK", "{result}");
    assert_eq!(bank.transfers(), 1);

    hang_up_modern(client, server).await;
}

// --------------------------------------------- retries of a pending call

#[tokio::test]
async fn an_identical_retry_brings_the_same_approval_and_runs_once_it_is_approved() {
    let (bank, dispatcher, client, server) = open(Duration::ZERO).await;

    let first = question_id(&call(&client, refund_args()).await);
    // The model tries again before anyone decided: the same question, not
    // a second one in the inbox. Member order and spacing do not matter.
    let reordered = json!({"amount_cents": 2590, "to": "ACC-7"});
    for args in [refund_args(), reordered] {
        let retry = call(&client, args).await;
        assert_eq!(question_id(&retry), first, "{retry}");
        assert_eq!(pending_count(dispatcher.store()).await, 1);
    }
    assert_eq!(bank.transfers(), 0);

    decide(dispatcher.store(), &first, &decision(true, "", None)).await;
    let ran = call(&client, refund_args()).await;
    assert_eq!(code(&ran), "OK", "{ran}");
    assert!(!replayed(&ran), "{ran}");
    assert_eq!(bank.transfers(), 1);
    assert_eq!(bank.balance(), 100_000 - 2590);
    let entry = dispatcher.store().approval(&first).await.unwrap().unwrap();
    assert!(entry.used_ms.is_some(), "the retry used the approval");

    // Once more: the stored answer, replayed; nothing runs again and
    // nothing is asked again.
    let again = call(&client, refund_args()).await;
    assert_eq!(code(&again), "OK", "{again}");
    assert!(replayed(&again), "{again}");
    assert_eq!(bank.transfers(), 1);
    assert_eq!(pending_count(dispatcher.store()).await, 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn an_approval_after_the_wait_ran_out_is_carried_out_by_the_retry() {
    let wait = Duration::from_millis(300);
    let (bank, dispatcher, client, server) = open(wait).await;

    let first = question_id(&call(&client, refund_args()).await);
    decide(dispatcher.store(), &first, &decision(true, "", None)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(bank.transfers(), 0, "nothing runs by itself");

    let started = Instant::now();
    let ran = call(&client, refund_args()).await;
    assert_eq!(code(&ran), "OK", "{ran}");
    assert!(
        started.elapsed() < wait,
        "a recorded decision does not wait"
    );
    assert_eq!(bank.transfers(), 1);
    assert_eq!(pending_count(dispatcher.store()).await, 0);

    let again = call(&client, refund_args()).await;
    assert!(replayed(&again), "{again}");
    assert_eq!(bank.transfers(), 1);

    hang_up(client, server).await;
}

#[tokio::test]
async fn an_undecided_retry_waits_again_under_the_same_id() {
    let wait = Duration::from_secs(3);
    let (bank, dispatcher, client, server) = open(wait).await;

    let first = question_id(&call(&client, refund_args()).await);
    let retry = spawn_call(&client, refund_args());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!retry.is_finished(), "the retry waits for the decision");
    assert_eq!(pending_count(dispatcher.store()).await, 1);
    assert_eq!(bank.transfers(), 0);

    decide(dispatcher.store(), &first, &decision(true, "", None)).await;
    let (ran, took) = retry.await.unwrap();
    assert_eq!(code(&ran), "OK", "{ran}");
    assert!(took < wait, "woken by the decision on the first approval");
    assert_eq!(bank.transfers(), 1);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_denial_in_the_inbox_is_what_the_retry_gets() {
    let (bank, dispatcher, client, server) = open(Duration::ZERO).await;

    let first = question_id(&call(&client, refund_args()).await);
    decide(
        dispatcher.store(),
        &first,
        &decision(false, "wrong account", None),
    )
    .await;
    let denied = call(&client, refund_args()).await;
    assert_eq!(code(&denied), "CONFIRMATION_DENIED", "{denied}");
    assert!(
        denied["message"]
            .as_str()
            .is_some_and(|m| m.contains("wrong account")),
        "{denied}"
    );
    assert_eq!(bank.transfers(), 0);

    // The denial is final: asking once more is denied again, and the person
    // is not shown the call a second time.
    let again = call(&client, refund_args()).await;
    assert_eq!(code(&again), "CONFIRMATION_DENIED", "{again}");
    assert_eq!(pending_count(dispatcher.store()).await, 0);
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_retry_with_other_arguments_is_a_fresh_call() {
    let (bank, dispatcher, client, server) = open(Duration::ZERO).await;

    let refund = question_id(&call(&client, refund_args()).await);
    let other_args = json!({"to": "ACC-7", "amount_cents": 2591});
    let other = question_id(&call(&client, other_args.clone()).await);
    assert_ne!(other, refund, "other arguments are another question");
    assert_eq!(pending_count(dispatcher.store()).await, 2);

    // Approving the first approves nothing for the other arguments.
    decide(dispatcher.store(), &refund, &decision(true, "", None)).await;
    let still = call(&client, other_args).await;
    assert_eq!(question_id(&still), other, "{still}");
    assert_eq!(bank.transfers(), 0);

    let ran = call(&client, refund_args()).await;
    assert_eq!(code(&ran), "OK", "{ran}");
    assert_eq!(ran["data"]["amount_cents"], 2590, "{ran}");
    assert_eq!(bank.transfers(), 1);
    assert_eq!(pending_count(dispatcher.store()).await, 1);

    hang_up(client, server).await;
}

#[tokio::test]
async fn another_connection_does_not_bring_this_connections_approval() {
    let (bank, dispatcher, client, server) = open(Duration::ZERO).await;
    let (other_client, other_server) = connect(Arc::clone(&dispatcher), Duration::ZERO).await;

    let first = question_id(&call(&client, refund_args()).await);
    decide(dispatcher.store(), &first, &decision(true, "", None)).await;
    let elsewhere = call(&other_client, refund_args()).await;
    assert_ne!(question_id(&elsewhere), first, "{elsewhere}");
    assert_eq!(bank.transfers(), 0);

    let ran = call(&client, refund_args()).await;
    assert_eq!(code(&ran), "OK", "{ran}");
    assert_eq!(bank.transfers(), 1);

    hang_up(other_client, other_server).await;
    hang_up(client, server).await;
}

#[tokio::test]
async fn an_expired_approval_is_not_brought_back() {
    let bank = Bank::new();
    let ttl = Duration::from_millis(300);
    let dispatcher = dispatcher(&bank, MemoryStore::default(), Approvals::Inbox, ttl, 10);
    let (client, server) = connect(Arc::clone(&dispatcher), Duration::ZERO).await;

    let first = question_id(&call(&client, refund_args()).await);
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    // Not `CONFIRMATION_EXPIRED` for an approval the model never saw
    // expire: a new question.
    let retry = call(&client, refund_args()).await;
    assert_ne!(question_id(&retry), first, "{retry}");
    assert_eq!(pending_count(dispatcher.store()).await, 1);
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn each_of_257_pending_calls_keeps_its_one_question_past_the_connections_memory() {
    let bank = Bank::new();
    let dispatcher = dispatcher(
        &bank,
        MemoryStore::default(),
        Approvals::Inbox,
        Duration::from_secs(60),
        1000,
    );
    let (client, server) = connect(Arc::clone(&dispatcher), Duration::ZERO).await;
    let amount = |n: i64| json!({"to": "ACC-7", "amount_cents": n});

    let mut ids = Vec::new();
    for n in 1..=257 {
        ids.push(question_id(&call(&client, amount(n)).await));
    }
    // The connection remembers the newest 256 and brings them back; the
    // oldest, which it dropped, is found by the pipeline, which answers an
    // identical call with the question already asked. One question each.
    assert_eq!(question_id(&call(&client, amount(257)).await), ids[256]);
    assert_eq!(question_id(&call(&client, amount(2)).await), ids[1]);
    assert_eq!(question_id(&call(&client, amount(1)).await), ids[0]);
    assert_eq!(pending_count(dispatcher.store()).await, 257);
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn in_host_mode_a_retry_brings_only_a_decision_recorded_in_the_store() {
    let bank = Bank::new();
    let dispatcher = dispatcher(
        &bank,
        MemoryStore::default(),
        Approvals::Host,
        Duration::from_secs(60),
        10,
    );
    let (client, server) = connect(Arc::clone(&dispatcher), Duration::ZERO).await;

    let first = question_id(&call(&client, refund_args()).await);
    // In host mode an approval id brought back approves the call: the
    // retry must not bring an undecided one. It is a fresh call, which the
    // pipeline answers with the question already asked (one question per
    // call), and nothing runs.
    let second = call(&client, refund_args()).await;
    assert_eq!(question_id(&second), first, "{second}");
    assert_eq!(bank.transfers(), 0, "a retry approves nothing");
    assert_eq!(pending_count(dispatcher.store()).await, 1);

    // A person approves the first in the inbox: the next retry carries it out.
    decide(dispatcher.store(), &first, &decision(true, "", None)).await;
    let ran = call(&client, refund_args()).await;
    assert_eq!(code(&ran), "OK", "{ran}");
    assert!(!replayed(&ran), "{ran}");
    assert_eq!(bank.transfers(), 1);
    let entry = dispatcher.store().approval(&first).await.unwrap().unwrap();
    assert!(entry.used_ms.is_some());

    let again = call(&client, refund_args()).await;
    assert!(replayed(&again), "{again}");
    assert_eq!(bank.transfers(), 1);

    hang_up(client, server).await;
}
