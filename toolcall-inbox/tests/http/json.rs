//! The JSON endpoints: a program decides, a denial is final, and what does
//! not make sense is a JSON error that changes nothing.

use super::*;

/// The JSON decision endpoint: a program approves with its bearer token,
/// gets the decision's state, and the store keeps exactly one decision, as
/// the form's path records it; the same request again is the same decision.
#[tokio::test]
async fn a_program_approves_with_json_and_the_store_keeps_one_decision() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let digest = inbox.entry(&id).await.approval.digest;
    let body = json!({"decision": "approve", "note": "  ok by me  "}).to_string();
    let (reply, state) = inbox.decide_json(&id, Auth::Bearer(ANA), &body).await;
    assert_eq!(reply.status, 200, "{state}");
    let decision = inbox.entry(&id).await.approval.decision.unwrap();
    assert_eq!(
        state,
        json!({
            "id": id,
            "state": "approved",
            "by": "ana",
            "note": "ok by me",
            "decided_ms": decision.decided_ms,
            "again": false,
            "tool": "pay",
            "session": "s",
            "caller": "default",
            "reason": "high_risk",
            "digest": digest,
        })
    );
    assert!(decision.approved);
    assert_eq!(
        (decision.by.as_str(), decision.note.as_str()),
        ("ana", "ok by me")
    );
    assert_eq!(decision.edited_arguments, None);
    assert_eq!(inbox.decisions().await.len(), 1, "exactly one decision");

    // The same request again (a retry): the same decision, not a second.
    let (again, state) = inbox.decide_json(&id, Auth::Bearer(ANA), &body).await;
    assert_eq!(again.status, 200, "{state}");
    assert_eq!(state["again"], true);
    assert_eq!(state["decided_ms"], decision.decided_ms);
    assert_eq!(inbox.entry(&id).await.approval.decision.unwrap(), decision);
    assert_eq!(inbox.decisions().await.len(), 1);
    let pending = json_of(&inbox.get("/api/pending", Auth::Bearer(ANA)).await);
    assert_eq!(pending["total"], 0);

    // An edit records the edited arguments, validated.
    let other = inbox.ask("acme", 5000, "s").await;
    let body = json!({"decision": "edit", "arguments": {"to": "acme", "amount_cents": 2500}, "note": "half"});
    let (reply, state) = inbox
        .decide_json(&other, Auth::Bearer(BO), &body.to_string())
        .await;
    assert_eq!(reply.status, 200, "{state}");
    assert_eq!(state["state"], "edited");
    assert_eq!(state["by"], "bo");
    assert_eq!(
        state["edited_arguments"],
        json!({"to": "acme", "amount_cents": 2500})
    );
    let decision = inbox.entry(&other).await.approval.decision.unwrap();
    assert!(decision.approved);
    assert_eq!(
        decision.edited_arguments,
        Some(json!({"to": "acme", "amount_cents": 2500}))
    );
    assert_eq!(inbox.decisions().await.len(), 2);
}

#[tokio::test]
async fn a_denial_is_final_and_a_second_decision_is_a_409_in_json() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let (reply, state) = inbox
        .decide_json(
            &id,
            Auth::Bearer(ANA),
            r#"{"decision": "deny", "note": "not this week"}"#,
        )
        .await;
    assert_eq!(reply.status, 200, "{state}");
    assert_eq!(state["state"], "denied");
    let kept = inbox.entry(&id).await.approval.decision.unwrap();
    assert!(!kept.approved);
    for (token, body) in [
        (BO, json!({"decision": "approve"})),
        (ANA, json!({"decision": "approve"})),
        (ANA, json!({"decision": "deny", "note": "another note"})),
        (
            BO,
            json!({"decision": "edit", "arguments": {"to": "acme", "amount_cents": 1}}),
        ),
    ] {
        let (reply, error) = inbox
            .decide_json(&id, Auth::Bearer(token), &body.to_string())
            .await;
        assert_eq!(reply.status, 409, "{body}: {error}");
        assert_eq!(error["code"], "already_decided", "{error}");
        assert_eq!(error["decision"]["state"], "denied");
        assert_eq!(error["decision"]["by"], "ana");
        assert!(
            error["refusal"]
                .as_str()
                .unwrap()
                .contains("the first decision stands"),
            "life's reason: {error}"
        );
    }
    assert_eq!(inbox.entry(&id).await.approval.decision.unwrap(), kept);
    assert_eq!(inbox.decisions().await.len(), 1);
}

