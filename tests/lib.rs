//! What the integration tests share: a tool that uses every attribute
//! `#[tool]` offers (for the macro tests and the schema/validator
//! agreement), and the conformance suite every `Store` must pass.

use serde_json::json;
use toolcall::store::{
    ApprovalDecision, ApprovalResult, AskApproval, Binding, Claim, ControlsChange, DecideOutcome,
    Key, OpenBounds, PendingApproval, PendingCursor, PendingOrder, PendingQuery, RecordedOutcome,
    SignOutcome, Signature, Store, StoredControls, TaintHit, TaintSource, TakeApproval,
    UntrustedText, now_ms,
};
use toolcall::{Rejection, ToolResult, tool};

/// One line of an order.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Line {
    /// The product.
    pub sku: String,
    /// How many.
    pub quantity: u32,
}

/// Places an order.
#[tool(side_effect, name = "place_order", version = 2)]
pub fn place(
    /// Customer email.
    #[arg(format = "email", sensitive)]
    email: String,
    /// Delivery day.
    #[arg(format = "date")]
    deliver_on: String,
    /// The lines.
    #[arg(min_items = 1, max_items = 3)]
    lines: Vec<Line>,
    /// Discount in percent, strictly between 0 and 100.
    #[arg(exclusive_min = 0, exclusive_max = 100)]
    discount: Option<f64>,
    /// The client's request id.
    #[arg(format = "uuid", rename = "requestId")]
    request_id: String,
    /// A note for the courier.
    #[arg(min_length = 2, max_length = 5)]
    note: Option<String>,
) -> Result<serde_json::Value, Rejection> {
    let _ = (email, deliver_on, discount, request_id, note);
    Ok(json!({"lines": lines.len()}))
}

pub mod faulty;

// ------------------------------------------------ the Store conformance suite

/// The store's key for a test's `name` (of a call or a resource).
pub fn key(name: &str) -> Key {
    Key::sha256(name)
}

fn result(n: i64) -> ToolResult {
    ToolResult::success("pay", json!({"n": n}).as_object().unwrap().clone())
}

fn approval(id: &str, expires_ms: u64) -> PendingApproval {
    PendingApproval {
        id: id.to_owned(),
        session: "s".into(),
        caller: "c".into(),
        tool: "pay".into(),
        digest: "d1".into(),
        arguments: json!({"cents": 1}),
        step: 3,
        created_ms: now_ms(),
        expires_ms,
        decision: None,
        reason: None,
        tainted: Vec::new(),
        answerers: Default::default(),
        principal: None,
        provenance: Vec::new(),
    }
}

const BOUND: Binding<'static> = Binding {
    session: "s",
    caller: "c",
    tool: Some("pay"),
    digest: Some("d1"),
    requester: toolcall::store::Requester::Anyone,
};

/// The source of a taint read at `at_ms`: a note of 100 000 characters,
/// which no store keeps whole.
pub fn source(at_ms: u64) -> TaintSource {
    let note = format!("{at_ms}: {}", "é".repeat(100_000));
    TaintSource::from_output(
        "read_note",
        Some(&format!("call-{at_ms}")),
        at_ms,
        &json!({"note": note, "stars": 1}),
        &["/note"],
    )
}

/// Where a session's taint came from: every add keeps its source, newest
/// first, the newest [`MAX_SOURCES`](toolcall_core::provenance::MAX_SOURCES),
/// each within its bounds whoever made it; another session's are its own.
/// `t` and `long_session` were tainted by the suite before.
async fn taint_sources_conformance(store: &impl Store, other: &impl Store, long_session: &str) {
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
            store.add_taint("src", &[], &source(n)).await.unwrap();
        } else {
            other.add_taint("src", &[], &source(n)).await.unwrap();
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
    assert!(store.tainted("src", &[]).await.unwrap().any);

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
    other.add_taint("wide", &[], &wide).await.unwrap();
    let kept = store.taint_sources("wide").await.unwrap();
    assert_eq!(kept, [wide.bounded()]);
    assert_eq!(kept[0].texts.len(), MAX_PARTS);
    assert!(kept[0].tool.len() <= 128 && kept[0].texts[0].cut);
}

