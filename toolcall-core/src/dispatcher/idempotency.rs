//! The call's start and stage 4: its step and its count in one request to
//! the store, the loop guard, and what is recorded of a side effect's key
//! (a replay, an unknown outcome, an identical call in flight).

use std::task::Poll;

use super::Approvals;
use super::call::Call;
use super::execute::replayed;
use super::messages::Failure;
use super::retry::Waiting;
use super::retry::millis;
use super::stages::{Approval, HeldLock, Stage, Stages};
use super::twins::Active;
use crate::policy::{Caller, Taint};
use crate::result::{Code, ToolResult};
use crate::store::{
    CallBegun, CallStart, Key, LockAsk, RecordedOutcome, Store, StoreError, now_ms,
};
use crate::tool::ToolSpec;

impl<St: Store> Stages<St> {
    /// The call's start: its step (the step a dry run would take), and for
    /// a valid call (its tool and key), its count and what else
    /// [`CallStore::begin_call`] found, the `lock` of its one resource (dropped
    /// when the store did not grant it), and its place among its key's
    /// calls in flight (`active`).
    // The call's parts it begins, and the controls' version it was judged
    // by: one argument each, as the pipeline holds them.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn start<'d>(
        &'d self,
        call: &Call<'_>,
        caller: &Caller,
        at_ms: u64,
        valid: Option<(&'static ToolSpec, &Key)>,
        active: &mut Option<Active<'d>>,
        lock: &mut Option<HeldLock>,
        controls: u64,
        claim: Option<u64>,
    ) -> (Result<u64, StoreError>, Option<CallBegun>) {
        if call.dry_run {
            let step = self
                .store
                .peek_step(call.scope)
                .await
                .map(|step| step.saturating_add(1));
            return (step, None);
        }
        let Some((spec, key)) = valid else {
            // A call alone in its conversation keeps no step.
            if call.alone {
                return (Ok(1), None);
            }
            return (self.store.next_step(call.scope, at_ms).await, None);
        };
        *active = Some(self.twins.enter(key));
        let mut start = CallStart::new(call.scope, key, at_ms, self.settings.max_steps);
        start.named = call.session;
        start.max_calls = self.max_repeats(caller, spec);
        start.outcome = spec.side_effect();
        start.taint = spec.side_effect() && caller.policy().taint_level() != Taint::Off;
        // A decision a person recorded on the call (see `pipeline`): asked
        // of any call that may need a person.
        start.questions = spec.high_risk() || start.taint;
        // The operators' controls the call was judged by: counted only if
        // they are still the store's.
        start.controls = Some(controls);
        // A read-only call alone in its conversation keeps no step nor
        // count; a side effect's are kept as always.
        start.alone = call.alone && !spec.side_effect();
        start.lock = lock.as_ref().map(|held| LockAsk {
            resource: &held.resource,
            holder: &held.holder,
            lease_ms: millis(self.lease(spec)),
        });
        start.claim = claim;
        match self.store.begin_call(&start).await {
            Ok(found) => {
                if !found.locked {
                    *lock = None;
                }
                (Ok(found.step), Some(found))
            }
            Err(error) => {
                *lock = None;
                (Err(error), None)
            }
        }
    }

    /// Stage 4, idempotency: the call is counted (a dry run is not: it is
    /// not the model repeating itself), the loop guard looks at the count,
    /// and a side effect's record is looked up. The answer, when it is
    /// already known (a loop, a replay), is the `Err`; otherwise whether the
    /// call ran before with an unknown outcome.
    pub(super) async fn idempotency(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: &'static ToolSpec,
        key: &Key,
        started: Option<&mut CallBegun>,
        active: &mut Active<'_>,
    ) -> Stage<(bool, bool)> {
        let name = call.tool;
        // Counted with the step, when the call began (a dry run is not).
        let calls = started.as_ref().and_then(|found| found.calls).unwrap_or(0);
        let bound = self.max_repeats(caller, spec);
        // What the start read of the key, if it stands: read within the
        // bound, and nothing waited since. Taken, not copied: no stage
        // after this one reads it.
        let mut read = started
            .filter(|_| calls <= bound)
            .map(|found| found.outcome.take().map(replayed));
        let mut waited = false;
        if calls > bound {
            waited = true;
            if let Some(stored) = self.guard_loop(spec, key, bound, active).await? {
                return Err(stored);
            }
        }
        let mut in_doubt = false;
        if spec.side_effect() {
            // An identical call holds the key, here or in another process:
            // wait for what comes of it (its result, its release, or its
            // lease running out: in doubt) before asking anything of
            // anyone, so that a person is never asked afresh about a call
            // that may have run. A dry run does not wait.
            let mut waiting = Waiting::up_to(self.settings.claim_wait);
            let outcome = match read.take() {
                // What the start read is settled (a replay, no record, in
                // doubt): answered here, without starting the wait.
                Some(known)
                    if call.dry_run || !matches!(known, Some(RecordedOutcome::InFlight)) =>
                {
                    Some(known)
                }
                known => {
                    read = known;
                    waiting
                        .until(|| {
                            let known = read.take();
                            async move {
                                let outcome = match known {
                                    Some(outcome) => outcome,
                                    None => self
                                        .recorded(key)
                                        .await
                                        .map_err(|e| self.store_unavailable(name, &e))?,
                                };
                                Ok(match outcome {
                                    Some(RecordedOutcome::InFlight) if !call.dry_run => {
                                        Poll::Pending
                                    }
                                    outcome => Poll::Ready(outcome),
                                })
                            }
                        })
                        .await?
                }
            };
            waited |= waiting.pauses() > 0;
            match outcome {
                None => return Err(self.fail(Failure::CallInProgress, spec.name())),
                Some(Some(RecordedOutcome::Completed(stored))) => return Err(*stored),
                // The same call ran before and its outcome is unknown: it
                // already passed the check, the policy and the approval, so
                // it goes straight to execution, where the outcome is
                // settled first.
                Some(Some(RecordedOutcome::InDoubt)) => in_doubt = true,
                _ => {}
            }
        }
        Ok((in_doubt, waited))
    }

