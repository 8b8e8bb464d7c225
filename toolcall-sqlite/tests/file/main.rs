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

use toolcall::store::prelude::*;

use toolcall::store::{Claim, PendingApproval, TaintSource, now_ms};

use toolcall_sqlite::{Purged, SqliteStore};

use toolcall_testkit::run::{self, block_on};

use toolcall_testkit::sql_stores::{self, approval, key, result, sorted};

const DB: &str = "TOOLCALL_OPEN_DB";

const START_MS: &str = "TOOLCALL_OPEN_START_MS";

fn fresh_dir(name: &str) -> PathBuf {
    run::fresh_dir(&format!("toolcall-sqlite-file-{name}"))
}

// ------------------------------------------------------ opening a new file

/// `threads` threads, each calling `open` on `path` at the same moment;
/// what each returned.
fn at_once<T: Send + 'static>(threads: usize, path: &Path, open: fn(&Path) -> T) -> Vec<T> {
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let path = path.to_path_buf();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                open(&path)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Eight threads, each with its own connection, open one new file at the
/// same moment, over thirty new files. Before `open` retried, switching a
/// new file to WAL failed with "database is locked" in most runs.
#[test]
fn many_threads_open_one_new_file_at_once() {
    let dir = fresh_dir("threads");
    let mut failures = Vec::new();
    for round in 0..30 {
        let path = dir.join(format!("store-{round}.db"));
        let opened = at_once(8, &path, |path| {
            let store = SqliteStore::open(path).map_err(|e| e.to_string())?;
            block_on(store.next_step("s", now_ms())).map_err(|e| e.to_string())
        });
        let mut steps = Vec::new();
        for step in opened {
            match step {
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

// ------------------------------------------------------------------ purging

fn rows(path: &Path, table: &str) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let column = match table {
        "toolcall_approvals" | "toolcall_signatures" => "id",
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

/// A store file made fresh for `name`, then taken back to an older
/// version by the batches of `sql`, in order (the last sets the version);
/// its path, and a plain connection to it.
fn taken_back(name: &str, sql: &[&str]) -> (PathBuf, Connection) {
    let path = fresh_dir(name).join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    // Every version taken back to is older than 11, the open questions'
    // index, which reads a column the older versions lack.
    conn.execute_batch("DROP INDEX toolcall_approvals_open")
        .unwrap();
    for batch in sql {
        conn.execute_batch(batch).unwrap();
    }
    (path, conn)
}

/// The approval `p1` of a caller three steps in, asked at `now` for ten
/// minutes, as the first release's processes inserted it.
fn first_asked(conn: &Connection, now: i64) {
    conn.execute(
        "INSERT INTO toolcall_approvals VALUES ('p1', 's', 'c', 'pay', 'd1', '{\"cents\":1}', 3, ?1, ?2)",
        rusqlite::params![now, now + 600_000],
    )
    .unwrap();
}

/// The store on `path`, opened again: at this version now.
fn upgraded(path: &Path) -> SqliteStore {
    let store = SqliteStore::open(path).unwrap();
    assert_eq!(user_version(path), toolcall_sql::schema::VERSION);
    store
}

fn user_version(path: &Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap()
}

mod first_release;
mod purges;
mod versions;
