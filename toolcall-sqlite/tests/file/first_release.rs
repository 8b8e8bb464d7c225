//! A file from the first release: upgraded once, however many threads open
//! it, keeping its rows; a file from a newer version is refused.

use super::*;

// ------------------------------------------- a file from the first release

/// A file as the first release left it: a session four steps in, a call
/// counted twice, a completed record, a claim held, an approval pending.
fn old_file(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
    conn.execute_batch(sql_stores::FIRST_RELEASE).unwrap();
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
    first_asked(&conn, now);
}

#[test]
fn a_file_from_the_first_release_is_upgraded_and_keeps_its_rows() {
    let path = fresh_dir("upgrade").join("old.db");
    old_file(&path);
    assert_eq!(user_version(&path), 0);

    let store = upgraded(&path);
    block_on(sql_stores::first_release_rows_are_kept(&store));

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
    assert_eq!(indexes, sql_stores::indexes(&[]));

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
    let stores = at_once(6, &path, |path| SqliteStore::open(path).unwrap());
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
