//! What a tool is to the runtime: its spec, its context, and the erased
//! handles the dispatcher drives.

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::args::{FieldErrors, FieldMeta, Members, ToolArgs};
use crate::error::ToolError;
use crate::policy::Caller;

/// A boxed, sendable future, as tool handlers return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a tool function receives as its optional first parameter, `&Ctx<S>`.
///
/// `S` is the application's state, handed to the [`Dispatcher`](crate::Dispatcher)
/// when it is built. The idempotency key is the one to pass on to a backend
/// that deduplicates (a payment gateway's `Idempotency-Key`): it stays the
/// same across the dispatcher's retries and across identical calls.
#[derive(Debug)]
#[non_exhaustive]
pub struct Ctx<S: ?Sized> {
    /// The application's state.
    pub state: Arc<S>,
    /// The call's idempotency key: hex SHA-256 of session, tool and the
    /// canonical validated arguments.
    pub idempotency_key: Arc<str>,
    /// The conversation the call belongs to.
    pub session: Arc<str>,
    /// Who is calling, with their policy.
    pub caller: Caller,
}

impl<S: ?Sized> Ctx<S> {
    /// A context built by hand, for calling a tool function directly (in a unit test, say).
    pub fn new(state: Arc<S>, idempotency_key: &str, session: &str, caller: Caller) -> Self {
        Ctx {
            state,
            idempotency_key: idempotency_key.into(),
            session: session.into(),
            caller,
        }
    }
}

impl<S: Any + Send + Sync> Ctx<S> {
    /// The typed view of the dispatcher's context. Fails only if the registry
    /// was given to a dispatcher whose state is not `S`, which
    /// [`Dispatcher`](crate::Dispatcher)'s builder already refuses.
    #[doc(hidden)]
    pub fn from_call(cx: &CallContext) -> Result<Self, ToolError> {
        let state = Arc::clone(&cx.state).downcast::<S>().map_err(|_| {
            ToolError::internal(format!(
                "this tool needs state of type `{}`, the dispatcher holds another",
                std::any::type_name::<S>()
            ))
        })?;
        Ok(Ctx {
            state,
            idempotency_key: Arc::clone(&cx.idempotency_key),
            session: Arc::clone(&cx.session),
            caller: cx.caller.clone(),
        })
    }
}

/// The untyped context the dispatcher hands to generated code.
#[doc(hidden)]
pub struct CallContext {
    pub state: Arc<dyn Any + Send + Sync>,
    pub idempotency_key: Arc<str>,
    pub session: Arc<str>,
    pub caller: Caller,
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
    fn check(args: &Self::Args, cx: &CallContext) -> Result<(), ToolError>;

    /// Runs the tool.
    fn call<'a>(args: Self::Args, cx: &'a CallContext) -> BoxFuture<'a, Result<Value, ToolError>>;

    /// Asks the backend what became of a call whose outcome is unknown, by
    /// its idempotency key (`#[tool(reconcile = path)]`): `Some(output)` if
    /// it took effect, `None` if it did not. Tools that declare no
    /// `reconcile` answer `None` and are never asked.
    fn reconcile(cx: &CallContext) -> BoxFuture<'_, Result<Option<Value>, ToolError>> {
        let _ = cx;
        Box::pin(async { Ok(None) })
    }

    /// What the call would do, for a dry run (`#[tool(preview = path)]`):
    /// `None` for a tool that declares no preview.
    fn preview(args: &Self::Args, cx: &CallContext) -> Option<Result<Value, ToolError>> {
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
    timeout_ms: Option<u64>,
    max_output_bytes: Option<u64>,
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
    for<'a> fn(&'a CallContext) -> BoxFuture<'a, Result<Option<Value>, ToolError>>;

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
            timeout_ms: parts.timeout_ms,
            max_output_bytes: parts.max_output_bytes,
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

    /// The most of a result's model text the model gets, if the tool sets it
    /// (`#[tool(max_output_bytes = ...)]`); see [`Settings::max_output_bytes`](crate::Settings::max_output_bytes).
    pub fn max_output_bytes(&self) -> Option<usize> {
        self.max_output_bytes
            .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX))
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
        cx: &'a CallContext,
    ) -> Option<BoxFuture<'a, Result<Option<Value>, ToolError>>> {
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
        self.redaction.get_or_init(|| crate::redact::Plan::of(self))
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
    /// the dispatcher reads a failed call again as a parsed object.
    pub(crate) fn validate_members(
        &self,
        members: &Members<'_>,
    ) -> Result<Box<dyn Validated>, FieldErrors> {
        (self.validate)(members)
    }
}

