//! The dispatcher: its settings, the calls it takes, how it is built.
//!
//! The pipeline's stages are in `pipeline.rs`, the resource locks stages 5
//! to 8 run under in `locks.rs`, the taint of untrusted output in
//! `taint.rs`, a dry run in `dry_run.rs`, execution (claims, retries,
//! timeouts, panics) in `execute.rs`, the host's decisions on pending
//! approvals in `approval.rs`, what is checked at build in `checks.rs`, the
//! standard failures and their messages in `messages.rs`, the loop
//! guard's view of identical calls in flight in `twins.rs`, and the audit
//! record a call leaves in `audited.rs`.

// A stage that says no returns the finished `ToolResult` as its error: the
// rejection is the answer, built once and moved out, never boxed per call.
#![allow(clippy::result_large_err)]

mod approval;
mod audited;
mod catch;
mod checks;
mod confirm;
mod dry_run;
mod execute;
mod inbox;
mod locks;
mod messages;
mod pipeline;
mod prepared;
mod retry;
mod taint;
mod twins;

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::audited::{AUDIT_CUT_ARGUMENTS, Called, audited_arguments};

use crate::audit::{AuditSink, Cut, MemoryAudit};
use crate::echo::MAX_NAME_ECHO;
use crate::parse::Arguments;
use crate::policy::{Caller, Policy};
use crate::registry::Registry;
use crate::result::{Code, ToolResult};
use crate::store::{MemoryStore, Store};
use crate::tool::ToolSpec;

pub use approval::{Decision, UNKNOWN_APPROVAL_TOOL};
pub use checks::{BuildError, BuildWarning};
pub use messages::{Failure, MessageContext};

/// Where a high-risk call's approval comes from ([`Settings::approvals`]).
///
/// Whatever the mode, a decision recorded in the store (a person's, in the
/// approval inbox: `toolcall-inbox`) is carried out as it is when a call
/// brings its approval id ([`Call::approval`]): a denial is
/// `CONFIRMATION_DENIED` with the person's note, an approval runs the call
/// once, an approval with edits runs the edited call, validated, checked
/// and policed again as a new call, and says so (`data.edited_by_person`,
/// `data.edited_arguments`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approvals {
    /// The host says a person approved: [`Call::confirmed`], a
    /// [`Call::approval`] id nobody decided in the store, and
    /// [`Dispatcher::approve`] each approve (the reference's behaviour).
    #[default]
    Host,
    /// Only a decision recorded in the store approves: `Call::confirmed(true)`
    /// asks like any call, and a `Call::approval(id)` nobody decided yet is
    /// answered `CONFIRMATION_REQUIRED` again with the same id, which stays
    /// unused. [`Dispatcher::approve`] and [`Dispatcher::deny`] record the
    /// host's decision in the store first.
    Inbox,
}

