//! What a tool is to the runtime: its spec, its context, and the erased
//! handles the dispatcher drives. How the generated code calls the author's
//! hooks (preview, check, reconcile) is in `hooks.rs`.

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::args::{FieldErrors, FieldMeta, Members, ToolArgs};
use crate::error::ToolError;
use crate::parse::Arguments;
use crate::policy::Caller;
use crate::result::Data;
use crate::store::Transaction;

mod hooks;
mod output;

pub use hooks::{
    AsyncCheckOutput, AsyncCheckSig, CheckFn, CheckOutput, CheckParams, CheckSig, NotAParameter,
    PreviewOutput, ReconcileFn, ReconcileOutput, ReconcileParams, ReconcileSig, ReconciledOutput,
    async_check_sig, check_sig, preview_output, reconcile_sig, reconciled,
};
pub use output::{
    Misdeclared, MisdeclaredArgs, Question, QuestionError, ToolErrorOf, ToolOutput, into_output,
};

/// A boxed, sendable future, as tool handlers return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a tool function receives as its optional first parameter, `&Ctx<S>`.
///
/// `S` is the application's state, handed to the [`Dispatcher`](crate::Dispatcher)
/// when it is built, or a part of it the dispatcher was given with
/// [`DispatcherBuilder::part`](crate::DispatcherBuilder::part): a tool that
/// only reads takes `&Ctx<Reader>` and never holds the writer. The idempotency key is the one to pass on to a backend
/// that deduplicates (a payment gateway's `Idempotency-Key`): it stays the
/// same across the dispatcher's retries and across identical calls.
#[derive(Debug)]
#[non_exhaustive]
pub struct Ctx<S: ?Sized> {
    /// The application's state, or the part of it the tool names.
    pub state: Arc<S>,
    /// The call's idempotency key: hex SHA-256 of session, tool and the
    /// canonical validated arguments.
    pub idempotency_key: Arc<str>,
    /// The conversation the call belongs to.
    pub session: Arc<str>,
    /// Who is calling, with their policy.
    pub caller: Caller,
    /// The store's transaction lent to a side effect ([`transaction`](Ctx::transaction)).
    transaction: Option<Lent>,
}

/// A lent transaction, as a context holds it. A panic in the handler that
/// used it cannot leave it half-seen: the pipeline rolls it back with the
/// failed attempt. So a context stays unwind-safe as it was before it held one.
#[derive(Debug)]
struct Lent(Arc<dyn Transaction>);

impl std::panic::UnwindSafe for Lent {}
impl std::panic::RefUnwindSafe for Lent {}

impl<S: ?Sized> Ctx<S> {
    /// A context built by hand, for calling a tool function directly (in a unit test, say).
    pub fn new(state: Arc<S>, idempotency_key: &str, session: &str, caller: Caller) -> Self {
        Ctx {
            state,
            idempotency_key: idempotency_key.into(),
            session: session.into(),
            caller,
            transaction: None,
        }
    }

    /// The store's transaction this call's writes may go in, as the store's
    /// own type `T` (`toolcall_postgres::Transaction`): what the handler
    /// writes in it commits with the call's recorded result, in one commit,
    /// or not at all. A crash or a lost connection before that commit
    /// leaves neither the writes nor the result, and the call's outcome
    /// unknown until `reconcile` (or a person) says that nothing ran; a
    /// retry of the handler starts on a transaction rolled back.
    ///
    /// `None` for a read-only tool, a store that lends none (the memory
    /// and SQLite stores), a context built by hand, or a `T` that is not
    /// the store's type: write as you would without it.
    pub fn transaction<T: Transaction>(&self) -> Option<&T> {
        let transaction: &dyn std::any::Any = &*self.transaction.as_ref()?.0;
        transaction.downcast_ref()
    }
}

