//! Stages 0 to 7 of the pipeline, in order; stage 8 is in `execute.rs`.
//! The call they carry once it is valid is in `prepared.rs`, the locks
//! stages 5 to 8 run under in `locks.rs`, what untrusted output taints in
//! `taint.rs`, a dry run's stages 5 to 7 in `dry_run.rs`, stage 7, the
//! question to a person, in `confirm.rs`, and how transient failures are
//! retried in `retry.rs`.

use std::any::Any;
use std::borrow::Cow;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::catch::panic_text;
use super::confirm::Asking;
use super::execute::{Doubt, millis, replayed};
use super::inbox::{Carried, Found};
use super::locks::HeldLock;
use super::messages::{Details, Failure};
use super::prepared::{Approval, Noted, Prepared, Stage};
use super::retry::{Retry, Waiting};
use super::twins::Active;
use super::{Approvals, Call, Dispatcher};
use crate::args::{Constraint, FieldErrors, Members};
use crate::audit::ArgumentProblem;
use crate::canonical::idempotency_key_value;
use crate::error::ToolError;
use crate::parse::{Arguments, RawMembers, member_values, parse_object, raw_members};
use crate::policy::{Caller, Policy, Taint};
use crate::result::{Code, ToolResult};
use crate::store::StoreError;
use crate::store::{CallBegun, CallStart, Key, LockAsk, RecordedOutcome, Store, now_ms};
use crate::tool::{CallContext, ToolSpec, Validated};

/// What the start of a call left for its end: its step, and the lock it
/// took that no stage took over yet (freed once the call is answered).
#[derive(Default)]
struct Begun {
    step: u64,
    lock: Option<HeldLock>,
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// The call's step, its answer, and what the pipeline noted of it for
    /// the audit. `spec` is the registry's tool of the call's name, looked
    /// up once for the pipeline and the audit; stage 1 answers if there is
    /// none. `at_ms` is when the call came: the time its step and its count
    /// are taken at.
    pub(super) async fn run(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: Option<&'static ToolSpec>,
        at_ms: u64,
    ) -> (u64, ToolResult, Noted) {
        let mut noted = Noted::default();
        let mut begun = Begun::default();
        let result = match self
            .pipeline(call, caller, spec, at_ms, &mut noted, &mut begun)
            .await
        {
            Ok(result) | Err(result) => result,
        };
        // A lock the call's start took that no stage took over.
        self.free(call.tool, begun.lock.take()).await;
        (begun.step, result, noted)
    }

