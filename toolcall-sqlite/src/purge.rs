//! Retention and purging: what has expired is deleted, a batch at a time
//! as the store is written, or all at once.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rusqlite::{TransactionBehavior, params};
use toolcall_core::store::{StoreError, now_ms};

use crate::{SqliteStore, to_sql};

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

impl SqliteStore {
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
    pub(crate) fn purge_at_most(&self, limit: i64) -> Result<Purged, StoreError> {
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
    pub(crate) fn wrote(&self) {
        let writes = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        if self.purge_every > 0 && writes.is_multiple_of(self.purge_every) {
            let _ = self.purge_at_most(PURGE_BATCH);
        }
    }
}
