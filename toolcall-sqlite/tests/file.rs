//! The database file over its life: opened by many threads and processes at
//! once when it is new, made by the previous version (and upgraded),
//! refused when made by a newer one, and kept small by the store's own
//! purge.
//!
//! The processes are this same binary: `child_opens` is their program, run
//! only when a parent test asks for it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use rusqlite::Connection;
use serde_json::json;
use toolcall::ToolResult;
use toolcall::store::prelude::*;
use toolcall::store::{
    ApprovalDecision, AskApproval, Binding, Claim, DecideOutcome, Key, PendingApproval,
    PendingQuery, RecordedOutcome, TaintSource, TakeApproval, now_ms,
};
use toolcall_sqlite::{Purged, SqliteStore};
use toolcall_testkit::run::{self, block_on};

const DB: &str = "TOOLCALL_OPEN_DB";
const START_MS: &str = "TOOLCALL_OPEN_START_MS";

/// The store's key for a test's `name`.
fn key(name: &str) -> Key {
    Key::sha256(name)
}

/// `texts` in the order a table sorts them.
fn sorted<const N: usize>(mut texts: [String; N]) -> [String; N] {
    texts.sort();
    texts
}

fn fresh_dir(name: &str) -> PathBuf {
    run::fresh_dir(&format!("toolcall-sqlite-file-{name}"))
}

fn result(n: i64) -> ToolResult {
    ToolResult::success("pay", json!({"n": n}).as_object().unwrap().clone())
}

// ------------------------------------------------------ opening a new file

