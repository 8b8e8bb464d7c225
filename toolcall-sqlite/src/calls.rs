//! Steps, call counts, idempotency records and their leases: the
//! pipeline's count of a conversation and its memory of each call, in
//! `toolcall_steps`, `toolcall_calls` and `toolcall_records`.

use rusqlite::{OptionalExtension, params};
use toolcall_ledger::ToolResult;
use toolcall_ledger::store::{
    CallBegun, CallStart, CallStore, Claim, Completion, Key, Lease, QuestionLease, RecordedOutcome,
    StoreError, Unsettled, now_ms, session_key,
};
use toolcall_sql::record::{self, result_text};
use toolcall_sql::{from_sql, limit_sql, to_sql};

use crate::{SqliteStore, immediate, off_runtime};

/// Each method returns what the trait declares, a `Send` future, whose
/// `async` block runs the store's synchronous statements on the calling
/// task when it is first polled: SQLite answers from the local file.
#[allow(clippy::manual_async_fn)] // the futures are spelled as the trait declares them
impl CallStore for SqliteStore {
    fn next_step(
        &self,
        session: &str,
        now_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        async move {
            off_runtime(|| self.count("toolcall_steps", "session", &session_key(session), now_ms))
        }
    }

    /// One transaction: the step, the call's count, what is recorded of
    /// its key, its resource's lock and whether its session read untrusted
    /// output, as asked.
    fn begin_call(
        &self,
        start: &CallStart<'_>,
    ) -> impl Future<Output = Result<CallBegun, StoreError>> + Send {
        async move { self.begin(start) }
    }

    /// One transaction: the result stored, the claim and the lock freed.
    fn complete_unlocking(
        &self,
        done: &Completion<'_>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        async move {
            off_runtime(|| {
                let text = result_text(done.result)?;
                {
                    let mut conn = self.conn();
                    let tx = immediate(&mut conn)?;
                    tx.prepare_cached(
                    "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                     VALUES (?1, 'completed', 0, ?2, ?3)
                     ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = ?2, touched_ms = ?3",
                )
                .and_then(|mut s| s.execute(params![done.key.as_str(), text, to_sql(now_ms())]))
                .map_err(StoreError::new)?;
                    tx.prepare_cached(
                        "DELETE FROM toolcall_locks WHERE resource_key = ?1 AND holder = ?2",
                    )
                    .and_then(|mut s| {
                        s.execute(params![session_key(done.resource.as_str()), done.holder])
                    })
                    .map_err(StoreError::new)?;
                    tx.commit().map_err(StoreError::new)?;
                }
                self.wrote();
                Ok(true)
            })
        }
    }

    fn peek_step(&self, session: &str) -> impl Future<Output = Result<u64, StoreError>> + Send {
        async move {
            self.read(|conn| {
                let count: Option<i64> = conn
                    .query_row(
                        "SELECT count FROM toolcall_steps WHERE session = ?1",
                        [session_key(session)],
                        |row| row.get(0),
                    )
                    .optional()
                    .map_err(StoreError::new)?;
                Ok(count.map_or(0, from_sql))
            })
        }
    }

    fn count_call(
        &self,
        key: &Key,
        now_ms: u64,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        async move {
            off_runtime(|| {
                let key = key.as_str();
                self.count("toolcall_calls", "key", key, now_ms)
            })
        }
    }

    fn uncount_call(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.execute_on(
            "UPDATE toolcall_calls SET count = max(count - 1, 0) WHERE key = ?1",
            key,
        )
    }

    fn outcome(
        &self,
        key: &Key,
    ) -> impl Future<Output = Result<Option<RecordedOutcome>, StoreError>> + Send {
        async move {
            off_runtime(|| {
                let key = key.as_str();
                // A claim whose lease ran out with no outcome is in doubt too.
                let row: Option<(String, Option<String>)> = self
                .conn()
                .query_row(
                    "SELECT CASE WHEN state = 'in_flight' AND until_ms <= ?2 THEN 'in_doubt' ELSE state END,
                            result
                     FROM toolcall_records WHERE key = ?1",
                    params![key, to_sql(now_ms())],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(StoreError::new)?;
                let (state, result) = row.unzip();
                record::outcome(state.as_deref(), result.flatten().as_deref())
            })
        }
    }

    fn claim(
        &self,
        key: &Key,
        lease: Lease,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        async move { off_runtime(|| self.claim_keeping(key, lease, None)) }
    }

    fn claim_asking(
        &self,
        key: &Key,
        asking: &QuestionLease<'_>,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send {
        async move {
            off_runtime(|| {
                let text = record::question_text(asking.question)?;
                self.claim_keeping(key, asking.lease, Some(&text))
            })
        }
    }

    fn unsettled(
        &self,
        now_ms: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Unsettled>, StoreError>> + Send {
        async move {
            off_runtime(|| {
                let conn = self.conn();
                let mut statement = conn
                    .prepare(&record::unsettled_statement(|n| format!("?{n}")))
                    .map_err(StoreError::new)?;
                let rows = statement
                    .query_map(params![to_sql(now_ms), limit_sql(limit)], |row| {
                        Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                    })
                    .map_err(StoreError::new)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(StoreError::new)?;
                rows.into_iter()
                    .map(|(key, question)| {
                        Ok(Unsettled {
                            key: key.parse::<Key>().map_err(StoreError::new)?,
                            question: record::parse_question(&question)?,
                        })
                    })
                    .collect()
            })
        }
    }

    fn renew(
        &self,
        key: &Key,
        lease: Lease,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let Lease { now_ms, lease_ms } = lease;
        async move {
            off_runtime(|| {
                let key = key.as_str();
                let renewed = self.execute(
                    "UPDATE toolcall_records SET until_ms = ?2, touched_ms = ?3
                 WHERE key = ?1 AND state = 'in_flight'",
                    params![key, to_sql(now_ms.saturating_add(lease_ms)), to_sql(now_ms)],
                )?;
                Ok(renewed > 0)
            })
        }
    }

    fn complete(
        &self,
        key: &Key,
        result: &ToolResult,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            off_runtime(|| {
                let key = key.as_str();
                let text = result_text(result)?;
                self.execute(
                    "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES (?1, 'completed', 0, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = ?2,
                     touched_ms = ?3, question = NULL, asked_ms = NULL",
                    params![key, text, to_sql(now_ms())],
                )?;
                self.wrote();
                Ok(())
            })
        }
    }

    fn release(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.execute_on(
            "DELETE FROM toolcall_records WHERE key = ?1 AND state = 'in_flight'",
            key,
        )
    }

    fn doubt(&self, key: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
        async move {
            off_runtime(|| {
                let key = key.as_str();
                self.execute(
                "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
                 VALUES (?1, 'in_doubt', 0, NULL, ?2)
                 ON CONFLICT (key) DO UPDATE SET state = 'in_doubt', until_ms = 0, result = NULL, touched_ms = ?2
                 WHERE state <> 'completed'",
                params![key, to_sql(now_ms())],
            )?;
                self.wrote();
                Ok(())
            })
        }
    }
}

impl SqliteStore {
    /// Runs `sql` on the rows of `key` (its `?1`), off the runtime; a key
    /// with no row is no error.
    async fn execute_on(&self, sql: &'static str, key: &Key) -> Result<(), StoreError> {
        off_runtime(|| {
            self.execute(sql, [key.as_str()])?;
            Ok(())
        })
    }
}
