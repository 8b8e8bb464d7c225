//! The runtime of [toolcall](https://docs.rs/toolcall): the dispatch
//! pipeline, results and codes, policy, idempotency keys and audit sinks.
//!
//! Applications depend on the `toolcall` crate, which re-exports this one
//! together with the `#[tool]` attribute and holds the guide.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
mod audit;
pub mod audit_chain;
mod budget;
pub use toolcall_ledger::canonical;
pub mod controls;
#[doc(hidden)]
pub mod crash;
mod dispatcher;
mod error;
mod format;
mod kinds;
pub mod life;
mod parse;
mod redact;
mod registry;
pub mod schema;
mod suggest;
mod taint;
mod tool;

// The floor's modules under the names the runtime has always used for them.
use toolcall_ledger::{echo, hex};
mod policy {
    pub use toolcall_ledger::{Caller, Policy, Taint};
}
mod result {
    pub use toolcall_ledger::{Code, Data, ToolResult};
}

pub use args::{FieldErrors, FieldProblem};
pub use audit::{ArgumentProblem, AuditRecord, AuditSink, Cut, JsonLinesAudit, MemoryAudit};
pub use dispatcher::{
    Approvals, BuildError, Call, Decision, Dispatcher, DispatcherBuilder, Settings,
};
pub use dispatcher::{BuildWarning, Failure, MessageContext, UNKNOWN_APPROVAL_TOOL};
pub use error::{Rejection, ToolError};
pub use parse::Arguments;
pub use redact::REDACTED;
pub use registry::{Registry, RegistryError};
pub use tool::{Ctx, Tool, ToolSpec};
pub use toolcall_ledger::provenance;
pub use toolcall_ledger::store;
pub use toolcall_ledger::{Caller, Policy, Principal, Taint};
pub use toolcall_ledger::{Code, Data, ToolResult};

/// A tool's parameters as the runtime knows them ([`ToolSpec::fields`]):
/// each one's name, description and `#[arg(...)]` constraints, in
/// declaration order. What an application reads to show a tool's
/// arguments, or to check a value before a call (an approval inbox's edit
/// form, a contract's lock file, a provider's schema export): each
/// constraint is both a JSON Schema keyword
/// ([`Constraint::keyword`](fields::Constraint::keyword)) and a check
/// ([`Constraint::violation`](fields::Constraint::violation)).
///
/// `#[tool]` writes these; they are not built by hand.
///
/// ```
/// use toolcall_core::fields::{Constraint, FieldMeta};
///
/// fn min_length(field: &FieldMeta) -> Option<usize> {
///     field.constraints.iter().find_map(|c| match c {
///         Constraint::MinLength(n) => Some(*n),
///         _ => None,
///     })
/// }
/// # let _ = min_length;
/// ```
pub mod fields {
    pub use crate::args::{Bound, Constraint, FieldMeta, Pattern};
    pub use crate::format::StringFormat;
}

