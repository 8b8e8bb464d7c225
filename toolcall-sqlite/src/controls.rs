//! The operators' controls and their history, the rate limits' windows,
//! and the signatures of approvals that need more than one person: the
//! statements of [`toolcall_sql::controls`], each write one statement or
//! one `IMMEDIATE` transaction.

use rusqlite::{Connection, OptionalExtension, params};
use toolcall_ledger::store::{
    ControlsChange, ControlsWrite, RateWindow, SignOutcome, Signature, SignatureWrite, StoreError,
    StoredControls, session_key,
};
use toolcall_sql::approval;
use toolcall_sql::controls::{self, SignStep};
use toolcall_sql::{from_sql, limit_sql, to_sql};

use crate::approvals::approval_where;
use crate::{SqliteStore, immediate};

pub(crate) fn get(conn: &Connection, known: u64) -> Result<Option<StoredControls>, StoreError> {
    conn.prepare_cached(controls::CONTROLS)
        .and_then(|mut s| {
            s.query_row([to_sql(known)], |row| {
                Ok(StoredControls {
                    version: from_sql(row.get(0)?),
                    document: row.get(1)?,
                })
            })
            .optional()
        })
        .map_err(StoreError::new)
}

pub(crate) fn put(store: &SqliteStore, write: &ControlsWrite<'_>) -> Result<bool, StoreError> {
    let (expected, document, change) = (write.expected, write.document, write.change);
    let version = expected.saturating_add(1);
    {
        let mut conn = store.conn();
        let tx = immediate(&mut conn)?;
        let written = tx
            .query_row(
                controls::PUT_CONTROLS,
                params![to_sql(expected), to_sql(version), document],
                |_| Ok(()),
            )
            .optional()
            .map_err(StoreError::new)?;
        if written.is_none() {
            return Ok(false);
        }
        tx.execute(
            controls::RECORD_CHANGE,
            params![
                to_sql(version),
                change.by,
                to_sql(change.at_ms),
                change.summary
            ],
        )
        .map_err(StoreError::new)?;
        tx.commit().map_err(StoreError::new)?;
    }
    store.wrote();
    Ok(true)
}

pub(crate) fn history(conn: &Connection, limit: usize) -> Result<Vec<ControlsChange>, StoreError> {
    let mut statement = conn
        .prepare_cached(controls::HISTORY)
        .map_err(StoreError::new)?;
    statement
        .query_map([limit_sql(limit)], |row| {
            Ok(ControlsChange {
                version: from_sql(row.get(0)?),
                by: row.get(1)?,
                at_ms: from_sql(row.get(2)?),
                summary: row.get(3)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(StoreError::new)
}

pub(crate) fn take_rate(
    store: &SqliteStore,
    window: &RateWindow<'_>,
    limit: u64,
) -> Result<bool, StoreError> {
    if limit == 0 {
        return Ok(false);
    }
    store.wrote_if(
        controls::TAKE_RATE,
        params![
            session_key(window.bucket),
            window.bucket,
            to_sql(window.start_ms),
            to_sql(window.start_ms.saturating_add(window.length_ms)),
            to_sql(limit)
        ],
    )
}

pub(crate) fn rate_count(
    conn: &Connection,
    bucket: &str,
    window_start_ms: u64,
) -> Result<u64, StoreError> {
    let count: Option<i64> = conn
        .prepare_cached(controls::RATE_COUNT)
        .and_then(|mut s| {
            s.query_row(
                params![session_key(bucket), to_sql(window_start_ms)],
                |row| row.get(0),
            )
            .optional()
        })
        .map_err(StoreError::new)?;
    Ok(count.map_or(0, from_sql))
}

/// The signatures of `id` through `conn` (the store's connection, or a
/// transaction on it), in signing order.
fn signatures_in(conn: &rusqlite::Connection, id: &str) -> Result<Vec<Signature>, StoreError> {
    let mut statement = conn
        .prepare_cached(controls::SIGNATURES)
        .map_err(StoreError::new)?;
    statement
        .query_map([id], |row| {
            Ok(Signature {
                by: row.get(0)?,
                at_ms: from_sql(row.get(1)?),
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(StoreError::new)
}

pub(crate) fn signatures(conn: &Connection, id: &str) -> Result<Vec<Signature>, StoreError> {
    signatures_in(conn, id)
}

/// One `IMMEDIATE` transaction: the approval and its signers read, the
/// signature kept and, for the last one, the decision recorded. Of two
/// last signatures at once, on any connection to the file, the second
/// reads the first's.
pub(crate) fn sign(
    store: &SqliteStore,
    signing: &SignatureWrite<'_>,
) -> Result<SignOutcome, StoreError> {
    let SignatureWrite {
        id, signer, now_ms, ..
    } = *signing;
    let step = {
        let mut conn = store.conn();
        let tx = immediate(&mut conn)?;
        let entry = approval_where(&tx, "id = ?1", [id])?;
        let signers: Vec<String> = signatures_in(&tx, id)?.into_iter().map(|s| s.by).collect();
        let step = controls::sign_step(entry.as_ref(), &signers, signing);
        let n = match &step {
            SignStep::Answer(_) => return Ok(controls::signed(&step)),
            SignStep::Keep { n } | SignStep::Decide { n, .. } => *n,
        };
        tx.execute(controls::SIGN, params![id, signer, to_sql(now_ms), n])
            .map_err(StoreError::new)?;
        if let SignStep::Decide { decision, .. } = &step {
            tx.execute(
                controls::DECIDE,
                params![
                    id,
                    approval::json(decision)?,
                    to_sql(decision.decided_ms),
                    to_sql(now_ms),
                    controls::stands_until(decision)
                ],
            )
            .map_err(StoreError::new)?;
        }
        tx.commit().map_err(StoreError::new)?;
        step
    };
    store.wrote();
    Ok(controls::signed(&step))
}
