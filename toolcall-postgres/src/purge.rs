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
/// for NULL), oldest first, skipping rows another transaction holds. `$1`
/// is the retention's cutoff, `$2` now. The store's statements have
/// generic plans, made without the values: found by the condition alone,
/// the rows would be read from the whole table at every batch (the
/// condition's share of the rows unknown); ordered by the condition's
/// indexed column, they are found by that index, and deleted by where
/// they lie (`ctid`), which holds while they are locked. The conditions are
/// repeated outside the subqueries so that a row changed meanwhile is
/// checked again.
static PURGE: LazyLock<String> = LazyLock::new(|| {
    let deletes = purge::KINDS.map(|kind| {
        let condition = kind.condition("$1", "$2");
        format!(
            "{name} AS (
    DELETE FROM {table} WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM {table} WHERE {condition}{order}
        LIMIT $3 FOR UPDATE SKIP LOCKED))
    AND {condition}
    RETURNING 1
)",
            name = kind.name,
            table = kind.table,
            order = kind.oldest_first(),
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

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use tokio_postgres::NoTls;
    use toolcall_testkit::run::{postgres_url, runtime};

    use super::*;

    /// Rows that have not expired, many of each kind a condition's index
    /// serves, laid out in no order of their times (rows are updated where
    /// there is room, so a table's order drifts from its times'), then the
    /// planner's statistics of them.
    const FILL: &str = "
INSERT INTO toolcall_steps (session, count, touched_ms)
    SELECT 's' || i, 1, 4000000000000 + (i * 7919) % 20000 FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_calls (key, count, touched_ms)
    SELECT 'c' || i, 1, 4000000000000 + (i * 7919) % 20000 FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
    SELECT 'r' || i, 'completed', 0, '{}', 4000000000000 + (i * 7919) % 20000 FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_approvals
    (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
    SELECT 'a' || i, 's', 'c', 't', 'd', '{}', 1, 0, 4000000000000 + (i * 7919) % 20000
    FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_locks (resource_key, resource, holder, until_ms)
    SELECT 'l' || i, 'r', 'h', 4000000000000 + (i * 7919) % 20000 FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_taint (session, print, touched_ms)
    SELECT 's' || i, '', 4000000000000 + (i * 7919) % 20000 FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_rates (bucket_key, window_start_ms, bucket, until_ms, count)
    SELECT 'b' || i, 0, 'b', 4000000000000 + (i * 7919) % 20000, 1 FROM generate_series(1, 20000) AS i;
INSERT INTO toolcall_signatures (id, signer, at_ms, n)
    SELECT 'a' || i, 'p', 0, 1 FROM generate_series(1, 2000) AS i;
ANALYZE;
";

    /// The nodes of `plan` (an `EXPLAIN (FORMAT JSON)` node) that read a
    /// whole table, by the table's name.
    fn whole_table_reads(plan: &Value, found: &mut Vec<String>) {
        if plan["Node Type"] == "Seq Scan" {
            found.push(plan["Relation Name"].as_str().unwrap_or("?").to_owned());
        }
        for child in plan["Plans"].as_array().into_iter().flatten() {
            whole_table_reads(child, found);
        }
    }

    /// A batch of the automatic purge, planned as the store's statements
    /// are (generic plans, made without the values), over tables of many
    /// rows none of which expired: it finds what expired by its condition's
    /// index and reads no table whole but the signatures' (whose condition,
    /// their approval gone, no index serves; each is looked up by the
    /// approval's key). It read the steps, the call counts, the records and
    /// the approvals whole, a batch after every thousand writes of every
    /// replica, however large they were.
    #[test]
    fn a_batch_finds_what_expired_by_its_index() {
        let Some(url) = postgres_url("the purge's plan") else {
            return;
        };
        runtime().block_on(async {
            let schema = format!("toolcall_purge_plan_{}_{}", std::process::id(), now_ms());
            let store = PostgresStore::connect_in_schema(&url, &schema)
                .await
                .unwrap();
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(connection);
            client
                .batch_execute(&format!(
                    "SET search_path TO \"{schema}\"; SET plan_cache_mode = force_generic_plan;
                     {FILL}"
                ))
                .await
                .unwrap();
            let now = 4_000_000_000_000_i64;
            let explained = client
                .simple_query(&format!(
                    "PREPARE batch (BIGINT, BIGINT, BIGINT) AS {};
                     EXPLAIN (FORMAT JSON) EXECUTE batch({}, {now}, {});",
                    PURGE.as_str(),
                    now - 86_400_000,
                    purge::BATCH
                ))
                .await
                .unwrap();
            let plan = explained
                .iter()
                .find_map(|message| match message {
                    tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                })
                .expect("the plan");
            let plan: Value = serde_json::from_str(&plan).unwrap();
            let mut found = Vec::new();
            whole_table_reads(&plan[0]["Plan"], &mut found);
            found.retain(|table| table != "toolcall_signatures");
            drop(client);
            store.drop_schema().await.unwrap();
            assert!(found.is_empty(), "a batch reads whole tables: {found:?}");
        });
    }
}
