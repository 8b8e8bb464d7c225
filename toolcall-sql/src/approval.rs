//! An approval's row (`toolcall_approvals`): written, read back, and what
//! using it up, deciding it and listing the pending ones answer.
//!
//! The arguments, a person's decision and what came of it are JSON text;
//! the tainted arguments and the provenance of the taint JSON arrays, or
//! `NULL` when there are none; the
//! session is kept as given, and indexed by its
//! [`session_key`].

use serde::Serialize;
use serde::de::DeserializeOwned;
use toolcall_ledger::provenance::MAX_SOURCES;
use toolcall_ledger::question::Answerers;
use toolcall_ledger::store::{
    ApprovalEntry, DecideOutcome, PendingApproval, PendingCursor, PendingOrder, PendingPage,
    PendingQuery, StoreError, TaintSource, TakeApproval, session_key,
};

use crate::{Value, from_sql, limit_sql, to_sql};

/// The columns of an approval as [`read_entry`] reads them, in this order.
pub const COLUMNS: &str = "id, session, caller, tool, digest, arguments, step, created_ms, \
                           expires_ms, decision, used_ms, result, reason, tainted, answerers, \
                           principal, provenance";

/// The columns an approval is inserted with, in the order of
/// [`NewApproval::values`].
pub const INSERT_COLUMNS: &str = "id, session, caller, tool, digest, arguments, step, created_ms, \
                                  expires_ms, decision, decided_ms, reason, tainted, session_key, \
                                  answerers, principal, requester, provenance";

/// A row of [`COLUMNS`] (its values in that order) read back.
pub fn read_entry(row: Vec<Value>) -> Result<ApprovalEntry, StoreError> {
    let [
        id,
        session,
        caller,
        tool,
        digest,
        arguments,
        step,
        created_ms,
        expires_ms,
        decision,
        used_ms,
        result,
        reason,
        tainted,
        answerers,
        principal,
        provenance,
    ] = <[Value; 17]>::try_from(row)
        .map_err(|row| StoreError::new(format!("an approval's row of {} columns", row.len())))?;
    Ok(ApprovalEntry {
        approval: PendingApproval {
            id: required(id.text()?)?,
            session: required(session.text()?)?,
            caller: required(caller.text()?)?,
            tool: required(tool.text()?)?,
            digest: required(digest.text()?)?,
            arguments: serde_json::from_str(&required(arguments.text()?)?)
                .map_err(StoreError::new)?,
            step: from_sql(required(step.int()?)?),
            created_ms: from_sql(required(created_ms.int()?)?),
            expires_ms: from_sql(required(expires_ms.int()?)?),
            decision: json_column(decision)?,
            reason: reason.text()?,
            tainted: json_column::<Vec<String>>(tainted)?.unwrap_or_default(),
            answerers: Answerers::from_words(answerers.text()?.as_deref().unwrap_or("")),
            principal: json_column(principal)?,
            provenance: json_column::<Vec<TaintSource>>(provenance)?.unwrap_or_default(),
        },
        used_ms: used_ms.int()?.map(from_sql),
        result: json_column(result)?,
    })
}

/// A person's decision, or what came of a decided approval, as its JSON
/// column (`decision`, `result`) holds it.
pub fn json(value: &impl Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(StoreError::new)
}

/// A `NOT NULL` column's value.
fn required<T>(value: Option<T>) -> Result<T, StoreError> {
    value.ok_or_else(|| StoreError::new("a NOT NULL column of an approval is NULL"))
}

/// A JSON column, read back.
fn json_column<T: DeserializeOwned>(value: Value) -> Result<Option<T>, StoreError> {
    value
        .text()?
        .map(|text| serde_json::from_str(&text).map_err(StoreError::new))
        .transpose()
}

/// An approval as it is inserted: the columns that are not its fields as
/// they are, in the form the columns hold them.
#[derive(Clone, Debug)]
pub struct NewApproval {
    /// The arguments, as JSON text.
    pub arguments: String,
    /// A person's decision, as JSON text, when it is asked for decided.
    pub decision: Option<String>,
    /// When that decision was made.
    pub decided_ms: Option<i64>,
    /// The tainted arguments, a JSON array; `None` when there are none.
    pub tainted: Option<String>,
    /// The [`session_key`] of the session.
    pub session_key: String,
    /// Who authenticated behind the caller, a JSON object; `None` when
    /// nobody was named.
    pub principal: Option<String>,
    /// Where the untrusted output that is the reason came from, a JSON
    /// array of sources, each [`bounded`](TaintSource::bounded), at most
    /// [`MAX_SOURCES`]; `None`
    /// when there are none.
    pub provenance: Option<String>,
}

impl NewApproval {
    /// The columns of `approval` that need encoding.
    pub fn new(approval: &PendingApproval) -> Result<Self, StoreError> {
        let arguments = serde_json::to_string(&approval.arguments).map_err(StoreError::new)?;
        let decision = approval
            .decision
            .as_ref()
            .map(|d| serde_json::to_string(d).map(|text| (text, to_sql(d.decided_ms))))
            .transpose()
            .map_err(StoreError::new)?;
        let (decision, decided_ms) = decision.unzip();
        let tainted = if approval.tainted.is_empty() {
            None
        } else {
            Some(serde_json::to_string(&approval.tainted).map_err(StoreError::new)?)
        };
        let principal = approval
            .principal
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(StoreError::new)?;
        let provenance = if approval.provenance.is_empty() {
            None
        } else {
            let bounded: Vec<TaintSource> = approval
                .provenance
                .iter()
                .take(MAX_SOURCES)
                .map(TaintSource::bounded)
                .collect();
            Some(serde_json::to_string(&bounded).map_err(StoreError::new)?)
        };
        Ok(NewApproval {
            principal,
            provenance,
            arguments,
            decision,
            decided_ms,
            tainted,
            session_key: session_key(&approval.session),
        })
    }

