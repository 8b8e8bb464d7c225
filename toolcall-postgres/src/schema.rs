//! The schema: its versions and the upgrades between them, made when the
//! store connects.

use tokio_postgres::Client;
use toolcall_core::store::StoreError;

/// The schema this version writes, kept in `toolcall_schema_version`.
const SCHEMA_VERSION: i32 = 5;

/// Version 0, the first release's tables. Created if missing, so that a new
/// schema and one from that release take the same upgrades.
const SCHEMA_V0: &str = "
CREATE TABLE IF NOT EXISTS toolcall_steps (
    session    TEXT PRIMARY KEY,
    count      BIGINT NOT NULL,
    touched_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_calls (
    key        TEXT PRIMARY KEY,
    count      BIGINT NOT NULL,
    touched_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_records (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    until_ms   BIGINT NOT NULL,
    result     TEXT,
    touched_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_records_touched ON toolcall_records (touched_ms);
CREATE TABLE IF NOT EXISTS toolcall_approvals (
    id         TEXT PRIMARY KEY,
    session    TEXT NOT NULL,
    caller     TEXT NOT NULL,
    tool       TEXT NOT NULL,
    digest     TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    step       BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
";

/// Where the schema's version is kept (no row: version 0).
const VERSION_TABLE: &str = "
CREATE TABLE IF NOT EXISTS toolcall_schema_version (
    version INTEGER NOT NULL
);
";

/// Version 1, after the old check on `state` is dropped: the `in_doubt`
/// state, steps keyed by [`session_key`](toolcall_core::store::session_key)
/// (a session keeps its count), resource locks, and the indexes the purge
/// scans.
const UPGRADE_V1: &str = "
ALTER TABLE toolcall_records ADD CONSTRAINT toolcall_records_state_check
    CHECK (state IN ('in_flight', 'completed', 'in_doubt'));
UPDATE toolcall_steps SET session = encode(sha256(convert_to(session, 'UTF8')), 'hex');
CREATE INDEX IF NOT EXISTS toolcall_steps_touched ON toolcall_steps (touched_ms);
CREATE INDEX IF NOT EXISTS toolcall_calls_touched ON toolcall_calls (touched_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_expires ON toolcall_approvals (expires_ms);
CREATE TABLE IF NOT EXISTS toolcall_locks (
    resource_key TEXT PRIMARY KEY,
    resource     TEXT NOT NULL,
    holder       TEXT NOT NULL,
    until_ms     BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_locks_until ON toolcall_locks (until_ms);
";

/// Version 2: a person's decision kept with its approval (the inbox), when
/// a call used it up and what came of it, and the indexes the inbox reads.
/// Columns are only added, so replicas still at version 1 keep working.
const UPGRADE_V2: &str = "
ALTER TABLE toolcall_approvals
    ADD COLUMN IF NOT EXISTS decision TEXT,
    ADD COLUMN IF NOT EXISTS decided_ms BIGINT,
    ADD COLUMN IF NOT EXISTS used_ms BIGINT,
    ADD COLUMN IF NOT EXISTS result TEXT;
CREATE INDEX IF NOT EXISTS toolcall_approvals_created ON toolcall_approvals (created_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_decided ON toolcall_approvals (decided_ms);
";

/// Version 3: the taint of untrusted output, per session: one row marks
/// the session (`print` empty), one more per fingerprint (hex digests of
/// the values, never the text), purged with the session's other rows.
const UPGRADE_V3: &str = "
CREATE TABLE IF NOT EXISTS toolcall_taint (
    session    TEXT NOT NULL,
    print      TEXT NOT NULL,
    touched_ms BIGINT NOT NULL,
    PRIMARY KEY (session, print)
);
CREATE INDEX IF NOT EXISTS toolcall_taint_touched ON toolcall_taint (touched_ms);
";

/// Version 4: why an approval asks a person (`reason`, and the tainted
/// arguments as a JSON array in `tainted`). Columns are only added, so
/// replicas still at version 3 keep working; a schema that has them already
/// keeps them.
const UPGRADE_V4: &str = "
ALTER TABLE toolcall_approvals
    ADD COLUMN IF NOT EXISTS reason TEXT,
    ADD COLUMN IF NOT EXISTS tainted TEXT;
";

/// Version 5: approvals findable by their session and their call (one
/// question per call, a session's open ones counted, the inbox filtered by
/// session or tool). `session_key` holds the
/// [`session_key`](toolcall_core::store::session_key) of the session (filled
/// in for the rows already there); `ask_key` a digest of the call
/// (session, caller, tool, digest and reason) on an approval asked for with
/// `ask_approval`, unique among the unused ones, so that two replicas
/// asking for the same call at once store one. Columns and indexes are only
/// added, so replicas still at version 4 keep working (the approvals they
/// ask for have neither: they are listed in the inbox, but not by a filter
/// on their session, and not found again by an identical call).
const UPGRADE_V5: &str = "
ALTER TABLE toolcall_approvals
    ADD COLUMN IF NOT EXISTS session_key TEXT,
    ADD COLUMN IF NOT EXISTS ask_key TEXT;
UPDATE toolcall_approvals SET session_key = encode(sha256(convert_to(session, 'UTF8')), 'hex')
    WHERE session_key IS NULL;
CREATE INDEX IF NOT EXISTS toolcall_approvals_session_digest
    ON toolcall_approvals (session_key, digest);
CREATE INDEX IF NOT EXISTS toolcall_approvals_session_created
    ON toolcall_approvals (session_key, created_ms, id);
CREATE INDEX IF NOT EXISTS toolcall_approvals_tool_created
    ON toolcall_approvals (tool, created_ms, id);
CREATE UNIQUE INDEX IF NOT EXISTS toolcall_approvals_ask
    ON toolcall_approvals (ask_key) WHERE used_ms IS NULL;
";

/// Any 64-bit number, the same in every replica: the migration's lock.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_6361_6c6c;

/// Creates or upgrades the tables in `schema`, in one transaction under an
/// advisory lock, and points the connection's search path at it.
pub(crate) async fn migrate(client: &mut Client, schema: &str) -> Result<(), StoreError> {
    let schema = quote(schema);
    let tx = client.transaction().await.map_err(StoreError::new)?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
         CREATE SCHEMA IF NOT EXISTS {schema};
         SET LOCAL search_path TO {schema};
         {SCHEMA_V0}
         {VERSION_TABLE}"
    ))
    .await
    .map_err(StoreError::new)?;
    let found: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM toolcall_schema_version",
            &[],
        )
        .await
        .map_err(StoreError::new)?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::new(format!(
            "the schema {schema} is version {found}, newer than this toolcall-postgres \
             knows ({SCHEMA_VERSION}): connect with a newer version"
        )));
    }
    if found < 1 {
        // The first release's check on `state` has Postgres's default name,
        // but whatever its name, every check on `state` goes.
        let checks = tx
            .query(
                "SELECT conname::TEXT FROM pg_constraint
                 WHERE conrelid = 'toolcall_records'::regclass AND contype = 'c'
                   AND pg_get_constraintdef(oid) LIKE '%state%'",
                &[],
            )
            .await
            .map_err(StoreError::new)?;
        for check in checks {
            let name: String = check.get(0);
            tx.batch_execute(&format!(
                "ALTER TABLE toolcall_records DROP CONSTRAINT {}",
                quote(&name)
            ))
            .await
            .map_err(StoreError::new)?;
        }
        tx.batch_execute(UPGRADE_V1)
            .await
            .map_err(StoreError::new)?;
    }
    if found < 2 {
        tx.batch_execute(UPGRADE_V2)
            .await
            .map_err(StoreError::new)?;
    }
    if found < 3 {
        tx.batch_execute(UPGRADE_V3)
            .await
            .map_err(StoreError::new)?;
    }
    if found < 4 {
        tx.batch_execute(UPGRADE_V4)
            .await
            .map_err(StoreError::new)?;
    }
    if found < 5 {
        tx.batch_execute(UPGRADE_V5)
            .await
            .map_err(StoreError::new)?;
    }
    if found < SCHEMA_VERSION {
        tx.batch_execute(&format!(
            "DELETE FROM toolcall_schema_version;
             INSERT INTO toolcall_schema_version (version) VALUES ({SCHEMA_VERSION});"
        ))
        .await
        .map_err(StoreError::new)?;
    }
    tx.commit().await.map_err(StoreError::new)?;
    client
        .batch_execute(&format!("SET search_path TO {schema}"))
        .await
        .map_err(StoreError::new)
}

pub(crate) fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}
