//! One conformance suite for the `Store` trait, run against every store:
//! the in-memory default and SQLite (in memory, and on a file shared by two
//! handles, as two processes would share it). A store added later runs the
//! same suite.

use std::sync::Arc;
use std::time::Duration;
use toolcall_testkit::bank::{Bank, send};
use toolcall_testkit::store::asked;
use toolcall_tests::key;

use toolcall::store::prelude::*;
use toolcall::store::{AskApproval, Claim, DecideOutcome, Lease, now_ms};
use toolcall::store::{MemoryStore, Store};
use toolcall::{Call, Dispatcher, tools};
use toolcall_sqlite::SqliteStore;
use toolcall_testkit::run::{block_on, fresh_dir, on_threads};
use toolcall_tests::{
    approvals_conformance, asked_call, conformance, controls_conformance, last_signatures_race,
};

fn temp_db(name: &str) -> std::path::PathBuf {
    fresh_dir(&format!("toolcall-stores-{name}")).join("store.db")
}

/// Two handles on one new SQLite file (named after `name`), as two
/// processes would share it.
fn two_handles(name: &str) -> Vec<Arc<SqliteStore>> {
    let path = temp_db(name);
    let open = || Arc::new(SqliteStore::open(&path).unwrap());
    vec![open(), open()]
}

/// Runs the suite `suite` on the memory store, on SQLite in memory, and on
/// two handles on one SQLite file (its folder named after `name`). A macro:
/// the suite is generic over both stores it is given.
macro_rules! on_every_store {
    ($suite:ident, $name:literal) => {{
        let memory = Arc::new(MemoryStore::default());
        block_on($suite(&memory, &memory));
        let sqlite = Arc::new(SqliteStore::open_in_memory().unwrap());
        block_on($suite(&sqlite, &sqlite));
        let path = temp_db($name);
        let first = SqliteStore::open(&path).unwrap();
        let second = SqliteStore::open(&path).unwrap();
        block_on($suite(&first, &second));
    }};
}

#[test]
fn memory_store_conforms() {
    let store = Arc::new(MemoryStore::default());
    block_on(conformance(&store, &store));
}

#[test]
fn sqlite_store_in_memory_conforms() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    block_on(conformance(&store, &store));
}

#[test]
fn sqlite_store_on_a_file_conforms_across_two_connections() {
    let path = temp_db("conformance");
    let first = SqliteStore::open(&path).unwrap();
    let second = SqliteStore::open(&path).unwrap();
    block_on(conformance(&first, &second));
}

#[test]
fn every_store_asks_once_per_call_and_pages_its_inbox() {
    on_every_store!(approvals_conformance, "approvals");
}

/// Eight threads ask for the same call at once (on `stores`, in turn):
/// one approval is created, and every other asker is answered with it.
fn one_question(stores: Vec<Arc<impl Store>>) {
    let now = now_ms();
    let askers = stores.clone();
    let answers = on_threads(8, move |i| {
        let asked = asked_call(&format!("race-{i}"), "race", now);
        block_on(askers[i % askers.len()].ask_approval(&asked, 20)).unwrap()
    });
    let created = answers
        .iter()
        .filter(|a| **a == AskApproval::Created)
        .count();
    assert_eq!(created, 1, "{answers:?}");
    let pending = block_on(stores[0].pending_approvals(now, 100)).unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    for answer in &answers {
        if let AskApproval::Existing(entry) = answer {
            assert_eq!(entry.approval.id, pending[0].id);
        } else {
            assert_eq!(*answer, AskApproval::Created);
        }
    }
}

#[test]
fn askers_racing_with_one_call_create_one_approval() {
    one_question(vec![Arc::new(MemoryStore::default())]);
    one_question(two_handles("ask-race"));
}

/// Many threads race to claim one key: exactly one wins.
fn one_winner(store: Arc<impl Store>) {
    let now = now_ms();
    let claims = on_threads(8, move |_| {
        let lease = Lease {
            now_ms: now,
            lease_ms: 60_000,
        };
        block_on(store.claim(&key("race"), lease)).unwrap()
    });
    let winners = claims.iter().filter(|c| **c == Claim::Acquired).count();
    assert_eq!(winners, 1, "{claims:?}");
}

#[test]
fn claims_have_one_winner_under_threads() {
    one_winner(Arc::new(MemoryStore::default()));
    one_winner(Arc::new(SqliteStore::open(temp_db("race")).unwrap()));
}

