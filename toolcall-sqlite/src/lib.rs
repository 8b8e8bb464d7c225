//! A durable [`Store`](toolcall_ledger::store::Store) for [toolcall](https://docs.rs/toolcall) on embedded
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
//! # fn registry() -> toolcall::Registry { toolcall::Registry::default() }
//! use toolcall::Dispatcher;
//! use toolcall_sqlite::SqliteStore;
//!
//! let store = SqliteStore::open("toolcall.db")?;
//! let dispatcher = Dispatcher::builder(registry(), Arc::new(())).store(store).build()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Calls run on the calling task: each is a few local SQLite statements,
//! well under a millisecond on a local disk. On a multi-threaded tokio
//! runtime (the `multi-thread` feature, on by default) the statements of a
//! call that writes run off the runtime's async threads
//! (`block_in_place`), since they may wait for another connection's write
//! lock. A read-only call alone in its conversation (a stateless request's)
//! reads on a second connection, which only reads: at once on the calling
//! thread, no thread switched, while this process's writes wait for the
//! lock; off the async threads like the rest only when SQLite would make it
//! wait. So do the other reads that write nothing (the inbox's listings and
//! approvals, a conversation's step, the controls and their history, a
//! rate's count, an approval's signatures): an operator's inbox does not
//! wait for a call that waits for the lock.
//!
//! # What the file holds
//!
//! | table | one row per | key |
//! |---|---|---|
//! | `toolcall_steps` | session: its step count | [`session_key`] of the session id (fixed length, whatever the host chose) |
//! | `toolcall_calls` | idempotency key: how often the call was made | the key |
//! | `toolcall_records` | idempotency key: its state, `in_flight` (with the lease's end), `completed` (with the result) or `in_doubt` | the key |
//! | `toolcall_approvals` | approval: pending (and why it asks), then a person's decision (the inbox), when a call used it up and what came of it, with the session as given, indexed by its [`session_key`] | the question id |
//! | `toolcall_locks` | resource: its holder and the lease's end | [`session_key`] of the resource |
//! | `toolcall_taint` | session and fingerprint of an untrusted output's value (an empty one marks the session, and keeps where the taint came from: the newest sources, bounded, in `sources`) | [`session_key`] of the session id, and the fingerprint (a hex digest, never the text) |
//! | `toolcall_controls` | the operators' controls (one row): their version and document | |
//! | `toolcall_controls_history` | version of the controls written: who, when, what in words | the version |
//! | `toolcall_rates` | rate limit's bucket and fixed window: its count and end | [`session_key`] of the bucket, and the window's start |
//! | `toolcall_signatures` | approval and person who signed it, with the signing order | the question id, and the signer |
//!
//! A key that is in doubt is claimed like a free one; a release leaves it
//! (and a completed key) as it is. A claim whose lease ran out with no
//! outcome is in doubt: `outcome` says so, and `claim` turns it in doubt.
//!
//! [`session_key`]: toolcall_ledger::store::session_key
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
//! * the taint of untrusted output, untouched for the retention window;
//! * rate limits' windows that ended, and the signatures of approvals no
//!   longer kept.
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

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod approvals;
mod begin;
mod calls;
mod controls;
mod locks;
mod purge;
mod schema;
mod taint;

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use toolcall_ledger::store::{
    ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, Claim, ControlsChange,
    ControlsWrite, DecideOutcome, DecisionWrite, Key, Lease, OpenBounds, PendingApproval,
    PendingPage, PendingQuery, RateWindow, SignOutcome, Signature, SignatureWrite, StoreError,
    StoredControls, TakeApproval,
};

use schema::{migrate, retry_busy};
use toolcall_ledger::store::ControlStore;
use toolcall_ledger::store::QuestionStore;
pub use toolcall_sql::purge::Purged;
use toolcall_sql::purge::Retention;
use toolcall_sql::record::{self, ClaimStep};
use toolcall_sql::{from_sql, limit_sql, schema::VERSION, to_sql};

/// How long a statement waits for another connection's lock once the store is open.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`SqliteStore::open`] keeps trying while other connections hold
/// the file (switching it to WAL, creating or upgrading its tables).
const OPEN_DEADLINE: Duration = Duration::from_secs(10);

