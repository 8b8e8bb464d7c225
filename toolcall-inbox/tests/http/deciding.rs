//! Deciding on the page: a decision recorded under who took it, once, on a
//! question that is still open, edits validated first, and calls two people
//! must sign.

use super::*;

/// A form's answer: back to the inbox's page, with `notice` about `id`.
#[track_caller]
fn assert_back_with(reply: &Reply, notice: &str, id: &str) {
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(
        reply.header("location"),
        Some(format!("/?notice={notice}&id={id}").as_str())
    );
}

#[tokio::test]
async fn a_decision_is_recorded_with_the_name_of_who_took_it() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let other = inbox.ask("acme", 1000, "s").await;
    let (cookie, csrf) = inbox.signed_in(BO).await;
    let page = inbox.get("/", Auth::Cookie(&cookie)).await.body;
    assert!(page.contains(&id) && page.contains("Who gets the money."));
    let reply = inbox
        .decide_with(
            &id,
            Auth::Cookie(&cookie),
            &[("Origin", &format!("http://{}", inbox.addr))],
            &[("csrf", &csrf), ("action", "approve"), ("note", "ok by me")],
        )
        .await;
    assert_back_with(&reply, "approved", &id);
    let decision = inbox.entry(&id).await.approval.decision.unwrap();
    assert!(decision.approved);
    assert_eq!(decision.by, "bo");
    assert_eq!(decision.note, "ok by me");
    assert_eq!(decision.edited_arguments, None);

    // A program with the token decides without a form.
    let reply = inbox
        .decide(
            &other,
            Auth::Bearer(ANA),
            &[("action", "deny"), ("note", "no")],
        )
        .await;
    assert_eq!(reply.status, 303);
    let decision = inbox.entry(&other).await.approval.decision.unwrap();
    assert!(!decision.approved);
    assert_eq!(decision.by, "ana");
    let pending = inbox.get("/api/pending", Auth::Bearer(ANA)).await;
    assert_eq!(
        serde_json::from_str::<Value>(&pending.body).unwrap(),
        json!({"items": [], "total": 0, "next": null}),
        "both decided"
    );
    let history = inbox.get("/history", Auth::Bearer(ANA)).await.body;
    assert!(history.contains("approved: waits for the agent"));
    assert!(history.contains("denied: the model hears it"));
}

#[tokio::test]
async fn a_double_click_is_one_decision_and_a_decided_one_cannot_be_decided_again() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let approve = [("action", "approve"), ("note", "")];
    let (first, second) = tokio::join!(
        inbox.decide(&id, Auth::Bearer(ANA), &approve),
        inbox.decide(&id, Auth::Bearer(ANA), &approve),
    );
    assert_eq!(
        (first.status, second.status),
        (303, 303),
        "the same answer twice"
    );
    let kept = inbox.entry(&id).await.approval.decision.unwrap();
    assert!(kept.approved);
    // Another decision, by anyone, changes nothing.
    for (token, action) in [(ANA, "deny"), (BO, "approve"), (BO, "deny")] {
        let reply = inbox
            .decide(&id, Auth::Bearer(token), &[("action", action)])
            .await;
        assert_eq!(reply.status, 409, "{token} {action}");
        assert!(reply.body.contains("Already decided"));
    }
    assert_eq!(inbox.entry(&id).await.approval.decision.unwrap(), kept);
    // Nor can it be edited.
    let reply = inbox
        .get(&format!("/approvals/{id}/edit"), Auth::Bearer(ANA))
        .await;
    assert_eq!(reply.status, 409);
}

