//! A schema at each version gains what the next one adds, keeps its rows,
//! and an older replica still works beside it.

use super::*;

/// The approval `id` in session `s`, asked at `now` for ten minutes, as a
/// replica of version 4 or older inserts it: with the columns of the first
/// release only.
async fn old_asked(client: &Client, id: &str, now: i64) {
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
        VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3)";
    client
        .execute(insert, &[&id, &now, &(now + 600_000)])
        .await
        .unwrap();
}

/// The approval `id` in session `s`, asked at `now` for ten minutes, as a
/// replica of a later version inserts it by `insert` (`$4` its session's
/// key).
async fn asked_before(client: &Client, insert: &str, id: &str, now: i64) {
    let session = session_key("s");
    client
        .execute(insert, &[&id, &now, &(now + 600_000), &session])
        .await
        .unwrap();
}

#[test]
fn a_schema_at_version_1_gains_decisions_and_keeps_its_approvals() {
    const BACK: &str =
        "ALTER TABLE toolcall_approvals DROP COLUMN decision, DROP COLUMN decided_ms,
             DROP COLUMN used_ms, DROP COLUMN result, DROP COLUMN reason, DROP COLUMN tainted;
         DROP INDEX IF EXISTS toolcall_approvals_created, toolcall_approvals_decided;
         UPDATE toolcall_schema_version SET version = 1;";
    in_schema_taken_back("v1", BACK, |url, schema, client| async move {
        // Back to version 1 as it was, with an approval a version-1 replica asked.
        let now = now_ms() as i64;
        first_asked(&client, now).await;

        let store = upgraded(&url, &schema, &client).await;
        sql_stores::version_1_approval_is_decided(&store).await;
        // A replica still at version 1 inserts and takes as it did.
        client
            .execute(
                "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
                 VALUES ('p2', 's', 'c', 'pay', 'd1', '{}', 1, $1, $2)",
                &[&now, &(now + 600_000)],
            )
            .await
            .unwrap();
        assert_eq!(sql_stores::waiting(&store).await, 1);
    });
}

#[test]
fn a_schema_at_version_3_without_why_an_approval_asks_gains_it() {
    // Version 3 once existed without the approval's `reason` and `tainted`:
    // a schema made then is at version 3 and lacks them; version 4 adds them.
    const BACK: &str = "ALTER TABLE toolcall_approvals DROP COLUMN reason, DROP COLUMN tainted;
         UPDATE toolcall_schema_version SET version = 3;";
    in_schema_taken_back("v3", BACK, |url, schema, client| async move {
        let store = upgraded(&url, &schema, &client).await;
        sql_stores::keeps_why_an_approval_asks(&store, "p1").await;
    });
}

#[test]
fn a_schema_at_version_2_gains_why_an_approval_asks_and_keeps_its_approvals() {
    const BACK: &str = "DROP TABLE toolcall_taint;
         ALTER TABLE toolcall_approvals DROP COLUMN reason, DROP COLUMN tainted;
         UPDATE toolcall_schema_version SET version = 2;";
    in_schema_taken_back("v2", BACK, |url, schema, client| async move {
        // Back to version 2 as it was, with an approval a version-2 replica asked.
        let now = now_ms() as i64;
        old_asked(&client, "p1", now).await;

        let store = upgraded(&url, &schema, &client).await;
        sql_stores::version_2_approval_gains_why(&store).await;
        // A replica still at version 2 inserts as it did.
        old_asked(&client, "p3", now).await;
        assert_eq!(sql_stores::waiting(&store).await, 3);
    });
}

#[test]
fn a_schema_at_version_4_finds_its_approvals_by_session_and_call() {
    const BACK: &str = "DROP INDEX toolcall_approvals_tool_created;
         ALTER TABLE toolcall_approvals DROP COLUMN session_key, DROP COLUMN ask_key;
         UPDATE toolcall_schema_version SET version = 4;";
    in_schema_taken_back("v4", BACK, |url, schema, client| async move {
        // Back to version 4 as it was, with an approval a version-4 replica asked.
        let now = now_ms() as i64;
        old_asked(&client, "p1", now).await;

        let store = upgraded(&url, &schema, &client).await;
        sql_stores::version_4_approval_is_found_by_session_and_call(&store).await;
        // A replica still at version 4 inserts as it did; its approval is
        // listed (not by a filter on its session).
        old_asked(&client, "p3", now).await;
        assert_eq!(sql_stores::listed(&store).await, 2);
    });
}

#[test]
fn a_schema_at_version_5_gains_who_answers_and_the_questions_claims_keep() {
    const BACK: &str = "DROP INDEX toolcall_approvals_caller_open, toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question, DROP COLUMN asked_ms;
         UPDATE toolcall_schema_version SET version = 5;";
    in_schema_taken_back("v5", BACK, |url, schema, client| async move {
        // Back to version 5 as it was, with an approval and a claim a
        // version-5 replica made.
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

        let store = upgraded(&url, &schema, &client).await;
        sql_stores::version_5_gains_who_answers_and_the_questions_claims_keep(&store).await;
    });
}