impl<S: ?Sized> Ctx<S> {
    /// The caller's value of the limit `name` (`Policy::limit`), for a check
    /// that compares in its own units; `None` when the caller's policy does
    /// not set it. Most checks want [`within_limit`](Self::within_limit),
    /// which fails closed on a missing limit.
    pub fn limit(&self, name: &str) -> Option<i64> {
        self.caller.policy().limit_of(name)
    }

    /// Whether `value`, in the limit's own units (the credit converted to
    /// euro cents, say), is within the caller's limit `name`: `Err` with the
    /// standard `POLICY_LIMIT` answer (the limit and the value in its
    /// message, the host's own wording where it replaced it) when it is
    /// above, or when the caller's policy does not set the limit (a missing
    /// limit fails closed). Declare the name on the tool,
    /// `#[tool(limits = ["max_credit_eur_cents"])]`, so that the build
    /// checks every caller's policy against it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use toolcall_core::{Caller, Ctx, Policy};
    /// let caller = Caller::new("tier-1", Policy::new().limit("max_credit_eur_cents", 5_000));
    /// let ctx = Ctx::new(Arc::new(()), "key", "session", caller);
    /// assert!(ctx.within_limit("max_credit_eur_cents", 4_784).is_ok());
    /// let over = ctx.within_limit("max_credit_eur_cents", 5_200).unwrap_err();
    /// assert_eq!(over.code(), "POLICY_LIMIT");
    /// assert!(ctx.within_limit("max_refund_cents", 1).is_err(), "not set: refused");
    /// ```
    pub fn within_limit(&self, name: &str, value: i64) -> Result<(), crate::Rejection> {
        match self.limit(name) {
            Some(limit) if value <= limit => Ok(()),
            limit => Err(crate::Rejection::beyond_limit(name, limit, value)),
        }
    }
}

impl<S: Any + Send + Sync> Ctx<S> {
    /// The typed view of the dispatcher's context: `S` is the dispatcher's
    /// state or one of its parts. Fails only if the registry was given to a
    /// dispatcher that has neither of type `S`, which
    /// [`Dispatcher`](crate::Dispatcher)'s builder already refuses.
    #[doc(hidden)]
    pub fn from_call(cx: &CallContext<'_>) -> Result<Self, ToolError> {
        // The state itself first, without a lookup: most tools take it. The
        // parts are a handful, scanned in order; nothing is hashed.
        let erased = if (**cx.state).is::<S>() {
            Some(cx.state)
        } else {
            let id = TypeId::of::<S>();
            cx.parts
                .iter()
                .find(|(part, _)| *part == id)
                .map(|(_, part)| part)
        };
        let state = erased
            .and_then(|erased| Arc::clone(erased).downcast::<S>().ok())
            .ok_or_else(|| {
                ToolError::internal(format!(
                    "this tool needs state of type `{}`, the dispatcher holds no such state or part",
                    std::any::type_name::<S>()
                ))
            })?;
        Ok(Ctx {
            state,
            idempotency_key: Arc::from(cx.idempotency_key),
            session: Arc::clone(&cx.session),
            caller: Caller::clone(cx.caller),
            transaction: cx.transaction.cloned().map(Lent),
        })
    }
}

/// The untyped context the dispatcher hands to generated code.
///
/// The state and the caller are borrowed from the dispatcher: every call
/// shares them, and a clone of each here would make all threads write the
/// same two reference counts on every call. Only a [`Ctx`] the tool's code
/// takes clones them.
#[doc(hidden)]
pub struct CallContext<'a> {
    pub state: &'a Arc<dyn Any + Send + Sync>,
    /// The parts of the state ([`DispatcherBuilder::part`](crate::DispatcherBuilder::part)),
    /// each by its type.
    pub parts: &'a [(TypeId, Arc<dyn Any + Send + Sync>)],
    /// Borrowed: only a tool that takes a [`Ctx`] copies it.
    pub idempotency_key: &'a str,
    pub session: Arc<str>,
    pub caller: &'a Caller,
    /// The store's transaction a side effect may write in
    /// ([`Ctx::transaction`]).
    pub transaction: Option<&'a Arc<dyn Transaction>>,
}

