//! How a [`Dispatcher`] is set up and checked before it runs a call.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::messages::{MessageContext, Messages};
use super::stages::Stages;
use super::twins::Twins;
use super::{Approvals, BuildError, Dispatcher, Settings, checks};
#[cfg(doc)]
use super::{BuildWarning, Call, Failure};
use crate::audit::AuditSink;
use crate::policy::{Caller, Policy};
use crate::registry::Registry;
use crate::result::Code;
use crate::store::{MemoryStore, Store};
use crate::tool::StateType;

/// Sets up a [`Dispatcher`].
pub struct DispatcherBuilder<S, St = MemoryStore> {
    pub(super) registry: Registry,
    pub(super) state: Arc<S>,
    pub(super) settings: Settings,
    pub(super) caller: Caller,
    pub(super) callers: Vec<Caller>,
    /// The parts of the state given to [`part`](Self::part), in order.
    pub(super) parts: Vec<(StateType, Arc<dyn Any + Send + Sync>)>,
    pub(super) audit: Arc<dyn AuditSink>,
    pub(super) store: St,
    pub(super) messages: Messages,
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

    /// See [`Settings::max_pending_per_caller`].
    pub fn max_pending_per_caller(mut self, max: usize) -> Self {
        self.settings.max_pending_per_caller = max;
        self
    }

    /// See [`Settings::max_pending_per_principal`].
    pub fn max_pending_per_principal(mut self, max: usize) -> Self {
        self.settings.max_pending_per_principal = max;
        self
    }

    /// See [`Settings::callers_share_conversations`]: whether callers that
    /// name one conversation share its step budget and its taint (never
    /// their replays, counts or questions).
    pub fn callers_share_conversations(mut self, yes: bool) -> Self {
        self.settings.callers_share_conversations = yes;
        self
    }

    /// See [`Settings::approval_ttl`].
    pub fn approval_ttl(mut self, approval_ttl: Duration) -> Self {
        self.settings.approval_ttl = approval_ttl;
        self
    }

    /// See [`Settings::denial_ttl`].
    pub fn denial_ttl(mut self, denial_ttl: Duration) -> Self {
        self.settings.denial_ttl = denial_ttl;
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

    /// A part of the state, made from it once, here, for the tools (and
    /// checks and reconcile functions) that take `&Ctx<P>` rather than the
    /// whole state: as axum's `FromRef` gives a handler a sub-state. A tool
    /// holds only what its context names, so a read-only tool given a
    /// read-only connection cannot write, whatever its code or the
    /// dispatcher's does.
    ///
    /// `part` runs now, once: every call gets the same `Arc<P>` (so give a
    /// pool or a handle, not one connection per call). Each part needs a
    /// type of its own (a newtype around a connection, say): two parts of
    /// one type, or a part of the state's own type, are a [`BuildError`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use toolcall_core::{Dispatcher, Registry};
    /// struct Shop { reader: Reader, writer: Writer }
    /// #[derive(Clone)]
    /// struct Reader(Arc<String>);
    /// #[derive(Clone)]
    /// struct Writer(Arc<String>);
    ///
    /// let shop = Shop { reader: Reader(Arc::default()), writer: Writer(Arc::default()) };
    /// // Tools taking `&Ctx<Reader>` get the reader, never the writer.
    /// let dispatcher = Dispatcher::builder(Registry::default(), Arc::new(shop))
    ///     .part(|shop: &Shop| shop.reader.clone())
    ///     .part(|shop: &Shop| shop.writer.clone())
    ///     .build()?;
    /// # Ok::<(), toolcall_core::BuildError>(())
    /// ```
    pub fn part<P: Any + Send + Sync>(mut self, part: impl FnOnce(&S) -> P) -> Self {
        let made: Arc<dyn Any + Send + Sync> = Arc::new(part(&self.state));
        self.parts.push((StateType::of::<P>(), made));
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
            parts: self.parts,
            audit: self.audit,
            store,
            messages: self.messages,
        }
    }

    /// Checks the setup, and builds.
    ///
    /// Refused ([`BuildError`]): a tool, or a tool's check or reconcile
    /// function, whose `&Ctx<...>` names neither the dispatcher's state nor
    /// one of its [`part`](Self::part)s; two parts of one type, or a part of
    /// the state's own type; a caller (the default one
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
        for (at, (part, _)) in self.parts.iter().enumerate() {
            // A `&Ctx<P>` finds the state first, then the first part of its
            // type: a second one would be silently unreachable, and a tool
            // could hold the writer where the reader was meant.
            let earlier = self.parts[..at]
                .iter()
                .any(|(other, _)| other.id == part.id);
            if earlier || part.id == TypeId::of::<S>() {
                return Err(BuildError::DuplicatePart { part: part.name });
            }
        }
        let held = |needed: StateType| {
            needed.id == TypeId::of::<S>()
                || self.parts.iter().any(|(part, _)| part.id == needed.id)
        };
        for spec in self.registry.iter() {
            if let Some(needed) = spec.state_type()
                && !held(needed)
            {
                return Err(BuildError::StateMismatch {
                    tool: spec.name(),
                    expected: needed.name,
                    found,
                });
            }
            if let Some(needed) = spec.check_state_type()
                && !held(needed)
            {
                return Err(BuildError::CheckStateMismatch {
                    tool: spec.name(),
                    expected: needed.name,
                    found,
                });
            }
            if let Some(needed) = spec.reconcile_state_type()
                && !held(needed)
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
            parts: self
                .parts
                .into_iter()
                .map(|(part, made)| (part.id, made))
                .collect(),
            caller: self.caller,
            callers,
            warnings,
            audit: self.audit,
            stages: Stages {
                settings: self.settings,
                store: self.store,
                messages: self.messages,
                twins: Twins::default(),
                held: Default::default(),
            },
        })
    }
}
