//! Making the model's calls: a call as the agent makes it, with the id it
//! brings back, held to what the model expects, and the resources it holds.

use super::*;
use toolcall::store::LockAsk;

/// A call of an operation: the operators' controls, the call, its checks,
/// and what its answer tells the model.
pub(crate) async fn make_call<St: Store>(
    system: &System<St>,
    model: &mut Model,
    case: &Case,
    calling: &Calling,
) -> Checked {
    let Calling {
        identity,
        principal,
        replica,
        how,
        fault,
        ..
    } = *calling;
    let (caller, conversation, tool, arg) = identity;
    model.calls.push((identity, principal));
    let id = brought_id(model, identity, principal, how);
    if let Some(checked) = controlled_call(system, model, calling, id.as_deref()).await {
        return checked;
    }
    let tainted_now = model
        .tainted
        .contains(&model.taint_scope(case.share, caller, conversation));
    // The operators' rule approves a question several people must
    // approve: a known defect (tests/controls_regressions.rs), left
    // out unless asked for.
    if !defect("rule")
        && model.rules == Rules::Limits
        && tool == WIPE
        && arg == 0
        && !tainted_now
        && id.is_none()
        && how != How::DryRun
        && open_question_of_people(system, model, identity, replica).await
    {
        AVOIDED.fetch_add(1, Ordering::Relaxed);
        return Ok(());
    }
    let first = !model.known.contains_key(&identity);
    let known = model.known.entry(identity).or_default();
    if first {
        known.needs_person = SIDE_EFFECTS[tool] == "wipe" || tainted_now;
        // The documented key: what the backend sees.
        known.key = Some(toolcall_core::canonical::idempotency_key(
            CALLERS[caller],
            CONVERSATIONS[conversation],
            SIDE_EFFECTS[tool],
            &json!({ "arg": arg }),
        ));
    }
    let host_mode = system.replicas[replica].settings().approvals == Approvals::Host;
    // In host mode, the host's confirmation is an authorized approval
    // of a call that brings no id, when one person is enough.
    let one_person = model.rules.people(tool) <= 1
        && !open_question_of_people(system, model, identity, replica).await;
    let known = model.known.get_mut(&identity).unwrap();
    if how == How::Confirmed && host_mode && one_person {
        known.authorized = true;
    }
    let before = known.key.as_deref().map_or(0, |k| system.ledger.applied(k));
    let unknown = known.unknown;
    // In host mode, the host bringing the id of an open question
    // that lets the host answer is the host's approval.
    if how == How::WithId
        && host_mode
        && let Some(q) = id.as_deref().and_then(|id| model.question(id))
        && q.host
        && q.class(model.v) == Class::Open
        && model.rules.people(tool) <= 1
    {
        model.known.get_mut(&identity).unwrap().authorized = true;
    }
    // A rule of the operators' controls approves a wipe of disk 0
    // without a person: a call that brings no id (and no host's
    // confirmation that stands), untainted, one person enough.
    let plain = how == How::Plain || (matches!(how, How::WithId | How::OthersId) && id.is_none());
    let rule_applies = model.rules == Rules::Limits
        && tool == WIPE
        && arg == 0
        && !tainted_now
        && (plain || (how == How::Confirmed && !host_mode));
    // What the call may do to the questions: carry out its requester's
    // (and any about its unknown outcome), take the host's id undecided in
    // host mode, and the rule may approve its open one.
    let reason = tainted_now.then_some("untrusted_context");
    for q in &model.questions {
        if q.identity == identity && (q.requester == principal || q.in_doubt) {
            model.leeway.take.insert(q.id.clone());
            if rule_applies && !q.in_doubt {
                model.leeway.decide.insert(q.id.clone(), Said::Approve);
            }
        }
    }
    if host_mode
        && how == How::WithId
        && let Some(id) = &id
    {
        model.leeway.take_undecided.insert(id.clone());
    }
    let needs_person = tool == WIPE || tainted_now;
    let in_doubt = model
        .questions
        .iter()
        .any(|q| q.identity == identity && q.in_doubt);
    let expect = (fault == Fault::None
        && how != How::DryRun
        && needs_person
        && !rule_applies
        && before == 0
        && !unknown
        && !in_doubt
        && model.seen(identity, principal))
    .then(|| expect_call(model, calling, host_mode, reason, id.as_deref()))
    .flatten();
    let was_there = match &expect {
        Some(Expect::Expired(id)) => system.stores[0]
            .inner()
            .approval(id)
            .await
            .map_err(|e| e.to_string())?
            .is_some(),
        _ => true,
    };
    if matches!(fault, Fault::Store(..)) || rule_applies {
        model.unseen.insert((identity, principal));
    }
    let answer = call(system, calling, id.as_deref()).await;
    if let Some(counted) = model.recount.take() {
        let count = pages_counted(system, counted).await?;
        let before = model.pages[counted];
        ensure!(
            count == before || count == before + 1,
            "one page counted {count} from {before}"
        );
        model.pages[counted] = count;
    }
    let ruled = tool == WIPE && rule_decided(system, identity).await?;
    let known = model.known.get_mut(&identity).unwrap();
    if ruled && !known.ruled {
        ensure!(
            rule_applies,
            "the rule approved a call it does not cover ({:?})",
            model.rules
        );
        known.ruled = true;
        known.decided = true;
        known.authorized = true;
        RULE_APPROVALS.fetch_add(1, Ordering::Relaxed);
    }
    let Some(answer) = answer else {
        // Crashed: the effect may have happened; the outcome is
        // unknown unless the crash came before any claim.
        if let Some(key) = &known.key {
            let now = system.ledger.applied(key);
            if now > before || matches!(fault, Fault::CrashAfterClaim | Fault::CrashBeforeComplete)
            {
                if !known.unknown {
                    known.applied_at_unknown = before;
                }
                known.unknown = true;
                known.rerun_allowed = false;
            }
        }
        return Ok(());
    };
    ensure!(
        !matches!(answer.code, Code::Stopped | Code::RateLimited),
        "a call nothing stops or limits answered {}: {answer:?}",
        answer.code.as_str()
    );
    if matches!(answer.code, Code::ResourceBusy | Code::Stopped) {
        model.leeway.give_back = true;
    }
    let ran = known.key.as_deref().map_or(0, |k| system.ledger.applied(k)) - before;
    // Nothing runs while another process holds the call's resource.
    let held = fault == (Fault::Busy { released: false });
    if held && RESOURCES[tool].is_some() {
        ensure!(
            ran == 0,
            "ran while another process held its resource: {answer:?}"
        );
    }
    // Held for a moment (`released`), the call may still have
    // waited longer than `claim_wait` on a busy machine.
    if answer.code == Code::ResourceBusy {
        ensure!(
            matches!(fault, Fault::Busy { .. }),
            "RESOURCE_BUSY with the resource free: {answer:?}"
        );
        BUSY_ANSWERS.fetch_add(1, Ordering::Relaxed);
    }
    if rule_applies
        && plain
        && fault == Fault::None
        && model.denial(identity, principal).is_none()
        && !unknown
        && before == 0
        && one_person
    {
        ensure!(
            answer.code == Code::Ok,
            "the rule's call did not run: {answer:?}"
        );
    }
    if how != How::DryRun {
        said_of_a_call_that_ran(&answer, before)?;
    }
    if let Some(expect) = &expect {
        check_expected(model, expect, &answer, ran, was_there)?;
        if how == How::OthersId {
            OTHERS_IDS_REFUSED.fetch_add(1, Ordering::Relaxed);
        }
    }
    observe(system, model, case, calling, &answer, before).await
}

