//! The two kinds of question stay apart: an in-doubt question is never an
//! approval, an approval question is not answered as in doubt, a foreign
//! approval id is refused, and a dry run of an in-doubt call.

use super::*;

// ------------------------------------------------ questions have a kind

/// The arguments of the page whose answer [`lost_page`] loses.
const LOST: &str = r#"{"text": "disk full"}"#;

/// A page sent whose answer was lost: in doubt, a question for a person.
async fn lost_page() -> (Arc<Ops>, Dispatcher<Ops>, ToolResult) {
    let ops = Arc::new(Ops::default());
    ops.lose_after.store(1, Ordering::SeqCst);
    let d = builder(&ops).build().unwrap();
    let lost = in_c(&d, "page", LOST, |c| c).await;
    assert_eq!(lost.code, Code::InDoubt, "{lost:?}");
    (ops, d, lost)
}

/// An in-doubt question is answered only as "it happened" or "it did not":
/// never by an approval, by `confirmed`, or by its id brought as one.
#[tokio::test]
async fn an_in_doubt_question_is_never_an_approval() {
    let (ops, d, lost) = lost_page().await;
    let id = lost.question_id.clone().unwrap();

    let approved = d.approve(Decision::new(&id, "c").by("ana")).await;
    assert_eq!(approved.code, Code::ConfirmationInvalid, "{approved:?}");
    let denied = d.deny(Decision::new(&id, "c").by("ana"), "no").await;
    assert_eq!(denied.code, Code::ConfirmationInvalid, "{denied:?}");
    for call in [
        Call::new("page", LOST).session("c").confirmed(true),
        Call::new("page", LOST).session("c").approval(&id),
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
    let replay = in_c(&d, "page", LOST, |c| c).await;
    assert!(replay.ok && replay.replayed, "{replay:?}");
    assert_eq!(ops.applied("page"), 1);
}

/// A deletion of vol-7 asked about: its question's id.
async fn asked_to_delete() -> (Arc<Ops>, Dispatcher<Ops>, String) {
    let ops = Arc::new(Ops::default());
    let d = builder(&ops).build().unwrap();
    let asked = call(&d, "c", "delete_volume", json!({"volume": "vol-7"})).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let id = asked.question_id.unwrap();
    (ops, d, id)
}

/// A settlement is not an approval either: `answer_in_doubt` on an approval question
/// changes nothing.
#[tokio::test]
async fn an_approval_question_is_not_settled() {
    let (ops, d, id) = asked_to_delete().await;
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
    let (ops, d, lost) = lost_page().await;
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
    let (ops, d, id) = asked_to_delete().await;
    for id in [id.as_str(), "made-up"] {
        let page = in_c(&d, "page", r#"{"text": "hi"}"#, |c| c.approval(id)).await;
        assert_eq!(page.code, Code::ConfirmationInvalid, "{page:?}");
    }
    assert_eq!(ops.attempts("page"), 0);
}

// ------------------------------------------------------------- dry runs

/// A dry run of an in-doubt call said `would: "run"`; the real call hands
/// it to a person.
#[tokio::test]
async fn a_dry_run_of_an_in_doubt_call_says_a_person_settles_it() {
    let (ops, d, _) = lost_page().await;
    let dry = in_c(&d, "page", LOST, |c| c.dry_run(true)).await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "ask_a_person", "{dry:?}");
    assert_eq!(dry.data["reason"], "in_doubt");
    let real = in_c(&d, "page", LOST, |c| c).await;
    assert_eq!(real.code, Code::InDoubt, "the real call agrees: {real:?}");
    assert_eq!(ops.attempts("page"), 1);
}