/// Eight threads, each with its own connection, open one new file at the
/// same moment, over thirty new files. Before `open` retried, switching a
/// new file to WAL failed with "database is locked" in most runs.
#[test]
fn many_threads_open_one_new_file_at_once() {
    let dir = fresh_dir("threads");
    let mut failures = Vec::new();
    for round in 0..30 {
        let path = dir.join(format!("store-{round}.db"));
        let barrier = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    let store = SqliteStore::open(&path).map_err(|e| e.to_string())?;
                    block_on(store.next_step("s", now_ms())).map_err(|e| e.to_string())
                })
            })
            .collect();
        let mut steps = Vec::new();
        for thread in threads {
            match thread.join().unwrap() {
                Ok(step) => steps.push(step),
                Err(error) => failures.push(format!("file {round}: {error}")),
            }
        }
        steps.sort_unstable();
        if failures.is_empty() {
            assert_eq!(
                steps,
                (1..=8).collect::<Vec<_>>(),
                "one schema, one counter"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}",
        failures.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The child program: opens the file at the agreed moment and counts a step.
#[test]
#[ignore = "run by `many_processes_open_one_new_file_at_once` as a separate process"]
fn child_opens() {
    let path = PathBuf::from(std::env::var(DB).expect("run by the parent test"));
    let start: u64 = std::env::var(START_MS).unwrap().parse().unwrap();
    std::thread::sleep(Duration::from_millis(start.saturating_sub(now_ms())));
    let store = SqliteStore::open(&path).unwrap();
    block_on(store.next_step("s", now_ms())).unwrap();
}

/// The same across processes: four at once on each of ten new files.
#[test]
fn many_processes_open_one_new_file_at_once() {
    let dir = fresh_dir("processes");
    for round in 0..10 {
        let path = dir.join(format!("store-{round}.db"));
        // Far enough ahead that every child is up and waiting.
        let start = now_ms() + 300;
        let children: Vec<_> = (0..4)
            .map(|_| {
                Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "child_opens", "--ignored", "--test-threads=1"])
                    .env(DB, &path)
                    .env(START_MS, start.to_string())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "file {round}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let steps: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT count FROM toolcall_steps", [], |row| row.get(0))
            .unwrap();
        assert_eq!(steps, 4);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------- a file from the first release

/// The tables exactly as the first release created them (schema version 0).
const OLD_SCHEMA: &str = "
PRAGMA journal_mode = WAL;
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

/// A file as the first release left it: a session four steps in, a call
/// counted twice, a completed record, a claim held, an approval pending.
fn old_file(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(OLD_SCHEMA).unwrap();
    let now = i64::try_from(now_ms()).unwrap();
    let done = serde_json::to_string(&result(7)).unwrap();
    conn.execute(
        "INSERT INTO toolcall_steps VALUES ('old-session', 4, ?1)",
        [now],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO toolcall_calls VALUES (?2, 2, ?1)",
        rusqlite::params![now, key("k-done").as_str()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO toolcall_records VALUES (?3, 'completed', 0, ?1, ?2)",
        rusqlite::params![done, now, key("k-done").as_str()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO toolcall_records VALUES (?3, 'in_flight', ?1, NULL, ?2)",
        rusqlite::params![now + 600_000, now, key("k-held").as_str()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO toolcall_approvals VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 3, ?1, ?2)",
        rusqlite::params![now, now + 600_000],
    )
    .unwrap();
}

/// A store file made fresh for `name`, then taken back to an older
/// version by `sql` (which sets the version too); its path, and a plain
/// connection to it.
fn taken_back(name: &str, sql: &str) -> (PathBuf, Connection) {
    let path = fresh_dir(name).join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(sql).unwrap();
    (path, conn)
}

/// The store on `path`, opened again: at this version now.
fn upgraded(path: &Path) -> SqliteStore {
    let store = SqliteStore::open(path).unwrap();
    assert_eq!(user_version(path), toolcall_sql::schema::VERSION);
    store
}

/// How many approvals wait in `store` now.
fn waiting(store: &SqliteStore) -> usize {
    block_on(store.pending_approvals(now_ms(), 10))
        .unwrap()
        .len()
}

fn user_version(path: &Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap()
}

#[test]
fn a_file_from_the_first_release_is_upgraded_and_keeps_its_rows() {
    let path = fresh_dir("upgrade").join("old.db");
    old_file(&path);
    assert_eq!(user_version(&path), 0);

    let store = upgraded(&path);
    block_on(async {
        assert_eq!(
            store.next_step("old-session", now_ms()).await.unwrap(),
            5,
            "the session keeps its count under its new key"
        );
        assert_eq!(store.count_call(&key("k-done"), now_ms()).await.unwrap(), 3);
        assert_eq!(
            store.outcome(&key("k-done")).await.unwrap(),
            Some(RecordedOutcome::Completed(result(7)))
        );
        assert_eq!(
            store.claim(&key("k-done"), now_ms(), 1_000).await.unwrap(),
            Claim::Completed(result(7))
        );
        assert_eq!(
            store.claim(&key("k-held"), now_ms(), 1_000).await.unwrap(),
            Claim::InFlight
        );
        let binding = Binding {
            session: "s",
            caller: "c",
            tool: Some("pay"),
            digest: Some("d1"),
            requester: toolcall::store::Requester::Anyone,
        };
        assert!(matches!(
            store.take_approval("p1", &binding, now_ms()).await.unwrap(),
            TakeApproval::Taken(PendingApproval { step: 3, .. })
        ));

        // The new state and the new table work.
        store.doubt(&key("k-held")).await.unwrap();
        assert_eq!(
            store.outcome(&key("k-held")).await.unwrap(),
            Some(RecordedOutcome::InDoubt)
        );
        assert_eq!(
            store.claim(&key("k-held"), now_ms(), 1_000).await.unwrap(),
            Claim::Acquired
        );
        store.complete(&key("k-held"), &result(8)).await.unwrap();
        assert!(
            store
                .lock_resource(&key("order"), "h1", now_ms(), 1_000)
                .await
                .unwrap()
        );
    });

    // The table itself accepts the new state, and still refuses nonsense.
    let raw = Connection::open(&path).unwrap();
    raw.execute(
        "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
         VALUES ('raw', 'in_doubt', 0, NULL, 0)",
        [],
    )
    .unwrap();
    assert!(
        raw.execute(
            "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
             VALUES ('bad', 'lost', 0, NULL, 0)",
            []
        )
        .is_err()
    );
    let indexes: Vec<String> = raw
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'toolcall_%' ORDER BY name")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        indexes,
        [
            "toolcall_approvals_caller_open",
            "toolcall_approvals_created",
            "toolcall_approvals_decided",
            "toolcall_approvals_expires",
            "toolcall_approvals_session_created",
            "toolcall_approvals_session_digest",
            "toolcall_approvals_tool_created",
            "toolcall_calls_touched",
            "toolcall_locks_until",
            "toolcall_rates_until",
            "toolcall_records_asking",
            "toolcall_records_touched",
            "toolcall_steps_touched",
            "toolcall_taint_touched"
        ]
    );

    // Opened again: already current, nothing changes.
    drop(store);
    let again = SqliteStore::open(&path).unwrap();
    assert_eq!(
        block_on(again.next_step("old-session", now_ms())).unwrap(),
        6
    );
}

#[test]
fn an_old_file_opened_by_many_threads_at_once_is_upgraded_once() {
    let path = fresh_dir("upgrade-race").join("old.db");
    old_file(&path);
    let barrier = Arc::new(Barrier::new(6));
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let path = path.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                SqliteStore::open(&path).unwrap()
            })
        })
        .collect();
    let stores: Vec<SqliteStore> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        block_on(stores[3].next_step("old-session", now_ms())).unwrap(),
        5,
        "rekeyed once, not twice"
    );
}