/// One call an operation makes: which, by whom, through which replica,
/// how, meeting what.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Calling {
    pub(crate) identity: Identity,
    pub(crate) principal: Option<usize>,
    pub(crate) replica: usize,
    pub(crate) how: How,
    pub(crate) fault: Fault,
    pub(crate) client_answers: bool,
}

impl Calling {
    /// `identity`'s call by `principal` through `replica`, made `how`, with
    /// no fault and no client to answer: the calls the model makes itself.
    pub(crate) fn new(
        identity: Identity,
        principal: Option<usize>,
        replica: usize,
        how: How,
    ) -> Self {
        Calling {
            identity,
            principal,
            replica,
            how,
            fault: Fault::None,
            client_answers: false,
        }
    }
}

/// The id a call brings, as `how` says: its own newest question's, or
/// another requester's.
pub(crate) fn brought_id(
    model: &Model,
    identity: Identity,
    principal: Option<usize>,
    how: How,
) -> Option<String> {
    match how {
        How::WithId => model.newest_question(identity, principal, false),
        How::OthersId => model.newest_question(identity, principal, true),
        _ => None,
    }
    .map(|q| q.id.clone())
}

/// Makes the call (with the question id `id`, if any); `None` when the
/// process crashed.
pub(crate) async fn call<St: Store>(
    system: &System<St>,
    calling: &Calling,
    id: Option<&str>,
) -> Option<ToolResult> {
    let Calling {
        identity: (caller, conversation, tool, arg),
        principal,
        replica,
        how,
        fault,
        client_answers,
    } = *calling;
    let ledger = &system.ledger;
    let mut held = None;
    match fault {
        Fault::LoseAnswer => ledger.lose_after.store(1, Ordering::SeqCst),
        Fault::FailBefore => ledger.fail_before.store(1, Ordering::SeqCst),
        Fault::ReconcileDown => ledger.reconcile_down.store(1, Ordering::SeqCst),
        Fault::CrashAfterClaim => ARMED.store(1, Ordering::SeqCst),
        Fault::CrashBeforeComplete => ARMED.store(2, Ordering::SeqCst),
        Fault::Store(outage, method) => system.stores[replica].fail(outage, Some(method), 1),
        Fault::Busy { released } => {
            if let Some(resource) = resource_of(tool, arg) {
                let (resource, holder) = hold(&system.stores[replica], resource).await;
                held = Some((resource, holder.clone()));
                let store = Arc::clone(&system.stores[replica]);
                if released {
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        store.inner().unlock_resource(&resource, &holder).await
                    });
                }
            }
        }
        Fault::None => {}
    }
    let d = Arc::clone(&system.replicas[replica]);
    let caller = system.caller(caller, principal).clone();
    let id = id.map(str::to_owned);
    let tool = SIDE_EFFECTS[tool];
    let arguments = json!({ "arg": arg }).to_string();
    let session = CONVERSATIONS[conversation];
    let running = tokio::spawn(async move {
        let mut call = Call::new(tool, arguments.as_str())
            .session(session)
            .caller(&caller)
            .client_answers(client_answers);
        match (how, id.as_deref()) {
            (How::Confirmed, _) => call = call.confirmed(true),
            (How::WithId | How::OthersId, Some(id)) => call = call.approval(id),
            (How::DryRun, _) => call = call.dry_run(true),
            _ => {}
        }
        d.execute(call).await
    });
    let answer = running.await;
    // The other process is done with the resource.
    if let Some((resource, holder)) = held {
        let freed = system.stores[replica]
            .inner()
            .unlock_resource(&resource, &holder)
            .await;
        assert!(freed.is_ok(), "{freed:?}");
    }
    // Whatever was armed and not reached is disarmed.
    ARMED.store(0, Ordering::SeqCst);
    ledger.lose_after.store(0, Ordering::SeqCst);
    ledger.fail_before.store(0, Ordering::SeqCst);
    ledger.reconcile_down.store(0, Ordering::SeqCst);
    system.stores[replica].heal();
    if let Fault::Store(..) = fault {
        OUTAGES.fetch_add(1, Ordering::Relaxed);
    }
    match answer {
        Ok(answer) => Some(answer),
        Err(crashed) if crashed.is_panic() => {
            CRASHES.fetch_add(1, Ordering::Relaxed);
            None
        }
        Err(error) => panic!("the call's task failed: {error}"),
    }
}

