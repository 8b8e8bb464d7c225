//! A call's start, one transaction: what the pipeline asks of the store before
//! stage 5 (the step, the call's count, what is recorded of its key,
//! whether its session read untrusted output, its resource's lock, and a
//! side effect's claim when asked).

use rusqlite::{Connection, OptionalExtension, params};
use toolcall_ledger::store::{CallBegun, CallStart, StoreError, session_key};
use toolcall_sql::{record, to_sql};

use crate::locks::LOCK;
use crate::{SqliteStore, count_in, immediate, off_runtime};

impl SqliteStore {
    pub(crate) fn begin(&self, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
        // A read-only call alone in its conversation writes nothing: it
        // reads in a transaction that takes no write lock, on the store's
        // reading connection, at once where it can (`SqliteStore::read`).
        // One statement at most (the usual case: the controls' version
        // alone) needs no transaction of its own: SQLite reads it in one.
        if start.alone && !start.outcome && start.lock.is_none() {
            let statements = usize::from(start.controls.is_some())
                + usize::from(start.taint)
                + usize::from(start.questions);
            return self.read(|conn| {
                if statements <= 1 {
                    return begin_in(conn, start);
                }
                let tx = conn.unchecked_transaction().map_err(StoreError::new)?;
                let begun = begin_in(&tx, start)?;
                tx.commit().map_err(StoreError::new)?;
                Ok(begun)
            });
        }
        let begun = off_runtime(|| {
            let mut conn = self.conn();
            let tx = immediate(&mut conn)?;
            let begun = begin_in(&tx, start)?;
            tx.commit().map_err(StoreError::new)?;
            Ok::<_, StoreError>(begun)
        })?;
        for _ in 0..record::begun_writes(&begun) {
            self.wrote();
        }
        Ok(begun)
    }
}

/// The start's statements on `tx`: a transaction, or the connection itself
/// when they are one statement (a single statement reads in a transaction
/// of its own).
fn begin_in(tx: &Connection, start: &CallStart<'_>) -> Result<CallBegun, StoreError> {
    // Its digest, made only for a statement that reads it: a read alone in
    // its conversation asks for none of them.
    let session = std::cell::LazyCell::new(|| session_key(start.session));
    let key = start.key.as_str();
    let now = to_sql(start.now_ms);
    if let Some(known) = start.controls {
        let kept: i64 = tx
            .prepare_cached(
                "SELECT COALESCE((SELECT version FROM toolcall_controls WHERE id = 1), 0)",
            )
            .and_then(|mut s| s.query_row([], |row| row.get(0)))
            .map_err(StoreError::new)?;
        if kept != to_sql(known) {
            return Ok(CallBegun {
                controls_moved: true,
                ..CallBegun::default()
            });
        }
    }
    let step = if start.alone {
        1
    } else {
        count_in(tx, "toolcall_steps", "session", &session, now)?
    };
    let mut begun = CallBegun {
        step,
        ..CallBegun::default()
    };
    // Nothing recorded of the key, read with the count within its bound:
    // the key may be claimed with the start.
    let mut free = false;
    if begun.step <= start.max_steps {
        let calls = if start.alone {
            1
        } else {
            count_in(tx, "toolcall_calls", "key", key, now)?
        };
        begun.calls = Some(calls);
        // What is recorded of the key matters only to an outcome asked
        // for and to a lock.
        if calls <= start.max_calls && (start.outcome || start.lock.is_some()) {
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
            let recorded = row
                .as_ref()
                .map(|(state, until, _)| record::state_at(state, *until, now));
            free = row.is_none();
            if start.outcome {
                let result = row.as_ref().and_then(|r| r.2.as_deref());
                begun.outcome = record::outcome(recorded, result)?;
            }
            if let Some(lock) = start.lock
                && !matches!(recorded, Some(record::COMPLETED | record::IN_FLIGHT))
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
            free &= start.lock.is_none() || begun.locked;
        }
    }
    if start.taint {
        begun.tainted = Some(
            tx.prepare_cached("SELECT 1 FROM toolcall_taint WHERE session = ?1 AND print = ''")
                .and_then(|mut s| s.exists([&*session]))
                .map_err(StoreError::new)?,
        );
    }
    if start.questions {
        begun.questions = Some(
            tx.prepare_cached(
                "SELECT 1 FROM toolcall_approvals
                 WHERE session_key = ?1 AND expires_ms > ?2",
            )
            .and_then(|mut s| s.exists(params![session_key(start.named), now]))
            .map_err(StoreError::new)?,
        );
    }
    if let Some(until_ms) = start.claim
        && free
        && begun.questions != Some(true)
    {
        begun.claimed = claim_in(tx, start, &session, until_ms)?;
    }
    Ok(begun)
}

/// A side effect's claim taken with its start ([`CallStart::claim`]): the
/// key is free (checked by the caller), and the session saw no untrusted
/// output of any kind when that is asked.
fn claim_in(
    tx: &Connection,
    start: &CallStart<'_>,
    session: &str,
    until_ms: u64,
) -> Result<bool, StoreError> {
    if start.taint
        && tx
            .prepare_cached("SELECT 1 FROM toolcall_taint WHERE session = ?1")
            .and_then(|mut s| s.exists([session]))
            .map_err(StoreError::new)?
    {
        return Ok(false);
    }
    let inserted = tx
        .prepare_cached(
            "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
             VALUES (?1, 'in_flight', ?2, NULL, ?3)
             ON CONFLICT (key) DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                start.key.as_str(),
                to_sql(until_ms),
                to_sql(start.now_ms)
            ])
        })
        .map_err(StoreError::new)?;
    Ok(inserted == 1)
}
