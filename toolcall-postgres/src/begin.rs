//! A call's start, one statement: what the pipeline asks of the store before
//! stage 5 (the step, the call's count, what is recorded of its key,
//! whether its session read untrusted output, its resource's lock).

use std::collections::HashMap;
use std::sync::Mutex;

use toolcall_ledger::store::{CallBegun, CallStart, StoreError, session_key};
use toolcall_sql::{from_sql, record, to_sql};

use crate::PostgresStore;

/// The step counted; the call counted when the step is within the budget
/// ($4); then, for a count within the bound ($5), the key's record read
/// (when $6) and the resource locked (when $7 is given) if the key is
/// neither completed nor held by a running claim; and whether the session
/// saw untrusted output (when $11), and whether the conversation as the
/// call named it (the [`session_key`] of which is $13) has a question,
/// unexpired, asked or decided, used or not (when $12). Every part is what
/// the store's own statement for it does, at the call's time ($2).
///
/// A side effect's claim is taken here too when asked ($16: its lease's
/// end) and nothing stands in its way: nothing recorded of the key, the
/// count within the bound, the lock (if asked) taken, no untrusted output
/// of any kind in the session (when $11) and no question in the conversation (when
/// $12); `ON CONFLICT DO NOTHING`, so that an identical call's record, or
/// its claim made meanwhile, is never overwritten.
///
/// A start that claims is a durable commit, as the claim on its own is.
/// One that does not claim does not wait for the log to reach the disk
/// (`synchronous_commit` off for this transaction alone): what a crash of
/// the server may take back is a step, a count and a lock, never an
/// effect or a decision. A side effect's claim, the next statement, is a
/// durable commit, and the log is flushed in order, so a claim that is
/// kept keeps the start before it; the claim also confirms the lock taken
/// here is still the call's ([`StartedLocks`]), so that a start lost with
/// the server is not run on without its lock.
const BEGIN: &str = "WITH v AS (
    SELECT COALESCE((SELECT version FROM toolcall_controls WHERE id = 1), 0) AS version
), n AS (
    INSERT INTO toolcall_steps (session, count, touched_ms)
    SELECT $1, 1, $2 FROM v
    WHERE ($14::BIGINT IS NULL OR v.version = $14::BIGINT) AND NOT $15::BOOLEAN
    ON CONFLICT (session) DO UPDATE SET count = toolcall_steps.count + 1, touched_ms = EXCLUDED.touched_ms
    RETURNING count
), a AS (
    SELECT 1::BIGINT AS count FROM v
    WHERE ($14::BIGINT IS NULL OR v.version = $14::BIGINT) AND $15::BOOLEAN
), s AS (
    SELECT count FROM n UNION ALL SELECT count FROM a
), kept AS (
    INSERT INTO toolcall_calls (key, count, touched_ms)
    SELECT $3, 1, $2 FROM s WHERE s.count <= $4 AND NOT $15::BOOLEAN
    ON CONFLICT (key) DO UPDATE SET count = toolcall_calls.count + 1, touched_ms = EXCLUDED.touched_ms
    RETURNING count
), c AS (
    SELECT count FROM kept UNION ALL SELECT 1::BIGINT FROM s WHERE s.count <= $4 AND $15::BOOLEAN
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
), won AS (
    INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
    SELECT $3, 'in_flight', $16::BIGINT, NULL, $2 FROM c
    WHERE $16::BIGINT IS NOT NULL AND c.count <= $5
      AND ($7::TEXT IS NULL OR EXISTS (SELECT 1 FROM l))
      AND NOT ($11::BOOLEAN AND EXISTS (SELECT 1 FROM toolcall_taint WHERE session = $1))
      AND NOT ($12::BOOLEAN
               AND EXISTS (SELECT 1 FROM toolcall_approvals
                           WHERE session_key = $13 AND expires_ms > $2))
    ON CONFLICT (key) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count FROM s),
       (SELECT count FROM c),
       (SELECT state FROM r),
       (SELECT result FROM r),
       CASE WHEN $11::BOOLEAN
            THEN EXISTS (SELECT 1 FROM toolcall_taint WHERE session = $1 AND print = '')
       END,
       EXISTS (SELECT 1 FROM l),
       CASE WHEN $12::BOOLEAN
            THEN EXISTS (SELECT 1 FROM toolcall_approvals
                         WHERE session_key = $13 AND expires_ms > $2)
            AND EXISTS (SELECT 1 FROM s)
       END,
       EXISTS (SELECT 1 FROM won),
       set_config('synchronous_commit',
                  CASE WHEN EXISTS (SELECT 1 FROM won)
                       THEN current_setting('synchronous_commit') ELSE 'off' END,
                  true)";