/// A tool: implemented by `#[tool]` on a hidden type named like the function.
///
/// You do not implement this trait; you name tools in [`tools!`](crate::tools)
/// or collect them with [`Registry::collect`](crate::Registry::collect).
pub trait Tool: 'static {
    /// The argument struct, `<Name>Args`.
    type Args: ToolArgs;

    /// The tool's static description.
    fn spec() -> &'static ToolSpec;

    /// The business check, run before policy, confirmation and execution. It
    /// must have no side effects.
    #[doc(hidden)]
    fn check(args: &Self::Args, cx: &CallContext<'_>) -> Result<(), ToolError>;

    /// The business check that awaits (`#[tool(async_check = path)]`), run
    /// where [`check`](Tool::check) is, with the call's resources locked:
    /// `None` for a tool without one.
    #[doc(hidden)]
    fn async_check<'a>(
        args: &'a Self::Args,
        cx: &'a CallContext<'_>,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>> {
        let _ = (args, cx);
        None
    }

    /// Runs the tool: its output, serialized once.
    #[doc(hidden)]
    fn call<'a>(
        args: Self::Args,
        cx: &'a CallContext<'_>,
    ) -> BoxFuture<'a, Result<Data, ToolError>>;

    /// Asks the backend what became of a call whose outcome is unknown, by
    /// its idempotency key (`#[tool(reconcile = path)]`): `Some(output)` if
    /// it took effect, `None` if it did not. Tools that declare no
    /// `reconcile` answer `None` and are never asked.
    #[doc(hidden)]
    fn reconcile<'a>(cx: &'a CallContext<'_>) -> BoxFuture<'a, Result<Option<Data>, ToolError>> {
        let _ = cx;
        Box::pin(async { Ok(None) })
    }

    /// What the call would do, for a dry run (`#[tool(preview = path)]`):
    /// `None` for a tool that declares no preview.
    #[doc(hidden)]
    fn preview(args: &Self::Args, cx: &CallContext<'_>) -> Option<Result<Value, ToolError>> {
        let _ = (args, cx);
        None
    }
}

/// The type of state a tool's context needs.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct StateType {
    pub id: TypeId,
    pub name: &'static str,
}

impl StateType {
    /// The state type `S`.
    pub fn of<S: Any>() -> Self {
        StateType {
            id: TypeId::of::<S>(),
            name: std::any::type_name::<S>(),
        }
    }
}

/// Everything the runtime knows about one tool. Built by `#[tool]` as a static.
#[derive(Debug)]
pub struct ToolSpec {
    name: &'static str,
    description: &'static str,
    side_effect: bool,
    high_risk: bool,
    untrusted_output: bool,
    untrusted_parts: &'static [&'static str],
    named_limits: &'static [&'static str],
    idempotent_backend: bool,
    timeout_ms: Option<u64>,
    max_output_bytes: Option<u64>,
    max_repeats: Option<u64>,
    approvals: u32,
    fields: &'static [FieldMeta],
    state: Option<fn() -> StateType>,
    check_state: Option<fn() -> StateType>,
    reconcile_state: Option<fn() -> StateType>,
    schema: fn() -> Value,
    validate: ValidateFn,
    reconcile: Option<ReconcileHandle>,
    redaction: std::sync::OnceLock<crate::redact::Plan>,
}

type ReconcileHandle =
    for<'a, 'c> fn(&'a CallContext<'c>) -> BoxFuture<'a, Result<Option<Data>, ToolError>>;

