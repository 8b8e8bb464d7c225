//! The schema over its life, against a real server: tables made by the
//! first release (upgraded, once, however many replicas connect at once),
//! a schema from a newer version (refused), and the store's own purge.
//!
//! The server's URL comes from `TOOLCALL_POSTGRES_URL`; without it every
//! test here says loudly that it was skipped. Each test works in a schema of
//! its own and drops it.

use std::time::Duration;

use serde_json::json;
use tokio_postgres::{Client, NoTls};
use toolcall::ToolResult;
use toolcall::store::prelude::*;
use toolcall::store::{
    ApprovalDecision, AskApproval, Binding, Claim, DecideOutcome, Key, PendingApproval,
    PendingQuery, RecordedOutcome, TaintSource, TakeApproval, now_ms, session_key,
};
use toolcall_core::life::Answerers;
use toolcall_postgres::{PostgresStore, Purged};
use toolcall_testkit::run::{postgres_url, runtime};

/// The store's key for a test's `name`.
fn key(name: &str) -> Key {
    Key::sha256(name)
}

/// `texts` in the order a table sorts them.
fn sorted<const N: usize>(mut texts: [String; N]) -> [String; N] {
    texts.sort();
    texts
}

fn url() -> Option<String> {
    postgres_url("the Postgres schema")
}

fn schema(test: &str) -> String {
    format!("toolcall_schema_{test}_{}_{}", std::process::id(), now_ms())
}

/// A store made fresh in `schema`, then taken back to an older version by
/// `sql` (which sets the version too); the plain connection to it.
async fn taken_back(url: &str, schema: &str, sql: &str) -> Client {
    drop(PostgresStore::connect_in_schema(url, schema).await.unwrap());
    let client = raw(url, schema).await;
    client.batch_execute(sql).await.unwrap();
    client
}

/// Asserts that the schema `client` is on is at this version of the store.
async fn assert_current(client: &Client) {
    let version: i32 = client
        .query_one("SELECT version FROM toolcall_schema_version", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(i64::from(version), toolcall_sql::schema::VERSION);
}

/// A plain connection, for what the store does not show.
async fn raw(url: &str, schema: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
        .batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{schema}\"; SET search_path TO \"{schema}\""
        ))
        .await
        .unwrap();
    client
}

async fn drop_schema(url: &str, schema: &str) {
    raw(url, schema)
        .await
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
}

fn result(n: i64) -> ToolResult {
    ToolResult::success("pay", json!({"n": n}).as_object().unwrap().clone())
}

// ------------------------------------------ a schema from the first release

