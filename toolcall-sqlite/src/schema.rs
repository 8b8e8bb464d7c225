//! The file's schema: its versions, the upgrades between them, and opening
//! a file that other connections may be creating or upgrading at the same
//! moment.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, ErrorCode, TransactionBehavior, params};
use toolcall_ledger::store::{StoreError, session_key};
use toolcall_sql::schema;

/// Version 1: the `in_doubt` state (SQLite cannot change a CHECK constraint,
/// so the records table is rebuilt), and steps keyed by [`session_key`] (the
/// table is rebuilt by [`rekey_steps`]); then [`schema::LOCKS_V1`].
const UPGRADE_V1: &str = "
CREATE TABLE toolcall_records_v1 (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('in_flight', 'completed', 'in_doubt')),
    until_ms   INTEGER NOT NULL,
    result     TEXT,
    touched_ms INTEGER NOT NULL
);
INSERT INTO toolcall_records_v1 (key, state, until_ms, result, touched_ms)
    SELECT key, state, until_ms, result, touched_ms FROM toolcall_records;
DROP TABLE toolcall_records;
ALTER TABLE toolcall_records_v1 RENAME TO toolcall_records;
CREATE INDEX IF NOT EXISTS toolcall_records_touched ON toolcall_records (touched_ms);
CREATE TABLE toolcall_steps_v1 (
    session    TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
";

/// Version 2: a person's decision kept with its approval (the inbox), when
/// a call used it up and what came of it, and the indexes the inbox reads.
/// Columns are only added, so a process still at version 1 keeps working.
const UPGRADE_V2: &str = "
ALTER TABLE toolcall_approvals ADD COLUMN decision TEXT;
ALTER TABLE toolcall_approvals ADD COLUMN decided_ms INTEGER;
ALTER TABLE toolcall_approvals ADD COLUMN used_ms INTEGER;
ALTER TABLE toolcall_approvals ADD COLUMN result TEXT;
CREATE INDEX IF NOT EXISTS toolcall_approvals_created ON toolcall_approvals (created_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_decided ON toolcall_approvals (decided_ms);
";

/// Runs `step` until it does not fail with "database is busy/locked", with
/// a growing pause in between, until `deadline`; each attempt waits for the
/// lock at most until the deadline too.
pub(crate) fn retry_busy<T>(
    conn: &mut Connection,
    deadline: Instant,
    mut step: impl FnMut(&mut Connection) -> rusqlite::Result<T>,
) -> Result<T, StoreError> {
    let mut pause = Duration::from_millis(1);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        conn.busy_timeout(left).map_err(StoreError::new)?;
        match step(conn) {
            Err(error) if is_busy(&error) && left > pause => {
                std::thread::sleep(pause + jitter(pause));
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            result => return result.map_err(StoreError::new),
        }
    }
}

pub(crate) fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Up to `pause` more, so that connections that collided do not collide again.
fn jitter(pause: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    pause.mul_f64(f64::from(nanos % 1000) / 1000.0)
}

/// Brings the schema up to [`schema::VERSION`] in one `IMMEDIATE`
/// transaction, and returns the version it found the file at (or made).
pub(crate) fn migrate(conn: &mut Connection) -> rusqlite::Result<i64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found >= schema::VERSION {
        // Another connection upgraded it while this one waited.
        return Ok(found);
    }
    for version in schema::upgrades(found) {
        match version {
            1 => {
                tx.execute_batch(schema::TABLES_V0)?;
                tx.execute_batch(UPGRADE_V1)?;
                tx.execute_batch(schema::LOCKS_V1)?;
                rekey_steps(&tx)?;
            }
            2 => tx.execute_batch(UPGRADE_V2)?,
            3 => tx.execute_batch(schema::TAINT_V3)?,
            // Version 4: why an approval asks a person (`reason`, and the
            // tainted arguments as a JSON array in `tainted`). Columns are
            // only added, so a process still at version 3 keeps working; a
            // file that has them already keeps them.
            4 => {
                for column in ["reason", "tainted"] {
                    add_column(&tx, "toolcall_approvals", column, "TEXT")?;
                }
            }
            5 => upgrade_v5(&tx)?,
            // Version 6: who may answer an approval, and the question a
            // claim keeps (columns only added, so a process still at
            // version 5 keeps working; its approvals are a person's only,
            // and its claims keep no question).
            6 | 7 => {
                let columns: &[(&str, &str, &str)] = if version == 6 {
                    &schema::COLUMNS_V6
                } else {
                    &schema::COLUMNS_V7
                };
                for (table, column, kind) in columns {
                    add_column(&tx, table, column, kind)?;
                }
                if version == 6 {
                    tx.execute_batch(schema::QUESTIONS_V6)?;
                }
            }
            // Version 8: the operators' controls, rate windows and
            // signatures, tables only added.
            8 => tx.execute_batch(schema::CONTROLS_V8)?,
            // Version 9: who a question is bound to, filled from who asked
            // it, and questions about unknown outcomes that never expire.
            9 => {
                let [(table, column, kind)] = schema::COLUMNS_V9;
                add_column(&tx, table, column, kind)?;
                tx.execute_batch(
                    "UPDATE toolcall_approvals
                     SET requester = json_extract(principal, '$.issuer') || char(31)
                                     || json_extract(principal, '$.subject')
                     WHERE principal IS NOT NULL AND requester IS NULL
                       AND reason IS NOT 'in_doubt';",
                )?;
                tx.execute_batch(schema::NEVER_EXPIRES_V9)?;
            }
            // Version 10: where a session's taint came from, and a
            // question's copy of it (columns only added, so a process still
            // at version 9 keeps working; what it writes has none).
            10 => {
                for (table, column, kind) in schema::COLUMNS_V10 {
                    add_column(&tx, table, column, kind)?;
                }
            }
            11 => tx.execute_batch(schema::OPEN_QUESTIONS_V11)?,
            _ => unreachable!("no upgrade past schema::VERSION"),
        }
    }
    tx.pragma_update(None, "user_version", schema::VERSION)?;
    tx.commit()?;
    Ok(schema::VERSION)
}

/// `column` added to `table`, unless the file has it already.
fn add_column(
    tx: &rusqlite::Transaction<'_>,
    table: &str,
    column: &str,
    kind: &str,
) -> rusqlite::Result<()> {
    let present: bool = tx.query_row(
        &format!("SELECT EXISTS (SELECT 1 FROM pragma_table_info('{table}') WHERE name = ?1)"),
        [column],
        |row| row.get(0),
    )?;
    if !present {
        tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind};"))?;
    }
    Ok(())
}