type ValidateFn = fn(&Members<'_>) -> Result<Box<dyn Validated>, FieldErrors>;

/// The parts of a [`ToolSpec`], as `#[tool]` writes them.
#[doc(hidden)]
pub struct SpecParts {
    pub name: &'static str,
    pub description: &'static str,
    pub side_effect: bool,
    pub high_risk: bool,
    /// `#[tool(untrusted_output)]`: what the tool returns was written by
    /// strangers, and taints the session.
    pub untrusted_output: bool,
    /// `#[tool(idempotent_backend)]`: the backend applies one idempotency
    /// key at most once.
    pub idempotent_backend: bool,
    pub timeout_ms: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub state: Option<fn() -> StateType>,
    pub reconcile: bool,
    /// The state the `check` function's `&Ctx<S>` needs, when the tool has one.
    pub check_state: Option<fn() -> StateType>,
    /// The state the `reconcile` function's `&Ctx<S>` needs, when the tool has one.
    pub reconcile_state: Option<fn() -> StateType>,
}

impl ToolSpec {
    #[doc(hidden)]
    pub const fn __new<T: Tool>(parts: SpecParts, fields: &'static [FieldMeta]) -> Self {
        ToolSpec {
            name: parts.name,
            description: parts.description,
            side_effect: parts.side_effect,
            high_risk: parts.high_risk,
            untrusted_output: parts.untrusted_output,
            untrusted_parts: &[],
            named_limits: &[],
            idempotent_backend: parts.idempotent_backend,
            timeout_ms: parts.timeout_ms,
            max_output_bytes: parts.max_output_bytes,
            max_repeats: None,
            approvals: 1,
            fields,
            state: parts.state,
            check_state: parts.check_state,
            reconcile_state: parts.reconcile_state,
            schema: schema_of::<T>,
            validate: validate::<T>,
            reconcile: if parts.reconcile {
                Some(T::reconcile)
            } else {
                None
            },
            redaction: std::sync::OnceLock::new(),
        }
    }

    /// The spec with `#[tool(max_repeats = N)]`: identical calls of a
    /// read-only tool a session may make before `LOOP_DETECTED`. (Not a
    /// field of [`SpecParts`], so that specs written by hand need not name
    /// it.)
    #[doc(hidden)]
    pub const fn __max_repeats(mut self, max_repeats: Option<u64>) -> Self {
        self.max_repeats = max_repeats;
        self
    }

    /// The spec with `#[tool(untrusted_output = ["/part", ...])]`: only
    /// these parts of the output carry untrusted text (and the tool's
    /// output is untrusted).
    #[doc(hidden)]
    pub const fn __untrusted_parts(mut self, parts: &'static [&'static str]) -> Self {
        self.untrusted_output = true;
        self.untrusted_parts = parts;
        self
    }

    /// The spec with `#[tool(limits = ["...", ...])]`: the caller limits its
    /// check reads by name.
    #[doc(hidden)]
    pub const fn __limits(mut self, limits: &'static [&'static str]) -> Self {
        self.named_limits = limits;
        self
    }

    /// The spec with `#[tool(approvals = N)]`: how many distinct people
    /// must approve each call (2 to 10; the macro checks the range).
    #[doc(hidden)]
    pub const fn __approvals(mut self, approvals: u32) -> Self {
        self.approvals = if approvals == 0 { 1 } else { approvals };
        self
    }

    /// How many distinct people must approve each call of this tool: 1, or
    /// `#[tool(approvals = N)]`'s N. The operators' controls may ask for
    /// more ([`Controls::people_needed`](crate::controls::Controls::people_needed)),
    /// never fewer.
    pub fn approvals(&self) -> u32 {
        self.approvals
    }

    /// The name the model calls the tool by.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// What the tool does, for the model: the function's doc comment.
    pub fn description(&self) -> &'static str {
        self.description
    }

    /// Whether the tool changes the world; its completed calls are then
    /// replayed, never repeated.
    pub fn side_effect(&self) -> bool {
        self.side_effect
    }

    /// Whether a person must approve each call before it runs.
    pub fn high_risk(&self) -> bool {
        self.high_risk
    }

    /// Whether what the tool returns was written by someone the host does
    /// not trust (`#[tool(untrusted_output)]`: messages, reviews, web
    /// pages): its values taint the session's later side effects, as the
    /// caller's [`Taint`](crate::Taint) level says.
    pub fn untrusted_output(&self) -> bool {
        self.untrusted_output
    }

    /// The caller limits the tool's check (or handler) reads by name and
    /// compares in its own units (`#[tool(limits = ["max_credit_eur_cents"])]`,
    /// [`Ctx::within_limit`]): a caller's policy may set them as it sets an
    /// argument's limit, and the build refuses a policy limit no tool
    /// declares either way. None is compared raw against an argument.
    pub fn named_limits(&self) -> &'static [&'static str] {
        self.named_limits
    }

    /// The parts of an [untrusted](Self::untrusted_output) output that
    /// carry text strangers wrote, as JSON pointers into it
    /// (`#[tool(untrusted_output = ["/customer_note"])]`); empty when the
    /// whole output is untrusted. Only a part with something in it taints
    /// the session: an invoice whose note is empty taints nothing.
    pub fn untrusted_parts(&self) -> &'static [&'static str] {
        self.untrusted_parts
    }

    /// Whether the tool's backend applies one idempotency key at most once
    /// (`#[tool(idempotent_backend)]`: a payment API's `Idempotency-Key`, a
    /// unique key on the table it writes), so that a call whose outcome is
    /// unknown may run again under its key ([`Ctx::idempotency_key`](crate::Ctx)). A
    /// side effect that declares neither this nor `reconcile` is never run
    /// again blindly: a person answers the question of its unknown outcome.
    pub fn idempotent_backend(&self) -> bool {
        self.idempotent_backend
    }

    /// The most of a result's model text the model gets, if the tool sets it
    /// (`#[tool(max_output_bytes = ...)]`); see [`Settings::max_output_bytes`](crate::Settings::max_output_bytes).
    pub fn max_output_bytes(&self) -> Option<usize> {
        self.max_output_bytes
            .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX))
    }

    /// How many identical calls (same session, tool and validated
    /// arguments) of this read-only tool a session may make before
    /// `LOOP_DETECTED`, if the tool sets it (`#[tool(max_repeats = N)]`, for
    /// a status polled until it changes); otherwise
    /// [`Settings::max_duplicate_calls`](crate::Settings::max_duplicate_calls)
    /// bounds it. A caller's
    /// [`Policy::max_repeats`](crate::Policy::max_repeats) replaces it.
    /// `None` for a side effect, whose identical call is replayed.
    pub fn max_repeats(&self) -> Option<u64> {
        self.max_repeats.filter(|_| !self.side_effect)
    }

    /// How long one attempt may run, if the tool sets it (`#[tool(timeout_ms = ...)]`).
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.timeout_ms.map(std::time::Duration::from_millis)
    }

    /// Whether the tool declares `#[tool(reconcile = path)]`: a way to ask
    /// its backend, by idempotency key, whether a call of unknown outcome
    /// took effect.
    pub fn reconciles(&self) -> bool {
        self.reconcile.is_some()
    }

    pub(crate) fn reconcile<'a>(
        &self,
        cx: &'a CallContext<'_>,
    ) -> Option<BoxFuture<'a, Result<Option<Data>, ToolError>>> {
        self.reconcile.map(|reconcile| reconcile(cx))
    }

    /// The parameters, in declaration order.
    pub fn fields(&self) -> &'static [FieldMeta] {
        self.fields
    }

    /// The JSON Schema of the arguments: the same declaration the validator enforces.
    pub fn parameters_schema(&self) -> Value {
        (self.schema)()
    }

    /// The JSON Schema of the arguments as one caller sees them: each
    /// argument bounded by a limit its policy sets (`#[arg(limit = "...")]`)
    /// says that ceiling as its `maximum` (the lower of the declared one and
    /// the limit), so that the model knows it before it asks. Every export
    /// for a caller ([`Registry::definitions`](crate::Registry::definitions),
    /// the providers' formats, MCP's `tools/list`) reads this one.
    pub fn parameters_schema_for(&self, policy: &crate::Policy) -> Value {
        let mut schema = self.parameters_schema();
        let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            return schema;
        };
        for field in self.fields {
            for constraint in field.constraints {
                let crate::args::Constraint::Limit(name) = constraint else {
                    continue;
                };
                let (Some(limit), Some(Value::Object(property))) =
                    (policy.limit_of(name), properties.get_mut(field.name))
                else {
                    continue;
                };
                let lower = match property.get("maximum").and_then(Value::as_f64) {
                    Some(declared) if declared <= limit as f64 => continue,
                    _ => limit,
                };
                property.insert("maximum".to_owned(), Value::from(lower));
            }
        }
        schema
    }

    /// Validates arguments exactly as the dispatcher's stage 3 does, without
    /// running anything: `Ok` if the tool would accept them, otherwise every
    /// problem, each as `field: problem (description)`.
    pub fn validate_arguments(&self, arguments: &Value) -> Result<(), FieldErrors> {
        match arguments {
            Value::Object(object) => self.validate(object).map(drop),
            _ => Err(FieldErrors::not_an_object()),
        }
    }

    /// Replaces every sensitive value in `arguments` by `"[redacted]"`, as
    /// audit records keep them: the whole value of a `#[arg(sensitive)]`
    /// parameter, and any value, at any depth, whose schema says
    /// `"writeOnly": true` (set on a nested type's field with
    /// `#[schemars(extend("writeOnly" = true))]`).
    pub fn redact_arguments(&self, arguments: &mut Value) {
        self.redaction().redact(arguments);
    }

    /// Whether any of the tool's values is sensitive.
    pub fn has_sensitive_values(&self) -> bool {
        !self.redaction().is_empty()
    }

    pub(crate) fn redaction(&self) -> &crate::redact::Plan {
        self.redaction
            .get_or_init(|| crate::redact::Plan::of(self.fields(), self.parameters_schema()))
    }

    pub(crate) fn state_type(&self) -> Option<StateType> {
        self.state.map(|f| f())
    }

    /// The state the tool's `check` function needs (the `S` of its
    /// `&Ctx<S>`), if it has one. A tool without a context of its own can
    /// still have a check that takes one: the dispatcher's state must then
    /// be this type too, or every call would fail.
    #[allow(
        dead_code,
        reason = "for the dispatcher's builder to refuse a mismatch"
    )]
    pub(crate) fn check_state_type(&self) -> Option<StateType> {
        self.check_state.map(|f| f())
    }

    /// The state the tool's `reconcile` function needs, if it has one; see
    /// [`ToolSpec::check_state_type`].
    #[allow(
        dead_code,
        reason = "for the dispatcher's builder to refuse a mismatch"
    )]
    pub(crate) fn reconcile_state_type(&self) -> Option<StateType> {
        self.reconcile_state.map(|f| f())
    }

    pub(crate) fn validate(
        &self,
        object: &Map<String, Value>,
    ) -> Result<Box<dyn Validated>, FieldErrors> {
        (self.validate)(&Members::Parsed(object))
    }

    /// Stage 3 over any [`Members`]. Over raw members the errors say less:
    /// the dispatcher reads a failed call again from its members' parsed
    /// values, or as a parsed object, whose errors say all.
    pub(crate) fn validate_members(
        &self,
        members: &Members<'_>,
    ) -> Result<Box<dyn Validated>, FieldErrors> {
        (self.validate)(members)
    }
}

