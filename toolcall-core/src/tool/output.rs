//! What the generated code does with what a tool function returns: its
//! output as the dispatcher's data, its error as a [`ToolError`], `?` in
//! its body, and the stand-in a misdeclared tool compiles against.

use crate::args::{FieldErrors, FieldMeta, Members, ToolArgs};
use crate::error::ToolError;
use crate::result::Data;

use super::{BoxFuture, CallContext, Tool, ToolSpec};

/// What a tool function may return: `Result<T, E>` with `T: Serialize` (the
/// data the model gets) and `E: Into<ToolError>` (a [`Rejection`](crate::Rejection)
/// or a [`ToolError`]). `Of` is the tool (the type `#[tool]` names like the
/// function), for the messages to name it.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "tool `{Of}` must return `Result<T, E>` with `T: Serialize` and `E: Into<ToolError>`, not `{Self}`",
    label = "return `Result<T, E>` here",
    note = "for example `-> Result<Refund, Rejection>`: the `Ok` value is the data the model gets"
)]
pub trait ToolOutput<Of = ()> {
    /// The `T` of `Result<T, E>`: the data the model gets.
    type Output;
    /// The `E` of `Result<T, E>`.
    type Error;
    /// The `Result` itself.
    fn into_result(self) -> Result<Self::Output, Self::Error>;
}

// No bounds here, and not recommended: `into_output` bounds `T` and `E`
// itself, so that `Result<T, String>` fails on `E` with its own message,
// and `i64` on this trait with no list of the library's impls (a line of
// the library in an application's expected compile errors).
#[diagnostic::do_not_recommend]
impl<Of, T, E> ToolOutput<Of> for Result<T, E> {
    type Output = T;
    type Error = E;

    fn into_result(self) -> Result<T, E> {
        self
    }
}

/// The error type of the tool `Of`: one that converts into a
/// [`ToolError`]. A separate trait, so that a tool returning
/// `Result<T, String>` is told its two ways out, naming the tool.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "tool `{Of}` returns `Err({Self})`, and `{Self}` does not convert into `ToolError`",
    label = "the error type here must be `Rejection`, `ToolError`, or convert into `ToolError`",
    note = "either return `Result<T, Rejection>` and refuse with `Err(Rejection::new(\"CODE\", \"what the model should know\"))` (or a `ToolError`, e.g. `ToolError::transient(...)` for a failure worth retrying)",
    note = "or, for your own error type, implement `From<YourError> for ToolError` once, and every tool returning `Result<T, YourError>` compiles"
)]
pub trait ToolErrorOf<Of> {
    /// The error in the dispatcher's terms.
    fn into_tool_error(self) -> ToolError;
}

#[diagnostic::do_not_recommend]
impl<Of, E: Into<ToolError>> ToolErrorOf<Of> for E {
    fn into_tool_error(self) -> ToolError {
        self.into()
    }
}

/// Turns what the tool `Of`'s function returned into the dispatcher's terms.
#[doc(hidden)]
pub fn into_output<Of, R>(returned: R) -> Result<Data, ToolError>
where
    R: ToolOutput<Of>,
    R::Output: serde::Serialize,
    R::Error: ToolErrorOf<Of>,
{
    let output = returned
        .into_result()
        .map_err(ToolErrorOf::into_tool_error)?;
    Data::from_serialize(&output).map_err(|error| {
        ToolError::internal(format!("the tool's output does not serialize: {error}"))
    })
}

/// What `?` takes in a tool's body: a `Result` (or a `Poll` of one, as
/// Rust's own `?` does), giving a `T` or returning an `E`. `#[tool]` writes
/// each `?` of the body (outside closures, `async` blocks, nested items and
/// macros) as `match Question::branch(x) { Ok(v) => v, Err(e) => return
/// Err(QuestionError::into_error(e)) }`, which is what `?` does, so that
/// an error that does not convert is told in the tool's terms.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`?` in a tool takes a `Result`, not `{Self}`",
    label = "a tool returns `Result<T, E>`: `?` here must take a `Result` too",
    note = "for an `Option`, say what its absence means: `.ok_or_else(|| Rejection::new(\"NOT_FOUND\", \"no order ORD-9999: ask the user for the id\"))?`"
)]
pub trait Question<T, E> {
    /// The value, or the error to return.
    fn branch(self) -> Result<T, E>;
}