// ------------------------------------------ the whole pipeline, per store

fn same_call_from_many_threads<St: Store>(store: St) {
    let bank = Bank::new();
    let dispatcher = Arc::new(
        Dispatcher::builder(tools![send].unwrap(), Arc::clone(&bank))
            .store(store)
            .max_steps(100)
            .max_duplicate_calls(100)
            .build()
            .unwrap(),
    );
    let results = on_threads(12, move |_| {
        block_on(dispatcher.execute(Call::new("send", r#"{"cents": 2590}"#).session("s")))
    });
    assert_eq!(bank.transfers(), 1, "twelve identical calls, one execution");
    assert!(
        results.iter().all(|r| r.ok && r.data == results[0].data),
        "{results:?}"
    );
}

#[test]
fn the_same_side_effect_from_many_threads_runs_once_on_every_store() {
    same_call_from_many_threads(MemoryStore::default());
    same_call_from_many_threads(SqliteStore::open(temp_db("threads")).unwrap());
}

#[test]
fn a_second_process_on_the_same_file_replays_instead_of_repeating() {
    let path = temp_db("restart");
    let bank = Bank::new();
    let run = |store: SqliteStore| {
        let d = Dispatcher::builder(tools![send].unwrap(), Arc::clone(&bank))
            .store(store)
            .build()
            .unwrap();
        block_on(d.execute(Call::new("send", r#"{"cents": 100}"#).session("s")))
    };
    let first = run(SqliteStore::open(&path).unwrap());
    let second = run(SqliteStore::open(&path).unwrap());
    assert!(first.ok && !first.replayed);
    assert!(second.ok && second.replayed, "{second:?}");
    assert_eq!(second.data, first.data);
    assert_eq!(bank.transfers(), 1);
}

// ------------------------------------------------ decisions (the inbox)

/// Many threads decide one approval at once (a double click, two people):
/// exactly one decision is kept, and it is the winner's.
fn one_decision<St: Store>(stores: Vec<Arc<St>>) {
    block_on(stores[0].put_approval(&asked("race"))).unwrap();
    let deciders = stores.clone();
    let outcomes = on_threads(8, move |i| {
        let decision = toolcall_tests::decision(i % 2 == 0, &format!("p{i}"), now_ms());
        let store = &deciders[i % deciders.len()];
        let deciding = toolcall_tests::deciding_now("race", &decision);
        let outcome = block_on(store.decide_approval(&deciding)).unwrap();
        (outcome, decision.by)
    });
    let winners: Vec<&String> = outcomes
        .iter()
        .filter(|(o, _)| *o == DecideOutcome::Decided)
        .map(|(_, by)| by)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|(o, _)| matches!(o, DecideOutcome::Decided | DecideOutcome::AlreadyDecided))
    );
    let kept = block_on(stores[0].approval("race")).unwrap().unwrap();
    assert_eq!(&kept.approval.decision.unwrap().by, winners[0]);
}

#[test]
fn decisions_have_one_winner_under_threads() {
    one_decision(vec![Arc::new(MemoryStore::default())]);
    one_decision(two_handles("decide-race"));
}

#[test]
fn a_waiting_agent_sees_a_decision_made_through_another_connection() {
    let path = temp_db("wait");
    let agent = Arc::new(SqliteStore::open(&path).unwrap());
    let inbox = SqliteStore::open(&path).unwrap();
    block_on(agent.put_approval(&asked("w1"))).unwrap();
    let waiting = {
        let agent = Arc::clone(&agent);
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let entry = block_on(agent.wait_approval("w1", now_ms() + 20_000)).unwrap();
            (entry, started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let yes = block_on(toolcall_tests::ana_approves(&inbox, "w1"));
    let (entry, waited) = waiting.join().unwrap();
    assert_eq!(entry.unwrap().approval.decision, Some(yes));
    assert!(waited < Duration::from_secs(2), "{waited:?}");
}

#[test]
fn every_store_keeps_the_operators_controls_rates_and_signatures() {
    on_every_store!(controls_conformance, "controls");
}

/// On a runtime with threads, so that the racers run at once.
fn block_on_threads<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn last_signatures_racing_decide_once() {
    block_on_threads(last_signatures_race(vec![Arc::new(MemoryStore::default())]));
    block_on_threads(last_signatures_race(two_handles("sign-race")));
}
