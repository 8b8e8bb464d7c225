//! What the shop's and the store's tables hold, read in one snapshot: the
//! effects the checks count and the questions they compare.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::fleet::Db;

#[derive(Clone, Debug)]
pub struct ApprovalRow {
    pub id: String,
    pub tool: String,
    pub arguments: Value,
    pub decision: Option<Value>,
}

#[derive(Clone, Debug)]
pub struct RecordRow {
    pub key: String,
    pub state: String,
    pub until_ms: i64,
    pub question: Option<Value>,
}

#[derive(Default)]
pub struct Snapshot {
    /// `(order, amount)` of each refund row.
    pub refunds: Vec<(String, i64)>,
    /// `(order, text)` of each note row.
    pub notes: Vec<(String, String)>,
    pub approvals: Vec<ApprovalRow>,
    pub records: Vec<RecordRow>,
}

pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub fn json_of(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

const REFUNDS: &str = "SELECT order_id, amount_cents FROM orders_refunds";
const NOTES: &str = "SELECT order_id, text FROM orders_notes";
const APPROVALS: &str =
    "SELECT id, tool, arguments, decision, used_ms IS NOT NULL FROM toolcall_approvals";
const RECORDS: &str = "SELECT key, state, until_ms, question FROM toolcall_records";

async fn pg_client(url: &str) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

pub async fn snapshot(db: &Db) -> Result<Snapshot, String> {
    match db {
        Db::Postgres { url, .. } => {
            let c = pg_client(url).await?;
            let e = |e: tokio_postgres::Error| e.to_string();
            let mut s = Snapshot::default();
            for r in c.query(REFUNDS, &[]).await.map_err(e)? {
                s.refunds.push((r.get(0), r.get(1)));
            }
            for r in c.query(NOTES, &[]).await.map_err(e)? {
                s.notes.push((r.get(0), r.get(1)));
            }
            for r in c.query(APPROVALS, &[]).await.map_err(e)? {
                s.approvals.push(ApprovalRow {
                    id: r.get(0),
                    tool: r.get(1),
                    arguments: json_of(r.get(2)).unwrap_or(Value::Null),
                    decision: json_of(r.get(3)),
                });
            }
            for r in c.query(RECORDS, &[]).await.map_err(e)? {
                s.records.push(RecordRow {
                    key: r.get(0),
                    state: r.get(1),
                    until_ms: r.get(2),
                    question: json_of(r.get(3)),
                });
            }
            Ok(s)
        }
        Db::Sqlite { path } => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || sqlite_snapshot(&path))
                .await
                .map_err(|e| e.to_string())?
        }
    }
}

fn sqlite_snapshot(path: &Path) -> Result<Snapshot, String> {
    let e = |e: rusqlite::Error| e.to_string();
    let c = rusqlite::Connection::open(path).map_err(e)?;
    c.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(e)?;
    let mut s = Snapshot::default();
    // One read transaction: every table as of one moment.
    c.execute_batch("BEGIN").map_err(e)?;
    s.refunds = sqlite_rows(&c, REFUNDS, |r| Ok((r.get(0)?, r.get(1)?)))?;
    s.notes = sqlite_rows(&c, NOTES, |r| Ok((r.get(0)?, r.get(1)?)))?;
    s.approvals = sqlite_rows(&c, APPROVALS, |r| {
        Ok(ApprovalRow {
            id: r.get(0)?,
            tool: r.get(1)?,
            arguments: json_of(r.get(2)?).unwrap_or(Value::Null),
            decision: json_of(r.get(3)?),
        })
    })?;
    s.records = sqlite_rows(&c, RECORDS, |r| {
        Ok(RecordRow {
            key: r.get(0)?,
            state: r.get(1)?,
            until_ms: r.get(2)?,
            question: json_of(r.get(3)?),
        })
    })?;
    c.execute_batch("COMMIT").map_err(e)?;
    Ok(s)
}

/// Every approval the store keeps, by id: whether a person may decide it
/// now (undecided, unused, unexpired), as the inbox lists them.
pub async fn open_questions(db: &Db) -> Result<HashMap<String, bool>, String> {
    let now = wall_ms();
    let sql = format!(
        "SELECT id, decision IS NULL AND used_ms IS NULL AND expires_ms > {now} FROM toolcall_approvals"
    );
    match db {
        Db::Postgres { url, .. } => {
            let c = pg_client(url).await?;
            let rows = c.query(&sql, &[]).await.map_err(|e| e.to_string())?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        }
        Db::Sqlite { path } => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || {
                let e = |e: rusqlite::Error| e.to_string();
                let c = rusqlite::Connection::open(&path).map_err(e)?;
                c.busy_timeout(std::time::Duration::from_secs(10))
                    .map_err(e)?;
                let mut q = c.prepare(&sql).map_err(e)?;
                q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(e)?
                    .collect::<Result<_, _>>()
                    .map_err(e)
            })
            .await
            .map_err(|e| e.to_string())?
        }
    }
}

/// What identifies an effect of `tool` with `args` in the shop.
pub fn effect_of(tool: &str, args: &Value) -> Option<(String, String)> {
    let order = args["order_id"].as_str()?.to_owned();
    match tool {
        "refund_order" => Some((order, args["amount_cents"].as_i64()?.to_string())),
        "add_note" => Some((order, args["text"].as_str()?.to_owned())),
        _ => None,
    }
}

pub fn effects(s: &Snapshot) -> HashMap<(String, String, String), u64> {
    let mut count = HashMap::new();
    for (o, a) in &s.refunds {
        *count
            .entry(("refund_order".to_owned(), o.clone(), a.to_string()))
            .or_default() += 1;
    }
    for (o, t) in &s.notes {
        *count
            .entry(("add_note".to_owned(), o.clone(), t.clone()))
            .or_default() += 1;
    }
    count
}

/// How many times the shop holds the effect of `tool` with `args` (the
/// person looks before settling an unknown outcome).
pub async fn effect_count(db: &Db, tool: &str, args: &Value) -> Result<u64, String> {
    let (o, x) = effect_of(tool, args).ok_or("no effect")?;
    let s = snapshot(db).await?;
    Ok(effects(&s)
        .get(&(tool.to_owned(), o, x))
        .copied()
        .unwrap_or(0))
}

/// Every row `sql` selects, each read with `row`.
fn sqlite_rows<T>(
    c: &rusqlite::Connection,
    sql: &str,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, String> {
    let e = |e: rusqlite::Error| e.to_string();
    let mut q = c.prepare(sql).map_err(e)?;
    q.query_map([], row)
        .map_err(e)?
        .collect::<Result<_, _>>()
        .map_err(e)
}
