//! The suite's operators' part: the controls' versions and history, the
//! rate limits' windows, and the signatures of approvals two people sign.

use super::*;

/// The operators' part of the contract: the controls' versions and
/// history, the rate limits' windows and the signatures of approvals that
/// need more than one person. `store` and `other` are two handles on the
/// same data, fresh.
pub async fn controls_conformance(store: &impl Store, other: &impl Store) {
    controls_versions(store, other).await;
    rate_windows(store, other).await;
    signing(store, other).await;
}

/// [`ControlStore::put_controls`] is compare-and-swap on the version, seen by
/// every handle, with the history newest first.
pub(crate) async fn controls_versions(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    assert_eq!(store.controls(0).await.unwrap(), None, "nothing written");
    assert!(other.controls_history(10).await.unwrap().is_empty());

    // Two writers of the first version: one wins.
    assert!(
        store
            .put_controls(&ControlsWrite {
                expected: 0,
                document: r#"{"v":1}"#,
                change: &change("ana", "first", now)
            })
            .await
            .unwrap()
    );
    assert!(
        !other
            .put_controls(&ControlsWrite {
                expected: 0,
                document: r#"{"v":"lost"}"#,
                change: &change("bo", "lost", now)
            })
            .await
            .unwrap()
    );
    let first = StoredControls {
        version: 1,
        document: r#"{"v":1}"#.into(),
    };
    assert_eq!(other.controls(0).await.unwrap(), Some(first.clone()));
    assert_eq!(other.controls(1).await.unwrap(), None, "known already");
    assert_eq!(store.controls(7).await.unwrap(), Some(first));

    // The next version, raced from both handles: one wins.
    let (second_a, second_b) = (
        change("ana", "second", now + 1),
        change("bo", "second too", now + 1),
    );
    let (write_a, write_b) = (
        ControlsWrite {
            expected: 1,
            document: r#"{"v":2}"#,
            change: &second_a,
        },
        ControlsWrite {
            expected: 1,
            document: r#"{"v":"2b"}"#,
            change: &second_b,
        },
    );
    let (a, b) = tokio::join!(store.put_controls(&write_a), other.put_controls(&write_b));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a != b, "one writer of version 2: {a} {b}");
    let second = other.controls(1).await.unwrap().unwrap();
    assert_eq!(second.version, 2);
    assert_eq!(
        second.document,
        if a { r#"{"v":2}"# } else { r#"{"v":"2b"}"# }
    );
    // A writer that read an old version is refused.
    assert!(
        !store
            .put_controls(&ControlsWrite {
                expected: 1,
                document: "{}",
                change: &change("cy", "stale", now + 2)
            })
            .await
            .unwrap()
    );
    assert!(
        other
            .put_controls(&ControlsWrite {
                expected: 2,
                document: r#"{"v":3}"#,
                change: &change("cy", "third", now + 3)
            })
            .await
            .unwrap()
    );
    assert_eq!(store.controls(2).await.unwrap().unwrap().version, 3);

    let history = store.controls_history(10).await.unwrap();
    let versions: Vec<u64> = history.iter().map(|c| c.version).collect();
    assert_eq!(versions, [3, 2, 1], "newest first, the version set");
    // As the store keeps a change: with the version it set.
    let kept = |version, change| ControlsChange { version, ..change };
    assert_eq!(history[0], kept(3, change("cy", "third", now + 3)));
    assert_eq!(history[2], kept(1, change("ana", "first", now)));
    assert_eq!(history[1].by, if a { "ana" } else { "bo" });
    assert_eq!(other.controls_history(2).await.unwrap(), history[..2]);
}

