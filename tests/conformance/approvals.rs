//! The suite's decisions on approvals: recorded once, used up, given back,
//! and the calls whose outcome was never recorded.

use super::*;

/// The inbox's part of the contract: which approvals are pending, one
/// decision each, kept with the approval, used up once, and what came of it.
pub(crate) async fn decisions(store: &impl Store, other: &impl Store, now: u64) {
    let asked = |id: &str, created_ms: u64, expires_ms: u64| PendingApproval {
        created_ms,
        ..approval(id, expires_ms)
    };
    put(store, &asked("q2", now - 1_000, now + 60_000)).await;
    put(other, &asked("q1", now - 2_000, now + 60_000)).await;
    put(store, &asked("q0", now - 3_000, now + 5)).await;
    let ids = |pending: Vec<PendingApproval>| -> Vec<String> {
        pending.into_iter().map(|p| p.id).collect()
    };
    assert_eq!(
        ids(other.pending_approvals(now, 10).await.unwrap()),
        ["q0", "q1", "q2"],
        "oldest first"
    );
    assert_eq!(ids(store.pending_approvals(now, 1).await.unwrap()), ["q0"]);
    assert_eq!(
        ids(store.pending_approvals(now + 5, 10).await.unwrap()),
        ["q1", "q2"],
        "an expired approval is not pending"
    );

    // One decision wins; it is never changed.
    let yes = decision(true, "ana", now);
    let yes_on = deciding(&yes);
    assert_eq!(
        decides(store, &yes_on("q1", now)).await,
        DecideOutcome::Decided
    );
    assert_eq!(
        decides(
            other,
            &DecisionWrite {
                id: "q1",
                decision: &decision(false, "bo", now + 1),
                now_ms: now + 1
            }
        )
        .await,
        DecideOutcome::AlreadyDecided,
        "a second decision changes nothing"
    );
    assert_eq!(
        decides(store, &yes_on("q1", now)).await,
        DecideOutcome::AlreadyDecided,
        "a double click is one decision"
    );
    assert_eq!(
        decides(other, &yes_on("q0", now + 5)).await,
        DecideOutcome::Expired
    );
    assert_eq!(
        decides(other, &yes_on("forged", now)).await,
        DecideOutcome::Invalid
    );
    assert_eq!(
        ids(other.pending_approvals(now, 10).await.unwrap()),
        ["q0", "q2"],
        "decided: no longer pending"
    );
    let kept = other.approval("q1").await.unwrap().expect("kept");
    assert_eq!(kept.approval.decision.as_ref(), Some(&yes));
    assert_eq!(kept.approval.id, "q1");
    assert_eq!(kept.approval.arguments, json!({"cents": 1}));
    assert_eq!((kept.used_ms, &kept.result), (None, &None));
    assert!(!kept.is_open(now));
    assert!(store.approval("forged").await.unwrap().is_none());

    // A denial with edited arguments keeps both, and the note.
    let edited = ApprovalDecision {
        edited_arguments: Some(json!({"cents": 0, "why": "<b>"})),
        ..decision(false, "bo", now + 2)
    };
    assert_eq!(
        decides(
            other,
            &DecisionWrite {
                id: "q2",
                decision: &edited,
                now_ms: now + 2
            }
        )
        .await,
        DecideOutcome::Decided
    );
    let history = store.decided_approvals(10).await.unwrap();
    let order: Vec<&str> = history.iter().map(|e| e.approval.id.as_str()).collect();
    assert_eq!(order, ["q2", "q1"], "most recently decided first");
    assert_eq!(history[0].approval.decision.as_ref(), Some(&edited));
    assert_eq!(store.decided_approvals(1).await.unwrap().len(), 1);

    // Taking a decided approval uses it up once; the history keeps it.
    assert!(
        matches!(
            takes(other, &bound_use("q1", now + 3)).await,
            TakeApproval::Taken(taken) if taken.id == "q1" && taken.decision.as_ref() == Some(&yes)
        ),
        "the decision travels with the approval it uses up"
    );
    assert_eq!(
        takes(store, &bound_use("q1", now + 3)).await,
        TakeApproval::Invalid,
        "single use"
    );
    let used = store.approval("q1").await.unwrap().expect("kept after use");
    assert_eq!(used.used_ms, Some(now + 3));
    assert_eq!(
        decides(other, &yes_on("q1", now + 4)).await,
        DecideOutcome::AlreadyDecided,
        "used: cannot be decided again"
    );
    let came = ApprovalResult {
        ok: true,
        code: "OK".into(),
        replayed: false,
        at_ms: now + 4,
        answer: Some(result(7)),
    };
    other.settle_approval("q1", &came).await.unwrap();
    assert_eq!(
        store.approval("q1").await.unwrap().unwrap().result,
        Some(came.clone())
    );
    // A decided approval past its expiry is answered expired, and left so:
    // it reads expired to every answer after, never carried out.
    put(store, &asked("q3", now, now + 10)).await;
    assert_eq!(
        decides(store, &yes_on("q3", now)).await,
        DecideOutcome::Decided
    );
    assert_eq!(
        takes(other, &bound_use("q3", now + 10)).await,
        TakeApproval::Expired
    );
    assert_eq!(
        takes(store, &bound_use("q3", now + 10)).await,
        TakeApproval::Expired
    );
    let q3 = store.approval("q3").await.unwrap().unwrap();
    assert_eq!(q3.used_ms, None, "{q3:?}");

    // An undecided approval the host takes (it asserts the approval) is
    // gone, as before: no decision to keep, none to make.
    put(store, &asked("q4", now, now + 60_000)).await;
    assert!(matches!(
        takes(other, &bound_use("q4", now)).await,
        TakeApproval::Taken(_)
    ));
    assert!(store.approval("q4").await.unwrap().is_none());
    assert_eq!(
        decides(store, &yes_on("q4", now)).await,
        DecideOutcome::Invalid
    );
    // Settling an undecided or unknown approval does nothing.
    store.settle_approval("q4", &came).await.unwrap();
    store.settle_approval("forged", &came).await.unwrap();

    // An approval put with its decision keeps it, and is not pending.
    let given = PendingApproval {
        decision: Some(decision(true, "host", now)),
        reason: Some("untrusted_context".into()),
        tainted: vec!["cents".into()],
        ..asked("q6", now, now + 60_000)
    };
    put(store, &given).await;
    assert_eq!(other.approval("q6").await.unwrap().unwrap().approval, given);
    assert!(!ids(other.pending_approvals(now, 10).await.unwrap()).contains(&"q6".to_owned()));

    // Waiting: a decided, used or unknown approval answers at once, an
    // undecided one at the deadline, as it is.
    let start = std::time::Instant::now();
    assert!(
        other
            .wait_approval("q2", now + 60_000)
            .await
            .unwrap()
            .is_some(),
        "decided"
    );
    assert!(
        other
            .wait_approval("forged", now + 60_000)
            .await
            .unwrap()
            .is_none()
    );
    put(store, &asked("q5", now, now + 60_000)).await;
    let undecided = other.wait_approval("q5", now_ms() + 300).await.unwrap();
    assert!(undecided.is_some_and(|e| e.approval.decision.is_none()));
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

/// The approvals' part of the contract that keeps the inbox readable:
/// one question per call, and the inbox a page at a time. `store` and
/// `other` are two handles on the same data.
pub async fn approvals_conformance(store: &impl Store, other: &impl Store) {
    asking(store, other).await;
    paging(store, other).await;
    finding_used(store, other).await;
    unsettled(store, other).await;
    giving_back(store, other).await;
}

/// [`QuestionStore::give_back_approval`]: a decision used up and not settled is
/// unused again and taken by the next call; one settled, never used, or
/// whose call was asked about again meanwhile is left as it is.
pub(crate) async fn giving_back(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let binding = bound_in("giving-back");
    store
        .ask_approval(&asked_call("g1", "giving-back", now), 5)
        .await
        .unwrap();
    assert!(
        !other.give_back_approval("g1").await.unwrap(),
        "undecided: nothing to give back"
    );
    let yes = decision(true, "ana", now);
    let yes_on = deciding(&yes);
    decides(store, &yes_on("g1", now)).await;
    assert!(
        !other.give_back_approval("g1").await.unwrap(),
        "decided, not used: nothing to give back"
    );
    let g1 = using("g1", &binding, now);
    assert!(matches!(takes(other, &g1).await, TakeApproval::Taken(_)));
    assert!(store.give_back_approval("g1").await.unwrap());
    let entry = other.approval("g1").await.unwrap().unwrap();
    assert_eq!(entry.used_ms, None);
    assert_eq!(
        entry.approval.decision,
        Some(yes.clone()),
        "the decision stays"
    );
    // Taken again, once; settled, it stays used.
    assert!(matches!(takes(other, &g1).await, TakeApproval::Taken(_)));
    assert!(matches!(takes(store, &g1).await, TakeApproval::Invalid));
    let came = ApprovalResult {
        ok: true,
        code: "OK".into(),
        replayed: false,
        at_ms: now,
        answer: None,
    };
    store.settle_approval("g1", &came).await.unwrap();
    assert!(!other.give_back_approval("g1").await.unwrap(), "settled");
    assert!(
        other
            .approval("g1")
            .await
            .unwrap()
            .unwrap()
            .used_ms
            .is_some()
    );

    // Used, not settled, and the identical call asked again since: the
    // newer question stands, and the old decision stays used.
    store
        .ask_approval(&asked_call("g2", "giving-back-2", now), 5)
        .await
        .unwrap();
    decides(store, &yes_on("g2", now)).await;
    let binding = bound_in("giving-back-2");
    let g2 = using("g2", &binding, g1.now_ms);
    assert!(matches!(takes(store, &g2).await, TakeApproval::Taken(_)));
    assert_eq!(
        store
            .ask_approval(&asked_call("g3", "giving-back-2", now + 1), 5)
            .await
            .unwrap(),
        AskApproval::Created
    );
    assert!(!other.give_back_approval("g2").await.unwrap());
    assert!(
        store
            .approval("g2")
            .await
            .unwrap()
            .unwrap()
            .used_ms
            .is_some()
    );
    assert!(
        other
            .give_back_approval("nobody")
            .await
            .is_ok_and(|given| !given)
    );
}

/// [`QuestionStore::find_approval`] finds a used approval too (a denial carried out
/// still answers the identical calls after it), the newest first.
pub(crate) async fn finding_used(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let asked = asked_call("u1", "finding-used", now);
    let binding = bound_in("finding-used");
    store.ask_approval(&asked, 5).await.unwrap();
    let no = decision(false, "ana", now);
    let no_on = deciding(&no);
    assert_eq!(
        decides(store, &no_on("u1", now)).await,
        DecideOutcome::Decided
    );
    let u1 = using("u1", &binding, now);
    assert!(matches!(takes(other, &u1).await, TakeApproval::Taken(_)));
    let lookup = ApprovalLookup {
        binding: &binding,
        reason: None,
        now_ms: now,
    };
    let found = other
        .find_approval(&lookup)
        .await
        .unwrap()
        .expect("the used denial");
    assert_eq!(found.approval.id, "u1");
    assert!(found.used_ms.is_some());
    assert_eq!(found.approval.decision, Some(no.clone()));
    // A newer question of the same call comes first.
    let newer = PendingApproval {
        created_ms: now + 1,
        ..asked_call("u2", "finding-used", now)
    };
    assert_eq!(
        store.ask_approval(&newer, 5).await.unwrap(),
        AskApproval::Created,
        "a used approval does not answer an ask"
    );
    let later = ApprovalLookup {
        now_ms: now + 1,
        ..lookup
    };
    let found = store.find_approval(&later).await.unwrap();
    assert_eq!(found.map(|entry| entry.approval.id), Some("u2".into()));
}

/// The question a claim keeps ([`CallStore::claim_asking`]) is listed while the
/// key's outcome is unknown ([`CallStore::unsettled`]): its lease ran out with
/// no outcome, or it was recorded in doubt; never while the claim is live,
/// nor once the key completed or was released.
pub(crate) async fn unsettled(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let question = |id: &str| PendingApproval {
        reason: Some("in_doubt".into()),
        ..asked_call(id, "unsettled", now)
    };
    let listed = |found: Vec<toolcall::store::Unsettled>| {
        found
            .into_iter()
            .filter(|u| u.question.session == "unsettled")
            .map(|u| (u.key, u.question.id))
            .collect::<Vec<_>>()
    };
    // Live, lapsed, in doubt, completed, released, and a plain claim.
    let (live, lapsed, doubted, done, freed, plain) = (
        key("q-live"),
        key("q-lapsed"),
        key("q-doubted"),
        key("q-done"),
        key("q-freed"),
        key("q-plain"),
    );
    for (at, (k, id, lease)) in (now..).zip([
        (live, "q1", 60_000),
        (lapsed, "q2", 1),
        (doubted, "q3", 60_000),
        (done, "q4", 1),
        (freed, "q5", 1),
    ]) {
        let asking = QuestionLease {
            lease: Lease {
                now_ms: at,
                lease_ms: lease,
            },
            question: &question(id),
        };
        assert_eq!(
            store.claim_asking(&k, &asking).await.unwrap(),
            Claim::Acquired
        );
    }
    let brief = Lease {
        now_ms: now,
        lease_ms: 1,
    };
    assert_eq!(store.claim(&plain, brief).await.unwrap(), Claim::Acquired);
    other.doubt(&doubted).await.unwrap();
    other.complete(&done, &result(1)).await.unwrap();
    other.release(&freed).await.unwrap();
    let later = now + 10;
    let found = listed(other.unsettled(later, 100).await.unwrap());
    assert_eq!(
        found,
        [(lapsed, "q2".to_owned()), (doubted, "q3".to_owned())],
        "oldest claim first"
    );
    let question_back = other
        .unsettled(later, 100)
        .await
        .unwrap()
        .into_iter()
        .find(|u| u.question.id == "q2")
        .unwrap()
        .question;
    assert_eq!(question_back, question("q2"), "kept whole");
    assert_eq!(listed(other.unsettled(later, 1).await.unwrap()).len(), 1);
    // Claimed again (a settled rerun) without a question: none is listed.
    assert_eq!(
        store.claim(&doubted, a_minute_from(later)).await.unwrap(),
        Claim::Acquired
    );
    assert_eq!(
        listed(other.unsettled(later, 100).await.unwrap()),
        [(lapsed, "q2".to_owned())]
    );
}
