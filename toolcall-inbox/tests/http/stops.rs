//! Operators' stops from the inbox: an admin stops a tool on the page or in
//! JSON, others change nothing, and names the application lacks are refused.

use super::*;

#[tokio::test]
async fn an_admin_stops_a_tool_from_the_page_and_its_calls_can_be_denied_not_approved() {
    let inbox = inbox().await;
    let id = inbox.ask("acme", 2590, "s").await;
    let other = inbox.ask("acme", 1000, "s").await;
    let (cookie, csrf) = inbox.signed_in(ANA).await;
    let origin = format!("http://{}", inbox.addr);
    let page = inbox.get("/admin", Auth::Cookie(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Nothing is stopped."));
    assert!(
        page.body
            .contains("<a href=\"/admin\" class=\"current\">Operators</a>")
    );

    // Without the CSRF token, or from elsewhere: nothing stops.
    let stop = [
        ("target", "tool"),
        ("name", "pay"),
        ("reason", "fraud wave, OPS-112"),
    ];
    for (headers, csrf) in [
        (&[][..], "0000"),
        (&[("Origin", "http://evil.example")][..], &csrf),
    ] {
        let form: Vec<(&str, &str)> = stop.iter().copied().chain([("csrf", csrf)]).collect();
        let reply = inbox
            .post_form("/admin/stop", Auth::Cookie(&cookie), headers, &form)
            .await;
        assert_eq!(reply.status, 403, "{headers:?}");
    }
    assert_eq!(inbox.controls().await.1, [], "nothing changed");

    let form: Vec<(&str, &str)> = stop
        .iter()
        .copied()
        .chain([("csrf", csrf.as_str())])
        .collect();
    let reply = inbox
        .post_form(
            "/admin/stop",
            Auth::Cookie(&cookie),
            &[("Origin", &origin)],
            &form,
        )
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(reply.header("location"), Some("/admin?notice=stopped"));
    let (controls, history) = inbox.controls().await;
    assert_eq!(controls.stops.len(), 1);
    let kept = &controls.stops[0];
    assert_eq!(kept.target, Target::Tool("pay".into()));
    assert_eq!(
        (kept.reason.as_str(), kept.by.as_str()),
        ("fraud wave, OPS-112", "ana")
    );
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].by, "ana", "the history names who stopped it");
    assert_eq!(history[0].summary, "stopped tool pay: fraud wave, OPS-112");
    assert!(
        inbox.pay_is_stopped().await,
        "the agents' calls are refused"
    );

    let page = inbox.get("/admin", Auth::Cookie(&cookie)).await.body;
    assert!(page.contains("fraud wave, OPS-112") && page.contains("<td class=\"by\">ana</td>"));
    assert!(page.contains("action=\"/admin/enable\""));

    // Its pending calls say so: approval disabled, denial possible.
    let inbox_page = inbox.get("/", Auth::Cookie(&cookie)).await.body;
    let shown = card(&inbox_page, &id);
    assert!(shown.contains("class=\"stopped\"") && shown.contains("fraud wave, OPS-112"));
    assert!(shown.contains("value=\"approve\" class=\"approve\" disabled"));
    assert!(shown.contains("value=\"deny\""));
    assert!(!shown.contains("Approve with edits"));
    let pending = json_of(&inbox.get("/api/pending", Auth::Bearer(BO)).await);
    let listed = item(&pending, &id);
    assert_eq!(listed["stopped"]["target"], "tool");
    assert_eq!(listed["stopped"]["name"], "pay");
    assert_eq!(listed["stopped"]["by"], "ana");
    assert_eq!(
        (listed["needed"].clone(), listed["signatures"].clone()),
        (json!(1), json!([]))
    );

    // Approving is refused, from a program and from the form; denying is not.
    let approve = json!({"decision": "approve"}).to_string();
    let (reply, problem) = inbox.decide_json(&id, Auth::Bearer(BO), &approve).await;
    assert_eq!(reply.status, 409, "{problem}");
    assert_eq!(problem["code"], "refused_by_controls");
    assert!(
        problem["error"].as_str().unwrap().contains("fraud wave"),
        "{problem}"
    );
    let reply = inbox.press(&id, &cookie, &csrf, "approve").await;
    assert_eq!(reply.status, 409);
    assert!(
        reply
            .body
            .contains("Refused by the operators&#39; controls"),
        "{}",
        reply.body
    );
    assert!(
        inbox.entry(&id).await.approval.decision.is_none(),
        "nothing decided"
    );
    let deny = json!({"decision": "deny", "note": "stopped"}).to_string();
    let (reply, state) = inbox.decide_json(&id, Auth::Bearer(BO), &deny).await;
    assert_eq!(reply.status, 200, "{state}");
    let decision = inbox.entry(&id).await.approval.decision.unwrap();
    assert!(!decision.approved);
    assert_eq!(decision.by, "bo");

    // Enabling lifts it, and the history says who.
    let reply = inbox
        .post_form(
            "/admin/enable",
            Auth::Cookie(&cookie),
            &[("Origin", &origin)],
            &[("csrf", &csrf), ("target", "tool"), ("name", "pay")],
        )
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(reply.header("location"), Some("/admin?notice=enabled"));
    let (controls, history) = inbox.controls().await;
    assert_eq!(controls.stops, []);
    assert_eq!(history.len(), 2);
    assert_eq!(
        (history[0].by.as_str(), history[0].summary.as_str()),
        ("ana", "enabled tool pay")
    );
    assert!(!inbox.pay_is_stopped().await);
    let reply = inbox
        .decide(&other, Auth::Bearer(BO), &[("action", "approve")])
        .await;
    assert_eq!(reply.status, 303);
    assert!(
        inbox
            .entry(&other)
            .await
            .approval
            .decision
            .unwrap()
            .approved
    );

    // Enabling what is not stopped changes nothing: a 409.
    let reply = inbox
        .post_form(
            "/admin/enable",
            Auth::Cookie(&cookie),
            &[],
            &[("csrf", &csrf), ("target", "tool"), ("name", "pay")],
        )
        .await;
    assert_eq!(reply.status, 409);
    assert!(
        reply.body.contains("tool pay is not stopped"),
        "{}",
        reply.body
    );
    assert_eq!(inbox.controls().await.1.len(), 2);
}

