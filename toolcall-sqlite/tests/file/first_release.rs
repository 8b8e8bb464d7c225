//! A file from the first release: upgraded once, however many threads open
//! it, keeping its rows; a file from a newer version is refused.

use super::*;

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
