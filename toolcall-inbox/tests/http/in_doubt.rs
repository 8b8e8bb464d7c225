//! A call in doubt: the question of what happened, its two answers, and no
//! approval of it, on the page or in JSON.

use super::*;

#[tokio::test]
async fn a_call_in_doubt_asks_what_happened_with_two_answers() {
    let inbox = inbox().await;
    let in_doubt = |id: &str| PendingApproval {
        reason: Some("in_doubt".into()),
        ..asked_at(id, "s-doubt", now_ms())
    };
    inbox
        .store
        .put_approval(&in_doubt("doubt-1"))
        .await
        .unwrap();
    inbox
        .store
        .put_approval(&in_doubt("doubt-2"))
        .await
        .unwrap();
    let plain = inbox.ask("acme", 5, "s-plain").await;
    let page = inbox.get("/", Auth::Bearer(ANA)).await.body;
    let doubt = card(&page, "doubt-1");
    assert!(
        doubt.contains("an earlier attempt of this exact call may have taken effect"),
        "{doubt}"
    );
    assert!(doubt.contains(
        "<button type=\"submit\" name=\"action\" value=\"not_happened\" class=\"approve\">It did not happen: run it once</button>"
    ));
    assert!(doubt.contains(
        "<button type=\"submit\" name=\"action\" value=\"happened\" class=\"deny\">It happened: do not run it again</button>"
    ));
    assert_eq!(doubt.matches("<button").count(), 2, "{doubt}");
    assert!(!doubt.contains("/edit"), "no edits: {doubt}");
    let plain_card = card(&page, &plain);
    assert!(plain_card.contains(">Approve</button>"));
    assert!(plain_card.contains("Approve with edits"));
    assert!(!plain_card.contains("It did not happen"));

    // Nothing to edit.
    let edit = inbox
        .get("/approvals/doubt-1/edit", Auth::Bearer(ANA))
        .await;
    assert_eq!(edit.status, 422);
    let reply = inbox
        .decide(
            "doubt-1",
            Auth::Bearer(ANA),
            &[("action", "edit"), ("arg:amount_cents", "1")],
        )
        .await;
    assert_eq!(reply.status, 422);
    assert!(inbox.entry("doubt-1").await.approval.decision.is_none());

    // The sign-in and CSRF checks of every decision.
    let (cookie, csrf) = inbox.signed_in(ANA).await;
    let reply = inbox
        .decide("doubt-1", Auth::Cookie(&cookie), &[("action", "happened")])
        .await;
    assert_eq!(reply.status, 403);
    let reply = inbox
        .decide("doubt-1", Auth::None, &[("action", "happened")])
        .await;
    assert_eq!(reply.status, 401);
    assert!(inbox.entry("doubt-1").await.approval.decision.is_none());

    // Neither an approval nor a denial answers it: it asks what happened.
    for action in ["approve", "deny"] {
        let reply = inbox
            .decide(
                "doubt-1",
                Auth::Cookie(&cookie),
                &[("action", action), ("csrf", &csrf)],
            )
            .await;
        assert_eq!(reply.status, 422, "{action}");
        assert!(
            reply.body.contains("say whether it happened"),
            "{}",
            reply.body
        );
    }
    assert!(inbox.entry("doubt-1").await.approval.decision.is_none());
    // Nor is a settlement an answer to an approval question.
    let reply = inbox
        .decide(&plain, Auth::Bearer(ANA), &[("action", "happened")])
        .await;
    assert_eq!(reply.status, 422);
    assert!(inbox.entry(&plain).await.approval.decision.is_none());

    // Say it happened, or that it did not.
    let reply = inbox
        .decide(
            "doubt-1",
            Auth::Cookie(&cookie),
            &[("action", "happened"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(reply.status, 303);
    assert_eq!(
        reply.header("location"),
        Some("/?notice=happened&id=doubt-1")
    );
    let settled = inbox.entry("doubt-1").await.approval.decision.unwrap();
    assert!(!settled.approved);
    assert_eq!(settled.by, "ana");
    let reply = inbox
        .decide("doubt-2", Auth::Bearer(BO), &[("action", "not_happened")])
        .await;
    assert_eq!(
        reply.header("location"),
        Some("/?notice=not-happened&id=doubt-2")
    );
    assert!(
        inbox
            .entry("doubt-2")
            .await
            .approval
            .decision
            .unwrap()
            .approved
    );
    let notice = inbox
        .get("/?notice=happened&id=doubt-1", Auth::Bearer(ANA))
        .await
        .body;
    assert!(notice.contains("Settled, it happened"));

    let history = inbox.get("/history", Auth::Bearer(ANA)).await.body;
    let row = |id: &str| {
        let start = history
            .find(&format!("<tr data-id=\"{id}\">"))
            .unwrap_or_else(|| panic!("no row for {id}"));
        history[start..start + history[start..].find("</tr>").unwrap()].to_owned()
    };
    assert!(
        row("doubt-1").contains("settled: it happened"),
        "{}",
        row("doubt-1")
    );
    assert!(!row("doubt-1").contains("denied"), "{}", row("doubt-1"));
    assert!(
        row("doubt-2").contains("settled: it did not happen"),
        "{}",
        row("doubt-2")
    );
}

/// A question about an unknown outcome is answered only as life allows:
/// whether it happened; an approval, a denial or an edit is life's refusal.
#[tokio::test]
async fn a_question_in_doubt_is_not_approved_through_json() {
    let inbox = inbox().await;
    inbox
        .store
        .put_approval(&PendingApproval {
            reason: Some("in_doubt".into()),
            ..asked_at("doubt", "s-doubt", now_ms())
        })
        .await
        .unwrap();
    let plain = inbox.ask("acme", 5, "s-plain").await;
    let pending = json_of(&inbox.get("/api/pending", Auth::Bearer(ANA)).await);
    let item = |id: &str| item(&pending, id);
    assert_eq!(item("doubt")["reason"], "in_doubt");
    assert_eq!(
        item("doubt")["answers"],
        json!(["happened", "not_happened"])
    );
    assert_eq!(item(&plain)["reason"], "high_risk");

    for body in [
        json!({"decision": "approve"}),
        json!({"decision": "deny"}),
        json!({"decision": "edit", "arguments": {"to": "acme", "amount_cents": 5}}),
    ] {
        let (reply, error) = inbox
            .decide_json("doubt", Auth::Bearer(ANA), &body.to_string())
            .await;
        assert_eq!(reply.status, 409, "{body}: {error}");
        assert_eq!(error["code"], "wrong_kind", "{error}");
        assert_eq!(error["answers"], json!(["happened", "not_happened"]));
        assert!(
            error["refusal"]
                .as_str()
                .unwrap()
                .contains("saying whether it happened"),
            "life's reason: {error}"
        );
    }
    // Nor is a settlement an answer to an approval question.
    let (reply, error) = inbox
        .decide_json(&plain, Auth::Bearer(ANA), r#"{"decision": "happened"}"#)
        .await;
    assert_eq!(reply.status, 409, "{error}");
    assert_eq!(error["code"], "wrong_kind");
    assert!(inbox.decisions().await.is_empty(), "nothing decided");

    let (reply, state) = inbox
        .decide_json(
            "doubt",
            Auth::Bearer(BO),
            r#"{"decision": "happened", "note": "the bank shows it"}"#,
        )
        .await;
    assert_eq!(reply.status, 200, "{state}");
    assert_eq!(state["state"], "happened");
    assert_eq!(state["reason"], "in_doubt");
    let settled = inbox.entry("doubt").await.approval.decision.unwrap();
    assert!(!settled.approved, "it happened: not run again");
    assert_eq!(settled.by, "bo");
    assert_eq!(inbox.decisions().await.len(), 1);
}
