//! The runtime of [toolcall](https://docs.rs/toolcall): the dispatch
//! pipeline, results and codes, policy, idempotency keys and audit sinks.
//!
//! Applications depend on the `toolcall` crate, which re-exports this one
//! together with the `#[tool]` attribute and holds the guide.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
mod audit;
pub mod canonical;
mod dispatcher;
pub mod echo;
mod error;
mod format;
mod kinds;
mod parse;
mod policy;
mod redact;
mod registry;
mod result;
pub mod store;
mod tool;

pub use args::{Bound, Constraint, FieldErrors, FieldMeta, Format, Pattern, ToolArgs};
pub use audit::{AuditRecord, AuditSink, Cut, JsonLinesAudit, MemoryAudit};
pub use dispatcher::{BuildError, Call, Decision, Dispatcher, DispatcherBuilder, Settings};
pub use error::{Rejection, ToolError};
pub use parse::Arguments;
pub use policy::{Caller, Policy};
pub use redact::REDACTED;
pub use registry::{Registry, RegistryError};
pub use result::{Code, ToolResult};
pub use store::{MemoryStore, Store, StoreError};
pub use tool::{BoxFuture, Ctx, Tool, ToolSpec};

/// What `#[tool]` expands to reaches the runtime through here. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::kinds::{
        ListArg, NumberArg, StringArg, assert_list, assert_number, assert_string,
    };
    pub use crate::registry::ToolEntry;
    pub use crate::tool::{
        CallContext, ReconcileOutput, SpecParts, StateType, ToolOutput, into_output, reconciled,
    };

    /// The state type a context parameter `&Ctx<S>` names.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` is not a tool context",
        label = "a tool's first parameter, when it is a reference, must be `&Ctx<YourState>`",
        note = "the model's arguments are owned values (`String`, `i64`, ...); only the context is borrowed"
    )]
    pub trait ContextParam {
        /// The `S` of `&Ctx<S>`.
        type State: std::any::Any + Send + Sync;
    }

    impl<S: std::any::Any + Send + Sync> ContextParam for &crate::Ctx<S> {
        type State = S;
    }

    /// The [`StateType`] of a context parameter type.
    pub fn state_of<P: ContextParam>() -> StateType {
        StateType {
            id: std::any::TypeId::of::<P::State>(),
            name: std::any::type_name::<P::State>(),
        }
    }
}
