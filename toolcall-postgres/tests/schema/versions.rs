//! A schema at each version gains what the next one adds, keeps its rows,
//! and an older replica still works beside it.

use super::*;

#[test]
fn a_schema_at_version_1_gains_decisions_and_keeps_its_approvals() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v1");
        // Back to version 1 as it was, with an approval a version-1 replica asked.
        let client = taken_back(
            &url,
            &schema,
            "ALTER TABLE toolcall_approvals DROP COLUMN decision, DROP COLUMN decided_ms,
                     DROP COLUMN used_ms, DROP COLUMN result, DROP COLUMN reason, DROP COLUMN tainted;
                 DROP INDEX IF EXISTS toolcall_approvals_created, toolcall_approvals_decided;
                 UPDATE toolcall_schema_version SET version = 1;",
        )
        .await;
        let now = now_ms() as i64;
        client
            .execute(
                "INSERT INTO toolcall_approvals VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 3, $1, $2)",
                &[&now, &(now + 600_000)],
            )
            .await
            .unwrap();

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        let pending = store.pending_approvals(now_ms(), 10).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].arguments, json!({"cents": 1}));
        assert_eq!(
            store.decide_approval("p1", &yes(now_ms()), now_ms()).await.unwrap(),
            DecideOutcome::Decided
        );
        assert_current(&client).await;
        // A replica still at version 1 inserts and takes as it did.
        client
            .execute(
                "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
                 VALUES ('p2', 's', 'c', 'pay', 'd1', '{}', 1, $1, $2)",
                &[&now, &(now + 600_000)],
            )
            .await
            .unwrap();
        assert_eq!(store.pending_approvals(now_ms(), 10).await.unwrap().len(), 1);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_3_without_why_an_approval_asks_gains_it() {
    // Version 3 once existed without the approval's `reason` and `tainted`:
    // a schema made then is at version 3 and lacks them; version 4 adds them.
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v3");
        let client = taken_back(
            &url,
            &schema,
            "ALTER TABLE toolcall_approvals DROP COLUMN reason, DROP COLUMN tainted;
                 UPDATE toolcall_schema_version SET version = 3;",
        )
        .await;
        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_current(&client).await;
        let why = PendingApproval {
            reason: Some("untrusted_context".into()),
            tainted: vec!["cents".into()],
            ..approval("p1", now_ms() + 600_000)
        };
        store.put_approval(&why).await.unwrap();
        assert_eq!(store.approval("p1").await.unwrap().unwrap().approval, why);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_2_gains_why_an_approval_asks_and_keeps_its_approvals() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v2");
        // Back to version 2 as it was, with an approval a version-2 replica asked.
        let client = taken_back(
            &url,
            &schema,
            "DROP TABLE toolcall_taint;
                 ALTER TABLE toolcall_approvals DROP COLUMN reason, DROP COLUMN tainted;
                 UPDATE toolcall_schema_version SET version = 2;",
        )
        .await;
        let now = now_ms() as i64;
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
             VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3)";
        client
            .execute(insert, &[&"p1", &now, &(now + 600_000)])
            .await
            .unwrap();

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_current(&client).await;
        // Asked before there was a reason: none, and no tainted arguments.
        let old = store.approval("p1").await.unwrap().unwrap().approval;
        assert_eq!((old.reason, old.tainted), (None, Vec::<String>::new()));
        let why = PendingApproval {
            reason: Some("untrusted_context".into()),
            tainted: vec!["cents".into()],
            ..approval("p2", now_ms() + 600_000)
        };
        store.put_approval(&why).await.unwrap();
        assert_eq!(store.approval("p2").await.unwrap().unwrap().approval, why);
        // A replica still at version 2 inserts as it did.
        client
            .execute(insert, &[&"p3", &now, &(now + 600_000)])
            .await
            .unwrap();
        assert_eq!(store.pending_approvals(now_ms(), 10).await.unwrap().len(), 3);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_4_finds_its_approvals_by_session_and_call() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v4");
        // Back to version 4 as it was, with an approval a version-4 replica asked.
        let client = taken_back(
            &url,
            &schema,
            "DROP INDEX toolcall_approvals_tool_created;
                 ALTER TABLE toolcall_approvals DROP COLUMN session_key, DROP COLUMN ask_key;
                 UPDATE toolcall_schema_version SET version = 4;",
        )
        .await;
        let now = now_ms() as i64;
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
             VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3)";
        client
            .execute(insert, &[&"p1", &now, &(now + 600_000)])
            .await
            .unwrap();

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_current(&client).await;
        // Asked before the upgrade: found by its call and its session.
        let binding = Binding {
            session: "s",
            caller: "c",
            tool: Some("pay"),
            digest: Some("d1"),
            requester: toolcall::store::Requester::Anyone,
        };
        let found = store
            .find_approval(&binding, None, now_ms())
            .await
            .unwrap()
            .map(|e| e.approval.id);
        assert_eq!(found.as_deref(), Some("p1"));
        let same = PendingApproval {
            created_ms: now_ms(),
            ..approval("p2", now_ms() + 600_000)
        };
        match store.ask_approval(&same, 20).await.unwrap() {
            AskApproval::Existing(entry) => assert_eq!(entry.approval.id, "p1"),
            other => panic!("expected p1, got {other:?}"),
        }
        let query = PendingQuery {
            session: Some("s"),
            ..PendingQuery::new(now_ms(), 10)
        };
        let page = store.pending_page(&query).await.unwrap();
        assert_eq!((page.total, page.items.len()), (1, 1));
        // A replica still at version 4 inserts as it did; its approval is
        // listed (not by a filter on its session).
        client
            .execute(insert, &[&"p3", &now, &(now + 600_000)])
            .await
            .unwrap();
        let all = store
            .pending_page(&PendingQuery::new(now_ms(), 10))
            .await
            .unwrap();
        assert_eq!(all.total, 2);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_5_gains_who_answers_and_the_questions_claims_keep() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v5");
        // Back to version 5 as it was, with an approval and a claim a
        // version-5 replica made.
        let client = taken_back(
            &url,
            &schema,
            "DROP INDEX toolcall_approvals_caller_open, toolcall_records_asking;
                 ALTER TABLE toolcall_approvals DROP COLUMN principal;
                 ALTER TABLE toolcall_approvals DROP COLUMN answerers;
                 ALTER TABLE toolcall_records DROP COLUMN question, DROP COLUMN asked_ms;
                 UPDATE toolcall_schema_version SET version = 5;",
        )
        .await;
        let now = now_ms() as i64;
        client
            .execute(
                "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key)
                 VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $1, $2, $3)",
                &[&now, &(now + 600_000), &session_key("s")],
            )
            .await
            .unwrap();
        // A claim whose lease has already run out.
        client
            .execute(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES ($1, 'in_flight', 0, NULL, $2)",
                &[&key("k-old").as_str(), &now],
            )
            .await
            .unwrap();

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_current(&client).await;
        // An approval of version 5 is a person's only.
        let old = store.approval("p1").await.unwrap().unwrap();
        assert_eq!(old.approval.answerers, Answerers::PERSON);
        // Its lapsed claim kept no question: none to list.
        assert!(store.unsettled(now_ms(), 10).await.unwrap().is_empty());
        // The new columns work.
        let asked = PendingApproval {
            id: "p2".into(),
            answerers: Answerers::new(true, false),
            principal: None,
            provenance: Vec::new(),
            digest: "d2".into(),
            ..old.approval.clone()
        };
        store.ask_approval(&asked, 5).await.unwrap();
        assert_eq!(
            store.approval("p2").await.unwrap().unwrap().approval.answerers,
            asked.answerers
        );
        let question = PendingApproval {
            reason: Some("in_doubt".into()),
            ..asked
        };
        store
            .claim_asking(&key("k-new"), now_ms(), 1, &question)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let unsettled = store.unsettled(now_ms(), 10).await.unwrap();
        assert_eq!(unsettled.len(), 1);
        assert_eq!(unsettled[0].key, key("k-new"));
        assert_eq!(unsettled[0].question, question);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_6_gains_the_principal_and_a_version_6_replica_still_asks() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v6");
        let client = taken_back(
            &url,
            &schema,
            "ALTER TABLE toolcall_approvals DROP COLUMN principal;
                 UPDATE toolcall_schema_version SET version = 6;",
        )
        .await;
        // A version-6 replica's insert, with the columns it knows.
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers)
                      VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3, $4, '')";
        let now = now_ms() as i64;
        client
            .execute(insert, &[&"p1", &now, &(now + 600_000), &session_key("s")])
            .await
            .unwrap();

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_current(&client).await;
        let old = store.approval("p1").await.unwrap().unwrap();
        assert_eq!(old.approval.principal, None, "asked by nobody named");
        let principal =
            toolcall::Principal::new("https://auth.example.com", "alice").client("desk");
        let asked = PendingApproval {
            id: "p2".into(),
            digest: "d2".into(),
            principal: Some(principal.clone()),
            provenance: Vec::new(),
            ..old.approval.clone()
        };
        store.ask_approval(&asked, 5).await.unwrap();
        let back = store.approval("p2").await.unwrap().unwrap();
        assert_eq!(back.approval.principal, Some(principal));
        // The version-6 replica asks on as it did.
        client
            .execute(insert, &[&"p3", &now, &(now + 600_000), &session_key("s")])
            .await
            .unwrap();
        assert_eq!(store.pending_approvals(now_ms(), 10).await.unwrap().len(), 3);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_7_gains_the_operators_controls_and_a_version_7_replica_still_asks() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v7");
        let client = taken_back(
            &url,
            &schema,
            "DROP TABLE toolcall_controls, toolcall_controls_history, toolcall_rates,
                     toolcall_signatures;
                 UPDATE toolcall_schema_version SET version = 7;",
        )
        .await;
        // A version-7 replica's insert, with the columns it knows.
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal)
                      VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3, $4, '', NULL)";
        let now = now_ms() as i64;
        client
            .execute(insert, &[&"p1", &now, &(now + 600_000), &session_key("s")])
            .await
            .unwrap();

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_current(&client).await;
        assert_eq!(store.controls(0).await.unwrap(), None);
        let change = toolcall::store::ControlsChange {
            version: 0,
            by: "ops".into(),
            at_ms: now_ms(),
            summary: "first".into(),
        };
        assert!(store.put_controls(0, "{}", &change).await.unwrap());
        assert_eq!(store.controls(0).await.unwrap().unwrap().version, 1);
        let start = now_ms() / 60_000 * 60_000;
        assert!(store.take_rate("b", start, 60_000, 1).await.unwrap());
        assert_eq!(store.rate_count("b", start).await.unwrap(), 1);
        let signed = store
            .sign_approval("p1", "ana", 2, &yes(now_ms()), now_ms())
            .await;
        assert_eq!(
            signed.unwrap(),
            toolcall::store::SignOutcome::Signed { signatures: 1 }
        );
        // The version-7 replica asks on as it did.
        client
            .execute(insert, &[&"p2", &now, &(now + 600_000), &session_key("s")])
            .await
            .unwrap();
        assert_eq!(store.pending_approvals(now_ms(), 10).await.unwrap().len(), 2);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_8_binds_its_questions_to_who_asked_and_keeps_doubts_open() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v8");
        let client = taken_back(
            &url,
            &schema,
            "ALTER TABLE toolcall_approvals DROP COLUMN requester;
                 UPDATE toolcall_schema_version SET version = 8;",
        )
        .await;
        // A version-8 replica's questions: alice's approval, and a question
        // about an unknown outcome that expires as approvals did.
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal, reason)
                      VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3, $4, '', $5, $6)";
        let now = now_ms() as i64;
        let alice = r#"{"issuer":"https://auth.example.com","subject":"alice"}"#;
        for (id, reason) in [("asked", None), ("doubt", Some("in_doubt"))] {
            client
                .execute(
                    insert,
                    &[&id, &now, &(now + 600_000), &session_key("s"), &alice, &reason],
                )
                .await
                .unwrap();
        }

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        let doubt = store.approval("doubt").await.unwrap().unwrap();
        assert_eq!(doubt.approval.expires_ms, toolcall_core::life::NEVER_MS);
        assert_eq!(
            doubt.state(now_ms() + 3_600_000),
            toolcall_core::life::QuestionState::Open
        );
        for (subject, found) in [("alice", Some("asked")), ("bob", None)] {
            let requester =
                toolcall::Principal::new("https://auth.example.com", subject).requester();
            let binding = toolcall::store::Binding {
                session: "s",
                caller: "c",
                tool: Some("pay"),
                digest: Some("d1"),
                requester: toolcall::store::Requester::Only(Some(&requester)),
            };
            let entry = store.find_approval(&binding, None, now_ms()).await.unwrap();
            assert_eq!(entry.map(|e| e.approval.id).as_deref(), found, "{subject}");
        }
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_at_version_9_gains_where_taint_came_from_and_a_version_9_replica_still_taints() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("v9");
        let client = taken_back(
            &url,
            &schema,
            "ALTER TABLE toolcall_approvals DROP COLUMN provenance;
                 ALTER TABLE toolcall_taint DROP COLUMN sources;
                 UPDATE toolcall_schema_version SET version = 9;",
        )
        .await;
        // A version-9 replica's taint and question, with the columns it knows.
        let now = now_ms() as i64;
        let taint = "INSERT INTO toolcall_taint (session, print, touched_ms) VALUES ($1, '', $2)";
        client
            .execute(taint, &[&session_key("old"), &now])
            .await
            .unwrap();
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, reason)
                      VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3, $4, '', 'untrusted_context')";
        client
            .execute(insert, &[&"p1", &now, &(now + 600_000), &session_key("s")])
            .await
            .unwrap();

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_current(&client).await;
        let source = TaintSource::from_output("read", Some("c1"), 1, &json!({"note": "hi"}), &[]);
        assert!(store.tainted("old", &[]).await.unwrap().any);
        assert!(store.taint_sources("old").await.unwrap().is_empty());
        store.add_taint("old", &[], &source).await.unwrap();
        assert_eq!(
            store.taint_sources("old").await.unwrap(),
            std::slice::from_ref(&source)
        );
        let old = store.approval("p1").await.unwrap().unwrap();
        assert!(old.approval.provenance.is_empty());
        let asked = PendingApproval {
            id: "p2".into(),
            digest: "d2".into(),
            provenance: vec![source.clone()],
            ..old.approval.clone()
        };
        store.ask_approval(&asked, 5).await.unwrap();
        let back = store.approval("p2").await.unwrap().unwrap();
        assert_eq!(back.approval.provenance, [source]);
        // The version-9 replica taints and asks on as it did.
        client
            .execute(taint, &[&session_key("other"), &now])
            .await
            .unwrap();
        client
            .execute(insert, &[&"p3", &now, &(now + 600_000), &session_key("s")])
            .await
            .unwrap();
        assert!(store.tainted("other", &[]).await.unwrap().any);
        assert!(store.taint_sources("other").await.unwrap().is_empty());
        assert_eq!(store.pending_approvals(now_ms(), 10).await.unwrap().len(), 3);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}
