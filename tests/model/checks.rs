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
        Op::Call(Calling {
            identity,
            principal,
            how,
            ..
        }) if how != How::DryRun => (identity, principal),
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
