//! What the store deletes by itself and when: expired rows, decided
//! approvals after the retention window, a session's taint with it.

use super::*;

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