/// The whole contract, on one store; `other` is a second handle on the same
/// data (the same store, or another connection to the same file).
pub async fn conformance(store: &impl Store, other: &impl Store) {
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
        store.tainted("t", std::slice::from_ref(&p1)).await.unwrap(),
        TaintHit::default(),
        "a session that saw nothing is clean"
    );
    store.add_taint("t", &[], &source(0)).await.unwrap();
    assert_eq!(
        other.tainted("t", std::slice::from_ref(&p1)).await.unwrap(),
        TaintHit::new(true, vec![]),
        "marked, no values"
    );
    store
        .add_taint("t", &[p1.clone(), p2.clone()], &source(1))
        .await
        .unwrap();
    other
        .add_taint("t", std::slice::from_ref(&p2), &source(2))
        .await
        .unwrap();
    assert_eq!(
        other
            .tainted("t", &[p3.clone(), p2.clone(), p1.clone()])
            .await
            .unwrap(),
        TaintHit::new(true, vec![p2.clone(), p1.clone()]),
        "the values seen, in the order asked"
    );
    assert_eq!(
        store.tainted("u", std::slice::from_ref(&p1)).await.unwrap(),
        TaintHit::default(),
        "another session's taint is not this one's"
    );
    let long_session = "s".repeat(9_000);
    store
        .add_taint(&long_session, std::slice::from_ref(&p3), &source(3))
        .await
        .unwrap();
    assert_eq!(
        other
            .tainted(&long_session, std::slice::from_ref(&p3))
            .await
            .unwrap(),
        TaintHit::new(true, vec![p3.clone()])
    );

    taint_sources_conformance(store, other, &long_session).await;

    // One claim wins; the lease ends it; release frees it.
    let now = now_ms();
    assert_eq!(
        store.claim(&key("k1"), now, 1_000).await.unwrap(),
        Claim::Acquired
    );
    assert_eq!(
        other.claim(&key("k1"), now, 1_000).await.unwrap(),
        Claim::InFlight
    );
    assert_eq!(
        other.claim(&key("k1"), now + 1_001, 1_000).await.unwrap(),
        Claim::Abandoned,
        "the lease ran out with no outcome: in doubt, not taken"
    );
    assert_eq!(
        store.outcome(&key("k1")).await.unwrap(),
        Some(RecordedOutcome::InDoubt),
        "every handle says so"
    );
    assert_eq!(
        other.claim(&key("k1"), now + 1_001, 1_000).await.unwrap(),
        Claim::Acquired,
        "in doubt: claimed like a free key"
    );
    other.release(&key("k1")).await.unwrap();
    assert_eq!(
        store.claim(&key("k1"), now, 1_000).await.unwrap(),
        Claim::Acquired,
        "released: free again"
    );
    assert_eq!(
        store.outcome(&key("k1")).await.unwrap(),
        Some(RecordedOutcome::InFlight),
        "claimed: in flight"
    );
    assert_eq!(
        store.outcome(&key("free")).await.unwrap(),
        None,
        "free: no outcome"
    );

    // A completed record is the answer from then on, and release keeps it.
    store.complete(&key("k1"), &result(7)).await.unwrap();
    assert_eq!(
        other.outcome(&key("k1")).await.unwrap(),
        Some(RecordedOutcome::Completed(result(7)))
    );
    assert_eq!(
        other
            .claim(&key("k1"), now + 10_000_000, 1_000)
            .await
            .unwrap(),
        Claim::Completed(result(7))
    );
    other.release(&key("k1")).await.unwrap();
    assert_eq!(
        store.outcome(&key("k1")).await.unwrap(),
        Some(RecordedOutcome::Completed(result(7)))
    );
    // Doubting a completed key changes nothing.
    other.doubt(&key("k1")).await.unwrap();
    assert_eq!(
        store.outcome(&key("k1")).await.unwrap(),
        Some(RecordedOutcome::Completed(result(7)))
    );

    // In doubt: durable, released by nothing, claimed like a free key, and
    // completed by the call that ran it again.
    assert_eq!(
        store.claim(&key("d1"), now, 60_000).await.unwrap(),
        Claim::Acquired
    );
    store.doubt(&key("d1")).await.unwrap();
    assert_eq!(
        other.outcome(&key("d1")).await.unwrap(),
        Some(RecordedOutcome::InDoubt)
    );
    other.release(&key("d1")).await.unwrap();
    assert_eq!(
        store.outcome(&key("d1")).await.unwrap(),
        Some(RecordedOutcome::InDoubt),
        "release leaves an in-doubt key alone"
    );
    assert!(
        !store.renew(&key("d1"), now, 1_000).await.unwrap(),
        "in doubt is not in flight"
    );
    assert_eq!(
        other.claim(&key("d1"), now, 60_000).await.unwrap(),
        Claim::Acquired,
        "in doubt: acquired at once, no lease to wait for"
    );
    assert_eq!(
        store.claim(&key("d1"), now, 60_000).await.unwrap(),
        Claim::InFlight,
        "and held like any claim"
    );
    assert_eq!(
        store.outcome(&key("d1")).await.unwrap(),
        Some(RecordedOutcome::InFlight),
        "claimed again"
    );
    other.complete(&key("d1"), &result(8)).await.unwrap();
    assert_eq!(
        store.outcome(&key("d1")).await.unwrap(),
        Some(RecordedOutcome::Completed(result(8)))
    );
    // A key never claimed can be doubted too.
    other.doubt(&key("d2")).await.unwrap();
    assert_eq!(
        store.outcome(&key("d2")).await.unwrap(),
        Some(RecordedOutcome::InDoubt)
    );

    // Renewing extends a claim while it is in flight, and only then.
    assert_eq!(
        store.claim(&key("r1"), now, 1_000).await.unwrap(),
        Claim::Acquired
    );
    assert!(store.renew(&key("r1"), now + 500, 1_000).await.unwrap());
    assert_eq!(
        other.claim(&key("r1"), now + 1_200, 1_000).await.unwrap(),
        Claim::InFlight,
        "renewed: not taken over after the first lease's end"
    );
    assert_eq!(
        other.claim(&key("r1"), now + 1_500, 1_000).await.unwrap(),
        Claim::Abandoned,
        "the renewed lease ran out: in doubt"
    );
    assert_eq!(
        other.claim(&key("r1"), now + 1_500, 1_000).await.unwrap(),
        Claim::Acquired
    );
    other.complete(&key("r1"), &result(9)).await.unwrap();
    assert!(
        !store.renew(&key("r1"), now + 1_600, 1_000).await.unwrap(),
        "completed"
    );
    assert_eq!(
        store.claim(&key("r2"), now, 1_000).await.unwrap(),
        Claim::Acquired
    );
    store.release(&key("r2")).await.unwrap();
    assert!(
        !other.renew(&key("r2"), now, 1_000).await.unwrap(),
        "released"
    );
    assert!(!other.renew(&key("never"), now, 1_000).await.unwrap());

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
    assert!(
        store
            .lock_resource(&key("order-1"), "h1", now, 1_000)
            .await
            .unwrap()
    );
    assert!(
        !other
            .lock_resource(&key("order-1"), "h2", now, 1_000)
            .await
            .unwrap()
    );
    assert!(
        other
            .lock_resource(&key("order-2"), "h2", now, 1_000)
            .await
            .unwrap(),
        "another resource"
    );
    assert!(
        other
            .lock_resource(&key("order-1"), "h1", now + 500, 1_000)
            .await
            .unwrap(),
        "the holder extends it"
    );
    assert!(
        !store
            .lock_resource(&key("order-1"), "h2", now + 1_200, 1_000)
            .await
            .unwrap(),
        "extended: still held after the first lease's end"
    );
    assert!(
        store
            .lock_resource(&key("order-1"), "h2", now + 1_500, 1_000)
            .await
            .unwrap(),
        "the lease ran out: taken over"
    );
    other.unlock_resource(&key("order-1"), "h1").await.unwrap();
    assert!(
        !other
            .lock_resource(&key("order-1"), "h1", now + 1_600, 1_000)
            .await
            .unwrap(),
        "a stale holder's unlock does nothing"
    );
    store.unlock_resource(&key("order-1"), "h2").await.unwrap();
    assert!(
        other
            .lock_resource(&key("order-1"), "h1", now + 1_600, 1_000)
            .await
            .unwrap(),
        "unlocked by its holder: free"
    );
    let long_resource = noise(9_000, 1);
    assert!(
        store
            .lock_resource(&key(&long_resource), "h1", now, 1_000)
            .await
            .unwrap()
    );
    assert!(
        !other
            .lock_resource(&key(&long_resource), "h2", now, 1_000)
            .await
            .unwrap()
    );

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
    store
        .put_approval(&approval("p1", now + 60_000))
        .await
        .unwrap();
    for wrong in [
        Binding {
            session: "other",
            ..BOUND
        },
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
            other.take_approval("p1", &wrong, now).await.unwrap(),
            TakeApproval::Invalid
        );
    }
    assert_eq!(
        other.take_approval("forged", &BOUND, now).await.unwrap(),
        TakeApproval::Invalid
    );
    match other.take_approval("p1", &BOUND, now).await.unwrap() {
        TakeApproval::Taken(taken) => assert_eq!(
            taken,
            approval("p1", now + 60_000).with_created(taken.created_ms)
        ),
        other => panic!("expected the approval, got {other:?}"),
    }
    assert_eq!(
        store.take_approval("p1", &BOUND, now).await.unwrap(),
        TakeApproval::Invalid,
        "single use"
    );
    let loose = Binding {
        tool: None,
        digest: None,
        ..BOUND
    };
    store.put_approval(&approval("p2", now - 1)).await.unwrap();
    assert_eq!(
        store.take_approval("p2", &loose, now).await.unwrap(),
        TakeApproval::Expired
    );
    assert_eq!(
        store.take_approval("p2", &loose, now + 20).await.unwrap(),
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
    store.put_approval(&long).await.unwrap();
    let bound_long = Binding {
        session: &long_session,
        ..BOUND
    };
    match other.take_approval("p3", &bound_long, now).await.unwrap() {
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
        match other.take_approval(&asked.id, &BOUND, now).await.unwrap() {
            TakeApproval::Taken(taken) => assert_eq!(&taken, asked),
            other => panic!("expected the approval, got {other:?}"),
        }
    }

    decisions(store, other, now).await;
}