#[test]
fn a_file_from_a_newer_version_is_refused() {
    let path = fresh_dir("newer").join("new.db");
    drop(SqliteStore::open(&path).unwrap());
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "PRAGMA user_version = {}",
            toolcall_sql::schema::VERSION + 1
        ))
        .unwrap();
    let error = SqliteStore::open(&path).unwrap_err().to_string();
    let newer = format!("version {}, newer", toolcall_sql::schema::VERSION + 1);
    assert!(error.contains(&newer), "{error}");
}

// ------------------------------------------------------------------ purging

fn rows(path: &Path, table: &str) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let column = match table {
        "toolcall_approvals" => "id",
        "toolcall_locks" => "resource",
        "toolcall_taint" => "print",
        "toolcall_steps" => "session",
        _ => "key",
    };
    conn.prepare(&format!("SELECT {column} FROM {table} ORDER BY {column}"))
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn approval(id: &str, expires_ms: u64) -> PendingApproval {
    PendingApproval {
        id: id.to_owned(),
        session: "s".into(),
        caller: "c".into(),
        tool: "pay".into(),
        digest: "d1".into(),
        arguments: json!({"cents": 1}),
        step: 1,
        created_ms: now_ms(),
        expires_ms,
        decision: None,
        reason: None,
        tainted: Vec::new(),
        answerers: Default::default(),
        principal: None,
        provenance: Vec::new(),
    }
}

#[test]
fn the_store_purges_what_expired_by_itself() {
    let path = fresh_dir("purge").join("store.db");
    let store = SqliteStore::open(&path)
        .unwrap()
        .retention(Duration::from_millis(300))
        .purge_every(5);
    block_on(async {
        // Eleven writes, soon old.
        store.next_step("s-old", now_ms()).await.unwrap();
        store.count_call(&key("c-old"), now_ms()).await.unwrap();
        store.claim(&key("r-done"), now_ms(), 1_000).await.unwrap();
        store.complete(&key("r-done"), &result(1)).await.unwrap();
        store.claim(&key("r-doubt"), now_ms(), 1_000).await.unwrap();
        store.doubt(&key("r-doubt")).await.unwrap();
        store
            .claim(&key("r-held"), now_ms(), 600_000)
            .await
            .unwrap();
        store
            .put_approval(&approval("p-expired", now_ms() - 1))
            .await
            .unwrap();
        store
            .put_approval(&approval("p-valid", now_ms() + 600_000))
            .await
            .unwrap();
        store
            .lock_resource(&key("lock-old"), "h", now_ms(), 1)
            .await
            .unwrap();
        store
            .lock_resource(&key("lock-held"), "h", now_ms(), 600_000)
            .await
            .unwrap();
    });
    std::thread::sleep(Duration::from_millis(700));
    block_on(async {
        // Four more: the fifteenth write purges.
        store.next_step("s-new", now_ms()).await.unwrap();
        store.count_call(&key("c-new"), now_ms()).await.unwrap();
        store.claim(&key("r-new"), now_ms(), 1_000).await.unwrap();
        store.complete(&key("r-new"), &result(2)).await.unwrap();
    });

    // Seen from another connection, without a purge by hand.
    assert_eq!(
        rows(&path, "toolcall_steps"),
        [toolcall::store::session_key("s-new")]
    );
    assert_eq!(rows(&path, "toolcall_calls"), [key("c-new").to_string()]);
    assert_eq!(
        rows(&path, "toolcall_records"),
        sorted([key("r-held").to_string(), key("r-new").to_string()]),
        "a claim whose lease runs is kept, however old"
    );
    assert_eq!(rows(&path, "toolcall_approvals"), ["p-valid"]);
    assert_eq!(
        rows(&path, "toolcall_locks"),
        [key("lock-held").to_string()]
    );
    assert_eq!(
        block_on(store.claim(&key("r-held"), now_ms(), 1_000)).unwrap(),
        Claim::InFlight
    );

    // By hand: everything at once, counted.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        store.purge().unwrap(),
        Purged {
            steps: 1,
            calls: 1,
            records: 1,
            approvals: 0,
            locks: 0,
            taint: 0,
            rates: 0,
            signatures: 0,
        }
    );
    assert_eq!(rows(&path, "toolcall_records"), [key("r-held").to_string()]);
    assert_eq!(store.purge().unwrap().total(), 0);
}

