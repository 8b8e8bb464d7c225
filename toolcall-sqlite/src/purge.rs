//! Retention and purging: what has expired is deleted, a batch at a time
//! as the store is written, or all at once.

use std::time::Duration;

use rusqlite::{OptionalExtension, params};
use toolcall_ledger::store::{StoreError, now_ms};
use toolcall_sql::purge::{self, Purged};
use toolcall_sql::to_sql;

use crate::{SqliteStore, immediate};

impl SqliteStore {
    /// Keeps steps, call counts and records for `retention` after their
    /// last use (24 hours by default).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention.set_window(retention);
        self
    }

    /// Deletes, now and all at once, what is older than the retention window
    /// (but never a claim whose lease is running), approvals past their
    /// expiry and resource locks whose lease ran out. The store also does it
    /// by itself, a batch at a time: see [`purge_every`](SqliteStore::purge_every).
    pub fn purge(&self) -> Result<Purged, StoreError> {
        self.purge_at_most(-1)
    }

    /// Purges automatically after every `writes` writes through this handle
    /// (1000 by default); 0 never does, leaving it to [`purge`](SqliteStore::purge).
    pub fn purge_every(mut self, writes: u64) -> Self {
        self.retention.set_every(writes);
        self
    }

    /// Deletes at most `limit` rows of each kind (all of them for -1), in one
    /// transaction.
    pub(crate) fn purge_at_most(&self, limit: i64) -> Result<Purged, StoreError> {
        let now = now_ms();
        let cutoff = self.retention.cutoff(now);
        let now = to_sql(now);
        let mut conn = self.conn();
        let tx = immediate(&mut conn)?;
        // ?1: the retention's cutoff, ?2: now, ?3: the limit.
        let delete = |kind: &purge::Kind| {
            tx.execute(
                &format!(
                    "DELETE FROM {table} WHERE rowid IN
                     (SELECT rowid FROM {table} WHERE {condition}{order} LIMIT ?3)",
                    table = kind.table,
                    condition = kind.condition("?1", "?2"),
                    order = kind.oldest_first(),
                ),
                params![cutoff, now, limit],
            )
            .map_err(StoreError::new)
        };
        let mut counts = [0; purge::KINDS.len()];
        for (count, kind) in counts.iter_mut().zip(&purge::KINDS) {
            *count = delete(kind)?;
        }
        tx.commit().map_err(StoreError::new)?;
        Ok(purge::purged(counts))
    }

    /// Counts one write; every `purge_every`-th purges a batch.
    pub(crate) fn wrote(&self) {
        if self.retention.wrote() {
            let _ = self.purge_at_most(purge::BATCH);
        }
    }

    /// Runs `sql`, a write that returns a row only when it changed
    /// something (`RETURNING` of a conditional insert or update), and
    /// counts it as a write when it did: whether it did.
    pub(crate) fn wrote_if(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<bool, StoreError> {
        // The connection is given back before a purge that this write
        // may start takes it.
        let written = self
            .conn()
            .prepare_cached(sql)
            .and_then(|mut statement| statement.query_row(params, |_| Ok(())).optional())
            .map_err(StoreError::new)?
            .is_some();
        if written {
            self.wrote();
        }
        Ok(written)
    }
}
