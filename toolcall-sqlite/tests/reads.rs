//! A read alone in its conversation (a stateless request's read-only call)
//! runs on the store's reading connection: it is answered while this
//! process's own writes wait for SQLite's write lock, and sees what was
//! written before it. (That it waits when SQLite answers "busy" is a unit
//! test of `SqliteStore::read`.)

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::Connection;
use toolcall::store::prelude::*;
use toolcall::store::{CallBegun, CallStart, Key, PendingQuery, now_ms};
use toolcall_sqlite::SqliteStore;
use toolcall_testkit::run::{block_on, fresh_dir};

fn fresh_file(name: &str) -> PathBuf {
    fresh_dir(&format!("toolcall-sqlite-reads-{name}")).join("store.db")
}

/// Begins a call in `session` on its own thread; its answer comes on the
/// channel returned. `alone`: a read-only call alone in its conversation.
fn begin_on_a_thread(
    store: &Arc<SqliteStore>,
    session: &'static str,
    alone: bool,
) -> mpsc::Receiver<CallBegun> {
    let (sent, answer) = mpsc::channel();
    let store = Arc::clone(store);
    std::thread::spawn(move || {
        let key = Key::sha256(session);
        let mut start = CallStart::new(session, &key, now_ms(), 10);
        start.alone = alone;
        start.controls = Some(0);
        let begun = block_on(store.begin_call(&start)).expect("the call begins");
        let _ = sent.send(begun);
    });
    answer
}

/// Another connection takes the file's write lock (and keeps it until its
/// `COMMIT`); this process's call in the conversation "named" then reaches
/// SQLite and waits there for the lock, holding the store's connection.
fn a_write_waiting_for_the_lock(
    path: &std::path::Path,
    store: &Arc<SqliteStore>,
) -> (Connection, mpsc::Receiver<CallBegun>) {
    let holder = Connection::open(path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let waiting = begin_on_a_thread(store, "named", false);
    assert!(
        waiting.recv_timeout(Duration::from_millis(300)).is_err(),
        "the named call waits for the write lock"
    );
    (holder, waiting)
}

/// Another connection holds the file's write lock; this process's call in
/// a named conversation waits for it (up to the store's busy timeout, 10
/// s), holding the store's connection. A read alone is answered meanwhile.
/// Before reads alone had a connection of their own, the read waited for
/// the first call, which waited for the lock: no answer within 5 s.
#[test]
fn a_read_alone_is_answered_while_this_process_waits_for_the_write_lock() {
    let path = fresh_file("waiting");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let (holder, waiting) = a_write_waiting_for_the_lock(&path, &store);

    let read = begin_on_a_thread(&store, "alone", true)
        .recv_timeout(Duration::from_secs(5))
        .expect("a read alone is answered while a write waits");
    assert_eq!(read.step, 1);
    assert_eq!(read.calls, Some(1));
    assert!(!read.controls_moved);

    holder.execute_batch("COMMIT").unwrap();
    let named = waiting
        .recv_timeout(Duration::from_secs(10))
        .expect("the named call begins once the lock is free");
    assert_eq!(named.step, 1);
    // The read kept nothing; the named call kept its step.
    let steps: i64 = holder
        .query_row("SELECT COUNT(*) FROM toolcall_steps", [], |row| row.get(0))
        .unwrap();
    assert_eq!(steps, 1);
}

/// The controls' version a read alone was judged by is checked on the
/// reading connection too: a version another connection wrote (another
/// replica, an operator) is seen by the next read at once, the reading
/// connection holding no snapshot between reads.
#[test]
fn a_read_alone_sees_what_this_process_wrote_just_before() {
    let path = fresh_file("sees");
    let store = SqliteStore::open(&path).unwrap();
    let writer = Connection::open(&path).unwrap();
    let key = Key::sha256("alone");
    let mut start = CallStart::new("alone", &key, now_ms(), 10);
    start.alone = true;
    start.controls = Some(0);
    assert!(!block_on(store.begin_call(&start)).unwrap().controls_moved);
    writer
        .execute(
            "INSERT INTO toolcall_controls (id, version, document) VALUES (1, 7, '{}')
             ON CONFLICT (id) DO UPDATE SET version = 7",
            [],
        )
        .unwrap();
    assert!(block_on(store.begin_call(&start)).unwrap().controls_moved);
    start.controls = Some(7);
    assert!(!block_on(store.begin_call(&start)).unwrap().controls_moved);
}

/// A database in memory or a temporary one, opened by name (`":memory:"`,
/// `""`), is one no second connection can see: a read alone reads it on
/// the store's one connection, and finds its tables.
#[test]
fn a_database_in_memory_opened_by_name_reads_on_its_one_connection() {
    for name in [":memory:", ""] {
        let store = SqliteStore::open(name).unwrap();
        let key = Key::sha256("alone");
        let mut start = CallStart::new("alone", &key, now_ms(), 10);
        start.alone = true;
        start.controls = Some(0);
        let begun =
            block_on(store.begin_call(&start)).unwrap_or_else(|error| panic!("{name:?}: {error}"));
        assert_eq!(begun.step, 1, "{name:?}");
        assert!(!begun.controls_moved, "{name:?}");
    }
}

/// Reads that are not a call's start (the inbox's listing and an approval,
/// a conversation's step, the controls and their history, a rate's count)
/// run on the reading connection too: an operator's inbox and a replica's
/// look at the controls are answered while this process's write waits for
/// SQLite's write lock. Before, each waited for the store's one connection,
/// which the waiting write held: no answer within 5 s.
#[test]
fn reads_of_the_inbox_and_the_controls_are_answered_while_a_write_waits() {
    let path = fresh_file("inbox");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    // A step kept before the lock is taken, for `peek_step` to find.
    let counted = begin_on_a_thread(&store, "counted", false)
        .recv_timeout(Duration::from_secs(10))
        .expect("the call begins");
    assert_eq!(counted.step, 1);

    let (holder, waiting) = a_write_waiting_for_the_lock(&path, &store);

    let (sent, answers) = mpsc::channel();
    let reader = Arc::clone(&store);
    std::thread::spawn(move || {
        block_on(async {
            let now = now_ms();
            let page = reader
                .pending_page(&PendingQuery::new(now, 10))
                .await
                .expect("the inbox's page");
            let approval = reader.approval("none").await.expect("an approval");
            let step = reader.peek_step("counted").await.expect("the step");
            let controls = reader.controls(0).await.expect("the controls");
            let history = reader.controls_history(10).await.expect("their history");
            let rate = reader.rate_count("bucket", now).await.expect("a rate");
            let _ = sent.send((
                page.total,
                approval.is_none(),
                step,
                controls.is_none(),
                history.len(),
                rate,
            ));
        });
    });
    let (total, no_approval, step, no_controls, history, rate) = answers
        .recv_timeout(Duration::from_secs(5))
        .expect("the reads are answered while a write waits");
    assert_eq!((total, no_approval, step), (0, true, 1));
    assert_eq!((no_controls, history, rate), (true, 0, 0));

    holder.execute_batch("COMMIT").unwrap();
    let named = waiting
        .recv_timeout(Duration::from_secs(10))
        .expect("the named call begins once the lock is free");
    assert_eq!(named.step, 1);
}