/// Arguments that passed validation, ready for the later stages.
pub(crate) trait Validated: Send {
    /// The validated arguments as JSON: the input of the idempotency key, the
    /// `pending` of a confirmation, the values the policy limits look at.
    fn to_value(&self) -> Result<Value, serde_json::Error>;
    fn check(&self, cx: &CallContext) -> Result<(), ToolError>;
    fn preview(&self, cx: &CallContext) -> Option<Result<Value, ToolError>>;
    fn call<'a>(self: Box<Self>, cx: &'a CallContext) -> BoxFuture<'a, Result<Value, ToolError>>;
}

struct Typed<T: Tool>(T::Args);

impl<T: Tool> Validated for Typed<T> {
    fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(&self.0)
    }

    fn check(&self, cx: &CallContext) -> Result<(), ToolError> {
        T::check(&self.0, cx)
    }

    fn preview(&self, cx: &CallContext) -> Option<Result<Value, ToolError>> {
        T::preview(&self.0, cx)
    }

    fn call<'a>(self: Box<Self>, cx: &'a CallContext) -> BoxFuture<'a, Result<Value, ToolError>> {
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
    if let Members::Parsed(_) = members {
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

/// What a tool function may return: `Result<T, E>` with `T: Serialize` (the
/// data the model gets) and `E: Into<ToolError>` (a [`Rejection`](crate::Rejection)
/// or a [`ToolError`]).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a tool must return `Result<T, E>` with `T: Serialize` and `E: Into<ToolError>`, not `{Self}`",
    label = "return `Result<T, E>` here",
    note = "for example `-> Result<Refund, Rejection>`: the `Ok` value is the data the model gets"
)]
pub trait ToolOutput {
    /// The output as the dispatcher's data.
    fn into_output(self) -> Result<Value, ToolError>;
}

impl<T, E> ToolOutput for Result<T, E>
where
    T: serde::Serialize,
    E: Into<ToolError>,
{
    fn into_output(self) -> Result<Value, ToolError> {
        let output = self.map_err(Into::into)?;
        match serde_json::to_value(output) {
            Ok(Value::Object(map)) => Ok(Value::Object(map)),
            Ok(Value::Null) => Ok(Value::Object(Map::new())),
            Ok(other) => {
                let mut map = Map::new();
                map.insert("result".into(), other);
                Ok(Value::Object(map))
            }
            Err(error) => Err(ToolError::internal(format!(
                "the tool's output does not serialize: {error}"
            ))),
        }
    }
}

/// What a `preview` function may return: a text (`String`, `&str`), a
/// JSON [`Value`], or a `Result` of one with an error that is
/// `Into<ToolError>`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a preview must return a text, a `serde_json::Value`, or a `Result` of one, not `{Self}`",
    label = "return `String` (\"would refund 2590 of 12000 cents\") or a `Value` here",
    note = "a preview is `fn(&Args, &Ctx<S>) -> String`: what the call would do, without doing it"
)]
pub trait PreviewOutput {
    /// The preview as the dispatcher's data.
    fn into_preview(self) -> Result<Value, ToolError>;
}

impl PreviewOutput for String {
    fn into_preview(self) -> Result<Value, ToolError> {
        Ok(Value::String(self))
    }
}

impl PreviewOutput for &str {
    fn into_preview(self) -> Result<Value, ToolError> {
        Ok(Value::from(self))
    }
}

impl PreviewOutput for Value {
    fn into_preview(self) -> Result<Value, ToolError> {
        Ok(self)
    }
}

impl<T: PreviewOutput, E: Into<ToolError>> PreviewOutput for Result<T, E> {
    fn into_preview(self) -> Result<Value, ToolError> {
        self.map_err(Into::into)?.into_preview()
    }
}

/// Turns what a preview function returned into the dispatcher's terms.
#[doc(hidden)]
pub fn preview_output<R: PreviewOutput>(returned: R) -> Result<Value, ToolError> {
    returned.into_preview()
}

/// What a `reconcile` function may return: a future of
/// `Result<Option<T>, E>`, with `T` the tool's output type.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a reconcile function must be `async fn(&Ctx<S>, &str) -> Result<Option<T>, E>`, not one returning `{Self}`",
    label = "this must be a future of `Result<Option<T>, E>`",
    note = "`T` is the tool's output type; return `Ok(Some(output))` when the call took effect, `Ok(None)` when it did not"
)]
pub trait ReconcileOutput: Future<Output = Self::Returned> + Send {
    /// What the future resolves to.
    type Returned;
    /// Turns the resolved value into the dispatcher's terms.
    fn into_reconciled(returned: Self::Returned) -> Result<Option<Value>, ToolError>;
}

