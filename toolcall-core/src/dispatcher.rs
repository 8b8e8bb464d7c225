//! The dispatcher: the type that holds the configuration.
//!
//! Its behaviour lives in two other files: `pipeline.rs` (a call's way: the
//! entry [`Dispatcher::execute`], the driver, which sequences the stages
//! for every entry, and the audit record) and `approval.rs` (the host's
//! decisions on pending approvals, the other entry). The stages are leaves
//! on `Stages` (`stages.rs`; see `pipeline.rs` for which file holds which);
//! how it is set up is in `builder.rs`, `settings.rs` and `call.rs`; what
//! is checked at build in `checks.rs`; the standard failures and their
//! messages in `messages.rs`; the audit record's making and the call's
//! tracing span in `audited.rs`.

// A stage that says no returns the finished `ToolResult` as its error: the
// rejection is the answer, built once and moved out, never boxed per call.
#![allow(clippy::result_large_err)]

mod approval;
mod arguments;
mod asked;
mod audited;
mod builder;
mod call;
mod carry;
mod catch;
mod checks;
mod confirm;
mod doubt;
mod dry_run;
mod execute;
mod idempotency;
pub(crate) mod ids;
mod inbox;
mod locks;
mod messages;
mod operators;
mod pipeline;
mod read_only;
mod retry;
mod rules;
mod settings;
mod stages;
mod taint;
mod twins;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::audit::{AuditSink, MemoryAudit};
use crate::policy::{Caller, Policy};
use crate::registry::Registry;
use crate::store::{MemoryStore, Store};

pub use approval::{Decision, UNKNOWN_APPROVAL_TOOL};
pub use builder::DispatcherBuilder;
pub use call::Call;
pub use checks::{BuildError, BuildWarning};
pub use messages::{Failure, MessageContext};
pub use settings::{Approvals, Settings};

use self::stages::Stages;

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
/// | 7 | a person's approval for high-risk tools | `CONFIRMATION_REQUIRED` (`data.pending`, `question_id`), `CONFIRMATION_EXPIRED`, `CONFIRMATION_INVALID` |
/// | 8 | execution: one claim per key, bounded retries under that key, a timeout, panics caught | `CALL_IN_PROGRESS`, `TIMEOUT`, `UPSTREAM_UNAVAILABLE`, `INTERNAL_ERROR` |
///
/// Every call leaves one [`AuditRecord`](crate::AuditRecord); a call a person edited leaves
/// two, the model's and the one that ran. Nothing the model sends
/// makes [`execute`](Dispatcher::execute) fail or panic: every outcome is a
/// [`ToolResult`](crate::ToolResult). A store that fails answers `STORE_UNAVAILABLE`. The
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
    /// The parts of the state tools take instead of it, by type: a few,
    /// scanned in order by the tools that take one.
    parts: Box<[(TypeId, Arc<dyn Any + Send + Sync>)]>,
    caller: Caller,
    callers: HashMap<String, Caller>,
    warnings: Vec<BuildWarning>,
    audit: Arc<dyn AuditSink>,
    /// What the stages read: the settings, the store, the answers' wording.
    stages: Stages<St>,
}

impl<S, St> fmt::Debug for Dispatcher<S, St> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher")
            .field("registry", &self.registry)
            .field("settings", &self.stages.settings)
            .field("caller", &self.caller)
            .field("callers", &self.callers)
            .field("warnings", &self.warnings)
            .field("messages", &self.stages.messages)
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
            parts: Vec::new(),
            audit: Arc::new(MemoryAudit::new()),
            store: MemoryStore::default(),
            messages: messages::Messages::default(),
        }
    }
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// What the check, the preview and the handler see of the call: the
    /// drivers (`pipeline`, `read_only`, `dry_run`) all make it here.
    /// `key` is the call's key, copied out of it: the context borrows its
    /// text (a tool that takes a `Ctx` copies it, no other does) while the
    /// stages borrow the call mutably.
    fn call_context<'a>(
        &'a self,
        prepared: &arguments::Prepared<'a>,
        key: &'a crate::store::Key,
    ) -> crate::tool::CallContext<'a> {
        crate::tool::CallContext {
            state: &self.erased_state,
            parts: &self.parts,
            idempotency_key: key.as_str(),
            session: ids::shared_session(prepared.session),
            caller: prepared.caller,
            transaction: None,
        }
    }

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
        &self.stages.settings
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

    /// Every caller the dispatcher was built with, the default caller
    /// first: what the operators' controls are checked against
    /// ([`controls::check`](crate::controls::check)).
    pub fn callers(&self) -> Vec<&Caller> {
        let mut callers = vec![&self.caller];
        let mut others: Vec<&Caller> = self.callers.values().collect();
        others.sort_by(|a, b| a.id().cmp(b.id()));
        callers.extend(others);
        callers
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
        &self.stages.store
    }

    /// Makes every unknown outcome in the store a person's question now,
    /// without waiting for an identical call: a side effect whose process
    /// died after its claim, or that could not record what came of it
    /// ([`life::surface`](crate::life::surface)). The approval inbox does
    /// this before it lists; an operator may run it on a schedule.
    pub async fn surface_unknown_outcomes(
        &self,
    ) -> Result<crate::life::Surfaced, crate::store::StoreError> {
        crate::life::surface(&self.stages.store, crate::store::now_ms()).await
    }
}
