//! Stages 0 to 7 of the pipeline, in order; stage 8 is in `execute.rs`.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::{Map, Value};

use std::time::{Duration, Instant};

use super::execute::{millis, panic_text, while_renewing};
use super::inbox::{Carried, Found};
use super::messages::{Details, Failure};
use super::twins::Active;
use super::{Approvals, Call, Dispatcher};
use crate::args::Constraint;
use crate::canonical::{digest, idempotency_key};
use crate::error::ToolError;
use crate::parse::parse_object;
use crate::policy::{Caller, Policy};
use crate::result::{Code, ToolResult};
use crate::store::{Binding, Outcome, PendingApproval, Store, TakeApproval, now_ms};
use crate::tool::{CallContext, ToolSpec, Validated};

/// A stage that says no returns the finished result as its error: the
/// rejection *is* the answer.
pub(super) type Stage<T> = Result<T, ToolResult>;

/// How a high-risk call is approved, if it is.
#[derive(Clone, Copy)]
pub(super) enum Approval<'a> {
    /// Not yet: ask for it.
    None,
    /// The host says a person approved (the reference's `confirmed` flag),
    /// or the approval was already taken from the store.
    Given,
    /// A confirmation id that must match this exact call.
    Id(&'a str),
    /// The same call ran before with an unknown outcome: it passed stages 5
    /// to 7 then, and runs again under the same key without them.
    InDoubt,
}