#[tokio::test]
async fn an_expired_or_unknown_approval_cannot_be_decided() {
    let inbox = inbox().await;
    let asked = PendingApproval {
        caller: "default".into(),
        arguments: json!({"to": "acme", "amount_cents": 5}),
        expires_ms: now_ms() + 200,
        ..toolcall_testkit::store::asked("short-lived")
    };
    inbox.store.put_approval(&asked).await.unwrap();
    let listed = inbox.get("/api/pending", Auth::Bearer(ANA)).await.body;
    assert!(listed.contains("short-lived"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let listed = inbox.get("/api/pending", Auth::Bearer(ANA)).await.body;
    assert!(
        !listed.contains("short-lived"),
        "expired: no longer in the inbox"
    );
    for (id, status, which) in [
        ("short-lived", 410, "expired"),
        ("never-asked", 404, "unknown"),
        ("..%2F..%2Fetc", 404, "not an id"),
    ] {
        let reply = inbox
            .decide(id, Auth::Bearer(ANA), &[("action", "approve")])
            .await;
        assert_eq!(reply.status, status, "{which}: {id}");
    }
    assert!(inbox.entry("short-lived").await.approval.decision.is_none());
    // Neither approve nor deny: nothing.
    let id = inbox.ask("acme", 7, "s").await;
    let reply = inbox
        .decide(&id, Auth::Bearer(ANA), &[("action", "maybe")])
        .await;
    assert_eq!(reply.status, 400);
    let long = "x".repeat(1001);
    let reply = inbox
        .decide(
            &id,
            Auth::Bearer(ANA),
            &[("action", "deny"), ("note", &long)],
        )
        .await;
    assert_eq!(reply.status, 400);
    assert!(inbox.entry(&id).await.approval.decision.is_none());
}

#[tokio::test]
async fn an_edit_is_validated_before_it_is_recorded() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let form = inbox
        .get(&format!("/approvals/{id}/edit"), Auth::Bearer(ANA))
        .await;
    assert_eq!(form.status, 200);
    assert!(
        form.body
            .contains("name=\"arg:amount_cents\">2590</textarea>"),
        "{}",
        form.body
    );
    assert!(form.body.contains("name=\"arg:to\">acme</textarea>"));

    for (amount, problem) in [
        ("-5", "amount_cents"),
        ("abc", "not JSON"),
        ("1e3", "amount_cents"),
        ("100001", "amount_cents"),
    ] {
        let reply = inbox
            .decide(
                &id,
                Auth::Bearer(ANA),
                &[
                    ("action", "edit"),
                    ("arg:to", "acme"),
                    ("arg:amount_cents", amount),
                ],
            )
            .await;
        assert_eq!(reply.status, 422, "{amount}");
        assert!(reply.body.contains(problem), "{amount}: {}", reply.body);
        assert!(reply.body.contains("nothing was decided"));
        assert!(
            reply
                .body
                .contains(&format!(">{}</textarea>", toolcall_inbox::esc(amount))),
            "what was typed stays in the form"
        );
    }
    assert!(
        inbox.entry(&id).await.approval.decision.is_none(),
        "nothing decided"
    );

    // Unchanged arguments are a plain approval.
    let same = inbox.ask("same", 5, "s").await;
    let reply = inbox
        .decide(
            &same,
            Auth::Bearer(ANA),
            &[
                ("action", "edit"),
                ("arg:to", "same"),
                ("arg:amount_cents", "5"),
            ],
        )
        .await;
    assert_eq!(reply.status, 303);
    assert_eq!(
        inbox
            .entry(&same)
            .await
            .approval
            .decision
            .unwrap()
            .edited_arguments,
        None
    );

    let reply = inbox
        .decide(
            &id,
            Auth::Bearer(ANA),
            &[
                ("action", "edit"),
                ("arg:to", "acme"),
                ("arg:amount_cents", "1000"),
                ("note", "half now"),
            ],
        )
        .await;
    assert_back_with(&reply, "edited", &id);
    let decision = inbox.entry(&id).await.approval.decision.unwrap();
    assert!(decision.approved);
    assert_eq!(
        decision.edited_arguments,
        Some(json!({"to": "acme", "amount_cents": 1000}))
    );
    let history = inbox.get("/history", Auth::Bearer(ANA)).await.body;
    assert!(history.contains("approved with edits"));
    assert!(history.contains("half now"));
}

#[tokio::test]
async fn a_call_two_people_must_approve_shows_who_signed_and_the_second_decides() {
    let inbox = inbox().await;
    needs_people(&inbox, 2).await;
    let id = inbox.ask("acme", 2590, "s").await;
    let (cookie, csrf) = inbox.signed_in(ANA).await;
    let pending = json_of(&inbox.get("/api/pending", Auth::Bearer(ANA)).await);
    assert_eq!(item(&pending, &id)["needed"], 2);
    assert_eq!(item(&pending, &id)["signatures"], json!([]));

    let reply = inbox.press(&id, &cookie, &csrf, "approve").await;
    assert_back_with(&reply, "signed", &id);
    let signers = |signatures: Vec<toolcall::store::Signature>| -> Vec<String> {
        signatures.into_iter().map(|s| s.by).collect()
    };
    assert_eq!(signers(inbox.store.signatures(&id).await.unwrap()), ["ana"]);
    assert!(
        inbox.entry(&id).await.approval.decision.is_none(),
        "one of two"
    );
    // A second click by the same person counts once.
    let reply = inbox.press(&id, &cookie, &csrf, "approve").await;
    assert_eq!(reply.status, 303);
    assert_eq!(signers(inbox.store.signatures(&id).await.unwrap()), ["ana"]);

    let page = inbox
        .get(&format!("/?notice=signed&id={id}"), Auth::Cookie(&cookie))
        .await
        .body;
    assert!(page.contains("Signed: it needs more people"));
    let shown = card(&page, &id);
    assert!(
        shown.contains("data-signed=\"1\" data-needed=\"2\""),
        "{shown}"
    );
    assert!(shown.contains("1 of 2 signed") && shown.contains("<b class=\"signer\">ana</b>"));
    assert!(shown.contains("you signed it"));
    let pending = json_of(&inbox.get("/api/pending", Auth::Bearer(BO)).await);
    assert_eq!(item(&pending, &id)["signatures"], json!(["ana"]));
    assert_eq!(item(&pending, &id)["needed"], 2);

    // Bo's signature is the second: it decides.
    let approve = json!({"decision": "approve"}).to_string();
    let (reply, state) = inbox.decide_json(&id, Auth::Bearer(BO), &approve).await;
    assert_eq!(reply.status, 200, "{state}");
    assert_eq!(state["state"], "approved");
    let decision = inbox.entry(&id).await.approval.decision.unwrap();
    assert!(decision.approved);
    assert_eq!(decision.by, "ana, bo");
    assert_eq!(
        signers(inbox.store.signatures(&id).await.unwrap()),
        ["ana", "bo"]
    );
    let pending = json_of(&inbox.get("/api/pending", Auth::Bearer(BO)).await);
    assert_eq!(pending["total"], 0);
}

#[tokio::test]
async fn the_one_who_made_the_call_cannot_sign_it() {
    let inbox = inbox().await;
    needs_people(&inbox, 2).await;
    let asked = PendingApproval {
        caller: "bo".into(),
        ..asked_at("ap-bo", "s", now_ms())
    };
    inbox.store.put_approval(&asked).await.unwrap();
    let approve = json!({"decision": "approve"}).to_string();
    let (reply, problem) = inbox.decide_json("ap-bo", Auth::Bearer(BO), &approve).await;
    assert_eq!(reply.status, 409, "{problem}");
    assert_eq!(problem["code"], "refused_by_controls");
    assert_eq!(
        problem["error"],
        "bo made this call and may not approve it: pay needs 2 other people"
    );
    let (bo, csrf) = inbox.signed_in(BO).await;
    let reply = inbox
        .decide(
            "ap-bo",
            Auth::Cookie(&bo),
            &[("csrf", &csrf), ("action", "approve")],
        )
        .await;
    assert_eq!(reply.status, 409);
    assert!(
        reply
            .body
            .contains("bo made this call and may not approve it"),
        "{}",
        reply.body
    );
    assert_eq!(inbox.store.signatures("ap-bo").await.unwrap(), []);
    assert!(inbox.entry("ap-bo").await.approval.decision.is_none());
    // Someone else signs it.
    let (reply, state) = inbox
        .decide_json("ap-bo", Auth::Bearer(ANA), &approve)
        .await;
    assert_eq!(reply.status, 200, "{state}");
    assert_eq!(
        (state["signatures"].clone(), state["needed"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(inbox.store.signatures("ap-bo").await.unwrap()[0].by, "ana");
}