/// A read-only call alone in its conversation ([`CallStart::alone`], with
/// no lock to take): [`BEGIN`] with its step and its count both 1 and
/// neither kept, so nothing written, which leaves reads only: the
/// controls' version, the key's record (when $3: asked, and the counts
/// within their bounds), whether the session ($5) saw untrusted output
/// (when $4) and whether the conversation as named ($7) has a question
/// (when $6), at the call's time ($2). A statement the planner sees as
/// the reads it is, rather than [`BEGIN`]'s writes each skipped by a
/// parameter: a fraction of the server's work (see BENCHMARKS.md).
const ALONE: &str = "SELECT COALESCE((SELECT version FROM toolcall_controls WHERE id = 1), 0),
       r.state,
       r.result,
       CASE WHEN $4::BOOLEAN
            THEN EXISTS (SELECT 1 FROM toolcall_taint WHERE session = $5 AND print = '')
       END,
       CASE WHEN $6::BOOLEAN
            THEN EXISTS (SELECT 1 FROM toolcall_approvals
                         WHERE session_key = $7 AND expires_ms > $2)
       END
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT CASE WHEN state = 'in_flight' AND until_ms <= $2 THEN 'in_doubt' ELSE state END AS state,
           result
    FROM toolcall_records
    WHERE key = $1 AND $3::BOOLEAN
) AS r ON true";

/// The controls' version kept (0: none written): [`ALONE`]'s first column,
/// for a read that asks nothing else.
const VERSION: &str = "SELECT COALESCE((SELECT version FROM toolcall_controls WHERE id = 1), 0)";

/// The result stored and the claim freed, as `complete` does; the lock
/// freed if its holder still has it, as `unlock_resource` does.
pub(crate) const COMPLETE_UNLOCKING: &str = "WITH done AS (
    INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
    VALUES ($1, 'completed', 0, $2, $3)
    ON CONFLICT (key) DO UPDATE SET state = 'completed', until_ms = 0, result = $2, touched_ms = $3,
        question = NULL, asked_ms = NULL
    RETURNING 1
), freed AS (
    DELETE FROM toolcall_locks WHERE resource_key = $4 AND holder = $5
    RETURNING 1
)
SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM freed)";

/// The resource locks this process's calls took with their start
/// ([`BEGIN`], a commit that does not wait for the log), by the call's key:
/// the resource's key and the holder. A claim of the key confirms its lock
/// is still there; freeing the lock forgets it.
#[derive(Debug, Default)]
pub(crate) struct StartedLocks(Mutex<HashMap<String, (String, String)>>);

impl StartedLocks {
    /// Calls dropped between their start and their end (their futures
    /// cancelled) leave their entry: past this many, all are forgotten,
    /// and a claim without an entry confirms no lock, as the other stores'.
    const MOST: usize = 4096;

    fn took(&self, key: &str, resource_key: &str, holder: &str) {
        let mut locks = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if locks.len() >= Self::MOST {
            locks.clear();
        }
        locks.insert(key.to_owned(), (resource_key.to_owned(), holder.to_owned()));
    }

    /// The resource's key and the holder of the lock the call with `key`
    /// took with its start, if it took one.
    pub(crate) fn of(&self, key: &str) -> Option<(String, String)> {
        let locks = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.get(key).cloned()
    }

