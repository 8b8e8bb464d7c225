//! Observing the system and answering its questions: what a person sees,
//! and a person's answer held to the model.

use super::*;

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
