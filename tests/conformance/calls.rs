//! The Store conformance suite's calls: claims, outcomes, resource locks,
//! taint and approvals taken by their binding.

use super::*;

/// Where a session's taint came from: every add keeps its source, newest
/// first, the newest [`MAX_SOURCES`](toolcall_core::provenance::MAX_SOURCES),
/// each within its bounds whoever made it; another session's are its own.
/// `t` and `long_session` were tainted by the suite before.
pub(crate) async fn taint_sources_conformance(
    store: &impl Store,
    other: &impl Store,
    long_session: &str,
) {
    use toolcall_core::provenance::{MAX_PARTS, MAX_SOURCES, MAX_TEXT_CHARS};
    let at = |sources: &[TaintSource]| sources.iter().map(|s| s.at_ms).collect::<Vec<_>>();
    assert!(store.taint_sources("never").await.unwrap().is_empty());
    assert_eq!(at(&other.taint_sources("t").await.unwrap()), [2, 1, 0]);
    assert_eq!(
        other.taint_sources(long_session).await.unwrap(),
        [source(3)]
    );
    for n in 10..16 {
        if n % 2 == 0 {
            store.add_taint(&marked("src", &source(n))).await.unwrap();
        } else {
            other.add_taint(&marked("src", &source(n))).await.unwrap();
        }
    }
    let kept = store.taint_sources("src").await.unwrap();
    assert_eq!(kept.len(), MAX_SOURCES);
    assert_eq!(at(&kept), [15, 14, 13, 12], "the newest, newest first");
    assert_eq!(kept[0], source(15), "kept as made");
    assert_eq!(kept[0].tool, "read_note");
    assert_eq!(kept[0].call_id.as_deref(), Some("call-15"));
    let text = &kept[0].texts[0];
    assert_eq!(text.part, "/note");
    assert!(text.text.starts_with("15: éé"), "{}", text.text);
    assert_eq!(text.text.chars().count(), MAX_TEXT_CHARS);
    assert!(text.cut);
    assert!(tainted(store, "src", &[]).await.any);

    // A source made elsewhere, past every bound, is kept within them.
    let wide = TaintSource {
        tool: "x".repeat(10_000),
        call_id: Some("c".repeat(10_000)),
        at_ms: 20,
        texts: vec![
            UntrustedText {
                part: "/p".repeat(5_000),
                text: "y".repeat(50_000),
                cut: false,
            };
            9
        ],
    };
    other.add_taint(&marked("wide", &wide)).await.unwrap();
    let kept = store.taint_sources("wide").await.unwrap();
    assert_eq!(kept, [wide.bounded()]);
    assert_eq!(kept[0].texts.len(), MAX_PARTS);
    assert!(kept[0].tool.len() <= 128 && kept[0].texts[0].cut);
}

