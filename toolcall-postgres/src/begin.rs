//! A call's start and its result's record, each one statement: what the
//! pipeline asks of the store before stage 5 (the step, the call's count,
//! what is recorded of its key, whether its session read untrusted output,
//! its resource's lock), and after stage 8 (the result, and the lock freed).

use toolcall_core::ToolResult;
use toolcall_core::store::{CallBegun, CallStart, Key, RecordedOutcome, StoreError, session_key};

use crate::{PostgresStore, parse_result, to_sql};

/// The step counted; the call counted when the step is within the budget
/// ($4); then, for a count within the bound ($5), the key's record read
/// (when $6) and the resource locked (when $7 is given) if the key is
/// neither completed nor held by a running claim; and whether the session
/// saw untrusted output (when $11), and whether it has an approval a
/// person decided, unused and unexpired (when $12). Every part is what the store's own
/// statement for it does, at the call's time ($2).
const BEGIN: &str = "WITH s AS (
    INSERT INTO toolcall_steps (session, count, touched_ms) VALUES ($1, 1, $2)
    ON CONFLICT (session) DO UPDATE SET count = toolcall_steps.count + 1, touched_ms = EXCLUDED.touched_ms
    RETURNING count
), c AS (
    INSERT INTO toolcall_calls (key, count, touched_ms)
    SELECT $3, 1, $2 FROM s WHERE s.count <= $4
    ON CONFLICT (key) DO UPDATE SET count = toolcall_calls.count + 1, touched_ms = EXCLUDED.touched_ms
    RETURNING count
), r AS (
    SELECT CASE WHEN state = 'in_flight' AND until_ms <= $2 THEN 'in_doubt' ELSE state END AS state,
           result
    FROM toolcall_records
    WHERE key = $3 AND $6::BOOLEAN AND EXISTS (SELECT 1 FROM c WHERE c.count <= $5)
), l AS (
    INSERT INTO toolcall_locks (resource_key, resource, holder, until_ms)
    SELECT $7::TEXT, $8::TEXT, $9::TEXT, $10::BIGINT FROM c
    WHERE $7::TEXT IS NOT NULL AND c.count <= $5
      AND NOT EXISTS (
          SELECT 1 FROM toolcall_records
          WHERE key = $3 AND (state = 'completed' OR (state = 'in_flight' AND until_ms > $2)))
    ON CONFLICT (resource_key) DO UPDATE SET holder = EXCLUDED.holder, until_ms = EXCLUDED.until_ms
    WHERE toolcall_locks.holder = EXCLUDED.holder OR toolcall_locks.until_ms <= $2
    RETURNING 1
)
SELECT s.count,
       (SELECT count FROM c),
       (SELECT state FROM r),
       (SELECT result FROM r),
       CASE WHEN $11::BOOLEAN
            THEN EXISTS (SELECT 1 FROM toolcall_taint WHERE session = $1 AND print = '')
       END,
       EXISTS (SELECT 1 FROM l),
       CASE WHEN $12::BOOLEAN
            THEN EXISTS (SELECT 1 FROM toolcall_approvals
                         WHERE session_key = $1 AND decision IS NOT NULL
                           AND used_ms IS NULL AND expires_ms > $2)
       END
FROM s";

/// The result stored and the claim freed, as `complete` does; the lock
/// freed if its holder still has it, as `unlock_resource` does.
const COMPLETE_UNLOCKING: &str = "WITH done AS (
    INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
    VALUES ($1, 'completed', 0, $2, $3)
    ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = $2, touched_ms = $3
    RETURNING 1
), freed AS (
    DELETE FROM toolcall_locks WHERE resource_key = $4 AND holder = $5
    RETURNING 1
)
SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM freed)";

impl PostgresStore {
    pub(crate) async fn begin(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        let session = session_key(start.session);
        let lock = start.lock.map(|lock| {
            let resource = lock.resource.as_str();
            (
                session_key(resource),
                resource,
                lock.holder,
                to_sql(start.now_ms.saturating_add(lock.lease_ms)),
            )
        });
        let (resource_key, resource, holder, until) = match &lock {
            Some((key, resource, holder, until)) => (
                Some(key.as_str()),
                Some(&**resource),
                Some(*holder),
                Some(*until),
            ),
            None => (None, None, None, None),
        };
        let client = self.client().await?;
        let row = client
            .query_one(
                BEGIN,
                &[
                    &session,
                    &to_sql(start.now_ms),
                    &start.key.as_str(),
                    &to_sql(start.max_steps),
                    &to_sql(start.max_calls),
                    &start.outcome,
                    &resource_key,
                    &resource,
                    &holder,
                    &until,
                    &start.taint,
                    &start.decided,
                ],
            )
            .await
            .map_err(StoreError::new)?;
        let step = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        let calls = row
            .get::<_, Option<i64>>(1)
            .map(|count| u64::try_from(count).unwrap_or(0));
        let outcome = match (row.get::<_, Option<&str>>(2), row.get::<_, Option<&str>>(3)) {
            (None, _) => None,
            (Some("completed"), Some(text)) => {
                Some(RecordedOutcome::Completed(parse_result(text)?))
            }
            (Some("in_flight"), _) => Some(RecordedOutcome::InFlight),
            (Some(_), _) => Some(RecordedOutcome::InDoubt),
        };
        let begun = CallBegun {
            step,
            calls,
            outcome,
            tainted: row.get::<_, Option<bool>>(4),
            locked: row.get::<_, bool>(5),
            decided: row.get::<_, Option<bool>>(6),
        };
        // One write each, as their own statements count them.
        self.wrote().await;
        if begun.calls.is_some() {
            self.wrote().await;
        }
        if begun.locked {
            self.wrote().await;
        }
        Ok(begun)
    }

    pub(crate) async fn complete_and_unlock(
        &self,
        key: &Key,
        result: &ToolResult,
        resource: &Key,
        holder: &str,
    ) -> Result<bool, StoreError> {
        let text = serde_json::to_string(result).map_err(StoreError::new)?;
        let client = self.client().await?;
        client
            .execute(
                COMPLETE_UNLOCKING,
                &[
                    &key.as_str(),
                    &text,
                    &to_sql(toolcall_core::store::now_ms()),
                    &session_key(resource.as_str()),
                    &holder,
                ],
            )
            .await
            .map_err(StoreError::new)?;
        self.wrote().await;
        Ok(true)
    }
}
