//! A [`Store`] for [toolcall](https://docs.rs/toolcall) on Postgres: when an
//! agent backend runs as several replicas, and a model's retry lands on
//! another replica than its first call, idempotency records, in-flight
//! claims, step and duplicate counts and pending approvals must live in one
//! shared system of record.
//!
//! Every operation is one statement: a claim is an `INSERT ... ON CONFLICT
//! DO UPDATE ... WHERE` that only one replica can win, and an approval is
//! used up by a `DELETE ... RETURNING` that matches its binding. The tables
//! are created when the store connects (under an advisory lock, so replicas
//! starting together do not race), in the schema given, `public` by default.
//!
//! A connection that drops is opened again on the next call; the call that
//! was in flight when it dropped answers `STORE_UNAVAILABLE`, never a wrong
//! "ok".
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use toolcall_postgres::PostgresStore;
//!
//! let store = PostgresStore::connect("postgres://postgres@127.0.0.1:5432/app").await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::sync::Arc;

use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls};
use toolcall_core::ToolResult;
use toolcall_core::store::{
    Binding, Claim, PendingApproval, Store, StoreError, TakeApproval, now_ms,
};

/// The migration: idempotent, run under an advisory lock at connect.
const SCHEMA: &str = "
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

/// Any 64-bit number, the same in every replica: the migration's lock.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_6361_6c6c;

/// The pipeline's memory in Postgres, shared by every replica.
#[derive(Debug)]
pub struct PostgresStore {
    url: String,
    schema: String,
    client: Mutex<Option<Arc<Client>>>,
}

impl PostgresStore {
    /// Connects to `url` (for example `postgres://user@host:5432/db`) and
    /// creates the tables in the `public` schema if they are missing.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        PostgresStore::connect_in_schema(url, "public").await
    }

    /// Like [`connect`](PostgresStore::connect), with the tables in
    /// `schema` (created if missing): one database, separate tenants or test runs.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<Self, StoreError> {
        let store = PostgresStore {
            url: url.to_owned(),
            schema: schema.to_owned(),
            client: Mutex::new(None),
        };
        store.client().await?;
        Ok(store)
    }

    /// Drops the schema and everything in it. For tests that made their own.
    pub async fn drop_schema(self) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote(&self.schema)
            ))
            .await
            .map_err(StoreError::new)
    }

    /// The live connection, opened (again) if there is none or it dropped.
    async fn client(&self) -> Result<Arc<Client>, StoreError> {
        let mut slot = self.client.lock().await;
        if let Some(client) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(Arc::clone(client));
        }
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .map_err(StoreError::new)?;
        tokio::spawn(async move {
            // Ends when the connection drops; the next call opens another.
            let _ = connection.await;
        });
        let schema = quote(&self.schema);
        client
            .batch_execute(&format!(
                "BEGIN;
                 SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
                 CREATE SCHEMA IF NOT EXISTS {schema};
                 SET search_path TO {schema};
                 {SCHEMA}
                 COMMIT;
                 SET search_path TO {schema};"
            ))
            .await
            .map_err(StoreError::new)?;
        let client = Arc::new(client);
        *slot = Some(Arc::clone(&client));
        Ok(client)
    }

    async fn count(&self, sql: &str, id: &str) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one(sql, &[&id, &to_sql(now_ms())])
            .await
            .map_err(StoreError::new)?;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }
}

fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

