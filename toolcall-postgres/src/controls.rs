//! The operators' controls and their history, the rate limits' windows,
//! and the signatures of approvals that need more than one person: the
//! statements of [`toolcall_sql::controls`], each write one statement, but
//! a signature, one transaction that locks its approval's row.

use std::sync::LazyLock;
use std::sync::atomic::Ordering;

use toolcall_ledger::store::{
    ControlsChange, ControlsWrite, RateWindow, SignOutcome, Signature, SignatureWrite, StoreError,
    StoredControls, session_key,
};
use toolcall_sql::approval;
use toolcall_sql::controls::{self, SignStep, dollars};
use toolcall_sql::{from_sql, limit_sql, to_sql};

use crate::PostgresStore;
use crate::approvals::{DECIDE, read_entry};

static CONTROLS: LazyLock<String> = LazyLock::new(|| dollars(controls::CONTROLS));

/// The document written if the version kept is `$1` (as version `$2`,
/// `$3` the document) and, in the same statement, the change kept (`$4`
/// who, `$5` when, `$6` what): a row if it was written.
static PUT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH put AS ({})
         INSERT INTO toolcall_controls_history (version, by_name, at_ms, summary)
         SELECT version, $4::TEXT, $5::BIGINT, $6::TEXT FROM put
         RETURNING version",
        dollars(controls::PUT_CONTROLS)
    )
});

static HISTORY: LazyLock<String> = LazyLock::new(|| dollars(controls::HISTORY));
static TAKE_RATE: LazyLock<String> = LazyLock::new(|| dollars(controls::TAKE_RATE));
static RATE_COUNT: LazyLock<String> = LazyLock::new(|| dollars(controls::RATE_COUNT));
static SIGNATURES: LazyLock<String> = LazyLock::new(|| dollars(controls::SIGNATURES));
static SIGN: LazyLock<String> = LazyLock::new(|| dollars(controls::SIGN));

/// The approval `$1`, its row locked until the transaction ends.
static LOCK_APPROVAL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM toolcall_approvals WHERE id = $1 FOR UPDATE",
        approval::COLUMNS
    )
});

pub(crate) async fn get(
    store: &PostgresStore,
    known: u64,
) -> Result<Option<StoredControls>, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(CONTROLS.as_str(), &[&to_sql(known)])
        .await
        .map_err(StoreError::new)?;
    Ok(row.map(|row| StoredControls {
        version: from_sql(row.get(0)),
        document: row.get(1),
    }))
}

pub(crate) async fn put(
    store: &PostgresStore,
    write: &ControlsWrite<'_>,
) -> Result<bool, StoreError> {
    store
        .wrote_if(
            PUT.as_str(),
            &[
                &to_sql(write.expected),
                &to_sql(write.expected.saturating_add(1)),
                &write.document,
                &write.change.by,
                &to_sql(write.change.at_ms),
                &write.change.summary,
            ],
        )
        .await
}

pub(crate) async fn history(
    store: &PostgresStore,
    limit: usize,
) -> Result<Vec<ControlsChange>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(HISTORY.as_str(), &[&limit_sql(limit)])
        .await
        .map_err(StoreError::new)?;
    Ok(rows
        .iter()
        .map(|row| ControlsChange {
            version: from_sql(row.get(0)),
            by: row.get(1),
            at_ms: from_sql(row.get(2)),
            summary: row.get(3),
        })
        .collect())
}

pub(crate) async fn take_rate(
    store: &PostgresStore,
    window: &RateWindow<'_>,
    limit: u64,
) -> Result<bool, StoreError> {
    if limit == 0 {
        return Ok(false);
    }
    store
        .wrote_if(
            TAKE_RATE.as_str(),
            &[
                &session_key(window.bucket),
                &window.bucket,
                &to_sql(window.start_ms),
                &to_sql(window.start_ms.saturating_add(window.length_ms)),
                &to_sql(limit),
            ],
        )
        .await
}

pub(crate) async fn rate_count(
    store: &PostgresStore,
    bucket: &str,
    window_start_ms: u64,
) -> Result<u64, StoreError> {
    let client = store.client().await?;
    let row = client
        .query_opt(
            RATE_COUNT.as_str(),
            &[&session_key(bucket), &to_sql(window_start_ms)],
        )
        .await
        .map_err(StoreError::new)?;
    Ok(row.map_or(0, |row| from_sql(row.get(0))))
}

/// The signatures of `id` in the rows `SIGNATURES` read, in signing order.
fn read_signatures(rows: &[tokio_postgres::Row]) -> Vec<Signature> {
    rows.iter()
        .map(|row| Signature {
            by: row.get(0),
            at_ms: from_sql(row.get(1)),
        })
        .collect()
}

pub(crate) async fn signatures(
    store: &PostgresStore,
    id: &str,
) -> Result<Vec<Signature>, StoreError> {
    let client = store.client().await?;
    let rows = client
        .query(SIGNATURES.as_str(), &[&id])
        .await
        .map_err(StoreError::new)?;
    Ok(read_signatures(&rows))
}

/// One transaction: the approval's row locked (`FOR UPDATE`: a second
/// signer waits here, then reads the first's signature), its signers
/// read, the signature kept and, for the last one, the decision recorded
/// and announced on [`DECISION_CHANNEL`](crate::DECISION_CHANNEL) when it
/// commits.
pub(crate) async fn sign(
    store: &PostgresStore,
    signing: &SignatureWrite<'_>,
) -> Result<SignOutcome, StoreError> {
    let SignatureWrite {
        id, signer, now_ms, ..
    } = *signing;
    let sent = |statements: u64| store.sent.fetch_add(statements, Ordering::Relaxed);
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let statement = |sql: &'static str| tx.prepare_cached(sql);
    let lock = statement(LOCK_APPROVAL.as_str())
        .await
        .map_err(StoreError::new)?;
    let entry = tx
        .query_opt(&lock, &[&id])
        .await
        .map_err(StoreError::new)?
        .as_ref()
        .map(read_entry)
        .transpose()?;
    let signed = statement(SIGNATURES.as_str())
        .await
        .map_err(StoreError::new)?;
    let signers: Vec<String> =
        read_signatures(&tx.query(&signed, &[&id]).await.map_err(StoreError::new)?)
            .into_iter()
            .map(|s| s.by)
            .collect();
    sent(2);
    let step = controls::sign_step(entry.as_ref(), &signers, signing);
    let n = match &step {
        SignStep::Answer(_) => return Ok(controls::signed(&step)),
        SignStep::Keep { n } | SignStep::Decide { n, .. } => *n,
    };
    let sign = statement(SIGN.as_str()).await.map_err(StoreError::new)?;
    tx.execute(&sign, &[&id, &signer, &to_sql(now_ms), &n])
        .await
        .map_err(StoreError::new)?;
    sent(1);
    if let SignStep::Decide { decision, .. } = &step {
        let decide = statement(DECIDE.as_str()).await.map_err(StoreError::new)?;
        tx.query_opt(
            &decide,
            &[
                &id,
                &approval::json(decision)?,
                &to_sql(decision.decided_ms),
                &to_sql(now_ms),
                &toolcall_sql::controls::stands_until(decision),
            ],
        )
        .await
        .map_err(StoreError::new)?;
        sent(1);
    }
    tx.commit().await.map_err(StoreError::new)?;
    drop(client);
    store.wrote().await;
    Ok(controls::signed(&step))
}
