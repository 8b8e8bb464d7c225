//! Carrying out a decision a person (or the host, or a rule) recorded on a
//! call's question: the decision taken with the call that brings its id, a
//! denial answered, an approval run once under the call's key, an edit run
//! as the person's own call, an unknown outcome settled as the person said.

use std::any::Any;

use serde_json::{Map, Value};

use super::Dispatcher;
use super::approval::Decision;
use super::arguments::Prepared;
use super::asked::{CallParts, JsonArguments};
use super::inbox::{DecisionLookup, mark_edited};
use super::messages::{Details, Failure};
use super::stages::{Approval, CallStart, DecisionNote, Stage};
use crate::life::{QuestionKind, Verdict};
use crate::policy::Caller;
use crate::result::ToolResult;
use crate::store::{PendingApproval, RecordedOutcome, Store};
use crate::tool::ToolSpec;

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Stages 5 to 8 of a call that brings an approval id (or learned one):
    /// a person's decision in the store is carried out as it is (a call of
    /// its own, with its own locks); with none yet, the call goes on to
    /// stage 7 under that id. Boxed by the caller: rare, and far larger
    /// than the common path's future, which would otherwise carry it.
    pub(super) async fn run_by_id(
        &self,
        prepared: &mut Prepared<'_>,
        id: &str,
        approval: Approval<'_>,
        carried: &mut Option<DecisionNote>,
        begun: &mut CallStart,
    ) -> Stage<ToolResult> {
        let arguments = self.stages.json(prepared)?;
        let found = self
            .stages
            .find_decision(
                id,
                prepared.spec.name(),
                arguments,
                prepared.session,
                prepared.caller,
            )
            .await?;
        match found {
            DecisionLookup::Decided {
                decision,
                verdict,
                fresh,
            } => {
                // The decision runs as a call of its own, which takes its
                // own locks.
                self.stages
                    .free(prepared.spec.name(), begun.lock.take())
                    .await;
                *carried = Some(DecisionNote {
                    by: decision.by.clone(),
                    edited: match &verdict {
                        Verdict::Edit(edited) => Some(edited.clone()),
                        _ => None,
                    },
                });
                self.carry_out(id, prepared, &verdict, &decision.note, fresh)
                    .await
            }
            DecisionLookup::Undecided => {
                prepared.lock = begun.lock.take();
                self.decide_and_run(prepared, approval).await
            }
            DecisionLookup::Taken { unsettled } => {
                prepared.lock = begun.lock.take();
                let answer = self.decide_and_run(prepared, Approval::Given).await;
                if unsettled
                    && let Ok(result) | Err(result) = &answer
                    && super::inbox::is_final(result)
                {
                    self.stages.settle(id, result).await;
                }
                answer
            }
        }
    }

    /// Carries out a person's decision on this call: a denial is
    /// `CONFIRMATION_DENIED` with their note, an approval runs the call
    /// (stage 7 passed), an approval with edits runs the edited call. What
    /// came of it is recorded with the approval.
    pub(super) async fn carry_out(
        &self,
        id: &str,
        prepared: &mut Prepared<'_>,
        verdict: &Verdict,
        note: &str,
        fresh: bool,
    ) -> Stage<ToolResult> {
        let name = prepared.spec.name();
        let answer = match verdict {
            Verdict::Edit(edited) => {
                let (session, caller, step) = (prepared.session, prepared.caller, prepared.step);
                self.run_edited(prepared.spec, edited, session, caller, step)
                    .await
            }
            verdict if verdict.runs() => self.decide_and_run(prepared, Approval::Given).await,
            _ => Err(self.stages.denied(name, note)),
        };
        // Recorded once, by the call that used the decision up, when it is
        // what came of the call for good (an outcome still unknown is read
        // from the call's key later, `Dispatcher::recorded`); given back
        // when the call ran nothing for a resource another call held.
        if fresh && let Ok(result) | Err(result) = &answer {
            self.stages.settle_or_give_back(id, result).await;
        }
        answer
    }

    /// The call with the arguments a person put in place of the model's:
    /// validated, checked and policed again as a new call (its own
    /// idempotency key, bound to the new arguments: one that already ran is
    /// replayed), past stage 7, which the person's approval is. The answer
    /// says a person changed them (`data.edited_by_person`,
    /// `data.edited_arguments`).
    pub(super) async fn run_edited(
        &self,
        spec: &'static ToolSpec,
        edited: &Value,
        session: &str,
        caller: &Caller,
        step: u64,
    ) -> Stage<ToolResult> {
        let Value::Object(object) = edited else {
            let refused = self.stages.fail_with(
                Failure::InvalidArguments,
                spec.name(),
                &Details::detail("the edited arguments are not an object"),
                Map::new(),
            );
            return Err(mark_edited(refused, edited));
        };
        let mut prepared = self
            .stages
            .prepare(spec, object, session, caller, step, None)
            .map_err(|refused| mark_edited(refused, edited))?;
        let answer = self.run_approved(&mut prepared).await;
        answer
            .map(|result| mark_edited(result, edited))
            .map_err(|result| mark_edited(result, edited))
    }

    /// Stages 4 to 8 of a call a person approved, as they approved it: a
    /// key that completed replays, a key in doubt goes to execution (which
    /// settles the doubt first), anything else runs past stage 7, which the
    /// approval is.
    pub(super) async fn run_approved(&self, prepared: &mut Prepared<'_>) -> Stage<ToolResult> {
        let outcome = self
            .stages
            .recorded(&prepared.key)
            .await
            .map_err(|error| self.stages.store_unavailable(prepared.spec.name(), &error))?;
        match outcome {
            Some(RecordedOutcome::Completed(stored)) => Ok(*stored),
            Some(RecordedOutcome::InDoubt) => {
                self.decide_and_run(prepared, Approval::InDoubt).await
            }
            _ => self.decide_and_run(prepared, Approval::Given).await,
        }
    }

    /// A pending approval a person (or the host) approved: the call runs,
    /// once, from stage 4, its arguments validated again and its check and
    /// policy re-run first; a person's edits run in place of the model's
    /// arguments, as a new call that says so.
    pub(super) async fn approved(
        &self,
        decision: &Decision<'_>,
        caller: &Caller,
        pending: PendingApproval,
    ) -> Stage<ToolResult> {
        // The operators' controls as they are now: a stop holds the call,
        // and the caller's policy is theirs.
        let current = self.stages.controls(&pending.tool).await?;
        if let Some(stop) = current.controls.stopped(&pending.tool, caller.id()) {
            return Err(self.stages.stopped(&pending.tool, stop));
        }
        let narrowed = current.controls.narrow(caller);
        let caller = narrowed.as_ref().unwrap_or(caller);
        let spec = self.resolve(&pending.tool, caller.policy())?;
        let object = self.stages.pending_arguments(decision.id, &pending)?;
        let verdict = pending
            .decision
            .as_ref()
            .map(|recorded| Verdict::of(pending.kind(), recorded));
        if let Some(Verdict::Edit(edited)) = &verdict {
            // The model's arguments still pass validation.
            self.stages
                .prepare(spec, object, decision.session, caller, pending.step, None)?;
            return self
                .run_edited(spec, edited, decision.session, caller, pending.step)
                .await;
        }
        let key_from = decision.key_from_approval.then_some(decision.id);
        let mut prepared = self.stages.prepare(
            spec,
            object,
            decision.session,
            caller,
            pending.step,
            key_from,
        )?;
        // A question about an unknown outcome, approved: the person says
        // the earlier attempt did not take effect.
        prepared.settled = pending.kind() == QuestionKind::InDoubt;
        self.run_approved(&mut prepared).await
    }

    /// A person said the earlier attempt of an in-doubt call took effect
    /// (a denial of its question): the call is answered, and replayed from
    /// then on, as done; nothing runs.
    pub(super) async fn happened_by_person(
        &self,
        decision: &Decision<'_>,
        caller: &Caller,
        pending: &PendingApproval,
    ) -> Stage<ToolResult> {
        let spec = self.resolve(&pending.tool, caller.policy())?;
        let object = self.stages.pending_arguments(decision.id, pending)?;
        let prepared =
            self.stages
                .prepare(spec, object, decision.session, caller, pending.step, None)?;
        let asked = CallParts {
            spec,
            key: &prepared.key,
            arguments: JsonArguments::of(&prepared.json, &prepared.members),
            session: prepared.session,
            caller,
            step: prepared.step,
        };
        self.stages.happened(&asked, decision.by).await
    }
}
