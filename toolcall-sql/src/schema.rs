//! The schema's versions, and the tables every dialect creates alike.
//!
//! A store keeps the version its tables are at (SQLite: the file's
//! `PRAGMA user_version`; Postgres: the table `toolcall_schema_version`),
//! upgrades older ones to [`VERSION`] in one transaction that no other
//! connection runs at the same time, and refuses newer ones
//! ([`too_new`]). Every upgrade only adds what the version before it
//! lacks, so a process still running that version keeps working.
//!
//! | version | what it adds |
//! |---|---|
//! | 0 | steps, call counts, records and approvals ([`TABLES_V0`]) |
//! | 1 | the `in_doubt` state, steps keyed by [`session_key`](toolcall_ledger::store::session_key), resource locks and the indexes the purge scans ([`LOCKS_V1`]) |
//! | 2 | a person's decision kept with its approval, when a call used it up and what came of it |
//! | 3 | the taint of untrusted output ([`TAINT_V3`]) |
//! | 4 | why an approval asks a person: `reason`, `tainted` |
//! | 5 | approvals findable by their session and their call: `session_key` and its indexes |
//! | 6 | who may answer an approval besides a person (`answerers`), a caller's open approvals counted (an index), and the question a claim keeps for an unknown outcome (`question`, `asked_ms` of a record, [`QUESTIONS_V6`]) |
//! | 7 | who authenticated behind the caller of an approval (`principal`, [`COLUMNS_V7`]) |
//! | 8 | the operators' controls and their history, fleet-wide rate windows and the signatures of approvals that need more than one person ([`CONTROLS_V8`]) |
//! | 9 | who a question is bound to (`requester`, [`COLUMNS_V9`], filled from `principal`), and questions about unknown outcomes that never expire ([`NEVER_EXPIRES_V9`]) |
//! | 10 | where a session's taint came from (`sources` of its mark in `toolcall_taint`) and a question's copy of it (`provenance`), [`COLUMNS_V10`] |
//! | 11 | the open questions by their age, the inbox's own index ([`OPEN_QUESTIONS_V11`]) |
//!
//! The tables here are written with SQLite's `INTEGER`; [`bigint`] writes
//! them with Postgres's `BIGINT`.

use toolcall_ledger::store::StoreError;

/// The schema this version writes.
pub const VERSION: i64 = 11;