/// A call that passed validation, with what the later stages need.
pub(super) struct Prepared<'a> {
    pub spec: &'static ToolSpec,
    pub validated: Box<dyn Validated>,
    pub object: &'a Map<String, Value>,
    pub arguments: Value,
    pub key: String,
    pub session: &'a str,
    pub caller: &'a Caller,
    pub step: u64,
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// The call's step, its answer, and the person's decision it carried
    /// out, if it brought one (for the audit).
    pub(super) async fn run(
        &self,
        call: &Call<'_>,
        caller: &Caller,
    ) -> (u64, ToolResult, Option<Carried>) {
        let step = match self.store.next_step(call.session).await {
            Ok(step) => step,
            Err(error) => return (0, self.store_unavailable(call.tool, &error), None),
        };
        let mut carried = None;
        let result = match self.pipeline(call, caller, step, &mut carried).await {
            Ok(result) | Err(result) => result,
        };
        (step, result, carried)
    }

    async fn pipeline(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        step: u64,
        carried: &mut Option<Carried>,
    ) -> Stage<ToolResult> {
        let name = call.tool;

        // 0. Step budget.
        if step > self.settings.max_steps {
            return Err(self.fail(Failure::StepLimit, name));
        }

        // 1. Lookup and allowlist.
        let spec = self.resolve(name, caller.policy())?;

        // 2. Parse.
        let object = parse_object(
            call.arguments,
            self.settings.max_argument_bytes,
            self.settings.max_depth,
        )
        .map_err(|error| {
            let error = error.to_string();
            self.fail_with(
                Failure::InvalidJson,
                name,
                &Details::detail(&error),
                Map::new(),
            )
        })?;

        // 3. Strict validation.
        let prepared = self.prepare(spec, &object, call.session, caller, step, None)?;

        // 4. Idempotency: the key comes from the validated, canonical arguments.
        // This call is one of the key's calls in flight from before it is
        // counted until it is answered (the guard drops with this frame).
        let mut active = self.twins.enter(&prepared.key);
        let calls = self
            .store
            .count_call(&prepared.key)
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        if calls > self.settings.max_duplicate_calls
            && let Some(mut stored) = self
                .guard_loop(prepared.spec, &prepared.key, &mut active)
                .await?
        {
            stored.replayed = true;
            return Ok(stored);
        }
        let mut in_doubt = false;
        if prepared.spec.side_effect() {
            let outcome = self
                .store
                .outcome(&prepared.key)
                .await
                .map_err(|e| self.store_unavailable(name, &e))?;
            match outcome {
                Some(Outcome::Completed(mut stored)) => {
                    stored.replayed = true;
                    return Ok(stored);
                }
                // The same call ran before and its outcome is unknown: it
                // already passed the check, the policy and the approval, so
                // it goes straight to execution under the same key.
                Some(Outcome::InDoubt) => in_doubt = true,
                _ => {}
            }
        }

        // 5 to 8.
        // An in-doubt call passed stages 5 to 7 when it first ran, whatever
        // this retry carries (a confirmation, an approval id: left unused).
        // In inbox mode the host's `confirmed` approves nothing: only a
        // decision in the store does.
        let inbox = self.settings.approvals == Approvals::Inbox;
        let approval = match (call.confirmed && !inbox, call.approval) {
            _ if in_doubt => Approval::InDoubt,
            (true, _) => Approval::Given,
            (false, Some(id)) => Approval::Id(id),
            (false, None) => Approval::None,
        };
        let key = prepared.key.clone();
        let answer = match approval {
            // An approval id: a person's decision in the store is carried
            // out as it is, before the check, because their edits replace
            // the call; nobody's yet, stage 7 takes it (Host) or asks again
            // under the same id (Inbox).
            Approval::Id(id) if prepared.spec.high_risk() => {
                let found = self
                    .find_decision(
                        id,
                        prepared.spec.name(),
                        &prepared.arguments,
                        prepared.session,
                        prepared.caller,
                    )
                    .await;
                match found {
                    Err(answer) => Err(answer),
                    Ok(Found::Decided(decision)) => {
                        *carried = Some(Carried {
                            by: decision.by.clone(),
                            edited: decision
                                .edited_arguments
                                .clone()
                                .filter(|_| decision.approved),
                        });
                        self.carry_out(id, prepared, &decision).await
                    }
                    Ok(Found::Undecided) => self.decide_and_run(prepared, approval).await,
                }
            }
            _ => self.decide_and_run(prepared, approval).await,
        };
        if let Err(asked) = &answer
            && asked.code == Code::ConfirmationRequired
        {
            // A question to a person is not the model repeating itself: the
            // approved call that follows the model's asks is not a loop.
            self.store
                .uncount_call(&key)
                .await
                .map_err(|error| self.store_unavailable(name, &error))?;
        }
        drop(active);
        answer
    }

    /// Stage 4, a call counted over the limit: `LOOP_DETECTED` if every
    /// identical call before it has been answered. While some are still
    /// running in this dispatcher, it waits for them (up to `claim_wait`,
    /// then `CALL_IN_PROGRESS`); once they have answered, a side effect one
    /// of them completed is its answer (`Some`, replayed), and otherwise it
    /// is counted again, as if it had come after them: `None` when it is
    /// within the limit then and goes on.
    async fn guard_loop(
        &self,
        spec: &'static ToolSpec,
        key: &str,
        active: &mut Active<'_>,
    ) -> Stage<Option<ToolResult>> {
        let name = spec.name();
        let deadline = Instant::now() + self.settings.claim_wait;
        let mut pause = Duration::from_millis(2);
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
                    && let Some(Outcome::Completed(stored)) = self
                        .store
                        .outcome(key)
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
                    .count_call(key)
                    .await
                    .map_err(|error| self.store_unavailable(name, &error))?;
                if calls <= self.settings.max_duplicate_calls {
                    return Ok(None);
                }
                waited = false;
                continue;
            }
            if Instant::now() >= deadline {
                return Err(self.fail(Failure::CallInProgress, name));
            }
            waited = true;
            tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
            pause = (pause * 2).min(Duration::from_millis(100));
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
        let name = spec.name();
        let validated = spec.validate(object).map_err(|errors| {
            let errors = errors.to_string();
            self.fail_with(
                Failure::InvalidArguments,
                name,
                &Details::detail(&errors),
                Map::new(),
            )
        })?;
        let arguments = validated.to_value().map_err(|error| {
            tracing::error!(tool = name, %error, "validated arguments do not serialize");
            self.fail(Failure::InternalError, name)
        })?;
        let key = match key_from {
            Some(approval) => {
                idempotency_key(session, name, &Value::from(format!("approval:{approval}")))
            }
            None => idempotency_key(session, name, &arguments),
        };
        Ok(Prepared {
            spec,
            validated,
            object,
            arguments,
            key,
            session,
            caller,
            step,
        })
    }

    /// Stages 5 to 8: the business check, the policy, the approval,
    /// execution, under the locks of the call's resources.
    pub(super) async fn decide_and_run(
        &self,
        prepared: Prepared<'_>,
        approval: Approval<'_>,
    ) -> Stage<ToolResult> {
        let name = prepared.spec.name();
        let resources = resource_keys(prepared.spec, &prepared.arguments);
        if resources.is_empty() {
            return self.decide_and_run_locked(prepared, approval).await;
        }
        let holder = holder_token();
        let lease = self.lease(prepared.spec);
        self.lock_resources(name, &resources, &holder, lease)
            .await?;
        let answer = while_renewing(
            self.decide_and_run_locked(prepared, approval),
            lease,
            |now, lease_ms| {
                let (resources, holder) = (&resources, &holder);
                async move {
                    for resource in resources {
                        if !self
                            .store
                            .lock_resource(resource, holder, now, lease_ms)
                            .await?
                        {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                }
            },
        )
        .await;
        for resource in &resources {
            if let Err(error) = self.store.unlock_resource(resource, &holder).await {
                tracing::error!(tool = name, %error, "a resource lock could not be freed; it ends with its lease");
            }
        }
        answer
    }

    /// Takes every lock, in order (so two calls never wait on each other),
    /// waiting (bounded) for calls holding them.
    async fn lock_resources(
        &self,
        name: &str,
        resources: &[String],
        holder: &str,
        lease: Duration,
    ) -> Stage<()> {
        let lease_ms = millis(lease);
        let deadline = Instant::now() + self.settings.claim_wait;
        for (taken, resource) in resources.iter().enumerate() {
            let mut pause = Duration::from_millis(2);
            loop {
                let locked = self
                    .store
                    .lock_resource(resource, holder, now_ms(), lease_ms)
                    .await;
                match locked {
                    Ok(true) => break,
                    Ok(false) if Instant::now() < deadline => {
                        tokio::time::sleep(
                            pause.min(deadline.saturating_duration_since(Instant::now())),
                        )
                        .await;
                        pause = (pause * 2).min(Duration::from_millis(100));
                    }
                    outcome => {
                        for held in &resources[..taken] {
                            let _ = self.store.unlock_resource(held, holder).await;
                        }
                        return Err(match outcome {
                            Err(error) => self.store_unavailable(name, &error),
                            _ => self.fail(Failure::ResourceBusy, name),
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Stages 5 to 8, with the call's resources locked.
    async fn decide_and_run_locked(
        &self,
        prepared: Prepared<'_>,
        approval: Approval<'_>,
    ) -> Stage<ToolResult> {
        let name = prepared.spec.name();
        let cx = CallContext {
            state: Arc::clone(&self.erased_state),
            idempotency_key: Arc::from(prepared.key.as_str()),
            session: Arc::from(prepared.session),
            caller: prepared.caller.clone(),
        };
        if let Approval::InDoubt = approval {
            return self.execute_once(prepared, &cx, true).await;
        }

        // 5. Business rules. A check has no side effects: one that fails
        // transiently is retried like the handler.
        let mut attempt: u32 = 0;
        loop {
            match catch_unwind(AssertUnwindSafe(|| prepared.validated.check(&cx))) {
                Ok(Ok(())) => break,
                Ok(Err(ToolError::Transient(error))) if attempt < self.settings.max_retries => {
                    tracing::warn!(tool = name, attempt, %error, "the check failed transiently");
                    attempt += 1;
                    let wait = self.settings.retry_backoff * attempt;
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                }
                Ok(Err(error)) => return Err(self.failure_of(name, error)),
                Err(panic) => {
                    tracing::error!(
                        tool = name,
                        panic = panic_text(&panic),
                        "the check panicked"
                    );
                    return Err(self.fail(Failure::InternalError, name));
                }
            }
        }

        // 6. Policy limits declared on the arguments.
        check_limits(prepared.spec, prepared.caller, &prepared.arguments)
            .map_err(|over| self.fail_with(over.failure, name, &over.details(), Map::new()))?;

        // 7. Confirmation, from the host only.
        if prepared.spec.high_risk() {
            let asking = Asking {
                tool: name,
                arguments: &prepared.arguments,
                session: prepared.session,
                caller: prepared.caller,
                step: prepared.step,
            };
            self.confirm(asking, approval).await?;
        }

        // 8. Execution.
        self.execute_once(prepared, &cx, false).await
    }

    /// Stage 7: a high-risk call runs only with a person's approval of this
    /// exact call.
    async fn confirm(&self, prepared: Asking<'_>, approval: Approval<'_>) -> Stage<()> {
        let name = prepared.tool;
        let store_error = |error| self.store_unavailable(name, &error);
        // Only an approval by id, or a new one, needs the arguments' digest.
        let digest = match approval {
            Approval::Given | Approval::InDoubt => return Ok(()),
            Approval::Id(_) | Approval::None => digest(prepared.arguments),
        };
        match approval {
            Approval::Given | Approval::InDoubt => Ok(()),
            Approval::Id(id) => {
                let binding = Binding {
                    session: prepared.session,
                    caller: prepared.caller.id(),
                    tool: Some(name),
                    digest: Some(&digest),
                };
                match self
                    .store
                    .take_approval(id, &binding, now_ms())
                    .await
                    .map_err(store_error)?
                {
                    // A decision recorded meanwhile is honoured: a denial
                    // stops the call; edits are the person's call, not this
                    // one, so this one does not run.
                    TakeApproval::Taken(taken) => match taken.decision {
                        Some(recorded) if !recorded.approved => {
                            Err(self.denied(name, &recorded.note))
                        }
                        Some(recorded) if recorded.edited_arguments.is_some() => Err(self
                            .fail_with(
                                Failure::ConfirmationInvalid,
                                name,
                                &Details::approval(id),
                                Map::new(),
                            )),
                        _ => Ok(()),
                    },
                    TakeApproval::Expired => Err(self.fail_with(
                        Failure::ConfirmationExpired,
                        name,
                        &Details::approval(id),
                        Map::new(),
                    )),
                    _ => Err(self.fail_with(
                        Failure::ConfirmationInvalid,
                        name,
                        &Details::approval(id),
                        Map::new(),
                    )),
                }
            }
            Approval::None => {
                let created_ms = now_ms();
                let ttl = u64::try_from(self.settings.approval_ttl.as_millis()).unwrap_or(u64::MAX);
                let pending = PendingApproval {
                    id: confirmation_id(),
                    session: prepared.session.to_owned(),
                    caller: prepared.caller.id().to_owned(),
                    tool: name.to_owned(),
                    digest,
                    arguments: prepared.arguments.clone(),
                    step: prepared.step,
                    created_ms,
                    expires_ms: created_ms.saturating_add(ttl),
                    decision: None,
                };
                self.store
                    .put_approval(&pending)
                    .await
                    .map_err(store_error)?;
                let mut data = Map::new();
                data.insert("pending".into(), pending.arguments);
                let mut asked = self.fail_with(
                    Failure::ConfirmationRequired,
                    name,
                    &Details::default(),
                    data,
                );
                asked.confirmation_id = Some(pending.id);
                Err(asked)
            }
        }
    }
}

/// What stage 7 needs of a call (borrowing nothing that is not `Sync`, so
/// the pipeline's future stays `Send`).
struct Asking<'a> {
    tool: &'static str,
    arguments: &'a Value,
    session: &'a str,
    caller: &'a Caller,
    step: u64,
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Stage 1: the tool, if it exists and the caller may use it.
    pub(super) fn resolve(&self, name: &str, policy: &Policy) -> Stage<&'static ToolSpec> {
        let Some(spec) = self.registry.get(name) else {
            let available: Vec<Value> = policy.allowed().map(Value::from).collect();
            let mut data = Map::new();
            data.insert("available".into(), Value::from(available));
            return Err(self.fail_with(Failure::UnknownTool, name, &Details::default(), data));
        };
        if !policy.allows(name) {
            return Err(self.fail(Failure::ToolNotAllowed, name));
        }
        Ok(spec)
    }
}

/// Why stage 6 refused a call.
struct OverLimit<'a> {
    failure: Failure,
    field: &'static str,
    limit: &'static str,
    limit_value: Option<i64>,
    value: &'a Value,
}

impl OverLimit<'_> {
    fn details(&self) -> Details<'_> {
        Details {
            field: Some(self.field),
            limit: Some(self.limit),
            limit_value: self.limit_value,
            value: Some(self.value),
            ..Details::default()
        }
    }
}

/// Stage 6: every argument declared with `#[arg(limit = "...")]` within the
/// caller's limit of that name. A limit the policy does not set fails closed.
fn check_limits<'a>(
    spec: &ToolSpec,
    caller: &Caller,
    arguments: &'a Value,
) -> Result<(), OverLimit<'a>> {
    for field in spec.fields() {
        for constraint in field.constraints {
            let Constraint::Limit(limit_name) = constraint else {
                continue;
            };
            let Some(value) = arguments.get(field.name).filter(|v| !v.is_null()) else {
                continue;
            };
            let Some(limit) = caller.policy().limit_of(limit_name) else {
                return Err(OverLimit {
                    failure: Failure::LimitNotSet,
                    field: field.name,
                    limit: limit_name,
                    limit_value: None,
                    value,
                });
            };
            let over = match value.as_i64() {
                Some(n) => n > limit,
                None => value.as_f64().is_none_or(|x| x > limit as f64),
            };
            if over {
                return Err(OverLimit {
                    failure: Failure::OverLimit,
                    field: field.name,
                    limit: limit_name,
                    limit_value: Some(limit),
                    value,
                });
            }
        }
    }
    Ok(())
}

/// The lock keys of a call's resources (`#[arg(resource)]`), sorted: hex
/// SHA-256 of the resource's kind and the canonical value, so that every
/// tool naming the same kind of resource shares the lock.
fn resource_keys(spec: &ToolSpec, arguments: &Value) -> Vec<String> {
    let mut keys: Vec<String> = spec
        .fields()
        .iter()
        .filter_map(|field| {
            let kind = field.resource?;
            let value = arguments.get(field.name).filter(|v| !v.is_null())?;
            Some(crate::canonical::resource_digest(kind, value))
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// 128 random bits, hex: unguessable, so a confirmation id cannot be forged.
fn confirmation_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to a hash of time and address space
        // layout, still unique, and still checked against its binding.
        let seed = format!("{:?}{:p}", std::time::SystemTime::now(), &bytes);
        bytes.copy_from_slice(&digest(&Value::from(seed)).as_bytes()[..16]);
    }
    crate::canonical::hex(&bytes)
}

/// Who holds a call's resource locks: unique across the processes sharing a
/// store (a random nonce drawn once per process) and across the calls of
/// this one (a counter). Unlike a confirmation id it need not be secret, so
/// it costs no system call per call.
fn holder_token() -> String {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NONCE: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nonce = NONCE.get_or_init(confirmation_id);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut token = String::with_capacity(nonce.len() + 17);
    token.push_str(nonce);
    token.push('-');
    token.push_str(&crate::canonical::hex(&n.to_be_bytes()));
    token
}
