//! The end of a run: the invariants after every step, the calls in doubt,
//! the inbox's sweep, and driving every call to its end.

use super::*;
use toolcall::store::{ApprovalLookup, RecordedOutcome};

/// The invariants, from the ledger and the store.
pub(crate) async fn invariants<St: Store>(system: &System<St>, model: &Model) -> Checked {
    // Each key applied at most once.
    let effects = system.ledger.effects.lock().unwrap().clone();
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for (_, key, _) in &effects {
        *per_key.entry(key).or_default() += 1;
    }
    for (key, n) in &per_key {
        ensure!(*n <= 1, "key {key} applied {n} times: {effects:?}");
    }
    for (identity, known) in &model.known {
        let Some(key) = &known.key else { continue };
        let applied = per_key.get(key.as_str()).copied().unwrap_or(0);
        // Nothing that needed a person ran without an authorized decision.
        if known.needs_person && applied > 0 {
            ensure!(
                known.authorized,
                "{identity:?} needed a person and ran without an authorized approval"
            );
        }
        // An in-doubt question never becomes an approval: nothing runs
        // until a person says it did not happen.
        if known.unknown && !known.rerun_allowed {
            ensure!(
                applied == known.applied_at_unknown || applied <= 1,
                "{identity:?} ran again while in doubt"
            );
        }
        if known.happened {
            ensure!(
                applied <= 1,
                "{identity:?} ran after a person said it happened"
            );
        }
    }
    // Nobody approves, or signs, a call they made (the signatures of the
    // questions the reference knows are its: `questions_held`). A question
    // several people must approve is approved by as many distinct
    // signatures (never by a rule, the host or a client).
    let store = system.stores[0].inner();
    for entry in store
        .decided_approvals(10_000)
        .await
        .map_err(|e| e.to_string())?
    {
        let question = &entry.approval;
        let needed = question.answerers.people_needed();
        let Some(decision) = question.decision.as_ref().filter(|d| d.approved) else {
            continue;
        };
        if question.reason.as_deref() == Some(IN_DOUBT) {
            continue;
        }
        let requester = requester_of(question);
        ensure!(
            !decision.by.split(", ").any(|by| by == requester),
            "{requester} approved the call they made: {question:?}"
        );
        if needed <= 1 {
            continue;
        }
        let signers: BTreeSet<String> = store
            .signatures(&question.id)
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|signature| signature.by)
            .collect();
        ensure!(
            signers.len() >= needed as usize && !signers.contains(requester_of(question)),
            "a question of {} that {needed} people must approve was approved by {:?}, signed by {signers:?}",
            question.tool,
            question.decision.as_ref().map(|decision| &decision.by)
        );
    }
    // Every unknown outcome an answer told of is in the audit.
    let audited: Vec<_> = system
        .audits
        .iter()
        .flat_map(MemoryAudit::records)
        .filter(|r| r.in_doubt && !r.dry_run)
        .collect();
    for known in model.known.values() {
        if known.doubt_answers > 0 {
            ensure!(
                !audited.is_empty(),
                "an answer said in doubt, and no audit record does"
            );
        }
    }
    Ok(())
}

/// What replica 0's store recorded of the outcome of the call `identity`;
/// `None` as well when the store could not say.
async fn recorded_outcome<St: Store>(
    system: &System<St>,
    identity: Identity,
) -> Option<RecordedOutcome> {
    let (caller, conversation, tool, arg) = identity;
    let recorded = system.replicas[0]
        .recorded(
            SIDE_EFFECTS[tool],
            &json!({ "arg": arg }),
            CONVERSATIONS[conversation],
            &system.callers[caller],
        )
        .await;
    recorded.ok().flatten()
}

/// After the inbox's sweep: every unknown outcome of a backend that only a
/// person can settle has a question, open or decided.
/// The calls of a backend only a person can settle whose outcome is
/// unknown in the store now.
pub(crate) async fn in_doubt<St: Store>(system: &System<St>, model: &Model) -> Vec<Identity> {
    let mut doubted = Vec::new();
    for &identity in model.known.keys() {
        if !matches!(SIDE_EFFECTS[identity.2], "page" | "wipe") {
            continue;
        }
        if let Some(RecordedOutcome::InDoubt) = recorded_outcome(system, identity).await {
            doubted.push(identity);
        }
    }
    doubted
}

/// After the inbox's sweep: every unknown outcome of `doubted` is settled
/// (a person had said it happened) or has a question, open or decided and
/// not carried out yet.
pub(crate) async fn sweep_checks<St: Store>(system: &System<St>, doubted: &[Identity]) -> Checked {
    let store = system.stores[0].inner();
    for &identity in doubted {
        let (caller, conversation, tool, arg) = identity;
        if let Some(RecordedOutcome::Completed(_)) = recorded_outcome(system, identity).await {
            continue;
        }
        let digest = toolcall_core::canonical::digest(&json!({ "arg": arg }));
        let binding = Binding {
            session: CONVERSATIONS[conversation],
            caller: CALLERS[caller],
            tool: Some(SIDE_EFFECTS[tool]),
            digest: Some(&digest),
            requester: toolcall::store::Requester::Anyone,
        };
        let asked = store
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason: Some(IN_DOUBT),
                now_ms: now_ms(),
            })
            .await
            .map_err(|e| e.to_string())?;
        ensure!(
            asked.is_some_and(|entry| entry.used_ms.is_none()),
            "an unknown outcome ({caller}, {conversation}, {tool}, {arg}) is not in the inbox"
        );
    }
    Ok(())
}

