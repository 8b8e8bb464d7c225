//! The approvals: pending ones, a person's decision on them (the inbox),
//! using one up, and what came of it.

use rusqlite::types::ValueRef;
use rusqlite::{OptionalExtension, params};
use toolcall_ledger::store::{
    ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, Binding,
    DecideOutcome, DecisionWrite, OpenBounds, PendingApproval, PendingPage, PendingQuery,
    Requester, StoreError, TakeApproval, session_key,
};
use toolcall_sql::approval::{self, NewApproval};
use toolcall_sql::{Value, count_sql, to_sql};

use crate::{SqliteStore, immediate};

/// A row of [`approval::COLUMNS`], as [`approval::read_entry`] reads it.
fn approval_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Vec<Value>> {
    (0..row.as_ref().column_count())
        .map(|i| {
            Ok(match row.get_ref(i)? {
                ValueRef::Integer(n) => Value::Int(Some(n)),
                ValueRef::Null => Value::Text(None),
                _ => Value::Text(Some(row.get(i)?)),
            })
        })
        .collect()
}

/// A [`Value`] bound as a statement's parameter.
pub(crate) fn param(value: &Value) -> &dyn rusqlite::ToSql {
    match value {
        Value::Int(int) => int,
        Value::Text(text) => text,
    }
}

pub(crate) fn approvals_where(
    conn: &rusqlite::Connection,
    condition: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<ApprovalEntry>, StoreError> {
    let mut statement = conn
        .prepare(&format!(
            "SELECT {} FROM toolcall_approvals WHERE {condition}",
            approval::COLUMNS
        ))
        .map_err(StoreError::new)?;
    let rows = statement
        .query_map(params, approval_row)
        .map_err(StoreError::new)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::new)?;
    rows.into_iter().map(approval::read_entry).collect()
}

/// The first approval that matches `condition`, through `conn`.
pub(crate) fn approval_where(
    conn: &rusqlite::Connection,
    condition: &str,
    params: impl rusqlite::Params,
) -> Result<Option<ApprovalEntry>, StoreError> {
    let row = conn
        .query_row(
            &format!(
                "SELECT {} FROM toolcall_approvals WHERE {condition}",
                approval::COLUMNS
            ),
            params,
            approval_row,
        )
        .optional()
        .map_err(StoreError::new)?;
    row.map(approval::read_entry).transpose()
}

pub(crate) fn put(store: &SqliteStore, a: &PendingApproval) -> Result<(), StoreError> {
    insert(&store.conn(), a)?;
    store.wrote();
    Ok(())
}

/// Inserts `a` through `conn` (the store's connection, or a transaction on it).
fn insert(conn: &rusqlite::Connection, a: &PendingApproval) -> Result<(), StoreError> {
    let values = NewApproval::new(a)?.values(a);
    conn.execute(
        &format!(
            "INSERT INTO toolcall_approvals ({}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
             ?18)",
            approval::INSERT_COLUMNS
        ),
        rusqlite::params_from_iter(values.iter().map(param)),
    )
    .map_err(StoreError::new)?;
    Ok(())
}

/// The newest approval of exactly this call, unused and unexpired at `at`,
/// through `conn`: `?1` the session's key, `?2` the session, `?3` the
/// caller, `?4` the tool (NULL: any), `?5` the digest (NULL: any), `?6` the
/// reason, `?7` the time, `?8` 1 to match any requester, else `?9` the
/// requester (NULL: none).
const SAME_CALL: &str = "session_key = ?1 AND session = ?2 AND caller = ?3
     AND (?4 IS NULL OR tool = ?4) AND (?5 IS NULL OR digest = ?5) AND reason IS ?6
     AND (?8 = 1 OR requester IS ?9)
     AND used_ms IS NULL AND expires_ms > ?7
     ORDER BY created_ms DESC, id DESC LIMIT 1";

