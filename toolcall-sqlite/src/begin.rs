//! A call's start and its result's record, each one transaction: what the
//! pipeline asks of the store before stage 5 (the step, the call's count,
//! what is recorded of its key, whether its session read untrusted output,
//! its resource's lock), and after stage 8 (the result, and the lock freed).

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use toolcall_core::ToolResult;
use toolcall_core::store::{
    CallBegun, CallStart, Key, RecordedOutcome, StoreError, now_ms, session_key,
};

use crate::{LOCK, SqliteStore, from_sql, parse_result, to_sql};

impl SqliteStore {
    pub(crate) fn begin(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        let session = session_key(start.session);
        let key = start.key.as_str();
        let now = to_sql(start.now_ms);
        let begun = {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::new)?;
            let step: i64 = tx
                .prepare_cached(
                    "INSERT INTO toolcall_steps (session, count, touched_ms) VALUES (?1, 1, ?2)
                     ON CONFLICT (session) DO UPDATE SET count = count + 1, touched_ms = excluded.touched_ms
                     RETURNING count",
                )
                .and_then(|mut s| s.query_row(params![session, now], |row| row.get(0)))
                .map_err(StoreError::new)?;
            let mut begun = CallBegun {
                step: from_sql(step),
                ..CallBegun::default()
            };
            if begun.step <= start.max_steps {
                let calls: i64 = tx
                    .prepare_cached(
                        "INSERT INTO toolcall_calls (key, count, touched_ms) VALUES (?1, 1, ?2)
                         ON CONFLICT (key) DO UPDATE SET count = count + 1, touched_ms = excluded.touched_ms
                         RETURNING count",
                    )
                    .and_then(|mut s| s.query_row(params![key, now], |row| row.get(0)))
                    .map_err(StoreError::new)?;
                let calls = from_sql(calls);
                begun.calls = Some(calls);
                if calls <= start.max_calls {
                    let row: Option<(String, i64, Option<String>)> = tx
                        .prepare_cached(
                            "SELECT state, until_ms, result FROM toolcall_records WHERE key = ?1",
                        )
                        .and_then(|mut s| {
                            s.query_row([key], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                                .optional()
                        })
                        .map_err(StoreError::new)?;
                    // A claim whose lease ran out with no outcome is in doubt.
                    let recorded = match &row {
                        Some((state, until, _)) if state == "in_flight" && *until <= now => {
                            Some("in_doubt")
                        }
                        Some((state, _, _)) => Some(state.as_str()),
                        None => None,
                    };
                    if start.outcome {
                        begun.outcome = match (recorded, row.as_ref().and_then(|r| r.2.as_deref()))
                        {
                            (None, _) => None,
                            (Some("completed"), Some(text)) => {
                                Some(RecordedOutcome::Completed(parse_result(text)?))
                            }
                            (Some("in_flight"), _) => Some(RecordedOutcome::InFlight),
                            (Some(_), _) => Some(RecordedOutcome::InDoubt),
                        };
                    }
                    if let Some(lock) = start.lock
                        && !matches!(recorded, Some("completed" | "in_flight"))
                    {
                        let resource = lock.resource.as_str();
                        begun.locked = tx
                            .prepare_cached(LOCK)
                            .and_then(|mut s| {
                                s.query_row(
                                    params![
                                        session_key(resource),
                                        resource,
                                        lock.holder,
                                        now,
                                        to_sql(start.now_ms.saturating_add(lock.lease_ms))
                                    ],
                                    |_| Ok(()),
                                )
                                .optional()
                            })
                            .map_err(StoreError::new)?
                            .is_some();
                    }
                }
            }
            if start.taint {
                begun.tainted = Some(
                    tx.prepare_cached(
                        "SELECT 1 FROM toolcall_taint WHERE session = ?1 AND print = ''",
                    )
                    .and_then(|mut s| s.exists([&session]))
                    .map_err(StoreError::new)?,
                );
            }
            if start.decided {
                begun.decided = Some(
                    tx.prepare_cached(
                        "SELECT 1 FROM toolcall_approvals
                         WHERE session_key = ?1 AND decision IS NOT NULL
                           AND used_ms IS NULL AND expires_ms > ?2",
                    )
                    .and_then(|mut s| s.exists(params![session, now]))
                    .map_err(StoreError::new)?,
                );
            }
            tx.commit().map_err(StoreError::new)?;
            begun
        };
        // One write each, as their own statements count them.
        self.wrote();
        if begun.calls.is_some() {
            self.wrote();
        }
        if begun.locked {
            self.wrote();
        }
        Ok(begun)
    }

    pub(crate) fn complete_and_unlock(
        &self,
        key: &Key,
        result: &ToolResult,
        resource: &Key,
        holder: &str,
    ) -> Result<bool, StoreError> {
        let text = serde_json::to_string(result).map_err(StoreError::new)?;
        {
            let mut conn = self.conn();
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::new)?;
            tx.prepare_cached(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES (?1, 'completed', 0, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = ?2, touched_ms = ?3",
            )
            .and_then(|mut s| s.execute(params![key.as_str(), text, to_sql(now_ms())]))
            .map_err(StoreError::new)?;
            tx.prepare_cached("DELETE FROM toolcall_locks WHERE resource_key = ?1 AND holder = ?2")
                .and_then(|mut s| s.execute(params![session_key(resource.as_str()), holder]))
                .map_err(StoreError::new)?;
            tx.commit().map_err(StoreError::new)?;
        }
        self.wrote();
        Ok(true)
    }
}