#[diagnostic::do_not_recommend]
impl<F, T, E> ReconcileOutput for F
where
    F: Future<Output = Result<Option<T>, E>> + Send,
    T: serde::Serialize,
    E: Into<ToolError>,
{
    type Returned = Result<Option<T>, E>;

    fn into_reconciled(returned: Self::Returned) -> Result<Option<Value>, ToolError> {
        match returned.map_err(Into::into)? {
            Some(output) => Ok::<T, ToolError>(output).into_output().map(Some),
            None => Ok(None),
        }
    }
}

/// Awaits a `reconcile` function's answer in the dispatcher's terms.
#[doc(hidden)]
pub async fn reconciled<F: ReconcileOutput>(future: F) -> Result<Option<Value>, ToolError> {
    F::into_reconciled(future.await)
}

/// Turns what a tool function returned into the dispatcher's terms.
#[doc(hidden)]
pub fn into_output<R: ToolOutput>(returned: R) -> Result<Value, ToolError> {
    returned.into_output()
}

/// Never constructed: a second impl of [`CheckParams`] and
/// [`ReconcileParams`], so that the compiler reads a function's parameter
/// types from the function, and reports a mismatch in our words.
#[doc(hidden)]
pub enum NotAParameter {}

/// The parameter types of a `check = path` function:
/// `(&Args, &Ctx<S>)`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`check` must be `fn(&{A}, &Ctx<{S}>) -> Result<(), E>`, and this one takes `{Self}`",
    label = "expected `fn(&{A}, &Ctx<{S}>) -> Result<(), E>`",
    note = "a check reads the validated arguments first, then the context: `fn check_x(args: &{A}, ctx: &Ctx<{S}>) -> Result<(), Rejection>`; `S` is the state of the tool's own context, when it has one"
)]
pub trait CheckParams<'a, A, S> {
    /// The parameters, from the arguments and the context.
    fn make(args: &'a A, ctx: &'a Ctx<S>) -> Self;
}

#[diagnostic::do_not_recommend]
impl<'a, A, S> CheckParams<'a, A, S> for (&'a A, &'a Ctx<S>) {
    fn make(args: &'a A, ctx: &'a Ctx<S>) -> Self {
        (args, ctx)
    }
}

#[diagnostic::do_not_recommend]
impl<'a, A, S> CheckParams<'a, A, S> for (NotAParameter, NotAParameter) {
    fn make(_: &'a A, _: &'a Ctx<S>) -> Self {
        unreachable!("never constructed")
    }
}

/// A `check = path` that is a function of two parameters.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`check` must name a function `fn(&{A}, &Ctx<S>) -> Result<(), E>`, not `{Self}`",
    label = "expected the path of a function of two parameters",
    note = "for example `#[tool(check = check_refund)]` with `fn check_refund(args: &{A}, ctx: &Ctx<S>) -> Result<(), Rejection>`"
)]
pub trait CheckFn<A, P1, P2> {
    /// What the function returns.
    type Output;
    /// Calls the function.
    fn call(&self, p1: P1, p2: P2) -> Self::Output;
}

#[diagnostic::do_not_recommend]
impl<F, A, P1, P2, R> CheckFn<A, P1, P2> for F
where
    F: Fn(P1, P2) -> R,
{
    type Output = R;

    fn call(&self, p1: P1, p2: P2) -> R {
        self(p1, p2)
    }
}

/// What a `check` function may return: `Result<(), E>`, at once.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a check must return `Result<(), E>` with `E: Into<ToolError>`, at once: not `{Self}`",
    label = "a check is a plain synchronous `fn(&Args, &Ctx<S>) -> Result<(), E>`",
    note = "a check runs before anything happens (before the policy, the confirmation and the handler) and must not wait: not an `async fn`; do slow lookups in the handler",
    note = "`E` is a `Rejection` (a code and a message for the model) or a `ToolError`"
)]
pub trait CheckOutput {
    /// The answer in the dispatcher's terms.
    fn into_checked(self) -> Result<(), ToolError>;
}

#[diagnostic::do_not_recommend]
impl<E: Into<ToolError>> CheckOutput for Result<(), E> {
    fn into_checked(self) -> Result<(), ToolError> {
        self.map_err(Into::into)
    }
}

/// A `check` function whose shape was checked: how the generated code calls
/// it. Built by [`check_sig`]; its methods have no bounds of their own, so
/// a misdeclared check fails the build once, where it is named.
#[doc(hidden)]
pub struct CheckSig<'a, F, A, S> {
    run: fn(&F, &'a A, &'a Ctx<S>) -> Result<(), ToolError>,
}

