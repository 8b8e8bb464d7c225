//! Decisions: a denial or an edit answers every identical call, an approved
//! call keeps its approval when busy or stopped, the look at what came of a
//! call leaves no audit record, and replicas racing on one approved call.

use super::*;

/// The volume the detach tests ask about.
const VOL_7: &str = r#"{"volume": "vol-7"}"#;

/// Detaches vol-7 in conversation `c`.
async fn detach(d: &Dispatcher<Ops>) -> ToolResult {
    in_c(d, "detach_volume", VOL_7, |c| c).await
}

/// The identical call, once nothing holds it back, carries out the
/// decision that was kept: it runs once, is replayed after, and nobody is
/// asked again. `case` names the run in a failure.
async fn detach_carries_out_the_kept_decision(d: &Dispatcher<Ops>, ops: &Ops, case: &str) {
    let ran = detach(d).await;
    assert!(ran.ok, "{case}: {ran:?}");
    assert_eq!(ran.data["detached"], "vol-7", "{case}");
    let again = detach(d).await;
    assert!(again.ok && again.replayed, "{case}: {again:?}");
    assert_eq!(ops.applied("detach_volume"), 1, "{case}");
    assert!(
        open_questions(d.store()).await.is_empty(),
        "{case}: nobody is asked again"
    );
}

/// Asks to detach vol-7, which needs a person: the question's id.
async fn asked_to_detach(d: &Dispatcher<Ops>) -> String {
    let asked = detach(d).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    asked.question_id.unwrap()
}

// ----------------------------------------------------- a decision is final

/// In host mode, after a person's denial, the exact call with `confirmed`
/// was refused once, and the same line sent again ran.
#[tokio::test]
async fn a_denial_answers_every_identical_call_in_every_mode() {
    for approvals in [Approvals::Host, Approvals::Inbox] {
        let ops = Arc::new(Ops::default());
        let d = builder(&ops).approvals(approvals).build().unwrap();
        let args = r#"{"volume": "vol-7"}"#;
        let asked = in_c(&d, "delete_volume", args, |c| c).await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
        let id = asked.question_id.clone().unwrap();
        let denied = d
            .deny(Decision::new(&id, "c").by("ana"), "not this one")
            .await;
        assert_eq!(denied.code, Code::ConfirmationDenied, "{denied:?}");
        for (n, call) in [
            Call::new("delete_volume", args)
                .session("c")
                .confirmed(true),
            Call::new("delete_volume", args)
                .session("c")
                .confirmed(true),
            Call::new("delete_volume", args).session("c"),
            Call::new("delete_volume", args).session("c").approval(&id),
        ]
        .into_iter()
        .enumerate()
        {
            let again = d.execute(call).await;
            assert_eq!(
                again.code,
                Code::ConfirmationDenied,
                "{approvals:?}, call {n}: {again:?}"
            );
            assert!(again.message.contains("not this one"), "{again:?}");
        }
        assert_eq!(ops.attempts("delete_volume"), 0, "{approvals:?}");
        assert!(
            open_questions(d.store()).await.is_empty(),
            "{approvals:?}: the person is not shown the delete again"
        );
    }
}

/// A person's edit stands likewise: the identical call gets the edited
/// call's answer, and nothing runs twice.
#[tokio::test]
async fn an_edit_answers_the_identical_calls_after_it() {
    let ops = Arc::new(Ops::default());
    let d = builder(&ops).approvals(Approvals::Inbox).build().unwrap();
    let args = r#"{"volume": "vol-7"}"#;
    let asked = in_c(&d, "delete_volume", args, |c| c).await;
    let id = asked.question_id.clone().unwrap();
    let edit = json!({"volume": "vol-8"});
    person_answers(d.store(), &id, "ana", &Answer::Edit(&edit))
        .await
        .unwrap();
    let ran = in_c(&d, "delete_volume", args, |c| c).await;
    assert!(ran.ok, "{ran:?}");
    assert_eq!(ran.data["deleted"], "vol-8");
    let again = in_c(&d, "delete_volume", args, |c| c).await;
    assert!(again.ok && again.replayed, "{again:?}");
    assert_eq!(again.data["deleted"], "vol-8");
    assert_eq!(ops.applied("delete_volume"), 1);
}

/// An approved call that found its resource busy ran nothing, yet the
/// decision was spent: the answer `RESOURCE_BUSY` was recorded as what came
/// of it, and a task carrying it out answered that for good (found by the
/// long chaos run: a refund task stuck for 29 minutes). The decision now
/// waits for the resource: the identical call, once it is free, runs it
/// once, and nobody is asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_that_found_its_resource_busy_keeps_its_approval() {
    for approvals in [Approvals::Host, Approvals::Inbox] {
        let ops = Arc::new(Ops::default());
        let d = Arc::new(
            builder(&ops)
                .approvals(approvals)
                .claim_wait(Duration::from_millis(30))
                .build()
                .unwrap(),
        );
        let id = asked_to_detach(&d).await;

        // Another call holds the volume while the decision is carried out.
        ops.holding.store(true, Ordering::SeqCst);
        let holder = {
            let d = Arc::clone(&d);
            tokio::spawn(
                async move { call(&d, "other", "snapshot", json!({"volume": "vol-7"})).await },
            )
        };
        while ops.attempts("snapshot") == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let busy = match approvals {
            Approvals::Host => d.approve(Decision::new(&id, "c").by("ana")).await,
            _ => {
                person_approves(d.store(), &id).await;
                detach(&d).await
            }
        };
        assert_eq!(busy.code, Code::ResourceBusy, "{approvals:?}: {busy:?}");
        assert_eq!(ops.attempts("detach_volume"), 0, "{approvals:?}");
        ops.holding.store(false, Ordering::SeqCst);
        assert!(holder.await.unwrap().ok);

        // The volume is free: the identical call runs what was approved.
        detach_carries_out_the_kept_decision(&d, &ops, &format!("{approvals:?}")).await;
    }
}