/// As [`SAME_CALL`], used or not: what [`find`] reads.
const SAME_CALL_EVER: &str = "session_key = ?1 AND session = ?2 AND caller = ?3
     AND (?4 IS NULL OR tool = ?4) AND (?5 IS NULL OR digest = ?5) AND reason IS ?6
     AND (?8 = 1 OR requester IS ?9)
     AND expires_ms > ?7
     ORDER BY created_ms DESC, id DESC LIMIT 1";

fn same_call(
    conn: &rusqlite::Connection,
    binding: &Binding<'_>,
    reason: Option<&str>,
    at: u64,
) -> Result<Option<ApprovalEntry>, StoreError> {
    same_call_where(conn, SAME_CALL, binding, reason, at)
}

fn same_call_where(
    conn: &rusqlite::Connection,
    condition: &str,
    binding: &Binding<'_>,
    reason: Option<&str>,
    at: u64,
) -> Result<Option<ApprovalEntry>, StoreError> {
    let (anyone, requester) = match binding.requester {
        Requester::Anyone => (1, None),
        Requester::Only(requester) => (0, requester),
    };
    approval_where(
        conn,
        condition,
        params![
            session_key(binding.session),
            binding.session,
            binding.caller,
            binding.tool,
            binding.digest,
            reason,
            to_sql(at),
            anyone,
            requester
        ],
    )
}