/// Drives every call to its end: the sweep, a person settling every
/// question truthfully (from the ledger) and approving every approval
/// question not denied, then every call once more; then each call's key is
/// applied exactly once, unless it was denied (or, needing a person, never
/// approved).
pub(crate) async fn drive_to_the_end<St: Store>(
    system: &System<St>,
    model: &mut Model,
    case: &Case,
) -> Checked {
    tokio::time::sleep(Duration::from_millis(60)).await;
    let d = &system.replicas[0];
    // The operators enable what they stopped and lift their policy: after
    // that, everything goes on as before.
    for what in std::mem::take(&mut model.stopped) {
        controls::resume(&*system.stores[0], what.target(), "ops")
            .await
            .map_err(|e| format!("enabling {what:?}: {e}"))?;
    }
    if !defect("stale") {
        read_the_controls(system).await;
    }
    if model.rules != Rules::Lift {
        load(system, 0, Rules::Lift).await?;
        model.rules = Rules::Lift;
    }
    // The calls below are the callers' own, no principal behind them.
    let at_start: BTreeMap<Identity, usize> = model
        .known
        .iter()
        .map(|(identity, known)| {
            let applied = known.key.as_deref().map_or(0, |k| system.ledger.applied(k));
            (*identity, applied)
        })
        .collect();
    for round in 0..4 {
        d.surface_unknown_outcomes()
            .await
            .map_err(|e| e.to_string())?;
        let open = d
            .store()
            .pending_page(&PendingQuery::new(now_ms(), 1_000))
            .await
            .map_err(|e| e.to_string())?
            .items;
        for question in open {
            let identity = model
                .known
                .keys()
                .find(|(c, v, t, a)| {
                    CALLERS[*c] == question.caller
                        && CONVERSATIONS[*v] == question.session
                        && SIDE_EFFECTS[*t] == question.tool
                        && question.arguments["arg"] == *a
                })
                .copied();
            let happened = identity
                .and_then(|identity| model.known[&identity].key.clone())
                .is_some_and(|key| system.ledger.applied(&key) > 0);
            let answer = match (question.kind(), happened) {
                (toolcall_core::life::QuestionKind::InDoubt, true) => Answer::Happened,
                (toolcall_core::life::QuestionKind::InDoubt, false) => Answer::NotHappened,
                _ => Answer::Approve,
            };
            // A question two people must approve: two of ana, bo and cy,
            // never who made the call.
            let mut decided = Err(Refusal::Unknown);
            let requester = requester_of(&question).to_owned();
            for by in PEOPLE.into_iter().filter(|by| *by != requester) {
                decided = toolcall_core::life::decide(
                    d.store(),
                    &question.id,
                    None,
                    &Answerer::Person(by),
                    &answer,
                    "",
                    now_ms(),
                )
                .await;
                if !matches!(decided, Ok(Decided::Signed { .. })) {
                    break;
                }
            }
            if matches!(decided, Ok(Decided::Recorded | Decided::Again))
                && let Some(identity) = model.known.keys().copied().find(|(c, v, t, a)| {
                    CALLERS[*c] == question.caller
                        && CONVERSATIONS[*v] == question.session
                        && SIDE_EFFECTS[*t] == question.tool
                        && question.arguments["arg"] == *a
                })
            {
                let known = model.known.get_mut(&identity).unwrap();
                let said = match answer {
                    Answer::Approve => {
                        known.authorized = true;
                        known.decided = true;
                        Said::Approve
                    }
                    Answer::NotHappened => {
                        known.authorized = true;
                        known.rerun_allowed = true;
                        Said::NotHappened
                    }
                    _ => {
                        known.happened = true;
                        Said::Happened
                    }
                };
                let v = model.v;
                if let Some(q) = model.question_mut(&question.id) {
                    q.decision.get_or_insert((said, v));
                }
            }
        }
        let identities: Vec<Identity> = model.known.keys().copied().collect();
        for identity in identities {
            let (caller, conversation, tool, arg) = identity;
            let before = model.known[&identity]
                .key
                .as_deref()
                .map_or(0, |key| system.ledger.applied(key));
            let answer = d
                .execute(
                    Call::new(
                        SIDE_EFFECTS[tool],
                        json!({ "arg": arg }).to_string().as_str(),
                    )
                    .session(CONVERSATIONS[conversation])
                    .caller(&system.callers[caller]),
                )
                .await;
            let calling = Calling::new(identity, None, 0, How::Plain);
            observe(system, model, case, &calling, &answer, before).await?;
        }
        invariants(system, model).await?;
        let _ = round;
    }
    // Exactly once, unless a person decided otherwise.
    for (identity, known) in &model.known {
        let Some(key) = &known.key else {
            // Never reached its handler: refused before (a denial, a
            // question nobody could approve).
            continue;
        };
        let applied = system.ledger.applied(key);
        if model.denial(*identity, None).is_some() {
            ensure!(
                applied == at_start.get(identity).copied().unwrap_or(0),
                "{identity:?} ran after its denial"
            );
        } else if !known.needs_person || known.authorized {
            ensure!(
                applied == 1,
                "{identity:?} applied {applied} times in the end: {known:?}"
            );
        }
    }
    Ok(())
}