    /// Who approves the call, if anyone yet. An in-doubt call passed stages
    /// 5 to 7 when it first ran, whatever this retry carries (a
    /// confirmation, an approval id: left unused). An approval id is
    /// resolved before anything the host says: a person's denial, edits or
    /// an expiry recorded under it stand whatever `confirmed` says, so the
    /// host's `confirmed` approves only a call that brings no id. In inbox
    /// mode it approves nothing: only a decision in the store does.
    /// `people`: how many distinct people must approve the call; the host's
    /// `confirmed` is one person's word, not enough for more.
    pub(super) fn approval_of<'c>(
        &self,
        call: &Call<'c>,
        in_doubt: bool,
        people: u32,
    ) -> Approval<'c> {
        match (
            call.approval,
            call.confirmed && self.settings.approvals != Approvals::Inbox && people <= 1,
        ) {
            _ if in_doubt => Approval::InDoubt,
            (Some(id), _) => Approval::Id(id),
            (None, true) => Approval::Given,
            (None, false) => Approval::None,
        }
    }

    /// How many identical calls of `spec` the caller may make before
    /// `LOOP_DETECTED`: for a read-only tool, the caller's
    /// `Policy::max_repeats`, else the tool's `#[tool(max_repeats = N)]`;
    /// otherwise, and for every side effect, the dispatcher's setting.
    pub(super) fn max_repeats(&self, caller: &Caller, spec: &'static ToolSpec) -> u64 {
        if spec.side_effect() {
            return self.settings.max_duplicate_calls;
        }
        caller
            .policy()
            .max_repeats_of(spec.name())
            .or(spec.max_repeats())
            .unwrap_or(self.settings.max_duplicate_calls)
    }

    /// Stage 4, a call counted over the limit (`bound`): `LOOP_DETECTED` if every
    /// identical call before it has been answered. While some are still
    /// running in this dispatcher, it waits for them (up to `claim_wait`,
    /// then `CALL_IN_PROGRESS`); once they have answered, a side effect one
    /// of them completed is its answer (`Some`, replayed), and otherwise it
    /// is counted again, as if it had come after them: `None` when it is
    /// within the limit then and goes on.
    async fn guard_loop(
        &self,
        spec: &'static ToolSpec,
        key: &Key,
        bound: u64,
        active: &mut Active<'_>,
    ) -> Stage<Option<ToolResult>> {
        let name = spec.name();
        let mut waiting = Waiting::up_to(self.settings.claim_wait);
        loop {
            // Waiting, this call is not one its twins wait for.
            active.leave();
            let before = waiting.pauses();
            let alone = waiting
                .until(|| async {
                    Ok::<_, ToolResult>(if self.twins.any_active(key) {
                        Poll::Pending
                    } else {
                        Poll::Ready(())
                    })
                })
                .await?;
            if alone.is_none() {
                return Err(self.fail(Failure::CallInProgress, name));
            }
            if waiting.pauses() == before {
                // One call after the other: the count decides, as ever.
                return Err(self.fail(Failure::LoopDetected, name));
            }
            if spec.side_effect()
                && let Some(RecordedOutcome::Completed(stored)) = self
                    .recorded(key)
                    .await
                    .map_err(|error| self.store_unavailable(name, &error))?
            {
                return Ok(Some(*stored));
            }
            // The calls before it took their counts back (a question to a
            // person) or were refused: count this one again.
            active.rejoin();
            self.store
                .uncount_call(key)
                .await
                .map_err(|error| self.store_unavailable(name, &error))?;
            let calls = self
                .store
                .count_call(key, now_ms())
                .await
                .map_err(|error| self.store_unavailable(name, &error))?;
            if calls <= bound {
                return Ok(None);
            }
        }
    }

    /// A call answered with a question to a person, or with a person's
    /// denial, takes its count back: a question is not the model repeating
    /// itself, the approved call that follows the model's asks is not a
    /// loop, and a denial answers every identical call as the person's
    /// (their note included), not as a loop.
    pub(super) async fn uncount_asked(
        &self,
        answer: &Stage<ToolResult>,
        key: &Key,
        name: &str,
    ) -> Stage<()> {
        if let Err(asked) = answer
            && matches!(
                asked.code,
                Code::ConfirmationRequired | Code::InDoubt | Code::ConfirmationDenied
            )
        {
            self.store
                .uncount_call(key)
                .await
                .map_err(|error| self.store_unavailable(name, &error))?;
        }
        Ok(())
    }
}
