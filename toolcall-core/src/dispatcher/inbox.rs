//! Decisions recorded in the store (a person's, in the inbox): a call that
//! brings its approval id learns the decision, which is used once; in
//! [`Approvals::Inbox`] mode nothing else approves.

use serde_json::{Map, Value};

use super::Approvals;
use super::arguments::Prepared;
use super::confirm::OwnCall;
use super::messages::{Details, Failure};
use super::stages::{Stage, Stages};
use crate::life::{self, Answer, Answerer, QuestionKind, QuestionState, Verdict};
use crate::policy::Caller;
use crate::result::ToolResult;
use crate::store::{
    ApprovalDecision, ApprovalEntry, ApprovalLookup, ApprovalResult, ApprovalUse, Binding, Store,
    TakeApproval, now_ms,
};

/// What the store says of the question a call brings the id of.
pub(super) enum DecisionLookup {
    /// Nobody decided it and the host may approve it by bringing its id
    /// ([`Approvals::Host`], and the question allows the host): stage 7
    /// takes it as it always has.
    Undecided,
    /// A decision on it is to be carried out: one used up now (`fresh`), or
    /// one carried out before that still answers an identical call (a
    /// denial, an edit within its period: [`ApprovalEntry::standing`]).
    Decided {
        // Boxed: a decision is large beside the other answers, and rare.
        decision: Box<ApprovalDecision>,
        verdict: Verdict,
        fresh: bool,
    },
    /// An approval of this exact call that another call already took and
    /// carries out: the call goes on as approved, under its key, which runs
    /// it at most once (an identical call completed replays, one in flight
    /// is waited for). `unsettled`: nothing came of it in the store yet
    /// (the call that took it died, say), which this call's answer records
    /// once it is final.
    Taken { unsettled: bool },
}

impl<St: Store> Stages<St> {
    /// Looks up the question `id` of this exact call and requester, and
    /// what the call may do with it, by its [state](ApprovalEntry::state):
    /// open, it is asked again under the same id (or, in host mode where
    /// the question lets the host approve, stage 7 takes it); decided, the
    /// decision is taken (once) and carried out; carried out, a denial or
    /// an edit still answers within its period, what came of it is
    /// answered again (replayed), and a call still running is joined under
    /// its key; expired, `CONFIRMATION_EXPIRED`. A question about an
    /// unknown outcome is never an approval; an id of another call or
    /// requester is `CONFIRMATION_INVALID` (in host mode, that is left to
    /// stage 7, which refuses it the same way after the check and the
    /// policy). (It borrows the call's parts, not the prepared call, which
    /// is not `Sync`, so that the pipeline's future stays `Send`.)
    pub(super) async fn find_decision(
        &self,
        id: &str,
        name: &'static str,
        arguments: &Value,
        session: &str,
        caller: &Caller,
    ) -> Stage<DecisionLookup> {
        let own = OwnCall::of(arguments, caller);
        let binding = own.binding(session, caller, name);
        let entry = self
            .store
            .approval(id)
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        // In Host mode, an id that is not this call's is left to stage 7,
        // in its place after the check and the policy, as it always was.
        let host = self.settings.approvals == Approvals::Host;
        let Some(entry) = entry.filter(|entry| binding.matches(&entry.approval)) else {
            return if host {
                Ok(DecisionLookup::Undecided)
            } else {
                Err(self.invalid(name, id))
            };
        };
        if entry.approval.kind() == QuestionKind::InDoubt {
            let refused = life::Refusal::WrongKind(QuestionKind::InDoubt).to_string();
            return Err(self.fail_with(
                Failure::AnswerRefused,
                name,
                &Details {
                    detail: Some(&refused),
                    ..Details::approval(id)
                },
                Map::new(),
            ));
        }
        let now = now_ms();
        let carried = |entry: &ApprovalEntry| {
            let verdict = entry.standing(now)?;
            let decision = entry.approval.decision.clone()?;
            Some(DecisionLookup::Decided {
                decision: Box::new(decision),
                verdict,
                fresh: false,
            })
        };
        match entry.state(now) {
            QuestionState::Open | QuestionState::Signing { .. } => {
                if host && life::may_answer(&entry, &Answerer::Host, &Answer::Approve, now).is_ok()
                {
                    Ok(DecisionLookup::Undecided)
                } else {
                    Err(self.asked(name, &entry).await)
                }
            }
            QuestionState::Expired => {
                let expired = self.expired(name, id);
                self.settle(id, &expired).await;
                Err(expired)
            }
            QuestionState::Decided(_) => self.take_decided(id, name, &binding, now).await,
            // A denial or an edit carried out before still answers.
            _ if carried(&entry).is_some() => {
                Ok(carried(&entry).unwrap_or(DecisionLookup::Undecided))
            }
            // What came of it is answered again, never asked anew.
            QuestionState::Done(_, came) if came.answer.is_some() => {
                let mut answer = came.answer.unwrap_or_else(|| unreachable!());
                answer.replayed = true;
                Err(answer)
            }
            // Running (or done before its answer was kept): joined under
            // its key while the question lasts.
            _ if entry.joinable(now) => Ok(DecisionLookup::Taken {
                unsettled: !matches!(entry.state(now), QuestionState::Done(..)),
            }),
            _ => Err(self.invalid(name, id)),
        }
    }