pub(crate) fn ask(
    store: &SqliteStore,
    a: &PendingApproval,
    bounds: OpenBounds,
) -> Result<AskApproval, StoreError> {
    let mut conn = store.conn();
    // IMMEDIATE: the file's write lock from the first read, so that the
    // look, the count and the insert are one step for every connection.
    let tx = immediate(&mut conn)?;
    let requester = a.requester();
    let binding = Binding {
        session: &a.session,
        caller: &a.caller,
        tool: Some(&a.tool),
        digest: Some(&a.digest),
        requester: Requester::Only(requester.as_deref()),
    };
    if let Some(entry) = same_call(&tx, &binding, a.reason.as_deref(), a.created_ms)? {
        return Ok(AskApproval::Existing(entry));
    }
    let (in_conversation, of_caller, of_requester): (i64, i64, i64) = tx
        .query_row(
            "SELECT count(*) FILTER (WHERE session_key = ?1 AND session = ?2), count(*),
                    count(*) FILTER (WHERE requester = ?5)
             FROM toolcall_approvals
             WHERE caller = ?3 AND expires_ms > ?4 AND decision IS NULL AND used_ms IS NULL",
            params![
                session_key(&a.session),
                a.session,
                a.caller,
                to_sql(a.created_ms),
                requester
            ],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .map_err(StoreError::new)?;
    if let Some(full) = bounds.over(
        count_sql(in_conversation),
        count_sql(of_caller),
        count_sql(of_requester),
    ) {
        return Ok(full);
    }
    insert(&tx, a)?;
    tx.commit().map_err(StoreError::new)?;
    drop(conn);
    store.wrote();
    Ok(AskApproval::Created)
}

pub(crate) fn find(
    conn: &rusqlite::Connection,
    lookup: &ApprovalLookup<'_>,
) -> Result<Option<ApprovalEntry>, StoreError> {
    same_call_where(
        conn,
        SAME_CALL_EVER,
        lookup.binding,
        lookup.reason,
        lookup.now_ms,
    )
}

pub(crate) fn page(
    conn: &rusqlite::Connection,
    query: &PendingQuery<'_>,
) -> Result<PendingPage, StoreError> {
    let statements = approval::page_statements(query, |n| format!("?{n}"));
    // The count and the page from one snapshot.
    let conn = conn.unchecked_transaction().map_err(StoreError::new)?;
    let total: i64 = conn
        .query_row(
            &statements.count,
            rusqlite::params_from_iter(statements.count_values.iter().map(param)),
            |row| row.get(0),
        )
        .map_err(StoreError::new)?;
    let rows = conn
        .prepare(&statements.page)
        .and_then(|mut statement| {
            statement
                .query_map(
                    rusqlite::params_from_iter(statements.page_values.iter().map(param)),
                    approval_row,
                )?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(StoreError::new)?;
    drop(conn);
    approval::page(query, total, rows)
}

pub(crate) fn take(
    store: &SqliteStore,
    taking: &ApprovalUse<'_>,
) -> Result<TakeApproval, StoreError> {
    let (id, binding, now_ms) = (taking.id, taking.binding, taking.now_ms);
    let mut conn = store.conn();
    let tx = immediate(&mut conn)?;
    let Some(entry) = approval_where(&tx, "id = ?1", [id])? else {
        return Ok(TakeApproval::Invalid);
    };
    if entry.used_ms.is_some() || !binding.matches(&entry.approval) {
        return Ok(TakeApproval::Invalid);
    }
    if entry.approval.expires_ms <= now_ms {
        // Left as it is (the transaction rolls back): an expired question
        // reads expired to everyone after.
        return Ok(TakeApproval::Expired);
    }
    if entry.approval.decision.is_some() {
        // Kept for the inbox's history, used up.
        tx.execute(
            "UPDATE toolcall_approvals SET used_ms = ?2 WHERE id = ?1",
            params![id, to_sql(now_ms)],
        )
    } else {
        tx.execute("DELETE FROM toolcall_approvals WHERE id = ?1", [id])
    }
    .map_err(StoreError::new)?;
    tx.commit().map_err(StoreError::new)?;
    Ok(approval::taken(Some(entry), now_ms))
}

pub(crate) fn decide(
    store: &SqliteStore,
    deciding: &DecisionWrite<'_>,
) -> Result<DecideOutcome, StoreError> {
    let (id, decision, now_ms) = (deciding.id, deciding.decision, deciding.now_ms);
    // One statement: of two decisions at once, one changes the row.
    let decided = store.execute(
        toolcall_sql::controls::DECIDE,
        params![
            id,
            approval::json(decision)?,
            to_sql(decision.decided_ms),
            to_sql(now_ms),
            toolcall_sql::controls::stands_until(decision)
        ],
    )?;
    if decided > 0 {
        store.wrote();
        return Ok(DecideOutcome::Decided);
    }
    Ok(approval::not_decided(get(&store.conn(), id)?))
}

pub(crate) fn get(
    conn: &rusqlite::Connection,
    id: &str,
) -> Result<Option<ApprovalEntry>, StoreError> {
    approval_where(conn, "id = ?1", [id])
}

/// Gives back the decision on `id`, used up and not settled, unless an
/// identical call's question is unused: see [`QuestionStore::give_back_approval`](toolcall_ledger::store::QuestionStore::give_back_approval).
pub(crate) fn give_back(store: &SqliteStore, id: &str) -> Result<bool, StoreError> {
    let changed = store.execute(
        "UPDATE toolcall_approvals SET used_ms = NULL
         WHERE id = ?1 AND decision IS NOT NULL AND used_ms IS NOT NULL AND result IS NULL
           AND NOT EXISTS (SELECT 1 FROM toolcall_approvals AS other
                WHERE other.id <> toolcall_approvals.id AND other.used_ms IS NULL
                  AND other.session_key = toolcall_approvals.session_key
                  AND other.session = toolcall_approvals.session
                  AND other.caller = toolcall_approvals.caller
                  AND other.tool = toolcall_approvals.tool
                  AND other.digest = toolcall_approvals.digest
                  AND other.reason IS toolcall_approvals.reason
                  AND other.requester IS toolcall_approvals.requester)",
        params![id],
    )?;
    Ok(changed > 0)
}

pub(crate) fn settle(
    store: &SqliteStore,
    id: &str,
    result: &ApprovalResult,
) -> Result<(), StoreError> {
    let text = approval::json(result)?;
    store.execute(
        "UPDATE toolcall_approvals SET result = ?2 WHERE id = ?1 AND decision IS NOT NULL",
        params![id, text],
    )?;
    Ok(())
}