#[test]
fn without_automatic_purges_nothing_is_deleted_until_purge() {
    let path = fresh_dir("no-purge").join("store.db");
    let store = SqliteStore::open(&path)
        .unwrap()
        .retention(Duration::from_millis(1))
        .purge_every(0);
    block_on(async {
        for i in 0..20 {
            store
                .count_call(&key(&format!("c{i}")), now_ms())
                .await
                .unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    assert_eq!(rows(&path, "toolcall_calls").len(), 20);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(store.purge().unwrap().calls, 20);
}

fn yes(decided_ms: u64) -> ApprovalDecision {
    ApprovalDecision {
        approved: true,
        by: "ana".into(),
        note: String::new(),
        edited_arguments: None,
        decided_ms,
        lasts_until_ms: None,
    }
}

#[test]
fn a_file_at_version_1_gains_decisions_and_keeps_its_approvals() {
    // Back to version 1 as it was, with an approval a version-1 process asked.
    let (path, conn) = taken_back(
        "v1",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN provenance;
         ALTER TABLE toolcall_approvals DROP COLUMN requester;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         DROP INDEX toolcall_approvals_created;
         DROP INDEX toolcall_approvals_decided;
         DROP INDEX toolcall_approvals_session_digest;
         DROP INDEX toolcall_approvals_session_created;
         DROP INDEX toolcall_approvals_tool_created;
         ALTER TABLE toolcall_approvals DROP COLUMN session_key;
         ALTER TABLE toolcall_approvals DROP COLUMN decision;
         ALTER TABLE toolcall_approvals DROP COLUMN decided_ms;
         ALTER TABLE toolcall_approvals DROP COLUMN used_ms;
         ALTER TABLE toolcall_approvals DROP COLUMN result;
         ALTER TABLE toolcall_approvals DROP COLUMN reason;
         ALTER TABLE toolcall_approvals DROP COLUMN tainted;
         PRAGMA user_version = 1;",
    );
    let now = now_ms() as i64;
    conn.execute(
        "INSERT INTO toolcall_approvals VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 3, ?1, ?2)",
        rusqlite::params![now, now + 600_000],
    )
    .unwrap();

    let store = upgraded(&path);
    block_on(async {
        let pending = store.pending_approvals(now_ms(), 10).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].arguments, json!({"cents": 1}));
        assert_eq!(
            store
                .decide_approval("p1", &yes(now_ms()), now_ms())
                .await
                .unwrap(),
            DecideOutcome::Decided
        );
    });
    // A process still at version 1 inserts as it did.
    conn.execute(
        "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
         VALUES ('p2', 's', 'c', 'pay', 'd1', '{}', 1, ?1, ?2)",
        rusqlite::params![now, now + 600_000],
    )
    .unwrap();
    assert_eq!(waiting(&store), 1);
}

#[test]
fn a_file_at_version_2_gains_why_an_approval_asks_and_keeps_its_approvals() {
    // Back to version 2 as it was, with an approval a version-2 process asked.
    let (path, conn) = taken_back(
        "v2",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         DROP INDEX toolcall_taint_touched;
         DROP TABLE toolcall_taint;
         ALTER TABLE toolcall_approvals DROP COLUMN reason;
         ALTER TABLE toolcall_approvals DROP COLUMN tainted;
         PRAGMA user_version = 2;",
    );
    let now = now_ms() as i64;
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
         VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3)";
    conn.execute(insert, rusqlite::params!["p1", now, now + 600_000])
        .unwrap();

    let store = upgraded(&path);
    block_on(async {
        // Asked before there was a reason: none, and no tainted arguments.
        let old = store.approval("p1").await.unwrap().unwrap().approval;
        assert_eq!((old.reason, old.tainted), (None, Vec::<String>::new()));
        let why = PendingApproval {
            reason: Some("untrusted_context".into()),
            tainted: vec!["cents".into()],
            ..approval("p2", now_ms() + 600_000)
        };
        store.put_approval(&why).await.unwrap();
        assert_eq!(store.approval("p2").await.unwrap().unwrap().approval, why);
    });
    // A process still at version 2 inserts as it did.
    conn.execute(insert, rusqlite::params!["p3", now, now + 600_000])
        .unwrap();
    assert_eq!(waiting(&store), 3);
}