/// The knobs of the pipeline. The defaults of the first four are the
/// reference implementation's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// Tool calls a session may make, whatever their outcome (default 10).
    pub max_steps: u64,
    /// How many times one exact call (same session, tool and validated
    /// arguments) may be made before `LOOP_DETECTED` (default 3). A
    /// read-only tool may set its own bound (`#[tool(max_repeats = N)]`),
    /// and a caller's `Policy::max_repeats` replaces both; a side effect
    /// always has this one.
    pub max_duplicate_calls: u64,
    /// Retries after a transient failure, under the same idempotency key
    /// (default 2): of the handler, and of the business check (which has no
    /// side effects), each with the same backoff.
    pub max_retries: u32,
    /// Wait before retry `n` (1-based): `n` times this (default 200 ms).
    /// Waits and the bound they put on a claim's lease saturate: large
    /// values mean long waits, never an overflow.
    pub retry_backoff: Duration,
    /// Largest raw arguments text accepted, in bytes (default 64 KiB).
    pub max_argument_bytes: usize,
    /// Deepest nesting of arrays and objects accepted in raw arguments (default 32).
    pub max_depth: usize,
    /// How long one attempt of a tool may run before `TIMEOUT`, unless the
    /// tool sets its own with `#[tool(timeout_ms = ...)]` (default: no limit).
    /// A timeout needs a tokio runtime with its timer enabled, as do the
    /// waits between retries and for a call holding a claim or a resource
    /// another call needs.
    pub timeout: Option<Duration>,
    /// How long an identical side-effecting call waits for one already in
    /// flight before answering `CALL_IN_PROGRESS` (default 10 s). A call
    /// over [`max_duplicate_calls`](Settings::max_duplicate_calls) whose
    /// identical calls are still running in this dispatcher waits as long
    /// for their answer (see [`Dispatcher`]). A wait too long for the
    /// clock to express (`Duration::MAX`) has no deadline.
    pub claim_wait: Duration,
    /// How long a person has to approve a high-risk call (default 15 min).
    pub approval_ttl: Duration,
    /// The conversation of calls that name none ([`Call::session`]);
    /// `None`, the default, refuses them with `CONVERSATION_REQUIRED`. An
    /// application with one conversation (a command line, a test) names it
    /// here, on purpose.
    pub default_session: Option<String>,
    /// How many questions to a person one conversation may have open at
    /// once (default 20): a looping agent cannot bury the others' in the
    /// inbox. One more is refused with its own code, and nothing runs.
    pub max_pending_approvals: usize,
    /// How long a claim on a key, or a lock on a resource, holds without
    /// being renewed (default 30 s). While a call runs, the dispatcher renews
    /// both every third of this, so a live call is never taken over however
    /// long it runs; a process that dies frees them within this time.
    pub claim_lease: Duration,
    /// The most of a result's model text the model gets, in bytes, unless
    /// the tool sets its own with `#[tool(max_output_bytes = ...)]`
    /// (default: no bound). A larger result is cut to fit and stays valid
    /// JSON of the same shape: long strings keep their head, long arrays
    /// their first items; `data.truncated` is `true` and the message tells
    /// the model to narrow its request. The budget cuts data, never
    /// control: the code, the message, the confirmation id and `replayed`,
    /// and a failure's `data.pending`, `reason`, `tainted`, `in_doubt`,
    /// `happened`, `edited_by_person`, `edited_arguments` and `available`
    /// are kept whole at any budget, and the data keeps at least the head
    /// of its strings and the first item of its arrays, even over a very
    /// small budget. The audit keeps the whole result's size and SHA-256
    /// ([`AuditRecord::cut`](crate::AuditRecord::cut), field `result`).
    pub max_output_bytes: Option<usize>,
    /// Where a high-risk call's approval comes from (default
    /// [`Approvals::Host`], the reference's behaviour).
    pub approvals: Approvals,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            max_steps: 10,
            max_duplicate_calls: 3,
            max_retries: 2,
            retry_backoff: Duration::from_millis(200),
            max_argument_bytes: 64 * 1024,
            max_depth: 32,
            timeout: None,
            claim_wait: Duration::from_secs(10),
            approval_ttl: Duration::from_secs(15 * 60),
            max_pending_approvals: 20,
            default_session: None,
            claim_lease: Duration::from_secs(30),
            max_output_bytes: None,
            approvals: Approvals::Host,
        }
    }
}

/// ```
/// use toolcall_core::Call;
///
/// let call = Call::new("refund_order", r#"{"order_id": "ORD-1001"}"#)
///     .session("conversation-42")
///     .confirmed(true)
///     .call_id("call_abc123");
/// assert_eq!(call.tool(), "refund_order");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    tool: &'a str,
    arguments: Arguments<'a>,
    /// The conversation, once named: by [`Call::session`], or by the
    /// dispatcher's default ([`Settings::default_session`]); empty until then.
    session: &'a str,
    named: bool,
    caller: Option<&'a Caller>,
    confirmed: bool,
    approval: Option<&'a str>,
    call_id: Option<&'a str>,
    dry_run: bool,
}

