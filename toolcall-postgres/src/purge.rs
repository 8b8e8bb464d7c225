//! Retention and purging: what has expired is deleted, a batch at a time
//! as the store is written, or all at once.

use std::sync::atomic::Ordering;
use std::time::Duration;

use toolcall_core::store::{StoreError, now_ms};

use crate::{PostgresStore, to_sql};

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

/// Rows of each kind one automatic purge deletes at most, so that a write
/// that triggers it stays short.
const PURGE_BATCH: i64 = 10_000;

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
    pub(crate) async fn purge_at_most(&self, limit: Option<i64>) -> Result<Purged, StoreError> {
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
    pub(crate) async fn wrote(&self) {
        let writes = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        if self.purge_every > 0 && writes.is_multiple_of(self.purge_every) {
            let _ = self.purge_at_most(Some(PURGE_BATCH)).await;
        }
    }
}
