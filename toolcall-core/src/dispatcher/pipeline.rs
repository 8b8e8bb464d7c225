//! A call's way through the dispatcher: its entry ([`Dispatcher::execute`]),
//! the driver, and its audit record. The driver is the one place that puts
//! the stages in order, top to bottom, for every way a call comes in (a
//! call, a dry run, a call that brings a person's decision, an approved
//! call, an edited call); the host's decisions enter in `approval.rs`.
//! Each stage is a leaf, a method of [`Stages`](super::stages::Stages) in a
//! file of its own, that takes what it needs and returns a value; none
//! calls back here.
//!
//! | stage | leaf |
//! |---|---|
//! | 0, 4: step, count, loop guard, recorded outcome | `idempotency.rs` |
//! | 1 to 3: lookup, parse, validation, key | `arguments.rs` |
//! | taint of untrusted output | `taint.rs` |
//! | 5, 6: business check, policy limits | `rules.rs` |
//! | resource locks | `locks.rs` |
//! | 7: a person's approval | `confirm.rs`, `inbox.rs` |
//! | 8: execution | `execute.rs` |
//! | a dry run's answers | `dry_run.rs` |
//! | 4 to 8 of a call that can change nothing | `read_only.rs` |
//!
//! The retry policy and the one wait loop are in `retry.rs`.

use std::any::Any;
use std::pin::pin;
use std::time::Instant;

use serde_json::{Map, Value};

use super::Dispatcher;
use super::arguments::Prepared;
use super::asked::Doubt;
use super::audited::{Called, call_span, in_span};
use super::call::Call;
use super::confirm::Asking;
use super::execute::while_renewing;
use super::messages::{Details, Failure};
use super::stages::{Approval, AuditNotes, CallStart, DecisionNote, Stage, Stages};
use super::taint::SessionTaint;
use super::twins::Active;
use crate::controls::Current;
use crate::policy::{Caller, Policy};
use crate::result::ToolResult;
use crate::store::{CallBegun, RecordedOutcome, Store};
use crate::tool::ToolSpec;