impl<'a> Call<'a> {
    /// A call of `tool` with these arguments, by the dispatcher's default
    /// caller, not confirmed. It names no conversation yet: name one with
    /// [`session`](Call::session). A call that names none runs in the
    /// dispatcher's [`default_session`](DispatcherBuilder::default_session)
    /// when it has one, and is refused (`CONVERSATION_REQUIRED`, nothing
    /// run, no step taken) when it has none: two users' calls never share a
    /// conversation, its step budget or its replays, by accident.
    pub fn new(tool: &'a str, arguments: impl Into<Arguments<'a>>) -> Self {
        Call {
            tool,
            arguments: arguments.into(),
            session: "",
            named: false,
            caller: None,
            confirmed: false,
            approval: None,
            call_id: None,
            dry_run: false,
        }
    }

    /// The conversation this call belongs to: the scope of the step budget,
    /// the loop guard, the idempotency key, the taint of untrusted output
    /// and the approvals a person gives. Two users, two conversations.
    pub fn session(mut self, session: &'a str) -> Self {
        self.session = session;
        self.named = true;
        self
    }

    /// The conversation the call names, if it names one.
    pub fn session_id(&self) -> Option<&'a str> {
        self.named.then_some(self.session)
    }

    /// Who is calling, with their allowlist and limits; the dispatcher's
    /// default caller otherwise.
    pub fn caller(mut self, caller: &'a Caller) -> Self {
        self.caller = Some(caller);
        self
    }

    /// Whether a person approved this exact call. Only the host sets this,
    /// never the model.
    pub fn confirmed(mut self, confirmed: bool) -> Self {
        self.confirmed = confirmed;
        self
    }

    /// The confirmation id of an approval a person gave for exactly this
    /// call (from a `CONFIRMATION_REQUIRED` result's `confirmation_id`). It
    /// is used up; one asked for another session, caller, tool or other
    /// arguments, or one already used or expired, executes nothing.
    pub fn approval(mut self, confirmation_id: &'a str) -> Self {
        self.approval = Some(confirmation_id);
        self
    }

    /// The provider's id of the call, kept in the audit record.
    pub fn call_id(mut self, call_id: &'a str) -> Self {
        self.call_id = Some(call_id);
        self
    }

    /// A dry run: the call goes through every stage up to execution
    /// (lookup, validation, replay of a completed side effect, the check,
    /// the policy, the approval) and stops there. It uses no step, is not
    /// counted by the loop guard, creates no pending approval, takes no
    /// approval up and runs nothing: it answers what the real call would
    /// get, and where that call would run, `ok: true` with code `DRY_RUN`,
    /// the validated arguments in `data.arguments` and, when the tool
    /// declares `#[tool(preview = path)]`, what it would do in
    /// `data.preview`, and `data.would: "run"`. Where the real call would
    /// wait for a person (a high-risk or tainted call without approval, or
    /// an inbox approval no one has decided yet), it answers `DRY_RUN` with
    /// `data.would: "ask_a_person"` and `data.reason` (`"high_risk"` or
    /// `"untrusted_context"`, with `data.tainted` when the level names
    /// fields). Where the real call would be refused at those stages (the
    /// check, a policy limit, a denied, invalid or expired approval), it
    /// answers `DRY_RUN` with `data.would: "be_refused"` and the refusal the
    /// real call would get in `data.refusal` (`code`, `message`, `data`).
    /// A call refused before (unknown tool, invalid arguments) or replayed
    /// gets that answer, as the real call would.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Whether the call is a dry run ([`Call::dry_run`]).
    pub fn is_dry_run(&self) -> bool {
        self.dry_run
    }

    /// The tool asked for.
    pub fn tool(&self) -> &'a str {
        self.tool
    }
}

/// Sets up a [`Dispatcher`].
pub struct DispatcherBuilder<S, St = MemoryStore> {
    registry: Registry,
    state: Arc<S>,
    settings: Settings,
    caller: Caller,
    callers: Vec<Caller>,
    audit: Arc<dyn AuditSink>,
    store: St,
    messages: messages::Messages,
}

impl<S: Any + Send + Sync, St: Store> DispatcherBuilder<S, St> {
    /// Replaces all settings at once.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// See [`Settings::max_steps`].
    pub fn max_steps(mut self, max_steps: u64) -> Self {
        self.settings.max_steps = max_steps;
        self
    }

