//! The pipeline every call goes through, stage by stage.

use std::any::{Any, TypeId};
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tracing::Instrument as _;

use crate::args::Constraint;
use crate::audit::{AuditRecord, AuditSink, MemoryAudit};
use crate::canonical::idempotency_key;
use crate::error::ToolError;
use crate::parse::{Arguments, parse_object};
use crate::policy::{Caller, Policy};
use crate::registry::Registry;
use crate::result::{Code, ToolResult};
use crate::store::{Seen, Sessions};
use crate::tool::{CallContext, ToolSpec, Validated};

/// The knobs of the pipeline. The defaults are the reference's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// Tool calls a session may make, whatever their outcome (default 10).
    pub max_steps: u64,
    /// How many times one exact call (same session, tool and validated
    /// arguments) may be made before `LOOP_DETECTED` (default 3).
    pub max_duplicate_calls: u64,
    /// Retries after a transient failure, under the same idempotency key (default 2).
    pub max_retries: u32,
    /// Wait before retry `n` (1-based): `n` times this (default 200 ms).
    pub retry_backoff: Duration,
    /// Largest raw arguments text accepted, in bytes (default 64 KiB).
    pub max_argument_bytes: usize,
    /// Deepest nesting of arrays and objects accepted in raw arguments (default 32).
    pub max_depth: usize,
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
        }
    }
}

/// One tool call proposed by the model, with what the host knows about it.
///
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
    session: &'a str,
    caller: Option<&'a Caller>,
    confirmed: bool,
    call_id: Option<&'a str>,
}

impl<'a> Call<'a> {
    /// A call of `tool` with these arguments, in session `"default"`, by the
    /// dispatcher's default caller, not confirmed.
    pub fn new(tool: &'a str, arguments: impl Into<Arguments<'a>>) -> Self {
        Call {
            tool,
            arguments: arguments.into(),
            session: "default",
            caller: None,
            confirmed: false,
            call_id: None,
        }
    }

    /// The conversation this call belongs to: the scope of the step budget,
    /// the loop guard and the idempotency key.
    pub fn session(mut self, session: &'a str) -> Self {
        self.session = session;
        self
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

    /// The provider's id of the call, kept in the audit record.
    pub fn call_id(mut self, call_id: &'a str) -> Self {
        self.call_id = Some(call_id);
        self
    }

    /// The tool asked for.
    pub fn tool(&self) -> &'a str {
        self.tool
    }
}

/// Why a dispatcher could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A tool's context needs state of another type than the dispatcher's.
    StateMismatch {
        /// The tool.
        tool: &'static str,
        /// The state type its `&Ctx<...>` names.
        expected: &'static str,
        /// The dispatcher's state type.
        found: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::StateMismatch {
                tool,
                expected,
                found,
            } => write!(
                f,
                "tool `{tool}` takes `&Ctx<{expected}>` but the dispatcher's state is `{found}`"
            ),
        }
    }
}

impl std::error::Error for BuildError {}

/// Sets up a [`Dispatcher`].
pub struct DispatcherBuilder<S> {
    registry: Registry,
    state: Arc<S>,
    settings: Settings,
    caller: Caller,
    audit: Arc<dyn AuditSink>,
}

impl<S: Any + Send + Sync> DispatcherBuilder<S> {
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

    /// The caller of calls that name none. Without this, the default caller
    /// (`"default"`) may call every registered tool and has no limits set.
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// The default caller's policy, under the id `"default"`.
    pub fn policy(self, policy: Policy) -> Self {
        self.caller(Caller::new("default", policy))
    }

    /// Where audit records go (an in-memory log by default).
    pub fn audit(mut self, sink: impl AuditSink + 'static) -> Self {
        self.audit = Arc::new(sink);
        self
    }

    /// Checks that every tool's context fits the state, and builds.
    pub fn build(self) -> Result<Dispatcher<S>, BuildError> {
        for spec in self.registry.iter() {
            if let Some(needed) = spec.state_type()
                && needed.id != TypeId::of::<S>()
            {
                return Err(BuildError::StateMismatch {
                    tool: spec.name(),
                    expected: needed.name,
                    found: std::any::type_name::<S>(),
                });
            }
        }
        Ok(Dispatcher {
            registry: self.registry,
            erased_state: Arc::clone(&self.state) as Arc<dyn Any + Send + Sync>,
            state: self.state,
            settings: self.settings,
            caller: self.caller,
            audit: self.audit,
            sessions: Sessions::default(),
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
/// | 7 | a person's approval for high-risk tools | `CONFIRMATION_REQUIRED` (`data.pending`) |
/// | 8 | execution, bounded retries under one key, panics caught | `UPSTREAM_UNAVAILABLE`, `INTERNAL_ERROR` |
///
/// Every call leaves exactly one [`AuditRecord`]. Nothing the model sends
/// makes [`execute`](Dispatcher::execute) fail or panic: every outcome is a
/// [`ToolResult`].
pub struct Dispatcher<S> {
    registry: Registry,
    state: Arc<S>,
    erased_state: Arc<dyn Any + Send + Sync>,
    settings: Settings,
    caller: Caller,
    audit: Arc<dyn AuditSink>,
    sessions: Sessions,
}

impl<S> fmt::Debug for Dispatcher<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dispatcher")
            .field("registry", &self.registry)
            .field("settings", &self.settings)
            .field("caller", &self.caller)
            .finish_non_exhaustive()
    }
}

// A stage that says no returns the finished result as its error: the
// rejection *is* the answer, built once, moved out, never boxed per call.
#[allow(clippy::result_large_err)]
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
            audit: Arc::new(MemoryAudit::new()),
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
        &self.settings
    }