/// The whole contract, on one store; `other` is a second handle on the same
/// data (the same store, or another connection to the same file).
pub async fn conformance(store: &impl Store, other: &impl Store) {
    use RecordedOutcome::{Completed, InDoubt, InFlight};
    // Counters are per session and per key, and shared by handles.
    assert_eq!(store.next_step("a", now_ms()).await.unwrap(), 1);
    assert_eq!(other.next_step("a", now_ms()).await.unwrap(), 2);
    assert_eq!(store.next_step("b", now_ms()).await.unwrap(), 1);
    assert_eq!(store.count_call(&key("k1"), now_ms()).await.unwrap(), 1);
    assert_eq!(other.count_call(&key("k1"), now_ms()).await.unwrap(), 2);
    assert_eq!(store.count_call(&key("k2"), now_ms()).await.unwrap(), 1);

    // A peek reads the step count without counting one.
    assert_eq!(store.peek_step("a").await.unwrap(), 2);
    assert_eq!(other.peek_step("a").await.unwrap(), 2);
    assert_eq!(store.peek_step("never").await.unwrap(), 0);
    assert_eq!(store.next_step("a", now_ms()).await.unwrap(), 3);

    // Taint: per session, shared by handles; a mark without fingerprints
    // says the session saw untrusted output, fingerprints say which values.
    let (p1, p2, p3) = ("f1".repeat(32), "f2".repeat(32), "f3".repeat(32));
    assert_eq!(
        tainted(store, "t", std::slice::from_ref(&p1)).await,
        TaintHit::default(),
        "a session that saw nothing is clean"
    );
    store.add_taint(&marked("t", &source(0))).await.unwrap();
    assert_eq!(
        tainted(other, "t", std::slice::from_ref(&p1)).await,
        TaintHit::new(true, vec![]),
        "marked, no values"
    );
    reads(store, "t", &[p1.clone(), p2.clone()], 1).await;
    reads(other, "t", std::slice::from_ref(&p2), 2).await;
    assert_eq!(
        tainted(other, "t", &[p3.clone(), p2.clone(), p1.clone()]).await,
        TaintHit::new(true, vec![p2.clone(), p1.clone()]),
        "the values seen, in the order asked"
    );
    assert_eq!(
        tainted(store, "u", std::slice::from_ref(&p1)).await,
        TaintHit::default(),
        "another session's taint is not this one's"
    );
    let long_session = "s".repeat(9_000);
    reads(store, &long_session, std::slice::from_ref(&p3), 3).await;
    assert_eq!(
        tainted(other, &long_session, std::slice::from_ref(&p3)).await,
        TaintHit::new(true, vec![p3.clone()])
    );

    taint_sources_conformance(store, other, &long_session).await;

    // One claim wins; the lease ends it; release frees it.
    let now = now_ms();
    assert_eq!(claim_a_second(store, "k1", now).await, Claim::Acquired);
    assert_eq!(claim_a_second(other, "k1", now).await, Claim::InFlight);
    assert_eq!(
        claim_a_second(other, "k1", now + 1_001).await,
        Claim::Abandoned,
        "the lease ran out with no outcome: in doubt, not taken"
    );
    assert_eq!(
        outcome(store, "k1").await,
        Some(InDoubt),
        "every handle says so"
    );
    assert_eq!(
        claim_a_second(other, "k1", now + 1_001).await,
        Claim::Acquired,
        "in doubt: claimed like a free key"
    );
    other.release(&key("k1")).await.unwrap();
    assert_eq!(
        claim_a_second(store, "k1", now).await,
        Claim::Acquired,
        "released: free again"
    );
    assert_eq!(
        outcome(store, "k1").await,
        Some(InFlight),
        "claimed: in flight"
    );
    assert_eq!(outcome(store, "free").await, None, "free: no outcome");

    // A completed record is the answer from then on, and release keeps it.
    store.complete(&key("k1"), &result(7)).await.unwrap();
    assert_eq!(
        outcome(other, "k1").await,
        Some(Completed(Box::new(result(7))))
    );
    assert_eq!(
        claim_a_second(other, "k1", now + 10_000_000).await,
        Claim::Completed(result(7))
    );
    other.release(&key("k1")).await.unwrap();
    assert_eq!(
        outcome(store, "k1").await,
        Some(Completed(Box::new(result(7))))
    );
    // Doubting a completed key changes nothing.
    other.doubt(&key("k1")).await.unwrap();
    assert_eq!(
        outcome(store, "k1").await,
        Some(Completed(Box::new(result(7))))
    );

    // In doubt: durable, released by nothing, claimed like a free key, and
    // completed by the call that ran it again.
    assert_eq!(
        store.claim(&key("d1"), a_minute_from(now)).await.unwrap(),
        Claim::Acquired
    );
    store.doubt(&key("d1")).await.unwrap();
    assert_eq!(outcome(other, "d1").await, Some(InDoubt));
    other.release(&key("d1")).await.unwrap();
    assert_eq!(
        outcome(store, "d1").await,
        Some(InDoubt),
        "release leaves an in-doubt key alone"
    );
    assert!(
        !renew_a_second(store, "d1", now).await,
        "in doubt is not in flight"
    );
    assert_eq!(
        other.claim(&key("d1"), a_minute_from(now)).await.unwrap(),
        Claim::Acquired,
        "in doubt: acquired at once, no lease to wait for"
    );
    assert_eq!(
        store.claim(&key("d1"), a_minute_from(now)).await.unwrap(),
        Claim::InFlight,
        "and held like any claim"
    );
    assert_eq!(outcome(store, "d1").await, Some(InFlight), "claimed again");
    other.complete(&key("d1"), &result(8)).await.unwrap();
    assert_eq!(
        outcome(store, "d1").await,
        Some(Completed(Box::new(result(8))))
    );
    // A key never claimed can be doubted too.
    other.doubt(&key("d2")).await.unwrap();
    assert_eq!(outcome(store, "d2").await, Some(InDoubt));

    // Renewing extends a claim while it is in flight, and only then.
    assert_eq!(claim_a_second(store, "r1", now).await, Claim::Acquired);
    assert!(renew_a_second(store, "r1", now + 500).await);
    assert_eq!(
        claim_a_second(other, "r1", now + 1_200).await,
        Claim::InFlight,
        "renewed: not taken over after the first lease's end"
    );
    assert_eq!(
        claim_a_second(other, "r1", now + 1_500).await,
        Claim::Abandoned,
        "the renewed lease ran out: in doubt"
    );
    assert_eq!(
        claim_a_second(other, "r1", now + 1_500).await,
        Claim::Acquired
    );
    other.complete(&key("r1"), &result(9)).await.unwrap();
    assert!(!renew_a_second(store, "r1", now + 1_600).await, "completed");
    assert_eq!(claim_a_second(store, "r2", now).await, Claim::Acquired);
    store.release(&key("r2")).await.unwrap();
    assert!(!renew_a_second(other, "r2", now).await, "released");
    assert!(!renew_a_second(other, "never", now).await);

    // Call counts can be taken back, never below zero.
    assert_eq!(store.count_call(&key("u1"), now_ms()).await.unwrap(), 1);
    assert_eq!(other.count_call(&key("u1"), now_ms()).await.unwrap(), 2);
    other.uncount_call(&key("u1")).await.unwrap();
    assert_eq!(
        store.count_call(&key("u1"), now_ms()).await.unwrap(),
        2,
        "one taken back"
    );
    for _ in 0..3 {
        store.uncount_call(&key("u1")).await.unwrap();
    }
    assert_eq!(
        other.count_call(&key("u1"), now_ms()).await.unwrap(),
        1,
        "never below zero"
    );
    store.uncount_call(&key("u2")).await.unwrap();
    assert_eq!(
        other.count_call(&key("u2"), now_ms()).await.unwrap(),
        1,
        "never counted"
    );

    // Resource locks: one holder at a time, extended by its holder, taken
    // over when the lease runs out, freed only by the holder that has it.
    assert!(lock(store, "order-1", "h1", now).await);
    assert!(!lock(other, "order-1", "h2", now).await);
    assert!(lock(other, "order-2", "h2", now).await, "another resource");
    assert!(
        lock(other, "order-1", "h1", now + 500).await,
        "the holder extends it"
    );
    assert!(
        !lock(store, "order-1", "h2", now + 1_200).await,
        "extended: still held after the first lease's end"
    );
    assert!(
        lock(store, "order-1", "h2", now + 1_500).await,
        "the lease ran out: taken over"
    );
    other.unlock_resource(&key("order-1"), "h1").await.unwrap();
    assert!(
        !lock(other, "order-1", "h1", now + 1_600).await,
        "a stale holder's unlock does nothing"
    );
    store.unlock_resource(&key("order-1"), "h2").await.unwrap();
    assert!(
        lock(other, "order-1", "h1", now + 1_600).await,
        "unlocked by its holder: free"
    );
    let long_resource = noise(9_000, 1);
    assert!(lock(store, &long_resource, "h1", now).await);
    assert!(!lock(other, &long_resource, "h2", now).await);

    // A session id of any length is counted (it is the host's to choose;
    // Postgres indexes at most about 2.7 KB per entry, after compression).
    let long_session = noise(9_000, 2);
    assert_eq!(store.next_step(&long_session, now_ms()).await.unwrap(), 1);
    assert_eq!(other.next_step(&long_session, now_ms()).await.unwrap(), 2);
    assert_eq!(
        store
            .next_step(&long_session[..8_999], now_ms())
            .await
            .unwrap(),
        1,
        "another session"
    );

    // Approvals: bound, single use, expiring.
    put(store, &approval("p1", now + 60_000)).await;
    for wrong in [
        bound_in("other"),
        Binding {
            caller: "other",
            ..BOUND
        },
        Binding {
            tool: Some("other"),
            ..BOUND
        },
        Binding {
            digest: Some("d2"),
            ..BOUND
        },
    ] {
        assert_eq!(
            takes(
                other,
                &ApprovalUse {
                    id: "p1",
                    binding: &wrong,
                    now_ms: now
                }
            )
            .await,
            TakeApproval::Invalid
        );
    }
    assert_eq!(
        takes(other, &bound_use("forged", now)).await,
        TakeApproval::Invalid
    );
    match takes(other, &bound_use("p1", now)).await {
        TakeApproval::Taken(taken) => {
            let mut asked = approval("p1", now + 60_000);
            asked.created_ms = taken.created_ms;
            assert_eq!(taken, asked);
        }
        other => panic!("expected the approval, got {other:?}"),
    }
    assert_eq!(
        takes(store, &bound_use("p1", now)).await,
        TakeApproval::Invalid,
        "single use"
    );
    let loose = Binding {
        tool: None,
        digest: None,
        ..BOUND
    };
    put(store, &approval("p2", now - 1)).await;
    let p2 = using("p2", &loose, now);
    assert_eq!(takes(store, &p2).await, TakeApproval::Expired);
    let p2_later = using(p2.id, p2.binding, now + 20);
    assert_eq!(
        takes(store, &p2_later).await,
        TakeApproval::Expired,
        "an expired question is left expired, never used up by a take"
    );
    let left = store
        .approval("p2")
        .await
        .unwrap()
        .expect("kept until purged");
    assert_eq!(left.used_ms, None, "{left:?}");
    // The session is kept as given, however long.
    let long = PendingApproval {
        session: long_session.clone(),
        ..approval("p3", now + 60_000)
    };
    put(store, &long).await;
    let bound_long = bound_in(&long_session);
    match takes(other, &using("p3", &bound_long, now)).await {
        TakeApproval::Taken(taken) => assert_eq!(taken.session, long_session),
        other => panic!("expected the approval, got {other:?}"),
    }

    // Why it asks travels with it, as put: the reason and the tainted
    // arguments (at the session level, a reason and no arguments).
    let untrusted = PendingApproval {
        reason: Some("untrusted_context".into()),
        tainted: vec!["order_id".into(), "text".into()],
        ..approval("p4", now + 60_000)
    };
    // With where the taint came from, newest first, as the dispatcher
    // copies it from the session.
    let whole_session = PendingApproval {
        reason: Some("untrusted_context".into()),
        provenance: vec![source(2), source(1)],
        ..approval("p5", now + 60_000)
    };
    for asked in [&untrusted, &whole_session] {
        store.put_approval(asked).await.unwrap();
        assert_eq!(
            &other.approval(&asked.id).await.unwrap().unwrap().approval,
            asked
        );
        assert!(
            other
                .pending_approvals(now, 100)
                .await
                .unwrap()
                .contains(asked)
        );
        match takes(other, &bound_use(&asked.id, now)).await {
            TakeApproval::Taken(taken) => assert_eq!(&taken, asked),
            other => panic!("expected the approval, got {other:?}"),
        }
    }

    decisions(store, other, now).await;
}

