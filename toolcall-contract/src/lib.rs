//! toolcall's contracts and metrics, as a library: what the command line's
//! `lock`, `check`, `report` and `definitions --check` do, for a program
//! that wants the answers rather than the printed text.
//!
//! - [`lock`]: the tools' contract, `tools.lock.json`
//!   ([`Lockfile::from_registry`](lock::Lockfile::from_registry),
//!   [`Lockfile::parse`](lock::Lockfile::parse)), and [`lock::check`], which
//!   names every change since, each breaking, to review or compatible.
//! - [`report`]: metrics from an audit log ([`report::read_audit`],
//!   [`report::Report::from_records`]), as a table or as JSON.
//! - [`rejected`]: the rejected calls of an audit log, read again: the
//!   fields models get wrong, and the calls, as replay lines for regression
//!   tests.
//! - [`diff`]: where two JSON documents (committed tool definitions and the
//!   current ones) differ, a line per difference.
//!
//! ```
//! use toolcall_contract::lock::{self, Lockfile};
//! # let registry = toolcall_core::Registry::default();
//! let current = Lockfile::from_registry(&registry);
//! let locked = Lockfile::parse(&current.to_json_pretty())?;
//! assert!(lock::check(&locked, &current).is_empty());
//! # Ok::<(), lock::LockError>(())
//! ```

#![warn(missing_docs)]

pub mod diff;
pub mod lock;
pub mod rejected;
pub mod report;
