//! GUIDE_PLACEHOLDER

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use toolcall_core::*;
pub use toolcall_macros::tool;

/// What `#[tool]` expands to reaches the runtime through here, so that a
/// user's crate needs no direct dependency on serde, schemars or inventory.
/// Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
    pub use schemars;
    pub use serde;
    pub use serde_json;
    pub use toolcall_core::__private::*;
    pub use toolcall_core::{
        Bound, BoxFuture, Constraint, Ctx, FieldErrors, FieldMeta, Pattern, Tool, ToolArgs,
        ToolError, ToolSpec,
    };
}