/// How many pages the store counted of `caller` in the rate limit's window.
pub(crate) async fn pages_counted<St: Store>(
    system: &System<St>,
    caller: usize,
) -> Result<u64, String> {
    let window: u64 = 366 * 24 * 60 * 60 * 1000;
    let now = now_ms();
    let bucket = format!("pages\u{1f}{}", CALLERS[caller]);
    system.stores[0]
        .inner()
        .rate_count(&bucket, now - now % window)
        .await
        .map_err(|e| e.to_string())
}

/// Takes `resource`'s lock as another process would for a call of its own
/// (waiting for a lock a call left, a crashed one's until its lease runs
/// out), under a holder of its own, so that a release meant for one call's
/// lock never frees another's.
pub(crate) async fn hold<St: Store>(
    store: &Arc<Faulty<St>>,
    resource: toolcall::store::Key,
) -> (toolcall::store::Key, String) {
    static N: AtomicU32 = AtomicU32::new(0);
    let holder = format!("another-process-{}", N.fetch_add(1, Ordering::Relaxed));
    let mut tries = 0;
    while !store
        .inner()
        .lock_resource(
            &LockAsk {
                resource: &resource,
                holder: &holder,
                lease_ms: 60_000,
            },
            now_ms(),
        )
        .await
        .unwrap()
    {
        tries += 1;
        assert!(tries < 200, "a resource lock outlived its lease");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (resource, holder)
}

/// The lock key of the resource a call of `tool` (of [`SIDE_EFFECTS`])
/// with `arg` names, as the pipeline derives it (`#[arg(resource)]`).
pub(crate) fn resource_of(tool: usize, arg: i64) -> Option<toolcall::store::Key> {
    let kind = RESOURCES[tool]?;
    let form = toolcall_core::canonical::canonical_json(&json!(["resource", kind, arg]));
    Some(toolcall::store::Key::sha256(form))
}
