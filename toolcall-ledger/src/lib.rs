//! The floor of [toolcall](https://docs.rs/toolcall): what a call leaves
//! behind and what people are asked about it, below the runtime that makes
//! the calls.
//!
//! - [`store`]: the contract every store keeps (step counts, idempotency
//!   records and claims, questions, resource locks, taint, the operators'
//!   controls), split by role, and [`MemoryStore`](store::MemoryStore).
//! - [`question`]: a question put to a person (an approval, or whether an
//!   attempt whose outcome is unknown took effect), its state derived in one
//!   place, and who may answer it.
//! - [`provenance`]: which untrusted output tainted a conversation, and
//!   its text, bounded, for the person asked about a later call.
//! - [`canonical`]: the canonical form of arguments (RFC 8785) and the
//!   digest the idempotency key is made of; [`json`], the strict reading of
//!   JSON text both rest on.
//! - [`controls`]: the operators' document (stops, rate limits, approvals by
//!   several people or by rule) and how it changes.
//! - [`ToolResult`] and [`Code`]: the answer to every call.
//! - [`Policy`], [`Caller`], [`Principal`]: who calls, and what it may do.
//!
//! Applications depend on `toolcall`; a store of its own, or an integration
//! that reads questions and records without running calls, depends on this
//! crate alone, as the SQL stores do.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod canonical;
pub mod controls;
pub mod decide;
#[doc(hidden)]
pub mod echo;
mod error;
#[doc(hidden)]
pub mod hex;
#[doc(hidden)]
pub mod ids;
pub mod json;
mod policy;
pub mod provenance;
pub mod question;
mod result;
pub mod store;
mod sync;

pub use policy::{Caller, Policy, Principal, Taint};
pub use result::{Code, Data, ToolResult};
