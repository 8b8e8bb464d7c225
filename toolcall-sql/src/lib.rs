//! The dialect-free half of toolcall's SQL stores, for store authors.
//!
//! [toolcall-sqlite](https://docs.rs/toolcall-sqlite) and
//! [toolcall-postgres](https://docs.rs/toolcall-postgres) keep the same
//! tables and mean the same by them. What that meaning is lives here, once:
//!
//! * the values as the columns hold them ([`Value`], [`to_sql`],
//!   [`from_sql`]): milliseconds and counts as signed 64-bit integers,
//!   results, decisions and arguments as JSON text;
//! * an idempotency record's states, what a call reads of them and what a
//!   claim does with them ([`record`]);
//! * an approval's row, read back and written ([`approval`]), and what
//!   taking and deciding one answers;
//! * the operators' controls, the rate limits' windows and the
//!   signatures of approvals that need more than one person, and what
//!   signing answers ([`controls`]);
//! * the sources of a session's taint as its mark's `sources` column holds
//!   them ([`taint`]);
//! * what a purge deletes and when ([`purge`]);
//! * the schema's versions and the tables every dialect creates
//!   ([`schema`]).
//!
//! A store keeps its driver, its connection handling and its SQL text; it
//! calls these functions with what its driver read, and binds what they
//! return. Nothing here opens a connection or knows a driver, so a third
//! SQL store can be written against the same tables: the conformance suite
//! of the workspace (`tests/stores.rs`) says whether it means the same.
//!
//! An application does not need this crate: it uses a store.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod approval;
pub mod controls;
pub mod purge;
pub mod record;
pub mod schema;
pub mod taint;

use toolcall_ledger::store::StoreError;

/// One value bound to a statement or read from a row, typed as the
/// columns are: an integer (`INTEGER`, `BIGINT`) or text, either one
/// possibly `NULL`.
///
/// A store turns a row into values with its driver, and values into its
/// driver's parameters; the functions here read and make them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer column, or `NULL`.
    Int(Option<i64>),
    /// A text column, or `NULL`.
    Text(Option<String>),
}

impl Value {
    /// The integer this holds; `None` for `NULL`, an error for text.
    pub(crate) fn int(self) -> Result<Option<i64>, StoreError> {
        match self {
            Value::Int(value) => Ok(value),
            Value::Text(None) => Ok(None),
            Value::Text(Some(_)) => Err(StoreError::new("an integer column holds text")),
        }
    }

    /// The text this holds; `None` for `NULL`, an error for an integer.
    pub(crate) fn text(self) -> Result<Option<String>, StoreError> {
        match self {
            Value::Text(value) => Ok(value),
            Value::Int(None) => Ok(None),
            Value::Int(Some(_)) => Err(StoreError::new("a text column holds an integer")),
        }
    }
}

/// Milliseconds (or a count) as an integer column holds them: SQL integers
/// are signed, and milliseconds since 1970 fit with room to spare.
pub fn to_sql(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// An integer column read back as milliseconds or a count (0 for a
/// negative one, which no store writes).
pub fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A `LIMIT` (or any other bound on a number of rows) as a statement binds
/// it.
pub fn limit_sql(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A count of rows read back (`count(*)`, rows deleted).
pub fn count_sql(count: i64) -> usize {
    usize::try_from(count).unwrap_or(0)
}