#[test]
fn a_file_at_version_3_without_why_an_approval_asks_gains_it() {
    // Version 3 once existed without the approval's `reason` and `tainted`:
    // a file made then is at version 3 and lacks them; version 4 adds them.
    let (path, _conn) = taken_back(
        "v3",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         ALTER TABLE toolcall_approvals DROP COLUMN reason;
         ALTER TABLE toolcall_approvals DROP COLUMN tainted;
         PRAGMA user_version = 3;",
    );
    let store = upgraded(&path);
    block_on(async {
        let why = PendingApproval {
            reason: Some("untrusted_context".into()),
            tainted: vec!["cents".into()],
            ..approval("p1", now_ms() + 600_000)
        };
        store.put_approval(&why).await.unwrap();
        assert_eq!(store.approval("p1").await.unwrap().unwrap().approval, why);
    });
    // Opening it again changes nothing.
    drop(store);
    let store = upgraded(&path);
    assert_eq!(waiting(&store), 1);
}

#[test]
fn a_decided_approval_stays_in_the_history_for_the_retention_window() {
    let path = fresh_dir("history").join("store.db");
    let store = SqliteStore::open(&path)
        .unwrap()
        .retention(Duration::from_millis(1_500))
        .purge_every(0);
    let expires = now_ms() + 100;
    block_on(async {
        store
            .put_approval(&approval("p-undecided", expires))
            .await
            .unwrap();
        store
            .put_approval(&approval("p-decided", expires))
            .await
            .unwrap();
        assert_eq!(
            store
                .decide_approval("p-decided", &yes(now_ms()), now_ms())
                .await
                .unwrap(),
            DecideOutcome::Decided
        );
    });
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        store.purge().unwrap().approvals,
        1,
        "the undecided one, expired"
    );
    assert_eq!(rows(&path, "toolcall_approvals"), ["p-decided"]);
    assert_eq!(block_on(store.decided_approvals(10)).unwrap().len(), 1);
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(
        store.purge().unwrap().approvals,
        1,
        "past the retention window"
    );
    assert!(rows(&path, "toolcall_approvals").is_empty());
}

#[test]
fn taint_is_purged_with_the_session_after_the_retention_window() {
    let path = fresh_dir("taint-purge").join("store.db");
    let store = SqliteStore::open(&path)
        .unwrap()
        .retention(Duration::from_millis(1))
        .purge_every(0);
    let print = ["ab".repeat(32)];
    block_on(async {
        let source = TaintSource::from_output("read", None, 1, &json!({"note": "hi"}), &[]);
        store.add_taint("s", &print, &source).await.unwrap();
        assert!(store.tainted("s", &print).await.unwrap().any);
    });
    // The mark (with the bounded excerpt of its source) and the
    // fingerprint: the values read are matched by their digests.
    assert_eq!(rows(&path, "toolcall_taint").len(), 2);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(store.purge().unwrap().taint, 2);
    block_on(async {
        assert!(!store.tainted("s", &print).await.unwrap().any);
    });
}