    /// Takes the decided question `id`, once: its decision, fresh; or, taken
    /// by an identical call meanwhile, that call's.
    async fn take_decided(
        &self,
        id: &str,
        name: &'static str,
        binding: &Binding<'_>,
        now: u64,
    ) -> Stage<DecisionLookup> {
        match self
            .store
            .take_approval(&ApprovalUse {
                id,
                binding,
                now_ms: now,
            })
            .await
            .map_err(|error| self.store_unavailable(name, &error))?
        {
            TakeApproval::Taken(taken) => {
                let kind = taken.kind();
                match taken.decision {
                    Some(decision) => Ok(DecisionLookup::Decided {
                        verdict: Verdict::of(kind, &decision),
                        decision: Box::new(decision),
                        fresh: true,
                    }),
                    None => Err(self.invalid(name, id)),
                }
            }
            TakeApproval::Expired => {
                let expired = self.expired(name, id);
                self.settle(id, &expired).await;
                Err(expired)
            }
            // Taken by an identical call meanwhile: the call is its.
            _ => Ok(DecisionLookup::Taken { unsettled: false }),
        }
    }

    /// `CONFIRMATION_EXPIRED`, naming the question `id`.
    pub(super) fn expired(&self, name: &str, id: &str) -> ToolResult {
        self.fail_with(
            Failure::ConfirmationExpired,
            name.to_owned(),
            &Details::approval(id),
            Map::new(),
        )
    }

    /// A question id brought by a call that needs no person's approval:
    /// refused (`CONFIRMATION_INVALID`, nothing done) unless it names an
    /// approval asked for this exact call by this requester. An id is never
    /// ignored: a call that brings another's is not the call the host
    /// thinks it is. (It borrows the call's parts, not the prepared call,
    /// which is not `Sync`.)
    pub(super) async fn own_approval(
        &self,
        id: &str,
        name: &'static str,
        arguments: &Value,
        session: &str,
        caller: &Caller,
    ) -> Stage<()> {
        let own = OwnCall::of(arguments, caller);
        let binding = own.binding(session, caller, name);
        match self.store.approval(id).await {
            Ok(Some(entry))
                if binding.matches(&entry.approval)
                    && entry.approval.kind() == QuestionKind::Approval =>
            {
                Ok(())
            }
            Ok(_) => Err(self.invalid(name, id)),
            Err(error) => Err(self.store_unavailable(name, &error)),
        }
    }

    /// `CONFIRMATION_DENIED`, with the person's note as the reason.
    pub(super) fn denied(
        &self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        note: &str,
    ) -> ToolResult {
        let note = crate::echo::bound(note.trim(), crate::echo::MAX_NOTE_BYTES);
        let note = note.as_ref();
        let details = if note.is_empty() {
            Details::default()
        } else {
            Details::detail(note)
        };
        self.fail_with(Failure::ConfirmationDenied, name, &details, Map::new())
    }

