//! The approvals: pending ones, a person's decision on them (the inbox,
//! announced on [`DECISION_CHANNEL`]), waiting for it, using one up, and
//! what came of it.

use std::sync::LazyLock;
use std::time::Duration;

use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};
use toolcall_ledger::store::{
    ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, AskApproval, DecideOutcome,
    DecisionWrite, OpenBounds, PendingApproval, PendingPage, PendingQuery, Requester, StoreError,
    TakeApproval, now_ms, session_key,
};
use toolcall_sql::approval::{self, NewApproval};
use toolcall_sql::controls;
use toolcall_sql::{Value, count_sql, limit_sql, to_sql};

use crate::PostgresStore;

/// The channel a decision is announced on (`NOTIFY`, with the approval's
/// id as the payload), so that an agent waiting for it wakes at once.
pub const DECISION_CHANNEL: &str = "toolcall_approval_decided";

/// Records a decision ([`controls::DECIDE`], `$1` the approval, `$2` the
/// decision, `$3` when it was made, `$4` now) and announces it on
/// [`DECISION_CHANNEL`] when it commits: one row if it was recorded.
pub(crate) static DECIDE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH decided AS ({} RETURNING id)
         SELECT pg_notify('{DECISION_CHANNEL}', id) FROM decided",
        controls::dollars(controls::DECIDE)
    )
});

/// How often a wait for a decision looks again without being woken (a
/// notification lost with a dropped connection is not waited for longer).
const WAIT_RECHECK: Duration = Duration::from_secs(2);

/// A row of [`approval::COLUMNS`], read back.
pub(crate) fn read_entry(row: &Row) -> Result<ApprovalEntry, StoreError> {
    approval::read_entry(values(row)?)
}