impl<'a, F, A, S> CheckSig<'a, F, A, S> {
    /// Runs the check.
    pub fn run(&self, f: &F, args: &'a A, ctx: &'a Ctx<S>) -> Result<(), ToolError> {
        (self.run)(f, args, ctx)
    }
}

impl<F, A, S: Any + Send + Sync> CheckSig<'_, F, A, S> {
    /// The context the check takes.
    pub fn context(&self, cx: &CallContext) -> Result<Ctx<S>, ToolError> {
        Ctx::from_call(cx)
    }

    /// The state the check's context needs.
    pub fn state(&self) -> StateType {
        StateType::of::<S>()
    }
}

fn run_check<'a, A, S, F, P1, P2>(f: &F, args: &'a A, ctx: &'a Ctx<S>) -> Result<(), ToolError>
where
    F: CheckFn<A, P1, P2>,
    (P1, P2): CheckParams<'a, A, S>,
    F::Output: CheckOutput,
{
    let (p1, p2) = <(P1, P2)>::make(args, ctx);
    f.call(p1, p2).into_checked()
}

/// Checks the shape of a `check = path` function, `fn(&A, &Ctx<S>) ->
/// Result<(), E>`, with one message for each way it can be wrong.
#[doc(hidden)]
pub fn check_sig<'a, A, S, F, P1, P2>(_: &F) -> CheckSig<'a, F, A, S>
where
    F: CheckFn<A, P1, P2>,
    (P1, P2): CheckParams<'a, A, S>,
    F::Output: CheckOutput,
{
    CheckSig {
        run: run_check::<A, S, F, P1, P2>,
    }
}

/// The parameter types of a `reconcile = path` function:
/// `(&Ctx<S>, &str)`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`reconcile` must be `async fn(&Ctx<{S}>, &str) -> Result<Option<T>, E>`, and this one takes `{Self}`",
    label = "expected `async fn(&Ctx<{S}>, &str) -> Result<Option<T>, E>`",
    note = "the context first, then the call's idempotency key: `async fn find(ctx: &Ctx<{S}>, key: &str) -> Result<Option<Refund>, Rejection>`; `S` is the state of the tool's own context, when it has one"
)]
pub trait ReconcileParams<'a, S> {
    /// The parameters, from the context and the key.
    fn make(ctx: &'a Ctx<S>, key: &'a str) -> Self;
}

#[diagnostic::do_not_recommend]
impl<'a, S> ReconcileParams<'a, S> for (&'a Ctx<S>, &'a str) {
    fn make(ctx: &'a Ctx<S>, key: &'a str) -> Self {
        (ctx, key)
    }
}

#[diagnostic::do_not_recommend]
impl<'a, S> ReconcileParams<'a, S> for (NotAParameter, NotAParameter) {
    fn make(_: &'a Ctx<S>, _: &'a str) -> Self {
        unreachable!("never constructed")
    }
}

/// A `reconcile = path` that is a function of two parameters.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`reconcile` must name a function `async fn(&Ctx<S>, &str) -> Result<Option<T>, E>`, not `{Self}`",
    label = "expected the path of an async function of two parameters",
    note = "for example `#[tool(side_effect, reconcile = find_refund)]` with `async fn find_refund(ctx: &Ctx<S>, key: &str) -> Result<Option<Refund>, Rejection>`"
)]
pub trait ReconcileFn<P1, P2> {
    /// What the function returns.
    type Output;
    /// Calls the function.
    fn call(&self, p1: P1, p2: P2) -> Self::Output;
}

#[diagnostic::do_not_recommend]
impl<F, P1, P2, R> ReconcileFn<P1, P2> for F
where
    F: Fn(P1, P2) -> R,
{
    type Output = R;

    fn call(&self, p1: P1, p2: P2) -> R {
        self(p1, p2)
    }
}

type ReconcileRun<'a, F, S> =
    fn(&F, &'a Ctx<S>, &'a str) -> BoxFuture<'a, Result<Option<Value>, ToolError>>;

/// A `reconcile` function whose shape was checked; see [`CheckSig`].
#[doc(hidden)]
pub struct ReconcileSig<'a, F, S> {
    run: ReconcileRun<'a, F, S>,
}

impl<'a, F, S> ReconcileSig<'a, F, S> {
    /// Asks the backend.
    pub fn run(
        &self,
        f: &F,
        ctx: &'a Ctx<S>,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, ToolError>> {
        (self.run)(f, ctx, key)
    }
}