    pub(crate) fn freed(&self, holder: &str) {
        let mut locks = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !locks.is_empty() {
            locks.retain(|_, (_, held)| held != holder);
        }
    }
}

impl PostgresStore {
    pub(crate) async fn begin(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        let session = session_key(start.session);
        let named = session_key(start.named);
        if start.alone && start.lock.is_none() {
            return self.begin_alone(start, &session, &named).await;
        }
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
                    &start.questions,
                    &named,
                    &start.controls.map(to_sql),
                    &start.alone,
                    &start.claim.map(to_sql),
                ],
            )
            .await
            .map_err(StoreError::new)?;
        // No step: the controls' version was not the one named, and nothing
        // was counted.
        let Some(step) = row.get::<_, Option<i64>>(0) else {
            return Ok(CallBegun {
                controls_moved: true,
                ..CallBegun::default()
            });
        };
        let begun = CallBegun {
            step: from_sql(step),
            calls: row.get::<_, Option<i64>>(1).map(from_sql),
            outcome: record::outcome(row.get(2), row.get(3))?,
            tainted: row.get::<_, Option<bool>>(4),
            locked: row.get::<_, bool>(5),
            questions: row.get::<_, Option<bool>>(6),
            controls_moved: false,
            claimed: row.get::<_, bool>(7),
        };
        if let (true, Some((resource_key, _, holder, _))) = (begun.locked, &lock) {
            self.started.took(start.key.as_str(), resource_key, holder);
        }
        for _ in 0..record::begun_writes(&begun) {
            self.wrote().await;
        }
        Ok(begun)
    }

    /// [`begin`](Self::begin) for a read alone: [`ALONE`], the counts
    /// made here as [`BEGIN`] makes them (step 1, count 1); for one that
    /// asks nothing but the controls' version, [`VERSION`], read with the
    /// calls that wait for the same read ([`crate::version`]).
    async fn begin_alone(
        &self,
        start: &CallStart<'_>,
        session: &str,
        named: &str,
    ) -> Result<CallBegun, StoreError> {
        let step = 1;
        let calls = (step <= start.max_steps).then_some(1);
        let read_record = start.outcome && calls.is_some_and(|calls| calls <= start.max_calls);
        if !read_record && !start.taint && !start.questions {
            let version = self.versions.read(|| self.controls_version()).await?;
            return Ok(moved(start, version).unwrap_or(CallBegun {
                step,
                calls,
                ..CallBegun::default()
            }));
        }
        let client = self.reader().await?;
        let row = client
            .query_one(
                ALONE,
                &[
                    &start.key.as_str(),
                    &to_sql(start.now_ms),
                    &read_record,
                    &start.taint,
                    &session,
                    &start.questions,
                    &named,
                ],
            )
            .await
            .map_err(StoreError::new)?;
        if let Some(moved) = moved(start, row.get(0)) {
            return Ok(moved);
        }
        Ok(CallBegun {
            step,
            calls,
            outcome: record::outcome(row.get(1), row.get(2))?,
            tainted: row.get::<_, Option<bool>>(3),
            locked: false,
            questions: row.get::<_, Option<bool>>(4),
            controls_moved: false,
            claimed: false,
        })
    }
}

impl PostgresStore {
    /// The controls' version kept (0: none written), on a shared connection.
    async fn controls_version(&self) -> Result<i64, StoreError> {
        let client = self.reader().await?;
        let row = client
            .query_one(VERSION, &[])
            .await
            .map_err(StoreError::new)?;
        Ok(row.get(0))
    }
}

/// What a call's start comes to when the controls' version kept
/// (`version`) is not the one the call was judged by: nothing counted.
fn moved(start: &CallStart<'_>, version: i64) -> Option<CallBegun> {
    start
        .controls
        .is_some_and(|known| to_sql(known) != version)
        .then(|| CallBegun {
            controls_moved: true,
            ..CallBegun::default()
        })
}