/// The same for a decision carried out while the operators stop the tool:
/// the host's `approve` answers `STOPPED` and runs nothing, and the decision
/// is given back, so once the tool is enabled the identical call carries it
/// out and nobody is asked again.
#[tokio::test]
async fn an_approved_call_stopped_by_the_operators_keeps_its_approval() {
    use toolcall_core::controls::{self, Target};
    let ops = Arc::new(Ops::default());
    let d = builder(&ops).build().unwrap();
    let id = asked_to_detach(&d).await;
    person_approves(d.store(), &id).await;

    let tool = || Target::Tool("detach_volume".to_owned());
    controls::stop(d.store(), tool(), "an incident", "oncall")
        .await
        .unwrap();
    let stopped = d.approve(Decision::new(&id, "c").by("ana")).await;
    assert_eq!(stopped.code, Code::Stopped, "{stopped:?}");
    assert_eq!(ops.attempts("detach_volume"), 0);
    controls::resume(d.store(), tool(), "oncall").await.unwrap();

    detach_carries_out_the_kept_decision(&d, &ops, "stopped, then resumed").await;
}

/// A wait on a question whose call ran meanwhile (by the host's
/// `confirmed`), and the host's answer to it, are what came of the call,
/// read by a look at its key: a look the dispatcher takes for itself, so
/// the audit keeps no record of it. It kept a dry run's, as if someone had
/// made one.
#[tokio::test]
async fn the_look_at_what_came_of_a_call_leaves_no_audit_record() {
    let ops = Arc::new(Ops::default());
    let audit = MemoryAudit::new();
    let d = builder(&ops).audit(audit.clone()).build().unwrap();
    let id = asked_to_detach(&d).await;
    let ran = in_c(&d, "detach_volume", VOL_7, |c| c.confirmed(true)).await;
    assert!(ran.ok, "{ran:?}");

    let waited = d
        .wait_for_decision(
            Call::new("detach_volume", VOL_7).session("c"),
            &id,
            toolcall::store::now_ms() + 50,
        )
        .await;
    assert!(waited.ok && waited.replayed, "{waited:?}");
    let approved = d.approve(Decision::new(&id, "c").by("ana")).await;
    assert!(approved.ok && approved.replayed, "{approved:?}");
    assert_eq!(ops.applied("detach_volume"), 1);
    let records = audit.records();
    assert!(
        records.iter().all(|record| !record.dry_run),
        "nobody made a dry run: {records:#?}"
    );
}

// ------------------------------------------------------ replicas that race

/// Two replicas carrying out one approved call: the one that lost answered
/// `CONFIRMATION_INVALID` "Nothing was done" while the other ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_racing_on_one_approved_call_both_answer_what_was_done() {
    let dir = std::env::temp_dir().join(format!("toolcall-life-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    let ops = Arc::new(Ops::default());
    let replica = |ops: &Arc<Ops>| {
        builder(ops)
            .approvals(Approvals::Inbox)
            .store(SqliteStore::open(&path).unwrap())
            .build()
            .unwrap()
    };
    let (one, two) = (Arc::new(replica(&ops)), Arc::new(replica(&ops)));
    // Many rounds, each replica in a task of its own on its own thread: the
    // one that loses the take races the one that runs.
    for round in 0..40u32 {
        let args = format!(r#"{{"volume": "vol-{round}"}}"#);
        let asked = in_c(&one, "delete_volume", args.as_str(), |c| c).await;
        let id = asked.question_id.clone().unwrap();
        person_approves(one.store(), &id).await;
        let carry = |d: &Arc<Dispatcher<Ops, SqliteStore>>| {
            let (d, args, id) = (Arc::clone(d), args.clone(), id.clone());
            tokio::spawn(async move {
                in_c(&d, "delete_volume", args.as_str(), |c| c.approval(&id)).await
            })
        };
        let (a, b) = (carry(&one), carry(&two));
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!(
            ops.applied("delete_volume"),
            round + 1,
            "round {round}: {a:?} {b:?}"
        );
        for answer in [&a, &b] {
            assert!(
                answer.ok || answer.code == Code::CallInProgress,
                "round {round}: each answers the call's state, never that nothing was done: \
                 {answer:?}"
            );
        }
        let later = in_c(&two, "delete_volume", args.as_str(), |c| c.approval(&id)).await;
        assert!(later.ok && later.replayed, "round {round}: {later:?}");
    }
    assert_eq!(ops.applied("delete_volume"), 40);
    let _ = std::fs::remove_dir_all(&dir);
}
