//! Unknown outcomes: a lost answer of an unprotected side effect is in doubt
//! at once, a reconciling backend is asked first, only a failure before any
//! effect or under an honoured key is retried; an outcome that could not be
//! recorded, or a claim a dead process left, reaches a person.

use super::*;

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
    let replay = in_c(&hung, "hang", r#"{"what": "x"}"#, |c| c).await;
    assert!(replay.ok && replay.replayed, "{replay:?}");
    assert_eq!(replay.data["happened"], json!(true));
    assert!(open_questions(store.as_ref()).await.is_empty());
}