/// `POST` of `body` to `/api/controls/{action}` as `auth` is refused:
/// `status`, and a problem of `code`.
async fn control_refused(
    inbox: &Inbox,
    action: &str,
    auth: Auth<'_>,
    body: &str,
    status: u16,
    code: &str,
) {
    let path = format!("/api/controls/{action}");
    let (reply, problem) = inbox.post_json(&path, auth, body).await;
    assert_eq!(
        (reply.status, problem["code"].as_str()),
        (status, Some(code)),
        "{problem}"
    );
}

#[tokio::test]
async fn a_program_stops_with_json_and_a_non_admin_changes_nothing() {
    let inbox = inbox().await;
    let stop = json!({"target": "caller", "name": "default", "reason": "it loops"}).to_string();

    // Not signed in: 401. Not an admin: 403, by token and by form alike.
    control_refused(&inbox, "stops", Auth::None, &stop, 401, "unauthorized").await;
    control_refused(&inbox, "stops", Auth::Bearer(BO), &stop, 403, "admin_only").await;
    let (bo, bo_csrf) = inbox.signed_in(BO).await;
    let reply = inbox
        .post_form(
            "/admin/stop",
            Auth::Cookie(&bo),
            &[],
            &[
                ("csrf", &bo_csrf),
                ("target", "everything"),
                ("reason", "mine"),
            ],
        )
        .await;
    assert_eq!(reply.status, 403);
    assert_eq!(inbox.get("/admin", Auth::Cookie(&bo)).await.status, 403);
    assert!(
        !inbox
            .get("/", Auth::Cookie(&bo))
            .await
            .body
            .contains("href=\"/admin\"")
    );
    let everything = r#"{"target": "everything"}"#;
    control_refused(
        &inbox,
        "enable",
        Auth::Bearer(BO),
        everything,
        403,
        "admin_only",
    )
    .await;
    let read = inbox.get("/api/controls", Auth::Bearer(BO)).await;
    assert_eq!(read.status, 403);
    let (controls, history) = inbox.controls().await;
    assert_eq!(
        (controls.stops, history),
        (vec![], vec![]),
        "nothing changed"
    );
    assert!(!inbox.pay_is_stopped().await);

    // Fields that make no sense: 400 or 422, naming the field.
    for (body, status, field) in [
        (json!({"target": "all", "reason": "x"}), 400, "target"),
        (json!({"target": "tool", "reason": "x"}), 400, "name"),
        (
            json!({"target": "tool", "name": "pya", "reason": "x"}),
            422,
            "name",
        ),
        (json!({"target": "tool", "name": "pay"}), 400, "reason"),
        (
            json!({"target": "tool", "name": "pay", "reason": " "}),
            400,
            "reason",
        ),
        (
            json!({"target": "tool", "name": "pay", "reason": "x", "by": "eve"}),
            400,
            "by",
        ),
        (
            json!({"target": "tool", "name": 7, "reason": "x"}),
            400,
            "name",
        ),
    ] {
        let (reply, problem) = inbox
            .post_json("/api/controls/stops", Auth::Bearer(ANA), &body.to_string())
            .await;
        assert_eq!(reply.status, status, "{body}: {problem}");
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    control_refused(
        &inbox,
        "stops",
        Auth::Bearer(ANA),
        "[1]",
        400,
        "invalid_json",
    )
    .await;
    let wrong_type = http(
        &inbox.addr,
        "POST",
        "/api/controls/stops",
        Auth::Bearer(ANA),
        &[("Content-Type", "text/plain")],
        Some(&stop),
    )
    .await;
    assert_eq!(wrong_type.status, 415);
    // A browser's JSON without its sign-in's CSRF token changes nothing.
    let ana = inbox.sign_in(ANA).await;
    control_refused(&inbox, "stops", Auth::Cookie(&ana), &stop, 403, "forbidden").await;
    assert_eq!(inbox.controls().await.1, [], "nothing changed");

    // An admin's token stops the caller: its calls are refused.
    let (reply, answer) = inbox
        .post_json("/api/controls/stops", Auth::Bearer(ANA), &stop)
        .await;
    assert_eq!(reply.status, 200, "{answer}");
    assert_eq!(answer["version"], 1);
    assert_eq!(answer["by"], "ana");
    assert_eq!(answer["change"], "stopped caller default: it loops");
    assert_eq!(answer["stops"][0]["target"], "caller");
    let (controls, history) = inbox.controls().await;
    assert_eq!(controls.stops[0].target, Target::Caller("default".into()));
    assert_eq!(controls.stops[0].by, "ana");
    assert_eq!((history[0].by.as_str(), history[0].version), ("ana", 1));
    assert!(inbox.pay_is_stopped().await);

    // The same stop again changes nothing (409); another reason replaces it.
    control_refused(&inbox, "stops", Auth::Bearer(ANA), &stop, 409, "unchanged").await;
    assert_eq!(inbox.controls().await.1.len(), 1);
    let read = json_of(&inbox.get("/api/controls", Auth::Bearer(ANA)).await);
    assert_eq!(read["version"], 1);
    assert_eq!(read["stops"][0]["name"], "default");
    assert_eq!(read["stops"][0]["reason"], "it loops");
    assert_eq!(read["history"][0]["by"], "ana");
    assert_eq!(
        read["history"][0]["summary"],
        "stopped caller default: it loops"
    );

    // Enabling it through JSON; a second time is a 409.
    let enable = json!({"target": "caller", "name": "default"}).to_string();
    let (reply, answer) = inbox
        .post_json("/api/controls/enable", Auth::Bearer(ANA), &enable)
        .await;
    assert_eq!(reply.status, 200, "{answer}");
    assert_eq!(
        (answer["version"].clone(), answer["stops"].clone()),
        (json!(2), json!([]))
    );
    let (controls, history) = inbox.controls().await;
    assert_eq!(controls.stops, []);
    assert_eq!(history[0].summary, "enabled caller default");
    assert!(!inbox.pay_is_stopped().await);
    control_refused(
        &inbox,
        "enable",
        Auth::Bearer(ANA),
        &enable,
        409,
        "unchanged",
    )
    .await;
    let wrong_method = inbox.get("/api/controls/stops", Auth::Bearer(ANA)).await;
    assert_eq!(wrong_method.status, 405);
    assert_eq!(json_of(&wrong_method)["code"], "method_not_allowed");
}

/// The operators' API checks a name as `admin disable` does: a stop or an
/// enable of a tool or caller the application does not have is a 422 that
/// names the field and the closest real name, from JSON and from the
/// page's form; a stop of a tool the application no longer has can still
/// be lifted.
#[tokio::test]
async fn a_stop_of_a_name_the_application_does_not_have_is_a_422_naming_the_closest() {
    let inbox = inbox().await;
    for (path, body, code, closest) in [
        (
            "/api/controls/stops",
            json!({"target": "caller", "name": "defualt", "reason": "it loops"}),
            "unknown_caller",
            "`default`",
        ),
        (
            "/api/controls/stops",
            json!({"target": "tool", "name": "pai", "reason": "fraud"}),
            "unknown_tool",
            "`pay`",
        ),
        (
            "/api/controls/enable",
            json!({"target": "caller", "name": "defualt"}),
            "unknown_caller",
            "`default`",
        ),
        (
            "/api/controls/enable",
            json!({"target": "tool", "name": "pai"}),
            "unknown_tool",
            "`pay`",
        ),
    ] {
        let (reply, problem) = inbox
            .post_json(path, Auth::Bearer(ANA), &body.to_string())
            .await;
        assert_eq!(reply.status, 422, "{body}: {problem}");
        assert_eq!(problem["code"], code, "{body}: {problem}");
        assert_eq!(problem["field"], "name", "{body}: {problem}");
        assert!(
            problem["error"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("did you mean {closest}"))),
            "{body}: {problem}"
        );
    }
    for (path, form) in [
        (
            "/admin/stop",
            &[("target", "caller"), ("name", "defualt"), ("reason", "x")][..],
        ),
        ("/admin/enable", &[("target", "tool"), ("name", "pai")][..]),
    ] {
        let reply = inbox.post_form(path, Auth::Bearer(ANA), &[], form).await;
        assert_eq!(reply.status, 422, "{path}: {}", reply.body);
        assert!(reply.body.contains("did you mean"), "{}", reply.body);
    }
    assert_eq!(inbox.controls().await.1, [], "nothing changed");
    assert!(!inbox.pay_is_stopped().await);

    // A tool an older version had, stopped then: it can be enabled.
    toolcall_core::controls::stop(&*inbox.store, Target::Tool("gone".into()), "old", "ops")
        .await
        .unwrap();
    let (reply, answer) = inbox
        .post_json(
            "/api/controls/enable",
            Auth::Bearer(ANA),
            &json!({"target": "tool", "name": "gone"}).to_string(),
        )
        .await;
    assert_eq!(reply.status, 200, "{answer}");
    assert_eq!(answer["change"], "enabled tool gone");
}

/// An inbox over a store and tools, without the dispatcher, does not know
/// the callers: it stops none by name (a typo would stop nothing), and
/// says so.
#[tokio::test]
async fn an_inbox_that_does_not_know_the_callers_stops_none_by_name() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let backend = Arc::new(Parts {
        store: Arc::clone(&store),
        registry: tools![pay].unwrap(),
    });
    let access = Access::parse(&format!("ana {ANA} admin\n"), "x").unwrap();
    let router = toolcall_inbox::router(backend, Options::new(access));
    let bearer = format!("Bearer {ANA}");
    let headers = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let stop = json!({"target": "caller", "name": "default", "reason": "it loops"});
    let reply = routed(
        &router,
        "POST",
        "/api/controls/stops",
        &headers,
        stop.to_string().into_bytes(),
    )
    .await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    let problem: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(
        (problem["code"].as_str(), problem["field"].as_str()),
        (Some("unknown_caller"), Some("name")),
        "{problem}"
    );
    let (_, controls) = toolcall_core::controls::read(&*store).await.unwrap();
    assert_eq!(controls.stops, []);
}
