//! The read-only lane: the way of a call that can change nothing and can
//! carry nothing in, read top to bottom in one place.
//!
//! A call takes it when its tool has no side effect (so no claim, no
//! recorded outcome, no resource lock), does not return untrusted output
//! (nothing for its conversation to remember), needs no person (not high
//! risk, no second approver from the operators' controls), is no dry run and
//! brings no question's id. Everything such a call is owed is the same as on
//! the driver's way: the operators' controls, stages 0 to 3 and the step
//! with its count ran before it branches here; the loop guard, the business
//! check, the policy limits and the handler's retries run below; the answer
//! is fitted and audited by `execute` as any other.
//!
//! What it leaves out are the hand-offs the driver makes for calls that can
//! use them and a read never can: the session's taint (only a side effect is
//! tainted), the look for a person's decision, the approval's branches, the
//! locks, the claim and the recorded outcome, taking back a count of a
//! question, and remembering untrusted output. Each of those answers "not
//! this call" when asked of a read; here they are not asked, and their
//! futures are not laid out inside this one.

use std::any::Any;

use super::Dispatcher;
use super::arguments::Prepared;
use super::call::Call;
use super::stages::Stage;
use super::twins::Active;
use crate::policy::Caller;
use crate::result::ToolResult;
use crate::store::{CallBegun, Store};

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Whether `prepared`, made from `call`, takes the read-only lane.
    pub(super) fn reads_only(call: &Call<'_>, prepared: &Prepared<'_>) -> bool {
        let spec = prepared.spec;
        !spec.side_effect()
            && !spec.untrusted_output()
            && !prepared.needs_person()
            && !call.dry_run
            && call.approval.is_none()
    }

    /// Stages 4 to 8 of a call that [reads only](Self::reads_only): the
    /// loop guard (only when the call's count is over its bound), the
    /// business check and the policy limits, then the handler with its
    /// retries. `started` is what the call's start found (its count).
    pub(super) async fn read_only(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        prepared: &mut Prepared<'_>,
        mut started: Option<CallBegun>,
        active: &mut Active<'_>,
    ) -> Stage<ToolResult> {
        let spec = prepared.spec;
        let counted = started.as_ref().and_then(|found| found.calls);
        if counted.is_some_and(|calls| calls > self.stages.max_repeats(caller, spec)) {
            // Over its bound: a loop, once the identical calls before it
            // have answered (the guard waits for them).
            self.stages
                .idempotency(call, caller, spec, &prepared.key, started.as_mut(), active)
                .await?;
        }
        let key = prepared.key;
        let cx = self.call_context(prepared, &key);
        self.stages.check_and_limits(prepared, &cx).await?;
        let validated = prepared.validated.take();
        match self
            .stages
            .run_attempts(spec, validated, &prepared.members, &cx)
            .await
        {
            Ok(data) => Ok(ToolResult::success(spec.name(), data)),
            Err(unfinished) => Err(unfinished.into_result()),
        }
    }
}
