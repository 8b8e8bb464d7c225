//! The schema: its versions and the upgrades between them, made when the
//! store connects.

use tokio_postgres::Client;
use toolcall_ledger::store::StoreError;
use toolcall_sql::schema;

/// Where the schema's version is kept (no row: version 0).
const VERSION_TABLE: &str = "
CREATE TABLE IF NOT EXISTS toolcall_schema_version (
    version INTEGER NOT NULL
);
";

/// Version 1, after the old check on `state` is dropped: the `in_doubt`
/// state, steps keyed by [`session_key`](toolcall_ledger::store::session_key)
/// (a session keeps its count), and the index the purge scans for steps;
/// then [`schema::LOCKS_V1`].
const UPGRADE_V1: &str = "
ALTER TABLE toolcall_records ADD CONSTRAINT toolcall_records_state_check
    CHECK (state IN ('in_flight', 'completed', 'in_doubt'));
UPDATE toolcall_steps SET session = encode(sha256(convert_to(session, 'UTF8')), 'hex');
CREATE INDEX IF NOT EXISTS toolcall_steps_touched ON toolcall_steps (touched_ms);
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
/// [`session_key`](toolcall_ledger::store::session_key) of the session (filled
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

/// Version 6: who may answer an approval besides a person (`answerers`),
/// and the question a claim keeps for a person should the call's outcome
/// stay unknown (`question`, its JSON text, and `asked_ms`, when it was
/// kept, of a record); then [`schema::QUESTIONS_V6`], the index that counts
/// a caller's open approvals and the one that lists the records keeping a
/// question. Columns are only added, and only where missing, so replicas
/// still at version 5 keep working (the approvals they ask for are a
/// person's only, and their claims keep no question).
fn upgrade_v6() -> String {
    format!(
        "{}{}",
        add_columns(&schema::COLUMNS_V6),
        schema::QUESTIONS_V6
    )
}

/// `ALTER TABLE ... ADD COLUMN IF NOT EXISTS` for each `(table, column,
/// type)`: added only where missing, so replicas at the version before
/// keep working (version 7: an approval's `principal`, `NULL` from them).
fn add_columns(columns: &[(&str, &str, &str)]) -> String {
    columns
        .iter()
        .map(|(table, column, kind)| {
            format!(
                "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {};\n",
                schema::bigint(kind)
            )
        })
        .collect()
}

/// Any 64-bit number, the same in every replica: the migration's lock.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_6361_6c6c;

/// Creates or upgrades the tables in `schema` unless they are at this
/// version (in one transaction under an advisory lock), points the
/// connection's search path at it and has it plan the store's statements
/// once (generic plans).
pub(crate) async fn migrate(client: &mut Client, schema_name: &str) -> Result<(), StoreError> {
    let schema_name = quote(schema_name);
    // A schema at this version has every table and index: they committed
    // with its version. Made again (`IF NOT EXISTS`), each `CREATE INDEX`
    // would take a SHARE lock on its table before finding the index there:
    // every new connection would wait for the writes in progress on the
    // store's tables, on every replica, and stop them until it committed.
    if found_version(client, &schema_name).await? != Some(schema::VERSION) {
        make_or_upgrade(client, &schema_name).await?;
    }
    // Generic plans (Postgres 12 and later): the store's statements find
    // rows by key, whatever their parameters. Left to choose, Postgres plans
    // a statement with parameters that switch parts of it off (`begin`'s)
    // anew at each execution, the plan made for the values given looking
    // cheaper than the generic one: most of the server's work a call.
    client
        .batch_execute(&format!(
            "SET search_path TO {schema_name};
             SELECT set_config('plan_cache_mode', 'force_generic_plan', false)
             WHERE current_setting('server_version_num')::INTEGER >= 120000;"
        ))
        .await
        .map_err(StoreError::new)
}

/// The version the schema (quoted) says it is at, read without a lock;
/// `None` when it has no version yet (no schema, no table, no row).
async fn found_version(client: &Client, schema_name: &str) -> Result<Option<i64>, StoreError> {
    use tokio_postgres::error::SqlState;
    let read = client
        .query_one(
            &format!("SELECT MAX(version) FROM {schema_name}.toolcall_schema_version"),
            &[],
        )
        .await;
    match read {
        Ok(row) => Ok(row.get::<_, Option<i32>>(0).map(i64::from)),
        Err(error)
            if matches!(
                error.code(),
                Some(&SqlState::UNDEFINED_TABLE | &SqlState::INVALID_SCHEMA_NAME)
            ) =>
        {
            Ok(None)
        }
        Err(error) => Err(StoreError::new(error)),
    }
}

/// Creates or upgrades the tables in the schema (quoted), in one
/// transaction under an advisory lock.
async fn make_or_upgrade(client: &mut Client, schema_name: &str) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(StoreError::new)?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
         CREATE SCHEMA IF NOT EXISTS {schema_name};
         SET LOCAL search_path TO {schema_name};
         {}
         {VERSION_TABLE}",
        schema::bigint(schema::TABLES_V0)
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
    let found = i64::from(found);
    if found > schema::VERSION {
        return Err(schema::too_new(
            &format!("the schema {schema_name}"),
            found,
            "toolcall-postgres",
            "connect",
        ));
    }
    for version in schema::upgrades(found) {
        let upgrade = match version {
            1 => {
                // The first release's check on `state` has Postgres's
                // default name, but whatever its name, every check on
                // `state` goes.
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
                format!("{UPGRADE_V1}{}", schema::bigint(schema::LOCKS_V1))
            }
            2 => UPGRADE_V2.to_owned(),
            3 => schema::bigint(schema::TAINT_V3),
            4 => UPGRADE_V4.to_owned(),
            5 => UPGRADE_V5.to_owned(),
            6 => upgrade_v6(),
            7 => add_columns(&schema::COLUMNS_V7),
            8 => schema::bigint(schema::CONTROLS_V8),
            // Who a question is bound to, filled from who asked it, and
            // questions about unknown outcomes that never expire.
            9 => format!(
                "{}
                 UPDATE toolcall_approvals
                 SET requester = (principal::json->>'issuer') || chr(31)
                                 || (principal::json->>'subject')
                 WHERE principal IS NOT NULL AND requester IS NULL
                   AND reason IS DISTINCT FROM 'in_doubt';
                 {};",
                add_columns(&schema::COLUMNS_V9),
                schema::NEVER_EXPIRES_V9
            ),
            // Where a session's taint came from, and a question's copy.
            10 => add_columns(&schema::COLUMNS_V10),
            11 => schema::OPEN_QUESTIONS_V11.to_owned(),
            _ => unreachable!("no upgrade past schema::VERSION"),
        };
        tx.batch_execute(&upgrade).await.map_err(StoreError::new)?;
    }
    if found < schema::VERSION {
        tx.batch_execute(&format!(
            "DELETE FROM toolcall_schema_version;
             INSERT INTO toolcall_schema_version (version) VALUES ({});",
            schema::VERSION
        ))
        .await
        .map_err(StoreError::new)?;
    }
    tx.commit().await.map_err(StoreError::new)
}

pub(crate) fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}
