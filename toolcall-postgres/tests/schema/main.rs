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

mod first_release;
mod retention;
mod versions;