    /// The caller of calls that name none.
    pub fn default_caller(&self) -> &Caller {
        &self.caller
    }

    /// Runs one call through the whole pipeline and audits it.
    pub async fn execute(&self, call: Call<'_>) -> ToolResult {
        let started = Instant::now();
        let caller = call.caller.unwrap_or(&self.caller);
        let span = tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = call.tool,
            gen_ai.tool.call.id = call.call_id,
            error.type = tracing::field::Empty,
        );
        let (step, result) = self.run(&call, caller).instrument(span.clone()).await;
        if !result.ok {
            span.record("error.type", result.code.as_str());
        }
        let record = AuditRecord {
            session_id: call.session.to_owned(),
            caller: caller.id().to_owned(),
            step,
            tool: call.tool.to_owned(),
            arguments: self.audited_arguments(&call),
            confirmed: call.confirmed,
            ok: result.ok,
            code: result.code.clone(),
            replayed: result.replayed,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            call_id: call.call_id.map(str::to_owned),
        };
        tracing::debug!(parent: &span, code = %record.code, step, replayed = record.replayed, "tool call");
        self.audit.record(record);
        result
    }

    /// The arguments as the audit keeps them: verbatim, but for the values
    /// of the tool's `sensitive` parameters.
    fn audited_arguments(&self, call: &Call<'_>) -> String {
        let sensitive: Vec<&str> = match self.registry.get(call.tool) {
            Some(spec) => spec
                .fields()
                .iter()
                .filter(|f| f.sensitive)
                .map(|f| f.name)
                .collect(),
            None => Vec::new(),
        };
        if sensitive.is_empty() {
            call.arguments.to_text()
        } else {
            call.arguments.to_redacted_text(&sensitive)
        }
    }

    async fn run(&self, call: &Call<'_>, caller: &Caller) -> (u64, ToolResult) {
        let step = self.sessions.next_step(call.session);
        let result = match self.pipeline(call, caller, step).await {
            Ok(result) | Err(result) => result,
        };
        (step, result)
    }

    async fn pipeline(
        &self,
        call: &Call<'_>,
        caller: &Caller,
        step: u64,
    ) -> Result<ToolResult, ToolResult> {
        let name = call.tool;
        let fail = |code: Code, message: String| ToolResult::failure(name, code, message);

        // 0. Step budget.
        if step > self.settings.max_steps {
            return Err(fail(
                Code::StepLimit,
                "Tool call budget exhausted. Stop calling tools and answer the user.".into(),
            ));
        }

        // 1. Lookup and allowlist.
        let spec = self.resolve(name, caller.policy())?;

        // 2. Parse.
        let object = parse_object(
            call.arguments,
            self.settings.max_argument_bytes,
            self.settings.max_depth,
        )
        .map_err(|error| fail(Code::InvalidJson, error.to_string()))?;

        // 3. Strict validation.
        let validated = spec
            .validate(&object)
            .map_err(|errors| fail(Code::InvalidArguments, errors.to_string()))?;
        let arguments = validated.to_value().map_err(|error| {
            tracing::error!(tool = name, %error, "validated arguments do not serialize");
            internal_error(name)
        })?;

        // 4. Idempotency: the key comes from the validated, canonical arguments.
        let key = idempotency_key(call.session, name, &arguments);
        match self
            .sessions
            .observe(call.session, &key, self.settings.max_duplicate_calls)
        {
            Seen::Loop => {
                return Err(fail(
                    Code::LoopDetected,
                    "This exact call was already made. Use the previous result.".into(),
                ));
            }
            Seen::Completed(mut stored) => {
                stored.replayed = true;
                return Ok(stored);
            }
            Seen::Fresh => {}
        }
        let cx = CallContext {
            state: Arc::clone(&self.erased_state),
            idempotency_key: Arc::from(key.as_str()),
            session: Arc::from(call.session),
            caller: caller.clone(),
        };

        // 5. Business rules.
        match catch_unwind(AssertUnwindSafe(|| validated.check(&cx))) {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(failure_of(name, error)),
            Err(panic) => {
                tracing::error!(
                    tool = name,
                    panic = panic_text(&panic),
                    "the check panicked"
                );
                return Err(internal_error(name));
            }
        }

        // 6. Policy limits declared on the arguments.
        self.check_limits(spec, caller, &arguments)
            .map_err(|message| fail(Code::PolicyLimit, message))?;

        // 7. Confirmation, from the host only.
        if spec.high_risk() && !call.confirmed {
            let mut pending = fail(
                Code::ConfirmationRequired,
                format!("{name} needs user approval before it runs."),
            );
            pending.data.insert("pending".into(), arguments);
            return Err(pending);
        }

        // 8. Execution.
        let data = self
            .execute_with_retries(spec, validated, &object, &cx)
            .await?;
        let result = ToolResult::success(name, data);
        if spec.side_effect() {
            self.sessions.complete(call.session, key, result.clone());
        }
        Ok(result)
    }

    fn resolve(&self, name: &str, policy: &Policy) -> Result<&'static ToolSpec, ToolResult> {
        let Some(spec) = self.registry.get(name) else {
            let available: Vec<Value> = policy.allowed().map(Value::from).collect();
            return Err(ToolResult::failure(
                name,
                Code::UnknownTool,
                format!("No tool named '{name}'."),
            )
            .with_data("available", available));
        };
        if !policy.allows(name) {
            return Err(ToolResult::failure(
                name,
                Code::ToolNotAllowed,
                format!("Tool '{name}' is not available in this context."),
            ));
        }
        Ok(spec)
    }

    fn check_limits(
        &self,
        spec: &ToolSpec,
        caller: &Caller,
        arguments: &Value,
    ) -> Result<(), String> {
        for field in spec.fields() {
            for constraint in field.constraints {
                let Constraint::Limit(limit_name) = constraint else {
                    continue;
                };
                let Some(value) = arguments.get(field.name).filter(|v| !v.is_null()) else {
                    continue;
                };
                let Some(limit) = caller.policy().limit_of(limit_name) else {
                    return Err(format!(
                        "{} is bounded by the limit `{limit_name}`, which is not set for this caller. \
                         A human agent must handle it; tell the user it was escalated.",
                        field.name
                    ));
                };
                let over = match value.as_i64() {
                    Some(n) => n > limit,
                    None => value.as_f64().is_none_or(|x| x > limit as f64),
                };
                if over {
                    return Err(format!(
                        "{} {value} is above this caller's limit of {limit} ({limit_name}). \
                         A human agent must handle it; tell the user it was escalated.",
                        field.name
                    ));
                }
            }
        }
        Ok(())
    }

    async fn execute_with_retries(
        &self,
        spec: &'static ToolSpec,
        validated: Box<dyn Validated>,
        object: &Map<String, Value>,
        cx: &CallContext,
    ) -> Result<Map<String, Value>, ToolResult> {
        let name = spec.name();
        let mut first = Some(validated);
        let mut attempt: u32 = 0;
        loop {
            // A retry needs fresh arguments: the handler consumed the last ones.
            let args = match first.take() {
                Some(args) => args,
                None => spec.validate(object).map_err(|_| internal_error(name))?,
            };
            match CatchUnwind(args.call(cx)).await {
                Ok(Ok(Value::Object(data))) => return Ok(data),
                Ok(Ok(other)) => {
                    let mut data = Map::new();
                    data.insert("result".into(), other);
                    return Ok(data);
                }
                Ok(Err(ToolError::Rejected(rejection))) => {
                    let (code, message) = rejection.into_parts();
                    return Err(ToolResult::failure(name, code, message));
                }
                Ok(Err(ToolError::Transient(error))) => {
                    tracing::warn!(tool = name, attempt, %error, "transient failure");
                    if attempt >= self.settings.max_retries {
                        return Err(upstream_unavailable(name));
                    }
                    attempt += 1;
                    let wait = self.settings.retry_backoff * attempt;
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                }
                Ok(Err(ToolError::Internal(error))) => {
                    tracing::error!(tool = name, %error, "the tool failed");
                    return Err(internal_error(name));
                }
                Err(panic) => {
                    tracing::error!(tool = name, panic = panic_text(&panic), "the tool panicked");
                    return Err(internal_error(name));
                }
            }
        }
    }
}

/// The result of a check that said no. A check is not retried: a transient
/// failure there means the backend is unavailable now.
fn failure_of(name: &str, error: ToolError) -> ToolResult {
    match error {
        ToolError::Rejected(rejection) => {
            let (code, message) = rejection.into_parts();
            ToolResult::failure(name, code, message)
        }
        ToolError::Transient(error) => {
            tracing::warn!(tool = name, %error, "transient failure in the check");
            upstream_unavailable(name)
        }
        ToolError::Internal(error) => {
            tracing::error!(tool = name, %error, "the check failed");
            internal_error(name)
        }
    }
}

fn upstream_unavailable(name: &str) -> ToolResult {
    ToolResult::failure(
        name,
        Code::UpstreamUnavailable,
        "The backend is unavailable. Do not retry now; tell the user.",
    )
}

fn internal_error(name: &str) -> ToolResult {
    ToolResult::failure(
        name,
        Code::InternalError,
        "The tool failed unexpectedly. Do not retry; tell the user.",
    )
}

fn panic_text(panic: &Box<dyn Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Polls a future, turning a panic inside it into an error.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.get_mut().0;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut *inner).poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}
