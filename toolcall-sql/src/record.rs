//! An idempotency key's record (`toolcall_records`): its states, its
//! result as the column holds it, and what a call reads of it.
//!
//! A record is `in_flight` (claimed until `until_ms`), `completed` (with the
//! result as JSON text) or `in_doubt`. A claim whose lease ran out with no
//! outcome is in doubt too: [`state_at`] says so for a store that reads
//! the columns as they are.

use toolcall_ledger::ToolResult;
use toolcall_ledger::store::{CallBegun, Claim, PendingApproval, RecordedOutcome, StoreError};

/// Claimed by a call that is running, until the lease's end.
pub const IN_FLIGHT: &str = "in_flight";
/// Done, with the result kept.
pub const COMPLETED: &str = "completed";
/// Ran, with an outcome nobody knows.
pub const IN_DOUBT: &str = "in_doubt";

/// A result as the `result` column holds it: JSON text.
pub fn result_text(result: &ToolResult) -> Result<String, StoreError> {
    serde_json::to_string(result).map_err(StoreError::new)
}

/// A `result` column read back.
pub fn parse_result(text: &str) -> Result<ToolResult, StoreError> {
    serde_json::from_str(text).map_err(StoreError::new)
}

/// The state a record is in at `now` (milliseconds as the column holds
/// them): an `in_flight` one whose lease ran out is in doubt.
pub fn state_at(state: &str, until_ms: i64, now: i64) -> &str {
    if state == IN_FLIGHT && until_ms <= now {
        IN_DOUBT
    } else {
        state
    }
}

/// A question a claim keeps ([`CallStore::claim_asking`](toolcall_ledger::store::CallStore::claim_asking))
/// as the `question` column holds it: JSON text.
pub fn question_text(question: &PendingApproval) -> Result<String, StoreError> {
    serde_json::to_string(question).map_err(StoreError::new)
}

/// A `question` column read back.
pub fn parse_question(text: &str) -> Result<PendingApproval, StoreError> {
    serde_json::from_str(text).map_err(StoreError::new)
}

/// The statement that lists the questions of the keys whose outcome is
/// unknown ([`CallStore::unsettled`](toolcall_ledger::store::CallStore::unsettled)),
/// with its two parameters (the time, then the limit) written as
/// `placeholder(n)` says (`?1` for SQLite, `$1` for Postgres).
pub fn unsettled_statement(placeholder: impl Fn(usize) -> String) -> String {
    format!(
        "SELECT key, question FROM toolcall_records
         WHERE question IS NOT NULL
           AND (state = '{IN_DOUBT}' OR (state = '{IN_FLIGHT}' AND until_ms <= {}))
         ORDER BY asked_ms, key LIMIT {}",
        placeholder(1),
        placeholder(2)
    )
}

/// What [`CallStore::outcome`](toolcall_ledger::store::CallStore::outcome) answers for a
/// record in `state` (as [`state_at`] says it; `None`: no record) with
/// `result`: completed with its result, claimed, or in doubt.
pub fn outcome(
    state: Option<&str>,
    result: Option<&str>,
) -> Result<Option<RecordedOutcome>, StoreError> {
    Ok(match (state, result) {
        (None, _) => None,
        (Some(COMPLETED), Some(text)) => {
            Some(RecordedOutcome::Completed(Box::new(parse_result(text)?)))
        }
        (Some(IN_FLIGHT), _) => Some(RecordedOutcome::InFlight),
        (Some(_), _) => Some(RecordedOutcome::InDoubt),
    })
}

/// What claiming a key does with its record (see
/// [`CallStore::claim`](toolcall_ledger::store::CallStore::claim)), as [`claim_step`] says
/// it.
#[derive(Debug)]
pub enum ClaimStep {
    /// Nothing to write: the answer is this (completed with its result,
    /// or held by a lease that still runs).
    Answer(Claim),
    /// The record is turned in doubt, not taken: its lease ran out with no
    /// outcome ([`Claim::Abandoned`]).
    Abandon,
    /// The record is made `in_flight` for the new lease: the key was free
    /// or in doubt ([`Claim::Acquired`]).
    Acquire,
}

/// What claiming a key at `now` does, for a store that reads its record
/// (`state`, the lease's end and the result, as the columns hold them;
/// `None`: no record) and writes in the same transaction.
pub fn claim_step(
    record: Option<(&str, i64, Option<&str>)>,
    now: i64,
) -> Result<ClaimStep, StoreError> {
    Ok(match record {
        Some((COMPLETED, _, Some(text))) => {
            ClaimStep::Answer(Claim::Completed(parse_result(text)?))
        }
        Some((IN_FLIGHT, until_ms, _)) if until_ms > now => ClaimStep::Answer(Claim::InFlight),
        Some((IN_FLIGHT, _, _)) => ClaimStep::Abandon,
        // Free, or in doubt.
        _ => ClaimStep::Acquire,
    })
}

/// How many writes a call's start made, as the statements it stands for
/// count them one by one: its step, its count when it was counted, its lock
/// and its claim when they were taken. A store counts each toward its next purge.
pub fn begun_writes(begun: &CallBegun) -> usize {
    1 + usize::from(begun.calls.is_some()) + usize::from(begun.locked) + usize::from(begun.claimed)
}
