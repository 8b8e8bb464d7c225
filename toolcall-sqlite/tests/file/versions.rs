//! A file at each schema version gains what the next one adds, keeps its
//! rows, and an older process still works beside it.

use super::*;

#[test]
fn a_file_at_version_1_gains_decisions_and_keeps_its_approvals() {
    // Back to version 1 as it was, with an approval a version-1 process asked.
    let (path, conn) = taken_back(
        "v1",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN provenance;
         ALTER TABLE toolcall_approvals DROP COLUMN requester;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         DROP INDEX toolcall_approvals_created;
         DROP INDEX toolcall_approvals_decided;
         DROP INDEX toolcall_approvals_session_digest;
         DROP INDEX toolcall_approvals_session_created;
         DROP INDEX toolcall_approvals_tool_created;
         ALTER TABLE toolcall_approvals DROP COLUMN session_key;
         ALTER TABLE toolcall_approvals DROP COLUMN decision;
         ALTER TABLE toolcall_approvals DROP COLUMN decided_ms;
         ALTER TABLE toolcall_approvals DROP COLUMN used_ms;
         ALTER TABLE toolcall_approvals DROP COLUMN result;
         ALTER TABLE toolcall_approvals DROP COLUMN reason;
         ALTER TABLE toolcall_approvals DROP COLUMN tainted;
         PRAGMA user_version = 1;",
    );
    let now = now_ms() as i64;
    conn.execute(
        "INSERT INTO toolcall_approvals VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 3, ?1, ?2)",
        rusqlite::params![now, now + 600_000],
    )
    .unwrap();

    let store = upgraded(&path);
    block_on(async {
        let pending = store.pending_approvals(now_ms(), 10).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].arguments, json!({"cents": 1}));
        assert_eq!(
            store
                .decide_approval("p1", &yes(now_ms()), now_ms())
                .await
                .unwrap(),
            DecideOutcome::Decided
        );
    });
    // A process still at version 1 inserts as it did.
    conn.execute(
        "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
         VALUES ('p2', 's', 'c', 'pay', 'd1', '{}', 1, ?1, ?2)",
        rusqlite::params![now, now + 600_000],
    )
    .unwrap();
    assert_eq!(waiting(&store), 1);
}

#[test]
fn a_file_at_version_2_gains_why_an_approval_asks_and_keeps_its_approvals() {
    // Back to version 2 as it was, with an approval a version-2 process asked.
    let (path, conn) = taken_back(
        "v2",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         DROP INDEX toolcall_taint_touched;
         DROP TABLE toolcall_taint;
         ALTER TABLE toolcall_approvals DROP COLUMN reason;
         ALTER TABLE toolcall_approvals DROP COLUMN tainted;
         PRAGMA user_version = 2;",
    );
    let now = now_ms() as i64;
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
         VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3)";
    conn.execute(insert, rusqlite::params!["p1", now, now + 600_000])
        .unwrap();

    let store = upgraded(&path);
    block_on(async {
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
    });
    // A process still at version 2 inserts as it did.
    conn.execute(insert, rusqlite::params!["p3", now, now + 600_000])
        .unwrap();
    assert_eq!(waiting(&store), 3);
}

#[test]
fn a_file_at_version_3_without_why_an_approval_asks_gains_it() {
    // Version 3 once existed without the approval's `reason` and `tainted`:
    // a file made then is at version 3 and lacks them; version 4 adds them.
    let (path, _conn) = taken_back(
        "v3",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         ALTER TABLE toolcall_approvals DROP COLUMN reason;
         ALTER TABLE toolcall_approvals DROP COLUMN tainted;
         PRAGMA user_version = 3;",
    );
    let store = upgraded(&path);
    block_on(async {
        let why = PendingApproval {
            reason: Some("untrusted_context".into()),
            tainted: vec!["cents".into()],
            ..approval("p1", now_ms() + 600_000)
        };
        store.put_approval(&why).await.unwrap();
        assert_eq!(store.approval("p1").await.unwrap().unwrap().approval, why);
    });
    // Opening it again changes nothing.
    drop(store);
    let store = upgraded(&path);
    assert_eq!(waiting(&store), 1);
}

#[test]
fn a_file_at_version_4_finds_its_approvals_by_session_and_call() {
    // Back to version 4 as it was, with an approval a version-4 process asked.
    let (path, conn) = taken_back(
        "v4",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         DROP INDEX toolcall_approvals_session_digest;
         DROP INDEX toolcall_approvals_session_created;
         DROP INDEX toolcall_approvals_tool_created;
         ALTER TABLE toolcall_approvals DROP COLUMN session_key;
         PRAGMA user_version = 4;",
    );
    let now = now_ms() as i64;
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
         VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3)";
    conn.execute(insert, rusqlite::params!["p1", now, now + 600_000])
        .unwrap();

    let store = upgraded(&path);
    block_on(async {
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
    });
    // A process still at version 4 inserts as it did; its approval is
    // listed (not by a filter on its session).
    conn.execute(insert, rusqlite::params!["p3", now, now + 600_000])
        .unwrap();
    let all = block_on(store.pending_page(&PendingQuery::new(now_ms(), 10))).unwrap();
    assert_eq!(all.total, 2);
}

