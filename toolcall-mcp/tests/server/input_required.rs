//! Approval on 2026-07-28 as `input_required`: asked, declined, retried with
//! other arguments, resent, on another connection, without an answer.

use super::*;

#[tokio::test]
async fn on_2026_07_28_the_approval_is_asked_as_input_required() {
    let person = Person::approving();
    let (bank, client, server) = modern(&person).await;

    let first = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&first), "OK", "{first}");
    assert_eq!(bank.transfers(), 1);
    assert_eq!(person.questions().len(), 1);
    assert!(person.questions()[0].contains("\"amount_cents\": 2590"));

    let again = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(again["replayed"], true);
    assert_eq!(bank.transfers(), 1);
    assert_eq!(person.questions().len(), 1);

    hang_up_modern(client, server).await;
}

#[tokio::test]
async fn on_2026_07_28_a_declined_approval_executes_nothing() {
    let person = Person::answering(ElicitResult::new(ElicitationAction::Decline));
    let (bank, client, server) = modern(&person).await;

    let result = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&result), "CONFIRMATION_DENIED", "{result}");
    assert_eq!(bank.transfers(), 0);

    // A forged answer to an approval that does not exist runs nothing either.
    let forged = answered(&client, "toolcall-approval:made-up", true).await;
    // It is a fresh call, which the person's denial of this exact call
    // answers: a denial is final, and nobody is asked again.
    assert_eq!(code(&forged), "CONFIRMATION_DENIED", "{forged}");
    assert_eq!(person.questions().len(), 1);
    assert_eq!(bank.transfers(), 0);

    hang_up_modern(client, server).await;
}

#[tokio::test]
async fn on_2026_07_28_a_client_without_elicitation_gets_confirmation_required() {
    let person = Person::unreachable();
    let (bank, client, server) = modern(&person).await;

    let result = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&result), "CONFIRMATION_REQUIRED");
    assert_eq!(bank.transfers(), 0);

    hang_up_modern(client, server).await;
}

/// The transfer of `refund_args` retried with the state of its question
/// and the person's answer: its `ToolResult` JSON.
async fn answered(client: &Client, state: &str, approve: bool) -> Value {
    let retry = call_once(
        client,
        "transfer",
        refund_args(),
        Some(state),
        Some(answer(approve)),
    );
    complete(retry.await)
}

/// A bank, and a client of a server over it on 2026-07-28, whose person
/// is `person`.
async fn modern(person: &Person) -> (Arc<Bank>, Client, ModernServer) {
    let bank = Bank::new();
    let (client, server) = connect_modern(dispatcher(&bank), person).await;
    (bank, client, server)
}

/// As [`modern`], with the dispatcher's audit.
async fn modern_audited(person: &Person) -> (Arc<Bank>, MemoryAudit, Client, ModernServer) {
    let bank = Bank::new();
    let (dispatcher, audit) = audited(&bank);
    let (client, server) = connect_modern(dispatcher, person).await;
    (bank, audit, client, server)
}

/// The transfer of `refund_args`, asked about: its question's state.
async fn asked_transfer(client: &Client) -> String {
    asked(call_once(client, "transfer", refund_args(), None, None).await)
}

fn other_args() -> Value {
    json!({"to": "ACC-9", "amount_cents": 500_000})
}

#[tokio::test]
async fn on_2026_07_28_a_retry_with_other_arguments_runs_nothing_and_asks_again() {
    let person = Person::approving();
    let (bank, client, server) = modern(&person).await;

    let state = asked_transfer(&client).await;

    // The answer, sent back with other arguments: it approves nothing.
    let again = call_once(
        &client,
        "transfer",
        other_args(),
        Some(&state),
        Some(answer(true)),
    )
    .await;
    let new_state = asked(again);
    assert_ne!(new_state, state, "the other call is a question of its own");
    assert_eq!(bank.transfers(), 0);

    // The question asked is still open, for the call it was asked about.
    let done = answered(&client, &state, true).await;
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(done["data"]["amount_cents"], 2590);
    assert_eq!(bank.transfers(), 1);

    hang_up_modern(client, server).await;
}