#[diagnostic::do_not_recommend]
impl<T, E> Question<T, E> for Result<T, E> {
    #[inline(always)]
    fn branch(self) -> Result<T, E> {
        self
    }
}

#[diagnostic::do_not_recommend]
impl<T, E> Question<std::task::Poll<T>, E> for std::task::Poll<Result<T, E>> {
    #[inline(always)]
    fn branch(self) -> Result<std::task::Poll<T>, E> {
        match self {
            std::task::Poll::Ready(ready) => ready.map(std::task::Poll::Ready),
            std::task::Poll::Pending => Ok(std::task::Poll::Pending),
        }
    }
}

#[diagnostic::do_not_recommend]
impl<T, E> Question<std::task::Poll<Option<T>>, E> for std::task::Poll<Option<Result<T, E>>> {
    #[inline(always)]
    fn branch(self) -> Result<std::task::Poll<Option<T>>, E> {
        match self {
            std::task::Poll::Ready(Some(ready)) => ready.map(|t| std::task::Poll::Ready(Some(t))),
            std::task::Poll::Ready(None) => Ok(std::task::Poll::Ready(None)),
            std::task::Poll::Pending => Ok(std::task::Poll::Pending),
        }
    }
}

/// The error under a tool body's `?`, `Self`, as the tool's error type `F`:
/// `From::from`, as `?` converts it. A trait of toolcall's, so that an
/// error without that `From` (an `io::Error` into `ToolError`) is told what
/// it means to the dispatcher rather than which impl is missing.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`?` cannot turn `{Self}` into `{F}`, the tool's error type: say what this failure means",
    label = "map it to the `ToolError` it is: `.map_err(ToolError::not_applied)?`, `ToolError::transient` or `ToolError::internal`",
    note = "`ToolError::not_applied`: it failed before having any effect (a refused connection, a file not read); retried as it is",
    note = "`ToolError::transient`: it may have taken effect (a timeout, a connection reset after the request went out); retried for a read-only tool, for a side effect only where its backend honours the idempotency key or can be asked (`reconcile`), else a person answers its question",
    note = "`ToolError::internal`: a bug, not retried; or refuse the call with `.map_err(|e| Rejection::new(\"CODE\", e.to_string()))?`",
    note = "the tool then returns `Result<T, ToolError>` (a `Rejection` converts into it); for an error type of your own, `impl From<{Self}> for YourError` once instead"
)]
pub trait QuestionError<F> {
    /// The error, converted.
    fn into_error(self) -> F;
}

#[diagnostic::do_not_recommend]
impl<E, F: From<E>> QuestionError<F> for E {
    #[inline(always)]
    fn into_error(self) -> F {
        F::from(self)
    }
}

/// What `#[tool]` names a misdeclared function's type as, beside the
/// errors it reports: a stand-in that is a [`Tool`], so that
/// `tools![...]` naming the function adds no second, false error ("names a
/// function without `#[tool]`"). The build fails on the first errors; it
/// never runs.
#[doc(hidden)]
pub struct Misdeclared;

/// [`Misdeclared`]'s arguments: none.
#[doc(hidden)]
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct MisdeclaredArgs {}

impl ToolArgs for MisdeclaredArgs {
    fn fields() -> &'static [FieldMeta] {
        &[]
    }

    fn from_members(_: &Members<'_>, _: &mut FieldErrors) -> Option<Self> {
        Some(MisdeclaredArgs {})
    }
}

impl Tool for Misdeclared {
    type Args = MisdeclaredArgs;

    fn spec() -> &'static ToolSpec {
        unreachable!("a misdeclared #[tool] fails the build")
    }

    fn check(_: &MisdeclaredArgs, _: &CallContext<'_>) -> Result<(), ToolError> {
        unreachable!("a misdeclared #[tool] fails the build")
    }

    fn call<'a>(
        _: MisdeclaredArgs,
        _: &'a CallContext<'_>,
    ) -> BoxFuture<'a, Result<Data, ToolError>> {
        unreachable!("a misdeclared #[tool] fails the build")
    }
}