/// The arguments of a call of `spec` (`None`: no such tool) as the audit
/// keeps them: verbatim, but for the tool's sensitive values, each
/// `"[redacted]"` (see [`ToolSpec::redact_arguments`]). Text that is not a
/// JSON object cannot be redacted value by value, so none of it is kept.
pub(crate) fn audit_text(spec: Option<&ToolSpec>, arguments: Arguments<'_>) -> String {
    let Some(spec) = spec.filter(|spec| spec.has_sensitive_values()) else {
        return arguments.to_text();
    };
    let parsed = match arguments {
        Arguments::Raw(raw) => serde_json::from_str::<Value>(raw).ok(),
        Arguments::Parsed(value) => Some(value.clone()),
    };
    match parsed {
        Some(mut object @ Value::Object(_)) => {
            spec.redact_arguments(&mut object);
            object.to_string()
        }
        _ => crate::redact::REDACTED.to_owned(),
    }
}

/// Arguments that passed validation, ready for the later stages.
pub(crate) trait Validated: Send + Sync {
    /// The validated arguments as JSON: the input of the idempotency key, the
    /// `pending` of a confirmation, the values the policy limits look at.
    fn to_value(&self) -> Result<Value, serde_json::Error>;
    /// The idempotency key of these arguments of `caller` in `session` for `tool`:
    /// [`idempotency_key`](crate::canonical::idempotency_key) of
    /// [`to_value`](Self::to_value), written without the `Value`.
    fn key(
        &self,
        caller: &str,
        session: &str,
        tool: &str,
    ) -> Result<crate::store::Key, serde_json::Error>;
    /// The field at `index` of the tool's fields (named `name`) as JSON,
    /// as it is in [`to_value`](Self::to_value).
    fn member(&self, index: usize, name: &str) -> Result<Value, serde_json::Error>;
    fn check(&self, cx: &CallContext<'_>) -> Result<(), ToolError>;
    fn async_check<'a>(
        &'a self,
        cx: &'a CallContext<'_>,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>>;
    fn preview(&self, cx: &CallContext<'_>) -> Option<Result<Value, ToolError>>;
    fn call<'a>(self: Box<Self>, cx: &'a CallContext<'_>)
    -> BoxFuture<'a, Result<Data, ToolError>>;
}

struct Typed<T: Tool>(T::Args);

impl<T: Tool> Validated for Typed<T> {
    fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(&self.0)
    }

    fn key(
        &self,
        caller: &str,
        session: &str,
        tool: &str,
    ) -> Result<crate::store::Key, serde_json::Error> {
        crate::canonical::idempotency_key_of(caller, session, tool, &self.0)
    }

    fn member(&self, index: usize, name: &str) -> Result<Value, serde_json::Error> {
        match self.0.member(index) {
            Some(value) => value,
            None => Ok(self.to_value()?.get(name).cloned().unwrap_or(Value::Null)),
        }
    }

    fn check(&self, cx: &CallContext<'_>) -> Result<(), ToolError> {
        T::check(&self.0, cx)
    }

    fn async_check<'a>(
        &'a self,
        cx: &'a CallContext<'_>,
    ) -> Option<BoxFuture<'a, Result<(), ToolError>>> {
        T::async_check(&self.0, cx)
    }

    fn preview(&self, cx: &CallContext<'_>) -> Option<Result<Value, ToolError>> {
        T::preview(&self.0, cx)
    }

    fn call<'a>(
        self: Box<Self>,
        cx: &'a CallContext<'_>,
    ) -> BoxFuture<'a, Result<Data, ToolError>> {
        T::call(self.0, cx)
    }
}

fn validate<T: Tool>(members: &Members<'_>) -> Result<Box<dyn Validated>, FieldErrors> {
    let mut errors = FieldErrors::default();
    if let Members::Raw(raw) = members {
        // The fast path: a member that is no field sends the call to the
        // full reading, whose errors name it and suggest the field meant.
        let fields = T::Args::fields();
        if raw
            .iter()
            .any(|(name, _)| fields.iter().all(|f| f.name != name))
        {
            return Err(FieldErrors::unread());
        }
    }
    let args = T::Args::from_members(members, &mut errors);
    if let Members::Parsed(_) | Members::Values(_) = members {
        errors.unknown_members(members, T::Args::fields());
    }
    match args {
        Some(args) if errors.is_empty() => Ok(Box::new(Typed::<T>(args))),
        _ => Err(errors),
    }
}

fn schema_of<T: Tool>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|settings| settings.inline_subschemas = true)
        .into_generator();
    let schema = generator.into_root_schema_for::<T::Args>();
    crate::args::finish_schema(schema.to_value(), T::Args::fields())
}

#[cfg(test)]
mod tests;