fn to_sql(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn parse_result(text: &str) -> Result<ToolResult, StoreError> {
    serde_json::from_str(text).map_err(StoreError::new)
}

impl Store for PostgresStore {
    async fn next_step(&self, session: &str) -> Result<u64, StoreError> {
        self.count(
            "INSERT INTO toolcall_steps (session, count, touched_ms) VALUES ($1, 1, $2)
             ON CONFLICT (session) DO UPDATE SET count = toolcall_steps.count + 1, touched_ms = EXCLUDED.touched_ms
             RETURNING count",
            session,
        )
        .await
    }

    async fn count_call(&self, key: &str) -> Result<u64, StoreError> {
        self.count(
            "INSERT INTO toolcall_calls (key, count, touched_ms) VALUES ($1, 1, $2)
             ON CONFLICT (key) DO UPDATE SET count = toolcall_calls.count + 1, touched_ms = EXCLUDED.touched_ms
             RETURNING count",
            key,
        )
        .await
    }

    async fn completed(&self, key: &str) -> Result<Option<ToolResult>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT result FROM toolcall_records WHERE key = $1 AND state = 'completed'",
                &[&key],
            )
            .await
            .map_err(StoreError::new)?;
        row.and_then(|row| row.get::<_, Option<String>>(0))
            .map(|text| parse_result(&text))
            .transpose()
    }

    async fn claim(&self, key: &str, now_ms: u64, lease_ms: u64) -> Result<Claim, StoreError> {
        let client = self.client().await?;
        let until = to_sql(now_ms.saturating_add(lease_ms));
        let now = to_sql(now_ms);
        let won = client
            .query_opt(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES ($1, 'in_flight', $2, NULL, $3)
                 ON CONFLICT (key) DO UPDATE SET state = 'in_flight', until_ms = $2, result = NULL, touched_ms = $3
                 WHERE toolcall_records.state <> 'completed' AND toolcall_records.until_ms <= $3
                 RETURNING key",
                &[&key, &until, &now],
            )
            .await
            .map_err(StoreError::new)?;
        if won.is_some() {
            return Ok(Claim::Acquired);
        }
        let row = client
            .query_opt(
                "SELECT state, result FROM toolcall_records WHERE key = $1",
                &[&key],
            )
            .await
            .map_err(StoreError::new)?;
        match row {
            Some(row) if row.get::<_, String>(0) == "completed" => {
                match row.get::<_, Option<String>>(1) {
                    Some(text) => Ok(Claim::Completed(parse_result(&text)?)),
                    None => Ok(Claim::InFlight),
                }
            }
            // Held by another replica, or released between the two statements:
            // either way the caller asks again.
            _ => Ok(Claim::InFlight),
        }
    }

    async fn complete(&self, key: &str, result: &ToolResult) -> Result<(), StoreError> {
        let text = serde_json::to_string(result).map_err(StoreError::new)?;
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES ($1, 'completed', 0, $2, $3)
                 ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = $2, touched_ms = $3",
                &[&key, &text, &to_sql(now_ms())],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(())
    }

    async fn release(&self, key: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM toolcall_records WHERE key = $1 AND state = 'in_flight'",
                &[&key],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(())
    }

    async fn put_approval(&self, a: &PendingApproval) -> Result<(), StoreError> {
        let arguments = serde_json::to_string(&a.arguments).map_err(StoreError::new)?;
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO toolcall_approvals
                 (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    &a.id,
                    &a.session,
                    &a.caller,
                    &a.tool,
                    &a.digest,
                    &arguments,
                    &to_sql(a.step),
                    &to_sql(a.created_ms),
                    &to_sql(a.expires_ms),
                ],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(())
    }

    async fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> Result<TakeApproval, StoreError> {
        let client = self.client().await?;
        // Used up only if it matches: a mismatched attempt changes nothing.
        let row = client
            .query_opt(
                "DELETE FROM toolcall_approvals
                 WHERE id = $1 AND session = $2 AND caller = $3
                   AND ($4::TEXT IS NULL OR tool = $4) AND ($5::TEXT IS NULL OR digest = $5)
                 RETURNING session, caller, tool, digest, arguments, step, created_ms, expires_ms",
                &[
                    &id,
                    &binding.session,
                    &binding.caller,
                    &binding.tool,
                    &binding.digest,
                ],
            )
            .await
            .map_err(StoreError::new)?;
        let Some(row) = row else {
            return Ok(TakeApproval::Invalid);
        };
        let approval = PendingApproval {
            id: id.to_owned(),
            session: row.get(0),
            caller: row.get(1),
            tool: row.get(2),
            digest: row.get(3),
            arguments: serde_json::from_str(row.get::<_, &str>(4)).map_err(StoreError::new)?,
            step: u64::try_from(row.get::<_, i64>(5)).unwrap_or(0),
            created_ms: u64::try_from(row.get::<_, i64>(6)).unwrap_or(0),
            expires_ms: u64::try_from(row.get::<_, i64>(7)).unwrap_or(0),
        };
        Ok(if approval.expires_ms <= now_ms {
            TakeApproval::Expired
        } else {
            TakeApproval::Taken(approval)
        })
    }
}
