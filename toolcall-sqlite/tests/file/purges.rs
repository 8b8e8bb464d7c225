//! What the store deletes by itself and when: expired rows, decided
//! approvals after the retention window, a session's taint with it.

use super::*;
use toolcall::store::{Exposure, Lease};

/// A new store file for `name` that keeps what ended for `retention_ms`
/// and purges once every `every` writes (0: only by hand); its path too.
fn purging(name: &str, retention_ms: u64, every: u64) -> (PathBuf, SqliteStore) {
    let path = fresh_dir(name).join("store.db");
    let store = SqliteStore::open(&path)
        .unwrap()
        .retention(Duration::from_millis(retention_ms))
        .purge_every(every);
    (path, store)
}

#[test]
fn the_store_purges_what_expired_by_itself() {
    let (path, store) = purging("purge", 300, 5);
    block_on(sql_stores::eleven_writes_soon_old(&store));
    std::thread::sleep(Duration::from_millis(700));
    // Four more: the fifteenth write purges.
    block_on(sql_stores::four_new_writes(&store));

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
        block_on(store.claim(
            &key("r-held"),
            Lease {
                now_ms: now_ms(),
                lease_ms: 1_000
            }
        ))
        .unwrap(),
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
    let (path, store) = purging("no-purge", 1, 0);
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

#[test]
fn a_decided_approval_stays_in_the_history_for_the_retention_window() {
    let (path, store) = purging("history", 1_500, 0);
    let expires = now_ms() + 100;
    block_on(sql_stores::one_of_two_approvals_decided(&store, expires));
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

/// A signature goes with its approval, in the same purge (its kinds are
/// purged one after the other); the signature of an approval kept stays.
#[test]
fn a_signature_is_purged_with_its_approval() {
    let (path, store) = purging("signatures-purge", 60_000, 0);
    block_on(sql_stores::two_approvals_signed_once(
        &store,
        now_ms() + 100,
    ));
    std::thread::sleep(Duration::from_millis(300));
    let purged = store.purge().unwrap();
    assert_eq!((purged.approvals, purged.signatures), (1, 1));
    assert_eq!(rows(&path, "toolcall_signatures"), ["p-kept"]);
    assert_eq!(rows(&path, "toolcall_approvals"), ["p-kept"]);
}

#[test]
fn taint_is_purged_with_the_session_after_the_retention_window() {
    let (path, store) = purging("taint-purge", 1, 0);
    let print = ["ab".repeat(32)];
    block_on(async {
        let source = TaintSource::from_output("read", None, 1, &json!({"note": "hi"}), &[]);
        store
            .add_taint(&Exposure {
                session: "s",
                fingerprints: &print,
                source: &source,
            })
            .await
            .unwrap();
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