#[test]
fn a_schema_at_version_6_gains_the_principal_and_a_version_6_replica_still_asks() {
    const BACK: &str = "ALTER TABLE toolcall_approvals DROP COLUMN principal;
         UPDATE toolcall_schema_version SET version = 6;";
    in_schema_taken_back("v6", BACK, |url, schema, client| async move {
        // A version-6 replica's insert, with the columns it knows.
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers)
                      VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3, $4, '')";
        let now = now_ms() as i64;
        asked_before(&client, insert, "p1", now).await;

        let store = upgraded(&url, &schema, &client).await;
        sql_stores::version_6_approval_gains_the_principal(&store).await;
        // The version-6 replica asks on as it did.
        asked_before(&client, insert, "p3", now).await;
        assert_eq!(sql_stores::waiting(&store).await, 3);
    });
}

#[test]
fn a_schema_at_version_7_gains_the_operators_controls_and_a_version_7_replica_still_asks() {
    const BACK: &str = "DROP TABLE toolcall_controls, toolcall_controls_history, toolcall_rates,
             toolcall_signatures;
         UPDATE toolcall_schema_version SET version = 7;";
    in_schema_taken_back("v7", BACK, |url, schema, client| async move {
        // A version-7 replica's insert, with the columns it knows.
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal)
                      VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3, $4, '', NULL)";
        let now = now_ms() as i64;
        asked_before(&client, insert, "p1", now).await;

        let store = upgraded(&url, &schema, &client).await;
        sql_stores::version_7_gains_the_operators_controls(&store).await;
        // The version-7 replica asks on as it did.
        asked_before(&client, insert, "p2", now).await;
        assert_eq!(sql_stores::waiting(&store).await, 2);
    });
}

#[test]
fn a_schema_at_version_8_binds_its_questions_to_who_asked_and_keeps_doubts_open() {
    const BACK: &str = "ALTER TABLE toolcall_approvals DROP COLUMN requester;
         UPDATE toolcall_schema_version SET version = 8;";
    in_schema_taken_back("v8", BACK, |url, schema, client| async move {
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
                    &[
                        &id,
                        &now,
                        &(now + 600_000),
                        &session_key("s"),
                        &alice,
                        &reason,
                    ],
                )
                .await
                .unwrap();
        }

        let store = upgraded(&url, &schema, &client).await;
        let doubt = store.approval("doubt").await.unwrap().unwrap();
        assert_eq!(doubt.approval.expires_ms, toolcall_core::life::NEVER_MS);
        assert_eq!(
            doubt.state(now_ms() + 3_600_000),
            toolcall_core::life::QuestionState::Open
        );
        sql_stores::version_8_question_is_bound_to_who_asked(&store).await;
    });
}

#[test]
fn a_schema_at_version_9_gains_where_taint_came_from_and_a_version_9_replica_still_taints() {
    const BACK: &str = "ALTER TABLE toolcall_approvals DROP COLUMN provenance;
         ALTER TABLE toolcall_taint DROP COLUMN sources;
         UPDATE toolcall_schema_version SET version = 9;";
    in_schema_taken_back("v9", BACK, |url, schema, client| async move {
        // A version-9 replica's taint and question, with the columns it knows.
        let now = now_ms() as i64;
        let taint = "INSERT INTO toolcall_taint (session, print, touched_ms) VALUES ($1, '', $2)";
        client
            .execute(taint, &[&session_key("old"), &now])
            .await
            .unwrap();
        let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, reason)
                      VALUES ($1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, $2, $3, $4, '', 'untrusted_context')";
        asked_before(&client, insert, "p1", now).await;

        let store = upgraded(&url, &schema, &client).await;
        sql_stores::version_9_gains_where_taint_came_from(&store).await;
        // The version-9 replica taints and asks on as it did.
        client
            .execute(taint, &[&session_key("other"), &now])
            .await
            .unwrap();
        asked_before(&client, insert, "p3", now).await;
        sql_stores::version_9_writes_still_count(&store).await;
    });
}

/// A new connection to a schema at this version makes nothing again: it
/// neither waits for a write in progress on the store's tables nor stops
/// the writes while it is set up. Making the indexes again (`IF NOT
/// EXISTS`) took a SHARE lock on each table before finding its index
/// there, so every connection a replica opened waited for every open
/// transaction that wrote a record or a count, on every replica.
#[test]
fn a_new_connection_to_a_current_schema_waits_for_no_write() {
    in_schema("no_wait", |url, schema| async move {
        let writer = made(&url, &schema).await;
        writer
            .batch_execute(
                "BEGIN;
                 INSERT INTO toolcall_calls (key, count, touched_ms) VALUES ('k', 1, 0);
                 INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES ('k', 'in_flight', 0, NULL, 0);",
            )
            .await
            .unwrap();
        let connected = tokio::time::timeout(
            Duration::from_secs(10),
            PostgresStore::connect_in_schema(&url, &schema),
        )
        .await;
        writer.batch_execute("ROLLBACK").await.unwrap();
        let store = connected
            .expect("a new connection waited 10 s for a write in progress")
            .unwrap();
        assert_current(&writer).await;
        // The connection is set up as ever: its statements find the tables.
        let call = key("counted");
        assert_eq!(store.count_call(&call, now_ms()).await.unwrap(), 1);
    });
}