/// A row's columns as [`Value`]s (`BIGINT` ones as integers, the others
/// as text).
fn values(row: &Row) -> Result<Vec<Value>, StoreError> {
    row.columns()
        .iter()
        .enumerate()
        .map(|(i, column)| {
            if *column.type_() == Type::INT8 {
                row.try_get(i).map(Value::Int)
            } else {
                row.try_get(i).map(Value::Text)
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::new)
}

/// A [`Value`] as `tokio_postgres` binds it.
fn param(value: &Value) -> &(dyn ToSql + Sync) {
    match value {
        Value::Int(int) => int,
        Value::Text(text) => text,
    }
}

/// Uses up the approval `taking.id` if it matches `taking.binding` and is
/// unused: a decided one is marked used (the history keeps it), an
/// undecided one is deleted. `decided` says which statement to try.
async fn use_up(
    store: &PostgresStore,
    taking: &ApprovalUse<'_>,
    decided: bool,
) -> Result<Option<ApprovalEntry>, StoreError> {
    let (id, binding, now_ms) = (taking.id, taking.binding, taking.now_ms);
    let client = store.client().await?;
    // The binding whole, its requester included (`Binding::matches`, as
    // the other stores read it): another principal's question is not
    // this call's, whoever brings its id.
    let matches = "id = $1 AND session = $2 AND caller = $3
         AND ($4::TEXT IS NULL OR tool = $4) AND ($5::TEXT IS NULL OR digest = $5)
         AND ($7 OR requester IS NOT DISTINCT FROM $8::TEXT)
         AND used_ms IS NULL AND expires_ms > $6";
    let (anyone, requester) = match binding.requester {
        Requester::Anyone => (true, None),
        Requester::Only(requester) => (false, requester),
    };
    let sql = if decided {
        format!(
            "UPDATE toolcall_approvals SET used_ms = $6
             WHERE {matches} AND decision IS NOT NULL RETURNING {}",
            approval::COLUMNS
        )
    } else {
        format!(
            "DELETE FROM toolcall_approvals
             WHERE {matches} AND decision IS NULL AND $6::BIGINT IS NOT NULL
             RETURNING {}",
            approval::COLUMNS
        )
    };
    let row = client
        .query_opt(
            &sql,
            &[
                &id,
                &binding.session,
                &binding.caller,
                &binding.tool,
                &binding.digest,
                &to_sql(now_ms),
                &anyone,
                &requester,
            ],
        )
        .await
        .map_err(StoreError::new)?;
    row.as_ref().map(read_entry).transpose()
}

async fn approvals_where(
    store: &PostgresStore,
    condition: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<ApprovalEntry>, StoreError> {
    let client = store.reader().await?;
    let rows = client
        .query(
            &format!(
                "SELECT {} FROM toolcall_approvals WHERE {condition}",
                approval::COLUMNS
            ),
            params,
        )
        .await
        .map_err(StoreError::new)?;
    rows.iter().map(read_entry).collect()
}

pub(crate) async fn put(store: &PostgresStore, a: &PendingApproval) -> Result<(), StoreError> {
    let values = NewApproval::new(a)?.values(a);
    store
        .execute(
            &format!(
                "INSERT INTO toolcall_approvals ({})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                         $17, $18)",
                approval::INSERT_COLUMNS
            ),
            &values.iter().map(param).collect::<Vec<_>>(),
        )
        .await?;
    store.wrote().await;
    Ok(())
}

/// The digest of the call an approval is asked for: its session, caller,
/// tool, digest, reason and requester. Unique among the unused approvals
/// asked with [`ask`], so that of two replicas asking at once, one stores
/// it.
fn ask_key(a: &PendingApproval) -> Result<String, StoreError> {
    let requester = a.requester();
    let call = (
        &a.session, &a.caller, &a.tool, &a.digest, &a.reason, &requester,
    );
    Ok(session_key(
        &serde_json::to_string(&call).map_err(StoreError::new)?,
    ))
}

/// How often [`ask`] tries again after its insert met an approval of the
/// same call that its look did not see (asked meanwhile, or expired).
const ASK_ROUNDS: usize = 4;

pub(crate) async fn ask(
    store: &PostgresStore,
    a: &PendingApproval,
    bounds: OpenBounds,
) -> Result<AskApproval, StoreError> {
    let new = NewApproval::new(a)?;
    let ask_key = ask_key(a)?;
    let at = to_sql(a.created_ms);
    let in_conversation_bound = limit_sql(bounds.conversation);
    let of_caller_bound = limit_sql(bounds.caller);
    let of_requester_bound = limit_sql(bounds.requester);
    let requester = a.requester();
    // One statement: the look for the same call, the counts of the open
    // approvals of the caller in the conversation (its session) and in all
    // its conversations, and the insert if none of them stops it. The
    // unique index on `ask_key` stops a second insert of the same call
    // that the look could not see yet (another replica's, committed since
    // this statement's snapshot): then the call's approval is looked up
    // again, or, if the one in the way has expired, it is set aside.
    // The bounds on open approvals count what this statement's snapshot
    // sees: two different calls of one conversation, or of one caller,
    // asked at the same instant on two replicas may both pass them (one
    // over the bound); the same call never makes two.
    let sql = "WITH found AS (
            SELECT id FROM toolcall_approvals
            WHERE session_key = $1 AND session = $2 AND caller = $3 AND tool = $4
              AND digest = $5 AND reason IS NOT DISTINCT FROM $6::TEXT
              AND requester IS NOT DISTINCT FROM $20::TEXT
              AND used_ms IS NULL AND expires_ms > $7
            ORDER BY created_ms DESC, id DESC LIMIT 1),
        open AS (
            SELECT count(*) FILTER (WHERE session_key = $1 AND session = $2) AS conversation,
                   count(*) AS caller,
                   count(*) FILTER (WHERE requester = $20::TEXT) AS requester
            FROM toolcall_approvals
            WHERE caller = $3 AND decision IS NULL AND used_ms IS NULL AND expires_ms > $7),
        inserted AS (
            INSERT INTO toolcall_approvals
                (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms,
                 decision, decided_ms, reason, tainted, session_key, ask_key, answerers,
                 principal, requester, provenance)
            SELECT $10::TEXT, $2, $3, $4, $5, $11::TEXT, $12::BIGINT, $7, $13::BIGINT,
                   $14::TEXT, $15::BIGINT, $6::TEXT, $16::TEXT, $1, $9::TEXT, $17::TEXT,
                   $19::TEXT, $20::TEXT, $22::TEXT
            WHERE NOT EXISTS (SELECT 1 FROM found)
              AND (SELECT conversation FROM open) < $8 AND (SELECT caller FROM open) < $18
              AND (SELECT requester FROM open) < $21
            ON CONFLICT (ask_key) WHERE used_ms IS NULL DO NOTHING
            RETURNING id)
        SELECT (SELECT count(*) FROM inserted), (SELECT conversation FROM open),
               (SELECT caller FROM open), (SELECT id FROM found), (SELECT requester FROM open)";
    for _ in 0..ASK_ROUNDS {
        let client = store.client().await?;
        let row = client
            .query_one(
                sql,
                &[
                    &new.session_key,
                    &a.session,
                    &a.caller,
                    &a.tool,
                    &a.digest,
                    &a.reason,
                    &at,
                    &in_conversation_bound,
                    &ask_key,
                    &a.id,
                    &new.arguments,
                    &to_sql(a.step),
                    &to_sql(a.expires_ms),
                    &new.decision,
                    &new.decided_ms,
                    &new.tainted,
                    &a.answerers.to_words().as_ref(),
                    &of_caller_bound,
                    &new.principal,
                    &requester,
                    &of_requester_bound,
                    &new.provenance,
                ],
            )
            .await
            .map_err(StoreError::new)?;
        let (created, in_conversation, of_caller, found, of_requester): (
            i64,
            i64,
            i64,
            Option<String>,
            i64,
        ) = (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
        if created > 0 {
            store.wrote().await;
            return Ok(AskApproval::Created);
        }
        if let Some(id) = found {
            match get(store, &id).await? {
                Some(entry) if entry.used_ms.is_none() => {
                    return Ok(AskApproval::Existing(entry));
                }
                // Used up or purged since: look again.
                _ => continue,
            }
        }
        if let Some(full) = bounds.over(
            count_sql(in_conversation),
            count_sql(of_caller),
            count_sql(of_requester),
        ) {
            return Ok(full);
        }
        // The insert met an unused approval of the same call: one asked
        // meanwhile (the next look sees it), or one that has expired, set
        // aside here (it stays in the history, no longer in the way).
        client
            .execute(
                "UPDATE toolcall_approvals SET ask_key = NULL
                 WHERE ask_key = $1 AND used_ms IS NULL AND expires_ms <= $2",
                &[&ask_key, &at],
            )
            .await
            .map_err(StoreError::new)?;
    }
    Err(StoreError::new(
        "the approval of this call changed under every attempt to ask for it; try again",
    ))
}

/// The newest approval asked for the call, unexpired, used or not (a used
/// denial still answers the identical calls after it).
pub(crate) async fn find(
    store: &PostgresStore,
    lookup: &ApprovalLookup<'_>,
) -> Result<Option<ApprovalEntry>, StoreError> {
    let (binding, reason, now_ms) = (lookup.binding, lookup.reason, lookup.now_ms);
    let (anyone, requester) = match binding.requester {
        Requester::Anyone => (true, None),
        Requester::Only(requester) => (false, requester),
    };
    Ok(approvals_where(
        store,
        "session_key = $1 AND session = $2 AND caller = $3
           AND ($4::TEXT IS NULL OR tool = $4) AND ($5::TEXT IS NULL OR digest = $5)
           AND reason IS NOT DISTINCT FROM $6::TEXT AND expires_ms > $7
           AND ($8 OR requester IS NOT DISTINCT FROM $9::TEXT)
         ORDER BY created_ms DESC, id DESC LIMIT 1",
        &[
            &session_key(binding.session),
            &binding.session,
            &binding.caller,
            &binding.tool,
            &binding.digest,
            &reason,
            &to_sql(now_ms),
            &anyone,
            &requester,
        ],
    )
    .await?
    .into_iter()
    .next())
}

pub(crate) async fn page(
    store: &PostgresStore,
    query: &PendingQuery<'_>,
) -> Result<PendingPage, StoreError> {
    let statements = approval::page_statements(query, |n| format!("${n}"));
    // The count and the page from one snapshot: read apart, a question
    // asked between them made the page count one thing and list another.
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    tx.batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .map_err(StoreError::new)?;
    let total: i64 = tx
        .query_one(
            &statements.count,
            &statements
                .count_values
                .iter()
                .map(param)
                .collect::<Vec<_>>(),
        )
        .await
        .map_err(StoreError::new)?
        .get(0);
    let rows = tx
        .query(
            &statements.page,
            &statements.page_values.iter().map(param).collect::<Vec<_>>(),
        )
        .await
        .map_err(StoreError::new)?;
    tx.commit().await.map_err(StoreError::new)?;
    let rows = rows.iter().map(values).collect::<Result<Vec<_>, _>>()?;
    approval::page(query, total, rows)
}

pub(crate) async fn take(
    store: &PostgresStore,
    taking: &ApprovalUse<'_>,
) -> Result<TakeApproval, StoreError> {
    let (id, binding, now_ms) = (taking.id, taking.binding, taking.now_ms);
    // A decision only ever goes from none to one: a decided approval is
    // tried first, then an undecided one, then (decided in between) the
    // first again. Used up only if it matches: a mismatched attempt
    // changes nothing.
    let mut taken = use_up(store, taking, true).await?;
    if taken.is_none() {
        taken = use_up(store, taking, false).await?;
    }
    if taken.is_none() {
        taken = use_up(store, taking, true).await?;
    }
    if taken.is_none() {
        // None is used up once expired: an expired question of this call
        // is said so, and reads expired to everyone after.
        let entry = approvals_where(store, "id = $1", &[&id])
            .await?
            .into_iter()
            .next();
        if let Some(entry) = entry
            && entry.used_ms.is_none()
            && binding.matches(&entry.approval)
            && entry.approval.expires_ms <= now_ms
        {
            return Ok(TakeApproval::Expired);
        }
    }
    Ok(approval::taken(taken, now_ms))
}

pub(crate) async fn pending(
    store: &PostgresStore,
    now_ms: u64,
    limit: usize,
) -> Result<Vec<PendingApproval>, StoreError> {
    let entries = approvals_where(
        store,
        "decision IS NULL AND used_ms IS NULL AND expires_ms > $1
             ORDER BY created_ms, id LIMIT $2",
        &[&to_sql(now_ms), &limit_sql(limit)],
    )
    .await?;
    Ok(entries.into_iter().map(|entry| entry.approval).collect())
}

pub(crate) async fn decide(
    store: &PostgresStore,
    deciding: &DecisionWrite<'_>,
) -> Result<DecideOutcome, StoreError> {
    let (id, decision, now_ms) = (deciding.id, deciding.decision, deciding.now_ms);
    let text = approval::json(decision)?;
    let client = store.client().await?;
    // One statement: of two decisions at once, one changes the row; the
    // notification goes out when it commits.
    let decided = client
        .query_opt(
            DECIDE.as_str(),
            &[
                &id,
                &text,
                &to_sql(decision.decided_ms),
                &to_sql(now_ms),
                &toolcall_sql::controls::stands_until(decision),
            ],
        )
        .await
        .map_err(StoreError::new)?;
    if decided.is_some() {
        store.wrote().await;
        return Ok(DecideOutcome::Decided);
    }
    Ok(approval::not_decided(get(store, id).await?))
}

pub(crate) async fn get(
    store: &PostgresStore,
    id: &str,
) -> Result<Option<ApprovalEntry>, StoreError> {
    Ok(approvals_where(store, "id = $1", &[&id])
        .await?
        .into_iter()
        .next())
}

pub(crate) async fn decided(
    store: &PostgresStore,
    limit: usize,
) -> Result<Vec<ApprovalEntry>, StoreError> {
    approvals_where(
        store,
        "decided_ms IS NOT NULL ORDER BY decided_ms DESC, id LIMIT $1",
        &[&limit_sql(limit)],
    )
    .await
}

/// Gives back the decision on `id`, used up and not settled, unless an
/// identical call's question is unused (its `ask_key` is unique among the
/// unused): see [`QuestionStore::give_back_approval`](toolcall_ledger::store::QuestionStore::give_back_approval).
pub(crate) async fn give_back(store: &PostgresStore, id: &str) -> Result<bool, StoreError> {
    let client = store.client().await?;
    let changed = client
        .execute(
            "UPDATE toolcall_approvals AS a SET used_ms = NULL
             WHERE a.id = $1 AND a.decision IS NOT NULL AND a.used_ms IS NOT NULL
               AND a.result IS NULL
               AND NOT EXISTS (SELECT 1 FROM toolcall_approvals AS other
                    WHERE other.id <> a.id AND other.used_ms IS NULL
                      AND (other.ask_key = a.ask_key
                           OR (other.session_key = a.session_key AND other.session = a.session
                               AND other.caller = a.caller AND other.tool = a.tool
                               AND other.digest = a.digest
                               AND other.reason IS NOT DISTINCT FROM a.reason
                               AND other.requester IS NOT DISTINCT FROM a.requester)))",
            &[&id],
        )
        .await
        .map_err(StoreError::new)?;
    Ok(changed > 0)
}

pub(crate) async fn settle(
    store: &PostgresStore,
    id: &str,
    result: &ApprovalResult,
) -> Result<(), StoreError> {
    let text = approval::json(result)?;
    store
        .execute(
            "UPDATE toolcall_approvals SET result = $2 WHERE id = $1 AND decision IS NOT NULL",
            &[&id, &text],
        )
        .await?;
    Ok(())
}

/// Waits for a decision on `id` until `until_ms`: see [`PostgresStore`]'s
/// [`QuestionStore::wait_approval`](toolcall_ledger::store::QuestionStore::wait_approval).
pub(crate) async fn wait(
    store: &PostgresStore,
    id: &str,
    until_ms: u64,
) -> Result<Option<ApprovalEntry>, StoreError> {
    let (client, mut wake, driver) = store.url.connect_listening().await?;
    let waited = async {
        client
            .batch_execute(&format!("LISTEN {DECISION_CHANNEL}"))
            .await
            .map_err(StoreError::new)?;
        loop {
            // Read after LISTEN: a decision made before it is seen here.
            let entry = get(store, id).await?;
            let now = now_ms();
            let settled = entry
                .as_ref()
                .is_none_or(|e| e.approval.decision.is_some() || e.used_ms.is_some());
            if settled || now >= until_ms {
                return Ok(entry);
            }
            let pause = Duration::from_millis(until_ms - now).min(WAIT_RECHECK);
            let _ = tokio::time::timeout(pause, async {
                while let Some(payload) = wake.recv().await {
                    if payload == id {
                        return;
                    }
                }
                // The connection dropped: wait out the pause.
                std::future::pending::<()>().await;
            })
            .await;
        }
    }
    .await;
    drop(driver);
    waited
}