#[test]
fn a_file_at_version_4_finds_its_approvals_by_session_and_call() {
    // Back to version 4 as it was, with an approval a version-4 process asked.
    let (path, conn) = taken_back(
        "v4",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         DROP INDEX toolcall_approvals_session_digest;
         DROP INDEX toolcall_approvals_session_created;
         DROP INDEX toolcall_approvals_tool_created;
         ALTER TABLE toolcall_approvals DROP COLUMN session_key;
         PRAGMA user_version = 4;",
    );
    let now = now_ms() as i64;
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms)
         VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3)";
    conn.execute(insert, rusqlite::params!["p1", now, now + 600_000])
        .unwrap();

    let store = upgraded(&path);
    block_on(async {
        // Asked before the upgrade: found by its call and its session.
        let binding = Binding {
            session: "s",
            caller: "c",
            tool: Some("pay"),
            digest: Some("d1"),
            requester: toolcall::store::Requester::Anyone,
        };
        let found = store
            .find_approval(&binding, None, now_ms())
            .await
            .unwrap()
            .map(|e| e.approval.id);
        assert_eq!(found.as_deref(), Some("p1"));
        let same = PendingApproval {
            created_ms: now_ms(),
            ..approval("p2", now_ms() + 600_000)
        };
        match store.ask_approval(&same, 20).await.unwrap() {
            AskApproval::Existing(entry) => assert_eq!(entry.approval.id, "p1"),
            other => panic!("expected p1, got {other:?}"),
        }
        let query = PendingQuery {
            session: Some("s"),
            ..PendingQuery::new(now_ms(), 10)
        };
        let page = store.pending_page(&query).await.unwrap();
        assert_eq!((page.total, page.items.len()), (1, 1));
    });
    // A process still at version 4 inserts as it did; its approval is
    // listed (not by a filter on its session).
    conn.execute(insert, rusqlite::params!["p3", now, now + 600_000])
        .unwrap();
    let all = block_on(store.pending_page(&PendingQuery::new(now_ms(), 10))).unwrap();
    assert_eq!(all.total, 2);
}

#[test]
fn a_file_at_version_5_gains_who_answers_and_the_questions_claims_keep() {
    // Back to version 5 as it was, with an approval and a claim a version-5
    // process made.
    let (path, conn) = taken_back(
        "v5",
        "DROP INDEX toolcall_approvals_caller_open;
         DROP INDEX toolcall_records_asking;
         ALTER TABLE toolcall_approvals DROP COLUMN principal;
         ALTER TABLE toolcall_approvals DROP COLUMN answerers;
         ALTER TABLE toolcall_records DROP COLUMN question;
         ALTER TABLE toolcall_records DROP COLUMN asked_ms;
         PRAGMA user_version = 5;",
    );
    let now = now_ms() as i64;
    conn.execute(
        "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key)
         VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?1, ?2, ?3)",
        rusqlite::params![now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO toolcall_records (key, state, until_ms, result, touched_ms)
         VALUES (?1, 'in_flight', 0, NULL, ?2)",
        rusqlite::params![key("k-old").as_str(), now],
    )
    .unwrap();
    drop(conn);

    let store = upgraded(&path);
    block_on(async {
        // An approval of version 5 is a person's only.
        let old = store.approval("p1").await.unwrap().unwrap();
        assert_eq!(
            old.approval.answerers,
            toolcall_core::life::Answerers::PERSON
        );
        // Its lapsed claim kept no question: none to list.
        assert!(store.unsettled(now_ms(), 10).await.unwrap().is_empty());
        // The new columns work.
        let asked = PendingApproval {
            id: "p2".into(),
            answerers: toolcall_core::life::Answerers::new(true, false),
            principal: None,
            provenance: Vec::new(),
            digest: "d2".into(),
            ..old.approval.clone()
        };
        store.ask_approval(&asked, 5).await.unwrap();
        assert_eq!(
            store
                .approval("p2")
                .await
                .unwrap()
                .unwrap()
                .approval
                .answerers,
            asked.answerers
        );
        let question = PendingApproval {
            reason: Some("in_doubt".into()),
            ..asked
        };
        store
            .claim_asking(&key("k-new"), now_ms(), 1, &question)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let unsettled = store.unsettled(now_ms(), 10).await.unwrap();
        assert_eq!(unsettled.len(), 1);
        assert_eq!(unsettled[0].key, key("k-new"));
        assert_eq!(unsettled[0].question, question);
    });
}

