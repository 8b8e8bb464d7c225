//! A [`Store`] for [toolcall](https://docs.rs/toolcall) on Postgres: when an
//! agent backend runs as several replicas, and a model's retry lands on
//! another replica than its first call, idempotency records, in-flight
//! claims, step and duplicate counts and pending approvals must live in one
//! shared system of record.
//!
//! Every operation is one statement: a claim is an `INSERT ... ON CONFLICT
//! DO UPDATE ... WHERE` that only one replica can win, a resource lock the
//! same with its holder, and an approval is used up by a `DELETE ...
//! RETURNING` that matches its binding. The tables are created or upgraded
//! when the store connects (under an advisory lock, so replicas starting
//! together do not race), in the schema given, `public` by default.
//!
//! A person's decision (the inbox) is one `UPDATE` that only an undecided,
//! unused, unexpired approval matches, and it is announced with `NOTIFY` on
//! [`DECISION_CHANNEL`]: an agent waiting for it
//! ([`Store::wait_approval`]) `LISTEN`s and wakes at once.
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
//!
//! # What the schema holds
//!
//! | table | one row per | key |
//! |---|---|---|
//! | `toolcall_steps` | session: its step count | [`session_key`] of the session id (fixed length: a B-tree entry holds at most about 2.7 KB) |
//! | `toolcall_calls` | idempotency key: how often the call was made | the key |
//! | `toolcall_records` | idempotency key: its state, `in_flight` (with the lease's end), `completed` (with the result) or `in_doubt` | the key |
//! | `toolcall_approvals` | approval: pending (and why it asks), then a person's decision (the inbox), when a call used it up and what came of it, with the session as given (not indexed) | the confirmation id |
//! | `toolcall_locks` | resource: its holder and the lease's end | [`session_key`] of the resource |
//! | `toolcall_taint` | session and fingerprint of an untrusted output's value (an empty one marks the session) | [`session_key`] of the session id, and the fingerprint (a hex digest, never the text) |
//! | `toolcall_schema_version` | the schema's version (one row) | |
//!
//! A key that is in doubt is claimed like a free one; a release leaves it
//! (and a completed key) as it is.
//!
//! # Purging
//!
//! The store deletes what has expired by itself: every
//! [`purge_every`](PostgresStore::purge_every) writes through a handle (1000
//! by default), one statement deletes at most 10 000 rows of each kind among
//!
//! * steps, call counts and records untouched for the
//!   [`retention`](PostgresStore::retention) window (24 hours by default),
//!   except a claim whose lease is still running;
//! * undecided approvals past their expiry, and decided ones (the inbox's
//!   history) once their expiry is older than the retention window;
//! * resource locks whose lease ran out;
//! * the taint of untrusted output, untouched for the retention window.
//!
//! Each is a range scan on an index, and skips rows another transaction
//! holds, so replicas purging at once neither wait nor deadlock.
//! [`purge`](PostgresStore::purge) deletes all of it at once, for a timer or
//! a maintenance job. A record dropped this way means an identical call
//! after it runs again, under the same idempotency key.
//!
//! # Schema versions
//!
//! Connecting upgrades tables made by an older version, in the same
//! transaction and under the same lock as creating them. The upgrade keeps
//! the columns the previous version uses, so replicas still running it keep
//! working during a rolling upgrade. A schema made by a newer version is
//! refused.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_postgres::{AsyncMessage, Client, NoTls, Row};
use toolcall_core::ToolResult;
use toolcall_core::store::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, Binding, Claim, DecideOutcome,
    PendingApproval, RecordedOutcome, Store, StoreError, TaintHit, TakeApproval, now_ms,
    session_key,
};

/// The schema this version writes, kept in `toolcall_schema_version`.
const SCHEMA_VERSION: i32 = 3;

/// Version 0, the first release's tables. Created if missing, so that a new
/// schema and one from that release take the same upgrades.
const SCHEMA_V0: &str = "
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

/// Where the schema's version is kept (no row: version 0).
const VERSION_TABLE: &str = "
CREATE TABLE IF NOT EXISTS toolcall_schema_version (
    version INTEGER NOT NULL
);
";

