//! Approval, the loop guard and the policy: the model cannot confirm its own
//! call, the same question for the same call, a bound on questions, one
//! call whatever its spacing, the business check before the policy.

use super::*;

#[tokio::test]
async fn the_model_cannot_confirm_its_own_call() {
    let (shop, d) = shop_and_dispatcher();
    let raw = r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged", "confirmed": true}"#;
    let result = in_default(&d, "refund_order", raw).await;
    assert_eq!(result.code, Code::InvalidArguments);
    let result = in_default(&d, "refund_order", REFUND).await;
    assert_eq!(result.code, Code::ConfirmationRequired);
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn confirmation_carries_the_validated_arguments() {
    let (shop, d) = shop_and_dispatcher();
    let raw =
        r#"{ "reason":"damaged","currency" : "BRL", "amount_cents":2590,"order_id":"ORD-1001" }"#;
    let result = in_default(&d, "refund_order", raw).await;
    assert_eq!(result.code, Code::ConfirmationRequired);
    assert_eq!(
        result.message,
        "refund_order needs user approval before it runs."
    );
    let pending = serde_json::to_string(&result.data["pending"]).unwrap();
    assert_eq!(
        pending,
        r#"{"order_id":"ORD-1001","amount_cents":2590,"currency":"BRL","reason":"damaged"}"#
    );
    assert_eq!(shop.applied_refunds(), 0);
}

/// A refund of `cents` asked for in `session`, unconfirmed: each amount
/// is a call of its own.
async fn refund_in(d: &Dispatcher<Shop>, session: &str, cents: i64) -> ToolResult {
    let arguments = format!(
        r#"{{"order_id": "ORD-1001", "amount_cents": {cents}, "currency": "BRL", "reason": "damaged"}}"#
    );
    d.execute(Call::new("refund_order", &arguments).session(session))
        .await
}

#[tokio::test]
async fn an_identical_high_risk_call_asked_again_is_the_same_question() {
    let (shop, d) = shop_and_dispatcher();
    let first = in_default(&d, "refund_order", REFUND).await;
    assert_eq!(first.code, Code::ConfirmationRequired);
    let id = first.question_id.clone().expect("an id to approve");
    // A client that cannot bring the id back asks again, and again; the
    // spacing and the order of the members make no other call.
    let respaced =
        r#"{ "reason":"damaged","currency" : "BRL", "amount_cents":2590,"order_id":"ORD-1001" }"#;
    for args in [REFUND, REFUND, respaced, REFUND, REFUND, respaced] {
        let again = in_default(&d, "refund_order", args).await;
        assert_eq!(again.code, Code::ConfirmationRequired);
        assert_eq!(again.question_id.as_deref(), Some(id.as_str()));
        assert_eq!(again.data, first.data, "the same answer as the first time");
        assert_eq!(again.message, first.message);
    }
    let pending = d
        .store()
        .pending_approvals(toolcall::store::now_ms(), 100)
        .await
        .unwrap();
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, [id.as_str()], "one question in the store");
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn a_conversation_at_its_bound_of_questions_is_refused_and_another_is_still_asked() {
    let (shop, d) = shop_with(|b| b.max_pending_approvals(3));
    let mut ids = Vec::new();
    for cents in 1..=3 {
        let asked = refund_in(&d, "looping", cents).await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
        ids.push(asked.question_id.expect("an id"));
    }
    let refused = refund_in(&d, "looping", 4).await;
    assert_eq!(refused.code, Code::PendingLimit, "{refused:?}");
    assert!(!refused.ok);
    assert_eq!(refused.question_id, None);
    assert!(refused.message.contains("3 call(s)"), "{}", refused.message);
    // A call already asked is still the same question.
    let again = refund_in(&d, "looping", 2).await;
    assert_eq!(again.code, Code::ConfirmationRequired);
    assert_eq!(again.question_id.as_ref(), Some(&ids[1]));
    // Another conversation is still asked.
    let other = refund_in(&d, "calm", 4).await;
    assert_eq!(other.code, Code::ConfirmationRequired);
    let other_id = other.question_id.expect("an id");
    let now = toolcall::store::now_ms();
    let mut stored: Vec<String> = d
        .store()
        .pending_approvals(now, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    stored.sort();
    let mut want = ids.clone();
    want.push(other_id);
    want.sort();
    assert_eq!(stored, want, "nothing stored for the refused call");
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn spacing_member_order_and_parsed_objects_are_one_call() {
    let (shop, d) = shop_with(|b| b.max_duplicate_calls(10));
    let first = confirmed(&d, "refund_order", REFUND).await;
    assert!(first.ok && !first.replayed);
    let respaced =
        r#"{"reason":"damaged","currency":"BRL","amount_cents":2590,"order_id":"ORD-1001"}"#;
    assert!(confirmed(&d, "refund_order", respaced).await.replayed);
    let parsed: Value = serde_json::from_str(REFUND).unwrap();
    let replay = in_default_with(&d, "refund_order", &parsed, |c| c.confirmed(true)).await;
    assert!(replay.replayed);
    assert_eq!(replay.data, first.data);
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn a_repeated_side_effect_hits_the_loop_guard_after_its_replays() {
    let (shop, d) = shop_and_dispatcher();
    let results = [
        confirmed(&d, "refund_order", REFUND).await,
        confirmed(&d, "refund_order", REFUND).await,
        confirmed(&d, "refund_order", REFUND).await,
        confirmed(&d, "refund_order", REFUND).await,
    ];
    let outcome: Vec<(bool, &str, bool)> = results
        .iter()
        .map(|r| (r.ok, r.code.as_str(), r.replayed))
        .collect();
    assert_eq!(
        outcome,
        [
            (true, "OK", false),
            (true, "OK", true),
            (true, "OK", true),
            (false, "LOOP_DETECTED", false)
        ]
    );
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn the_business_check_runs_before_the_policy() {
    let shop = Arc::new(Shop::new());
    let policy = Policy::new()
        .allow(["refund_order"])
        .limit("max_refund_cents", 1_000);
    let d = shop_dispatcher(&shop).policy(policy).build().unwrap();
    let over_refundable = REFUND.replace("2590", "99999");
    assert_eq!(
        confirmed(&d, "refund_order", &over_refundable).await.code,
        "AMOUNT_EXCEEDS_REFUNDABLE"
    );
    let over_limit = confirmed(&d, "refund_order", REFUND).await;
    assert_eq!(over_limit.code, Code::PolicyLimit);
    assert!(
        over_limit
            .message
            .contains("limit of 1000 (max_refund_cents)"),
        "{}",
        over_limit.message
    );
    let under = REFUND.replace("2590", "1000");
    assert!(confirmed(&d, "refund_order", &under).await.ok);
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn a_limit_the_policy_does_not_set_fails_closed() {
    let (shop, d) = shop_with(|b| b.policy(Policy::new().allow(["refund_order"])));
    let result = confirmed(&d, "refund_order", REFUND).await;
    assert_code_says(&result, Code::PolicyLimit, "not set for this caller");
    assert_eq!(shop.applied_refunds(), 0);
}