    /// Stages 1 to 3, which ask nothing of the store: the call, valid and
    /// ready for the rest, or the answer that refuses it (with the
    /// problems stage 3 found in its arguments). Their answer waits for
    /// stage 0's, which needs the step: the step and the call's count are
    /// then taken at once.
    fn checked<'a>(
        &self,
        call: &Call<'a>,
        caller: &'a Caller,
        spec: Option<&'static ToolSpec>,
        raw: Option<&'a [(Cow<'a, str>, &'a RawValue)]>,
        object: &'a mut Option<Cow<'a, Map<String, Value>>>,
        problems: &mut Vec<ArgumentProblem>,
    ) -> Stage<Prepared<'a>> {
        // 1. Lookup and allowlist.
        let spec = self.allowed(call.tool, spec, caller.policy())?;

        // 2 and 3. Parse and strict validation. The common case, a raw
        // object plainly within the parse's bounds and valid, is read in one
        // pass, each member's text straight into its field's type; anything
        // else takes the full parse and validation, whose errors say all that
        // is wrong. (`raw`: the members of raw arguments, when the text is
        // plainly within the parse's bounds.)
        let fast = raw.and_then(|members| {
            let validated = spec.validate_members(&Members::Raw(members)).ok()?;
            Some((Members::Raw(members), validated))
        });
        match fast {
            Some((members, validated)) => {
                self.prepared(spec, members, validated, call.session, caller, 0, None)
            }
            None => {
                // Refused by the fast path, but read by it: its members,
                // parsed, say every problem without a second parse. (Read as
                // valid that way, the call takes the full parse as before.)
                let values = raw.and_then(|raw| member_values(raw, self.settings.max_depth));
                if let Some(values) = values
                    && let Err(errors) = spec.validate_members(&Members::Values(&values))
                {
                    let refused = self.refused(spec, &errors);
                    *problems = ArgumentProblem::all_of(spec, errors);
                    return Err(refused);
                }
                let object = &*object.insert(self.parse(call)?);
                let validated = self.validate(spec, object).map_err(|(refused, errors)| {
                    *problems = ArgumentProblem::all_of(spec, errors);
                    refused
                })?;
                let members = Members::Parsed(object);
                self.prepared(spec, members, validated, call.session, caller, 0, None)
            }
        }
    }

    async fn pipeline(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: Option<&'static ToolSpec>,
        at_ms: u64,
        noted: &mut Noted,
        begun: &mut Begun,
    ) -> Stage<ToolResult> {
        let name = call.tool;
        let raw = self.raw_members_of(call);
        let mut object = None;
        let mut problems = Vec::new();
        let mut checked = self.checked(
            call,
            caller,
            spec,
            raw.as_deref(),
            &mut object,
            &mut problems,
        );

        // The step. A dry run uses none: it reads the step the real call
        // would be. A valid call's step comes with its count (stage 4),
        // what is recorded of its key, whether its session read untrusted
        // output and its resource's lock: one request to the store.
        // This call is one of its key's calls in flight from before it is
        // counted until it is answered (the guard drops with this frame).
        let mut active = None;
        let (step, started) = self
            .start(call, caller, at_ms, &mut checked, &mut active, begun)
            .await;
        let step = step.map_err(|error| self.store_unavailable(name, &error))?;
        begun.step = step;

        // 0. Step budget.
        if step > self.settings.max_steps {
            return Err(self.fail(Failure::StepLimit, name.to_owned()));
        }

        // 1 to 3, answered now. (The call is borrowed where stage 3 left
        // it, never moved: a second copy would widen this future.)
        noted.problems = problems;
        let prepared = match checked {
            Ok(ref mut prepared) => prepared,
            Err(refused) => return Err(refused),
        };
        prepared.step = step;
        let Noted {
            carried, tainted, ..
        } = noted;

        // 4. Idempotency: the key comes from the validated, canonical arguments.
        // A dry run is not counted: it is not the model repeating itself.
        let mut active = match active {
            Some(active) => active,
            None => self.twins.enter(&prepared.key),
        };
        // What the call's start found is read up to here: it is not kept
        // beside the stages after it.
        let (approval, decided) = self
            .judged(call, caller, prepared, started, &mut active, tainted)
            .await?;
        let approval = match decided.as_deref() {
            Some(id) => Approval::Id(id),
            None => approval,
        };
        if call.dry_run {
            drop(active);
            self.with_arguments(prepared)?;
            return Box::pin(self.dry_run(prepared, approval, tainted.as_deref())).await;
        }

        // 5 to 8.
        // An untrusted tool's own arguments came from the caller, not from
        // the strangers who wrote its output.
        let given = if prepared.spec.untrusted_output() {
            self.with_arguments(prepared)?;
            Some(prepared.arguments().clone())
        } else {
            None
        };
        let answer = match approval {
            // An approval id: a person's decision in the store is carried
            // out as it is, before the check, because their edits replace
            // the call; nobody's yet, stage 7 takes it (Host) or asks again
            // under the same id (Inbox).
            Approval::Id(id) if prepared.needs_person() => {
                Box::pin(self.run_by_id(prepared, id, approval, carried, begun)).await
            }
            _ => {
                // The lock the call's start took goes with the call.
                prepared.lock = begun.lock.take();
                self.decide_and_run(prepared, approval).await
            }
        };
        if let Err(asked) = &answer
            && matches!(asked.code, Code::ConfirmationRequired | Code::InDoubt)
        {
            // A question to a person is not the model repeating itself: the
            // approved call that follows the model's asks is not a loop.
            self.store
                .uncount_call(&prepared.key)
                .await
                .map_err(|error| self.store_unavailable(name, &error))?;
        }
        drop(active);
        if let Ok(result) = &answer {
            self.remember_untrusted(prepared.spec, call.session, caller, given.as_ref(), result)
                .await?;
        }
        answer
    }

    /// Stage 4 and the taint: how the call is approved, if it is (a replay
    /// or a loop is answered here), and the id of a decision a person
    /// already recorded on this exact call. `tainted` is set to the call's
    /// taint.
    async fn judged<'c>(
        &self,
        call: &Call<'c>,
        caller: &Caller,
        prepared: &mut Prepared<'_>,
        started: Option<CallBegun>,
        active: &mut Active<'_>,
        tainted: &mut Option<Vec<String>>,
    ) -> Stage<(Approval<'c>, Option<String>)> {
        // (Given the key, not the call: what the call holds is `Send` but
        // not `Sync`, and is not borrowed across the stage's waits.)
        let (in_doubt, waited) = self
            .idempotency(
                call,
                caller,
                prepared.spec,
                &prepared.key,
                started.as_ref(),
                active,
            )
            .await?;
        // The arguments' JSON is built from here on only by the stages that
        // read it whole (`with_arguments`): a replay or a loop, answered
        // above, never builds it, nor does a confirmed call in a session
        // that read no untrusted output.

        // Taint: a side effect in a session that saw untrusted output, as
        // the caller's level judges it, needs a person's approval at stage
        // 7. What the call's start found of the session stands unless stage
        // 4 waited meanwhile.
        if prepared.spec.side_effect() {
            let known = started
                .as_ref()
                .and_then(|found| found.tainted)
                .filter(|_| !waited);
            *tainted = self.taint_of(prepared, known).await?;
        }
        prepared.tainted.clone_from(tainted);
        let approval = self.approval_of(call, in_doubt);
        // A call that needs a person and brings no id (an MCP client cannot
        // bring one back) learns a decision a person already recorded on
        // this exact call, as if it had brought its id; and a person's
        // decision on it stands over the host's `confirmed` too. Not looked
        // for when the call's start found the session has no decided
        // approval at all (and stage 4 did not wait since).
        let none_decided = started
            .as_ref()
            .and_then(|found| found.decided)
            .is_some_and(|decided| !decided && !waited);
        let decided = match approval {
            Approval::None | Approval::Given
                if !call.dry_run && !none_decided && prepared.needs_person() =>
            {
                Box::pin(self.decided_for(prepared)).await?
            }
            _ => None,
        };
        Ok((approval, decided))
    }

    /// The call's start: its step (the step a dry run would take), and for
    /// a valid call, its count and what else [`Store::begin_call`] found,
    /// the lock of its one resource, and its place among its key's calls
    /// in flight (`active`).
    async fn start<'d>(
        &'d self,
        call: &Call<'_>,
        caller: &Caller,
        at_ms: u64,
        checked: &mut Stage<Prepared<'_>>,
        active: &mut Option<Active<'d>>,
        begun: &mut Begun,
    ) -> (Result<u64, StoreError>, Option<CallBegun>) {
        if call.dry_run {
            let step = self
                .store
                .peek_step(call.session)
                .await
                .map(|step| step.saturating_add(1));
            return (step, None);
        }
        let Ok(prepared) = checked else {
            return (self.store.next_step(call.session, at_ms).await, None);
        };
        begun.lock = self.early_lock(prepared);
        *active = Some(self.twins.enter(&prepared.key));
        let spec = prepared.spec;
        let mut start = CallStart::new(call.session, &prepared.key, at_ms, self.settings.max_steps);
        start.max_calls = self.max_repeats(caller, spec);
        start.outcome = spec.side_effect();
        start.taint = spec.side_effect() && caller.policy().taint_level() != Taint::Off;
        // A decision a person recorded on the call (see `pipeline`): asked
        // of any call that may need a person.
        start.decided = spec.high_risk() || start.taint;
        start.lock = begun.lock.as_ref().map(|lock| LockAsk {
            resource: &lock.resource,
            holder: &lock.holder,
            lease_ms: millis(self.lease(spec)),
        });
        match self.store.begin_call(&start).await {
            Ok(found) => {
                if !found.locked {
                    begun.lock = None;
                }
                (Ok(found.step), Some(found))
            }
            Err(error) => {
                begun.lock = None;
                (Err(error), None)
            }
        }
    }

    /// Stages 5 to 8 of a call that brings an approval id (or learned one):
    /// a person's decision in the store is carried out as it is (a call of
    /// its own, with its own locks); with none yet, the call goes on to
    /// stage 7 under that id. Boxed by the caller: rare, and far larger
    /// than the common path's future, which would otherwise carry it.
    async fn run_by_id(
        &self,
        prepared: &mut Prepared<'_>,
        id: &str,
        approval: Approval<'_>,
        carried: &mut Option<Carried>,
        begun: &mut Begun,
    ) -> Stage<ToolResult> {
        self.with_arguments(prepared)?;
        let found = self
            .find_decision(
                id,
                prepared.spec.name(),
                prepared.arguments(),
                prepared.session,
                prepared.caller,
            )
            .await?;
        match found {
            Found::Decided(decision) => {
                // The decision runs as a call of its own, which takes its
                // own locks.
                self.free(prepared.spec.name(), begun.lock.take()).await;
                *carried = Some(Carried {
                    by: decision.by.clone(),
                    edited: decision
                        .edited_arguments
                        .clone()
                        .filter(|_| decision.approved),
                });
                self.carry_out(id, prepared, &decision).await
            }
            Found::Undecided => {
                prepared.lock = begun.lock.take();
                self.decide_and_run(prepared, approval).await
            }
        }
    }

    /// The members of raw arguments, for the one-pass reading of stages 2
    /// and 3, when the text is plainly within the parse's bounds.
    fn raw_members_of<'a>(&self, call: &Call<'a>) -> Option<RawMembers<'a>> {
        match call.arguments {
            Arguments::Raw(raw) if raw.len() <= self.settings.max_argument_bytes => {
                raw_members(raw, self.settings.max_depth)
            }
            _ => None,
        }
    }

    /// The id of an approval a person already decided for exactly this
    /// call (its session, caller, tool, arguments and reason), unused and
    /// unexpired: what the call carries out in place of a new question.
    async fn decided_for(&self, prepared: &mut Prepared<'_>) -> Stage<Option<String>> {
        self.with_arguments(prepared)?;
        let name = prepared.spec.name();
        let digest = crate::canonical::digest(prepared.arguments());
        let binding = crate::store::Binding {
            session: prepared.session,
            caller: prepared.caller.id(),
            tool: Some(name),
            digest: Some(&digest),
        };
        let reason = prepared
            .tainted
            .as_ref()
            .map(|_| super::confirm::UNTRUSTED_CONTEXT);
        let found = self
            .store
            .find_approval(&binding, reason, now_ms())
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        Ok(found
            .filter(|entry| entry.approval.decision.is_some())
            .map(|entry| entry.approval.id))
    }

    /// Stage 2, the full parse: an object, bounded, no duplicate members.
    fn parse<'a>(&self, call: &Call<'a>) -> Stage<std::borrow::Cow<'a, Map<String, Value>>> {
        parse_object(
            call.arguments,
            self.settings.max_argument_bytes,
            self.settings.max_depth,
        )
        .map_err(|error| {
            let error = error.to_string();
            self.fail_with(
                Failure::InvalidJson,
                call.tool.to_owned(),
                &Details::detail(&error),
                Map::new(),
            )
        })
    }

    /// Stage 4, idempotency: the call is counted (a dry run is not: it is
    /// not the model repeating itself), the loop guard looks at the count,
    /// and a side effect's record is looked up. The answer, when it is
    /// already known (a loop, a replay), is the `Err`; otherwise whether the
    /// call ran before with an unknown outcome.
    async fn idempotency(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: &'static ToolSpec,
        key: &Key,
        started: Option<&CallBegun>,
        active: &mut Active<'_>,
    ) -> Stage<(bool, bool)> {
        let name = call.tool;
        // Counted with the step, when the call began (a dry run is not).
        let calls = started.and_then(|found| found.calls).unwrap_or(0);
        let bound = self.max_repeats(caller, spec);
        // What the start read of the key, if it stands: read within the
        // bound, and nothing waited since.
        let mut read = started
            .filter(|_| calls <= bound)
            .map(|found| found.outcome.clone().map(replayed));
        let mut waited = false;
        if calls > bound {
            waited = true;
            if let Some(stored) = self.guard_loop(spec, key, bound, active).await? {
                return Err(stored);
            }
        }
        let mut in_doubt = false;
        if spec.side_effect() {
            let mut waiting = None;
            loop {
                let outcome = match read.take() {
                    Some(outcome) => outcome,
                    None => self
                        .recorded(key)
                        .await
                        .map_err(|e| self.store_unavailable(name, &e))?,
                };
                match outcome {
                    Some(RecordedOutcome::Completed(stored)) => return Err(stored),
                    // The same call ran before and its outcome is unknown:
                    // it already passed the check, the policy and the
                    // approval, so it goes straight to execution, where
                    // the outcome is settled first.
                    Some(RecordedOutcome::InDoubt) => in_doubt = true,
                    // An identical call holds the key, here or in another
                    // process: wait for what comes of it (its result, its
                    // release, or its lease running out: in doubt) before
                    // asking anything of anyone, so that a person is never
                    // asked afresh about a call that may have run. A dry
                    // run does not wait.
                    Some(RecordedOutcome::InFlight) if !call.dry_run => {
                        let waiting =
                            waiting.get_or_insert_with(|| Waiting::up_to(self.settings.claim_wait));
                        if waiting.over() {
                            return Err(self.fail(Failure::CallInProgress, spec.name()));
                        }
                        waited = true;
                        waiting.pause().await;
                        continue;
                    }
                    _ => {}
                }
                break;
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
    fn approval_of<'c>(&self, call: &Call<'c>, in_doubt: bool) -> Approval<'c> {
        match (call.approval, call.confirmed && !self.inbox()) {
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
    fn max_repeats(&self, caller: &Caller, spec: &'static ToolSpec) -> u64 {
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
        let mut waited = false;
        loop {
            // Waiting, this call is not one its twins wait for.
            active.leave();
            if !self.twins.any_active(key) {
                if !waited {
                    // One call after the other: the count decides, as ever.
                    return Err(self.fail(Failure::LoopDetected, name));
                }
                if spec.side_effect()
                    && let Some(RecordedOutcome::Completed(stored)) = self
                        .recorded(key)
                        .await
                        .map_err(|error| self.store_unavailable(name, &error))?
                {
                    return Ok(Some(stored));
                }
                // The calls before it took their counts back (a question to
                // a person) or were refused: count this one again.
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
                waited = false;
                continue;
            }
            if waiting.over() {
                return Err(self.fail(Failure::CallInProgress, name));
            }
            waited = true;
            waiting.pause().await;
        }
    }

    /// Stage 3, and the key: validated arguments, ready for the rest.
    /// `key_from` replaces the arguments as the key's source (an approval's id).
    pub(super) fn prepare<'a>(
        &self,
        spec: &'static ToolSpec,
        object: &'a Map<String, Value>,
        session: &'a str,
        caller: &'a Caller,
        step: u64,
        key_from: Option<&str>,
    ) -> Stage<Prepared<'a>> {
        let validated = self
            .validate(spec, object)
            .map_err(|(refused, _)| refused)?;
        let members = Members::Parsed(object);
        let mut prepared =
            self.prepared(spec, members, validated, session, caller, step, key_from)?;
        // The approvals' paths, which read them whole.
        self.with_arguments(&mut prepared)?;
        Ok(prepared)
    }

    /// Stage 3 over a parsed object: the validated arguments, or the answer
    /// that names every problem, with the problems themselves.
    fn validate(
        &self,
        spec: &'static ToolSpec,
        object: &Map<String, Value>,
    ) -> Result<Box<dyn Validated>, (ToolResult, FieldErrors)> {
        spec.validate(object)
            .map_err(|errors| (self.refused(spec, &errors), errors))
    }

    /// The answer to arguments with `errors`: every problem, as the model
    /// reads them.
    fn refused(&self, spec: &'static ToolSpec, errors: &FieldErrors) -> ToolResult {
        self.messages.answer_with_detail(
            Failure::InvalidArguments,
            spec.name(),
            errors.text(),
            Map::new(),
        )
    }

    /// The key and the rest, for arguments that passed validation; their
    /// JSON is left to [`with_arguments`](Self::with_arguments).
    #[allow(clippy::too_many_arguments)]
    fn prepared<'a>(
        &self,
        spec: &'static ToolSpec,
        members: Members<'a>,
        validated: Box<dyn Validated>,
        session: &'a str,
        caller: &'a Caller,
        step: u64,
        key_from: Option<&str>,
    ) -> Stage<Prepared<'a>> {
        let name = spec.name();
        let unserializable = |error: serde_json::Error| {
            tracing::error!(tool = name, %error, "validated arguments do not serialize");
            self.fail(Failure::InternalError, name)
        };
        let key = match key_from {
            Some(approval) => {
                idempotency_key_value(session, name, &Value::from(format!("approval:{approval}")))
            }
            None => validated.key(session, name).map_err(unserializable)?,
        };
        Ok(Prepared {
            spec,
            validated: Some(validated),
            members,
            arguments: None,
            tainted: None,
            key,
            settled: false,
            session,
            caller,
            step,
            lock: None,
            resources: None,
        })
    }

    /// Builds the JSON arguments of a call, once, for the stages that read
    /// them whole: the taint of a session that read untrusted output, a
    /// question to a person, an approval's binding, an untrusted tool's own
    /// arguments, the redaction of a stored result, a dry run's answer. (The
    /// limits and the resource locks read single fields: [`Prepared::member`].)
    pub(super) fn with_arguments(&self, prepared: &mut Prepared<'_>) -> Stage<()> {
        if prepared.arguments.is_none() {
            let name = prepared.spec.name();
            let Some(typed) = prepared.typed() else {
                return Err(self.fail(Failure::InternalError, name));
            };
            let value = typed.to_value().map_err(|error| {
                tracing::error!(tool = name, %error, "validated arguments do not serialize");
                self.fail(Failure::InternalError, name)
            })?;
            prepared.arguments = Some(value);
        }
        Ok(())
    }

    /// Stages 5 to 8, with the call's resources locked. The call is
    /// borrowed, not moved, down the stages: each level's future would
    /// otherwise hold its own copy of it.
    pub(super) async fn decide_and_run_locked(
        &self,
        prepared: &mut Prepared<'_>,
        approval: Approval<'_>,
    ) -> Stage<ToolResult> {
        let key = prepared.key;
        let cx = self.call_context(prepared, &key);
        if let Approval::InDoubt = approval {
            let doubt = if prepared.settled {
                Doubt::Rerun
            } else {
                Doubt::Unknown
            };
            return self.run_retrying(prepared, &cx, doubt).await;
        }

        self.check_and_limits(prepared, &cx).await?;

        // 7. Confirmation, from the host only: of a high-risk call, and of
        // a side effect tainted by untrusted output. One the host confirmed
        // needs nothing more.
        if prepared.needs_person() && !matches!(approval, Approval::Given) {
            self.with_arguments(prepared)?;
            let asking = Asking::of(prepared, prepared.tainted.as_deref());
            // Boxed: a question to a person (or an approval by id) is the
            // rarer path, and its future would widen every call's.
            Box::pin(self.confirm(asking, approval)).await?;
        }

        // 8. Execution.
        self.run_retrying(prepared, &cx, Doubt::No).await
    }

    /// Stage 5, one attempt of the business check: `Some(wait)` to try
    /// again after `wait` (a transient failure, within the retry policy's
    /// bound; `retries` counts them). A check has no side effects: one that
    /// fails transiently is retried like the handler.
    fn check_once(
        &self,
        name: &'static str,
        validated: &dyn Validated,
        cx: &CallContext<'_>,
        retries: &mut u32,
    ) -> Stage<Option<Duration>> {
        match catch_unwind(AssertUnwindSafe(|| validated.check(cx))) {
            Ok(Ok(())) => Ok(None),
            Ok(Err(ToolError::Transient(error))) => {
                let Some(wait) = Retry::of(&self.settings).next(*retries) else {
                    return Err(self.failure_of(name, ToolError::Transient(error)));
                };
                tracing::warn!(tool = name, retries = *retries, %error, "the check failed transiently");
                *retries += 1;
                Ok(Some(wait))
            }
            Ok(Err(error)) => Err(self.failure_of(name, error)),
            Err(panic) => {
                tracing::error!(
                    tool = name,
                    panic = panic_text(&panic),
                    "the check panicked"
                );
                Err(self.fail(Failure::InternalError, name))
            }
        }
    }

    /// What the check, the preview and the handler see of the call.
    /// `key` is the call's key, copied out of it: the context borrows its
    /// text (a tool that takes a `Ctx` copies it, no other does) while the
    /// stages borrow the call mutably.
    pub(super) fn call_context<'a>(
        &'a self,
        prepared: &Prepared<'a>,
        key: &'a Key,
    ) -> CallContext<'a> {
        CallContext {
            state: &self.erased_state,
            idempotency_key: key.as_str(),
            session: shared_session(prepared.session),
            caller: prepared.caller,
        }
    }

    /// Stage 5, the business check (a transient failure retried like the
    /// handler), and stage 6, the policy limits declared on the arguments.
    /// The call is borrowed mutably: what it holds (the validated
    /// arguments) is `Send` but not `Sync`, so a shared borrow could not be
    /// held across the wait between attempts.
    pub(super) async fn check_and_limits(
        &self,
        prepared: &mut Prepared<'_>,
        cx: &CallContext<'_>,
    ) -> Stage<()> {
        let name = prepared.spec.name();
        let mut retries: u32 = 0;
        loop {
            let Some(typed) = prepared.typed() else {
                return Err(self.fail(Failure::InternalError, name));
            };
            let Some(wait) = self.check_once(name, typed, cx, &mut retries)? else {
                break;
            };
            if !wait.is_zero() {
                super::retry::sleep(wait).await;
            }
        }
        check_limits(prepared).map_err(|over| match over {
            Some(over) => self.fail_with(over.failure, name, &over.details(), Map::new()),
            None => self.fail(Failure::InternalError, name),
        })?;
        Ok(())
    }
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Stage 1: the tool, if it exists and the caller may use it.
    pub(super) fn resolve(&self, name: &str, policy: &Policy) -> Stage<&'static ToolSpec> {
        self.allowed(name, self.registry.get(name), policy)
    }

    /// Stage 1, given what the registry holds under `name`.
    fn allowed(
        &self,
        name: &str,
        found: Option<&'static ToolSpec>,
        policy: &Policy,
    ) -> Stage<&'static ToolSpec> {
        let Some(spec) = found else {
            let available: Vec<Value> = policy.allowed().map(Value::from).collect();
            let mut data = Map::new();
            data.insert("available".into(), Value::from(available));
            return Err(self.fail_with(
                Failure::UnknownTool,
                name.to_owned(),
                &Details::default(),
                data,
            ));
        };
        if !policy.allows(name) {
            // The registry's name, which is the call's.
            return Err(self.fail(Failure::ToolNotAllowed, spec.name()));
        }
        Ok(spec)
    }
}