#[tokio::test]
async fn an_unknown_or_expired_id_and_a_malformed_body_are_json_errors() {
    let inbox = inbox().await;
    inbox
        .store
        .put_approval(&PendingApproval {
            expires_ms: now_ms() + 100,
            ..asked_at("short-lived", "s", now_ms())
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (id, status, code) in [
        ("never-asked", 404, "unknown_approval"),
        ("short-lived", 410, "expired"),
    ] {
        let approve = r#"{"decision": "approve"}"#;
        let (reply, error) = inbox.decide_json(id, Auth::Bearer(ANA), approve).await;
        assert_eq!(
            (reply.status, &error["code"]),
            (status, &json!(code)),
            "{error}"
        );
    }

    let id = inbox.ask("acme", 2590, "s").await;
    let long_note = "x".repeat(1001);
    let cases: [(&str, u16, &str, Option<&str>); 12] = [
        ("{\"decision\": ", 400, "invalid_json", None),
        ("approve", 400, "invalid_json", None),
        ("[\"approve\"]", 400, "invalid_json", None),
        ("{}", 400, "invalid_request", Some("decision")),
        (
            r#"{"decision": "maybe"}"#,
            400,
            "invalid_request",
            Some("decision"),
        ),
        (
            r#"{"decision": true}"#,
            400,
            "invalid_request",
            Some("decision"),
        ),
        (
            r#"{"decision": "approve", "notes": "typo"}"#,
            400,
            "invalid_request",
            Some("notes"),
        ),
        (
            r#"{"decision": "approve", "note": 5}"#,
            400,
            "invalid_request",
            Some("note"),
        ),
        (
            r#"{"decision": "approve", "arguments": {"to": "x", "amount_cents": 1}}"#,
            400,
            "invalid_request",
            Some("arguments"),
        ),
        (
            r#"{"decision": "edit"}"#,
            400,
            "invalid_request",
            Some("arguments"),
        ),
        (
            r#"{"decision": "edit", "arguments": {"to": "acme", "amount_cents": -5}}"#,
            422,
            "invalid_arguments",
            Some("arguments"),
        ),
        (
            r#"{"decision": "edit", "arguments": [1]}"#,
            422,
            "invalid_arguments",
            Some("arguments"),
        ),
    ];
    for (body, status, code, field) in cases {
        let (reply, error) = inbox.decide_json(&id, Auth::Bearer(ANA), body).await;
        assert_eq!(reply.status, status, "{body}: {error}");
        assert_eq!(error["code"], code, "{body}: {error}");
        assert!(
            error["error"].as_str().is_some_and(|m| !m.is_empty()),
            "{error}"
        );
        if let Some(field) = field {
            assert_eq!(error["field"], field, "{body}: {error}");
        }
    }
    // The edited arguments' problems name the argument.
    let (_, error) = inbox
        .decide_json(
            &id,
            Auth::Bearer(ANA),
            r#"{"decision": "edit", "arguments": {"to": "acme", "amount_cents": 100001}}"#,
        )
        .await;
    assert_eq!(error["problems"][0]["field"], "amount_cents", "{error}");
    // A note as long as the form's bound, and no longer.
    let body = json!({"decision": "deny", "note": long_note}).to_string();
    let (reply, error) = inbox.decide_json(&id, Auth::Bearer(ANA), &body).await;
    assert_eq!(
        (reply.status, &error["field"]),
        (400, &json!("note")),
        "{error}"
    );
    // Not JSON's content type; a body over the bound.
    for (kind, body) in [
        ("application/x-www-form-urlencoded", "decision=approve"),
        ("text/plain", r#"{"decision": "approve"}"#),
    ] {
        let reply = http(
            &inbox.addr,
            "POST",
            &format!("/api/approvals/{id}/decision"),
            Auth::Bearer(ANA),
            &[("Content-Type", kind)],
            Some(body),
        )
        .await;
        assert_eq!(reply.status, 415, "{kind}");
        assert_eq!(json_of(&reply)["code"], "unsupported_media_type");
    }
    let huge = json!({"decision": "deny", "note": "x".repeat(300 * 1024)}).to_string();
    let (reply, error) = inbox.decide_json(&id, Auth::Bearer(ANA), &huge).await;
    assert_eq!(reply.status, 413, "{error}");
    assert_eq!(error["code"], "body_too_large");
    // A GET is told which method.
    let reply = inbox
        .get(&format!("/api/approvals/{id}/decision"), Auth::Bearer(ANA))
        .await;
    assert_eq!(reply.status, 405);
    assert_eq!(json_of(&reply)["code"], "method_not_allowed");

    assert!(inbox.entry(&id).await.approval.decision.is_none());
    assert!(inbox.decisions().await.is_empty(), "nothing decided");
}

/// A decision, a stop, an enable and a revocation are read as the model's
/// arguments are: a member named twice, at any depth, is a 400 that names
/// it (a map would keep the last: `deny` then `approve` approved); a body
/// nested too deep, a member the endpoint does not take, or one of the
/// wrong type is a 400 that names it; and nothing is decided or changed.
#[tokio::test]
async fn a_member_named_twice_or_unknown_or_too_deep_decides_and_changes_nothing() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let deep = format!(
        r#"{{"decision": "edit", "arguments": {{"to": "acme", "amount_cents": 1, "x": {}1{}}}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    let decision = format!("/api/approvals/{id}/decision");
    let cases: [(&str, &str, &str, Option<&str>, &str); 11] = [
        (
            &decision,
            r#"{"decision": "deny", "decision": "approve"}"#,
            "duplicate_member",
            Some("decision"),
            "`decision`",
        ),
        (
            &decision,
            r#"{"decision": "deny", "note": "a", "note": "b"}"#,
            "duplicate_member",
            Some("note"),
            "`note`",
        ),
        (
            &decision,
            r#"{"decision": "edit", "arguments": {"to": "acme", "to": "eve", "amount_cents": 1}}"#,
            "duplicate_member",
            Some("arguments"),
            "`to`",
        ),
        (&decision, &deep, "too_deep", None, "levels"),
        (
            &decision,
            r#"{"decision": "deny", "csrf": 5}"#,
            "invalid_request",
            Some("csrf"),
            "string",
        ),
        (
            &decision,
            r#"{"decision": "deny", "by": "eve"}"#,
            "invalid_request",
            Some("by"),
            "\"by\"",
        ),
        (
            "/api/controls/stops",
            r#"{"target": "tool", "name": "pay", "reason": "a", "reason": "b"}"#,
            "duplicate_member",
            Some("reason"),
            "`reason`",
        ),
        (
            "/api/controls/stops",
            r#"{"target": "everything", "reason": {"why": 1, "why": 2}}"#,
            "duplicate_member",
            Some("reason"),
            "`why`",
        ),
        (
            "/api/controls/enable",
            r#"{"target": "tool", "target": "everything", "name": "pay"}"#,
            "duplicate_member",
            Some("target"),
            "`target`",
        ),
        (
            "/sessions/revoke",
            r#"{"csrf": "a", "csrf": "b"}"#,
            "duplicate_member",
            Some("csrf"),
            "`csrf`",
        ),
        (
            "/sessions/revoke",
            r#"{"everywhere": true}"#,
            "invalid_request",
            Some("everywhere"),
            "\"everywhere\"",
        ),
    ];
    let cookie = inbox.sign_in(BO).await;
    for (path, body, code, field, said) in cases {
        let (reply, problem) = inbox.post_json(path, Auth::Bearer(ANA), body).await;
        assert_eq!(reply.status, 400, "{path} {body}: {problem}");
        assert_eq!(problem["code"], code, "{path} {body}: {problem}");
        if let Some(field) = field {
            assert_eq!(problem["field"], field, "{path} {body}: {problem}");
        }
        let error = problem["error"].as_str().unwrap();
        assert!(error.contains(said), "{path} {body}: {problem}");
        if code == "invalid_request" && field != Some("csrf") {
            assert!(
                problem["allowed"].as_array().is_some_and(|a| !a.is_empty()),
                "the members allowed: {problem}"
            );
        }
    }
    // A form that gives a field twice is refused too, not read as its
    // first or its last.
    let reply = inbox
        .decide(
            &id,
            Auth::Bearer(ANA),
            &[("action", "deny"), ("action", "approve")],
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("action"), "{}", reply.body);
    let reply = inbox
        .post_form(
            "/admin/stop",
            Auth::Bearer(ANA),
            &[],
            &[
                ("target", "tool"),
                ("name", "pay"),
                ("reason", "a"),
                ("reason", "b"),
            ],
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.body);

    assert!(inbox.entry(&id).await.approval.decision.is_none());
    assert!(inbox.decisions().await.is_empty(), "nothing decided");
    assert_eq!(inbox.controls().await.1, [], "nothing changed");
    assert_eq!(
        inbox.get("/", Auth::Cookie(&cookie)).await.status,
        200,
        "nobody signed out"
    );
    // A program's revocation with a JSON body that is right.
    let (reply, answer) = inbox
        .post_json("/sessions/revoke", Auth::Bearer(BO), "{}")
        .await;
    assert_eq!((reply.status, answer), (200, json!({"revoked": 1})));
    assert_eq!(inbox.get("/", Auth::Cookie(&cookie)).await.status, 401);
}