    /// See [`Settings::max_duplicate_calls`].
    pub fn max_duplicate_calls(mut self, max_duplicate_calls: u64) -> Self {
        self.settings.max_duplicate_calls = max_duplicate_calls;
        self
    }

    /// See [`Settings::max_retries`].
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.settings.max_retries = max_retries;
        self
    }

    /// See [`Settings::retry_backoff`].
    pub fn retry_backoff(mut self, retry_backoff: Duration) -> Self {
        self.settings.retry_backoff = retry_backoff;
        self
    }

    /// See [`Settings::timeout`].
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// See [`Settings::claim_wait`].
    pub fn claim_wait(mut self, claim_wait: Duration) -> Self {
        self.settings.claim_wait = claim_wait;
        self
    }

    /// See [`Settings::max_output_bytes`].
    pub fn max_output_bytes(mut self, max_output_bytes: Option<usize>) -> Self {
        self.settings.max_output_bytes = max_output_bytes;
        self
    }

    /// See [`Settings::claim_lease`].
    pub fn claim_lease(mut self, claim_lease: Duration) -> Self {
        self.settings.claim_lease = claim_lease;
        self
    }

    /// See [`Settings::approvals`].
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.settings.approvals = approvals;
        self
    }

    /// See [`Settings::default_session`]: the conversation of calls that
    /// name none. Without it, such calls are refused.
    pub fn default_session(mut self, session: impl Into<String>) -> Self {
        self.settings.default_session = Some(session.into());
        self
    }

    /// See [`Settings::max_pending_approvals`].
    pub fn max_pending_approvals(mut self, max: usize) -> Self {
        self.settings.max_pending_approvals = max;
        self
    }

    /// See [`Settings::approval_ttl`].
    pub fn approval_ttl(mut self, approval_ttl: Duration) -> Self {
        self.settings.approval_ttl = approval_ttl;
        self
    }

    /// The caller of calls that name none. Without this, the default caller
    /// (`"default"`) may call every registered tool and has no limits set
    /// (so every tool that declares a limit fails closed, `POLICY_LIMIT`,
    /// and [`build`](Self::build) warns of each).
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// The default caller's policy, under the id `"default"`.
    pub fn policy(self, policy: Policy) -> Self {
        self.caller(Caller::new("default", policy))
    }

    /// The other callers the host will name in calls ([`Call::caller`]),
    /// besides those given before: [`build`](Self::build) checks each
    /// against the tools like the default caller, and
    /// [`Dispatcher::caller`] finds them by id. A caller built later (per
    /// tenant, say) is checked with [`Dispatcher::check_caller`].
    pub fn callers(mut self, callers: impl IntoIterator<Item = Caller>) -> Self {
        self.callers.extend(callers);
        self
    }

    /// Replaces the message of every failure of the pipeline's own `code`
    /// with what `message` writes from the failure's [`MessageContext`]
    /// (the tool, the result's `data`, the stage's details, and the default
    /// message). The code and the `data` stay the pipeline's. The defaults
    /// are in [`Failure`]'s table; a code no [`Failure`] has (a check's own,
    /// such as `ORDER_NOT_FOUND`) is never looked up. A function that panics
    /// is logged and the default message used.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use toolcall_core::{Code, Dispatcher, MessageContext, Registry};
    /// let builder = Dispatcher::builder(Registry::default(), Arc::new(()))
    ///     .message(Code::PolicyLimit, |m: &MessageContext| {
    ///         format!("{} is over your plan's limit. Suggest an upgrade.", m.field().unwrap_or("That"))
    ///     });
    /// ```
    pub fn message(
        mut self,
        code: Code,
        message: impl Fn(&MessageContext<'_>) -> String + Send + Sync + 'static,
    ) -> Self {
        self.messages.set(code, Arc::new(message));
        self
    }

    /// Where audit records go (an in-memory log by default).
    pub fn audit(mut self, sink: impl AuditSink + 'static) -> Self {
        self.audit = Arc::new(sink);
        self
    }

    /// Where the pipeline's memory lives (a [`MemoryStore`] by default). Pass
    /// an `Arc` to share one store between dispatchers.
    pub fn store<T: Store>(self, store: T) -> DispatcherBuilder<S, T> {
        DispatcherBuilder {
            registry: self.registry,
            state: self.state,
            settings: self.settings,
            caller: self.caller,
            callers: self.callers,
            audit: self.audit,
            store,
            messages: self.messages,
        }
    }

    /// Checks the setup, and builds.
    ///
    /// Refused ([`BuildError`]): a tool, or a tool's check or reconcile
    /// function, whose `&Ctx<...>` names another state than the
    /// dispatcher's; a caller (the default one
    /// and those given to [`callers`](Self::callers)) whose allowlist names
    /// a tool the registry does not have, or whose policy sets a limit no
    /// tool declares, each naming the closest real name; two different
    /// callers with one id.
    ///
    /// Warned of ([`BuildWarning`], logged with `tracing::warn!` and kept in
    /// [`Dispatcher::warnings`]): a caller allowed a tool that declares a
    /// limit the caller's policy does not set, so that every such call fails
    /// closed with `POLICY_LIMIT`.
    pub fn build(self) -> Result<Dispatcher<S, St>, BuildError> {
        let found = std::any::type_name::<S>();
        for spec in self.registry.iter() {
            if let Some(needed) = spec.state_type()
                && needed.id != TypeId::of::<S>()
            {
                return Err(BuildError::StateMismatch {
                    tool: spec.name(),
                    expected: needed.name,
                    found,
                });
            }
            if let Some(needed) = spec.check_state_type()
                && needed.id != TypeId::of::<S>()
            {
                return Err(BuildError::CheckStateMismatch {
                    tool: spec.name(),
                    expected: needed.name,
                    found,
                });
            }
            if let Some(needed) = spec.reconcile_state_type()
                && needed.id != TypeId::of::<S>()
            {
                return Err(BuildError::ReconcileStateMismatch {
                    tool: spec.name(),
                    expected: needed.name,
                    found,
                });
            }
        }
        let mut warnings = checks::check_caller(&self.registry, &self.caller)?;
        let mut callers: HashMap<String, Caller> = HashMap::new();
        for caller in self.callers {
            let taken = if caller.id() == self.caller.id() {
                Some(&self.caller)
            } else {
                callers.get(caller.id())
            };
            match taken {
                Some(same) if *same == caller => continue,
                Some(_) => {
                    return Err(BuildError::DuplicateCaller {
                        caller: caller.id().to_owned(),
                    });
                }
                None => {}
            }
            warnings.extend(checks::check_caller(&self.registry, &caller)?);
            callers.insert(caller.id().to_owned(), caller);
        }
        Ok(Dispatcher {
            registry: self.registry,
            erased_state: Arc::clone(&self.state) as Arc<dyn Any + Send + Sync>,
            state: self.state,
            settings: self.settings,
            caller: self.caller,
            callers,
            warnings,
            audit: self.audit,
            store: self.store,
            messages: self.messages,
            twins: twins::Twins::default(),
        })
    }
}