/// Version 0, the first release's tables. Created if missing, so that new
/// tables and tables from that release take the same upgrades.
pub const TABLES_V0: &str = "
CREATE TABLE IF NOT EXISTS toolcall_steps (
    session    TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_calls (
    key        TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_records (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    until_ms   INTEGER NOT NULL,
    result     TEXT,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_approvals (
    id         TEXT PRIMARY KEY,
    session    TEXT NOT NULL,
    caller     TEXT NOT NULL,
    tool       TEXT NOT NULL,
    digest     TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    step       INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_records_touched ON toolcall_records (touched_ms);
";

/// The part of version 1 every dialect writes alike, after its own: the
/// indexes the purge scans for call counts and approvals, and the resource
/// locks.
pub const LOCKS_V1: &str = "
CREATE INDEX IF NOT EXISTS toolcall_calls_touched ON toolcall_calls (touched_ms);
CREATE INDEX IF NOT EXISTS toolcall_approvals_expires ON toolcall_approvals (expires_ms);
CREATE TABLE IF NOT EXISTS toolcall_locks (
    resource_key TEXT PRIMARY KEY,
    resource     TEXT NOT NULL,
    holder       TEXT NOT NULL,
    until_ms     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_locks_until ON toolcall_locks (until_ms);
";

/// Version 3: the taint of untrusted output, per session: one row marks
/// the session (`print` empty), one more per fingerprint (hex digests of
/// the values, never the text), purged with the session's other rows.
pub const TAINT_V3: &str = "
CREATE TABLE IF NOT EXISTS toolcall_taint (
    session    TEXT NOT NULL,
    print      TEXT NOT NULL,
    touched_ms INTEGER NOT NULL,
    PRIMARY KEY (session, print)
);
CREATE INDEX IF NOT EXISTS toolcall_taint_touched ON toolcall_taint (touched_ms);
";

/// The indexes of version 6 every dialect writes alike, once its columns are
/// added (`answerers` of approvals; `question` and `asked_ms` of records):
/// a caller's open approvals, counted for its bound; and the records that
/// keep a question, listed when their outcome is unknown.
pub const QUESTIONS_V6: &str = "
CREATE INDEX IF NOT EXISTS toolcall_approvals_caller_open
    ON toolcall_approvals (caller, expires_ms);
CREATE INDEX IF NOT EXISTS toolcall_records_asking
    ON toolcall_records (asked_ms) WHERE question IS NOT NULL;
";

/// The columns version 6 adds, as `(table, column, type)`, for a dialect
/// that adds each one only where it is missing.
pub const COLUMNS_V6: [(&str, &str, &str); 3] = [
    ("toolcall_approvals", "answerers", "TEXT"),
    ("toolcall_records", "question", "TEXT"),
    ("toolcall_records", "asked_ms", "INTEGER"),
];

/// The column version 7 adds, as `(table, column, type)`: who
/// authenticated behind the caller that asked for an approval, a JSON
/// object ([`Principal`](toolcall_ledger::Principal)), `NULL` when nobody was
/// named.
pub const COLUMNS_V7: [(&str, &str, &str); 1] = [("toolcall_approvals", "principal", "TEXT")];

/// Version 8: the operators' controls (one row: its version and the
/// document) and their history (one row per version written: who, when,
/// what, in words); the rate limits' fixed windows (one row per bucket and
/// window, keyed by the [`session_key`](toolcall_ledger::store::session_key)
/// of the bucket, with the window's end for the purge); and the signatures
/// of approvals that need more than one person (one row per approval and
/// signer, `n` its place in the signing order). Tables are only added, so a
/// process still at version 7 keeps working.
pub const CONTROLS_V8: &str = "
CREATE TABLE IF NOT EXISTS toolcall_controls (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    version  INTEGER NOT NULL,
    document TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_controls_history (
    version INTEGER PRIMARY KEY,
    by_name TEXT NOT NULL,
    at_ms   INTEGER NOT NULL,
    summary TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_rates (
    bucket_key      TEXT NOT NULL,
    window_start_ms INTEGER NOT NULL,
    bucket          TEXT NOT NULL,
    until_ms        INTEGER NOT NULL,
    count           INTEGER NOT NULL,
    PRIMARY KEY (bucket_key, window_start_ms)
);
CREATE INDEX IF NOT EXISTS toolcall_rates_until ON toolcall_rates (until_ms);
CREATE TABLE IF NOT EXISTS toolcall_signatures (
    id     TEXT NOT NULL,
    signer TEXT NOT NULL,
    at_ms  INTEGER NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (id, signer)
);
";

/// The column version 9 adds, as `(table, column, type)`: who a question
/// is bound to ([`PendingApproval::requester`](toolcall_ledger::store::PendingApproval::requester)),
/// `NULL` for a call with no principal and for a question about an unknown
/// outcome. A process still at version 8 writes none: its questions are
/// bound to no principal.
pub const COLUMNS_V9: [(&str, &str, &str); 1] = [("toolcall_approvals", "requester", "TEXT")];

/// Version 9's change of the rows kept: a question about an unknown outcome
/// that nobody settled never expires (its outcome stays unknown until a
/// person says it); its expiry is set to `i64::MAX`.
pub const NEVER_EXPIRES_V9: &str = "UPDATE toolcall_approvals SET expires_ms = 9223372036854775807
     WHERE reason = 'in_doubt' AND used_ms IS NULL";

/// The columns version 10 adds, as `(table, column, type)`: where a
/// session's taint came from, a JSON array of
/// [`TaintSource`](toolcall_ledger::store::TaintSource)s, newest first, on
/// the row that marks the session (`print` empty) of `toolcall_taint`
/// ([`crate::taint`]); and the copy an approval asked because of it keeps
/// ([`PendingApproval::provenance`](toolcall_ledger::store::PendingApproval::provenance)).
/// A process still at version 9 writes neither: its sessions and
/// questions show no provenance.
pub const COLUMNS_V10: [(&str, &str, &str); 2] = [
    ("toolcall_taint", "sources", "TEXT"),
    ("toolcall_approvals", "provenance", "TEXT"),
];

/// Version 11: the open questions (undecided, unused) by their age, which
/// the inbox lists and counts at every page. Without it a page, oldest
/// first, walked the history of decided questions (older, and most of the
/// table) to reach them, and a count read every unused one: what an
/// inbox's page cost grew with its history. The expiry is in the index
/// so that the count reads the index alone. An index only added, so a
/// process still at version 10 keeps working.
pub const OPEN_QUESTIONS_V11: &str = "
CREATE INDEX IF NOT EXISTS toolcall_approvals_open
    ON toolcall_approvals (created_ms, id, expires_ms) WHERE decision IS NULL AND used_ms IS NULL;
";

/// `ddl` (one of the tables here) with Postgres's 64-bit `BIGINT` for
/// SQLite's `INTEGER`.
pub fn bigint(ddl: &str) -> String {
    ddl.replace("INTEGER", "BIGINT")
}

/// The versions that tables found at version `found` are upgraded
/// through, oldest first: none for tables at [`VERSION`] or newer.
pub fn upgrades(found: i64) -> impl Iterator<Item = i64> {
    (found.max(0) + 1)..=VERSION
}

/// The error for tables at version `found`, newer than [`VERSION`]:
/// `tables` names them ("the database's schema"), `store` is the store's
/// crate, and `how` what to do with a newer one ("open it").
pub fn too_new(tables: &str, found: i64, store: &str, how: &str) -> StoreError {
    StoreError::new(format!(
        "{tables} is version {found}, newer than this {store} knows ({VERSION}): \
         {how} with a newer version"
    ))
}