#[test]
fn a_file_at_version_6_gains_the_principal_and_a_version_6_process_still_asks() {
    let (path, conn) = taken_back(
        "v6",
        "ALTER TABLE toolcall_approvals DROP COLUMN principal;
         PRAGMA user_version = 6;",
    );
    // A version-6 process's insert, with the columns it knows.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '')";
    let now = now_ms() as i64;
    conn.execute(
        insert,
        rusqlite::params!["p1", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();

    let store = upgraded(&path);
    block_on(async {
        let old = store.approval("p1").await.unwrap().unwrap();
        assert_eq!(old.approval.principal, None, "asked by nobody named");
        let principal =
            toolcall::Principal::new("https://auth.example.com", "alice").client("desk");
        let asked = PendingApproval {
            id: "p2".into(),
            digest: "d2".into(),
            principal: Some(principal.clone()),
            provenance: Vec::new(),
            ..old.approval.clone()
        };
        store.ask_approval(&asked, 5).await.unwrap();
        let back = store.approval("p2").await.unwrap().unwrap();
        assert_eq!(back.approval.principal, Some(principal));
    });
    // The version-6 process asks on as it did.
    conn.execute(
        insert,
        rusqlite::params!["p3", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    let pending = block_on(store.pending_approvals(now_ms(), 10)).unwrap();
    assert_eq!(pending.len(), 3);
}

#[test]
fn a_file_at_version_7_gains_the_operators_controls_and_a_version_7_process_still_asks() {
    let (path, conn) = taken_back(
        "v7",
        "DROP TABLE toolcall_controls;
         DROP TABLE toolcall_controls_history;
         DROP TABLE toolcall_rates;
         DROP TABLE toolcall_signatures;
         PRAGMA user_version = 7;",
    );
    // A version-7 process's insert, with the columns it knows.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', NULL)";
    let now = now_ms() as i64;
    conn.execute(
        insert,
        rusqlite::params!["p1", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();

    let store = upgraded(&path);
    block_on(async {
        assert_eq!(store.controls(0).await.unwrap(), None);
        let change = toolcall::store::ControlsChange {
            version: 0,
            by: "ops".into(),
            at_ms: now_ms(),
            summary: "first".into(),
        };
        assert!(store.put_controls(0, "{}", &change).await.unwrap());
        assert_eq!(store.controls(0).await.unwrap().unwrap().version, 1);
        let start = now_ms() / 60_000 * 60_000;
        assert!(store.take_rate("b", start, 60_000, 1).await.unwrap());
        assert_eq!(store.rate_count("b", start).await.unwrap(), 1);
        let yes = ApprovalDecision {
            approved: true,
            by: String::new(),
            note: String::new(),
            edited_arguments: None,
            decided_ms: now_ms(),
            lasts_until_ms: None,
        };
        let signed = store.sign_approval("p1", "ana", 2, &yes, now_ms()).await;
        assert_eq!(
            signed.unwrap(),
            toolcall::store::SignOutcome::Signed { signatures: 1 }
        );
    });
    // The version-7 process asks on as it did.
    conn.execute(
        insert,
        rusqlite::params!["p2", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    let pending = block_on(store.pending_approvals(now_ms(), 10)).unwrap();
    assert_eq!(pending.len(), 2);
}

#[test]
fn a_file_at_version_8_binds_its_questions_to_who_asked_and_keeps_doubts_open() {
    let (path, conn) = taken_back(
        "v8",
        "ALTER TABLE toolcall_approvals DROP COLUMN requester;
         PRAGMA user_version = 8;",
    );
    // A version-8 process's questions: alice's approval, and a question
    // about an unknown outcome that expires as approvals did.
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, principal, reason)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', ?5, ?6)";
    let now = now_ms() as i64;
    let alice = r#"{"issuer":"https://auth.example.com","subject":"alice"}"#;
    conn.execute(
        insert,
        rusqlite::params![
            "asked",
            now,
            now + 600_000,
            toolcall::store::session_key("s"),
            alice,
            None::<String>
        ],
    )
    .unwrap();
    conn.execute(
        insert,
        rusqlite::params![
            "doubt",
            now,
            now + 600_000,
            toolcall::store::session_key("s"),
            alice,
            "in_doubt"
        ],
    )
    .unwrap();

    let store = upgraded(&path);
    let doubt = block_on(store.approval("doubt")).unwrap().unwrap();
    assert_eq!(doubt.approval.expires_ms, toolcall_core::life::NEVER_MS);
    let later = now_ms() + 3_600_000;
    assert_eq!(doubt.state(later), toolcall_core::life::QuestionState::Open);
    let find = |subject: &str| {
        let requester = toolcall::Principal::new("https://auth.example.com", subject).requester();
        let binding = Binding {
            session: "s",
            caller: "c",
            tool: Some("pay"),
            digest: Some("d1"),
            requester: toolcall::store::Requester::Only(Some(&requester)),
        };
        block_on(store.find_approval(&binding, None, now_ms()))
            .unwrap()
            .map(|entry| entry.approval.id)
    };
    assert_eq!(find("alice").as_deref(), Some("asked"));
    assert_eq!(
        find("bob"),
        None,
        "bob's identical call is not alice's question"
    );
}

#[test]
fn a_file_at_version_9_gains_where_taint_came_from_and_a_version_9_process_still_taints() {
    let (path, conn) = taken_back(
        "v9",
        "ALTER TABLE toolcall_approvals DROP COLUMN provenance;
         ALTER TABLE toolcall_taint DROP COLUMN sources;
         PRAGMA user_version = 9;",
    );
    // A version-9 process's writes, with the columns it knows.
    let now = now_ms() as i64;
    let taint = "INSERT INTO toolcall_taint (session, print, touched_ms) VALUES (?1, '', ?2)";
    let old_session = toolcall::store::session_key("old");
    conn.execute(taint, rusqlite::params![old_session, now])
        .unwrap();
    let insert = "INSERT INTO toolcall_approvals (id, session, caller, tool, digest, arguments, step, created_ms, expires_ms, session_key, answerers, reason)
                  VALUES (?1, 's', 'c', 'pay', 'd1', '{\"cents\":1}', 1, ?2, ?3, ?4, '', 'untrusted_context')";
    conn.execute(
        insert,
        rusqlite::params!["p1", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();

    let store = upgraded(&path);
    let source = TaintSource::from_output("read", Some("c1"), 1, &json!({"note": "hi"}), &[]);
    block_on(async {
        assert!(store.tainted("old", &[]).await.unwrap().any);
        assert!(
            store.taint_sources("old").await.unwrap().is_empty(),
            "none kept"
        );
        store.add_taint("old", &[], &source).await.unwrap();
        assert_eq!(
            store.taint_sources("old").await.unwrap(),
            std::slice::from_ref(&source)
        );
        let old = store.approval("p1").await.unwrap().unwrap();
        assert!(old.approval.provenance.is_empty());
        let asked = PendingApproval {
            id: "p2".into(),
            digest: "d2".into(),
            provenance: vec![source.clone()],
            ..old.approval.clone()
        };
        store.ask_approval(&asked, 5).await.unwrap();
        let back = store.approval("p2").await.unwrap().unwrap();
        assert_eq!(back.approval.provenance, std::slice::from_ref(&source));
    });
    // The version-9 process taints and asks on as it did.
    let other = toolcall::store::session_key("other");
    conn.execute(taint, rusqlite::params![other, now]).unwrap();
    conn.execute(
        insert,
        rusqlite::params!["p3", now, now + 600_000, toolcall::store::session_key("s")],
    )
    .unwrap();
    block_on(async {
        assert!(store.tainted("other", &[]).await.unwrap().any);
        assert!(store.taint_sources("other").await.unwrap().is_empty());
    });
    let pending = block_on(store.pending_approvals(now_ms(), 10)).unwrap();
    assert_eq!(pending.len(), 3);
}

#[test]
fn where_taint_came_from_survives_a_reopen() {
    let path = fresh_dir("sources-reopen").join("store.db");
    let long = "x".repeat(1_000_000);
    let sources: Vec<TaintSource> = (0..6)
        .map(|n| {
            TaintSource::from_output(
                "read_note",
                Some(&format!("call-{n}")),
                n,
                &json!({"note": format!("{n}{long}")}),
                &["/note"],
            )
        })
        .collect();
    {
        let store = SqliteStore::open(&path).unwrap();
        block_on(async {
            for source in &sources {
                store.add_taint("s", &[], source).await.unwrap();
            }
            let asked = PendingApproval {
                reason: Some("untrusted_context".into()),
                provenance: store.taint_sources("s").await.unwrap(),
                ..approval("p1", now_ms() + 600_000)
            };
            store.put_approval(&asked).await.unwrap();
        });
    }
    // Bounded on disk: four sources of 600 characters, not six megabytes.
    assert!(std::fs::metadata(&path).unwrap().len() < 200_000);
    let store = SqliteStore::open(&path).unwrap();
    let newest: Vec<TaintSource> = sources.iter().rev().take(4).cloned().collect();
    block_on(async {
        let kept = store.taint_sources("s").await.unwrap();
        assert_eq!(kept, newest);
        assert_eq!(kept[0].texts[0].text.chars().count(), 600);
        assert!(kept[0].texts[0].cut);
        let back = store.approval("p1").await.unwrap().unwrap();
        assert_eq!(back.approval.provenance, newest);
    });
}