/// [`ControlStore::take_rate`] counts to the limit in one fixed window, shared by
/// every handle, and refuses after; the next window starts afresh;
/// [`ControlStore::rate_count`] counts nothing.
pub(crate) async fn rate_windows(store: &impl Store, other: &impl Store) {
    let window = 60_000;
    let now = now_ms();
    let start = now - now % window;
    let refund = RateWindow {
        bucket: "refund",
        start_ms: start,
        length_ms: window,
    };
    for (i, handle) in [true, false, true].into_iter().enumerate() {
        let taken = if handle {
            store.take_rate(&refund, 3).await
        } else {
            other.take_rate(&refund, 3).await
        };
        assert!(taken.unwrap(), "call {} of 3", i + 1);
    }
    assert!(!other.take_rate(&refund, 3).await.unwrap());
    assert!(!store.take_rate(&refund, 3).await.unwrap());
    assert_eq!(store.rate_count("refund", start).await.unwrap(), 3);
    assert_eq!(other.rate_count("refund", start).await.unwrap(), 3);
    assert_eq!(
        store.rate_count("refund", start).await.unwrap(),
        3,
        "reading counts nothing"
    );
    // A higher limit in the same window counts on from there.
    assert!(store.take_rate(&refund, 4).await.unwrap());
    assert!(!other.take_rate(&refund, 4).await.unwrap());
    assert_eq!(other.rate_count("refund", start).await.unwrap(), 4);

    // The next window starts afresh; the full one stays full.
    let next = RateWindow {
        start_ms: start + window,
        ..refund
    };
    assert_eq!(store.rate_count("refund", next.start_ms).await.unwrap(), 0);
    assert!(other.take_rate(&next, 3).await.unwrap());
    assert_eq!(store.rate_count("refund", next.start_ms).await.unwrap(), 1);
    assert!(!store.take_rate(&refund, 3).await.unwrap());

    // Buckets are apart; a limit of 0 counts nothing.
    let export = RateWindow {
        bucket: "export",
        ..refund
    };
    assert_eq!(store.rate_count("export", start).await.unwrap(), 0);
    assert!(!store.take_rate(&export, 0).await.unwrap());
    assert_eq!(other.rate_count("export", start).await.unwrap(), 0);
    assert!(store.take_rate(&export, 1).await.unwrap());
    assert_eq!(other.rate_count("export", start).await.unwrap(), 1);
    assert_eq!(other.rate_count("refund", start).await.unwrap(), 4);
}

/// `store` answers `signing` with `outcome`.
async fn signs(store: &impl Store, signing: SignatureWrite<'_>, outcome: SignOutcome) {
    assert_eq!(
        store.sign_approval(&signing).await.unwrap(),
        outcome,
        "{} signing {}",
        signing.signer,
        signing.id
    );
}