/// The tables exactly as the first release created them.
const OLD_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolcall_steps (
    session    TEXT PRIMARY KEY,
    count      BIGINT NOT NULL,
    touched_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_calls (
    key        TEXT PRIMARY KEY,
    count      BIGINT NOT NULL,
    touched_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_records (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    until_ms   BIGINT NOT NULL,
    result     TEXT,
    touched_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_records_touched ON toolcall_records (touched_ms);
CREATE TABLE IF NOT EXISTS toolcall_approvals (
    id         TEXT PRIMARY KEY,
    session    TEXT NOT NULL,
    caller     TEXT NOT NULL,
    tool       TEXT NOT NULL,
    digest     TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    step       BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
";

/// A schema as the first release left it: a session four steps in, a call
/// counted twice, a completed record, a claim held, an approval pending.
async fn old_schema(url: &str, schema: &str) {
    let client = raw(url, schema).await;
    client.batch_execute(OLD_SCHEMA).await.unwrap();
    let now = i64::try_from(now_ms()).unwrap();
    let done = serde_json::to_string(&result(7)).unwrap();
    client
        .execute(
            "INSERT INTO toolcall_steps VALUES ('old-session', 4, $1)",
            &[&now],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO toolcall_calls VALUES ($2, 2, $1)",
            &[&now, &key("k-done").as_str()],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO toolcall_records VALUES ($3, 'completed', 0, $1, $2)",
            &[&done, &now, &key("k-done").as_str()],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO toolcall_records VALUES ($3, 'in_flight', $1, NULL, $2)",
            &[&(now + 600_000), &now, &key("k-held").as_str()],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO toolcall_approvals VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 3, $1, $2)",
            &[&now, &(now + 600_000)],
        )
        .await
        .unwrap();
}

#[test]
fn a_schema_from_the_first_release_is_upgraded_and_keeps_its_rows() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("upgrade");
        old_schema(&url, &schema).await;

        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_eq!(
            store.next_step("old-session", now_ms()).await.unwrap(),
            5,
            "the session keeps its count under its new key"
        );
        assert_eq!(store.count_call(&key("k-done"), now_ms()).await.unwrap(), 3);
        assert_eq!(
            store.outcome(&key("k-done")).await.unwrap(),
            Some(RecordedOutcome::Completed(result(7)))
        );
        assert_eq!(
            store.claim(&key("k-held"), now_ms(), 1_000).await.unwrap(),
            Claim::InFlight
        );
        let binding = Binding {
            session: "s",
            caller: "c",
            tool: Some("pay"),
            digest: Some("d1"),
            requester: toolcall::store::Requester::Anyone,
        };
        assert!(matches!(
            store.take_approval("p1", &binding, now_ms()).await.unwrap(),
            TakeApproval::Taken(PendingApproval { step: 3, .. })
        ));

        // The new state and the new table work.
        store.doubt(&key("k-held")).await.unwrap();
        assert_eq!(
            store.outcome(&key("k-held")).await.unwrap(),
            Some(RecordedOutcome::InDoubt)
        );
        assert_eq!(
            store.claim(&key("k-held"), now_ms(), 1_000).await.unwrap(),
            Claim::Acquired
        );
        assert!(
            store
                .lock_resource(&key("order"), "h1", now_ms(), 1_000)
                .await
                .unwrap()
        );

        let client = raw(&url, &schema).await;
        client
            .execute(
                "INSERT INTO toolcall_records VALUES ('raw', 'in_doubt', 0, NULL, 0)",
                &[],
            )
            .await
            .unwrap();
        assert!(
            client
                .execute(
                    "INSERT INTO toolcall_records VALUES ('bad', 'lost', 0, NULL, 0)",
                    &[]
                )
                .await
                .is_err(),
            "the new check still refuses nonsense"
        );
        assert_current(&client).await;
        let indexes: Vec<String> = client
            .query(
                "SELECT indexname::TEXT FROM pg_indexes
                 WHERE schemaname = $1 AND indexname NOT LIKE '%pkey' ORDER BY 1",
                &[&schema],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert_eq!(
            indexes,
            [
                "toolcall_approvals_ask",
                "toolcall_approvals_caller_open",
                "toolcall_approvals_created",
                "toolcall_approvals_decided",
                "toolcall_approvals_expires",
                "toolcall_approvals_session_created",
                "toolcall_approvals_session_digest",
                "toolcall_approvals_tool_created",
                "toolcall_calls_touched",
                "toolcall_locks_until",
                "toolcall_rates_until",
                "toolcall_records_asking",
                "toolcall_records_touched",
                "toolcall_steps_touched",
                "toolcall_taint_touched"
            ]
        );

        // Connected again: already current, nothing changes.
        let again = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap();
        assert_eq!(again.next_step("old-session", now_ms()).await.unwrap(), 6);
        drop((store, again));
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn replicas_connecting_at_once_upgrade_an_old_schema_once() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("upgrade_race");
        old_schema(&url, &schema).await;
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let (url, schema) = (url.clone(), schema.clone());
                tokio::spawn(async move { PostgresStore::connect_in_schema(&url, &schema).await })
            })
            .collect();
        let mut stores = Vec::new();
        for task in tasks {
            stores.push(task.await.unwrap().unwrap());
        }
        assert_eq!(
            stores[3].next_step("old-session", now_ms()).await.unwrap(),
            5,
            "rekeyed once, not twice"
        );
        drop(stores);
        drop_schema(&url, &schema).await;
    });
}

#[test]
fn a_schema_from_a_newer_version_is_refused() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("newer");
        drop(
            PostgresStore::connect_in_schema(&url, &schema)
                .await
                .unwrap(),
        );
        raw(&url, &schema)
            .await
            .batch_execute(&format!(
                "UPDATE toolcall_schema_version SET version = {}",
                toolcall_sql::schema::VERSION + 1
            ))
            .await
            .unwrap();
        let error = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap_err()
            .to_string();
        let newer = format!("version {}, newer", toolcall_sql::schema::VERSION + 1);
        assert!(error.contains(&newer), "{error}");
        drop_schema(&url, &schema).await;
    });
}

// ------------------------------------------------------------------ purging