/// The pipeline's memory in a SQLite database file.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// A second connection to the file, which only reads (`query_only`):
    /// a read alone in its conversation and the store's other reads run on
    /// it, beside this process's writes ([`SqliteStore::read`]). `None` for
    /// a database in memory, which one connection alone can see.
    reader: Option<Mutex<Connection>>,
    retention: Retention,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, with write-ahead
    /// logging, and creates or upgrades the tables.
    ///
    /// Processes opening one new file at the same moment are safe: while
    /// another connection holds the file's lock, opening waits and tries
    /// again, for at most 10 seconds in all.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let mut store =
            SqliteStore::with_connection(Connection::open(path).map_err(StoreError::new)?)?;
        // The file SQLite opened: none for a database in memory or a
        // temporary one (`":memory:"`, `""`), which no second connection
        // would see: that store reads on its one connection.
        let Some(file) = store
            .conn()
            .path()
            .filter(|file| !file.is_empty())
            .map(str::to_owned)
        else {
            return Ok(store);
        };
        // The file is in WAL mode and up to date by now.
        let reader = Connection::open(&file).map_err(StoreError::new)?;
        reader
            .pragma_update(None, "query_only", true)
            .map_err(StoreError::new)?;
        // Asked at once first (rusqlite opens with a busy timeout of 5 s).
        reader
            .busy_timeout(Duration::ZERO)
            .map_err(StoreError::new)?;
        store.reader = Some(Mutex::new(reader));
        Ok(store)
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
        let version = if version < VERSION {
            retry_busy(&mut conn, deadline, migrate)?
        } else {
            version
        };
        if version > VERSION {
            return Err(toolcall_sql::schema::too_new(
                "the database's schema",
                version,
                "toolcall-sqlite",
                "open it",
            ));
        }
        conn.busy_timeout(BUSY_TIMEOUT).map_err(StoreError::new)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            reader: None,
            retention: Retention::default(),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `read`, statements that only read, on the reading connection
    /// (the store's one connection for a database in memory).
    ///
    /// At once, where it is called, when that connection is free and
    /// SQLite answers without waiting (a busy timeout of zero: in WAL mode
    /// a read waits for nobody's write lock, so this is the rule): a read
    /// costs no thread switch. Otherwise, and again when SQLite answered
    /// "busy", as every other statement runs ([`off_runtime`]), waiting
    /// for the connection and for SQLite's locks as long as they do.
    fn read<T>(
        &self,
        read: impl Fn(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Some(reader) = &self.reader else {
            return off_runtime(|| read(&self.conn()));
        };
        let free = match reader.try_lock() {
            Ok(conn) => Some(conn),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(conn) = free {
            match read(&conn) {
                Err(error) if would_wait(&error) => {}
                done => return done,
            }
        }
        off_runtime(|| {
            let conn = reader.lock().unwrap_or_else(PoisonError::into_inner);
            conn.busy_timeout(BUSY_TIMEOUT).map_err(StoreError::new)?;
            let done = read(&conn);
            // Back to answering at once, for the next read.
            conn.busy_timeout(Duration::ZERO).map_err(StoreError::new)?;
            done
        })
    }

    /// Runs one statement on the store's connection: the rows it changed.
    fn execute(&self, sql: &str, params: impl rusqlite::Params) -> Result<usize, StoreError> {
        self.conn().execute(sql, params).map_err(StoreError::new)
    }

    /// [`CallStore::claim`], keeping `question` (its JSON text) with a claim it
    /// acquires ([`CallStore::claim_asking`]), and nothing with one it does not.
    fn claim_keeping(
        &self,
        key: &Key,
        lease: Lease,
        question: Option<&str>,
    ) -> Result<Claim, StoreError> {
        let Lease { now_ms, lease_ms } = lease;
        let key = key.as_str();
        let claim = {
            let mut conn = self.conn();
            let tx = immediate(&mut conn)?;
            let row: Option<(String, i64, Option<String>)> = tx
                .query_row(
                    "SELECT state, until_ms, result FROM toolcall_records WHERE key = ?1",
                    [key],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .optional()
                .map_err(StoreError::new)?;
            let record = row
                .as_ref()
                .map(|(state, until, result)| (state.as_str(), *until, result.as_deref()));
            let claim = match record::claim_step(record, to_sql(now_ms))? {
                ClaimStep::Answer(claim) => claim,
                ClaimStep::Abandon => {
                    tx.execute(
                        "UPDATE toolcall_records SET state = 'in_doubt', touched_ms = ?2 WHERE key = ?1",
                        params![key, to_sql(now_ms)],
                    )
                    .map_err(StoreError::new)?;
                    Claim::Abandoned
                }
                ClaimStep::Acquire => {
                    let asked_ms = question.map(|_| to_sql(now_ms));
                    tx.execute(
                        "INSERT INTO toolcall_records
                             (key, state, until_ms, result, touched_ms, question, asked_ms)
                         VALUES (?1, 'in_flight', ?2, NULL, ?3, ?4, ?5)
                         ON CONFLICT (key) DO UPDATE SET state = 'in_flight', until_ms = ?2,
                             result = NULL, touched_ms = ?3, question = ?4, asked_ms = ?5",
                        params![
                            key,
                            to_sql(now_ms.saturating_add(lease_ms)),
                            to_sql(now_ms),
                            question,
                            asked_ms
                        ],
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

    fn count(&self, table: &str, column: &str, id: &str, now_ms: u64) -> Result<u64, StoreError> {
        let count = count_in(&self.conn(), table, column, id, to_sql(now_ms))?;
        self.wrote();
        Ok(count)
    }
}

/// Counts one more of `id` in `table` (keyed by `column`), at `now`,
/// through `conn` (the store's connection, or a transaction on it): the
/// new count.
fn count_in(
    conn: &Connection,
    table: &str,
    column: &str,
    id: &str,
    now: i64,
) -> Result<u64, StoreError> {
    let sql = format!(
        "INSERT INTO {table} ({column}, count, touched_ms) VALUES (?1, 1, ?2)
         ON CONFLICT ({column}) DO UPDATE SET count = count + 1, touched_ms = excluded.touched_ms
         RETURNING count"
    );
    conn.prepare_cached(&sql)
        .and_then(|mut s| s.query_row(params![id, now], |row| row.get(0)))
        .map(from_sql)
        .map_err(StoreError::new)
}

/// Whether `error` is SQLite's "busy" or "locked": the statement would
/// have waited for another connection.
fn would_wait(error: &StoreError) -> bool {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<rusqlite::Error>())
        .is_some_and(schema::is_busy)
}

/// A transaction on `conn` that takes the file's write lock from its first
/// statement (`IMMEDIATE`): its reads and writes are one step for every
/// connection.
fn immediate(conn: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::new)
}

/// Runs a store operation's synchronous statements: on a multi-threaded
/// runtime off its async threads (`block_in_place`: a call waiting for
/// another connection's write lock does not stall every other task), else
/// where it is (a current-thread runtime has no other thread to give them).
fn off_runtime<T>(work: impl FnOnce() -> T) -> T {
    #[cfg(feature = "multi-thread")]
    if tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
    {
        return tokio::task::block_in_place(work);
    }
    work()
}

impl QuestionStore for SqliteStore {
    async fn put_approval(&self, a: &PendingApproval) -> Result<(), StoreError> {
        off_runtime(|| approvals::put(self, a))
    }

    async fn take_approval(&self, taking: &ApprovalUse<'_>) -> Result<TakeApproval, StoreError> {
        off_runtime(|| approvals::take(self, taking))
    }

    async fn pending_approvals(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PendingApproval>, StoreError> {
        self.read(|conn| {
            let entries = approvals::approvals_where(
                conn,
                "decision IS NULL AND used_ms IS NULL AND expires_ms > ?1
             ORDER BY created_ms, id LIMIT ?2",
                params![to_sql(now_ms), limit_sql(limit)],
            )?;
            Ok(entries.into_iter().map(|entry| entry.approval).collect())
        })
    }

    fn ask_approval(
        &self,
        approval: &PendingApproval,
        bounds: impl Into<OpenBounds> + Send,
    ) -> impl Future<Output = Result<AskApproval, StoreError>> + Send {
        let bounds = bounds.into();
        async move { off_runtime(|| approvals::ask(self, approval, bounds)) }
    }

    async fn find_approval(
        &self,
        lookup: &ApprovalLookup<'_>,
    ) -> Result<Option<ApprovalEntry>, StoreError> {
        self.read(|conn| approvals::find(conn, lookup))
    }

    async fn pending_page(&self, query: &PendingQuery<'_>) -> Result<PendingPage, StoreError> {
        self.read(|conn| approvals::page(conn, query))
    }

    async fn decide_approval(
        &self,
        deciding: &DecisionWrite<'_>,
    ) -> Result<DecideOutcome, StoreError> {
        off_runtime(|| approvals::decide(self, deciding))
    }

    async fn approval(&self, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
        self.read(|conn| approvals::get(conn, id))
    }

    async fn decided_approvals(&self, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
        self.read(|conn| {
            approvals::approvals_where(
                conn,
                "decided_ms IS NOT NULL ORDER BY decided_ms DESC, id LIMIT ?1",
                [limit_sql(limit)],
            )
        })
    }

    async fn settle_approval(&self, id: &str, result: &ApprovalResult) -> Result<(), StoreError> {
        off_runtime(|| approvals::settle(self, id, result))
    }

    async fn give_back_approval(&self, id: &str) -> Result<bool, StoreError> {
        off_runtime(|| approvals::give_back(self, id))
    }

    /// One `IMMEDIATE` transaction: the signature kept and, for the last
    /// one, the decision recorded.
    async fn sign_approval(&self, signing: &SignatureWrite<'_>) -> Result<SignOutcome, StoreError> {
        off_runtime(|| controls::sign(self, signing))
    }

    async fn signatures(&self, id: &str) -> Result<Vec<Signature>, StoreError> {
        self.read(|conn| controls::signatures(conn, id))
    }
}

impl ControlStore for SqliteStore {
    async fn controls(&self, known: u64) -> Result<Option<StoredControls>, StoreError> {
        self.read(|conn| controls::get(conn, known))
    }

    /// One `IMMEDIATE` transaction: the document written if its version is
    /// `expected`, and the change kept.
    async fn put_controls(&self, write: &ControlsWrite<'_>) -> Result<bool, StoreError> {
        off_runtime(|| controls::put(self, write))
    }

    async fn controls_history(&self, limit: usize) -> Result<Vec<ControlsChange>, StoreError> {
        self.read(|conn| controls::history(conn, limit))
    }

    /// One statement: counted only below the limit.
    async fn take_rate(&self, window: &RateWindow<'_>, limit: u64) -> Result<bool, StoreError> {
        off_runtime(|| controls::take_rate(self, window, limit))
    }

    async fn rate_count(&self, bucket: &str, window_start_ms: u64) -> Result<u64, StoreError> {
        self.read(|conn| controls::rate_count(conn, bucket, window_start_ms))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn busy_timeout_ms(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "busy_timeout", |row| row.get(0))
            .unwrap()
    }

    /// A read that SQLite answers "busy" when asked at once is asked again
    /// as every other statement is, waiting up to the store's busy timeout;
    /// the reading connection answers at once again after it.
    #[test]
    fn a_read_answered_busy_at_once_is_asked_again_with_the_busy_timeout() {
        let dir = std::env::temp_dir().join(format!("toolcall-sqlite-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteStore::open(dir.join("store.db")).unwrap();
        let asked = Cell::new(Vec::new());
        let answer = store.read(|conn| {
            let mut timeouts = asked.take();
            timeouts.push(busy_timeout_ms(conn));
            let first = timeouts.len() == 1;
            asked.set(timeouts);
            if first {
                Err(StoreError::new(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    Some("database is locked".into()),
                )))
            } else {
                Ok(42)
            }
        });
        assert_eq!(answer.unwrap(), 42);
        let waited = i64::try_from(BUSY_TIMEOUT.as_millis()).unwrap();
        assert_eq!(asked.take(), vec![0, waited]);
        let reader = store.reader.as_ref().unwrap().lock().unwrap();
        assert_eq!(busy_timeout_ms(&reader), 0);
        // Any other error is the answer, asked once.
        drop(reader);
        let calls = Cell::new(0);
        let refused = store.read(|_| {
            calls.set(calls.get() + 1);
            Err::<(), _>(StoreError::new(rusqlite::Error::QueryReturnedNoRows))
        });
        assert!(refused.is_err());
        assert_eq!(calls.get(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
