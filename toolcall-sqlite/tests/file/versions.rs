//! A file at each schema version gains what the next one adds, keeps its
//! rows, and an older process still works beside it.

use super::*;
use toolcall::store::Exposure;

/// What versions 6 and 7 added to approvals and records: a file of version
/// 5 or older lacks it.
const BACK_TO_5: &str = "DROP INDEX toolcall_approvals_caller_open;
    DROP INDEX toolcall_records_asking;
    ALTER TABLE toolcall_approvals DROP COLUMN principal;
    ALTER TABLE toolcall_approvals DROP COLUMN answerers;
    ALTER TABLE toolcall_records DROP COLUMN question;
    ALTER TABLE toolcall_records DROP COLUMN asked_ms;";

/// An approval `?1`, asked at `?2` until `?3`, as a process of version 4
/// or older inserts it: with the columns of the first release only.
const OLD_INSERT: &str = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
    VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3)";

/// The approval `id` in session `s`, asked at `now` for ten minutes, as a
/// process of an older version inserts it by `insert` (`?4` its session's
/// key).
fn asked_before(conn: &Connection, insert: &str, id: &str, now: i64) {
    let session = toolcall::store::session_key("s");
    conn.execute(insert, rusqlite::params![id, now, now + 600_000, session])
        .unwrap();
}

/// An older process asks `p1` by `insert` on `conn`; the file is upgraded,
/// and `gained` checks what the upgrade added; the older process then asks
/// `after` as it did, and `waiting` questions wait.
fn asks_on_across_the_upgrade(
    path: &Path,
    conn: &Connection,
    insert: &str,
    after: &str,
    waiting: usize,
    gained: impl AsyncFnOnce(&SqliteStore),
) {
    let now = now_ms() as i64;
    asked_before(conn, insert, "p1", now);

    let store = upgraded(path);
    block_on(gained(&store));
    asked_before(conn, insert, after, now);
    assert_eq!(block_on(sql_stores::waiting(&store)), waiting);
}

#[test]
fn a_file_at_version_1_gains_decisions_and_keeps_its_approvals() {
    // Back to version 1 as it was, with an approval a version-1 process asked.
    let (path, conn) = taken_back(
        "v1",
        &[
            "ALTER TABLE toolcall_approvals DROP COLUMN provenance;
             ALTER TABLE toolcall_approvals DROP COLUMN requester;",
            BACK_TO_5,
            "DROP INDEX toolcall_approvals_created;
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
        ],
    );
    let now = now_ms() as i64;
    first_asked(&conn, now);

    let store = upgraded(&path);
    block_on(sql_stores::version_1_approval_is_decided(&store));
    // A process still at version 1 inserts as it did.
    conn.execute(
        "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
         VALUES ('p2', 's', 'c', 'pay', 'd1', '{}', 1, ?1, ?2)",
        rusqlite::params![now, now + 600_000],
    )
    .unwrap();
    assert_eq!(block_on(sql_stores::waiting(&store)), 1);
}

#[test]
fn a_file_at_version_2_gains_why_an_approval_asks_and_keeps_its_approvals() {
    // Back to version 2 as it was, with an approval a version-2 process asked.
    let (path, conn) = taken_back(
        "v2",
        &[
            BACK_TO_5,
            "DROP INDEX toolcall_taint_touched;
             DROP TABLE toolcall_taint;
             ALTER TABLE toolcall_approvals DROP COLUMN reason;
             ALTER TABLE toolcall_approvals DROP COLUMN tainted;
             PRAGMA user_version = 2;",
        ],
    );
    let now = now_ms() as i64;
    conn.execute(OLD_INSERT, rusqlite::params!["p1", now, now + 600_000])
        .unwrap();

    let store = upgraded(&path);
    block_on(sql_stores::version_2_approval_gains_why(&store));
    // A process still at version 2 inserts as it did.
    conn.execute(OLD_INSERT, rusqlite::params!["p3", now, now + 600_000])
        .unwrap();
    assert_eq!(block_on(sql_stores::waiting(&store)), 3);
}

#[test]
fn a_file_at_version_3_without_why_an_approval_asks_gains_it() {
    // Version 3 once existed without the approval's `reason` and `tainted`:
    // a file made then is at version 3 and lacks them; version 4 adds them.
    let (path, _conn) = taken_back(
        "v3",
        &[
            BACK_TO_5,
            "ALTER TABLE toolcall_approvals DROP COLUMN reason;
             ALTER TABLE toolcall_approvals DROP COLUMN tainted;
             PRAGMA user_version = 3;",
        ],
    );
    let store = upgraded(&path);
    block_on(sql_stores::keeps_why_an_approval_asks(&store, "p1"));
    // Opening it again changes nothing.
    drop(store);
    let store = upgraded(&path);
    assert_eq!(block_on(sql_stores::waiting(&store)), 1);
}