/// How often a call starts again because the operators' controls changed
/// under it, before it is refused (`STORE_UNAVAILABLE`).
const MAX_CONTROLS_RETRIES: u32 = 4;

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Runs one call through the whole pipeline and audits it.
    pub async fn execute(&self, call: Call<'_>) -> ToolResult {
        let started = Instant::now();
        let at_ms = crate::store::now_ms();
        let caller = call.caller.unwrap_or(&self.caller);
        let spec = self.registry.get(call.tool);
        // What the host supplies is bounded once, here, and is that text
        // everywhere after (the key, the store, the audit, the inbox).
        let call_id = call
            .call_id
            .map(|id| crate::echo::bound(id, crate::echo::MAX_CALL_ID_BYTES));
        let span = call_span(Some(call.tool), spec, call_id.as_deref());
        let call = match (call.named, self.stages.settings.default_session.as_deref()) {
            (true, _) => call,
            (false, Some(session)) => call.session(session),
            (false, None) => {
                return self.unnamed(&call, caller, spec, started, at_ms, &span);
            }
        };
        let session = crate::echo::bound(call.session, crate::echo::MAX_ID_BYTES);
        // The store's conversation: the session, or (the default) the
        // session scoped to its caller, made once per conversation and
        // thread (`Settings::conversation_scope`).
        let scoped;
        let scope: &str = if self.stages.settings.callers_share_conversations {
            &session
        } else {
            scoped = super::ids::caller_scope(caller.id(), &session);
            &scoped
        };
        let call = Call {
            session: &session,
            scope,
            call_id: call_id.as_deref(),
            ..call
        };
        // Not boxed: the pipeline's future (some 2.7 KB) is laid out in
        // this one, which the caller places (on its stack, in its task). A
        // box of that size is a large-bin allocation for the system
        // allocator on every call, costlier than the copy it would spare.
        // Pinned where it is made and polled in the span, rather than moved
        // into an `Instrumented`: the future is not copied again.
        // The answer and the audit's notes are written here by the pipeline
        // rather than returned up through its layers: each layer's return
        // was a copy of the answer (160 bytes) and of the notes (144).
        let mut noted = AuditNotes::default();
        let mut answer = None;
        let step = {
            let running = pin!(self.run(&call, caller, spec, at_ms, &mut noted, &mut answer));
            in_span(&span, running).await
        };
        // `run` answers on every way out; were one to forget, the call
        // is refused, not a panic.
        let mut result = answer.unwrap_or_else(|| {
            self.stages
                .fail(Failure::InternalError, call.tool.to_owned())
        });
        let called = Called {
            session: call.session,
            caller,
            step,
            started,
            at_ms,
        };
        self.audit_call(&call, spec, &called, &mut result, noted, &span);
        result
    }

    /// The call's step; its answer is left in `answer`, and what the
    /// pipeline noted of it for the audit in `noted` (empty when the
    /// operators' controls refuse it on a retry). `spec` is the registry's
    /// tool of the call's name, looked up once for the pipeline and the
    /// audit; stage 1 answers if there is none. `at_ms` is when the call
    /// came: the time its step and its count are taken at.
    async fn run(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: Option<&'static ToolSpec>,
        at_ms: u64,
        noted: &mut AuditNotes,
        answer: &mut Option<ToolResult>,
    ) -> u64 {
        let mut attempts = 0;
        loop {
            *noted = AuditNotes::default();
            let mut begun = CallStart::default();
            *answer = Some(
                match self
                    .pipeline(call, caller, spec, at_ms, noted, &mut begun)
                    .await
                {
                    Ok(result) | Err(result) => result,
                },
            );
            // A claim and a lock the call's start took that no stage took
            // over: the call did not run.
            if let Some(key) = begun.claimed.take() {
                self.stages.release(call.tool, &key).await;
            }
            self.stages.free(call.tool, begun.lock.take()).await;
            if !begun.controls_moved {
                return begun.step;
            }
            // The operators' controls changed since this process read
            // them, and nothing was counted: read them, and start again.
            attempts += 1;
            if let Err(refused) = self.stages.controls(call.tool).await {
                *noted = AuditNotes::default();
                *answer = Some(refused);
                return 0;
            }
            if attempts >= MAX_CONTROLS_RETRIES {
                let busy = crate::store::StoreError::new(
                    "the operators' controls changed at every try of this call",
                );
                *noted = AuditNotes::default();
                *answer = Some(self.stages.store_unavailable(call.tool, &busy));
                return 0;
            }
        }
    }

    async fn pipeline(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: Option<&'static ToolSpec>,
        at_ms: u64,
        noted: &mut AuditNotes,
        begun: &mut CallStart,
    ) -> Stage<ToolResult> {
        let name = call.tool;
        let (narrowed, current) = self.judged_by_controls(call, caller, spec, begun).await?;
        let version = current.version;
        let caller = narrowed.as_ref().unwrap_or(caller);
        let raw = self.stages.raw_members_of(call);
        let mut object = None;
        let mut problems = Vec::new();
        let mut checked = self.stages.checked(
            call,
            caller,
            spec,
            raw.as_deref(),
            &mut object,
            &mut problems,
            &current.controls,
        );
        drop(current);
        let mut active = None;
        let (step, started) = self
            .begin(
                call,
                caller,
                at_ms,
                &mut checked,
                &mut active,
                begun,
                version,
            )
            .await?;
        // 0. Step budget.
        if step > self.stages.settings.max_steps {
            return Err(self.stages.fail(Failure::StepLimit, name.to_owned()));
        }

        // 1 to 3, answered now. (The call is borrowed where stage 3 left
        // it, never moved: a second copy would widen this future.)
        noted.problems = problems;
        let prepared = match checked {
            Ok(ref mut prepared) => prepared,
            Err(refused) => return Err(refused),
        };
        prepared.step = step;
        prepared.client_answers = call.client_answers;
        let (carried, tainted) = (&mut noted.carried, &mut noted.tainted);

        // 4. Idempotency: the key comes from the validated, canonical arguments.
        // A dry run is not counted: it is not the model repeating itself.
        let mut active = match active {
            Some(active) => active,
            None => self.stages.twins.enter(&prepared.key),
        };
        if Self::reads_only(call, prepared) {
            return self
                .read_only(call, caller, prepared, started, &mut active)
                .await;
        }
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
            return Box::pin(self.dry_run(prepared, approval, tainted.as_deref())).await;
        }

        // 5 to 8.
        // An untrusted tool's own arguments came from the caller, not from
        // the strangers who wrote its output.
        let json = || self.stages.json(prepared).cloned();
        let given = prepared.spec.untrusted_output().then(json).transpose()?;
        let mut answer = self
            .decide_by_approval(prepared, approval, carried, begun)
            .await;
        if let Ok(result) = &mut answer {
            Stages::<St>::mark_untrusted(prepared.spec, result);
        }
        self.stages
            .uncount_asked(&answer, &prepared.key, name)
            .await?;
        drop(active);
        self.leave_taint(call, caller, prepared.spec, given.as_ref(), &answer)
            .await?;
        answer
    }

    /// What an untrusted tool's answer leaves for the calls after it in
    /// its conversation.
    async fn leave_taint(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: &'static ToolSpec,
        given: Option<&Value>,
        answer: &Stage<ToolResult>,
    ) -> Stage<()> {
        // A conversation of one call has no call after it to taint.
        if let Ok(result) = answer
            && !call.alone
        {
            self.stages
                .remember_untrusted(spec, call.scope, caller, given, call.call_id, result)
                .await?;
        }
        Ok(())
    }

    /// The operators' controls, before anything is counted: a stop, the
    /// caller's policy as they narrow it (`Some` when they do), the rate
    /// limits (of a call the caller may make); and the controls it was
    /// judged by (the stages after it read them, not the held ones again).
    /// Those this process read last judge the call, and the
    /// store makes sure of their version as the call begins (nothing is
    /// counted otherwise, and the call starts again with the new ones): no
    /// request of its own. A dry run, which begins nothing, and a call a
    /// rate limit may count (a count cannot be taken back) read them first.
    async fn judged_by_controls(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: Option<&'static ToolSpec>,
        begun: &mut CallStart,
    ) -> Stage<(Option<Caller>, Current)> {
        let name = call.tool;
        let held = self.stages.held_current();
        // A call that brings a question's id carries out what was asked
        // once, and counted then: it is not a new call for a rate limit.
        let counted = call.approval.is_none();
        let fresh = call.dry_run || (counted && !held.controls.rate_limits.is_empty());
        let current = if fresh {
            self.stages.controls(name).await?
        } else {
            held
        };
        let controls = &*current.controls;
        if let Some(stop) = controls.stopped(name, caller.id()) {
            // A stop this process read earlier may have been lifted since:
            // a call is refused by the controls as the store has them.
            if !fresh && self.stages.controls(name).await?.version != current.version {
                begun.controls_moved = true;
                return Err(self.stages.fail(Failure::StoreUnavailable, name.to_owned()));
            }
            return Err(self.stages.stopped(name, stop));
        }
        let narrowed = controls.narrow(caller);
        let caller = narrowed.as_ref().unwrap_or(caller);
        if counted
            && spec.is_some()
            && caller.policy().allows(name)
            && !controls.rate_limits.is_empty()
        {
            self.stages
                .rate_limits(controls, name, caller.id(), call.dry_run)
                .await?;
        }
        Ok((narrowed, current))
    }

    /// The call's step and what its start found, in one request to the
    /// store: a valid call's step comes with its count (stage 4), what is
    /// recorded of its key, whether its session read untrusted output and
    /// its resource's lock. A dry run uses none: it reads the step the real
    /// call would be. The call is one of its key's calls in flight (in
    /// `active`) from before it is counted until it is answered.
    #[allow(clippy::too_many_arguments)] // one call's parts, each needed
    async fn begin<'d>(
        &'d self,
        call: &Call<'_>,
        caller: &Caller,
        at_ms: u64,
        checked: &mut Stage<Prepared<'_>>,
        active: &mut Option<Active<'d>>,
        begun: &mut CallStart,
        version: u64,
    ) -> Stage<(u64, Option<CallBegun>)> {
        let name = call.tool;
        let mut claim = None;
        // The lock the start asks for (of a store a request away, where it
        // saves one), here until the start says it took it: a start that
        // finds the key completed (a replay) takes none, and its lock is
        // not boxed for nothing. Only a side effect's is set (or read back
        // below): the slot is 168 bytes, a copy each time.
        let mut early = None;
        let valid = match checked {
            Ok(prepared) if !call.dry_run => {
                if prepared.spec.side_effect() && self.stages.store.locks_at_start() {
                    early = prepared.early_lock();
                }
                // Its lease runs from the call's time, as the lock's does.
                claim = self.claims_at_start(call, prepared).then(|| {
                    at_ms.saturating_add(super::retry::millis(self.stages.lease(prepared.spec)))
                });
                Some((prepared.spec, &prepared.key))
            }
            _ => None,
        };
        let began = valid.is_some();
        // A call refused before its start counts a step without it: the
        // controls it was judged by are made sure of first.
        if valid.is_none() && !call.dry_run && self.stages.controls(name).await?.version != version
        {
            begun.controls_moved = true;
            return Err(self.stages.fail(Failure::StoreUnavailable, name.to_owned()));
        }
        let (step, started) = self
            .stages
            .start(
                call, caller, at_ms, valid, active, &mut early, version, claim,
            )
            .await;
        if let Some(lock) = early {
            begun.lock = Some(Box::new(lock));
        }
        if started.as_ref().is_some_and(|found| found.claimed)
            && let Ok(prepared) = checked
        {
            begun.claimed = Some(prepared.key);
            prepared.claimed = claim;
        }
        if started.as_ref().is_some_and(|found| found.controls_moved) {
            begun.controls_moved = true;
            return Err(self.stages.fail(Failure::StoreUnavailable, name.to_owned()));
        }
        let step = step.map_err(|error| self.stages.store_unavailable(name, &error))?;
        begun.step = step;
        if began {
            crate::crash::point(crate::crash::AFTER_START);
        }
        Ok((step, started))
    }

    /// Whether the call's start is to claim its key too (on a store that
    /// can, one durable commit rather than two): a side effect that will go
    /// on to stage 8 unless a check, a limit or what the start finds stops
    /// it. Its approval as stage 7 will judge it (`approval_of`, with no
    /// doubt found: a key in doubt is not free, and is never claimed at
    /// the start): given, or none needed. Not a call a person must approve
    /// or that carries a question's id, nor one whose unknown outcome only a
    /// person could settle (its claim keeps a question: stage 8 takes it).
    fn claims_at_start(&self, call: &Call<'_>, prepared: &Prepared<'_>) -> bool {
        let spec = prepared.spec;
        let approved = match self.stages.approval_of(call, false, prepared.people) {
            Approval::Given => true,
            Approval::None => !prepared.needs_person(),
            Approval::Id(_) | Approval::InDoubt => false,
        };
        spec.side_effect() && !super::asked::unprotected(spec) && approved
    }

    /// Stages 5 to 8, by what approves the call: a question's id whose
    /// decision is carried out (or taken by stage 7), an id the call must
    /// own, or none.
    async fn decide_by_approval(
        &self,
        prepared: &mut Prepared<'_>,
        approval: Approval<'_>,
        carried: &mut Option<DecisionNote>,
        begun: &mut CallStart,
    ) -> Stage<ToolResult> {
        let answer = match approval {
            // An approval id: a person's decision in the store is carried
            // out as it is, before the check, because their edits replace
            // the call; nobody's yet, stage 7 takes it (Host) or asks again
            // under the same id (Inbox).
            Approval::Id(id) if prepared.needs_person() => {
                Box::pin(self.run_by_id(prepared, id, approval, carried, begun)).await
            }
            // An id no question of this call has is refused, never ignored.
            Approval::Id(id) => {
                let arguments = self.stages.json(prepared)?;
                let owned = self.stages.own_approval(
                    id,
                    prepared.spec.name(),
                    arguments,
                    prepared.session,
                    prepared.caller,
                );
                match Box::pin(owned).await {
                    Ok(()) => {
                        prepared.lock = begun.lock.take();
                        self.decide_and_run(prepared, approval).await
                    }
                    Err(refused) => Err(refused),
                }
            }
            _ => {
                // The lock the call's start took goes with the call; so
                // does its claim, which stays the start's to give back
                // unless stage 8 took it over.
                prepared.lock = begun.lock.take();
                let answer = self.decide_and_run(prepared, approval).await;
                if prepared.claimed.is_none() {
                    begun.claimed = None;
                }
                answer
            }
        };
        // An approval by a rule of the operators' controls is audited as
        // the rule's.
        if let Some(rule) = prepared.ruled.take() {
            *carried = Some(DecisionNote {
                by: rule,
                edited: None,
            });
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
        mut started: Option<CallBegun>,
        active: &mut Active<'_>,
        tainted: &mut Option<Vec<String>>,
    ) -> Stage<(Approval<'c>, Option<String>)> {
        // (Given the key, not the call: what the call holds is `Send` but
        // not `Sync`, and is not borrowed across the stage's waits.)
        let (in_doubt, waited) = self
            .stages
            .idempotency(
                call,
                caller,
                prepared.spec,
                &prepared.key,
                started.as_mut(),
                active,
            )
            .await?;
        // The arguments' JSON is made from here on only by the stages that
        // read it whole (`Prepared::json`): a replay or a loop, answered
        // above, never builds it, nor does a confirmed call in a session
        // that read no untrusted output.

        // Taint: a side effect in a session that saw untrusted output, as
        // the caller's level judges it, needs a person's approval at stage
        // 7. What the call's start found of the session stands unless stage
        // 4 waited meanwhile. The arguments are read (as JSON) only in a
        // session that read untrusted output, when the caller's level
        // judges values.
        let known = started
            .as_ref()
            .and_then(|found| found.tainted)
            .filter(|_| !waited);
        let spec = prepared.spec;
        *tainted = match self
            .stages
            .session_taint(spec, call.scope, caller, known)
            .await?
        {
            SessionTaint::Clean => None,
            SessionTaint::Whole => Some(Vec::new()),
            SessionTaint::Values => {
                let arguments = self.stages.json(prepared)?;
                self.stages
                    .tainted_arguments(spec.name(), call.scope, arguments)
                    .await?
            }
        };
        prepared.tainted.clone_from(tainted);
        let approval = self.stages.approval_of(call, in_doubt, prepared.people);
        // A call that needs a person and brings no id (an MCP client cannot
        // bring one back) learns a decision a person already recorded on
        // this exact call, as if it had brought its id; a person's decision
        // on it stands over the host's `confirmed` too, and so does an open
        // question of it that the host may not answer. Not looked for when
        // the call's start found the conversation has no question at all
        // (and stage 4 did not wait since): the common call costs nothing.
        let no_questions = started
            .as_ref()
            .and_then(|found| found.questions)
            .is_some_and(|questions| !questions && !waited);
        let confirmed = matches!(approval, Approval::Given);
        let decided = match approval {
            Approval::None | Approval::Given if !no_questions && prepared.needs_person() => {
                Box::pin(self.stages.decided_for(prepared, confirmed, false)).await?
            }
            // A call in doubt passed its approval before; a person's denial
            // taken since stands all the same: it is not run again.
            Approval::InDoubt if !no_questions && prepared.needs_person() => {
                Box::pin(self.stages.decided_for(prepared, false, true)).await?
            }
            _ => None,
        };
        Ok((approval, decided))
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
            return self.stages.run_retrying(prepared, &cx, doubt).await;
        }

        self.stages.check_and_limits(prepared, &cx).await?;

        // 7. Confirmation, from the host only: of a high-risk call, and of
        // a side effect tainted by untrusted output. One the host confirmed
        // needs nothing more.
        if prepared.needs_person() && !matches!(approval, Approval::Given) {
            let arguments = self.stages.json(prepared)?;
            // A rule of the operators' controls may approve it in a
            // person's place: never a call untrusted output tainted, nor
            // one that needs more than one person.
            let mut approval = approval;
            let by_rule;
            let mut ruled = None;
            if matches!(approval, Approval::None)
                && prepared.tainted.is_none()
                && prepared.people <= 1
            {
                let controls = self.stages.held_controls();
                if let Some(rule) =
                    controls.rule_for(prepared.spec.name(), prepared.caller.id(), arguments)
                {
                    let asking = Asking::of(prepared, arguments, None);
                    if let Some(id) =
                        Box::pin(self.stages.approve_by_rule(&asking, &rule.name)).await?
                    {
                        by_rule = id;
                        approval = Approval::Id(&by_rule);
                        ruled = Some(super::operators::rule_approver(&rule.name));
                    }
                }
            }
            let asking = Asking::of(prepared, arguments, prepared.tainted.as_deref());
            // Boxed: a question to a person (or an approval by id) is the
            // rarer path, and its future would widen every call's.
            Box::pin(self.stages.confirm(asking, approval)).await?;
            if ruled.is_some() {
                prepared.ruled = ruled;
            }
        }

        // 8. Execution.
        self.stages.run_retrying(prepared, &cx, Doubt::No).await
    }

    /// Stages 5 to 8: the business check, the policy, the approval,
    /// execution, under the locks of the call's resources.
    pub(super) async fn decide_and_run(
        &self,
        prepared: &mut Prepared<'_>,
        approval: Approval<'_>,
    ) -> Stage<ToolResult> {
        let Some(locks) = self.stages.take_locks(prepared).await? else {
            return self.decide_and_run_locked(prepared, approval).await;
        };
        let answer = {
            // In a block: the locked stages' future is dead once they ended.
            let locked = pin!(self.decide_and_run_locked(prepared, approval));
            while_renewing(locked, locks.lease, |lease| {
                self.stages.renew_locks(&locks, lease)
            })
            .await
        };
        prepared.lock = None;
        self.stages.free_locks(prepared.spec.name(), locks).await;
        answer
    }
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// What the store recorded of one exact call (its tool, its validated
    /// `arguments`, its conversation and its caller), without making it:
    /// nothing is counted, run or asked. `Ok(None)`: nothing (it never ran,
    /// or did not run to the end); completed (its answer, `replayed`), in
    /// flight, or in doubt otherwise. The refusal, when the call would be
    /// refused before its key (an unknown tool, arguments that no longer
    /// validate). What a task or an inbox reads to say where a call it did
    /// not run stands, on any replica.
    pub async fn recorded(
        &self,
        tool: &str,
        arguments: &Value,
        session: &str,
        caller: &Caller,
    ) -> Result<Option<RecordedOutcome>, ToolResult> {
        let spec = self.resolve(tool, caller.policy())?;
        let Value::Object(object) = arguments else {
            return Err(self.stages.fail_with(
                Failure::InvalidArguments,
                spec.name(),
                &Details::detail("the arguments are not an object"),
                Map::new(),
            ));
        };
        let session = crate::echo::bound(session, crate::echo::MAX_ID_BYTES);
        let prepared = self
            .stages
            .prepare(spec, object, &session, caller, 0, None)?;
        self.stages
            .recorded(&prepared.key)
            .await
            .map_err(|error| self.stages.store_unavailable(spec.name(), &error))
    }

    /// Stage 1: the tool, if it exists and the caller may use it.
    pub(super) fn resolve(&self, name: &str, policy: &Policy) -> Stage<&'static ToolSpec> {
        self.stages.allowed(name, self.registry.get(name), policy)
    }
}
