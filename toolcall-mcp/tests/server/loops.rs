//! A person's yes after repeated questions is not a loop: it runs the call
//! once, by elicitation or by `input_required`.

use super::*;

// ------------------------------------------- asked again and again, then yes

/// Whether any audit record says the call was a loop.
fn loop_detected(audit: &MemoryAudit) -> bool {
    audit
        .records()
        .iter()
        .any(|record| record.code == Code::LoopDetected)
}

#[tokio::test]
async fn on_2026_07_28_a_yes_after_four_questions_runs_the_call_once() {
    let bank = Bank::new();
    let (dispatcher, audit) = audited(&bank);
    assert_eq!(dispatcher.settings().max_duplicate_calls, 3);
    let person = Person::approving();
    let (client, server) = connect_modern(dispatcher, &person).await;

    // The model makes the same high-risk call four times before anybody
    // answers: each is a question to a person, not the model looping.
    let mut states = Vec::new();
    for _ in 0..4 {
        states.push(asked(
            call_once(&client, "transfer", refund_args(), None, None).await,
        ));
    }
    assert_eq!(bank.transfers(), 0);

    // The person says yes to the last question.
    let done = complete(
        call_once(
            &client,
            "transfer",
            refund_args(),
            states.last().map(String::as_str),
            Some(answer(true)),
        )
        .await,
    );
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(done["data"]["amount_cents"], 2590);
    assert_eq!(bank.transfers(), 1);
    assert!(!loop_detected(&audit), "{:?}", audit.records());

    // A yes to an earlier question of the same call runs nothing more.
    let late = call_once(
        &client,
        "transfer",
        refund_args(),
        Some(&states[0]),
        Some(answer(true)),
    )
    .await;
    if let CallToolResponse::Complete(result) = late {
        let late = result_json(&result);
        assert_ne!(code(&late), "CONFIRMATION_REQUIRED", "{late}");
    }
    assert_eq!(bank.transfers(), 1);

    hang_up_modern(client, server).await;
}

#[tokio::test]
async fn a_yes_by_elicitation_after_three_dismissals_runs_the_call_once() {
    let bank = Bank::new();
    let (dispatcher, audit) = audited(&bank);
    let dismiss = ElicitResult::new(ElicitationAction::Cancel);
    let approve =
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true}));
    let person = Person::in_turn(vec![dismiss.clone(), dismiss.clone(), dismiss, approve]);
    let (client, server) = connect(dispatcher, &person).await;

    // A dismissal decides nothing: the question stays open, and the next
    // identical call asks it again.
    for attempt in 1..=3 {
        let dismissed = result_json(&call(&client, "transfer", refund_args()).await);
        assert_eq!(
            code(&dismissed),
            "CONFIRMATION_REQUIRED",
            "attempt {attempt}: {dismissed}"
        );
    }
    // The fourth time the person is asked, they say yes.
    let done = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&done), "OK", "{done}");
    assert_eq!(person.questions().len(), 4);
    assert_eq!(bank.transfers(), 1);
    assert!(!loop_detected(&audit), "{:?}", audit.records());

    hang_up(client, server).await;
}