async fn rows(client: &Client, table: &str) -> Vec<String> {
    let column = match table {
        "toolcall_approvals" => "id",
        "toolcall_locks" => "resource",
        "toolcall_steps" => "session",
        _ => "key",
    };
    client
        .query(
            &format!("SELECT {column} FROM {table} ORDER BY {column}"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn approval(id: &str, expires_ms: u64) -> PendingApproval {
    PendingApproval {
        id: id.to_owned(),
        session: "s".into(),
        caller: "c".into(),
        tool: "pay".into(),
        digest: "d1".into(),
        arguments: json!({"cents": 1}),
        step: 1,
        created_ms: now_ms(),
        expires_ms,
        decision: None,
        reason: None,
        tainted: Vec::new(),
        answerers: Default::default(),
        principal: None,
        provenance: Vec::new(),
    }
}

#[test]
fn the_store_purges_what_expired_by_itself() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("purge");
        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap()
            .retention(Duration::from_millis(300))
            .purge_every(5);
        // Eleven writes, soon old.
        store.next_step("s-old", now_ms()).await.unwrap();
        store.count_call(&key("c-old"), now_ms()).await.unwrap();
        store.claim(&key("r-done"), now_ms(), 1_000).await.unwrap();
        store.complete(&key("r-done"), &result(1)).await.unwrap();
        store.claim(&key("r-doubt"), now_ms(), 1_000).await.unwrap();
        store.doubt(&key("r-doubt")).await.unwrap();
        store
            .claim(&key("r-held"), now_ms(), 600_000)
            .await
            .unwrap();
        store
            .put_approval(&approval("p-expired", now_ms() - 1))
            .await
            .unwrap();
        store
            .put_approval(&approval("p-valid", now_ms() + 600_000))
            .await
            .unwrap();
        store
            .lock_resource(&key("lock-old"), "h", now_ms(), 1)
            .await
            .unwrap();
        store
            .lock_resource(&key("lock-held"), "h", now_ms(), 600_000)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(700)).await;
        // Four more: the fifteenth write purges.
        store.next_step("s-new", now_ms()).await.unwrap();
        store.count_call(&key("c-new"), now_ms()).await.unwrap();
        store.claim(&key("r-new"), now_ms(), 1_000).await.unwrap();
        store.complete(&key("r-new"), &result(2)).await.unwrap();

        // Seen from another connection, without a purge by hand.
        let client = raw(&url, &schema).await;
        assert_eq!(
            rows(&client, "toolcall_steps").await,
            [session_key("s-new")]
        );
        assert_eq!(
            rows(&client, "toolcall_calls").await,
            [key("c-new").to_string()]
        );
        assert_eq!(
            rows(&client, "toolcall_records").await,
            sorted([key("r-held").to_string(), key("r-new").to_string()]),
            "a claim whose lease runs is kept, however old"
        );
        assert_eq!(rows(&client, "toolcall_approvals").await, ["p-valid"]);
        assert_eq!(
            rows(&client, "toolcall_locks").await,
            [key("lock-held").to_string()]
        );
        assert_eq!(
            store.claim(&key("r-held"), now_ms(), 1_000).await.unwrap(),
            Claim::InFlight
        );

        // By hand: everything at once, counted.
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(
            store.purge().await.unwrap(),
            Purged {
                steps: 1,
                calls: 1,
                records: 1,
                approvals: 0,
                locks: 0,
                taint: 0,
                rates: 0,
                signatures: 0,
            }
        );
        assert_eq!(
            rows(&client, "toolcall_records").await,
            [key("r-held").to_string()]
        );
        assert_eq!(store.purge().await.unwrap().total(), 0);
        drop(store);
        drop_schema(&url, &schema).await;
    });
}

fn yes(decided_ms: u64) -> ApprovalDecision {
    ApprovalDecision {
        approved: true,
        by: "ana".into(),
        note: String::new(),
        edited_arguments: None,
        decided_ms,
        lasts_until_ms: None,
    }
}

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
fn a_decided_approval_stays_in_the_history_for_the_retention_window() {
    let Some(url) = url() else { return };
    runtime().block_on(async {
        let schema = schema("history");
        let store = PostgresStore::connect_in_schema(&url, &schema)
            .await
            .unwrap()
            .retention(Duration::from_millis(1_500))
            .purge_every(0);
        let expires = now_ms() + 100;
        store
            .put_approval(&approval("p-undecided", expires))
            .await
            .unwrap();
        store
            .put_approval(&approval("p-decided", expires))
            .await
            .unwrap();
        assert_eq!(
            store
                .decide_approval("p-decided", &yes(now_ms()), now_ms())
                .await
                .unwrap(),
            DecideOutcome::Decided
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            store.purge().await.unwrap().approvals,
            1,
            "the undecided one, expired"
        );
        let client = raw(&url, &schema).await;
        assert_eq!(rows(&client, "toolcall_approvals").await, ["p-decided"]);
        assert_eq!(store.decided_approvals(10).await.unwrap().len(), 1);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(
            store.purge().await.unwrap().approvals,
            1,
            "past the retention window"
        );
        assert!(rows(&client, "toolcall_approvals").await.is_empty());
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

/// [`PostgresStore::pool`] lends the store's own connections: with a pool
/// of one held by the application, the store waits for it (and says why
/// when `pool_timeout` passes); given back, the store has it again. Its
/// connections are set up as the store's: the store's schema is their
/// `search_path`.
#[test]
fn the_store_lends_its_own_pool_with_its_schema() {
    let Some(url) = url() else { return };
    let runtime = runtime();
    let schema = schema("pool");
    runtime.block_on(async {
        let separator = if url.contains('?') { '&' } else { '?' };
        let one = format!("{url}{separator}pool_max_size=1&pool_timeout=1");
        let store = PostgresStore::connect_in_schema(&one, &schema)
            .await
            .unwrap();
        let pool = store.pool();
        let held = pool.get().await.unwrap();
        let search_path: String = held
            .query_one("SHOW search_path", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(search_path.trim_matches('"'), schema);
        let error = store.release(&key("lent")).await.unwrap_err();
        assert!(
            error.to_string().contains("pool_max_size=1"),
            "the store waited for its one connection: {error}"
        );
        drop(held);
        store.release(&key("lent")).await.unwrap();
        drop(store);
        drop_schema(&url, &schema).await;
    });
}