/// Version 1, after the old check on `state` is dropped: the `in_doubt`
/// state, steps keyed by [`session_key`] (a session keeps its count),
/// resource locks, and the indexes the purge scans.
const UPGRADE_V1: &str = "
ALTER TABLE toolcall_records ADD CONSTRAINT toolcall_records_state_check
    CHECK (state IN ('in_flight', 'completed', 'in_doubt'));
UPDATE toolcall_steps SET session = encode(sha256(convert_to(session, 'UTF8')), 'hex');
CREATE INDEX IF NOT EXISTS toolcall_steps_touched ON toolcall_steps (touched_ms);
CREATE INDEX IF NOT EXISTS toolcall_calls_touched ON toolcall_calls (touched_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_expires ON toolcall_approvals (expires_ms);
CREATE TABLE IF NOT EXISTS toolcall_locks (
    resource_key TEXT PRIMARY KEY,
    resource     TEXT NOT NULL,
    holder       TEXT NOT NULL,
    until_ms     BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_locks_until ON toolcall_locks (until_ms);
";

/// Version 2: a person's decision kept with its approval (the inbox), when
/// a call used it up and what came of it, and the indexes the inbox reads.
/// Columns are only added, so replicas still at version 1 keep working.
const UPGRADE_V2: &str = "
ALTER TABLE toolcall_approvals
    ADD COLUMN IF NOT EXISTS decision TEXT,
    ADD COLUMN IF NOT EXISTS decided_ms BIGINT,
    ADD COLUMN IF NOT EXISTS used_ms BIGINT,
    ADD COLUMN IF NOT EXISTS result TEXT;
CREATE INDEX IF NOT EXISTS toolcall_approvals_created ON toolcall_approvals (created_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_decided ON toolcall_approvals (decided_ms);
";

/// Version 3: the taint of untrusted output, per session: one row marks
/// the session (`print` empty), one more per fingerprint (hex digests of
/// the values, never the text), purged with the session's other rows; and
/// why an approval asks a person (`reason`, and the tainted arguments as a
/// JSON array in `tainted`). Columns are only added, so replicas still at
/// version 2 keep working.
const UPGRADE_V3: &str = "
ALTER TABLE toolcall_approvals
    ADD COLUMN IF NOT EXISTS reason TEXT,
    ADD COLUMN IF NOT EXISTS tainted TEXT;
CREATE TABLE IF NOT EXISTS toolcall_taint (
    session    TEXT NOT NULL,
    print      TEXT NOT NULL,
    touched_ms BIGINT NOT NULL,
    PRIMARY KEY (session, print)
);
CREATE INDEX IF NOT EXISTS toolcall_taint_touched ON toolcall_taint (touched_ms);
";

/// The columns of an approval, in the order [`read_entry`] reads them.
const APPROVAL_COLUMNS: &str = "id, session, caller, tool, digest, arguments, step, created_ms, \
                                expires_ms, decision, used_ms, result, reason, tainted";

/// The channel a decision is announced on (`NOTIFY`, with the approval's
/// id as the payload), so that an agent waiting for it wakes at once.
pub const DECISION_CHANNEL: &str = "toolcall_approval_decided";

/// How often a wait for a decision looks again without being woken (a
/// notification lost with a dropped connection is not waited for longer).
const WAIT_RECHECK: Duration = Duration::from_secs(2);

/// One purge: every kind in one statement, at most `$3` rows of each (all
/// for NULL), skipping rows another transaction holds. `$1` is the
/// retention's cutoff, `$2` now. The conditions are repeated outside the
/// subqueries so that a row changed meanwhile is checked again.
const PURGE: &str = "
WITH steps AS (
    DELETE FROM toolcall_steps WHERE session IN (
        SELECT session FROM toolcall_steps WHERE touched_ms < $1
        LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND touched_ms < $1
    RETURNING 1
), calls AS (
    DELETE FROM toolcall_calls WHERE key IN (
        SELECT key FROM toolcall_calls WHERE touched_ms < $1
        LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND touched_ms < $1
    RETURNING 1
), records AS (
    DELETE FROM toolcall_records WHERE key IN (
        SELECT key FROM toolcall_records
        WHERE touched_ms < $1 AND (state <> 'in_flight' OR until_ms <= $2)
        LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND touched_ms < $1 AND (state <> 'in_flight' OR until_ms <= $2)
    RETURNING 1
), approvals AS (
    DELETE FROM toolcall_approvals WHERE id IN (
        SELECT id FROM toolcall_approvals
        WHERE expires_ms <= $2 AND (decision IS NULL OR expires_ms < $1)
        LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND expires_ms <= $2 AND (decision IS NULL OR expires_ms < $1)
    RETURNING 1
), taint AS (
    DELETE FROM toolcall_taint WHERE (session, print) IN (
        SELECT session, print FROM toolcall_taint WHERE touched_ms < $1
        LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND touched_ms < $1
    RETURNING 1
), locks AS (
    DELETE FROM toolcall_locks WHERE resource_key IN (
        SELECT resource_key FROM toolcall_locks WHERE until_ms <= $2
        LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND until_ms <= $2
    RETURNING 1
)
SELECT (SELECT count(*) FROM steps), (SELECT count(*) FROM calls),
       (SELECT count(*) FROM records), (SELECT count(*) FROM approvals),
       (SELECT count(*) FROM locks), (SELECT count(*) FROM taint)
";

/// Writes through one handle between two automatic purges, by default.
const PURGE_EVERY: u64 = 1000;

/// Rows of each kind one automatic purge deletes at most, so that a write
/// that triggers it stays short.
const PURGE_BATCH: i64 = 10_000;

/// Any 64-bit number, the same in every replica: the migration's lock.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_6361_6c6c;

/// The pipeline's memory in Postgres, shared by every replica.
#[derive(Debug)]
pub struct PostgresStore {
    url: String,
    schema: String,
    client: Mutex<Option<Arc<Client>>>,
    retention_ms: u64,
    purge_every: u64,
    writes: AtomicU64,
}

/// What a purge deleted, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    /// Step counts of sessions untouched for the retention window.
    pub steps: usize,
    /// Call counts untouched for the retention window.
    pub calls: usize,
    /// Idempotency records untouched for the retention window (never a
    /// claim whose lease is running).
    pub records: usize,
    /// Approvals past their expiry.
    pub approvals: usize,
    /// Resource locks whose lease ran out.
    pub locks: usize,
    /// Rows of untrusted output's taint (a session's mark, a fingerprint)
    /// untouched for the retention window.
    pub taint: usize,
}

impl Purged {
    /// Rows deleted, of every kind.
    pub fn total(&self) -> usize {
        self.steps + self.calls + self.records + self.approvals + self.locks + self.taint
    }
}

impl PostgresStore {
    /// Connects to `url` (for example `postgres://user@host:5432/db`) and
    /// creates or upgrades the tables in the `public` schema.
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
            retention_ms: 24 * 60 * 60 * 1000,
            purge_every: PURGE_EVERY,
            writes: AtomicU64::new(0),
        };
        store.client().await?;
        Ok(store)
    }

    /// Keeps steps, call counts and records for `retention` after their
    /// last use (24 hours by default).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention_ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Purges automatically after every `writes` writes through this handle
    /// (1000 by default); 0 never does, leaving it to [`purge`](PostgresStore::purge).
    pub fn purge_every(mut self, writes: u64) -> Self {
        self.purge_every = writes;
        self
    }

    /// Deletes, now and all at once, what is older than the retention window
    /// (but never a claim whose lease is running), approvals past their
    /// expiry and resource locks whose lease ran out. The store also does it
    /// by itself, a batch at a time: see [`purge_every`](PostgresStore::purge_every).
    pub async fn purge(&self) -> Result<Purged, StoreError> {
        self.purge_at_most(None).await
    }

    /// Deletes at most `limit` rows of each kind (all of them for `None`),
    /// in one statement.
    async fn purge_at_most(&self, limit: Option<i64>) -> Result<Purged, StoreError> {
        let now = now_ms();
        let cutoff = to_sql(now.saturating_sub(self.retention_ms));
        let client = self.client().await?;
        let row = client
            .query_one(PURGE, &[&cutoff, &to_sql(now), &limit])
            .await
            .map_err(StoreError::new)?;
        let count = |i: usize| usize::try_from(row.get::<_, i64>(i)).unwrap_or(0);
        Ok(Purged {
            steps: count(0),
            calls: count(1),
            records: count(2),
            approvals: count(3),
            locks: count(4),
            taint: count(5),
        })
    }

    /// Counts one write; every `purge_every`-th purges a batch. A failed
    /// purge is not the caller's failure (its write is done): the next turn
    /// tries again.
    async fn wrote(&self) {
        let writes = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        if self.purge_every > 0 && writes.is_multiple_of(self.purge_every) {
            let _ = self.purge_at_most(Some(PURGE_BATCH)).await;
        }
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
        let (mut client, connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .map_err(StoreError::new)?;
        tokio::spawn(async move {
            // Ends when the connection drops; the next call opens another.
            let _ = connection.await;
        });
        migrate(&mut client, &self.schema).await?;
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
        self.wrote().await;
        Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
    }
}

/// Creates or upgrades the tables in `schema`, in one transaction under an
/// advisory lock, and points the connection's search path at it.
async fn migrate(client: &mut Client, schema: &str) -> Result<(), StoreError> {
    let schema = quote(schema);
    let tx = client.transaction().await.map_err(StoreError::new)?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
         CREATE SCHEMA IF NOT EXISTS {schema};
         SET LOCAL search_path TO {schema};
         {SCHEMA_V0}
         {VERSION_TABLE}"
    ))
    .await
    .map_err(StoreError::new)?;
    let found: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM toolcall_schema_version",
            &[],
        )
        .await
        .map_err(StoreError::new)?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::new(format!(
            "the schema {schema} is version {found}, newer than this toolcall-postgres \
             knows ({SCHEMA_VERSION}): connect with a newer version"
        )));
    }
    if found < 1 {
        // The first release's check on `state` has Postgres's default name,
        // but whatever its name, every check on `state` goes.
        let checks = tx
            .query(
                "SELECT conname::TEXT FROM pg_constraint
                 WHERE conrelid = 'toolcall_records'::regclass AND contype = 'c'
                   AND pg_get_constraintdef(oid) LIKE '%state%'",
                &[],
            )
            .await
            .map_err(StoreError::new)?;
        for check in checks {
            let name: String = check.get(0);
            tx.batch_execute(&format!(
                "ALTER TABLE toolcall_records DROP CONSTRAINT {}",
                quote(&name)
            ))
            .await
            .map_err(StoreError::new)?;
        }
        tx.batch_execute(UPGRADE_V1)
            .await
            .map_err(StoreError::new)?;
    }
    if found < 2 {
        tx.batch_execute(UPGRADE_V2)
            .await
            .map_err(StoreError::new)?;
    }
    if found < 3 {
        tx.batch_execute(UPGRADE_V3)
            .await
            .map_err(StoreError::new)?;
    }
    if found < SCHEMA_VERSION {
        tx.batch_execute(&format!(
            "DELETE FROM toolcall_schema_version;
             INSERT INTO toolcall_schema_version (version) VALUES ({SCHEMA_VERSION});"
        ))
        .await
        .map_err(StoreError::new)?;
    }
    tx.commit().await.map_err(StoreError::new)?;
    client
        .batch_execute(&format!("SET search_path TO {schema}"))
        .await
        .map_err(StoreError::new)
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

fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A JSON column, read back.
fn json_column<T: serde::de::DeserializeOwned>(
    text: Option<String>,
) -> Result<Option<T>, StoreError> {
    text.map(|text| serde_json::from_str(&text).map_err(StoreError::new))
        .transpose()
}

/// The tainted arguments of an approval as their column holds them: a JSON
/// array, or NULL when there are none.
fn tainted_column(tainted: &[String]) -> Result<Option<String>, StoreError> {
    if tainted.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(tainted)
        .map(Some)
        .map_err(StoreError::new)
}

/// A row of [`APPROVAL_COLUMNS`].
fn read_entry(row: &Row) -> Result<ApprovalEntry, StoreError> {
    Ok(ApprovalEntry {
        approval: PendingApproval {
            id: row.get(0),
            session: row.get(1),
            caller: row.get(2),
            tool: row.get(3),
            digest: row.get(4),
            arguments: serde_json::from_str(row.get::<_, &str>(5)).map_err(StoreError::new)?,
            step: from_sql(row.get(6)),
            created_ms: from_sql(row.get(7)),
            expires_ms: from_sql(row.get(8)),
            decision: json_column::<ApprovalDecision>(row.get(9))?,
            reason: row.get(12),
            tainted: json_column::<Vec<String>>(row.get(13))?.unwrap_or_default(),
        },
        used_ms: row.get::<_, Option<i64>>(10).map(from_sql),
        result: json_column::<ApprovalResult>(row.get(11))?,
    })
}

fn limit_sql(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl PostgresStore {
    /// Uses up the approval `id` if it matches `binding` and is unused: a
    /// decided one is marked used (the history keeps it), an undecided one
    /// is deleted. `decided` says which statement to try.
    async fn use_up(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
        decided: bool,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        let client = self.client().await?;
        let matches = "id = $1 AND session = $2 AND caller = $3
             AND ($4::TEXT IS NULL OR tool = $4) AND ($5::TEXT IS NULL OR digest = $5)
             AND used_ms IS NULL";
        let sql = if decided {
            format!(
                "UPDATE toolcall_approvals SET used_ms = $6
                 WHERE {matches} AND decision IS NOT NULL RETURNING {APPROVAL_COLUMNS}"
            )
        } else {
            format!(
                "DELETE FROM toolcall_approvals
                 WHERE {matches} AND decision IS NULL AND $6::BIGINT IS NOT NULL
                 RETURNING {APPROVAL_COLUMNS}"
            )
        };
        let row = client
            .query_opt(
                &sql,
                &[
                    &id,
                    &binding.session,
                    &binding.caller,
                    &binding.tool,
                    &binding.digest,
                    &to_sql(now_ms),
                ],
            )
            .await
            .map_err(StoreError::new)?;
        row.as_ref().map(read_entry).transpose()
    }

    async fn approvals_where(
        &self,
        condition: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<ApprovalEntry>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!("SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE {condition}"),
                params,
            )
            .await
            .map_err(StoreError::new)?;
        rows.iter().map(read_entry).collect()
    }
}

impl Store for PostgresStore {
    async fn next_step(&self, session: &str) -> Result<u64, StoreError> {
        self.count(
            "INSERT INTO toolcall_steps (session, count, touched_ms) VALUES ($1, 1, $2)
             ON CONFLICT (session) DO UPDATE SET count = toolcall_steps.count + 1, touched_ms = EXCLUDED.touched_ms
             RETURNING count",
            &session_key(session),
        )
        .await
    }

    async fn peek_step(&self, session: &str) -> Result<u64, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT count FROM toolcall_steps WHERE session = $1",
                &[&session_key(session)],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(row.map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)))
    }

    async fn add_taint(&self, session: &str, fingerprints: &[String]) -> Result<(), StoreError> {
        let client = self.client().await?;
        let mut prints: Vec<&str> = vec![""];
        prints.extend(fingerprints.iter().map(String::as_str));
        client
            .execute(
                "INSERT INTO toolcall_taint (session, print, touched_ms)
                 SELECT $1, p, $3 FROM unnest($2::TEXT[]) AS p
                 ON CONFLICT (session, print) DO UPDATE SET touched_ms = EXCLUDED.touched_ms",
                &[&session_key(session), &prints, &to_sql(now_ms())],
            )
            .await
            .map_err(StoreError::new)?;
        self.wrote().await;
        Ok(())
    }

    async fn tainted(
        &self,
        session: &str,
        fingerprints: &[String],
    ) -> Result<TaintHit, StoreError> {
        let client = self.client().await?;
        let mut prints: Vec<&str> = vec![""];
        prints.extend(
            fingerprints
                .iter()
                .map(String::as_str)
                .filter(|p| !p.is_empty()),
        );
        let rows = client
            .query(
                "SELECT print FROM toolcall_taint WHERE session = $1 AND print = ANY($2::TEXT[])",
                &[&session_key(session), &prints],
            )
            .await
            .map_err(StoreError::new)?;
        let found: std::collections::HashSet<String> =
            rows.iter().map(|row| row.get::<_, String>(0)).collect();
        if !found.contains("") {
            return Ok(TaintHit::default());
        }
        let seen = fingerprints
            .iter()
            .filter(|p| !p.is_empty() && found.contains(*p))
            .cloned()
            .collect();
        Ok(TaintHit::new(true, seen))
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

    async fn uncount_call(&self, key: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE toolcall_calls SET count = GREATEST(count - 1, 0) WHERE key = $1",
                &[&key],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(())
    }

    async fn outcome(&self, key: &str) -> Result<Option<RecordedOutcome>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT state, result FROM toolcall_records
                 WHERE key = $1 AND state IN ('completed', 'in_doubt')",
                &[&key],
            )
            .await
            .map_err(StoreError::new)?;
        let Some(row) = row else {
            return Ok(None);
        };
        match (row.get::<_, &str>(0), row.get::<_, Option<&str>>(1)) {
            ("completed", Some(text)) => Ok(Some(RecordedOutcome::Completed(parse_result(text)?))),
            _ => Ok(Some(RecordedOutcome::InDoubt)),
        }
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
                 WHERE toolcall_records.state = 'in_doubt'
                    OR (toolcall_records.state = 'in_flight' AND toolcall_records.until_ms <= $3)
                 RETURNING key",
                &[&key, &until, &now],
            )
            .await
            .map_err(StoreError::new)?;
        if won.is_some() {
            self.wrote().await;
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
            // Held by another replica, or released or doubted between the
            // two statements: either way the caller asks again.
            _ => Ok(Claim::InFlight),
        }
    }

    async fn renew(&self, key: &str, now_ms: u64, lease_ms: u64) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let renewed = client
            .execute(
                "UPDATE toolcall_records SET until_ms = $2, touched_ms = $3
                 WHERE key = $1 AND state = 'in_flight'",
                &[
                    &key,
                    &to_sql(now_ms.saturating_add(lease_ms)),
                    &to_sql(now_ms),
                ],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(renewed > 0)
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
        self.wrote().await;
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

    async fn doubt(&self, key: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES ($1, 'in_doubt', 0, NULL, $2)
                 ON CONFLICT (key) DO UPDATE SET state = 'in_doubt', until_ms = 0, result = NULL, touched_ms = $2
                 WHERE toolcall_records.state <> 'completed'",
                &[&key, &to_sql(now_ms())],
            )
            .await
            .map_err(StoreError::new)?;
        self.wrote().await;
        Ok(())
    }

    async fn put_approval(&self, a: &PendingApproval) -> Result<(), StoreError> {
        let arguments = serde_json::to_string(&a.arguments).map_err(StoreError::new)?;
        let decision = a
            .decision
            .as_ref()
            .map(|d| serde_json::to_string(d).map(|text| (text, to_sql(d.decided_ms))))
            .transpose()
            .map_err(StoreError::new)?;
        let (decision, decided_ms) = decision.unzip();
        let tainted = tainted_column(&a.tainted)?;
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO toolcall_approvals
                 (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms,
                  decision, decided_ms, reason, tainted)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
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
                    &decision,
                    &decided_ms,
                    &a.reason,
                    &tainted,
                ],
            )
            .await
            .map_err(StoreError::new)?;
        self.wrote().await;
        Ok(())
    }

    async fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> Result<TakeApproval, StoreError> {
        // A decision only ever goes from none to one: a decided approval is
        // tried first, then an undecided one, then (decided in between) the
        // first again. Used up only if it matches: a mismatched attempt
        // changes nothing.
        let mut taken = self.use_up(id, binding, now_ms, true).await?;
        if taken.is_none() {
            taken = self.use_up(id, binding, now_ms, false).await?;
        }
        if taken.is_none() {
            taken = self.use_up(id, binding, now_ms, true).await?;
        }
        let Some(entry) = taken else {
            return Ok(TakeApproval::Invalid);
        };
        Ok(if entry.approval.expires_ms <= now_ms {
            TakeApproval::Expired
        } else {
            TakeApproval::Taken(entry.approval)
        })
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        let entries = self
            .approvals_where(
                "decision IS NULL AND used_ms IS NULL AND expires_ms > $1
                 ORDER BY created_ms, id LIMIT $2",
                &[&to_sql(now_ms), &limit_sql(limit)],
            )
            .await?;
        Ok(entries.into_iter().map(|entry| entry.approval).collect())
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> Result<DecideOutcome, StoreError> {
        let text = serde_json::to_string(decision).map_err(StoreError::new)?;
        let client = self.client().await?;
        // One statement: of two decisions at once, one changes the row; the
        // notification goes out when it commits.
        let decided = client
            .query_opt(
                &format!(
                    "WITH decided AS (
                        UPDATE toolcall_approvals SET decision = $2, decided_ms = $3
                        WHERE id = $1 AND decision IS NULL AND used_ms IS NULL AND expires_ms > $4
                        RETURNING id)
                     SELECT pg_notify('{DECISION_CHANNEL}', id) FROM decided"
                ),
                &[&id, &text, &to_sql(decision.decided_ms), &to_sql(now_ms)],
            )
            .await
            .map_err(StoreError::new)?;
        if decided.is_some() {
            self.wrote().await;
            return Ok(DecideOutcome::Decided);
        }
        Ok(match self.approval(id).await? {
            None => DecideOutcome::Invalid,
            Some(entry) if entry.approval.decision.is_some() || entry.used_ms.is_some() => {
                DecideOutcome::AlreadyDecided
            }
            Some(_) => DecideOutcome::Expired,
        })
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        Ok(self
            .approvals_where("id = $1", &[&id])
            .await?
            .into_iter()
            .next())
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        self.approvals_where(
            "decided_ms IS NOT NULL ORDER BY decided_ms DESC, id LIMIT $1",
            &[&limit_sql(limit)],
        )
        .await
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        let text = serde_json::to_string(result).map_err(StoreError::new)?;
        let client = self.client().await?;
        client
            .execute(
                "UPDATE toolcall_approvals SET result = $2 WHERE id = $1 AND decision IS NOT NULL",
                &[&id, &text],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(())
    }

    /// Waits on a connection of its own that `LISTEN`s on
    /// [`DECISION_CHANNEL`]: a decision wakes it at once. It also looks
    /// again every 2 seconds, whatever it heard.
    async fn wait_approval(
        &self,
        id: &str,
        until_ms: u64,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        let (client, mut connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .map_err(StoreError::new)?;
        let (woken, mut wake) = tokio::sync::mpsc::unbounded_channel::<String>();
        let driver = tokio::spawn(async move {
            while let Some(Ok(message)) =
                std::future::poll_fn(|cx| connection.poll_message(cx)).await
            {
                if let AsyncMessage::Notification(notification) = message
                    && woken.send(notification.payload().to_owned()).is_err()
                {
                    break;
                }
            }
        });
        let waited = async {
            client
                .batch_execute(&format!("LISTEN {DECISION_CHANNEL}"))
                .await
                .map_err(StoreError::new)?;
            loop {
                // Read after LISTEN: a decision made before it is seen here.
                let entry = self.approval(id).await?;
                let now = now_ms();
                let settled = entry
                    .as_ref()
                    .is_none_or(|e| e.approval.decision.is_some() || e.used_ms.is_some());
                if settled || now >= until_ms {
                    return Ok(entry);
                }
                let pause = Duration::from_millis(until_ms - now).min(WAIT_RECHECK);
                let _ = tokio::time::timeout(pause, async {
                    while let Some(payload) = wake.recv().await {
                        if payload == id {
                            return;
                        }
                    }
                    // The connection dropped: wait out the pause.
                    std::future::pending::<()>().await;
                })
                .await;
            }
        }
        .await;
        driver.abort();
        waited
    }

    async fn lock_resource(
        &self,
        resource: &str,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        // One statement: taken if free, held by `holder`, or run out.
        let locked = client
            .query_opt(
                "INSERT INTO toolcall_locks (resource_key, resource, holder, until_ms)
                 VALUES ($1, $2, $3, $5)
                 ON CONFLICT (resource_key) DO UPDATE SET holder = EXCLUDED.holder, until_ms = EXCLUDED.until_ms
                 WHERE toolcall_locks.holder = EXCLUDED.holder OR toolcall_locks.until_ms <= $4
                 RETURNING 1",
                &[
                    &session_key(resource),
                    &resource,
                    &holder,
                    &to_sql(now_ms),
                    &to_sql(now_ms.saturating_add(lease_ms)),
                ],
            )
            .await
            .map_err(StoreError::new)?
            .is_some();
        if locked {
            self.wrote().await;
        }
        Ok(locked)
    }

    async fn unlock_resource(&self, resource: &str, holder: &str) -> Result<(), StoreError> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM toolcall_locks WHERE resource_key = $1 AND holder = $2",
                &[&session_key(resource), &holder],
            )
            .await
            .map_err(StoreError::new)?;
        Ok(())
    }
}
