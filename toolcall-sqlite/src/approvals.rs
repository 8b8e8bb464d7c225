//! The approvals: pending ones, a person's decision on them (the inbox),
//! using one up, and what came of it.

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use toolcall_core::store::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, AskApproval, Binding, DecideOutcome,
    PendingApproval, PendingCursor, PendingOrder, PendingPage, PendingQuery, StoreError,
    TakeApproval, session_key,
};

use crate::{SqliteStore, from_sql, to_sql};

/// The columns of an approval, in the order [`read_entry`] reads them.
const APPROVAL_COLUMNS: &str = "id, session, caller, tool, digest, arguments, step, created_ms, \
                                expires_ms, decision, used_ms, result, reason, tainted";

/// A JSON column, read back.
fn json_column<T: serde::de::DeserializeOwned>(
    text: Option<String>,
) -> Result<Option<T>, StoreError> {
    text.map(|text| serde_json::from_str(&text).map_err(StoreError::new))
        .transpose()
}

/// The tainted arguments of an approval as their column holds them: a JSON
/// array, or NULL when there are none.
fn tainted_column(tainted: &[String]) -> Result<Option<String>, StoreError> {
    if tainted.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(tainted)
        .map(Some)
        .map_err(StoreError::new)
}

/// One row of [`APPROVAL_COLUMNS`], as the columns hold it.
type ApprovalRow = (
    (String, String, String, String, String, String),
    (i64, i64, i64),
    (Option<String>, Option<i64>, Option<String>),
    (Option<String>, Option<String>),
);

fn approval_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok((
        (
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
        ),
        (row.get(6)?, row.get(7)?, row.get(8)?),
        (row.get(9)?, row.get(10)?, row.get(11)?),
        (row.get(12)?, row.get(13)?),
    ))
}

fn read_entry(row: ApprovalRow) -> Result<ApprovalEntry, StoreError> {
    let ((id, session, caller, tool, digest, arguments), (step, created_ms, expires_ms), rest, why) =
        row;
    let (decision, used_ms, result) = rest;
    let (reason, tainted) = why;
    Ok(ApprovalEntry {
        approval: PendingApproval {
            id,
            session,
            caller,
            tool,
            digest,
            arguments: serde_json::from_str(&arguments).map_err(StoreError::new)?,
            step: from_sql(step),
            created_ms: from_sql(created_ms),
            expires_ms: from_sql(expires_ms),
            decision: json_column::<ApprovalDecision>(decision)?,
            reason,
            tainted: json_column::<Vec<String>>(tainted)?.unwrap_or_default(),
        },
        used_ms: used_ms.map(from_sql),
        result: json_column::<ApprovalResult>(result)?,
    })
}

fn limit_sql(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn approvals_where(
    store: &SqliteStore,
    condition: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<ApprovalEntry>, StoreError> {
    let conn = store.conn();
    let mut statement = conn
        .prepare(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE {condition}"
        ))
        .map_err(StoreError::new)?;
    let rows = statement
        .query_map(params, approval_row)
        .map_err(StoreError::new)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::new)?;
    rows.into_iter().map(read_entry).collect()
}

pub(crate) fn put(store: &SqliteStore, a: &PendingApproval) -> Result<(), StoreError> {
    insert(&store.conn(), a)?;
    store.wrote();
    Ok(())
}

/// Inserts `a` through `conn` (the store's connection, or a transaction on it).
fn insert(conn: &rusqlite::Connection, a: &PendingApproval) -> Result<(), StoreError> {
    let arguments = serde_json::to_string(&a.arguments).map_err(StoreError::new)?;
    let decision = a
        .decision
        .as_ref()
        .map(|d| serde_json::to_string(d).map(|text| (text, to_sql(d.decided_ms))))
        .transpose()
        .map_err(StoreError::new)?;
    let (decision, decided_ms) = decision.unzip();
    let tainted = tainted_column(&a.tainted)?;
    conn.execute(
        "INSERT INTO toolcall_approvals
         (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms,
          decision, decided_ms, reason, tainted, session_key)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            a.id,
            a.session,
            a.caller,
            a.tool,
            a.digest,
            arguments,
            to_sql(a.step),
            to_sql(a.created_ms),
            to_sql(a.expires_ms),
            decision,
            decided_ms,
            a.reason,
            tainted,
            session_key(&a.session)
        ],
    )
    .map_err(StoreError::new)?;
    Ok(())
}

