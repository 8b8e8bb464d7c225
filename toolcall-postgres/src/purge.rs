//! Retention and purging: what has expired is deleted, a batch at a time
//! as the store is written, or all at once.

use std::sync::LazyLock;
use std::time::Duration;

use tokio_postgres::types::ToSql;
use toolcall_ledger::store::{StoreError, now_ms};
use toolcall_sql::purge::{self, Purged};
use toolcall_sql::{count_sql, to_sql};

use crate::PostgresStore;

/// One purge: every kind in one statement, at most `$3` rows of each (all
/// for NULL), skipping rows another transaction holds. `$1` is the
/// retention's cutoff, `$2` now. The conditions are repeated outside the
/// subqueries so that a row changed meanwhile is checked again.
static PURGE: LazyLock<String> = LazyLock::new(|| {
    let deletes = purge::KINDS.map(|kind| {
        let condition = kind.condition("$1", "$2");
        format!(
            "{name} AS (
    DELETE FROM {table} WHERE ({key}) IN (
        SELECT {key} FROM {table} WHERE {condition}
        LIMIT $3 FOR UPDATE SKIP LOCKED)
    AND {condition}
    RETURNING 1
)",
            name = kind.name,
            table = kind.table,
            key = kind.key,
        )
    });
    let counts = purge::KINDS.map(|kind| format!("(SELECT count(*) FROM {})", kind.name));
    format!("WITH {} SELECT {}", deletes.join(", "), counts.join(", "))
});

impl PostgresStore {
    /// Keeps steps, call counts and records for `retention` after their
    /// last use (24 hours by default).
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention.set_window(retention);
        self
    }

    /// Deletes, now and all at once, what is older than the retention window
    /// (but never a claim whose lease is running), approvals past their
    /// expiry and resource locks whose lease ran out. The store also does it
    /// by itself, a batch at a time: see [`purge_every`](PostgresStore::purge_every).
    pub async fn purge(&self) -> Result<Purged, StoreError> {
        self.purge_at_most(None).await
    }

    /// Purges automatically after every `writes` writes through this handle
    /// (1000 by default); 0 never does, leaving it to [`purge`](PostgresStore::purge).
    pub fn purge_every(mut self, writes: u64) -> Self {
        self.retention.set_every(writes);
        self
    }

    /// Deletes at most `limit` rows of each kind (all of them for `None`),
    /// in one statement.
    pub(crate) async fn purge_at_most(&self, limit: Option<i64>) -> Result<Purged, StoreError> {
        let now = now_ms();
        let cutoff = self.retention.cutoff(now);
        let client = self.client().await?;
        let row = client
            .query_one(PURGE.as_str(), &[&cutoff, &to_sql(now), &limit])
            .await
            .map_err(StoreError::new)?;
        Ok(purge::purged(std::array::from_fn(|i| {
            count_sql(row.get(i))
        })))
    }

    /// Counts one write; every `purge_every`-th purges a batch (its
    /// failure is not the writer's: the next turn tries again).
    pub(crate) async fn wrote(&self) {
        if self.retention.wrote() {
            let _ = self.purge_at_most(Some(purge::BATCH)).await;
        }
    }

    /// Runs `sql`, a write that returns a row only when it changed
    /// something (`RETURNING` of a conditional insert or update), and
    /// counts it as a write when it did: whether it did.
    pub(crate) async fn wrote_if(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let written = client
            .query_opt(sql, params)
            .await
            .map_err(StoreError::new)?
            .is_some();
        if written {
            self.wrote().await;
        }
        Ok(written)
    }
}