/// [`QuestionStore::sign_approval`]: one signature per person, the `needed`-th
/// decides (`by` the signers in signing order), and nothing after.
pub(crate) async fn signing(store: &impl Store, other: &impl Store) {
    use SignOutcome::{AlreadyDecided, AlreadySigned, Decided, Expired, Invalid, Signed};
    let now = now_ms();
    let yes = decision(true, "whoever", now + 5);
    // A signature of the approval `id` by `signer`, of `needed`, at
    // `now_ms`: each of the same decision.
    let by = |id, signer, needed, now_ms| SignatureWrite {
        id,
        signer,
        needed,
        decision: &yes,
        now_ms,
    };
    signs(store, by("nope", "ana", 2, now), Invalid).await;
    assert!(store.signatures("nope").await.unwrap().is_empty());

    put(store, &approval("m1", now + 60_000)).await;
    signs(store, by("m1", "ana", 2, now), Signed { signatures: 1 }).await;
    signs(other, by("m1", "ana", 2, now + 1), AlreadySigned).await;
    let ana = Signature {
        by: "ana".into(),
        at_ms: now,
    };
    assert_eq!(
        other.signatures("m1").await.unwrap(),
        std::slice::from_ref(&ana)
    );
    let open = store.approval("m1").await.unwrap().unwrap();
    assert_eq!(open.approval.decision, None, "one of two: undecided");
    assert!(
        store
            .pending_approvals(now, 10)
            .await
            .unwrap()
            .iter()
            .any(|a| a.id == "m1")
    );

    signs(other, by("m1", "bo", 2, now + 2), Decided).await;
    let decided = store.approval("m1").await.unwrap().unwrap();
    assert_eq!(
        decided.approval.decision,
        Some(ApprovalDecision {
            by: "ana, bo".into(),
            ..yes.clone()
        })
    );
    let bo = Signature {
        by: "bo".into(),
        at_ms: now + 2,
    };
    assert_eq!(
        store.signatures("m1").await.unwrap(),
        [ana.clone(), bo.clone()]
    );
    signs(store, by("m1", "cy", 2, now + 3), AlreadyDecided).await;
    signs(other, by("m1", "ana", 2, now + 3), AlreadyDecided).await;
    let no = decision(false, "dan", now);
    let no_on = deciding(&no);
    assert_eq!(
        decides(store, &no_on("m1", now)).await,
        DecideOutcome::AlreadyDecided
    );
    assert_eq!(other.signatures("m1").await.unwrap(), [ana, bo]);
    let history = store.decided_approvals(10).await.unwrap();
    assert!(history.iter().any(|e| e.approval.id == "m1"));

    // Decided by one person, used up, or expired: no signature.
    put(store, &approval("m2", now + 60_000)).await;
    decides(store, &no_on("m2", now)).await;
    signs(other, by("m2", "ana", 2, now), AlreadyDecided).await;
    put(store, &approval("m3", now + 60_000)).await;
    signs(store, by("m3", "ana", 3, now), Signed { signatures: 1 }).await;
    signs(store, by("m3", "bo", 3, now + 60_000), Expired).await;
    put(store, &approval("m4", now + 10)).await;
    signs(other, by("m4", "ana", 2, now + 10), Expired).await;
    assert!(store.signatures("m2").await.unwrap().is_empty());
    assert!(store.signatures("m4").await.unwrap().is_empty());
    assert_eq!(store.signatures("m3").await.unwrap().len(), 1);

    // One person needed: the first signature decides.
    put(store, &approval("m5", now + 60_000)).await;
    signs(other, by("m5", "eve", 1, now), Decided).await;
    let decided = store.approval("m5").await.unwrap().unwrap();
    assert_eq!(decided.approval.decision.unwrap().by, "eve");
    // Used up by its call, it is not signed again.
    assert!(matches!(
        takes(store, &bound_use("m5", now)).await,
        TakeApproval::Taken(_)
    ));
    signs(other, by("m5", "fay", 2, now), AlreadyDecided).await;
}

/// Eight tasks on `stores` (handles on one store, in turn) give the last
/// of two signatures of one approval at once: exactly one decides, the
/// others find it decided, and the decision names the two who signed.
pub async fn last_signatures_race<S: Store + Send + Sync + 'static>(
    stores: Vec<std::sync::Arc<S>>,
) {
    let now = now_ms();
    let yes = decision(true, "whoever", now);
    stores[0]
        .put_approval(&approval("sign-race", now + 60_000))
        .await
        .unwrap();
    assert_eq!(
        stores[0]
            .sign_approval(&SignatureWrite {
                id: "sign-race",
                signer: "first",
                needed: 2,
                decision: &yes,
                now_ms: now
            })
            .await
            .unwrap(),
        SignOutcome::Signed { signatures: 1 }
    );
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let store = std::sync::Arc::clone(&stores[i % stores.len()]);
            let yes = yes.clone();
            tokio::spawn(async move {
                let signer = format!("p{i}");
                let outcome = store
                    .sign_approval(&SignatureWrite {
                        id: "sign-race",
                        signer: &signer,
                        needed: 2,
                        decision: &yes,
                        now_ms: now,
                    })
                    .await
                    .unwrap();
                (outcome, signer)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (SignOutcome::Decided, signer) => winners.push(signer),
            (SignOutcome::AlreadyDecided, _) => {}
            (other, signer) => panic!("{signer}: {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let last = stores.last().unwrap();
    let kept = last.approval("sign-race").await.unwrap().unwrap();
    let by = format!("first, {}", winners[0]);
    assert_eq!(kept.approval.decision.unwrap().by, by);
    let signed: Vec<String> = last
        .signatures("sign-race")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.by)
        .collect();
    assert_eq!(signed, ["first", winners[0].as_str()]);
}