/// Runs every call the model proposes through one deterministic pipeline.
///
/// | # | stage | rejects with |
/// |---|---|---|
/// | 0 | step budget, per session | `STEP_LIMIT` |
/// | 1 | tool lookup, caller's allowlist | `UNKNOWN_TOOL` (`data.available`), `TOOL_NOT_ALLOWED` |
/// | 2 | parse: an object, bounded, no duplicate members | `INVALID_JSON` |
/// | 3 | strict validation, every problem at once | `INVALID_ARGUMENTS` |
/// | 4 | idempotency: replay a completed side effect, guard loops | `replayed: true`, `LOOP_DETECTED` |
/// | 5 | the tool's business check | the check's own codes |
/// | 6 | the caller's limits on declared arguments | `POLICY_LIMIT` |
/// | 7 | a person's approval for high-risk tools | `CONFIRMATION_REQUIRED` (`data.pending`, `confirmation_id`), `CONFIRMATION_EXPIRED`, `CONFIRMATION_INVALID` |
/// | 8 | execution: one claim per key, bounded retries under that key, a timeout, panics caught | `CALL_IN_PROGRESS`, `TIMEOUT`, `UPSTREAM_UNAVAILABLE`, `INTERNAL_ERROR` |
///
/// Every call leaves exactly one [`AuditRecord`](crate::AuditRecord). Nothing the model sends
/// makes [`execute`](Dispatcher::execute) fail or panic: every outcome is a
/// [`ToolResult`]. A store that fails answers `STORE_UNAVAILABLE`. The
/// message of every failure of the pipeline's own is the host's to replace
/// ([`DispatcherBuilder::message`]; the defaults are [`Failure`]'s table).
///
/// The loop guard (stage 4) counts identical calls (same session, tool and
/// validated arguments) as they arrive, and answers `LOOP_DETECTED` only
/// when the identical calls before this one have been answered. A call over
/// the limit while identical calls are still running in this dispatcher (a
/// client that sent the same call sixteen times at once) waits for them, up
/// to [`Settings::claim_wait`]: it is answered with the stored result of a
/// side effect one of them completed (`replayed: true`), or, when none did,
/// decided again as if it had come after them; still running by then, it is
/// `CALL_IN_PROGRESS`. Calls one after the other are counted exactly as
/// before. Identical calls running in another process that shares the store
/// are not waited for.
///
/// A tool's check that fails transiently ([`ToolError::Transient`](crate::ToolError::Transient))
/// is retried like the handler, up to [`Settings::max_retries`] times with
/// the same backoff (a check has no side effects), then answered
/// `UPSTREAM_UNAVAILABLE`, not in doubt: nothing ran.
///
/// The dispatcher is `Send + Sync`: share it (in an `Arc`) between tasks and
/// threads serving many conversations at once.
pub struct Dispatcher<S, St = MemoryStore> {
    registry: Registry,
    state: Arc<S>,
    erased_state: Arc<dyn Any + Send + Sync>,
    settings: Settings,
    caller: Caller,
    callers: HashMap<String, Caller>,
    warnings: Vec<BuildWarning>,
    audit: Arc<dyn AuditSink>,
    store: St,
    messages: messages::Messages,
    twins: twins::Twins,
}

