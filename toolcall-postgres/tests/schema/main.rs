//! The schema over its life, against a real server: tables made by the
//! first release (upgraded, once, however many replicas connect at once),
//! a schema from a newer version (refused), and the store's own purge.
//!
//! The server's URL comes from `TOOLCALL_POSTGRES_URL`; without it every
//! test here says loudly that it was skipped. Each test works in a schema of
//! its own and drops it.

use std::future::Future;

use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use toolcall::store::prelude::*;

use toolcall::store::{Claim, now_ms, session_key};

use toolcall_postgres::{PostgresStore, Purged};

use toolcall_testkit::run::{postgres_url, runtime};

use toolcall_testkit::sql_stores::{self, key, result, sorted};

fn url() -> Option<String> {
    postgres_url("the Postgres schema")
}

/// Runs `test` with the server's URL and a schema of its own for `name`,
/// then drops the schema; skipped (loudly) without a server.
fn in_schema<F, T>(name: &str, test: F)
where
    F: FnOnce(String, String) -> T,
    T: Future<Output = ()>,
{
    let Some(url) = url() else { return };
    let schema = schema(name);
    runtime().block_on(async {
        test(url.clone(), schema.clone()).await;
        drop_schema(&url, &schema).await;
    });
}

fn schema(test: &str) -> String {
    format!("toolcall_schema_{test}_{}_{}", std::process::id(), now_ms())
}

/// `test` on the schema `name`, made by this version of the store, then
/// taken back by `sql` (which sets the version too) to what an older one
/// made; with the plain connection to it.
fn in_schema_taken_back<F, T>(name: &str, sql: &str, test: F)
where
    F: FnOnce(String, String, Client) -> T,
    T: Future<Output = ()>,
{
    in_schema(name, |url, schema| async move {
        let client = made(&url, &schema).await;
        // Every version taken back to is older than 11, the open
        // questions' index.
        client
            .batch_execute("DROP INDEX toolcall_approvals_open")
            .await
            .unwrap();
        client.batch_execute(sql).await.unwrap();
        test(url, schema, client).await;
    });
}

/// `schema`, made by this version of the store (whose connection is then
/// closed), and a plain connection to it.
async fn made(url: &str, schema: &str) -> Client {
    drop(PostgresStore::connect_in_schema(url, schema).await.unwrap());
    raw(url, schema).await
}

/// The store in `schema`, connected again: at this version now, as the
/// schema `client` is on shows.
async fn upgraded(url: &str, schema: &str, client: &Client) -> PostgresStore {
    let store = PostgresStore::connect_in_schema(url, schema).await.unwrap();
    assert_current(client).await;
    store
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

/// The approval `p1` of a caller three steps in, asked at `now` for ten
/// minutes, as the first release's replicas inserted it.
async fn first_asked(client: &Client, now: i64) {
    client
        .execute(
            "INSERT INTO toolcall_approvals VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 3, $1, $2)",
            &[&now, &(now + 600_000)],
        )
        .await
        .unwrap();
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

// ------------------------------------------------------------------ purging

async fn rows(client: &Client, table: &str) -> Vec<String> {
    let column = match table {
        "toolcall_approvals" | "toolcall_signatures" => "id",
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

mod first_release;
mod plans;
mod retention;
mod versions;