impl<F, S: Any + Send + Sync> ReconcileSig<'_, F, S> {
    /// The context the function takes.
    pub fn context(&self, cx: &CallContext) -> Result<Ctx<S>, ToolError> {
        Ctx::from_call(cx)
    }

    /// The state the function's context needs.
    pub fn state(&self) -> StateType {
        StateType::of::<S>()
    }
}

fn run_reconcile<'a, S, F, P1, P2>(
    f: &F,
    ctx: &'a Ctx<S>,
    key: &'a str,
) -> BoxFuture<'a, Result<Option<Value>, ToolError>>
where
    F: ReconcileFn<P1, P2>,
    (P1, P2): ReconcileParams<'a, S>,
    F::Output: ReconcileOutput + 'a,
{
    let (p1, p2) = <(P1, P2)>::make(ctx, key);
    Box::pin(reconciled(f.call(p1, p2)))
}

/// Checks the shape of a `reconcile = path` function, `async fn(&Ctx<S>,
/// &str) -> Result<Option<T>, E>`, with one message for each way it can be
/// wrong.
#[doc(hidden)]
pub fn reconcile_sig<'a, S, F, P1, P2>(_: &F) -> ReconcileSig<'a, F, S>
where
    F: ReconcileFn<P1, P2>,
    (P1, P2): ReconcileParams<'a, S>,
    F::Output: ReconcileOutput + 'a,
{
    ReconcileSig {
        run: run_reconcile::<S, F, P1, P2>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Rejection;

    struct Cal;

    fn check_cancel(args: &NoArgs, ctx: &Ctx<Cal>) -> Result<(), Rejection> {
        let _ = (args, ctx);
        Ok(())
    }

    async fn find_cancel(ctx: &Ctx<Cal>, key: &str) -> Result<Option<u32>, Rejection> {
        let _ = (ctx, key);
        Ok(None)
    }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct NoArgs {}

    impl ToolArgs for NoArgs {
        fn fields() -> &'static [FieldMeta] {
            &[]
        }

        fn from_members(_: &Members<'_>, _: &mut FieldErrors) -> Option<Self> {
            Some(NoArgs {})
        }
    }

    /// A tool without a context of its own whose check and reconcile take
    /// one, as `#[tool]` writes it.
    struct Cancel;

    fn check_state() -> StateType {
        check_sig::<NoArgs, _, _, _, _>(&check_cancel).state()
    }

    fn reconcile_state() -> StateType {
        reconcile_sig::<_, _, _, _>(&find_cancel).state()
    }

    impl Tool for Cancel {
        type Args = NoArgs;

        fn spec() -> &'static ToolSpec {
            static SPEC: ToolSpec = ToolSpec::__new::<Cancel>(
                SpecParts {
                    name: "cancel",
                    description: "Cancels.",
                    side_effect: true,
                    high_risk: false,
                    untrusted_output: false,
                    timeout_ms: None,
                    max_output_bytes: None,
                    state: None,
                    reconcile: true,
                    check_state: Some(check_state),
                    reconcile_state: Some(reconcile_state),
                },
                &[],
            );
            &SPEC
        }

        fn check(args: &NoArgs, cx: &CallContext) -> Result<(), ToolError> {
            let check = check_sig::<NoArgs, _, _, _, _>(&check_cancel);
            let ctx = check.context(cx)?;
            check.run(&check_cancel, args, &ctx)
        }

        fn call<'a>(_: NoArgs, _: &'a CallContext) -> BoxFuture<'a, Result<Value, ToolError>> {
            Box::pin(async { Ok(Value::Null) })
        }
    }

    #[test]
    fn the_spec_records_the_state_a_check_and_a_reconcile_function_need() {
        let spec = Cancel::spec();
        assert!(spec.state_type().is_none());
        let check = spec.check_state_type().expect("the check takes a context");
        assert_eq!(check.id, TypeId::of::<Cal>());
        assert!(check.name.ends_with("Cal"));
        let reconcile = spec
            .reconcile_state_type()
            .expect("reconcile takes a context");
        assert_eq!(reconcile.id, TypeId::of::<Cal>());
    }

    #[test]
    fn a_check_runs_against_the_state_its_signature_names() {
        let cx = |state: Arc<dyn Any + Send + Sync>| CallContext {
            state,
            idempotency_key: "k".into(),
            session: "s".into(),
            caller: Caller::new("me", crate::Policy::new()),
        };
        assert!(Cancel::check(&NoArgs {}, &cx(Arc::new(Cal))).is_ok());
        // Another state is what the dispatcher's builder refuses up front.
        assert!(Cancel::check(&NoArgs {}, &cx(Arc::new(()))).is_err());
    }
}