impl<S, St> fmt::Debug for Dispatcher<S, St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher")
            .field("registry", &self.registry)
            .field("settings", &self.settings)
            .field("caller", &self.caller)
            .field("callers", &self.callers)
            .field("warnings", &self.warnings)
            .field("messages", &self.messages)
            .finish_non_exhaustive()
    }
}

impl<S: Any + Send + Sync> Dispatcher<S> {
    /// Starts building a dispatcher for these tools over this state. Keep a
    /// clone of the `Arc` to reach the state from elsewhere, or use
    /// [`Dispatcher::state`].
    pub fn builder(registry: Registry, state: Arc<S>) -> DispatcherBuilder<S> {
        let everything = Policy::new().allow(registry.iter().map(|spec| spec.name()));
        DispatcherBuilder {
            registry,
            state,
            settings: Settings::default(),
            caller: Caller::new("default", everything),
            callers: Vec::new(),
            audit: Arc::new(MemoryAudit::new()),
            store: MemoryStore::default(),
            messages: messages::Messages::default(),
        }
    }
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// The application's state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The tools.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The caller of calls that name none.
    pub fn default_caller(&self) -> &Caller {
        &self.caller
    }

    /// The caller of this id: the default caller, or one given to
    /// [`DispatcherBuilder::callers`].
    pub fn caller(&self, id: &str) -> Option<&Caller> {
        if self.caller.id() == id {
            return Some(&self.caller);
        }
        self.callers.get(id)
    }