/// What `#[tool]` expands to reaches the runtime through here. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::args::{
        Bound, Constraint, FieldErrors, FieldMeta, MemberValue, Members, Pattern, StringFormat,
        ToolArgs,
    };
    pub use crate::tool::BoxFuture;

    /// Bounded echo of the model's and the host's text.
    pub mod echo {
        pub use toolcall_ledger::echo::*;
    }
    pub use crate::kinds::{
        ArgFallback, ArgProbe, ArgType, ListArg, NumberArg, Probe, StringArg, Unreachable,
        insert_property, object_schema,
    };
    pub use crate::parse::{RawMembers, members_of};
    pub use crate::registry::{NamesATool, ToolEntry};
    pub use crate::result::Data;
    pub use crate::tool::{
        AsyncCheckOutput, AsyncCheckSig, CallContext, CheckFn, CheckOutput, CheckParams, CheckSig,
        Misdeclared, MisdeclaredArgs, NotAParameter, PreviewOutput, Question, QuestionError,
        ReconcileFn, ReconcileOutput, ReconcileParams, ReconcileSig, ReconciledOutput, SpecParts,
        StateType, ToolErrorOf, ToolOutput, async_check_sig, check_sig, into_output,
        preview_output, reconcile_sig, reconciled,
    };

    use crate::error::ToolError;
    use crate::tool::Ctx;

    /// A context parameter, `&Ctx<S>`: the type the tool function's first
    /// parameter names, when it is a reference. `#[tool]` asserts it once in
    /// each function that uses the context (`<P as ContextParam>::IS`), and reaches
    /// the context itself through [`Probe`] ([`CtxProbe`], [`CtxFallback`]),
    /// so that a parameter that is not a context fails the build with this
    /// one message.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a tool context: write `ctx: &Ctx<YourState>`",
        label = "a tool's first parameter, when it is a reference, is the context `&Ctx<YourState>`",
        note = "the model's arguments are owned values (`String`, `i64`, ...); only the context is borrowed"
    )]
    pub trait ContextParam {
        /// The `S` of `&Ctx<S>`.
        type State: std::any::Any + Send + Sync;
        /// What `#[tool]` asserts, as `<P as ContextParam>::IS`: a path,
        /// not a bound of a function of this crate, so that the error names
        /// no line of it.
        #[doc(hidden)]
        const IS: () = ();
    }

    #[diagnostic::do_not_recommend]
    impl<S: std::any::Any + Send + Sync> ContextParam for &Ctx<S> {
        type State = S;
    }

    /// The context, when the parameter is one: `&Ctx<S>`.
    pub trait CtxProbe<'a, S> {
        /// The state's [`ContextOf`].
        fn context(&self) -> ContextOf<S>;
        /// The parameter, from the call's context.
        fn param(&self, ctx: &'a Ctx<S>) -> &'a Ctx<S>;
    }

    impl<'a, S: std::any::Any + Send + Sync> CtxProbe<'a, S> for Probe<&'a Ctx<S>> {
        fn context(&self) -> ContextOf<S> {
            ContextOf(std::marker::PhantomData)
        }

        fn param(&self, ctx: &'a Ctx<S>) -> &'a Ctx<S> {
            ctx
        }
    }

    /// Stand-ins when the parameter is not a context, in a build that
    /// `<P as ContextParam>::IS` fails anyway.
    pub trait CtxFallback<P> {
        /// Never called.
        fn context<S>(&self) -> ContextOf<S>;
        /// Never called.
        fn param<S>(&self, ctx: &Ctx<S>) -> P;
    }

    impl<P> CtxFallback<P> for &Probe<P> {
        fn context<S>(&self) -> ContextOf<S> {
            ContextOf(std::marker::PhantomData)
        }

        fn param<S>(&self, _: &Ctx<S>) -> P {
            unreachable!("a tool whose context parameter is not `&Ctx<S>` does not compile")
        }
    }

    /// The state of a tool's context: what the generated code does with it.
    pub struct ContextOf<S>(std::marker::PhantomData<fn() -> S>);

    impl<S: std::any::Any + Send + Sync> ContextOf<S> {
        /// The [`StateType`] of the context.
        pub fn state(&self) -> StateType {
            StateType::of::<S>()
        }

        /// The typed context of a call.
        pub fn from_call(&self, cx: &CallContext<'_>) -> Result<Ctx<S>, ToolError> {
            Ctx::from_call(cx)
        }

        /// [`check_sig`], for a tool whose context is `&Ctx<S>`: the check
        /// takes the same context.
        pub fn check_sig<'a, A, F, P1, P2>(&self, f: &F) -> CheckSig<'a, F, A, S>
        where
            F: CheckFn<A, P1, P2>,
            (P1, P2): CheckParams<'a, A, S>,
            F::Output: CheckOutput,
        {
            check_sig::<A, S, F, P1, P2>(f)
        }

        /// [`async_check_sig`], for a tool whose context is `&Ctx<S>`.
        pub fn async_check_sig<'a, A, F, P1, P2>(&self, f: &F) -> AsyncCheckSig<'a, F, A, S>
        where
            F: CheckFn<A, P1, P2>,
            (P1, P2): CheckParams<'a, A, S>,
            F::Output: AsyncCheckOutput + 'a,
        {
            async_check_sig::<A, S, F, P1, P2>(f)
        }

        /// [`reconcile_sig`], for a tool whose context is `&Ctx<S>`.
        pub fn reconcile_sig<'a, F, P1, P2, R>(&self, f: &F) -> ReconcileSig<'a, F, S>
        where
            F: ReconcileFn<P1, P2>,
            (P1, P2): ReconcileParams<'a, S>,
            F::Output: ReconcileOutput + 'a,
            <F::Output as ReconcileOutput>::Found: ReconciledOutput<R>,
        {
            reconcile_sig::<S, F, P1, P2, R>(f)
        }
    }
}
