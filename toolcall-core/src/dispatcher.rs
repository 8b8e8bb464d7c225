//! The dispatcher: the type that holds the configuration, and the entry
//! of a call ([`Dispatcher::execute`]), which audits it.
//!
//! Its behaviour lives in three files: this one, `pipeline.rs` (the driver,
//! which sequences the stages for every entry) and `approval.rs` (the
//! host's decisions on pending approvals, the other entry). The stages are
//! leaves on `Stages` (`stages.rs`; see `pipeline.rs` for which file
//! holds which); how it is set up is in `builder.rs`, `settings.rs` and
//! `call.rs`; what is checked at build in `checks.rs`; the standard
//! failures and their messages in `messages.rs`; the audit record a call
//! leaves in `audited.rs`.

// A stage that says no returns the finished `ToolResult` as its error: the
// rejection is the answer, built once and moved out, never boxed per call.
#![allow(clippy::result_large_err)]

mod approval;
mod arguments;
mod audited;
mod builder;
mod call;
mod catch;
mod checks;
mod confirm;
mod dry_run;
mod execute;
mod idempotency;
mod ids;
mod inbox;
mod locks;
mod messages;
mod pipeline;
mod retry;
mod rules;
mod settings;
mod stages;
mod taint;
mod twins;

use std::any::Any;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Instant;

use self::audited::{AUDIT_CUT_ARGUMENTS, Called};

use crate::audit::{AuditSink, Cut, MemoryAudit};
use crate::echo::MAX_NAME_ECHO;
use crate::parse::Arguments;
use crate::policy::{Caller, Policy};
use crate::registry::Registry;
use crate::result::ToolResult;
use crate::store::{MemoryStore, Store};
use crate::tool::ToolSpec;

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
        let stages::Noted {
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
        let arguments = crate::tool::audited(spec, call.arguments);
        let arguments = if arguments.len() > self.stages.settings.max_argument_bytes {
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
        let mut record = called.ended(tool, &result);
        record.arguments = arguments;
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
        audited::hand(&*self.audit, record, &span);
        if let Some(edited) = carried.and_then(|c| c.edited) {
            // The audit keeps both versions: the model's call above, and
            // the call the person's edits made, as it ran.
            let arguments = crate::tool::audited(spec, Arguments::Parsed(&edited));
            let mut record = called.ended(call.tool.to_owned(), &result);
            record.arguments = arguments;
            record.confirmed = true;
            record.call_id = call.call_id.map(str::to_owned);
            record.tainted = tainted;
            audited::hand(&*self.audit, record, &span);
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
        let result = self
            .stages
            .fail(Failure::ConversationRequired, tool.clone());
        let called = Called {
            session: "",
            caller,
            step: 0,
            started,
            at_ms,
        };
        let arguments = crate::tool::audited(spec, call.arguments);
        let arguments = if arguments.len() > self.stages.settings.max_argument_bytes {
            Cut::keep("arguments", arguments, AUDIT_CUT_ARGUMENTS, &mut cut)
        } else {
            arguments
        };
        let mut record = called.ended(tool, &result);
        record.arguments = arguments;
        record.call_id = call
            .call_id
            .map(|id| crate::echo::bound(id, crate::echo::MAX_CALL_ID_BYTES).into_owned());
        record.cut = cut;
        record.dry_run = call.dry_run;
        audited::hand(&*self.audit, record, span);
        result
    }

    /// The output budget: a result whose model text is over the tool's (or
    /// the dispatcher's) bound is cut to fit; what it was goes to `cut`.
    fn fit_output(&self, spec: Option<&ToolSpec>, result: &mut ToolResult, cut: &mut Vec<Cut>) {
        let budget = spec
            .and_then(|spec| spec.max_output_bytes())
            .or(self.stages.settings.max_output_bytes);
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