/// Version 1 keys steps by [`session_key`]: moves the counts of version 0
/// (keyed by the session itself) into `toolcall_steps_v1` under their new
/// key, and puts that table in place, so a session keeps its count.
fn rekey_steps(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    {
        let mut select = tx.prepare("SELECT session, count, touched_ms FROM toolcall_steps")?;
        let mut insert = tx.prepare(
            "INSERT INTO toolcall_steps_v1 (session, count, touched_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (session) DO UPDATE SET count = max(count, excluded.count)",
        )?;
        let mut rows = select.query([])?;
        while let Some(row) = rows.next()? {
            let session: String = row.get(0)?;
            insert.execute(params![
                session_key(&session),
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?
            ])?;
        }
    }
    tx.execute_batch(
        "DROP TABLE toolcall_steps;
         ALTER TABLE toolcall_steps_v1 RENAME TO toolcall_steps;
         CREATE INDEX IF NOT EXISTS toolcall_steps_touched ON toolcall_steps (touched_ms);",
    )
}

/// Version 5: approvals findable by their session and their call (one
/// question per call, a session's open ones counted, the inbox filtered by
/// session or tool): the [`session_key`] of the session in a new column
/// `session_key`, filled in for the rows already there, and indexes on
/// it. Columns and indexes are only added, so a process still at version 4
/// keeps working (the approvals it asks for have no `session_key`: they are
/// listed in the inbox, but not by a filter on their session, and not found
/// again by an identical call).
fn upgrade_v5(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let present: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('toolcall_approvals') \
         WHERE name = 'session_key')",
        [],
        |row| row.get(0),
    )?;
    if !present {
        tx.execute_batch("ALTER TABLE toolcall_approvals ADD COLUMN session_key TEXT;")?;
    }
    {
        let mut select =
            tx.prepare("SELECT id, session FROM toolcall_approvals WHERE session_key IS NULL")?;
        let mut update =
            tx.prepare("UPDATE toolcall_approvals SET session_key = ?2 WHERE id = ?1")?;
        let mut rows = select.query([])?;
        while let Some(row) = rows.next()? {
            let id: String = row.get(0)?;
            let session: String = row.get(1)?;
            update.execute(params![id, session_key(&session)])?;
        }
    }
    tx.execute_batch(
        "CREATE INDEX IF NOT EXISTS toolcall_approvals_session_digest
             ON toolcall_approvals (session_key, digest);
         CREATE INDEX IF NOT EXISTS toolcall_approvals_session_created
             ON toolcall_approvals (session_key, created_ms, id);
         CREATE INDEX IF NOT EXISTS toolcall_approvals_tool_created
             ON toolcall_approvals (tool, created_ms, id);",
    )
}