    /// The values of [`INSERT_COLUMNS`] for `approval` (the one this was
    /// made of), in that order.
    pub fn values(&self, approval: &PendingApproval) -> Vec<Value> {
        let text = |text: &str| Value::Text(Some(text.to_owned()));
        let int = |int: u64| Value::Int(Some(to_sql(int)));
        vec![
            text(&approval.id),
            text(&approval.session),
            text(&approval.caller),
            text(&approval.tool),
            text(&approval.digest),
            text(&self.arguments),
            int(approval.step),
            int(approval.created_ms),
            int(approval.expires_ms),
            Value::Text(self.decision.clone()),
            Value::Int(self.decided_ms),
            Value::Text(approval.reason.clone()),
            Value::Text(self.tainted.clone()),
            text(&self.session_key),
            text(&approval.answerers.to_words()),
            Value::Text(self.principal.clone()),
            Value::Text(approval.requester()),
            Value::Text(self.provenance.clone()),
        ]
    }
}

/// What taking an approval answers, once the store has used up `entry`
/// (`None`: there was none to use, or it did not match): invalid, expired
/// at `now_ms`, or taken.
pub fn taken(entry: Option<ApprovalEntry>, now_ms: u64) -> TakeApproval {
    match entry {
        None => TakeApproval::Invalid,
        Some(entry) if entry.approval.expires_ms <= now_ms => TakeApproval::Expired,
        Some(entry) => TakeApproval::Taken(entry.approval),
    }
}

/// What deciding an approval answers when the decision changed no row:
/// `entry` is the approval `id` as it is now (`None`: there is none).
pub fn not_decided(entry: Option<ApprovalEntry>) -> DecideOutcome {
    match entry {
        None => DecideOutcome::Invalid,
        Some(entry) if entry.approval.decision.is_some() || entry.used_ms.is_some() => {
            DecideOutcome::AlreadyDecided
        }
        Some(_) => DecideOutcome::Expired,
    }
}

/// The two statements of a page of pending approvals
/// ([`QuestionStore::pending_page`](toolcall_ledger::store::QuestionStore::pending_page)), made by
/// [`page_statements`]: the count of those matching the filters, and the
/// page itself, one row more than asked (whether there is a next page).
#[derive(Clone, Debug)]
pub struct PageStatements {
    /// `SELECT count(*)` of the approvals matching the filters.
    pub count: String,
    /// The values of `count`'s parameters, in order.
    pub count_values: Vec<Value>,
    /// `SELECT` of [`COLUMNS`] of the page's approvals, after the cursor.
    pub page: String,
    /// The values of `page`'s parameters, in order.
    pub page_values: Vec<Value>,
}

/// The statements of a page of `query`, with the `n`th parameter (from 1)
/// written as `placeholder(n)` says (`?1` for SQLite, `$1` for Postgres).
pub fn page_statements(
    query: &PendingQuery<'_>,
    placeholder: impl Fn(usize) -> String,
) -> PageStatements {
    let mut filter = format!(
        "decision IS NULL AND used_ms IS NULL AND expires_ms > {}",
        placeholder(1)
    );
    let text = |text: &str| Value::Text(Some(text.to_owned()));
    let mut values = vec![Value::Int(Some(to_sql(query.now_ms)))];
    if let Some(session) = query.session {
        values.push(text(&session_key(session)));
        values.push(text(session));
        filter.push_str(&format!(
            " AND session_key = {} AND session = {}",
            placeholder(values.len() - 1),
            placeholder(values.len())
        ));
    }
    if let Some(tool) = query.tool {
        values.push(text(tool));
        filter.push_str(&format!(" AND tool = {}", placeholder(values.len())));
    }
    let count = format!("SELECT count(*) FROM toolcall_approvals WHERE {filter}");
    let count_values = values.clone();
    let (compare, order) = match query.order {
        PendingOrder::OldestFirst => (">", "ASC"),
        PendingOrder::NewestFirst => ("<", "DESC"),
    };
    if let Some(cursor) = &query.cursor {
        values.push(Value::Int(Some(to_sql(cursor.created_ms))));
        values.push(text(&cursor.id));
        filter.push_str(&format!(
            " AND (created_ms, id) {compare} ({}, {})",
            placeholder(values.len() - 1),
            placeholder(values.len())
        ));
    }
    values.push(Value::Int(Some(limit_sql(query.limit).saturating_add(1))));
    let page = format!(
        "SELECT {COLUMNS} FROM toolcall_approvals WHERE {filter}
         ORDER BY created_ms {order}, id {order} LIMIT {}",
        placeholder(values.len())
    );
    PageStatements {
        count,
        count_values,
        page,
        page_values: values,
    }
}

/// The page of `query` from what its statements read: `total` of the count,
/// `rows` of the page (rows of [`COLUMNS`]).
pub fn page(
    query: &PendingQuery<'_>,
    total: i64,
    rows: Vec<Vec<Value>>,
) -> Result<PendingPage, StoreError> {
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
        total: from_sql(total),
        next,
    })
}
