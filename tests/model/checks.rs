//! The checks: each operation run against the system and held to the model.

use super::*;

pub(crate) async fn run_case<St: Store>(case: &Case, stores: [St; 2]) -> Checked {
    // The test's clock, from the wall clock, for this case alone.
    clock::reset();
    let system = System::new(case, stores);
    let mut model = Model {
        base_ms: now_ms(),
        ..Model::default()
    };
    if case.rules != Rules::Lift {
        load(&system, 0, case.rules).await?;
        model.rules = case.rules;
    }
    model.signing = case.rules == Rules::TwoPeople;
    for (at, op) in case.ops.iter().enumerate() {
        OPS.fetch_add(1, Ordering::Relaxed);
        let effects = system.ledger.effects.lock().unwrap().len();
        let stopped = model.stopped.clone();
        let rules = model.rules;
        let reruns: BTreeSet<Identity> = model
            .known
            .iter()
            .filter(|(_, known)| known.rerun_allowed)
            .map(|(identity, _)| *identity)
            .collect();
        let denied = denied_before(&system, &model, op);
        model.leeway = Leeway::default();
        step(&system, &mut model, case, op)
            .await
            .map_err(|why| format!("operation {at} ({op:?}): {why}"))?;
        controls_held(&system, &model, effects, &stopped, rules, &reruns)
            .map_err(|why| format!("operation {at} ({op:?}): {why}"))?;
        if let Some((identity, key)) = denied {
            ensure!(
                system.ledger.applied(&key) == 0,
                "operation {at} ({op:?}) ran {identity:?} for a requester whose denial of it \
                 stands"
            );
        }
        questions_held(&system, &mut model)
            .await
            .map_err(|why| format!("after operation {at} ({op:?}): {why}"))?;
        // The reference reads times in whole steps of the test's clock.
        let wall = now_ms().saturating_sub(model.base_ms + model.v);
        ensure!(
            wall < reference::STEP_MS,
            "the case took {wall} ms of the wall clock, a step of the test's clock or more"
        );
        invariants(&system, &model)
            .await
            .map_err(|why| format!("after operation {at} ({op:?}): {why}"))?;
    }
    let end = drive_to_the_end(&system, &mut model, case)
        .await
        .map_err(|why| format!("at the end: {why}"));
    clock::reset();
    end
}

/// The question an [`Op::WaitFor`] waits for: when something is decided
/// first, an open one if any; the newest of its call and requester.
pub(crate) fn waited(model: &Model, question: usize, first: First) -> Option<Question> {
    let open: Vec<&Question> = model
        .questions
        .iter()
        .filter(|q| q.class(model.v) == Class::Open)
        .collect();
    let q = match first {
        First::Nothing => picked(model, question)?,
        _ if open.is_empty() => picked(model, question)?,
        _ => open[open.len() - 1 - question % open.len()].clone(),
    };
    Some(
        model
            .newest_question(q.identity, q.requester, false)
            .cloned()
            .unwrap_or(q),
    )
}

/// The call an [`Op::Again`] makes again, and by whom.
pub(crate) fn again(model: &Model, back: usize, other: bool) -> Option<(Identity, Option<usize>)> {
    let len = model.calls.len();
    let (identity, principal) = *model.calls.get(len.checked_sub(1 + back % len.max(1))?)?;
    let principal = match (other, principal) {
        (false, principal) => principal,
        (true, None) => Some(0),
        (true, Some(0)) => Some(1),
        (true, Some(_)) => None,
    };
    Some((identity, principal))
}

/// The question an [`Op::Answer`] or an [`Op::WaitFor`] picks: half of
/// them the newest (a second signature, a person answering what was just
/// asked), the others any.
pub(crate) fn picked(model: &Model, question: usize) -> Option<Question> {
    let len = model.questions.len();
    if len == 0 {
        return None;
    }
    let at = if question < 4 {
        len - 1
    } else {
        question % len
    };
    Some(model.questions[at].clone())
}

/// The call `op` acts for and its key, when its requester's denial of it
/// stands and nothing of it ran yet: the operation must run nothing of it
/// (a denial is final for its period, whatever question is carried out).
pub(crate) fn denied_before<St: Store>(
    system: &System<St>,
    model: &Model,
    op: &Op,
) -> Option<(Identity, String)> {
    let (identity, requester) = match *op {
        Op::Call {
            caller,
            principal,
            conversation,
            tool,
            arg,
            how,
            ..
        } if how != How::DryRun => ((caller, conversation, tool, arg), principal),
        Op::Again {
            back, other, how, ..
        } if how != How::DryRun => again(model, back, other)?,
        Op::Answer { question, .. } => {
            let q = picked(model, question)?;
            (q.identity, q.requester)
        }
        Op::WaitFor {
            question, first, ..
        } => {
            let q = waited(model, question, first)?;
            (q.identity, q.requester)
        }
        _ => return None,
    };
    let key = model.known.get(&identity)?.key.clone()?;
    (model.denial(identity, requester).is_some() && system.ledger.applied(&key) == 0)
        .then_some((identity, key))
}

