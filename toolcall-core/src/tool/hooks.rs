//! How the generated code calls the author's hooks: what a preview, a
//! check and a reconcile function may return, and the checked signatures
//! of `check = path` and `reconcile = path`, each refusing a misdeclared
//! function with its own message.

use std::any::Any;
use std::future::Future;

use serde_json::Value;

use super::{BoxFuture, CallContext, Ctx, StateType, into_output};
use crate::error::ToolError;
use crate::result::Data;

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
    /// The `T` of its `Option<T>`: what the call returned, by the backend's
    /// account.
    type Found;
    /// Turns the resolved value into the dispatcher's terms.
    fn into_reconciled(returned: Self::Returned) -> Result<Option<Data>, ToolError>;
}

#[diagnostic::do_not_recommend]
impl<F, T, E> ReconcileOutput for F
where
    F: Future<Output = Result<Option<T>, E>> + Send,
    T: serde::Serialize,
    E: Into<ToolError>,
{
    type Returned = Result<Option<T>, E>;
    type Found = T;

    fn into_reconciled(returned: Self::Returned) -> Result<Option<Data>, ToolError> {
        match returned.map_err(Into::into)? {
            Some(output) => into_output::<(), _>(Ok::<T, ToolError>(output)).map(Some),
            None => Ok(None),
        }
    }
}

/// What a `reconcile` function finds, `T` of its `Option<T>`, for a tool
/// whose function returns `R`: the tool's own output, the `T` of its
/// `Result<T, E>`. It stands for the call's answer, so it is that answer's
/// type, not one that serializes alike.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`reconcile` finds `{Self}`, and the tool returns `{R}`: it must find the tool's own output",
    label = "expected `async fn(&Ctx<S>, &str) -> Result<Option<T>, E>`, with the `T` of the tool's `Result<T, _>`",
    note = "what it finds is the call's answer, as if the tool had returned it: `Ok(Some(output))` when the call took effect, `Ok(None)` when it did not"
)]
pub trait ReconciledOutput<R> {}

#[diagnostic::do_not_recommend]
impl<T, E> ReconciledOutput<Result<T, E>> for T {}

/// Awaits a `reconcile` function's answer in the dispatcher's terms.
#[doc(hidden)]
pub async fn reconciled<F: ReconcileOutput>(future: F) -> Result<Option<Data>, ToolError> {
    F::into_reconciled(future.await)
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
    message = "a check named with `check = path` must return `Result<(), E>` with `E: Into<ToolError>`, at once: not `{Self}`",
    label = "`check = path` names a synchronous `fn(&Args, &Ctx<S>) -> Result<(), E>`; name an `async fn` with `async_check = path`",
    note = "a check runs before anything happens (before the policy, the confirmation and the handler), with the call's resources locked; one that awaits a database or a service is `#[tool(async_check = path)]`",
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
    pub fn context(&self, cx: &CallContext<'_>) -> Result<Ctx<S>, ToolError> {
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

/// What an `async_check` function may return: a future of `Result<(),
/// E>`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "an `async_check` must be `async fn(&Args, &Ctx<S>) -> Result<(), E>` with `E: Into<ToolError>`, not one returning `{Self}`",
    label = "`async_check = path` names an `async fn`; name a synchronous check with `check = path`",
    note = "`E` is a `Rejection` (a code and a message for the model) or a `ToolError` (`ToolError::transient` for a database that did not answer: the check is tried again)"
)]
pub trait AsyncCheckOutput: Future<Output = Self::Returned> + Send {
    /// What the future resolves to.
    type Returned;
    /// The answer in the dispatcher's terms.
    fn into_checked(returned: Self::Returned) -> Result<(), ToolError>;
}

#[diagnostic::do_not_recommend]
impl<F, E> AsyncCheckOutput for F
where
    F: Future<Output = Result<(), E>> + Send,
    E: Into<ToolError>,
{
    type Returned = Result<(), E>;

    fn into_checked(returned: Self::Returned) -> Result<(), ToolError> {
        returned.map_err(Into::into)
    }
}