    /// Checks a caller the dispatcher was not built with (one made per
    /// tenant or per request) against the tools, as
    /// [`build`](DispatcherBuilder::build) checks the callers it knows:
    /// an allowlist naming a tool the registry does not have, or a limit no
    /// tool declares, is an error naming the closest real name; the
    /// warnings (each also logged with `tracing::warn!`) are returned. Check
    /// a caller once, when it is made, not on every call.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use toolcall_core::{BuildError, Caller, Dispatcher, Policy, Registry};
    /// let dispatcher = Dispatcher::builder(Registry::default(), Arc::new(())).build()?;
    /// let typo = Caller::new("tenant-7", Policy::new().allow(["create_events"]));
    /// assert!(matches!(dispatcher.check_caller(&typo), Err(BuildError::UnknownTool { .. })));
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn check_caller(&self, caller: &Caller) -> Result<Vec<BuildWarning>, BuildError> {
        checks::check_caller(&self.registry, caller)
    }

    /// What [`build`](DispatcherBuilder::build) warned of: the setup works,
    /// but probably not as meant.
    pub fn warnings(&self) -> &[BuildWarning] {
        &self.warnings
    }

    /// The store.
    pub fn store(&self) -> &St {
        &self.store
    }

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
        let call = match (call.named, self.settings.default_session.as_deref()) {
            (true, _) => call,
            (false, Some(session)) => call.session(session),
            (false, None) => {
                return self.unnamed(&call, caller, spec, started, at_ms, &span);
            }
        };
        let session = crate::echo::bound(call.session, crate::echo::MAX_ID_BYTES);
        let call = Call {
            session: &session,
            call_id: call_id.as_deref(),
            ..call
        };
        // Not boxed: the pipeline's future (some 2.7 KB) is laid out in
        // this one, which the caller places (on its stack, in its task). A
        // box of that size is a large-bin allocation for the system
        // allocator on every call, costlier than the copy it would spare.
        // Pinned where it is made and polled in the span, rather than moved
        // into an `Instrumented`: the future is not copied again.
        let running = pin!(self.run(&call, caller, spec, at_ms));
        let (step, mut result, noted) = in_span(&span, running).await;
        let prepared::Noted {
            carried,
            tainted,
            problems,
        } = noted;
        let mut cut = Vec::new();
        self.fit_output(spec, &mut result, &mut cut);
        let confirmed = call.confirmed
            || carried.is_some()
            || (call.approval.is_some() && result.code != crate::Code::ConfirmationInvalid);
        let tool = match spec {
            // The registry's own name: nothing to copy, nor to cut.
            Some(spec) if spec.name().len() <= MAX_NAME_ECHO => Cow::Borrowed(spec.name()),
            _ => Cow::Owned(Cut::keep(
                "tool",
                call.tool.to_owned(),
                MAX_NAME_ECHO,
                &mut cut,
            )),
        };
        let arguments = audited_arguments(spec, call.arguments);
        let arguments = if arguments.len() > self.settings.max_argument_bytes {
            Cut::keep("arguments", arguments, AUDIT_CUT_ARGUMENTS, &mut cut)
        } else {
            arguments
        };
        let called = Called {
            session: call.session,
            caller,
            step,
            started,
            at_ms,
        };
        let mut record = called.ended(tool, arguments, &result);
        record.confirmed = confirmed;
        record.call_id = call.call_id.map(str::to_owned);
        // A person's decision the call carried out: it is theirs.
        record.approved_by = carried.as_ref().map(|c| c.by.clone());
        record.cut = cut;
        record.tainted = tainted.clone();
        record.dry_run = call.dry_run;
        if call.dry_run {
            // A dry run reads the step the real call would take; it takes none.
            record.step = None;
        }
        record.problems = problems;
        self.audit(record, &span);
        if let Some(edited) = carried.and_then(|c| c.edited) {
            // The audit keeps both versions: the model's call above, and
            // the call the person's edits made, as it ran.
            let arguments = audited_arguments(spec, Arguments::Parsed(&edited));
            let mut record = called.ended(call.tool.to_owned(), arguments, &result);
            record.confirmed = true;
            record.call_id = call.call_id.map(str::to_owned);
            record.tainted = tainted;
            self.audit(record, &span);
        }
        result
    }

    /// The answer to a call that names no conversation, on a dispatcher
    /// with no default one: refused before anything runs or is counted,
    /// and audited.
    fn unnamed(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        spec: Option<&'static ToolSpec>,
        started: Instant,
        at_ms: u64,
        span: &tracing::Span,
    ) -> ToolResult {
        let mut cut = Vec::new();
        let tool: Cow<'static, str> = match spec {
            Some(spec) => Cow::Borrowed(spec.name()),
            None => Cow::Owned(Cut::keep(
                "tool",
                call.tool.to_owned(),
                MAX_NAME_ECHO,
                &mut cut,
            )),
        };
        let result = self.fail(Failure::ConversationRequired, tool.clone());
        let called = Called {
            session: "",
            caller,
            step: 0,
            started,
            at_ms,
        };
        let arguments = audited_arguments(spec, call.arguments);
        let arguments = if arguments.len() > self.settings.max_argument_bytes {
            Cut::keep("arguments", arguments, AUDIT_CUT_ARGUMENTS, &mut cut)
        } else {
            arguments
        };
        let mut record = called.ended(tool, arguments, &result);
        record.call_id = call
            .call_id
            .map(|id| crate::echo::bound(id, crate::echo::MAX_CALL_ID_BYTES).into_owned());
        record.cut = cut;
        record.dry_run = call.dry_run;
        self.audit(record, span);
        result
    }

    /// The output budget: a result whose model text is over the tool's (or
    /// the dispatcher's) bound is cut to fit; what it was goes to `cut`.
    fn fit_output(&self, spec: Option<&ToolSpec>, result: &mut ToolResult, cut: &mut Vec<Cut>) {
        let budget = spec
            .and_then(|spec| spec.max_output_bytes())
            .or(self.settings.max_output_bytes);
        let Some(budget) = budget else {
            return;
        };
        let text = result.to_model_text();
        if text.len() <= budget {
            return;
        }
        // An ok result's message becomes the note that it was cut; a
        // failure keeps its code, message and the data the model must act
        // on (`budget::CONTROL`) whole.
        let mut probe = ToolResult {
            data: crate::Data::new(),
            ..result.clone()
        };
        if result.ok {
            probe.message = format!(
                "The result was cut to fit {budget} bytes ({} in all). Narrow the request \
                 (a filter, a page, fewer fields) to get the rest.",
                text.len()
            );
        }
        let protected: &[&str] = if result.ok {
            &[]
        } else {
            &crate::budget::CONTROL
        };
        let mut data = serde_json::Map::clone(&result.data);
        let fitted = crate::budget::fit(&mut data, budget, protected, |data| {
            let mut probe = probe.clone();
            let mut data = data.clone();
            data.insert("truncated".into(), serde_json::Value::Bool(true));
            probe.data = data.into();
            probe.to_model_text().len()
        });
        if fitted.is_none() {
            return;
        }
        cut.push(Cut::of("result", &text));
        data.insert("truncated".into(), serde_json::Value::Bool(true));
        result.data = data.into();
        result.message = probe.message;
    }
}

/// Polls `work` inside `span`, as `Instrument::instrument` would, where the
/// work is pinned.
async fn in_span<T>(span: &tracing::Span, mut work: Pin<&mut impl Future<Output = T>>) -> T {
    poll_fn(|cx| {
        let _entered = span.enter();
        work.as_mut().poll(cx)
    })
    .await
}

/// One span a call, with OpenTelemetry's GenAI attribute names; `error.type`
/// is recorded with the code when the call is not ok. A host's decision on a
/// pending approval records the tool once the approval is found.
fn call_span(tool: Option<&str>, spec: Option<&ToolSpec>, call_id: Option<&str>) -> tracing::Span {
    // The name the model sent may be anything: cut, like every echo of it.
    let tool = tool.map(|name| crate::echo::cut(name, MAX_NAME_ECHO));
    let tool = tool.as_deref();
    // The fields are evaluated only when a subscriber wants the span.
    tracing::info_span!(
        "execute_tool",
        otel.name = tool.map_or_else(
            || "execute_tool".to_owned(),
            |name| format!("execute_tool {name}")
        ),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.type = "function",
        gen_ai.tool.description = spec.map(ToolSpec::description),
        gen_ai.tool.call.id = call_id,
        error.type = tracing::field::Empty,
    )
}
