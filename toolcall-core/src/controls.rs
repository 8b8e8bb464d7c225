//! The operators' controls ([`toolcall_ledger::controls`], re-exported
//! here whole) checked against what the code declares: every name a tool or
//! a caller, every limit one the code sets and lowered, every bound one its
//! argument can be compared with. A document that does not check is never
//! loaded.
//!
//! The document is the ledger's; its validation against a registry is in
//! `validation`, its persistence (a policy loaded into a store) in
//! `persistence`.

mod persistence;
mod validation;

pub use toolcall_ledger::controls::*;

pub use persistence::load_policy;
pub use validation::{UnknownTarget, check, unknown_target};