#[tokio::test]
async fn on_2026_07_28_a_question_id_is_no_token_for_a_client_without_elicitation() {
    let person = Person::unreachable();
    let (bank, audit, client, server) = modern_audited(&person).await;

    let waiting = complete(call_once(&client, "transfer", refund_args(), None, None).await);
    assert_eq!(code(&waiting), "CONFIRMATION_REQUIRED");
    let id = waiting["question_id"].as_str().unwrap().to_owned();

    // The client forges the retry of a question it was never asked.
    let forged = answered(&client, &format!("toolcall-approval:{id}"), true).await;
    assert_eq!(code(&forged), "CONFIRMATION_REQUIRED", "{forged}");
    assert_eq!(bank.transfers(), 0);
    assert!(person.questions().is_empty());
    assert!(!approved_by_a_person(&audit), "{:?}", audit.records());

    hang_up_modern(client, server).await;
}

#[tokio::test]
async fn on_2026_07_28_a_question_of_one_connection_is_not_answered_on_another() {
    let bank = Bank::new();
    let (dispatcher, audit) = audited(&bank);
    let person = Person::approving();
    let (asked_client, asked_server) = connect_modern(Arc::clone(&dispatcher), &person).await;
    let (other_client, other_server) = connect_modern(dispatcher, &person).await;
    assert_ne!(
        asked_server.service().session(),
        other_server.service().session()
    );

    let state = asked_transfer(&asked_client).await;

    // Another connection answers the first one's question: a fresh call of
    // its own, asked about in its own session.
    let elsewhere = call_once(
        &other_client,
        "transfer",
        refund_args(),
        Some(&state),
        Some(answer(true)),
    )
    .await;
    assert_ne!(asked(elsewhere), state);
    assert_eq!(bank.transfers(), 0);
    assert!(!approved_by_a_person(&audit));

    // A no from elsewhere cancels nothing either.
    let elsewhere = call_once(
        &other_client,
        "transfer",
        refund_args(),
        Some(&state),
        Some(answer(false)),
    )
    .await;
    asked(elsewhere);

    let done = answered(&asked_client, &state, true).await;
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(bank.transfers(), 1);

    for (client, server) in [(asked_client, asked_server), (other_client, other_server)] {
        hang_up_modern(client, server).await;
    }
}

#[tokio::test]
async fn on_2026_07_28_a_resent_approved_retry_is_replayed() {
    let person = Person::approving();
    let (bank, client, server) = modern(&person).await;

    let state = asked_transfer(&client).await;
    let done = answered(&client, &state, true).await;
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(done.get("replayed"), None);
    assert_eq!(bank.transfers(), 1);

    // The response was lost; the client sends the same retry again.
    let again = answered(&client, &state, true).await;
    assert_eq!(code(&again), "OK", "{again}");
    assert_eq!(again["replayed"], true);
    assert_eq!(again["data"], done["data"]);
    assert_eq!(bank.transfers(), 1);

    hang_up_modern(client, server).await;
}

#[tokio::test]
async fn on_2026_07_28_a_retry_without_an_answer_cancels_nothing() {
    let person = Person::approving();
    let (bank, audit, client, server) = modern_audited(&person).await;

    let state = asked_transfer(&client).await;

    // A retry that carries no answer is asked again, and denies nothing.
    let again = call_once(&client, "transfer", refund_args(), Some(&state), None).await;
    asked(again);
    let balance = complete(call_once(&client, "balance", json!({}), Some(&state), None).await);
    assert_eq!(code(&balance), "OK");
    assert!(
        audit
            .records()
            .iter()
            .all(|record| record.code != Code::ConfirmationDenied),
        "{:?}",
        audit.records()
    );

    let done = answered(&client, &state, true).await;
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(bank.transfers(), 1);

    hang_up_modern(client, server).await;
}

#[tokio::test]
async fn on_2026_07_28_a_declined_retry_is_denied_once() {
    let person = Person::approving();
    let (bank, audit, client, server) = modern_audited(&person).await;

    let state = asked_transfer(&client).await;
    let denied = answered(&client, &state, false).await;
    assert_eq!(code(&denied), "CONFIRMATION_DENIED", "{denied}");
    assert!(approved_by_a_person(&audit), "the person's no is audited");

    // The question was answered, and the denial is final: a yes sent for it
    // afterwards is a fresh call, which the denial answers; nobody is asked.
    let late = answered(&client, &state, true).await;
    assert_eq!(code(&late), "CONFIRMATION_DENIED", "{late}");
    assert_eq!(bank.transfers(), 0);

    hang_up_modern(client, server).await;
}
