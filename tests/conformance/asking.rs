//! The suite's inbox: one question per call, and the inbox a page at a
//! time.

use super::*;

/// The inbox a page at a time ([`QuestionStore::pending_page`]): one conversation
/// that asked 3000 times does not hide another's one question.
pub(crate) async fn paging(store: &impl Store, other: &impl Store) {
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
        put(store, &flood(i)).await;
    }
    let lone = PendingApproval {
        id: "lone".into(),
        session: "calm".into(),
        tool: "refund".into(),
        created_ms: at - 10_000 + 500,
        expires_ms: at + 3_600_000,
        ..approval("", 0)
    };
    put(other, &lone).await;
    // Not open: decided, or expired at `at`.
    let decided = PendingApproval {
        id: "decided".into(),
        session: "calm".into(),
        expires_ms: at + 3_600_000,
        ..approval("", 0)
    };
    put(store, &decided).await;
    let yes = decision(true, "ana", now_ms());
    let yes_on = deciding(&yes);
    assert_eq!(
        decides(store, &yes_on("decided", now_ms())).await,
        DecideOutcome::Decided
    );
    put(
        store,
        &PendingApproval {
            session: "calm".into(),
            ..approval("gone", at)
        },
    )
    .await;

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
        decides(other, &yes_on("f0010", now_ms())).await,
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
pub(crate) async fn asking(store: &impl Store, other: &impl Store) {
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
    let caller_four = OpenBounds {
        conversation: 5,
        caller: 4,
        requester: usize::MAX,
    };
    let elsewhere = asked_call("b0", "asking-caller", now);
    assert_eq!(
        store.ask_approval(&elsewhere, caller_four).await.unwrap(),
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
                caller_four
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
    let yes_on = deciding(&yes);
    assert_eq!(
        decides(store, &yes_on("a1", now)).await,
        DecideOutcome::Decided
    );
    let decided = existing(other.ask_approval(&ask("a8"), 5).await.unwrap(), "a1");
    assert_eq!(decided.approval.decision, Some(yes.clone()));
    created(store.ask_approval(&sixth, 5).await.unwrap());

    // Used: the call asks anew.
    let bound = bound_in("asking");
    let a1 = using("a1", &bound, now);
    assert!(matches!(takes(other, &a1).await, TakeApproval::Taken(_)));
    created(store.ask_approval(&ask("a9"), 6).await.unwrap());
    existing(other.ask_approval(&ask("a10"), 6).await.unwrap(), "a9");

    // Found again: the newest unused, unexpired approval of exactly this
    // call, decided or not.
    let found = |entry: Option<toolcall::store::ApprovalEntry>| entry.map(|e| e.approval.id);
    let lookup = ApprovalLookup {
        binding: &bound,
        reason: None,
        now_ms: now,
    };
    let by_reason = |reason| ApprovalLookup {
        reason: Some(reason),
        ..lookup
    };
    let at = |now_ms| ApprovalLookup { now_ms, ..lookup };
    assert_eq!(
        found(other.find_approval(&lookup).await.unwrap()),
        Some("a9".into())
    );
    assert_eq!(
        found(
            store
                .find_approval(&by_reason("untrusted_context"))
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
        let missed = ApprovalLookup {
            binding: &miss,
            ..lookup
        };
        assert_eq!(found(store.find_approval(&missed).await.unwrap()), None);
    }
    assert_eq!(
        found(store.find_approval(&by_reason("in_doubt")).await.unwrap()),
        None
    );
    assert_eq!(
        found(store.find_approval(&at(now + 60_000)).await.unwrap()),
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
        found(store.find_approval(&at(later)).await.unwrap()),
        Some("a11".into())
    );
    // A decided approval past its expiry does not stand in the way either.
    let decided_expired = PendingApproval {
        digest: "d-exp".into(),
        ..asked_call("a13", "asking-exp", now)
    };
    created(store.ask_approval(&decided_expired, 1).await.unwrap());
    assert_eq!(
        decides(store, &yes_on("a13", now)).await,
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