    /// The id of a question of exactly this call (its session, caller,
    /// tool, arguments, reason and requester) that decides it: a denial (or
    /// an edit) that stands ([`ApprovalEntry::standing`]), or a decision
    /// not carried out yet. What the call carries out in place of a new
    /// question. With `confirmed` (the host says a person approved), also
    /// the id of an open question of this call that the host may not answer
    /// ([`life::may_answer`]): the call is then that question again, not an
    /// approval.
    ///
    /// With `denials_only` (a call in doubt, which passed its approval
    /// before), only a denial: a person who denied the call after an
    /// attempt began has it not run again.
    pub(super) async fn decided_for(
        &self,
        prepared: &mut Prepared<'_>,
        confirmed: bool,
        denials_only: bool,
    ) -> Stage<Option<String>> {
        let name = prepared.spec.name();
        let own = OwnCall::of(self.json(prepared)?, prepared.caller);
        let binding = own.binding(prepared.session, prepared.caller, name);
        let reason = prepared
            .tainted
            .as_ref()
            .map(|_| super::confirm::UNTRUSTED_CONTEXT);
        let now = now_ms();
        let found = self
            .store
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason,
                now_ms: now,
            })
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        let denial = |entry: &ApprovalEntry| entry.standing(now) == Some(Verdict::Deny);
        if let Some(entry) = found.as_ref().filter(|entry| denial(entry)) {
            return Ok(Some(entry.approval.id.clone()));
        }
        // A denial of this exact call asked for the other reason (before the
        // conversation read untrusted output, or after) stands too, and over
        // any approval: an approval is for the question asked, a denial for
        // the call.
        let other = match reason {
            Some(_) => None,
            None => Some(super::confirm::UNTRUSTED_CONTEXT),
        };
        let denied = self
            .store
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason: other,
                now_ms: now,
            })
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        if let Some(entry) = denied.as_ref().filter(|entry| denial(entry)) {
            return Ok(Some(entry.approval.id.clone()));
        }
        if denials_only {
            return Ok(None);
        }
        // An open question of this exact call (for either reason) that the
        // host may not answer is not answered by its `confirmed`.
        if confirmed
            && let Some(entry) = [&found, &denied].into_iter().flatten().find(|entry| {
                entry.state(now).is_open()
                    && (self.settings.approvals != Approvals::Host
                        || life::may_answer(entry, &Answerer::Host, &Answer::Approve, now).is_err())
            })
        {
            return Ok(Some(entry.approval.id.clone()));
        }
        Ok(found
            .filter(|entry| {
                matches!(entry.state(now), QuestionState::Decided(_))
                    || entry.standing(now).is_some()
            })
            .map(|entry| entry.approval.id))
    }

    /// Records what came of a decided approval, for the inbox's history. A
    /// store that fails here does not change the answer: the call is done.
    /// What the call that used up the decision on `id` answered: recorded
    /// with it when final ([`settle`](Self::settle)); the decision given back
    /// when the call ran nothing for a refusal that passes (another call held
    /// its resource, `RESOURCE_BUSY`; the operators stopped the tool or the
    /// caller, `STOPPED`), so that the next call carrying it out takes it
    /// and nobody is asked again; nothing otherwise (an outcome still
    /// unknown is read from the call's key later).
    pub(super) async fn settle_or_give_back(&self, id: &str, result: &ToolResult) {
        if matches!(
            result.code,
            crate::Code::ResourceBusy | crate::Code::Stopped
        ) {
            match self.store.give_back_approval(id).await {
                Ok(true) => {}
                Ok(false) => tracing::info!(
                    approval = id,
                    "a decision not acted on stays used: an identical question stands"
                ),
                Err(error) => {
                    tracing::warn!(approval = id, %error, "a decision not acted on could not be given back; it stays used")
                }
            }
        } else if is_final(result) {
            self.settle(id, result).await;
        }
    }

    pub(super) async fn settle(&self, id: &str, result: &ToolResult) {
        let came = ApprovalResult {
            ok: result.ok,
            code: result.code.as_str().to_owned(),
            replayed: result.replayed,
            at_ms: now_ms(),
            answer: Some(result.clone()),
        };
        if let Err(error) = self.store.settle_approval(id, &came).await {
            tracing::warn!(approval = id, %error, "what came of an approval could not be recorded");
        }
    }
}

/// The answer to a call a person edited, saying so: `data.edited_by_person`,
/// `data.edited_arguments` (what ran), and a note after the message.
pub(super) fn mark_edited(mut result: ToolResult, arguments: &Value) -> ToolResult {
    result
        .data
        .insert("edited_by_person".into(), Value::Bool(true));
    result
        .data
        .insert("edited_arguments".into(), arguments.clone());
    let note = "A person changed the arguments before approving it (data.edited_arguments).";
    result.message = if result.message.is_empty() {
        note.to_owned()
    } else {
        format!("{} {note}", result.message)
    };
    result
}

/// Whether `result` is what came of a call for good: not a wait (an
/// identical call still running, a question to a person, a resource another
/// call holds: nothing ran, and the decision waits for it) and not an
/// outcome still unknown, which a later look may find settled.
pub(super) fn is_final(result: &ToolResult) -> bool {
    !matches!(
        result.code,
        crate::Code::CallInProgress
            | crate::Code::ResourceBusy
            | crate::Code::ConfirmationRequired
            | crate::Code::InDoubt
            | crate::Code::StoreUnavailable
    ) && result.data.get("in_doubt") != Some(&Value::Bool(true))
}