/// Why stage 6 refused a call.
struct OverLimit {
    failure: Failure,
    field: &'static str,
    limit: &'static str,
    limit_value: Option<i64>,
    value: Value,
}

impl OverLimit {
    fn details(&self) -> Details<'_> {
        Details {
            field: Some(self.field),
            limit: Some(self.limit),
            limit_value: self.limit_value,
            value: Some(&self.value),
            ..Details::default()
        }
    }
}

/// Stage 6: every argument declared with `#[arg(limit = "...")]` within the
/// caller's limit of that name. A limit the policy does not set fails
/// closed, and so do arguments that cannot be read (`Err(None)`).
fn check_limits(prepared: &mut Prepared<'_>) -> Result<(), Option<OverLimit>> {
    let (spec, caller) = (prepared.spec, prepared.caller);
    for (index, field) in spec.fields().iter().enumerate() {
        for constraint in field.constraints {
            let Constraint::Limit(limit_name) = constraint else {
                continue;
            };
            let value = prepared.member(index).map_err(|()| None)?;
            if value.is_null() {
                continue;
            }
            let Some(limit) = caller.policy().limit_of(limit_name) else {
                return Err(Some(OverLimit {
                    failure: Failure::LimitNotSet,
                    field: field.name,
                    limit: limit_name,
                    limit_value: None,
                    value,
                }));
            };
            let over = match value.as_i64() {
                Some(n) => n > limit,
                None => value.as_f64().is_none_or(|x| x > limit as f64),
            };
            if over {
                return Err(Some(OverLimit {
                    failure: Failure::OverLimit,
                    field: field.name,
                    limit: limit_name,
                    limit_value: Some(limit),
                    value,
                }));
            }
        }
    }
    Ok(())
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    pub(super) fn inbox(&self) -> bool {
        self.settings.approvals == Approvals::Inbox
    }
}

