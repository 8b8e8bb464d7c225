//! A person's yes after the model asked many times runs the call, once.

use super::*;

// ------------------------------------------------ confirmation is not a loop

#[tokio::test]
async fn a_persons_yes_after_the_model_asked_three_times_runs_the_call() {
    let (shop, d) = shop_and_dispatcher();
    for _ in 0..3 {
        let asked = in_default(&d, "refund_order", REFUND_ALL).await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
    }
    let approved = confirmed_refund(&d, REFUND_ALL).await;
    assert!(approved.ok, "{approved:?}");
    assert_eq!(shop.applied_refunds(), 1);

    // Repeats of the call that ran still count: replayed, then the guard.
    assert!(in_default(&d, "refund_order", REFUND_ALL).await.replayed);
    assert!(in_default(&d, "refund_order", REFUND_ALL).await.replayed);
    assert_eq!(
        in_default(&d, "refund_order", REFUND_ALL).await.code,
        Code::LoopDetected
    );
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn an_approval_by_id_after_many_asks_runs_once() {
    let (shop, d) = shop_with(|b| b.max_steps(100));
    let mut last = None;
    for _ in 0..5 {
        let asked = in_default(&d, "refund_order", REFUND_ALL).await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
        last = asked.question_id;
    }
    let id = last.unwrap();
    let ran = in_default_with(&d, "refund_order", REFUND_ALL, |c| c.approval(&id)).await;
    assert!(ran.ok, "{ran:?}");
    let reused = in_default_with(&d, "refund_order", REFUND_ALL, |c| c.approval(&id)).await;
    // The call completed: its twin is answered from the store before the
    // approval is looked at, and nothing runs again.
    assert!(reused.ok && reused.replayed, "{reused:?}");
    assert_eq!(shop.applied_refunds(), 1);
}