/// The newest approval of exactly this call, unused and unexpired at `at`,
/// through `conn`: `?1` the session's key, `?2` the session, `?3` the
/// caller, `?4` the tool (NULL: any), `?5` the digest (NULL: any), `?6` the
/// reason, `?7` the time.
const SAME_CALL: &str = "session_key = ?1 AND session = ?2 AND caller = ?3
     AND (?4 IS NULL OR tool = ?4) AND (?5 IS NULL OR digest = ?5) AND reason IS ?6
     AND used_ms IS NULL AND expires_ms > ?7
     ORDER BY created_ms DESC, id DESC LIMIT 1";

fn same_call(
    conn: &rusqlite::Connection,
    binding: &Binding<'_>,
    reason: Option<&str>,
    at: u64,
) -> Result<Option<ApprovalEntry>, StoreError> {
    let row = conn
        .query_row(
            &format!("SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE {SAME_CALL}"),
            params![
                session_key(binding.session),
                binding.session,
                binding.caller,
                binding.tool,
                binding.digest,
                reason,
                to_sql(at)
            ],
            approval_row,
        )
        .optional()
        .map_err(StoreError::new)?;
    row.map(read_entry).transpose()
}

pub(crate) fn ask(
    store: &SqliteStore,
    a: &PendingApproval,
    max_open: usize,
) -> Result<AskApproval, StoreError> {
    let mut conn = store.conn();
    // IMMEDIATE: the file's write lock from the first read, so that the
    // look, the count and the insert are one step for every connection.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::new)?;
    let binding = Binding {
        session: &a.session,
        caller: &a.caller,
        tool: Some(&a.tool),
        digest: Some(&a.digest),
    };
    if let Some(entry) = same_call(&tx, &binding, a.reason.as_deref(), a.created_ms)? {
        return Ok(AskApproval::Existing(entry));
    }
    let open: i64 = tx
        .query_row(
            "SELECT count(*) FROM toolcall_approvals
             WHERE session_key = ?1 AND session = ?2
               AND decision IS NULL AND used_ms IS NULL AND expires_ms > ?3",
            params![session_key(&a.session), a.session, to_sql(a.created_ms)],
            |row| row.get(0),
        )
        .map_err(StoreError::new)?;
    let open = usize::try_from(open).unwrap_or(0);
    if open >= max_open {
        return Ok(AskApproval::Full { open });
    }
    insert(&tx, a)?;
    tx.commit().map_err(StoreError::new)?;
    drop(conn);
    store.wrote();
    Ok(AskApproval::Created)
}

pub(crate) fn find(
    store: &SqliteStore,
    binding: &Binding<'_>,
    reason: Option<&str>,
    now_ms: u64,
) -> Result<Option<ApprovalEntry>, StoreError> {
    same_call(&store.conn(), binding, reason, now_ms)
}