/// `session` as the context's `Arc<str>`: the thread's last one again when
/// it is the same (the calls of a conversation come one after another), so
/// that a session's text is copied once, not once per call. The Arc is
/// only ever read; a thread keeps its last session's text alive.
fn shared_session(session: &str) -> Arc<str> {
    use std::cell::RefCell;
    thread_local! {
        static LAST: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    }
    let fresh = || Arc::<str>::from(session);
    LAST.try_with(|last| {
        let Ok(mut last) = last.try_borrow_mut() else {
            return fresh();
        };
        match &*last {
            Some(text) if **text == *session => Arc::clone(text),
            _ => Arc::clone(last.insert(fresh())),
        }
    })
    .unwrap_or_else(|_| fresh())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::shared_session;

    #[test]
    fn a_session_is_shared_while_it_repeats_and_never_mistaken_for_another() {
        let first = shared_session("conversation-1");
        let again = shared_session("conversation-1");
        assert!(Arc::ptr_eq(&first, &again), "the same text, copied once");
        for (session, expected) in [
            ("conversation-2", "conversation-2"),
            ("conversation-1", "conversation-1"),
            ("conversation-10", "conversation-10"),
            ("", ""),
            ("conversation-1", "conversation-1"),
        ] {
            assert_eq!(&*shared_session(session), expected);
        }
        let other_thread = std::thread::spawn(|| shared_session("conversation-3"))
            .join()
            .unwrap();
        assert_eq!(&*other_thread, "conversation-3");
        assert_eq!(&*shared_session("conversation-1"), "conversation-1");
    }
}