#[test]
fn a_file_at_version_5_gains_who_answers_and_the_questions_claims_keep() {
    // Back to version 5 as it was, with an approval and a claim a version-5
    // process made.
    let (path, conn) = taken_back(
        "v5",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         PRAGMA user_version = 5;",
    );
    let now = now_ms() as i64;
    conn.execute(
        "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key)
         VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?1, ?2, ?3)",
        rusqlite::params![now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
         VALUES (?1, 'in_flight', 0, NULL, ?2)",
        rusqlite::params![key("k-old").as_str(), now],
    )
    .unwrap();
    drop(conn);

    let store = upgraded(&path);
    block_on(async {
        // An approval of version 5 is a person's only.
        let old = store.approval("p1").await.unwrap().unwrap();
        assert_eq!(
            old.approval.answerers,
            toolcall_core::life::Answerers::PERSON
        );
        // Its lapsed claim kept no question: none to list.
        assert!(store.unsettled(now_ms(), 10).await.unwrap().is_empty());
        // The new columns work.
        let asked = PendingApproval {
            id: "p2".into(),
            answerers: toolcall_core::life::Answerers::new(true, false),
            principal: None,
            provenance: Vec::new(),
            digest: "d2".into(),
            ..old.approval.clone()
        };
        store.ask_approval(&asked, 5).await.unwrap();
        assert_eq!(
            store
                .approval("p2")
                .await
                .unwrap()
                .unwrap()
                .approval
                .answerers,
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
    });
}

#[test]
fn a_file_at_version_6_gains_the_principal_and_a_version_6_process_still_asks() {
    let (path, conn) = taken_back(
        "v6",
        "ALTER TABLE toolcall_approvals DROP COLUMN principal;
         PRAGMA user_version = 6;",
    );
    // A version-6 process's insert, with the columns it knows.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '')";
    let now = now_ms() as i64;
    conn.execute(
        insert,
        rusqlite::params!["p1", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();

    let store = upgraded(&path);
    block_on(async {
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
    });
    // The version-6 process asks on as it did.
    conn.execute(
        insert,
        rusqlite::params!["p3", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    let pending = block_on(store.pending_approvals(now_ms(), 10)).unwrap();
    assert_eq!(pending.len(), 3);
}

#[test]
fn a_file_at_version_7_gains_the_operators_controls_and_a_version_7_process_still_asks() {
    let (path, conn) = taken_back(
        "v7",
        "DROP TABLE toolcall_controls;
         DROP TABLE toolcall_controls_history;
         DROP TABLE toolcall_rates;
         DROP TABLE toolcall_signatures;
         PRAGMA user_version = 7;",
    );
    // A version-7 process's insert, with the columns it knows.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', NULL)";
    let now = now_ms() as i64;
    conn.execute(
        insert,
        rusqlite::params!["p1", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();

    let store = upgraded(&path);
    block_on(async {
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
        let yes = ApprovalDecision {
            approved: true,
            by: String::new(),
            note: String::new(),
            edited_arguments: None,
            decided_ms: now_ms(),
            lasts_until_ms: None,
        };
        let signed = store.sign_approval("p1", "ana", 2, &yes, now_ms()).await;
        assert_eq!(
            signed.unwrap(),
            toolcall::store::SignOutcome::Signed { signatures: 1 }
        );
    });
    // The version-7 process asks on as it did.
    conn.execute(
        insert,
        rusqlite::params!["p2", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    let pending = block_on(store.pending_approvals(now_ms(), 10)).unwrap();
    assert_eq!(pending.len(), 2);
}

#[test]
fn a_file_at_version_8_binds_its_questions_to_who_asked_and_keeps_doubts_open() {
    let (path, conn) = taken_back(
        "v8",
        "ALTER TABLE toolcall_approvals DROP COLUMN requester;
         PRAGMA user_version = 8;",
    );
    // A version-8 process's questions: alice's approval, and a question
    // about an unknown outcome that expires as approvals did.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal, reason)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', ?5, ?6)";
    let now = now_ms() as i64;
    let alice = r#"{"issuer":"https://auth.example.com","subject":"alice"}"#;
    conn.execute(
        insert,
        rusqlite::params![
            "asked",
            now,
            now + 600_000,
            toolcall::store::session_key("s"),
            alice,
            None::<String>
        ],
    )
    .unwrap();
    conn.execute(
        insert,
        rusqlite::params![
            "doubt",
            now,
            now + 600_000,
            toolcall::store::session_key("s"),
            alice,
            "in_doubt"
        ],
    )
    .unwrap();

    let store = upgraded(&path);
    let doubt = block_on(store.approval("doubt")).unwrap().unwrap();
    assert_eq!(doubt.approval.expires_ms, toolcall_core::life::NEVER_MS);
    let later = now_ms() + 3_600_000;
    assert_eq!(doubt.state(later), toolcall_core::life::QuestionState::Open);
    let find = |subject: &str| {
        let requester = toolcall::Principal::new("https://auth.example.com", subject).requester();
        let binding = Binding {
            session: "s",
            caller: "c",
            tool: Some("pay"),
            digest: Some("d1"),
            requester: toolcall::store::Requester::Only(Some(&requester)),
        };
        block_on(store.find_approval(&binding, None, now_ms()))
            .unwrap()
            .map(|entry| entry.approval.id)
    };
    assert_eq!(find("alice").as_deref(), Some("asked"));
    assert_eq!(
        find("bob"),
        None,
        "bob's identical call is not alice's question"
    );
}

#[test]
fn a_file_at_version_9_gains_where_taint_came_from_and_a_version_9_process_still_taints() {
    let (path, conn) = taken_back(
        "v9",
        "ALTER TABLE toolcall_approvals DROP COLUMN provenance;
         ALTER TABLE toolcall_taint DROP COLUMN sources;
         PRAGMA user_version = 9;",
    );
    // A version-9 process's writes, with the columns it knows.
    let now = now_ms() as i64;
    let taint = "INSERT INTO toolcall_taint (session, print, touched_ms) VALUES (?1, '', ?2)";
    let old_session = toolcall::store::session_key("old");
    conn.execute(taint, rusqlite::params![old_session, now])
        .unwrap();
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, reason)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', 'untrusted_context')";
    conn.execute(
        insert,
        rusqlite::params!["p1", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();

    let store = upgraded(&path);
    let source = TaintSource::from_output("read", Some("c1"), 1, &json!({"note": "hi"}), &[]);
    block_on(async {
        assert!(store.tainted("old", &[]).await.unwrap().any);
        assert!(
            store.taint_sources("old").await.unwrap().is_empty(),
            "none kept"
        );
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
        assert_eq!(back.approval.provenance, std::slice::from_ref(&source));
    });
    // The version-9 process taints and asks on as it did.
    let other = toolcall::store::session_key("other");
    conn.execute(taint, rusqlite::params![other, now]).unwrap();
    conn.execute(
        insert,
        rusqlite::params!["p3", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    block_on(async {
        assert!(store.tainted("other", &[]).await.unwrap().any);
        assert!(store.taint_sources("other").await.unwrap().is_empty());
    });
    let pending = block_on(store.pending_approvals(now_ms(), 10)).unwrap();
    assert_eq!(pending.len(), 3);
}

#[test]
fn where_taint_came_from_survives_a_reopen() {
    let path = fresh_dir("sources-reopen").join("store.db");
    let long = "x".repeat(1_000_000);
    let sources: Vec<TaintSource> = (0..6)
        .map(|n| {
            TaintSource::from_output(
                "read_note",
                Some(&format!("call-{n}")),
                n,
                &json!({"note": format!("{n}{long}")}),
                &["/note"],
            )
        })
        .collect();
    {
        let store = SqliteStore::open(&path).unwrap();
        block_on(async {
            for source in &sources {
                store.add_taint("s", &[], source).await.unwrap();
            }
            let asked = PendingApproval {
                reason: Some("untrusted_context".into()),
                provenance: store.taint_sources("s").await.unwrap(),
                ..approval("p1", now_ms() + 600_000)
            };
            store.put_approval(&asked).await.unwrap();
        });
    }
    // Bounded on disk: four sources of 600 characters, not six megabytes.
    assert!(std::fs::metadata(&path).unwrap().len() < 200_000);
    let store = SqliteStore::open(&path).unwrap();
    let newest: Vec<TaintSource> = sources.iter().rev().take(4).cloned().collect();
    block_on(async {
        let kept = store.taint_sources("s").await.unwrap();
        assert_eq!(kept, newest);
        assert_eq!(kept[0].texts[0].text.chars().count(), 600);
        assert!(kept[0].texts[0].cut);
        let back = store.approval("p1").await.unwrap().unwrap();
        assert_eq!(back.approval.provenance, newest);
    });
}