/// `session` reads untrusted output (the source made at `at_ms`) that
/// holds the values `fingerprints`, through `store`.
async fn reads(store: &impl Store, session: &str, fingerprints: &[String], at_ms: u64) {
    let source = source(at_ms);
    let exposure = Exposure {
        session,
        fingerprints,
        source: &source,
    };
    store.add_taint(&exposure).await.unwrap();
}

/// Whether `store` finds `session` tainted, and which of `fingerprints`.
async fn tainted(store: &impl Store, session: &str, fingerprints: &[String]) -> TaintHit {
    store.tainted(session, fingerprints).await.unwrap()
}

/// What `store` recorded of the call `name`.
async fn outcome(store: &impl Store, name: &str) -> Option<RecordedOutcome> {
    store.outcome(&key(name)).await.unwrap()
}

/// `store`'s claim of the key `name` at `now_ms`, for a lease of a second:
/// short enough for the suite to step past its end.
async fn claim_a_second(store: &impl Store, name: &str, now_ms: u64) -> Claim {
    store
        .claim(&key(name), a_second_from(now_ms))
        .await
        .unwrap()
}

/// Whether `store` renews its claim of the key `name` for a second from
/// `now_ms`.
async fn renew_a_second(store: &impl Store, name: &str, now_ms: u64) -> bool {
    store
        .renew(&key(name), a_second_from(now_ms))
        .await
        .unwrap()
}

/// Whether `holder` takes (or extends) the lock on `resource` at `now_ms`,
/// for a lease of a second.
async fn lock(store: &impl Store, resource: &str, holder: &str, now_ms: u64) -> bool {
    store
        .lock_resource(
            &LockAsk {
                resource: &key(resource),
                holder,
                lease_ms: 1_000,
            },
            now_ms,
        )
        .await
        .unwrap()
}