type AsyncCheckRun<'a, F, A, S> = fn(&F, &'a A, &'a Ctx<S>) -> BoxFuture<'a, Result<(), ToolError>>;

/// An `async_check` function whose shape was checked; see [`CheckSig`].
#[doc(hidden)]
pub struct AsyncCheckSig<'a, F, A, S> {
    run: AsyncCheckRun<'a, F, A, S>,
}

impl<'a, F, A, S> AsyncCheckSig<'a, F, A, S> {
    /// Runs the check.
    pub fn run(&self, f: &F, args: &'a A, ctx: &'a Ctx<S>) -> BoxFuture<'a, Result<(), ToolError>> {
        (self.run)(f, args, ctx)
    }
}

impl<F, A, S: Any + Send + Sync> AsyncCheckSig<'_, F, A, S> {
    /// The context the check takes.
    pub fn context(&self, cx: &CallContext<'_>) -> Result<Ctx<S>, ToolError> {
        Ctx::from_call(cx)
    }

    /// The state the check's context needs.
    pub fn state(&self) -> StateType {
        StateType::of::<S>()
    }
}

fn run_async_check<'a, A, S, F, P1, P2>(
    f: &F,
    args: &'a A,
    ctx: &'a Ctx<S>,
) -> BoxFuture<'a, Result<(), ToolError>>
where
    F: CheckFn<A, P1, P2>,
    (P1, P2): CheckParams<'a, A, S>,
    F::Output: AsyncCheckOutput + 'a,
{
    let (p1, p2) = <(P1, P2)>::make(args, ctx);
    let checking = f.call(p1, p2);
    Box::pin(async move { <F::Output as AsyncCheckOutput>::into_checked(checking.await) })
}

/// Checks the shape of an `async_check = path` function, `async fn(&A,
/// &Ctx<S>) -> Result<(), E>`, with one message for each way it can be
/// wrong.
#[doc(hidden)]
pub fn async_check_sig<'a, A, S, F, P1, P2>(_: &F) -> AsyncCheckSig<'a, F, A, S>
where
    F: CheckFn<A, P1, P2>,
    (P1, P2): CheckParams<'a, A, S>,
    F::Output: AsyncCheckOutput + 'a,
{
    AsyncCheckSig {
        run: run_async_check::<A, S, F, P1, P2>,
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
    fn(&F, &'a Ctx<S>, &'a str) -> BoxFuture<'a, Result<Option<Data>, ToolError>>;

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
    ) -> BoxFuture<'a, Result<Option<Data>, ToolError>> {
        (self.run)(f, ctx, key)
    }
}

impl<F, S: Any + Send + Sync> ReconcileSig<'_, F, S> {
    /// The context the function takes.
    pub fn context(&self, cx: &CallContext<'_>) -> Result<Ctx<S>, ToolError> {
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
) -> BoxFuture<'a, Result<Option<Data>, ToolError>>
where
    F: ReconcileFn<P1, P2>,
    (P1, P2): ReconcileParams<'a, S>,
    F::Output: ReconcileOutput + 'a,
{
    let (p1, p2) = <(P1, P2)>::make(ctx, key);
    Box::pin(reconciled(f.call(p1, p2)))
}

/// Checks the shape of a `reconcile = path` function, `async fn(&Ctx<S>,
/// &str) -> Result<Option<T>, E>` with `T` the output of the tool whose
/// function returns `R`, with one message for each way it can be wrong.
#[doc(hidden)]
pub fn reconcile_sig<'a, S, F, P1, P2, R>(_: &F) -> ReconcileSig<'a, F, S>
where
    F: ReconcileFn<P1, P2>,
    (P1, P2): ReconcileParams<'a, S>,
    F::Output: ReconcileOutput + 'a,
    <F::Output as ReconcileOutput>::Found: ReconciledOutput<R>,
{
    ReconcileSig {
        run: run_reconcile::<S, F, P1, P2>,
    }
}