/// A decision by `by`, at `decided_ms`.
pub fn decision(approved: bool, by: &str, decided_ms: u64) -> ApprovalDecision {
    ApprovalDecision {
        approved,
        by: by.to_owned(),
        note: format!("{by} says {approved}"),
        edited_arguments: None,
        decided_ms,
        lasts_until_ms: None,
    }
}

/// The inbox's part of the contract: which approvals are pending, one
/// decision each, kept with the approval, used up once, and what came of it.
async fn decisions(store: &impl Store, other: &impl Store, now: u64) {
    let asked = |id: &str, created_ms: u64, expires_ms: u64| PendingApproval {
        created_ms,
        ..approval(id, expires_ms)
    };
    store
        .put_approval(&asked("q2", now - 1_000, now + 60_000))
        .await
        .unwrap();
    other
        .put_approval(&asked("q1", now - 2_000, now + 60_000))
        .await
        .unwrap();
    store
        .put_approval(&asked("q0", now - 3_000, now + 5))
        .await
        .unwrap();
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
    assert_eq!(
        store.decide_approval("q1", &yes, now).await.unwrap(),
        DecideOutcome::Decided
    );
    assert_eq!(
        other
            .decide_approval("q1", &decision(false, "bo", now + 1), now + 1)
            .await
            .unwrap(),
        DecideOutcome::AlreadyDecided,
        "a second decision changes nothing"
    );
    assert_eq!(
        store.decide_approval("q1", &yes, now).await.unwrap(),
        DecideOutcome::AlreadyDecided,
        "a double click is one decision"
    );
    assert_eq!(
        other.decide_approval("q0", &yes, now + 5).await.unwrap(),
        DecideOutcome::Expired
    );
    assert_eq!(
        other.decide_approval("forged", &yes, now).await.unwrap(),
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
        other.decide_approval("q2", &edited, now + 2).await.unwrap(),
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
            other.take_approval("q1", &BOUND, now + 3).await.unwrap(),
            TakeApproval::Taken(taken) if taken.id == "q1" && taken.decision.as_ref() == Some(&yes)
        ),
        "the decision travels with the approval it uses up"
    );
    assert_eq!(
        store.take_approval("q1", &BOUND, now + 3).await.unwrap(),
        TakeApproval::Invalid,
        "single use"
    );
    let used = store.approval("q1").await.unwrap().expect("kept after use");
    assert_eq!(used.used_ms, Some(now + 3));
    assert_eq!(
        other.decide_approval("q1", &yes, now + 4).await.unwrap(),
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
    store
        .put_approval(&asked("q3", now, now + 10))
        .await
        .unwrap();
    assert_eq!(
        store.decide_approval("q3", &yes, now).await.unwrap(),
        DecideOutcome::Decided
    );
    assert_eq!(
        other.take_approval("q3", &BOUND, now + 10).await.unwrap(),
        TakeApproval::Expired
    );
    assert_eq!(
        store.take_approval("q3", &BOUND, now + 10).await.unwrap(),
        TakeApproval::Expired
    );
    let q3 = store.approval("q3").await.unwrap().unwrap();
    assert_eq!(q3.used_ms, None, "{q3:?}");

    // An undecided approval the host takes (it asserts the approval) is
    // gone, as before: no decision to keep, none to make.
    store
        .put_approval(&asked("q4", now, now + 60_000))
        .await
        .unwrap();
    assert!(matches!(
        other.take_approval("q4", &BOUND, now).await.unwrap(),
        TakeApproval::Taken(_)
    ));
    assert!(store.approval("q4").await.unwrap().is_none());
    assert_eq!(
        store.decide_approval("q4", &yes, now).await.unwrap(),
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
    store.put_approval(&given).await.unwrap();
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
    store
        .put_approval(&asked("q5", now, now + 60_000))
        .await
        .unwrap();
    let undecided = other.wait_approval("q5", now_ms() + 300).await.unwrap();
    assert!(undecided.is_some_and(|e| e.approval.decision.is_none()));
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

/// An approval asked for the call `pay {"cents": 1}` by caller `c` in
/// `session`, open for a minute from `now`: what the racing tests ask.
pub fn asked_call(id: &str, session: &str, now: u64) -> PendingApproval {
    PendingApproval {
        session: session.to_owned(),
        created_ms: now,
        ..approval(id, now + 60_000)
    }
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
async fn giving_back(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let binding = Binding {
        session: "giving-back",
        ..BOUND
    };
    store
        .ask_approval(&asked_call("g1", "giving-back", now), 5)
        .await
        .unwrap();
    assert!(
        !other.give_back_approval("g1").await.unwrap(),
        "undecided: nothing to give back"
    );
    let yes = decision(true, "ana", now);
    store.decide_approval("g1", &yes, now).await.unwrap();
    assert!(
        !other.give_back_approval("g1").await.unwrap(),
        "decided, not used: nothing to give back"
    );
    assert!(matches!(
        other.take_approval("g1", &binding, now).await.unwrap(),
        TakeApproval::Taken(_)
    ));
    assert!(store.give_back_approval("g1").await.unwrap());
    let entry = other.approval("g1").await.unwrap().unwrap();
    assert_eq!(entry.used_ms, None);
    assert_eq!(
        entry.approval.decision,
        Some(yes.clone()),
        "the decision stays"
    );
    // Taken again, once; settled, it stays used.
    assert!(matches!(
        other.take_approval("g1", &binding, now).await.unwrap(),
        TakeApproval::Taken(_)
    ));
    assert!(matches!(
        store.take_approval("g1", &binding, now).await.unwrap(),
        TakeApproval::Invalid
    ));
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
    store.decide_approval("g2", &yes, now).await.unwrap();
    let binding = Binding {
        session: "giving-back-2",
        ..BOUND
    };
    assert!(matches!(
        store.take_approval("g2", &binding, now).await.unwrap(),
        TakeApproval::Taken(_)
    ));
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
async fn finding_used(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let asked = asked_call("u1", "finding-used", now);
    let binding = Binding {
        session: "finding-used",
        ..BOUND
    };
    store.ask_approval(&asked, 5).await.unwrap();
    let no = decision(false, "ana", now);
    assert_eq!(
        store.decide_approval("u1", &no, now).await.unwrap(),
        DecideOutcome::Decided
    );
    assert!(matches!(
        other.take_approval("u1", &binding, now).await.unwrap(),
        TakeApproval::Taken(_)
    ));
    let found = other
        .find_approval(&binding, None, now)
        .await
        .unwrap()
        .expect("the used denial");
    assert_eq!(found.approval.id, "u1");
    assert!(found.used_ms.is_some());
    assert_eq!(found.approval.decision, Some(no));
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
    let found = store.find_approval(&binding, None, now + 1).await.unwrap();
    assert_eq!(found.map(|entry| entry.approval.id), Some("u2".into()));
}

/// The question a claim keeps ([`CallStore::claim_asking`]) is listed while the
/// key's outcome is unknown ([`CallStore::unsettled`]): its lease ran out with
/// no outcome, or it was recorded in doubt; never while the claim is live,
/// nor once the key completed or was released.
async fn unsettled(store: &impl Store, other: &impl Store) {
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
        assert_eq!(
            store
                .claim_asking(&k, at, lease, &question(id))
                .await
                .unwrap(),
            Claim::Acquired
        );
    }
    assert_eq!(store.claim(&plain, now, 1).await.unwrap(), Claim::Acquired);
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
        store.claim(&doubted, later, 60_000).await.unwrap(),
        Claim::Acquired
    );
    assert_eq!(
        listed(other.unsettled(later, 100).await.unwrap()),
        [(lapsed, "q2".to_owned())]
    );
}

/// The inbox a page at a time ([`QuestionStore::pending_page`]): one conversation
/// that asked 3000 times does not hide another's one question.
async fn paging(store: &impl Store, other: &impl Store) {
    // Later than everything `asking` left open: only these are open then.
    let at = now_ms() + 10 * 60_000;
    let flood = |i: u64| PendingApproval {
        id: format!("f{i:04}"),
        session: "flood".into(),
        digest: format!("flood-{i}"),
        // Three share each millisecond: the id orders them.
        created_ms: at - 10_000 + i / 3,
        expires_ms: at + 3_600_000,
        ..approval("", 0)
    };
    for i in 0..3000 {
        store.put_approval(&flood(i)).await.unwrap();
    }
    let lone = PendingApproval {
        id: "lone".into(),
        session: "calm".into(),
        tool: "refund".into(),
        created_ms: at - 10_000 + 500,
        expires_ms: at + 3_600_000,
        ..approval("", 0)
    };
    other.put_approval(&lone).await.unwrap();
    // Not open: decided, or expired at `at`.
    let decided = PendingApproval {
        id: "decided".into(),
        session: "calm".into(),
        expires_ms: at + 3_600_000,
        ..approval("", 0)
    };
    store.put_approval(&decided).await.unwrap();
    let yes = decision(true, "ana", now_ms());
    assert_eq!(
        store
            .decide_approval("decided", &yes, now_ms())
            .await
            .unwrap(),
        DecideOutcome::Decided
    );
    store
        .put_approval(&PendingApproval {
            session: "calm".into(),
            ..approval("gone", at)
        })
        .await
        .unwrap();

    let mut expected: Vec<(u64, String)> = (0..3000)
        .map(|i| (flood(i).created_ms, flood(i).id))
        .chain([(lone.created_ms, lone.id.clone())])
        .collect();
    expected.sort();
    let expected: Vec<String> = expected.into_iter().map(|(_, id)| id).collect();

    // Every item exactly once, in order, both ways, with the true count on
    // every page.
    for order in [PendingOrder::OldestFirst, PendingOrder::NewestFirst] {
        let mut seen = Vec::new();
        let mut cursor: Option<PendingCursor> = None;
        let mut pages = 0;
        let mut lone_on = None;
        loop {
            let query = PendingQuery {
                order,
                cursor: cursor.clone(),
                ..PendingQuery::new(at, 100)
            };
            // Pages alternate between the two handles.
            let page = if pages % 2 == 0 {
                store.pending_page(&query).await.unwrap()
            } else {
                other.pending_page(&query).await.unwrap()
            };
            pages += 1;
            assert_eq!(page.total, 3001, "{order:?}, page {pages}");
            assert!(page.items.len() <= 100);
            if page.items.iter().any(|a| a.id == "lone") {
                lone_on = Some(pages);
            }
            seen.extend(page.items.into_iter().map(|a| a.id));
            match page.next {
                Some(next) => cursor = Some(next.parse().expect("a cursor the store made")),
                None => break,
            }
        }
        let mut want = expected.clone();
        if order == PendingOrder::NewestFirst {
            want.reverse();
        }
        assert_eq!(seen.len(), 3001, "{order:?}");
        assert_eq!(seen, want, "{order:?}");
        assert_eq!(pages, 31, "{order:?}");
        assert!(
            lone_on.is_some_and(|page| page > 1),
            "{order:?}: the other conversation's call is on a later page: {lone_on:?}"
        );
    }

    // Filtered: the other conversation's call, by its conversation or its tool.
    for query in [
        PendingQuery {
            session: Some("calm"),
            ..PendingQuery::new(at, 100)
        },
        PendingQuery {
            tool: Some("refund"),
            ..PendingQuery::new(at, 100)
        },
        PendingQuery {
            session: Some("calm"),
            tool: Some("refund"),
            order: PendingOrder::NewestFirst,
            ..PendingQuery::new(at, 100)
        },
    ] {
        let page = other.pending_page(&query).await.unwrap();
        assert_eq!(page.total, 1, "{query:?}");
        assert_eq!(page.items, std::slice::from_ref(&lone), "{query:?}");
        assert_eq!(page.next, None);
    }
    let flooded = store
        .pending_page(&PendingQuery {
            session: Some("flood"),
            order: PendingOrder::NewestFirst,
            ..PendingQuery::new(at, 2)
        })
        .await
        .unwrap();
    assert_eq!(flooded.total, 3000);
    let ids: Vec<&str> = flooded.items.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["f2999", "f2998"]);
    let none = store
        .pending_page(&PendingQuery {
            session: Some("flood"),
            tool: Some("refund"),
            ..PendingQuery::new(at, 100)
        })
        .await
        .unwrap();
    assert_eq!((none.total, none.items.len(), none.next), (0, 0, None));

    // An item decided between two pages leaves the count; the walk goes on.
    let first = store
        .pending_page(&PendingQuery {
            session: Some("flood"),
            ..PendingQuery::new(at, 10)
        })
        .await
        .unwrap();
    assert_eq!(
        other
            .decide_approval("f0010", &yes, now_ms())
            .await
            .unwrap(),
        DecideOutcome::Decided
    );
    let second = store
        .pending_page(&PendingQuery {
            session: Some("flood"),
            cursor: Some(first.next.unwrap().parse().unwrap()),
            ..PendingQuery::new(at, 10)
        })
        .await
        .unwrap();
    assert_eq!(second.total, 2999);
    assert_eq!(second.items[0].id, "f0011");
}

/// One question per call ([`QuestionStore::ask_approval`]) and finding it again
/// ([`QuestionStore::find_approval`]).
async fn asking(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let ask = |id: &str| asked_call(id, "asking", now);
    let created = |answer: AskApproval| assert_eq!(answer, AskApproval::Created);
    let existing = |answer: AskApproval, id: &str| match answer {
        AskApproval::Existing(entry) => {
            assert_eq!(entry.approval.id, id);
            entry
        }
        other => panic!("expected {id} again, got {other:?}"),
    };

    // The same call asked twice: one approval, the first one, whole.
    created(store.ask_approval(&ask("a1"), 5).await.unwrap());
    let first = existing(other.ask_approval(&ask("a2"), 5).await.unwrap(), "a1");
    assert_eq!(first.approval, ask("a1"));
    assert_eq!((first.used_ms, &first.result), (None, &None));
    assert!(other.approval("a2").await.unwrap().is_none(), "not stored");

    // Another caller, tool, digest or reason is another call.
    let variants = [
        PendingApproval {
            caller: "c2".into(),
            ..ask("a3")
        },
        PendingApproval {
            tool: "refund".into(),
            ..ask("a4")
        },
        PendingApproval {
            digest: "d2".into(),
            ..ask("a5")
        },
        PendingApproval {
            reason: Some("untrusted_context".into()),
            tainted: vec!["cents".into()],
            ..ask("a6")
        },
    ];
    for variant in &variants {
        created(other.ask_approval(variant, 5).await.unwrap());
    }
    // Four open in the caller's conversation (the other caller's is a
    // conversation of its own): a fifth call is refused at a bound of four,
    // and not stored; a call already asked is still answered with its
    // approval; another conversation is still asked.
    let sixth = PendingApproval {
        digest: "d3".into(),
        ..ask("a7")
    };
    assert_eq!(
        store.ask_approval(&sixth, 4).await.unwrap(),
        AskApproval::Full { open: 4 }
    );
    // The caller's bound counts its open approvals of every conversation.
    let elsewhere = asked_call("b0", "asking-caller", now);
    assert_eq!(
        store
            .ask_approval(
                &elsewhere,
                OpenBounds {
                    conversation: 5,
                    caller: 4,
                    requester: usize::MAX,
                }
            )
            .await
            .unwrap(),
        AskApproval::CallerFull { open: 4 }
    );
    assert!(store.approval("b0").await.unwrap().is_none());
    assert_eq!(
        store
            .ask_approval(
                &PendingApproval {
                    caller: "c2".into(),
                    ..elsewhere.clone()
                },
                OpenBounds {
                    conversation: 5,
                    caller: 4,
                    requester: usize::MAX,
                }
            )
            .await
            .unwrap(),
        AskApproval::Created,
        "another caller's bound is its own"
    );
    assert!(store.approval("a7").await.unwrap().is_none());
    existing(store.ask_approval(&ask("a8"), 5).await.unwrap(), "a1");
    existing(store.ask_approval(&variants[3], 5).await.unwrap(), "a6");
    created(
        store
            .ask_approval(&asked_call("b1", "asking-other", now), 5)
            .await
            .unwrap(),
    );

    // Decided but unused: still the call's approval, no longer open.
    let yes = decision(true, "ana", now);
    assert_eq!(
        store.decide_approval("a1", &yes, now).await.unwrap(),
        DecideOutcome::Decided
    );
    let decided = existing(other.ask_approval(&ask("a8"), 5).await.unwrap(), "a1");
    assert_eq!(decided.approval.decision, Some(yes.clone()));
    created(store.ask_approval(&sixth, 5).await.unwrap());

    // Used: the call asks anew.
    let bound = Binding {
        session: "asking",
        ..BOUND
    };
    assert!(matches!(
        other.take_approval("a1", &bound, now).await.unwrap(),
        TakeApproval::Taken(_)
    ));
    created(store.ask_approval(&ask("a9"), 6).await.unwrap());
    existing(other.ask_approval(&ask("a10"), 6).await.unwrap(), "a9");

    // Found again: the newest unused, unexpired approval of exactly this
    // call, decided or not.
    let found = |entry: Option<toolcall::store::ApprovalEntry>| entry.map(|e| e.approval.id);
    assert_eq!(
        found(other.find_approval(&bound, None, now).await.unwrap()),
        Some("a9".into())
    );
    assert_eq!(
        found(
            store
                .find_approval(&bound, Some("untrusted_context"), now)
                .await
                .unwrap()
        ),
        Some("a6".into()),
        "by its reason"
    );
    for miss in [
        Binding {
            caller: "c3",
            ..bound
        },
        Binding {
            digest: Some("d9"),
            ..bound
        },
        Binding {
            session: "asking-none",
            ..bound
        },
    ] {
        assert_eq!(
            found(store.find_approval(&miss, None, now).await.unwrap()),
            None
        );
    }
    assert_eq!(
        found(
            store
                .find_approval(&bound, Some("in_doubt"), now)
                .await
                .unwrap()
        ),
        None
    );
    assert_eq!(
        found(
            store
                .find_approval(&bound, None, now + 60_000)
                .await
                .unwrap()
        ),
        None,
        "expired"
    );

    // Expired: the call asks anew (a person can no longer decide the old one).
    let later = now + 60_000;
    created(
        other
            .ask_approval(&asked_call("a11", "asking", later), 1)
            .await
            .unwrap(),
    );
    existing(
        store
            .ask_approval(&asked_call("a12", "asking", later), 1)
            .await
            .unwrap(),
        "a11",
    );
    assert_eq!(
        found(store.find_approval(&bound, None, later).await.unwrap()),
        Some("a11".into())
    );
    // A decided approval past its expiry does not stand in the way either.
    let decided_expired = PendingApproval {
        digest: "d-exp".into(),
        ..asked_call("a13", "asking-exp", now)
    };
    created(store.ask_approval(&decided_expired, 1).await.unwrap());
    assert_eq!(
        store.decide_approval("a13", &yes, now).await.unwrap(),
        DecideOutcome::Decided
    );
    let again = PendingApproval {
        id: "a14".into(),
        created_ms: later,
        expires_ms: later + 60_000,
        ..decided_expired.clone()
    };
    created(other.ask_approval(&again, 1).await.unwrap());
    assert!(
        store.approval("a13").await.unwrap().is_some(),
        "the history keeps it"
    );

    // A long session is one conversation, however long.
    let long_session = noise(9_000, 3);
    created(
        store
            .ask_approval(&asked_call("l1", &long_session, now), 2)
            .await
            .unwrap(),
    );
    existing(
        other
            .ask_approval(&asked_call("l2", &long_session, now), 2)
            .await
            .unwrap(),
        "l1",
    );
    created(
        other
            .ask_approval(&asked_call("l3", &long_session[..8_999], now), 2)
            .await
            .unwrap(),
    );
}

// ------------------------------------------- the operators' controls suite

/// A change of the controls by `by`, as a writer hands it (its version is
/// the store's to set).
fn change(by: &str, summary: &str, at_ms: u64) -> ControlsChange {
    ControlsChange {
        version: 0,
        by: by.to_owned(),
        at_ms,
        summary: summary.to_owned(),
    }
}

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
async fn controls_versions(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    assert_eq!(store.controls(0).await.unwrap(), None, "nothing written");
    assert!(other.controls_history(10).await.unwrap().is_empty());

    // Two writers of the first version: one wins.
    assert!(
        store
            .put_controls(0, r#"{"v":1}"#, &change("ana", "first", now))
            .await
            .unwrap()
    );
    assert!(
        !other
            .put_controls(0, r#"{"v":"lost"}"#, &change("bo", "lost", now))
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
    let (a, b) = tokio::join!(
        store.put_controls(1, r#"{"v":2}"#, &second_a),
        other.put_controls(1, r#"{"v":"2b"}"#, &second_b),
    );
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
            .put_controls(1, "{}", &change("cy", "stale", now + 2))
            .await
            .unwrap()
    );
    assert!(
        other
            .put_controls(2, r#"{"v":3}"#, &change("cy", "third", now + 3))
            .await
            .unwrap()
    );
    assert_eq!(store.controls(2).await.unwrap().unwrap().version, 3);

    let history = store.controls_history(10).await.unwrap();
    let versions: Vec<u64> = history.iter().map(|c| c.version).collect();
    assert_eq!(versions, [3, 2, 1], "newest first, the version set");
    assert_eq!(history[0], change("cy", "third", now + 3).at(3));
    assert_eq!(history[2], change("ana", "first", now).at(1));
    assert_eq!(history[1].by, if a { "ana" } else { "bo" });
    assert_eq!(other.controls_history(2).await.unwrap(), history[..2]);
}

trait At {
    fn at(self, version: u64) -> Self;
}

impl At for ControlsChange {
    fn at(mut self, version: u64) -> Self {
        self.version = version;
        self
    }
}

/// [`ControlStore::take_rate`] counts to the limit in one fixed window, shared by
/// every handle, and refuses after; the next window starts afresh;
/// [`ControlStore::rate_count`] counts nothing.
async fn rate_windows(store: &impl Store, other: &impl Store) {
    let window = 60_000;
    let now = now_ms();
    let start = now - now % window;
    for (i, handle) in [true, false, true].into_iter().enumerate() {
        let taken = if handle {
            store.take_rate("refund", start, window, 3).await
        } else {
            other.take_rate("refund", start, window, 3).await
        };
        assert!(taken.unwrap(), "call {} of 3", i + 1);
    }
    assert!(!other.take_rate("refund", start, window, 3).await.unwrap());
    assert!(!store.take_rate("refund", start, window, 3).await.unwrap());
    assert_eq!(store.rate_count("refund", start).await.unwrap(), 3);
    assert_eq!(other.rate_count("refund", start).await.unwrap(), 3);
    assert_eq!(
        store.rate_count("refund", start).await.unwrap(),
        3,
        "reading counts nothing"
    );
    // A higher limit in the same window counts on from there.
    assert!(store.take_rate("refund", start, window, 4).await.unwrap());
    assert!(!other.take_rate("refund", start, window, 4).await.unwrap());
    assert_eq!(other.rate_count("refund", start).await.unwrap(), 4);

    // The next window starts afresh; the full one stays full.
    let next = start + window;
    assert_eq!(store.rate_count("refund", next).await.unwrap(), 0);
    assert!(other.take_rate("refund", next, window, 3).await.unwrap());
    assert_eq!(store.rate_count("refund", next).await.unwrap(), 1);
    assert!(!store.take_rate("refund", start, window, 3).await.unwrap());

    // Buckets are apart; a limit of 0 counts nothing.
    assert_eq!(store.rate_count("export", start).await.unwrap(), 0);
    assert!(!store.take_rate("export", start, window, 0).await.unwrap());
    assert_eq!(other.rate_count("export", start).await.unwrap(), 0);
    assert!(store.take_rate("export", start, window, 1).await.unwrap());
    assert_eq!(other.rate_count("export", start).await.unwrap(), 1);
    assert_eq!(other.rate_count("refund", start).await.unwrap(), 4);
}

/// [`QuestionStore::sign_approval`]: one signature per person, the `needed`-th
/// decides (`by` the signers in signing order), and nothing after.
async fn signing(store: &impl Store, other: &impl Store) {
    let now = now_ms();
    let yes = decision(true, "whoever", now + 5);
    assert_eq!(
        store
            .sign_approval("nope", "ana", 2, &yes, now)
            .await
            .unwrap(),
        SignOutcome::Invalid
    );
    assert!(store.signatures("nope").await.unwrap().is_empty());

    store
        .put_approval(&approval("m1", now + 60_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .sign_approval("m1", "ana", 2, &yes, now)
            .await
            .unwrap(),
        SignOutcome::Signed { signatures: 1 }
    );
    assert_eq!(
        other
            .sign_approval("m1", "ana", 2, &yes, now + 1)
            .await
            .unwrap(),
        SignOutcome::AlreadySigned
    );
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

    assert_eq!(
        other
            .sign_approval("m1", "bo", 2, &yes, now + 2)
            .await
            .unwrap(),
        SignOutcome::Decided
    );
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
    assert_eq!(
        store
            .sign_approval("m1", "cy", 2, &yes, now + 3)
            .await
            .unwrap(),
        SignOutcome::AlreadyDecided
    );
    assert_eq!(
        other
            .sign_approval("m1", "ana", 2, &yes, now + 3)
            .await
            .unwrap(),
        SignOutcome::AlreadyDecided
    );
    assert_eq!(
        store
            .decide_approval("m1", &decision(false, "dan", now), now)
            .await
            .unwrap(),
        DecideOutcome::AlreadyDecided
    );
    assert_eq!(other.signatures("m1").await.unwrap(), [ana, bo]);
    let history = store.decided_approvals(10).await.unwrap();
    assert!(history.iter().any(|e| e.approval.id == "m1"));

    // Decided by one person, used up, or expired: no signature.
    store
        .put_approval(&approval("m2", now + 60_000))
        .await
        .unwrap();
    store
        .decide_approval("m2", &decision(false, "dan", now), now)
        .await
        .unwrap();
    assert_eq!(
        other
            .sign_approval("m2", "ana", 2, &yes, now)
            .await
            .unwrap(),
        SignOutcome::AlreadyDecided
    );
    store
        .put_approval(&approval("m3", now + 60_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .sign_approval("m3", "ana", 3, &yes, now)
            .await
            .unwrap(),
        SignOutcome::Signed { signatures: 1 }
    );
    assert_eq!(
        store
            .sign_approval("m3", "bo", 3, &yes, now + 60_000)
            .await
            .unwrap(),
        SignOutcome::Expired
    );
    store.put_approval(&approval("m4", now + 10)).await.unwrap();
    assert_eq!(
        other
            .sign_approval("m4", "ana", 2, &yes, now + 10)
            .await
            .unwrap(),
        SignOutcome::Expired
    );
    assert!(store.signatures("m2").await.unwrap().is_empty());
    assert!(store.signatures("m4").await.unwrap().is_empty());
    assert_eq!(store.signatures("m3").await.unwrap().len(), 1);

    // One person needed: the first signature decides.
    store
        .put_approval(&approval("m5", now + 60_000))
        .await
        .unwrap();
    assert_eq!(
        other
            .sign_approval("m5", "eve", 1, &yes, now)
            .await
            .unwrap(),
        SignOutcome::Decided
    );
    let decided = store.approval("m5").await.unwrap().unwrap();
    assert_eq!(decided.approval.decision.unwrap().by, "eve");
    // Used up by its call, it is not signed again.
    assert!(matches!(
        store.take_approval("m5", &BOUND, now).await.unwrap(),
        TakeApproval::Taken(_)
    ));
    assert_eq!(
        other
            .sign_approval("m5", "fay", 2, &yes, now)
            .await
            .unwrap(),
        SignOutcome::AlreadyDecided
    );
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
            .sign_approval("sign-race", "first", 2, &yes, now)
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
                    .sign_approval("sign-race", &signer, 2, &yes, now)
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

/// `len` characters that do not compress: a long id as a host may send it.
fn noise(len: usize, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(
                b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    [(state % 62) as usize],
            )
        })
        .collect()
}

trait WithCreated {
    fn with_created(self, created_ms: u64) -> Self;
}

impl WithCreated for PendingApproval {
    fn with_created(mut self, created_ms: u64) -> Self {
        self.created_ms = created_ms;
        self
    }
}

/// `by`'s `answer` to the question `id`, recorded now as a person's, with
/// no note and no binding.
pub async fn person_answers<St: Store + ?Sized>(
    store: &St,
    id: &str,
    by: &str,
    answer: &toolcall_core::life::Answer<'_>,
) -> Result<toolcall_core::life::Decided, toolcall_core::life::Refusal> {
    let person = toolcall_core::life::Answerer::Person(by);
    toolcall_core::life::decide(store, id, None, &person, answer, "", now_ms()).await
}

/// The Postgres server the store tests run against, from
/// `TOOLCALL_POSTGRES_URL` (CI sets it); without it, `None`, and a loud
/// line on stderr (past the test harness's capture) that Postgres was not
/// tested.
pub fn postgres_url() -> Option<String> {
    toolcall_testkit::run::postgres_url("the Postgres store")
}

/// A schema name of `test`'s own, in this process, now.
pub fn postgres_schema(test: &str) -> String {
    format!(
        "toolcall_test_{test}_{}_{}",
        std::process::id(),
        toolcall::store::now_ms()
    )
}