#[test]
fn a_file_at_version_4_finds_its_approvals_by_session_and_call() {
    // Back to version 4 as it was, with an approval a version-4 process asked.
    let (path, conn) = taken_back(
        "v4",
        &[
            BACK_TO_5,
            "DROP INDEX toolcall_approvals_session_digest;
             DROP INDEX toolcall_approvals_session_created;
             DROP INDEX toolcall_approvals_tool_created;
             ALTER TABLE toolcall_approvals DROP COLUMN session_key;
             PRAGMA user_version = 4;",
        ],
    );
    let now = now_ms() as i64;
    conn.execute(OLD_INSERT, rusqlite::params!["p1", now, now + 600_000])
        .unwrap();

    let store = upgraded(&path);
    block_on(sql_stores::version_4_approval_is_found_by_session_and_call(
        &store,
    ));
    // A process still at version 4 inserts as it did; its approval is
    // listed (not by a filter on its session).
    conn.execute(OLD_INSERT, rusqlite::params!["p3", now, now + 600_000])
        .unwrap();
    assert_eq!(block_on(sql_stores::listed(&store)), 2);
}

#[test]
fn a_file_at_version_5_gains_who_answers_and_the_questions_claims_keep() {
    // Back to version 5 as it was, with an approval and a claim a version-5
    // process made.
    let (path, conn) = taken_back("v5", &[BACK_TO_5, "PRAGMA user_version = 5;"]);
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
    block_on(sql_stores::version_5_gains_who_answers_and_the_questions_claims_keep(&store));
}

#[test]
fn a_file_at_version_6_gains_the_principal_and_a_version_6_process_still_asks() {
    let (path, conn) = taken_back(
        "v6",
        &["ALTER TABLE toolcall_approvals DROP COLUMN principal;
         PRAGMA user_version = 6;"],
    );
    // A version-6 process's insert, with the columns it knows.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '')";
    asks_on_across_the_upgrade(&path, &conn, insert, "p3", 3, async |store| {
        sql_stores::version_6_approval_gains_the_principal(store).await
    });
}

#[test]
fn a_file_at_version_7_gains_the_operators_controls_and_a_version_7_process_still_asks() {
    let (path, conn) = taken_back(
        "v7",
        &["DROP TABLE toolcall_controls;
         DROP TABLE toolcall_controls_history;
         DROP TABLE toolcall_rates;
         DROP TABLE toolcall_signatures;
         PRAGMA user_version = 7;"],
    );
    // A version-7 process's insert, with the columns it knows.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', NULL)";
    asks_on_across_the_upgrade(&path, &conn, insert, "p2", 2, async |store| {
        sql_stores::version_7_gains_the_operators_controls(store).await
    });
}

#[test]
fn a_file_at_version_8_binds_its_questions_to_who_asked_and_keeps_doubts_open() {
    let (path, conn) = taken_back(
        "v8",
        &["ALTER TABLE toolcall_approvals DROP COLUMN requester;
         PRAGMA user_version = 8;"],
    );
    // A version-8 process's questions: alice's approval, and a question
    // about an unknown outcome that expires as approvals did.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal, reason)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', ?5, ?6)";
    let now = now_ms() as i64;
    let alice = r#"{"issuer":"https://auth.example.com","subject":"alice"}"#;
    for (id, reason) in [("asked", None), ("doubt", Some("in_doubt"))] {
        let session = toolcall::store::session_key("s");
        let row = rusqlite::params![id, now, now + 600_000, session, alice, reason];
        conn.execute(insert, row).unwrap();
    }

    let store = upgraded(&path);
    let doubt = block_on(store.approval("doubt")).unwrap().unwrap();
    assert_eq!(doubt.approval.expires_ms, toolcall_core::life::NEVER_MS);
    let later = now_ms() + 3_600_000;
    assert_eq!(doubt.state(later), toolcall_core::life::QuestionState::Open);
    block_on(sql_stores::version_8_question_is_bound_to_who_asked(&store));
}

#[test]
fn a_file_at_version_9_gains_where_taint_came_from_and_a_version_9_process_still_taints() {
    let (path, conn) = taken_back(
        "v9",
        &["ALTER TABLE toolcall_approvals DROP COLUMN provenance;
         ALTER TABLE toolcall_taint DROP COLUMN sources;
         PRAGMA user_version = 9;"],
    );
    // A version-9 process's writes, with the columns it knows.
    let now = now_ms() as i64;
    let taint = "INSERT INTO toolcall_taint (session, print, touched_ms) VALUES (?1, '', ?2)";
    let old_session = toolcall::store::session_key("old");
    conn.execute(taint, rusqlite::params![old_session, now])
        .unwrap();
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, reason)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', 'untrusted_context')";
    asked_before(&conn, insert, "p1", now);

    let store = upgraded(&path);
    block_on(sql_stores::version_9_gains_where_taint_came_from(&store));
    // The version-9 process taints and asks on as it did.
    let other = toolcall::store::session_key("other");
    conn.execute(taint, rusqlite::params![other, now]).unwrap();
    asked_before(&conn, insert, "p3", now);
    block_on(sql_stores::version_9_writes_still_count(&store));
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
                store
                    .add_taint(&Exposure {
                        session: "s",
                        fingerprints: &[],
                        source,
                    })
                    .await
                    .unwrap();
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