/// The store's reading of every question the reference knows, against
/// the table's at the test's clock (and the signatures given), taking on
/// what the operation was allowed to change.
pub(crate) async fn questions_held<St: Store>(system: &System<St>, model: &mut Model) -> Checked {
    let store = system.stores[0].inner();
    let now = now_ms();
    let v = model.v;
    let leeway = std::mem::take(&mut model.leeway);
    // Only a question two people must sign is signed: one asked of two, or
    // one the controls asked two for in this case.
    let signing = model.signing;
    for at in 0..model.questions.len() {
        if model.questions[at].gone {
            continue;
        }
        let id = model.questions[at].id.clone();
        let entry = store.approval(&id).await.map_err(|e| e.to_string())?;
        let class = reference::class_of(entry.as_ref(), now)?;
        reference::reconcile(&mut model.questions[at], class, v, &leeway)?;
        if entry.is_some() && (signing || model.questions[at].needed > 1) {
            let signed: Vec<String> = store
                .signatures(&id)
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|signature| signature.by)
                .collect();
            let q = &model.questions[at];
            ensure!(
                signed == q.signed,
                "the question {id} was signed by {signed:?}; the reference says {:?}",
                q.signed
            );
        }
        let q = &mut model.questions[at];
        let met = q.times(v);
        if met & !q.met != 0 {
            q.met |= met;
            TIMES_MET[met.trailing_zeros() as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// What ran during one operation, against the operators' controls as
/// they stood: nothing of a stopped tool or caller ran; a wipe that ran
/// while two people were needed had its approval recorded in the store (by
/// every signature it needed, or before the policy asked for two), or was a
/// run a person allowed after an unknown outcome.
pub(crate) fn controls_held<St: Store>(
    system: &System<St>,
    model: &Model,
    effects: usize,
    stopped: &BTreeSet<Stopped>,
    rules: Rules,
    reruns: &BTreeSet<Identity>,
) -> Checked {
    let ran = system.ledger.effects.lock().unwrap()[effects..].to_vec();
    for (tool, key, caller) in ran {
        let t = TOOLS.iter().position(|name| *name == tool).unwrap();
        let c = CALLERS.iter().position(|id| *id == caller).unwrap();
        ensure!(
            !stopped.contains(&Stopped::Tool(t)) && !stopped.contains(&Stopped::Caller(c)),
            "{tool} ran for {caller} while stopped ({stopped:?})"
        );
        if rules.people(t) > 1 {
            let known = model
                .known
                .iter()
                .find(|(_, known)| known.key.as_deref() == Some(key.as_str()));
            ensure!(
                known.is_some_and(|(identity, known)| known.decided
                    || known.rerun_allowed
                    || reruns.contains(identity)),
                "{tool} ran for {caller} without the approval of two people: {known:?}"
            );
        }
    }
    Ok(())
}

/// Whether the store holds an approval of this exact call that the
/// operators' rule decided.
pub(crate) async fn rule_decided<St: Store>(
    system: &System<St>,
    (caller, conversation, tool, arg): Identity,
) -> Result<bool, String> {
    let decided = system.stores[0]
        .inner()
        .decided_approvals(10_000)
        .await
        .map_err(|e| e.to_string())?;
    Ok(decided.iter().any(|entry| {
        let question = &entry.approval;
        question.caller == CALLERS[caller]
            && question.session == CONVERSATIONS[conversation]
            && question.tool == SIDE_EFFECTS[tool]
            && question.arguments["arg"] == arg
            && question
                .decision
                .as_ref()
                .is_some_and(|decision| decision.by == format!("rule:{RULE}"))
    }))
}

/// Whether a question of this exact call that several people must approve
/// is open.
pub(crate) async fn open_question_of_people<St: Store>(
    system: &System<St>,
    model: &Model,
    identity: Identity,
    replica: usize,
) -> bool {
    for question in model.questions.iter().filter(|q| q.identity == identity) {
        if let Ok(Some(entry)) = system.stores[replica].inner().approval(&question.id).await
            && entry.is_open(now_ms())
            && entry.approval.answerers.people_needed() > 1
        {
            return true;
        }
    }
    false
}

/// A call the operators' controls answer before anything is counted: a
/// stop (`STOPPED`), a full rate limit (`RATE_LIMITED`), the store failing
/// while the controls or the count are read (`STORE_UNAVAILABLE`). `None`
/// when the controls let the call go on (a page counted, if a limit is in
/// force); otherwise the call is made and checked: nothing ran, no step
/// was taken, nothing in the model changes.
pub(crate) async fn controlled_call<St: Store>(
    system: &System<St>,
    model: &mut Model,
    calling: &Calling,
    id: Option<&str>,
) -> Option<Checked> {
    let Calling {
        identity,
        replica,
        how,
        fault,
        ..
    } = *calling;
    let (caller, _, tool, _) = identity;
    let expected = match fault {
        _ if model.is_stopped(tool, caller) => Code::Stopped,
        // A call that brings a question's id carries out what was asked
        // (and counted) once: no limit counts it.
        _ if model.rules == Rules::Limits && tool == PAGE && id.is_none() => {
            let full = model.pages[caller] >= PAGES_PER_WINDOW;
            match fault {
                // A dry run reads the count, and counts nothing.
                _ if how == How::DryRun && full => Code::RateLimited,
                _ if how == How::DryRun => return None,
                Fault::Store(Outage::Down, "take_rate") => Code::StoreUnavailable,
                Fault::Store(Outage::AnswersLost, "take_rate") => {
                    // Counted, and the answer lost.
                    if !full {
                        model.pages[caller] += 1;
                    }
                    Code::StoreUnavailable
                }
                _ if full => Code::RateLimited,
                // The store failing as the call begins: a replica that had
                // not read the limit yet (it was loaded through the other
                // one) reads it only then, so the page may not be counted.
                Fault::Store(_, "begin_call") => {
                    model.recount = Some(caller);
                    return None;
                }
                _ => {
                    model.pages[caller] += 1;
                    return None;
                }
            }
        }
        _ => return None,
    };
    let effects = system.ledger.effects.lock().unwrap().len();
    let records = system.audits[replica].records().len();
    let answer = call(system, calling, id).await;
    Some(
        async {
            let Some(answer) = answer else {
                return Err(format!("a call answered {expected:?} crashed"));
            };
            // A stop or a limit loaded through the other replica's store is
            // seen as the call begins: a store failing there is the answer
            // then.
            let store_failed = matches!(fault, Fault::Store(..))
                && matches!(expected, Code::Stopped | Code::RateLimited)
                && answer.code == Code::StoreUnavailable;
            ensure!(
                answer.code == expected || store_failed,
                "the controls' answer was to be {expected:?}: {answer:?}"
            );
            ensure!(
                system.ledger.effects.lock().unwrap().len() == effects,
                "a call answered {expected:?} ran"
            );
            match answer.code {
                Code::Stopped => {
                    STOPPED_CALLS.fetch_add(1, Ordering::Relaxed);
                    ensure!(
                        answer.data.contains_key("stopped"),
                        "STOPPED without what is stopped: {answer:?}"
                    );
                }
                Code::RateLimited => {
                    RATE_LIMITED_CALLS.fetch_add(1, Ordering::Relaxed);
                    ensure!(
                        answer.data["retry_after_ms"]
                            .as_u64()
                            .is_some_and(|ms| ms > 0),
                        "RATE_LIMITED without retry_after_ms: {answer:?}"
                    );
                }
                _ => {}
            }
            // Nothing counted: no step taken.
            let audited = system.audits[replica].records();
            ensure!(
                audited.len() <= records + 1
                    && audited[records..]
                        .iter()
                        .all(|record| record.step.is_none()),
                "a call answered {expected:?} took a step: {:?}",
                &audited[records..]
            );
            Ok(())
        }
        .await,
    )
}

/// What a call's answer must be, from the table, when the model can tell:
/// no fault, nothing of the call ran or is in doubt, it needs a person and
/// no operators' rule decides for one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// `CONFIRMATION_DENIED`: its requester's denial stands.
    Denied,
    /// `CONFIRMATION_REQUIRED` with this question, and its signatures.
    Asked(String),
    /// `CONFIRMATION_REQUIRED` with a new question.
    AskedAnew,
    /// It runs, once.
    Runs,
    /// `CONFIRMATION_EXPIRED` of this question (`CONFIRMATION_INVALID`
    /// once the store dropped it).
    Expired(String),
    /// `CONFIRMATION_INVALID`: the id is not this call's.
    Invalid,
}

/// What the table says a call answers (see [`Expect`]); `None` where it
/// does not say.
pub(crate) fn expect_call(
    model: &Model,
    calling: &Calling,
    host_mode: bool,
    reason: Option<&str>,
    id: Option<&str>,
) -> Option<Expect> {
    let Calling {
        identity,
        principal,
        how,
        ..
    } = *calling;
    let v = model.v;
    let people = model.rules.people(identity.2);
    if how == How::OthersId && id.is_some() {
        return Some(Expect::Invalid);
    }
    // A denial is for the call, over an approval of its question for the
    // other reason (an open one is asked, or denied).
    let denied = model.denial(identity, principal).is_some();
    if let (How::WithId, Some(id)) = (how, id) {
        let q = model.question(id)?;
        if q.in_doubt || q.astray {
            return None;
        }
        return match q.class(v) {
            Class::Expired => Some(Expect::Expired(id.to_owned())),
            Class::Gone => Some(Expect::Invalid),
            Class::Open if denied => None,
            // The host's id is its approval where the question lets it.
            Class::Open if host_mode && q.host && people <= 1 => Some(Expect::Runs),
            Class::Open => Some(Expect::Asked(id.to_owned())),
            _ if denied => Some(Expect::Denied),
            Class::Decided(Said::Approve) => Some(Expect::Runs),
            Class::Decided(Said::Deny) | Class::Used(Said::Deny) => Some(Expect::Denied),
            _ => None,
        };
    }
    if denied {
        return Some(Expect::Denied);
    }
    if how == How::Confirmed && host_mode && people <= 1 {
        // The host's word approves, unless a question of the call stands
        // open that the host may not answer.
        return Some(
            match model.questions.iter().rev().find(|q| {
                q.identity == identity
                    && q.requester == principal
                    && !q.in_doubt
                    && q.class(v) == Class::Open
                    && !q.host
            }) {
                Some(q) => Expect::Asked(q.id.clone()),
                None => Expect::Runs,
            },
        );
    }
    match model.live(identity, principal, reason) {
        Some(q) => match q.class(v) {
            Class::Open => Some(Expect::Asked(q.id.clone())),
            Class::Decided(Said::Approve) => Some(Expect::Runs),
            _ => None,
        },
        None => Some(Expect::AskedAnew),
    }
}

/// The answer against what the table said it would be.
pub(crate) fn check_expected(
    model: &Model,
    expect: &Expect,
    answer: &ToolResult,
    ran: usize,
    was_there: bool,
) -> Checked {
    let code = answer.code.clone();
    let id = answer.question_id.as_deref();
    match expect {
        Expect::Denied => ensure!(
            code == Code::ConfirmationDenied,
            "the call's requester denied it: {answer:?}"
        ),
        Expect::Asked(asked) => {
            ensure!(
                code == Code::ConfirmationRequired && id == Some(asked.as_str()),
                "the call was to be asked again under {asked}: {answer:?}"
            );
            let q = model.question(asked).unwrap();
            signatures_named(model, q, answer, true)?;
        }
        Expect::AskedAnew => ensure!(
            code == Code::ConfirmationRequired && id.is_some_and(|id| model.question(id).is_none()),
            "the call was to be asked anew: {answer:?}"
        ),
        Expect::Runs => ensure!(
            answer.ok && ran == 1,
            "the call was to run once (ran {ran}): {answer:?}"
        ),
        Expect::Expired(expired) => ensure!(
            code == Code::ConfirmationExpired || (code == Code::ConfirmationInvalid && !was_there),
            "the question {expired} expired: {answer:?}"
        ),
        Expect::Invalid => ensure!(
            code == Code::ConfirmationInvalid,
            "the id brought is not the call's: {answer:?}"
        ),
    }
    EXPECTED.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// What a `CONFIRMATION_REQUIRED` of `q` names of its signatures: as many
/// people as it needs (its own record's count, or the controls' now,
/// whichever is more; `exact`: the controls as the model knows them, not
/// as a replica may still hold them), who signed, in order.
pub(crate) fn signatures_named(
    model: &Model,
    q: &Question,
    answer: &ToolResult,
    exact: bool,
) -> Checked {
    let needed = q.needed.max(model.rules.people(q.identity.2));
    let named = answer.data.get("needed").and_then(Value::as_u64);
    if exact {
        ensure!(
            named.unwrap_or(1) == u64::from(needed),
            "the question {} needs {needed} people: {answer:?}",
            q.id
        );
    } else {
        ensure!(
            named.unwrap_or(1) >= u64::from(q.needed),
            "the question {} needs {} people: {answer:?}",
            q.id,
            q.needed
        );
    }
    if named.is_some_and(|n| n > 1) {
        ensure!(
            answer.data.get("signatures") == Some(&json!(q.signed.len()))
                && answer.data.get("signed_by") == Some(&json!(q.signed)),
            "the question {} was signed by {:?}: {answer:?}",
            q.id,
            q.signed
        );
        SIGNATURES_NAMED.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// No answer says a call is still to be approved, or that its approval
/// expired, when the backend's ledger shows it ran.
pub(crate) fn said_of_a_call_that_ran(answer: &ToolResult, ran_before: usize) -> Checked {
    ensure!(
        ran_before == 0
            || !matches!(
                answer.code,
                Code::ConfirmationRequired | Code::ConfirmationExpired
            ),
        "{} of a call that ran: {answer:?}",
        answer.code.as_str()
    );
    Ok(())
}

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

pub(crate) async fn step<St: Store>(
    system: &System<St>,
    model: &mut Model,
    case: &Case,
    op: &Op,
) -> Checked {
    match *op {
        Op::Call {
            caller,
            principal,
            conversation,
            replica,
            tool,
            arg,
            how,
            fault,
            client_answers,
        } => {
            if principal.is_some() {
                PRINCIPAL_CALLS.fetch_add(1, Ordering::Relaxed);
            }
            let calling = Calling {
                identity: (caller, conversation, tool, arg),
                principal,
                replica,
                how,
                fault,
                client_answers,
            };
            make_call(system, model, case, &calling).await
        }
        Op::Again {
            back,
            other,
            replica,
            how,
            fault,
            client_answers,
        } => {
            let Some((identity, principal)) = again(model, back, other) else {
                return Ok(());
            };
            if principal.is_some() {
                PRINCIPAL_CALLS.fetch_add(1, Ordering::Relaxed);
            }
            let calling = Calling {
                identity,
                principal,
                replica,
                how,
                fault,
                client_answers,
            };
            make_call(system, model, case, &calling).await
        }
        Op::Read {
            caller,
            conversation,
            replica,
        } => {
            let answer = system.replicas[replica]
                .execute(
                    Call::new("read", r#"{"arg": 0}"#)
                        .session(CONVERSATIONS[conversation])
                        .caller(&system.callers[caller]),
                )
                .await;
            if model.is_stopped(READ, caller) {
                ensure!(
                    answer.code == Code::Stopped,
                    "a stopped read answered otherwise: {answer:?}"
                );
                STOPPED_CALLS.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            ensure!(answer.ok, "a read failed: {answer:?}");
            let scope = model.taint_scope(case.share, caller, conversation);
            model.tainted.insert(scope);
            Ok(())
        }
        Op::Answer {
            question,
            said,
            via,
            replica,
            intruder,
            person,
            busy,
        } => {
            let Some(q) = picked(model, question) else {
                return Ok(());
            };
            // A person who settles checks the system first: what they say
            // of an unknown outcome is the truth.
            let said = match said {
                Said::Happened | Said::NotHappened => {
                    let happened = model.known[&q.identity]
                        .key
                        .as_deref()
                        .is_some_and(|key| system.ledger.applied(key) > 0);
                    if happened {
                        Said::Happened
                    } else {
                        Said::NotHappened
                    }
                }
                said => said,
            };
            // The host's approval (or "it did not happen") of a question of
            // a stopped tool or caller ran it: a known defect
            // (tests/controls_regressions.rs), left out unless asked for.
            // Judged on what the person says, once checked.
            let (asker, _, tool, _) = q.identity;
            if !defect("host")
                && via == Via::Host
                && matches!(said, Said::Approve | Said::NotHappened)
                && model.is_stopped(tool, asker)
            {
                AVOIDED.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            answer(
                system, model, &q, said, via, replica, intruder, person, busy,
            )
            .await
        }
        Op::Stop {
            what,
            replica,
            lost,
        } => {
            let store = &system.stores[replica];
            if lost {
                store.fail(Outage::AnswersLost, Some("put_controls"), 1);
            }
            let done = controls::stop(&**store, what.target(), "the model's test", "ops").await;
            store.heal();
            if lost {
                ensure!(
                    matches!(done, Err(ChangeError::Store(_))),
                    "a stop whose answer was lost: {done:?}"
                );
            } else {
                ensure!(done.is_ok(), "a stop failed: {done:?}");
            }
            // Landed either way.
            model.stopped.insert(what);
            STOPS.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Op::Resume { pick, replica } => {
            let stopped: Vec<Stopped> = model.stopped.iter().copied().collect();
            let what = if stopped.is_empty() {
                Stopped::Tool(pick % TOOLS.len())
            } else {
                stopped[pick % stopped.len()]
            };
            let done = controls::resume(&*system.stores[replica], what.target(), "ops").await;
            if model.stopped.remove(&what) {
                ensure!(done.is_ok(), "enabling {what:?} failed: {done:?}");
                RESUMES.fetch_add(1, Ordering::Relaxed);
                if !defect("stale") {
                    read_the_controls(system).await;
                }
            } else {
                ensure!(
                    matches!(done, Err(ChangeError::Unchanged(_))),
                    "enabling {what:?}, which is not stopped: {done:?}"
                );
            }
            Ok(())
        }
        Op::Load { rules, replica } => {
            load(system, replica, rules).await?;
            model.rules = rules;
            model.signing |= rules == Rules::TwoPeople;
            LOADS.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Op::Sweep { replica } => {
            // The sweep records as done what a person said happened.
            for q in model.questions.iter().filter(|q| q.in_doubt) {
                model.leeway.take.insert(q.id.clone());
            }
            // What is in doubt before the sweep must have its question
            // after it (a lease running out during the sweep is the next
            // sweep's).
            let doubted = in_doubt(system, model).await;
            let surfaced = system.replicas[replica].surface_unknown_outcomes().await;
            ensure!(surfaced.is_ok(), "the sweep failed: {surfaced:?}");
            sweep_checks(system, &doubted).await
        }
        Op::Wait => {
            tokio::time::sleep(Duration::from_millis(60)).await;
            Ok(())
        }
        Op::Tick(by) => {
            tick(model, by);
            Ok(())
        }
        Op::WaitFor {
            question,
            replica,
            first,
            past,
        } => {
            let Some(q) = waited(model, question, first) else {
                return Ok(());
            };
            wait_for(system, model, case, &q, replica, first, past).await
        }
    }
}

/// Moves the test's clock, and the model's.
pub(crate) fn tick(model: &mut Model, by: Tick) {
    clock::advance(Duration::from_millis(by.ms()));
    model.v += by.ms();
    TICKS.fetch_add(1, Ordering::Relaxed);
}

/// As many people as `q` needs decide it in the inbox (`said`; of a
/// question about an unknown outcome, what they find happened), through
/// `replica`'s store, none of them its requester; each answer checked as an
/// [`Op::Answer`]'s.
pub(crate) async fn decide_in_inbox<St: Store>(
    system: &System<St>,
    model: &mut Model,
    id: &str,
    said: Said,
    replica: usize,
    at_most: u32,
) -> Checked {
    let Some(q) = model.question(id).cloned() else {
        return Ok(());
    };
    let said = if q.in_doubt {
        let happened = model.known[&q.identity]
            .key
            .as_deref()
            .is_some_and(|key| system.ledger.applied(key) > 0);
        if happened {
            Said::Happened
        } else {
            Said::NotHappened
        }
    } else {
        said
    };
    let needed = if said == Said::Approve {
        q.needed.max(model.rules.people(q.identity.2))
    } else {
        1
    };
    let people = [Person::Ana, Person::Bo, Person::Cy];
    for person in people
        .into_iter()
        .filter(|person| person.name(&q) != q.requester_name())
        .take(needed.min(at_most) as usize)
    {
        let q = model.question(id).cloned().unwrap();
        answer(
            system,
            model,
            &q,
            said,
            Via::Inbox,
            replica,
            false,
            person,
            false,
        )
        .await?;
    }
    Ok(())
}

/// `replica` waits for a decision on `q`, by its requester's call, after
/// (or while) the other replica's store takes one and carries it out as
/// `first` says, until a moment already past or soon; what the wait
/// answers is what the table says of `q` then.
pub(crate) async fn wait_for<St: Store>(
    system: &System<St>,
    model: &mut Model,
    case: &Case,
    q: &Question,
    replica: usize,
    first: First,
    past: bool,
) -> Checked {
    let other = 1 - replica;
    let (caller, conversation, tool, arg) = q.identity;
    match first {
        First::SignOnce => {
            decide_in_inbox(system, model, &q.id, Said::Approve, other, 1).await?;
        }
        First::Lapse(said) => {
            decide_in_inbox(system, model, &q.id, said, other, u32::MAX).await?;
            tick(model, Tick::Approval);
        }
        First::Decide(said) | First::CarryOut(said) => {
            decide_in_inbox(system, model, &q.id, said, other, u32::MAX).await?;
            if let First::CarryOut(_) = first {
                let calling = Calling {
                    identity: q.identity,
                    principal: q.requester,
                    replica: other,
                    how: How::WithId,
                    fault: Fault::None,
                    client_answers: false,
                };
                make_call(system, model, case, &calling).await?;
                CARRIED_ELSEWHERE.fetch_add(1, Ordering::Relaxed);
            }
        }
        First::Nothing | First::Meanwhile(_) => {}
    }
    // The wait meets the question as the first steps left it.
    questions_held(system, model).await?;
    let key = model.known.get(&q.identity).and_then(|k| k.key.clone());
    let applied = |key: &Option<String>| key.as_deref().map_or(0, |k| system.ledger.applied(k));
    let ran_before = applied(&key);
    let unknown = model.known.get(&q.identity).is_some_and(|k| k.unknown);
    let was_there = system.stores[0]
        .inner()
        .approval(&q.id)
        .await
        .map_err(|e| e.to_string())?
        .is_some();
    let host_mode = system.replicas[replica].settings().approvals == Approvals::Host;
    for other in &model.questions {
        if other.identity == q.identity && (other.requester == q.requester || other.in_doubt) {
            model.leeway.take.insert(other.id.clone());
        }
    }
    if host_mode {
        model.leeway.take_undecided.insert(q.id.clone());
    }
    let arguments = json!({ "arg": arg }).to_string();
    let waiting = system.replicas[replica].wait_for_decision(
        Call::new(SIDE_EFFECTS[tool], &arguments)
            .session(CONVERSATIONS[conversation])
            .caller(system.caller(caller, q.requester)),
        &q.id,
        if past && !matches!(first, First::Meanwhile(_)) {
            now_ms().saturating_sub(1)
        } else {
            now_ms() + 80
        },
    );
    let (waited, late) = match first {
        First::Meanwhile(said) => {
            let until = std::time::Instant::now() + Duration::from_millis(80);
            let deciding = async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let decided = decide_in_inbox(system, model, &q.id, said, other, u32::MAX).await;
                (decided, std::time::Instant::now() >= until)
            };
            let (waited, (decided, late)) = tokio::join!(waiting, deciding);
            decided?;
            (waited, late)
        }
        _ => (waiting.await, false),
    };
    WAITS.fetch_add(1, Ordering::Relaxed);
    if matches!(waited.code, Code::ResourceBusy | Code::Stopped) {
        model.leeway.give_back = true;
    }
    let Some(now) = model.question(&q.id).cloned() else {
        return Ok(());
    };
    let class = now.class(model.v);
    said_of_a_call_that_ran(&waited, ran_before)?;
    let ran = applied(&key) - ran_before;
    ensure!(ran <= 1, "a wait ran its call {ran} times: {waited:?}");
    // What the table says the wait answers: an open question again, unless
    // its call ran by another way (then what came of it); otherwise what
    // came of the call (the controls'
    // answers, a stop, and an unknown outcome's are the other checks').
    let done = ran_before > 0;
    let code = waited.code.clone();
    let denied = model.denial(q.identity, q.requester).is_some() && !done;
    let fits = match class {
        _ if late && code == Code::ConfirmationRequired => true,
        Class::Open if q.in_doubt => {
            code == Code::InDoubt && waited.question_id.as_deref() == Some(q.id.as_str())
        }
        Class::Open if done => waited.ok && waited.replayed,
        Class::Open => {
            signatures_named(model, &now, &waited, false)?;
            code == Code::ConfirmationRequired
                && waited.question_id.as_deref() == Some(q.id.as_str())
        }
        _ if model.is_stopped(tool, caller) || unknown || now.astray => true,
        _ if done => waited.ok,
        Class::Expired => {
            code == Code::ConfirmationExpired || (code == Code::ConfirmationInvalid && !was_there)
        }
        Class::Gone => code == Code::ConfirmationInvalid,
        _ if denied => code == Code::ConfirmationDenied,
        Class::Decided(Said::Approve | Said::NotHappened) => waited.ok && ran == 1,
        Class::Decided(Said::Happened) => waited.ok && ran == 0,
        Class::Decided(Said::Deny) | Class::Used(Said::Deny) => code == Code::ConfirmationDenied,
        Class::Used(_) => true,
    };
    ensure!(
        fits,
        "a wait on {class:?} {now:?} (ran {ran_before} before) answered {waited:?}"
    );
    if waited.ok && waited.replayed {
        WAITS_REPLAYED.fetch_add(1, Ordering::Relaxed);
    }
    let calling = Calling {
        identity: q.identity,
        principal: q.requester,
        replica,
        how: How::WithId,
        fault: Fault::None,
        client_answers: false,
    };
    observe(system, model, case, &calling, &waited, ran_before).await
}

/// Each replica reads the operators' controls anew (a dry run reads them
/// before anything else), after a stop is lifted: a replica that answered
/// `STOPPED` from the controls it held does not see the stop lifted
/// otherwise (tests/controls_regressions.rs,
/// `a_replica_sees_a_stop_lifted`, ignored until the library is fixed;
/// with it fixed, this goes).
pub(crate) async fn read_the_controls<St: Store>(system: &System<St>) {
    for d in &system.replicas {
        let _ = d
            .execute(
                Call::new("read", r#"{"arg": 0}"#)
                    .session(CONVERSATIONS[0])
                    .caller(&system.callers[0])
                    .dry_run(true),
            )
            .await;
    }
}

/// Loads `rules` as the policy, through `replica`'s store.
pub(crate) async fn load<St: Store>(system: &System<St>, replica: usize, rules: Rules) -> Checked {
    let callers: Vec<&Caller> = system.callers.iter().collect();
    let loaded = controls::load_policy(
        &*system.stores[replica],
        system.replicas[replica].registry(),
        &callers,
        &rules.controls(),
        "ops",
        "model.toml",
    )
    .await;
    ensure!(loaded.is_ok(), "loading {rules:?} failed: {loaded:?}");
    Ok(())
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
        .lock_resource(&resource, &holder, now_ms(), 60_000)
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

/// What a call's answer tells the model, and the checks on it.
pub(crate) async fn observe<St: Store>(
    system: &System<St>,
    model: &mut Model,
    case: &Case,
    calling: &Calling,
    answer: &ToolResult,
    before: usize,
) -> Checked {
    let Calling {
        identity,
        principal,
        replica,
        how,
        fault,
        ..
    } = *calling;
    let (caller, conversation, _, arg) = identity;
    let store_fault = matches!(fault, Fault::Store(..));
    let known = model.known.get_mut(&identity).unwrap();
    if let Some(key) = answer.data.get("key").and_then(Value::as_str) {
        known.key.get_or_insert_with(|| key.to_owned());
    }
    // No answer crosses callers: what ran, or is replayed, is this call's.
    if answer.ok && answer.code == Code::Ok && answer.data.contains_key("arg") {
        ensure!(
            answer.data["caller"] == CALLERS[caller] && answer.data["arg"] == arg,
            "another call's answer: {answer:?}"
        );
        if let Some(key) = answer.data.get("key").and_then(Value::as_str) {
            ensure!(
                known.key.as_deref() == Some(key),
                "another key's answer: {answer:?}"
            );
        }
    }
    // A denial is final for its period: an identical real call of its
    // requester is denied again (unless the call had run before, by
    // another way, or another principal's: then it is replayed). A call
    // that brings another requester's id is refused before.
    if model.denial(identity, principal).is_some()
        && before == 0
        && matches!(how, How::Plain | How::Confirmed)
        && !store_fault
    {
        ensure!(
            answer.code == Code::ConfirmationDenied,
            "a denied call answered otherwise: {answer:?}"
        );
    }
    // Taint: a question because of untrusted output needs a read in this
    // conversation, by this caller unless conversations are shared.
    if answer.data.get("reason").and_then(Value::as_str) == Some("untrusted_context") {
        let scope = model.taint_scope(case.share, caller, conversation);
        ensure!(
            model.tainted.contains(&scope),
            "tainted by another caller's read: {answer:?}"
        );
    }
    // The questions the answer names (no person is asked again for a call
    // whose question stands: `note_question`).
    if let Some(id) = &answer.question_id {
        let known = &model.known[&identity];
        let new = model.question(id).is_none();
        // Nor asked again whether it happened once a person said it did.
        ensure!(
            !(new && answer.code == Code::InDoubt && known.happened),
            "a person asked again about an outcome they settled: {answer:?}, {known:?}"
        );
        let in_doubt = answer.code == Code::InDoubt;
        if answer.code == Code::ConfirmationRequired || in_doubt {
            let requester = if how == How::OthersId {
                model.question(id).map_or(principal, |q| q.requester)
            } else {
                principal
            };
            note_question(
                system,
                model,
                identity,
                requester,
                id,
                in_doubt,
                fault == Fault::None,
            )
            .await?;
        }
    }
    let known = model.known.get_mut(&identity).unwrap();
    let in_doubt = answer.data.get("in_doubt") == Some(&Value::Bool(true));
    if in_doubt && how != How::DryRun {
        if !known.unknown {
            known.applied_at_unknown = before;
        }
        known.unknown = true;
        known.rerun_allowed = false;
        if answer.code != Code::DryRun {
            known.doubt_answers += 1;
            IN_DOUBT_ANSWERS.fetch_add(1, Ordering::Relaxed);
        }
    }
    // In host mode, the host's confirmation is an authorized approval of a
    // call that brings no id.
    if how == How::Confirmed && system.replicas[replica].settings().approvals == Approvals::Host {
        known.authorized = true;
    }
    if answer.ok && answer.code == Code::Ok {
        if answer.data.get("happened") == Some(&Value::Bool(true)) {
            known.happened = true;
        }
        known.unknown = false;
        known.rerun_allowed = false;
    }
    Ok(())
}

/// An answer to a known question, and the model's prediction of whether it
/// is taken (and, for a question several people must approve, of the
/// signatures it then has), from the question's state in the table.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn answer<St: Store>(
    system: &System<St>,
    model: &mut Model,
    q: &Question,
    said: Said,
    via: Via,
    replica: usize,
    intruder: bool,
    person: Person,
    busy: bool,
) -> Checked {
    let (caller, conversation, tool, arg) = q.identity;
    let as_caller = if intruder { 1 - caller } else { caller };
    let by = match via {
        Via::Client(_) => CLIENT,
        _ => person.name(q),
    };
    let d = &system.replicas[replica];
    let store = d.store();
    let class = q.class(model.v);
    let entry = store.approval(&q.id).await.map_err(|e| e.to_string())?;
    let Some(entry) = entry else {
        ensure!(
            class == Class::Gone || (class == Class::Expired && q.decision.is_none()),
            "the store lost the question {}, which is {class:?}",
            q.id
        );
        return Ok(());
    };
    let open = class == Class::Open;
    let kind_fits = match said {
        Said::Approve | Said::Deny => !q.in_doubt,
        Said::Happened | Said::NotHappened => q.in_doubt,
    };
    let permitted = match via {
        Via::Host | Via::Inbox => true,
        Via::Client(here) => !q.in_doubt && q.client && here,
    };
    // The inbox sees every question; the host's API and a client only their
    // own caller's.
    let owner = via == Via::Inbox || !intruder;
    let answerable = open && kind_fits && permitted && owner;
    // An approval past its time, decided or not, is refused as expired by
    // whoever may answer it.
    let expired = class == Class::Expired && kind_fits && permitted && owner;
    // The operators' controls, on an answer that would be taken: no
    // approval (nor "it did not happen") while the tool or the caller is
    // stopped; never the requester's approval; with several people needed
    // (the controls' count now, or the question's own), a signature of a
    // person who did not make the call, the last one deciding.
    let needed = model.rules.people(tool).max(q.needed);
    let mine = by == q.requester_name() && !matches!(via, Via::Client(_));
    let mut signatures = None;
    let mut by_controls = false;
    let mut last_signature = false;
    let mut signer = None;
    let taken_predicted = if !answerable {
        false
    } else if (matches!(said, Said::Approve | Said::NotHappened) && model.is_stopped(tool, caller))
        || (said == Said::Approve && mine)
    {
        by_controls = true;
        false
    } else if said != Said::Approve || needed <= 1 {
        true
    } else if matches!(via, Via::Client(_)) {
        by_controls = true;
        false
    } else {
        let again = q.signed.contains(&by);
        let count = q.signed.len() + usize::from(!again);
        let count = u32::try_from(count).unwrap();
        if !again {
            signer = Some(by);
        }
        if count >= needed {
            last_signature = true;
            true
        } else {
            signatures = Some(count);
            false
        }
    };
    let before_effects = model.known[&q.identity]
        .key
        .as_deref()
        .map_or(0, |k| system.ledger.applied(k));
    if expired {
        ANSWERS_TO_EXPIRED.fetch_add(1, Ordering::Relaxed);
    }
    if said == Said::Approve && mine && answerable {
        REQUESTERS_REFUSED.fetch_add(1, Ordering::Relaxed);
    }

    let taken = match via {
        Via::Inbox => {
            let answer = match said {
                Said::Approve => Answer::Approve,
                Said::Deny => Answer::Deny,
                Said::Happened => Answer::Happened,
                Said::NotHappened => Answer::NotHappened,
            };
            // As the inbox records it: a denial stands for the setting's
            // period.
            let decided = toolcall_core::life::decide(
                store,
                &q.id,
                None,
                &Answerer::Person(by),
                &answer,
                "the model's test",
                Moment::new(now_ms(), reference::DENIAL_TTL),
            )
            .await;
            if let Some(count) = signatures {
                ensure!(
                    matches!(decided, Ok(Decided::Signed { signatures, needed: n }) if signatures == count && n == needed),
                    "{by}'s signature of {needed} was to count {count}: {decided:?}"
                );
            }
            if by_controls {
                ensure!(
                    matches!(decided, Err(Refusal::Controls(_))),
                    "{by}'s approval was to be refused by the controls: {decided:?}"
                );
            }
            if expired {
                ensure!(
                    matches!(decided, Err(Refusal::Expired)),
                    "{said:?} by {by} of {q:?}, expired, was to be refused as expired: {decided:?}"
                );
            }
            match decided {
                Ok(Decided::Recorded) => true,
                Ok(Decided::Signed { .. }) => false,
                // The same person's same answer again: one decision.
                Ok(_) => {
                    ensure!(
                        entry.approval.decision.is_some(),
                        "an answer again to an undecided question"
                    );
                    false
                }
                Err(Refusal::Store(error)) => return Err(error.to_string()),
                Err(_) => false,
            }
        }
        Via::Host | Via::Client(_) => {
            // The host's answers take the question and carry it out.
            model.leeway.take.insert(q.id.clone());
            let mut decision = Decision::new(&q.id, CONVERSATIONS[conversation])
                .caller(&system.callers[as_caller])
                .by(by);
            if let Via::Client(here) = via {
                decision = decision.by_client(here);
            }
            let held = match resource_of(tool, arg) {
                Some(resource) if busy && via == Via::Host => {
                    Some(hold(&system.stores[replica], resource).await)
                }
                _ => None,
            };
            let was_held = held.is_some();
            let result = match said {
                Said::Approve => d.approve(decision).await,
                Said::Deny => d.deny(decision, "the model's test").await,
                Said::Happened => d.answer_in_doubt(decision, true).await,
                Said::NotHappened => d.answer_in_doubt(decision, false).await,
            };
            let after = model.known[&q.identity]
                .key
                .as_deref()
                .map_or(0, |key| system.ledger.applied(key));
            if let Some((resource, holder)) = held {
                let freed = system.stores[replica]
                    .inner()
                    .unlock_resource(&resource, &holder)
                    .await;
                ensure!(freed.is_ok(), "{freed:?}");
                ensure!(
                    after == before_effects,
                    "ran while another process held its resource: {result:?}"
                );
            }
            if matches!(result.code, Code::ResourceBusy | Code::Stopped) {
                model.leeway.give_back = true;
            }
            if result.code == Code::ResourceBusy {
                ensure!(was_held, "RESOURCE_BUSY with the resource free: {result:?}");
                BUSY_ANSWERS.fetch_add(1, Ordering::Relaxed);
            }
            // An in-doubt question is never answered by an approval: the
            // refusal says so, and nothing runs.
            if !kind_fits || !permitted || !owner {
                ensure!(
                    matches!(
                        result.code,
                        Code::ConfirmationInvalid | Code::ConfirmationExpired
                    ) || (!open && !owner),
                    "an answer that may not be taken was: {said:?} via {via:?}: {result:?}"
                );
            }
            if by_controls {
                ensure!(
                    result.code == Code::ConfirmationInvalid,
                    "{by}'s approval was to be refused by the controls: {result:?}"
                );
            }
            // Of a call that ran without its question (the host's
            // `confirmed`), the answer is what came of it, replayed: never
            // "expired" or "needs approval".
            let ran = before_effects > 0;
            if ran && (expired || signatures.is_some()) {
                ensure!(
                    result.ok && result.replayed,
                    "{said:?} via {via:?} of {q:?}, whose call ran, was to answer what came of \
                     it: {result:?}"
                );
            } else if expired {
                ensure!(
                    result.code == Code::ConfirmationExpired,
                    "{said:?} via {via:?} of {q:?}, expired, was to answer CONFIRMATION_EXPIRED: \
                     {result:?}"
                );
            } else if let Some(count) = signatures {
                ensure!(
                    result.code == Code::ConfirmationRequired
                        && result.data.get("signatures") == Some(&json!(count))
                        && result.data.get("needed") == Some(&json!(needed)),
                    "{by}'s signature of {needed} was to count {count}: {result:?}"
                );
            }
            said_of_a_call_that_ran(&result, before_effects)?;
            let recorded = store
                .approval(&q.id)
                .await
                .map_err(|e| e.to_string())?
                .and_then(|e| e.approval.decision);
            let mine = recorded.is_some() && entry.approval.decision.is_none();
            if mine && taken_predicted {
                // What the carried-out decision came to, for the model.
                let known = model.known.get_mut(&q.identity).unwrap();
                if let Some(key) = result.data.get("key").and_then(Value::as_str) {
                    known.key.get_or_insert_with(|| key.to_owned());
                }
                if result.data.get("in_doubt") == Some(&Value::Bool(true)) {
                    if !known.unknown {
                        known.applied_at_unknown = before_effects;
                    }
                    known.unknown = true;
                }
                if let Some(id) = &result.question_id
                    && result.code == Code::InDoubt
                {
                    note_question(system, model, q.identity, None, id, true, true).await?;
                }
            }
            mine
        }
    };
    if taken {
        TAKEN_ANSWERS.fetch_add(1, Ordering::Relaxed);
    } else {
        REFUSED_ANSWERS.fetch_add(1, Ordering::Relaxed);
    }
    if signatures.is_some() {
        SIGNATURES.fetch_add(1, Ordering::Relaxed);
    }
    if by_controls {
        REFUSED_BY_CONTROLS.fetch_add(1, Ordering::Relaxed);
    }
    ensure!(
        taken == taken_predicted,
        "{said:?} via {via:?} by {by} (intruder {intruder}) on {q:?}: taken {taken}, the model says {taken_predicted}"
    );
    let v = model.v;
    let reference = model.question_mut(&q.id).unwrap();
    if let Some(signer) = signer
        && (signatures.is_some() || last_signature)
    {
        reference.signed.push(signer);
    }
    if taken {
        reference.decision = Some((said, v));
        let known = model.known.get_mut(&q.identity).unwrap();
        match said {
            Said::Approve => {
                known.authorized = true;
                known.decided = true;
                if last_signature {
                    SIGNED_DECISIONS.fetch_add(1, Ordering::Relaxed);
                }
            }
            Said::Deny => {}
            Said::NotHappened => {
                known.rerun_allowed = true;
                known.authorized = true;
            }
            Said::Happened => known.happened = true,
        }
    }
    Ok(())
}

/// Who made the call `question` asks about, as a person deciding is named:
/// the principal behind its caller, or the caller.
pub(crate) fn requester_of(question: &toolcall::store::PendingApproval) -> &str {
    question
        .principal
        .as_ref()
        .map_or(question.caller.as_str(), |principal| {
            principal.subject.as_str()
        })
}

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

/// After the inbox's sweep: every unknown outcome of a backend that only a
/// person can settle has a question, open or decided.
/// The calls of a backend only a person can settle whose outcome is
/// unknown in the store now.
pub(crate) async fn in_doubt<St: Store>(system: &System<St>, model: &Model) -> Vec<Identity> {
    let mut doubted = Vec::new();
    for &identity in model.known.keys() {
        let (caller, conversation, tool, arg) = identity;
        if !matches!(SIDE_EFFECTS[tool], "page" | "wipe") {
            continue;
        }
        let recorded = system.replicas[0]
            .recorded(
                SIDE_EFFECTS[tool],
                &json!({ "arg": arg }),
                CONVERSATIONS[conversation],
                &system.callers[caller],
            )
            .await;
        if let Ok(Some(toolcall::store::RecordedOutcome::InDoubt)) = recorded {
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
    for &(caller, conversation, tool, arg) in doubted {
        let recorded = system.replicas[0]
            .recorded(
                SIDE_EFFECTS[tool],
                &json!({ "arg": arg }),
                CONVERSATIONS[conversation],
                &system.callers[caller],
            )
            .await;
        if let Ok(Some(toolcall::store::RecordedOutcome::Completed(_))) = recorded {
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
            .find_approval(&binding, Some(IN_DOUBT), now_ms())
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
            let calling = Calling {
                identity,
                principal: None,
                replica: 0,
                how: How::Plain,
                fault: Fault::None,
                client_answers: false,
            };
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
