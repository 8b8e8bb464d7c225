//! The list of questions: its true count and pages, its filters and order,
//! the metrics page, and where a decision returns to.

use super::*;

#[tokio::test]
async fn the_metrics_chart_the_audit_log_as_inline_svg() {
    let dir = std::env::temp_dir().join(format!("toolcall-inbox-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let audit = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&audit);
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let dispatcher = Dispatcher::builder(tools![pay].unwrap(), Arc::new(()))
        .store(Arc::clone(&store))
        .audit(toolcall::JsonLinesAudit::open(&audit).unwrap())
        .max_steps(100)
        .build()
        .unwrap();
    for arguments in [
        r#"{"to": "a", "amount_cents": -1}"#,
        r#"{"to": "a", "amount_cents": "ten"}"#,
        r#"{"to": "a", "amount_cents": 10}"#,
        r#"not json"#,
    ] {
        dispatcher
            .execute(Call::new("pay", arguments).session("default"))
            .await;
    }
    dispatcher
        .execute(Call::new("<b>nope</b>", "{}").session("default"))
        .await;
    drop(dispatcher);
    std::fs::write(
        &audit,
        std::fs::read_to_string(&audit).unwrap() + "this line is not a record\n",
    )
    .unwrap();
    let access = Access::token("ana", ANA).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let backend = Arc::new(Parts {
        store,
        registry: tools![pay].unwrap(),
    });
    tokio::spawn(toolcall_inbox::serve(
        backend,
        Options::new(access).audit(&audit),
        listener,
    ));
    let page = http(&addr, "GET", "/metrics", Auth::Bearer(ANA), &[], None).await;
    assert_eq!(page.status, 200);
    let body = page.body;
    assert!(body.contains("5 record(s)"), "{body}");
    assert!(body.contains("1 unreadable line(s) left out"));
    assert!(body.contains("<svg") && body.contains("Rejections by code"));
    assert!(body.contains("INVALID_ARGUMENTS: 2"), "{body}");
    assert!(body.contains("INVALID_JSON: 1"));
    assert!(
        body.contains("Rejections by tool over time") && body.contains("in buckets of 1 s (UTC)"),
        "the records carry their time: {body}"
    );
    assert!(
        body.contains("&lt;b&gt;nope&lt;/b&gt;"),
        "a tool name is text"
    );
    assert!(!body.contains("<b>nope</b>"));
}

#[tokio::test]
async fn the_inbox_states_the_true_count_and_pages_through_every_call() {
    let (inbox, calm) = flooded().await;
    // The page lists the newest first by default; oldest first, the calls
    // come in the order they were asked.
    let first = inbox.get("/?order=oldest", Auth::Bearer(ANA)).await;
    assert_eq!(first.status, 200);
    assert!(
        first
            .body
            .contains("<b class=\"total\">3001</b> call(s) wait for a person, oldest first; this page shows 100, by conversation."),
        "{}",
        &first.body[..2000.min(first.body.len())]
    );
    assert!(first.body.contains("<title>Inbox (3001)"));
    // Every call, once, a page at a time, by the "Next page" links; the
    // other conversation's call is on the last page.
    let mut seen = card_ids(&first.body);
    assert_eq!(seen.len(), 100);
    let mut next = next_link(&first.body);
    let mut pages = 1;
    let mut calm_on = None;
    while let Some(link) = next {
        assert!(link.starts_with("/?order=oldest&cursor="), "{link}");
        let page = inbox.get(&link, Auth::Bearer(ANA)).await;
        assert_eq!(page.status, 200, "{link}");
        assert!(page.body.contains("<b class=\"total\">3001</b>"));
        pages += 1;
        let ids = card_ids(&page.body);
        if ids.contains(&calm) {
            calm_on = Some(pages);
        }
        seen.extend(ids);
        next = next_link(&page.body);
    }
    assert_eq!(pages, 31);
    assert_eq!(calm_on, Some(31));
    let mut want: Vec<String> = (0..3000).map(|i| format!("loop-{i:04}")).collect();
    want.push(calm.clone());
    assert_eq!(seen, want, "every call exactly once, oldest first");

    // The JSON: a page, the true count, and the link to the next page.
    let api = |path: String| {
        let inbox = &inbox;
        async move {
            let reply = inbox.get(&path, Auth::Bearer(ANA)).await;
            assert_eq!(reply.status, 200, "{path}: {}", reply.body);
            serde_json::from_str::<Value>(&reply.body).unwrap()
        }
    };
    let mut page = api("/api/pending".into()).await;
    assert_eq!(page["total"], 3001);
    assert_eq!(page["items"].as_array().unwrap().len(), 100);
    assert_eq!(page["items"][0]["id"], "loop-0000");
    let mut listed = 0;
    let mut found_calm = false;
    loop {
        listed += page["items"].as_array().unwrap().len();
        found_calm |= page["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["id"] == calm.as_str());
        match page["next"].as_str() {
            Some(next) => {
                assert!(next.starts_with("/api/pending?cursor="), "{next}");
                page = api(next.to_owned()).await;
            }
            None => break,
        }
    }
    assert_eq!(listed, 3001);
    assert!(found_calm);
    // Newest first, a page of one: the other conversation's call.
    let newest = api("/api/pending?order=newest&limit=1".into()).await;
    assert_eq!(newest["total"], 3001);
    assert_eq!(newest["items"][0]["id"], calm.as_str());
    assert_eq!(newest["items"][0]["session"], "calm");
    let next = newest["next"].as_str().unwrap();
    assert!(
        next.starts_with("/api/pending?order=newest&limit=1&cursor="),
        "{next}"
    );
    let after = api(next.to_owned()).await;
    assert_eq!(after["items"][0]["id"], "loop-2999");
}

#[tokio::test]
async fn filters_find_one_conversations_call_among_thousands() {
    let (inbox, calm) = flooded().await;
    let page = inbox.get("/?session=calm", Auth::Bearer(ANA)).await;
    assert_eq!(page.status, 200);
    assert_eq!(card_ids(&page.body), std::slice::from_ref(&calm));
    assert!(page.body.contains(
        "<b class=\"total\">1</b> call(s) wait for a person (that match these filters), newest first"
    ));
    assert!(next_link(&page.body).is_none());
    // The form keeps the filter; the toggle flips the order and keeps it.
    assert!(page.body.contains("name=\"session\" value=\"calm\""));
    assert!(
        page.body.contains(
            "<a class=\"order\" href=\"/?session=calm&amp;order=oldest\">Oldest first</a>"
        ),
        "{}",
        page.body
    );
    let looping: Value = serde_json::from_str(
        &inbox
            .get(
                "/api/pending?session=looping&tool=pay&limit=10",
                Auth::Bearer(ANA),
            )
            .await
            .body,
    )
    .unwrap();
    assert_eq!(looping["total"], 3000);
    assert_eq!(looping["items"].as_array().unwrap().len(), 10);
    assert!(
        looping["next"]
            .as_str()
            .unwrap()
            .starts_with("/api/pending?session=looping&tool=pay&limit=10&cursor=")
    );
    let none: Value = serde_json::from_str(
        &inbox
            .get("/api/pending?tool=refund", Auth::Bearer(ANA))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(none, json!({"items": [], "total": 0, "next": null}));
    // A filter the inbox applies itself reads past the store's pages of
    // MAX_PAGE: the count is true, and the pages follow one another.
    let approvals: Value = serde_json::from_str(
        &inbox
            .get("/api/pending?kind=approval&limit=400", Auth::Bearer(ANA))
            .await
            .body,
    )
    .unwrap();
    assert_eq!(approvals["total"], 3001);
    assert_eq!(approvals["items"][399]["id"], "loop-0399");
    let next = approvals["next"].as_str().unwrap().to_owned();
    let after: Value =
        serde_json::from_str(&inbox.get(&next, Auth::Bearer(ANA)).await.body).unwrap();
    assert_eq!(after["items"][0]["id"], "loop-0400");
    let newest = inbox
        .get("/?caller=default&order=newest&limit=1", Auth::Bearer(ANA))
        .await;
    assert_eq!(card_ids(&newest.body), std::slice::from_ref(&calm));
    assert!(newest.body.contains("<b class=\"total\">3001</b>"));
    let empty = inbox.get("/?tool=refund", Auth::Bearer(ANA)).await;
    assert!(
        empty
            .body
            .contains("Nothing that matches these filters waits for a decision.")
    );
}

#[tokio::test]
async fn a_listing_that_makes_no_sense_is_a_400_that_says_why() {
    let inbox = inbox().await;
    inbox.ask("acme", 5, "s").await;
    for (query, says) in [
        ("order=sideways", "unknown order"),
        ("cursor=nonsense", "malformed cursor"),
        ("cursor=12.zz", "malformed cursor"),
        ("cursor=99999999999999999999999.6869", "malformed cursor"),
        ("limit=0", "page size"),
        ("limit=501", "page size"),
        ("limit=-3", "page size"),
        ("limit=many", "page size"),
    ] {
        let api = inbox
            .get(&format!("/api/pending?{query}"), Auth::Bearer(ANA))
            .await;
        assert_eq!(api.status, 400, "{query}");
        let error: Value = serde_json::from_str(&api.body).unwrap();
        assert!(
            error["error"].as_str().unwrap().contains(says),
            "{query}: {error}"
        );
        let page = inbox.get(&format!("/?{query}"), Auth::Bearer(ANA)).await;
        assert_eq!(page.status, 400, "{query}");
        assert!(page.body.contains(says), "{query}: {}", page.body);
        // Without a token, nothing but the 401.
        let anonymous = inbox
            .get(&format!("/api/pending?{query}"), Auth::None)
            .await;
        assert_eq!(anonymous.status, 401);
    }
    // The bound itself is a page size.
    let most = inbox.get("/api/pending?limit=500", Auth::Bearer(ANA)).await;
    assert_eq!(most.status, 200);
}

#[tokio::test]
async fn deciding_returns_to_the_same_filtered_list() {
    use toolcall_core::life::{QuestionState, Verdict};
    let inbox = inbox().await;
    let start = now_ms() - 60_000;
    inbox
        .put_asked(&[
            ("a-1", "s-a", start),
            ("b-1", "s-b", start + 1),
            ("a-2", "s-a", start + 2),
            ("a-3", "s-a", start + 3),
        ])
        .await;
    let listing = "session=s-a&caller=default&kind=approval&order=oldest";
    let page = inbox.get(&format!("/?{listing}"), Auth::Bearer(ANA)).await;
    assert_eq!(page.status, 200);
    assert_eq!(card_ids(&page.body), ["a-1", "a-2", "a-3"]);
    // Each decision's form carries the listing it was shown in.
    let first = card(&page.body, "a-1");
    for hidden in [
        "<input type=\"hidden\" name=\"session\" value=\"s-a\">",
        "<input type=\"hidden\" name=\"caller\" value=\"default\">",
        "<input type=\"hidden\" name=\"kind\" value=\"approval\">",
        "<input type=\"hidden\" name=\"order\" value=\"oldest\">",
    ] {
        assert!(first.contains(hidden), "{hidden}: {first}");
    }
    let form = [
        ("action", "approve"),
        ("session", "s-a"),
        ("caller", "default"),
        ("kind", "approval"),
        ("order", "oldest"),
    ];
    let reply = inbox.decide("a-1", Auth::Bearer(ANA), &form).await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    let back = reply.header("location").unwrap().to_owned();
    assert_eq!(back, format!("/?{listing}&notice=approved&id=a-1"));
    assert_eq!(
        state_of(&inbox, "a-1").await,
        QuestionState::Decided(Verdict::Approve)
    );
    // Back on the same list: the same conversation, the same order.
    let page = inbox.get(&back, Auth::Bearer(ANA)).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Approved: the agent runs it"));
    assert_eq!(card_ids(&page.body), ["a-2", "a-3"]);
    assert!(page.body.contains("name=\"session\" value=\"s-a\""));

    // Through the edit page too: its link, its form and its cancel keep it.
    let open = "<a class=\"edit\" href=\"";
    let edit_card = card(&page.body, "a-2");
    let at = edit_card.find(open).unwrap() + open.len();
    let edit_link = edit_card[at..at + edit_card[at..].find('"').unwrap()].replace("&amp;", "&");
    assert_eq!(edit_link, format!("/approvals/a-2/edit?{listing}"));
    let edit = inbox.get(&edit_link, Auth::Bearer(ANA)).await;
    assert_eq!(edit.status, 200);
    assert!(
        edit.body
            .contains("<input type=\"hidden\" name=\"session\" value=\"s-a\">")
    );
    assert!(edit.body.contains(&format!(
        "<a href=\"/?{}\">Cancel</a>",
        listing.replace('&', "&amp;")
    )));
    let mut form = form.to_vec();
    form[0] = ("action", "edit");
    // An edit that is not valid shows its form again, still carrying it.
    let mut invalid = form.clone();
    invalid.extend([("arg:to", "acme"), ("arg:amount_cents", "0")]);
    let reply = inbox.decide("a-2", Auth::Bearer(ANA), &invalid).await;
    assert_eq!(reply.status, 422, "{}", reply.body);
    assert!(
        reply
            .body
            .contains("<input type=\"hidden\" name=\"kind\" value=\"approval\">")
    );
    assert_eq!(state_of(&inbox, "a-2").await, QuestionState::Open);
    form.extend([("arg:to", "acme"), ("arg:amount_cents", "4")]);
    let reply = inbox.decide("a-2", Auth::Bearer(ANA), &form).await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(
        reply.header("location").unwrap(),
        format!("/?{listing}&notice=edited&id=a-2")
    );

    // A filter's value is percent-encoded on the way back, whatever it is.
    let odd = "x&notice=denied#//evil.example/?";
    inbox.put_asked(&[("odd-1", odd, start + 4)]).await;
    let reply = inbox
        .decide(
            "odd-1",
            Auth::Bearer(ANA),
            &[("action", "deny"), ("session", odd)],
        )
        .await;
    assert_eq!(reply.status, 303, "{}", reply.body);
    assert_eq!(
        reply.header("location").unwrap(),
        "/?session=x%26notice%3Ddenied%23%2F%2Fevil%2Eexample%2F%3F&notice=denied&id=odd-1"
    );
}

#[tokio::test]
async fn the_list_is_newest_first_and_grouped_by_conversation() {
    let inbox = inbox().await;
    let start = now_ms() - 60_000;
    inbox
        .put_asked(&[
            ("one-old", "s-one", start),
            ("two", "s-two", start + 1),
            ("one-new", "s-one", start + 2),
        ])
        .await;
    let page = inbox.get("/", Auth::Bearer(ANA)).await;
    assert_eq!(page.status, 200);
    // The conversation asked last leads, its calls together, newest first.
    assert_eq!(card_ids(&page.body), ["one-new", "one-old", "two"]);
    assert!(
        page.body.contains(
            "call(s) wait for a person, newest first; this page shows 3, by conversation."
        )
    );
    let one = page
        .body
        .find("<section class=\"conversation\" data-session=\"s-one\">")
        .expect("s-one's group");
    let two = page
        .body
        .find("<section class=\"conversation\" data-session=\"s-two\">")
        .expect("s-two's group");
    assert!(one < two);
    assert_eq!(
        page.body.matches("<section class=\"conversation\"").count(),
        2
    );
    assert!(
        page.body
            .contains("<a class=\"only\" href=\"/?session=s-one\">Only this conversation</a>")
    );
    // The script compares the JSON of the same listing, in the store's order.
    assert!(
        page.body
            .contains("data-pending-ids=\"one-new two one-old\"")
    );
    assert!(page.body.contains("data-api=\"/api/pending?order=newest\""));

    // The JSON keeps its order: oldest first unless asked otherwise.
    let json = |path: &'static str| {
        let inbox = &inbox;
        async move {
            let reply = inbox.get(path, Auth::Bearer(ANA)).await;
            assert_eq!(reply.status, 200, "{path}: {}", reply.body);
            serde_json::from_str::<Value>(&reply.body).unwrap()
        }
    };
    let oldest = json("/api/pending").await;
    assert_eq!(item_ids(&oldest), ["one-old", "two", "one-new"]);
    let newest = json("/api/pending?order=newest").await;
    assert_eq!(item_ids(&newest), ["one-new", "two", "one-old"]);
    // Oldest first on the page, asked for: the conversations by their first.
    let page = inbox.get("/?order=oldest", Auth::Bearer(ANA)).await;
    assert_eq!(card_ids(&page.body), ["one-old", "one-new", "two"]);
}

#[tokio::test]
async fn the_list_filters_by_caller_and_by_kind() {
    let inbox = inbox().await;
    let start = now_ms() - 60_000;
    for (id, caller, reason, at) in [
        ("k1", "default", None, start),
        ("k2", "support", None, start + 1),
        ("k3", "support", Some("in_doubt"), start + 2),
        ("k4", "default", Some("in_doubt"), start + 3),
    ] {
        inbox
            .store
            .put_approval(&asked_by(id, "s", caller, reason, at))
            .await
            .unwrap();
    }
    for (query, want) in [
        ("caller=support", &["k3", "k2"][..]),
        ("kind=in_doubt", &["k4", "k3"][..]),
        ("kind=approval", &["k2", "k1"][..]),
        ("caller=support&kind=approval", &["k2"][..]),
        ("caller=nobody", &[][..]),
    ] {
        let page = inbox.get(&format!("/?{query}"), Auth::Bearer(ANA)).await;
        assert_eq!(page.status, 200, "{query}");
        assert_eq!(card_ids(&page.body), want, "{query}");
        if !want.is_empty() {
            assert!(
                page.body.contains(&format!(
                    "<b class=\"total\">{}</b> call(s) wait for a person (that match these filters)",
                    want.len()
                )),
                "{query}"
            );
        }
    }
    let page = inbox
        .get("/?caller=support&kind=in_doubt", Auth::Bearer(ANA))
        .await;
    assert!(page.body.contains("name=\"caller\" value=\"support\""));
    assert!(page.body.contains("<option value=\"in_doubt\" selected>"));

    // The JSON: the same filters, a true count, pages that follow.
    let json = |path: String| {
        let inbox = &inbox;
        async move {
            let reply = inbox.get(&path, Auth::Bearer(ANA)).await;
            assert_eq!(reply.status, 200, "{path}: {}", reply.body);
            serde_json::from_str::<Value>(&reply.body).unwrap()
        }
    };
    let support = json("/api/pending?caller=support".into()).await;
    assert_eq!(item_ids(&support), ["k2", "k3"]);
    assert_eq!(support["total"], 2);
    let first = json("/api/pending?kind=in_doubt&limit=1".into()).await;
    assert_eq!(item_ids(&first), ["k3"]);
    assert_eq!(first["total"], 2);
    let next = first["next"].as_str().unwrap();
    assert!(
        next.starts_with("/api/pending?kind=in_doubt&limit=1&cursor="),
        "{next}"
    );
    let second = json(next.to_owned()).await;
    assert_eq!(item_ids(&second), ["k4"]);
    assert_eq!(second["total"], 2);
    assert_eq!(second["next"], Value::Null);
    let approvals = json("/api/pending?kind=approval&caller=default".into()).await;
    assert_eq!(item_ids(&approvals), ["k1"]);
    assert_eq!(
        approvals["items"][0]["answers"],
        json!(["approve", "deny", "edit"])
    );
}

#[tokio::test]
async fn a_bad_filter_is_refused_clearly_and_decides_nothing() {
    use toolcall_core::life::QuestionState;
    let inbox = inbox().await;
    let id = inbox.ask("acme", 5, "s").await;
    let long = "x".repeat(1025);
    for (query, says) in [
        (
            "kind=maybe".to_owned(),
            "unknown kind &quot;maybe&quot;: `approval` (whether a call may run) or `in_doubt`",
        ),
        ("kind=APPROVAL".to_owned(), "unknown kind"),
        (
            format!("caller={long}"),
            "caller filter (caller) is at most 1024 characters",
        ),
        (
            format!("session={long}"),
            "conversation filter (session) is at most 1024",
        ),
        (format!("tool={long}"), "tool filter (tool) is at most 1024"),
    ] {
        let page = inbox.get(&format!("/?{query}"), Auth::Bearer(ANA)).await;
        assert_eq!(page.status, 400, "{query}");
        assert!(page.body.contains(says), "{query}: {}", page.body);
        let api = inbox
            .get(&format!("/api/pending?{query}"), Auth::Bearer(ANA))
            .await;
        assert_eq!(api.status, 400, "{query}");
        let error: Value = serde_json::from_str(&api.body).unwrap();
        assert_eq!(error["code"], "invalid_listing");
        let said = says.replace("&quot;", "\"");
        assert!(error["error"].as_str().unwrap().contains(&said), "{error}");
        let edit = inbox
            .get(&format!("/approvals/{id}/edit?{query}"), Auth::Bearer(ANA))
            .await;
        assert_eq!(edit.status, 400, "{query}");
    }
    // A decision whose way back makes no sense is not taken.
    for (name, value) in [("kind", "maybe"), ("order", "sideways"), ("limit", "0")] {
        let reply = inbox
            .decide(
                &id,
                Auth::Bearer(ANA),
                &[("action", "approve"), (name, value)],
            )
            .await;
        assert_eq!(reply.status, 400, "{name}={value}");
        assert!(reply.body.contains("Not a listing"), "{}", reply.body);
        assert_eq!(state_of(&inbox, &id).await, QuestionState::Open);
    }
}
