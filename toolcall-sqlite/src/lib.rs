//! A durable [`Store`] for [toolcall](https://docs.rs/toolcall) on embedded
//! SQLite (bundled: nothing to install).
//!
//! Step counts, duplicate counts, idempotency records and pending approvals
//! live in one database file, so a restarted process replays what it did
//! before it stopped, and several processes on one machine share one truth.
//! Every claim and every use of an approval is one `IMMEDIATE` transaction:
//! two processes racing on one key see one winner.
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

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use toolcall_core::ToolResult;
use toolcall_core::store::{
    Binding, Claim, PendingApproval, Store, StoreError, TakeApproval, now_ms,
};

const SCHEMA: &str = "
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

/// The pipeline's memory in a SQLite database file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    retention_ms: u64,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, with write-ahead
    /// logging, and creates the tables if they are missing.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        SqliteStore::with_connection(Connection::open(path).map_err(StoreError::new)?)
    }

    /// A private database in memory: the semantics without the durability.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        SqliteStore::with_connection(Connection::open_in_memory().map_err(StoreError::new)?)
    }

    fn with_connection(conn: Connection) -> Result<Self, StoreError> {
        conn.busy_timeout(Duration::from_secs(10))
            .map_err(StoreError::new)?;
        // WAL: readers do not block the writer; a committed transaction
        // survives the process being killed.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(StoreError::new)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(StoreError::new)?;
        conn.execute_batch(SCHEMA).map_err(StoreError::new)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            retention_ms: 24 * 60 * 60 * 1000,
        })
    }

    /// Keeps entries for `retention` after their last use (24 hours by default).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention_ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Deletes what is older than the retention window, and approvals past
    /// their expiry. Run it now and then (a timer, a cron job); nothing is
    /// deleted otherwise.
    pub fn purge(&self) -> Result<usize, StoreError> {
        let now = now_ms();
        let cutoff = to_sql(now.saturating_sub(self.retention_ms));
        let conn = self.conn();
        let mut deleted = 0;
        for table in ["toolcall_steps", "toolcall_calls", "toolcall_records"] {
            deleted += conn
                .execute(
                    &format!("DELETE FROM {table} WHERE touched_ms < ?1"),
                    [cutoff],
                )
                .map_err(StoreError::new)?;
        }
        deleted += conn
            .execute(
                "DELETE FROM toolcall_approvals WHERE expires_ms <= ?1",
                [to_sql(now)],
            )
            .map_err(StoreError::new)?;
        Ok(deleted)
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
        Ok(u64::try_from(count).unwrap_or(0))
    }
}

/// SQLite integers are signed; milliseconds since 1970 fit with room to spare.
fn to_sql(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

fn parse_result(text: &str) -> Result<ToolResult, StoreError> {
    serde_json::from_str(text).map_err(StoreError::new)
}

impl Store for SqliteStore {
    async fn next_step(&self, session: &str) -> Result<u64, StoreError> {
        self.count("toolcall_steps", "session", session)
    }

    async fn count_call(&self, key: &str) -> Result<u64, StoreError> {
        self.count("toolcall_calls", "key", key)
    }

    async fn completed(&self, key: &str) -> Result<Option<ToolResult>, StoreError> {
        let text: Option<String> = self
            .conn()
            .query_row(
                "SELECT result FROM toolcall_records WHERE key = ?1 AND state = 'completed'",
                [key],
                |row| row.get(0),
            )
            .optional()
            .map_err(StoreError::new)?;
        text.map(|text| parse_result(&text)).transpose()
    }

    async fn claim(&self, key: &str, now_ms: u64, lease_ms: u64) -> Result<Claim, StoreError> {
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
        Ok(claim)
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

    async fn put_approval(&self, a: &PendingApproval) -> Result<(), StoreError> {
        let arguments = serde_json::to_string(&a.arguments).map_err(StoreError::new)?;
        self.conn()
            .execute(
                "INSERT INTO toolcall_approvals
                 (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    a.id,
                    a.session,
                    a.caller,
                    a.tool,
                    a.digest,
                    arguments,
                    to_sql(a.step),
                    to_sql(a.created_ms),
                    to_sql(a.expires_ms)
                ],
            )
            .map_err(StoreError::new)?;
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
                "SELECT session, caller, tool, digest, arguments, step, created_ms, expires_ms
                 FROM toolcall_approvals WHERE id = ?1",
                [id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(4)?,
                        row.get::<_, i64>(5)?,
                        row.get::<_, i64>(6)?,
                        row.get::<_, i64>(7)?,
                    ))
                },
            )
            .optional()
            .map_err(StoreError::new)?;
        let Some((session, caller, tool, digest, arguments, step, created_ms, expires_ms)) = row
        else {
            return Ok(TakeApproval::Invalid);
        };
        let approval = PendingApproval {
            id: id.to_owned(),
            session,
            caller,
            tool,
            digest,
            arguments: serde_json::from_str(&arguments).map_err(StoreError::new)?,
            step: u64::try_from(step).unwrap_or(0),
            created_ms: u64::try_from(created_ms).unwrap_or(0),
            expires_ms: u64::try_from(expires_ms).unwrap_or(0),
        };
        if !binding.matches(&approval) {
            return Ok(TakeApproval::Invalid);
        }
        tx.execute("DELETE FROM toolcall_approvals WHERE id = ?1", [id])
            .map_err(StoreError::new)?;
        tx.commit().map_err(StoreError::new)?;
        Ok(if approval.expires_ms <= now_ms {
            TakeApproval::Expired
        } else {
            TakeApproval::Taken(approval)
        })
    }
}
