//! A durable [`Store`] for [toolcall](https://docs.rs/toolcall) on embedded
//! SQLite (bundled: nothing to install).
//!
//! Step counts, duplicate counts, idempotency records, pending approvals and
//! resource locks live in one database file, so a restarted process replays
//! what it did before it stopped, and several processes on one machine share
//! one truth. Every claim and every use of an approval is one `IMMEDIATE`
//! transaction, and every resource lock one statement: two processes racing
//! on one key see one winner.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # fn registry() -> toolcall_core::Registry { toolcall_core::Registry::default() }
//! use toolcall_core::Dispatcher;
//! use toolcall_sqlite::SqliteStore;
//!
//! let store = SqliteStore::open("toolcall.db")?;
//! let dispatcher = Dispatcher::builder(registry(), Arc::new(())).store(store).build()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Calls run on the calling task: each is a few local SQLite statements,
//! well under a millisecond on a local disk.
//!
//! # What the file holds
//!
//! | table | one row per | key |
//! |---|---|---|
//! | `toolcall_steps` | session: its step count | [`session_key`] of the session id (fixed length, whatever the host chose) |
//! | `toolcall_calls` | idempotency key: how often the call was made | the key |
//! | `toolcall_records` | idempotency key: its state, `in_flight` (with the lease's end), `completed` (with the result) or `in_doubt` | the key |
//! | `toolcall_approvals` | approval: pending (and why it asks), then a person's decision (the inbox), when a call used it up and what came of it, with the session as given | the confirmation id |
//! | `toolcall_locks` | resource: its holder and the lease's end | [`session_key`] of the resource |
//! | `toolcall_taint` | session and fingerprint of an untrusted output's value (an empty one marks the session) | [`session_key`] of the session id, and the fingerprint (a hex digest, never the text) |
//!
//! A key that is in doubt is claimed like a free one; a release leaves it
//! (and a completed key) as it is.
//!
//! # Purging
//!
//! The store deletes what has expired by itself: every
//! [`purge_every`](SqliteStore::purge_every) writes through a handle (1000 by
//! default), one transaction deletes at most 10 000 rows of each kind among
//!
//! * steps, call counts and records untouched for the
//!   [`retention`](SqliteStore::retention) window (24 hours by default),
//!   except a claim whose lease is still running;
//! * undecided approvals past their expiry, and decided ones (the inbox's
//!   history) once their expiry is older than the retention window;
//! * resource locks whose lease ran out;
//! * the taint of untrusted output, untouched for the retention window.
//!
//! Each is a range scan on an index. [`purge`](SqliteStore::purge) deletes
//! all of it at once, for a timer or a maintenance job. A record dropped this
//! way means an identical call after it runs again, under the same
//! idempotency key.
//!
//! # Schema versions
//!
//! The file's schema version is its `PRAGMA user_version`. Opening a file
//! made by an older version upgrades it, in one `IMMEDIATE` transaction:
//! processes that open the same file at once upgrade it once. The upgrade
//! keeps the columns the previous version uses, so a process still running
//! it keeps working on the file. A file made by a newer version is refused.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use toolcall_core::ToolResult;
use toolcall_core::store::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, Binding, Claim, DecideOutcome,
    PendingApproval, RecordedOutcome, Store, StoreError, TaintHit, TakeApproval, now_ms,
    session_key,
};

/// The schema this version writes: the file's `PRAGMA user_version`.
const SCHEMA_VERSION: i64 = 3;