pub(crate) fn page(
    store: &SqliteStore,
    query: &PendingQuery<'_>,
) -> Result<PendingPage, StoreError> {
    let mut filter = String::from("decision IS NULL AND used_ms IS NULL AND expires_ms > ?1");
    let mut values: Vec<Box<dyn rusqlite::ToSql>> = vec![Box::new(to_sql(query.now_ms))];
    if let Some(session) = query.session {
        values.push(Box::new(session_key(session)));
        values.push(Box::new(session.to_owned()));
        filter.push_str(&format!(
            " AND session_key = ?{} AND session = ?{}",
            values.len() - 1,
            values.len()
        ));
    }
    if let Some(tool) = query.tool {
        values.push(Box::new(tool.to_owned()));
        filter.push_str(&format!(" AND tool = ?{}", values.len()));
    }
    let conn = store.conn();
    let total: i64 = conn
        .query_row(
            &format!("SELECT count(*) FROM toolcall_approvals WHERE {filter}"),
            rusqlite::params_from_iter(values.iter()),
            |row| row.get(0),
        )
        .map_err(StoreError::new)?;
    let (compare, order) = match query.order {
        PendingOrder::OldestFirst => (">", "ASC"),
        PendingOrder::NewestFirst => ("<", "DESC"),
    };
    if let Some(cursor) = &query.cursor {
        values.push(Box::new(to_sql(cursor.created_ms)));
        values.push(Box::new(cursor.id.clone()));
        filter.push_str(&format!(
            " AND (created_ms, id) {compare} (?{}, ?{})",
            values.len() - 1,
            values.len()
        ));
    }
    // One more than the page: whether there is a next one.
    values.push(Box::new(limit_sql(query.limit).saturating_add(1)));
    let sql = format!(
        "SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE {filter}
         ORDER BY created_ms {order}, id {order} LIMIT ?{}",
        values.len()
    );
    let rows = conn
        .prepare(&sql)
        .and_then(|mut statement| {
            statement
                .query_map(rusqlite::params_from_iter(values.iter()), approval_row)?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(StoreError::new)?;
    drop(conn);
    let mut items = rows
        .into_iter()
        .map(|row| read_entry(row).map(|entry| entry.approval))
        .collect::<Result<Vec<_>, _>>()?;
    let more = items.len() > query.limit;
    items.truncate(query.limit);
    let next = match items.last() {
        Some(last) if more => Some(PendingCursor::after(last).to_string()),
        _ => None,
    };
    Ok(PendingPage {
        items,
        total: u64::try_from(total).unwrap_or(0),
        next,
    })
}

pub(crate) fn take(
    store: &SqliteStore,
    id: &str,
    binding: &Binding<'_>,
    now_ms: u64,
) -> Result<TakeApproval, StoreError> {
    let mut conn = store.conn();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::new)?;
    let row = tx
        .query_row(
            &format!("SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE id = ?1"),
            [id],
            approval_row,
        )
        .optional()
        .map_err(StoreError::new)?;
    let Some(row) = row else {
        return Ok(TakeApproval::Invalid);
    };
    let entry = read_entry(row)?;
    if entry.used_ms.is_some() || !binding.matches(&entry.approval) {
        return Ok(TakeApproval::Invalid);
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
    Ok(if entry.approval.expires_ms <= now_ms {
        TakeApproval::Expired
    } else {
        TakeApproval::Taken(entry.approval)
    })
}

pub(crate) fn pending(
    store: &SqliteStore,
    now_ms: u64,
    limit: usize,
) -> Result<Vec<PendingApproval>, StoreError> {
    let entries = approvals_where(
        store,
        "decision IS NULL AND used_ms IS NULL AND expires_ms > ?1
         ORDER BY created_ms, id LIMIT ?2",
        params![to_sql(now_ms), limit_sql(limit)],
    )?;
    Ok(entries.into_iter().map(|entry| entry.approval).collect())
}

pub(crate) fn decide(
    store: &SqliteStore,
    id: &str,
    decision: &ApprovalDecision,
    now_ms: u64,
) -> Result<DecideOutcome, StoreError> {
    let text = serde_json::to_string(decision).map_err(StoreError::new)?;
    // One statement: of two decisions at once, one changes the row.
    let decided = store
        .conn()
        .execute(
            "UPDATE toolcall_approvals SET decision = ?2, decided_ms = ?3
             WHERE id = ?1 AND decision IS NULL AND used_ms IS NULL AND expires_ms > ?4",
            params![id, text, to_sql(decision.decided_ms), to_sql(now_ms)],
        )
        .map_err(StoreError::new)?;
    if decided > 0 {
        store.wrote();
        return Ok(DecideOutcome::Decided);
    }
    Ok(match get(store, id)? {
        None => DecideOutcome::Invalid,
        Some(entry) if entry.approval.decision.is_some() || entry.used_ms.is_some() => {
            DecideOutcome::AlreadyDecided
        }
        Some(_) => DecideOutcome::Expired,
    })
}

pub(crate) fn get(store: &SqliteStore, id: &str) -> Result<Option<ApprovalEntry>, StoreError> {
    let row = store
        .conn()
        .query_row(
            &format!("SELECT {APPROVAL_COLUMNS} FROM toolcall_approvals WHERE id = ?1"),
            [id],
            approval_row,
        )
        .optional()
        .map_err(StoreError::new)?;
    row.map(read_entry).transpose()
}

pub(crate) fn decided(store: &SqliteStore, limit: usize) -> Result<Vec<ApprovalEntry>, StoreError> {
    approvals_where(
        store,
        "decided_ms IS NOT NULL ORDER BY decided_ms DESC, id LIMIT ?1",
        [limit_sql(limit)],
    )
}

pub(crate) fn settle(
    store: &SqliteStore,
    id: &str,
    result: &ApprovalResult,
) -> Result<(), StoreError> {
    let text = serde_json::to_string(result).map_err(StoreError::new)?;
    store
        .conn()
        .execute(
            "UPDATE toolcall_approvals SET result = ?2 WHERE id = ?1 AND decision IS NOT NULL",
            params![id, text],
        )
        .map_err(StoreError::new)?;
    Ok(())
}