/// Version 0, the first release's tables. Created if missing, so that a new
/// file and a file from that release take the same upgrades.
const SCHEMA_V0: &str = "
CREATE TABLE IF NOT EXISTS toolcall_steps (
    session    TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_calls (
    key        TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_records (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    until_ms   INTEGER NOT NULL,
    result     TEXT,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_approvals (
    id         TEXT PRIMARY KEY,
    session    TEXT NOT NULL,
    caller     TEXT NOT NULL,
    tool       TEXT NOT NULL,
    digest     TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    step       INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_records_touched ON toolcall_records (touched_ms);
";

/// Version 1: the `in_doubt` state (SQLite cannot change a CHECK constraint,
/// so the records table is rebuilt), steps keyed by [`session_key`] (the
/// table is rebuilt by [`rekey_steps`]), resource locks, and the indexes the
/// purge scans.
const UPGRADE_V1: &str = "
CREATE TABLE toolcall_records_v1 (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('in_flight', 'completed', 'in_doubt')),
    until_ms   INTEGER NOT NULL,
    result     TEXT,
    touched_ms INTEGER NOT NULL
);
INSERT INTO toolcall_records_v1 (key, state, until_ms, result, touched_ms)
    SELECT key, state, until_ms, result, touched_ms FROM toolcall_records;
DROP TABLE toolcall_records;
ALTER TABLE toolcall_records_v1 RENAME TO toolcall_records;
CREATE INDEX IF NOT EXISTS toolcall_records_touched ON toolcall_records (touched_ms);
CREATE TABLE toolcall_steps_v1 (
    session    TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_calls_touched ON toolcall_calls (touched_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_expires ON toolcall_approvals (expires_ms);
CREATE TABLE IF NOT EXISTS toolcall_locks (
    resource_key TEXT PRIMARY KEY,
    resource     TEXT NOT NULL,
    holder       TEXT NOT NULL,
    until_ms     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_locks_until ON toolcall_locks (until_ms);
";

/// Version 2: a person's decision kept with its approval (the inbox), when
/// a call used it up and what came of it, and the indexes the inbox reads.
/// Columns are only added, so a process still at version 1 keeps working.
const UPGRADE_V2: &str = "
ALTER TABLE toolcall_approvals ADD COLUMN decision TEXT;
ALTER TABLE toolcall_approvals ADD COLUMN decided_ms INTEGER;
ALTER TABLE toolcall_approvals ADD COLUMN used_ms INTEGER;
ALTER TABLE toolcall_approvals ADD COLUMN result TEXT;
CREATE INDEX IF NOT EXISTS toolcall_approvals_created ON toolcall_approvals (created_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_decided ON toolcall_approvals (decided_ms);
";

/// Version 3: the taint of untrusted output, per session: one row marks
/// the session (`print` empty), one more per fingerprint (hex digests of
/// the values, never the text), purged with the session's other rows; and
/// why an approval asks a person (`reason`, and the tainted arguments as a
/// JSON array in `tainted`). Columns are only added, so a process still at
/// version 2 keeps working.
const UPGRADE_V3: &str = "
ALTER TABLE toolcall_approvals ADD COLUMN reason TEXT;
ALTER TABLE toolcall_approvals ADD COLUMN tainted TEXT;
CREATE TABLE IF NOT EXISTS toolcall_taint (
    session    TEXT NOT NULL,
    print      TEXT NOT NULL,
    touched_ms INTEGER NOT NULL,
    PRIMARY KEY (session, print)
);
CREATE INDEX IF NOT EXISTS toolcall_taint_touched ON toolcall_taint (touched_ms);
";

/// The columns of an approval, in the order [`read_entry`] reads them.
const APPROVAL_COLUMNS: &str = "id, session, caller, tool, digest, arguments, step, created_ms, \
                                expires_ms, decision, used_ms, result, reason, tainted";

/// How long a statement waits for another connection's lock once the store is open.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`SqliteStore::open`] keeps trying while other connections hold
/// the file (switching it to WAL, creating or upgrading its tables).
const OPEN_DEADLINE: Duration = Duration::from_secs(10);

/// Writes through one handle between two automatic purges, by default.
const PURGE_EVERY: u64 = 1000;

/// Rows of each kind one automatic purge deletes at most, so that a write
/// that triggers it stays short.
const PURGE_BATCH: i64 = 10_000;

/// The pipeline's memory in a SQLite database file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
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

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, with write-ahead
    /// logging, and creates or upgrades the tables.
    ///
    /// Processes opening one new file at the same moment are safe: while
    /// another connection holds the file's lock, opening waits and tries
    /// again, for at most 10 seconds in all.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        SqliteStore::with_connection(Connection::open(path).map_err(StoreError::new)?)
    }

    /// A private database in memory: the semantics without the durability.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        SqliteStore::with_connection(Connection::open_in_memory().map_err(StoreError::new)?)
    }

    fn with_connection(mut conn: Connection) -> Result<Self, StoreError> {
        let deadline = Instant::now() + OPEN_DEADLINE;
        // WAL: readers do not block the writer; a committed transaction
        // survives the process being killed. Switching a new file to WAL
        // can fail at once with "database is locked" while another
        // connection does the same, without waiting: hence the retries.
        retry_busy(&mut conn, deadline, |conn| {
            conn.pragma_update(None, "journal_mode", "WAL")
        })?;
        retry_busy(&mut conn, deadline, |conn| {
            conn.pragma_update(None, "synchronous", "NORMAL")
        })?;
        let version = retry_busy(&mut conn, deadline, |conn| {
            conn.pragma_query_value(None, "user_version", |row| row.get::<_, i64>(0))
        })?;
        // The fast path, for a file already up to date: no write lock taken.
        let version = if version < SCHEMA_VERSION {
            retry_busy(&mut conn, deadline, migrate)?
        } else {
            version
        };
        if version > SCHEMA_VERSION {
            return Err(StoreError::new(format!(
                "the database's schema is version {version}, newer than this toolcall-sqlite \
                 knows ({SCHEMA_VERSION}): open it with a newer version"
            )));
        }
        conn.busy_timeout(BUSY_TIMEOUT).map_err(StoreError::new)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            retention_ms: 24 * 60 * 60 * 1000,
            purge_every: PURGE_EVERY,
            writes: AtomicU64::new(0),
        })
    }

    /// Keeps steps, call counts and records for `retention` after their
    /// last use (24 hours by default).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention_ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Purges automatically after every `writes` writes through this handle
    /// (1000 by default); 0 never does, leaving it to [`purge`](SqliteStore::purge).
    pub fn purge_every(mut self, writes: u64) -> Self {
        self.purge_every = writes;
        self
    }

    /// Deletes, now and all at once, what is older than the retention window
    /// (but never a claim whose lease is running), approvals past their
    /// expiry and resource locks whose lease ran out. The store also does it
    /// by itself, a batch at a time: see [`purge_every`](SqliteStore::purge_every).
    pub fn purge(&self) -> Result<Purged, StoreError> {
        self.purge_at_most(-1)
    }

    /// Deletes at most `limit` rows of each kind (all of them for -1), in one
    /// transaction.
    fn purge_at_most(&self, limit: i64) -> Result<Purged, StoreError> {
        let now = now_ms();
        let cutoff = to_sql(now.saturating_sub(self.retention_ms));
        let now = to_sql(now);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::new)?;
        // ?1: the retention's cutoff, ?2: now, ?3: the limit.
        let delete = |table: &str, condition: &str| {
            tx.execute(
                &format!(
                    "DELETE FROM {table} WHERE rowid IN
                     (SELECT rowid FROM {table} WHERE {condition} LIMIT ?3)"
                ),
                params![cutoff, now, limit],
            )
            .map_err(StoreError::new)
        };
        let purged = Purged {
            steps: delete("toolcall_steps", "touched_ms < ?1")?,
            calls: delete("toolcall_calls", "touched_ms < ?1")?,
            records: delete(
                "toolcall_records",
                "touched_ms < ?1 AND (state <> 'in_flight' OR until_ms <= ?2)",
            )?,
            // Undecided approvals go at their expiry; decided ones stay in
            // the inbox's history for the retention window after it.
            approvals: delete(
                "toolcall_approvals",
                "expires_ms <= ?2 AND (decision IS NULL OR expires_ms < ?1)",
            )?,
            locks: delete("toolcall_locks", "until_ms <= ?2")?,
            taint: delete("toolcall_taint", "touched_ms < ?1")?,
        };
        tx.commit().map_err(StoreError::new)?;
        Ok(purged)
    }

    /// Counts one write; every `purge_every`-th purges a batch. A failed
    /// purge is not the caller's failure (its write is done): the next turn
    /// tries again.
    fn wrote(&self) {
        let writes = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        if self.purge_every > 0 && writes.is_multiple_of(self.purge_every) {
            let _ = self.purge_at_most(PURGE_BATCH);
        }
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, table: &str, column: &str, id: &str) -> Result<u64, StoreError> {
        let sql = format!(
            "INSERT INTO {table} ({column}, count, touched_ms) VALUES (?1, 1, ?2)
             ON CONFLICT ({column}) DO UPDATE SET count = count + 1, touched_ms = excluded.touched_ms
             RETURNING count"
        );
        let count: i64 = self
            .conn()
            .query_row(&sql, params![id, to_sql(now_ms())], |row| row.get(0))
            .map_err(StoreError::new)?;
        self.wrote();
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

/// Runs `step` until it does not fail with "database is busy/locked", with
/// a growing pause in between, until `deadline`; each attempt waits for the
/// lock at most until the deadline too.
fn retry_busy<T>(
    conn: &mut Connection,
    deadline: Instant,
    mut step: impl FnMut(&mut Connection) -> rusqlite::Result<T>,
) -> Result<T, StoreError> {
    let mut pause = Duration::from_millis(1);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        conn.busy_timeout(left).map_err(StoreError::new)?;
        match step(conn) {
            Err(error) if is_busy(&error) && left > pause => {
                std::thread::sleep(pause + jitter(pause));
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            result => return result.map_err(StoreError::new),
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Up to `pause` more, so that connections that collided do not collide again.
fn jitter(pause: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    pause.mul_f64(f64::from(nanos % 1000) / 1000.0)
}

/// Brings the schema up to [`SCHEMA_VERSION`] in one `IMMEDIATE`
/// transaction, and returns the version it found the file at (or made).
fn migrate(conn: &mut Connection) -> rusqlite::Result<i64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found >= SCHEMA_VERSION {
        // Another connection upgraded it while this one waited.
        return Ok(found);
    }
    if found < 1 {
        tx.execute_batch(SCHEMA_V0)?;
        tx.execute_batch(UPGRADE_V1)?;
        rekey_steps(&tx)?;
    }
    if found < 2 {
        tx.execute_batch(UPGRADE_V2)?;
    }
    if found < 3 {
        tx.execute_batch(UPGRADE_V3)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(SCHEMA_VERSION)
}

/// Version 1 keys steps by [`session_key`]: moves the counts of version 0
/// (keyed by the session itself) into `toolcall_steps_v1` under their new
/// key, and puts that table in place, so a session keeps its count.
fn rekey_steps(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    {
        let mut select = tx.prepare("SELECT session, count, touched_ms FROM toolcall_steps")?;
        let mut insert = tx.prepare(
            "INSERT INTO toolcall_steps_v1 (session, count, touched_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (session) DO UPDATE SET count = max(count, excluded.count)",
        )?;
        let mut rows = select.query([])?;
        while let Some(row) = rows.next()? {
            let session: String = row.get(0)?;
            insert.execute(params![
                session_key(&session),
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?
            ])?;
        }
    }
    tx.execute_batch(
        "DROP TABLE toolcall_steps;
         ALTER TABLE toolcall_steps_v1 RENAME TO toolcall_steps;
         CREATE INDEX IF NOT EXISTS toolcall_steps_touched ON toolcall_steps (touched_ms);",
    )
}

/// SQLite integers are signed; milliseconds since 1970 fit with room to spare.
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

/// One row of [`APPROVAL_COLUMNS`], as the columns hold it.
type ApprovalRow = (
    (String, String, String, String, String, String),
    (i64, i64, i64),
    (Option<String>, Option<i64>, Option<String>),
    (Option<String>, Option<String>),
);

fn approval_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok((
        (
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
        ),
        (row.get(6)?, row.get(7)?, row.get(8)?),
        (row.get(9)?, row.get(10)?, row.get(11)?),
        (row.get(12)?, row.get(13)?),
    ))
}

fn read_entry(row: ApprovalRow) -> Result<ApprovalEntry, StoreError> {
    let ((id, session, caller, tool, digest, arguments), (step, created_ms, expires_ms), rest, why) =
        row;
    let (decision, used_ms, result) = rest;
    let (reason, tainted) = why;
    Ok(ApprovalEntry {
        approval: PendingApproval {
            id,
            session,
            caller,
            tool,
            digest,
            arguments: serde_json::from_str(&arguments).map_err(StoreError::new)?,
            step: from_sql(step),
            created_ms: from_sql(created_ms),
            expires_ms: from_sql(expires_ms),
            decision: json_column::<ApprovalDecision>(decision)?,
            reason,
            tainted: json_column::<Vec<String>>(tainted)?.unwrap_or_default(),
        },
        used_ms: used_ms.map(from_sql),
        result: json_column::<ApprovalResult>(result)?,
    })
}

fn limit_sql(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

impl SqliteStore {
    fn approvals_where(
        &self,
        condition: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<ApprovalEntry>, StoreError> {
        let conn = self.conn();
        let mut statement = conn
            .prepare(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE {condition}"
            ))
            .map_err(StoreError::new)?;
        let rows = statement
            .query_map(params, approval_row)
            .map_err(StoreError::new)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::new)?;
        rows.into_iter().map(read_entry).collect()
    }
}

impl Store for SqliteStore {
    async fn next_step(&self, session: &str) -> Result<u64, StoreError> {
        self.count("toolcall_steps", "session", &session_key(session))
    }

    async fn peek_step(&self, session: &str) -> Result<u64, StoreError> {
        let count: Option<i64> = self
            .conn()
            .query_row(
                "SELECT count FROM toolcall_steps WHERE session = ?1",
                [session_key(session)],
                |row| row.get(0),
            )
            .optional()
            .map_err(StoreError::new)?;
        Ok(count.map_or(0, from_sql))
    }

    async fn add_taint(&self, session: &str, fingerprints: &[String]) -> Result<(), StoreError> {
        let session = session_key(session);
        let now = to_sql(now_ms());
        {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::new)?;
            {
                let mut insert = tx
                    .prepare(
                        "INSERT INTO toolcall_taint (session, print, touched_ms) VALUES (?1, ?2, ?3)
                         ON CONFLICT (session, print) DO UPDATE SET touched_ms = excluded.touched_ms",
                    )
                    .map_err(StoreError::new)?;
                for print in std::iter::once("").chain(fingerprints.iter().map(String::as_str)) {
                    insert
                        .execute(params![session, print, now])
                        .map_err(StoreError::new)?;
                }
            }
            tx.commit().map_err(StoreError::new)?;
        }
        self.wrote();
        Ok(())
    }

    async fn tainted(
        &self,
        session: &str,
        fingerprints: &[String],
    ) -> Result<TaintHit, StoreError> {
        let session = session_key(session);
        let conn = self.conn();
        let mut select = conn
            .prepare_cached("SELECT 1 FROM toolcall_taint WHERE session = ?1 AND print = ?2")
            .map_err(StoreError::new)?;
        let mut has = |print: &str| {
            select
                .exists(params![session, print])
                .map_err(StoreError::new)
        };
        if !has("")? {
            return Ok(TaintHit::default());
        }
        let mut seen = Vec::new();
        for print in fingerprints {
            if !print.is_empty() && has(print)? {
                seen.push(print.clone());
            }
        }
        Ok(TaintHit::new(true, seen))
    }

    async fn count_call(&self, key: &str) -> Result<u64, StoreError> {
        self.count("toolcall_calls", "key", key)
    }

    async fn uncount_call(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE toolcall_calls SET count = max(count - 1, 0) WHERE key = ?1",
                [key],
            )
            .map_err(StoreError::new)?;
        Ok(())
    }

    async fn outcome(&self, key: &str) -> Result<Option<RecordedOutcome>, StoreError> {
        let row: Option<(String, Option<String>)> = self
            .conn()
            .query_row(
                "SELECT state, result FROM toolcall_records
                 WHERE key = ?1 AND state IN ('completed', 'in_doubt')",
                [key],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(StoreError::new)?;
        match row {
            Some((state, Some(result))) if state == "completed" => {
                Ok(Some(RecordedOutcome::Completed(parse_result(&result)?)))
            }
            Some(_) => Ok(Some(RecordedOutcome::InDoubt)),
            None => Ok(None),
        }
    }

    async fn claim(&self, key: &str, now_ms: u64, lease_ms: u64) -> Result<Claim, StoreError> {
        let claim = {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::new)?;
            let row: Option<(String, i64, Option<String>)> = tx
                .query_row(
                    "SELECT state, until_ms, result FROM toolcall_records WHERE key = ?1",
                    [key],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()
                .map_err(StoreError::new)?;
            let claim = match row {
                Some((state, _, Some(result))) if state == "completed" => {
                    Claim::Completed(parse_result(&result)?)
                }
                Some((state, until, _)) if state == "in_flight" && until > to_sql(now_ms) => {
                    Claim::InFlight
                }
                // Free, in doubt, or held by a lease that ran out.
                _ => {
                    tx.execute(
                        "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                         VALUES (?1, 'in_flight', ?2, NULL, ?3)
                         ON CONFLICT (key) DO UPDATE SET state = 'in_flight', until_ms = ?2, result = NULL, touched_ms = ?3",
                        params![key, to_sql(now_ms.saturating_add(lease_ms)), to_sql(now_ms)],
                    )
                    .map_err(StoreError::new)?;
                    Claim::Acquired
                }
            };
            tx.commit().map_err(StoreError::new)?;
            claim
        };
        if claim == Claim::Acquired {
            self.wrote();
        }
        Ok(claim)
    }

    async fn renew(&self, key: &str, now_ms: u64, lease_ms: u64) -> Result<bool, StoreError> {
        let renewed = self
            .conn()
            .execute(
                "UPDATE toolcall_records SET until_ms = ?2, touched_ms = ?3
                 WHERE key = ?1 AND state = 'in_flight'",
                params![key, to_sql(now_ms.saturating_add(lease_ms)), to_sql(now_ms)],
            )
            .map_err(StoreError::new)?;
        Ok(renewed > 0)
    }

    async fn complete(&self, key: &str, result: &ToolResult) -> Result<(), StoreError> {
        let text = serde_json::to_string(result).map_err(StoreError::new)?;
        self.conn()
            .execute(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES (?1, 'completed', 0, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = ?2, touched_ms = ?3",
                params![key, text, to_sql(now_ms())],
            )
            .map_err(StoreError::new)?;
        self.wrote();
        Ok(())
    }

    async fn release(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "DELETE FROM toolcall_records WHERE key = ?1 AND state = 'in_flight'",
                [key],
            )
            .map_err(StoreError::new)?;
        Ok(())
    }

    async fn doubt(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES (?1, 'in_doubt', 0, NULL, ?2)
                 ON CONFLICT (key) DO UPDATE SET state = 'in_doubt', until_ms = 0, result = NULL, touched_ms = ?2
                 WHERE state <> 'completed'",
                params![key, to_sql(now_ms())],
            )
            .map_err(StoreError::new)?;
        self.wrote();
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
        self.conn()
            .execute(
                "INSERT INTO toolcall_approvals
                 (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms,
                  decision, decided_ms, reason, tainted)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    a.id,
                    a.session,
                    a.caller,
                    a.tool,
                    a.digest,
                    arguments,
                    to_sql(a.step),
                    to_sql(a.created_ms),
                    to_sql(a.expires_ms),
                    decision,
                    decided_ms,
                    a.reason,
                    tainted
                ],
            )
            .map_err(StoreError::new)?;
        self.wrote();
        Ok(())
    }

    async fn take_approval(
        &self,
        id: &str,
        binding: &Binding<'_>,
        now_ms: u64,
    ) -> Result<TakeApproval, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::new)?;
        let row = tx
            .query_row(
                &format!("SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE id = ?1"),
                [id],
                approval_row,
            )
            .optional()
            .map_err(StoreError::new)?;
        let Some(row) = row else {
            return Ok(TakeApproval::Invalid);
        };
        let entry = read_entry(row)?;
        if entry.used_ms.is_some() || !binding.matches(&entry.approval) {
            return Ok(TakeApproval::Invalid);
        }
        if entry.approval.decision.is_some() {
            // Kept for the inbox's history, used up.
            tx.execute(
                "UPDATE toolcall_approvals SET used_ms = ?2 WHERE id = ?1",
                params![id, to_sql(now_ms)],
            )
        } else {
            tx.execute("DELETE FROM toolcall_approvals WHERE id = ?1", [id])
        }
        .map_err(StoreError::new)?;
        tx.commit().map_err(StoreError::new)?;
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
        let entries = self.approvals_where(
            "decision IS NULL AND used_ms IS NULL AND expires_ms > ?1
             ORDER BY created_ms, id LIMIT ?2",
            params![to_sql(now_ms), limit_sql(limit)],
        )?;
        Ok(entries.into_iter().map(|entry| entry.approval).collect())
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &ApprovalDecision,
        now_ms: u64,
    ) -> Result<DecideOutcome, StoreError> {
        let text = serde_json::to_string(decision).map_err(StoreError::new)?;
        // One statement: of two decisions at once, one changes the row.
        let decided = self
            .conn()
            .execute(
                "UPDATE toolcall_approvals SET decision = ?2, decided_ms = ?3
                 WHERE id = ?1 AND decision IS NULL AND used_ms IS NULL AND expires_ms > ?4",
                params![id, text, to_sql(decision.decided_ms), to_sql(now_ms)],
            )
            .map_err(StoreError::new)?;
        if decided > 0 {
            self.wrote();
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
        let row = self
            .conn()
            .query_row(
                &format!("SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE id = ?1"),
                [id],
                approval_row,
            )
            .optional()
            .map_err(StoreError::new)?;
        row.map(read_entry).transpose()
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        self.approvals_where(
            "decided_ms IS NOT NULL ORDER BY decided_ms DESC, id LIMIT ?1",
            [limit_sql(limit)],
        )
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        let text = serde_json::to_string(result).map_err(StoreError::new)?;
        self.conn()
            .execute(
                "UPDATE toolcall_approvals SET result = ?2 WHERE id = ?1 AND decision IS NOT NULL",
                params![id, text],
            )
            .map_err(StoreError::new)?;
        Ok(())
    }

    async fn lock_resource(
        &self,
        resource: &str,
        holder: &str,
        now_ms: u64,
        lease_ms: u64,
    ) -> Result<bool, StoreError> {
        // One statement: taken if free, held by `holder`, or run out.
        let locked = self
            .conn()
            .query_row(
                "INSERT INTO toolcall_locks (resource_key, resource, holder, until_ms)
                 VALUES (?1, ?2, ?3, ?5)
                 ON CONFLICT (resource_key) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms
                 WHERE holder = excluded.holder OR until_ms <= ?4
                 RETURNING 1",
                params![
                    session_key(resource),
                    resource,
                    holder,
                    to_sql(now_ms),
                    to_sql(now_ms.saturating_add(lease_ms))
                ],
                |_| Ok(()),
            )
            .optional()
            .map_err(StoreError::new)?
            .is_some();
        if locked {
            self.wrote();
        }
        Ok(locked)
    }

    async fn unlock_resource(&self, resource: &str, holder: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "DELETE FROM toolcall_locks WHERE resource_key = ?1 AND holder = ?2",
                params![session_key(resource), holder],
            )
            .map_err(StoreError::new)?;
        Ok(())
    }
}
