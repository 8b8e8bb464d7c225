//! The operators' controls (`toolcall_controls`, one row, and
//! `toolcall_controls_history`), the rate limits' fixed windows
//! (`toolcall_rates`) and the signatures of approvals that need more than
//! one person (`toolcall_signatures`): the statements both dialects run,
//! and what signing answers.
//!
//! The statements are written with SQLite's numbered parameters (`?1`);
//! [`dollars`] writes them with Postgres's (`$1`).

use toolcall_ledger::store::{ApprovalDecision, ApprovalEntry, SignOutcome, SignatureWrite};

/// The controls unless their version is `?1`: `version, document`, one
/// row or none.
pub const CONTROLS: &str =
    "SELECT version, document FROM toolcall_controls WHERE id = 1 AND version <> ?1";

/// Writes the document `?3` as version `?2` if the version kept is `?1`
/// (0: none yet): one statement that only one of two writers wins,
/// returning the version written (no row: another writer came first).
pub const PUT_CONTROLS: &str =
    "INSERT INTO toolcall_controls (id, version, document) VALUES (1, ?2, ?3)
     ON CONFLICT (id) DO UPDATE SET version = excluded.version, document = excluded.document
     WHERE toolcall_controls.version = ?1
     RETURNING version";

/// Keeps a change in the history: `?1` its version, `?2` who, `?3` when,
/// `?4` what, in words.
pub const RECORD_CHANGE: &str =
    "INSERT INTO toolcall_controls_history (version, by_name, at_ms, summary)
     VALUES (?1, ?2, ?3, ?4)";

/// The latest `?1` changes, newest first: `version, by_name, at_ms,
/// summary`.
pub const HISTORY: &str = "SELECT version, by_name, at_ms, summary FROM toolcall_controls_history
     ORDER BY version DESC LIMIT ?1";

/// Counts one call in the window of the bucket `?1` (its key; `?2` its
/// name) that starts at `?3` and ends at `?4`, if fewer than `?5` were
/// counted in it: one statement, returning the new count (no row: the
/// window is full, nothing was counted). A limit of 0 is the caller's to
/// refuse (this statement would count the window's first call).
pub const TAKE_RATE: &str =
    "INSERT INTO toolcall_rates (bucket_key, window_start_ms, bucket, until_ms, count)
     VALUES (?1, ?3, ?2, ?4, 1)
     ON CONFLICT (bucket_key, window_start_ms) DO UPDATE SET count = toolcall_rates.count + 1
     WHERE toolcall_rates.count < ?5
     RETURNING count";

/// The count of the bucket `?1` (its key) in the window that starts at
/// `?2`: one row or none.
pub const RATE_COUNT: &str =
    "SELECT count FROM toolcall_rates WHERE bucket_key = ?1 AND window_start_ms = ?2";

/// The signatures of the approval `?1`, in signing order: `signer, at_ms`.
pub const SIGNATURES: &str =
    "SELECT signer, at_ms FROM toolcall_signatures WHERE id = ?1 ORDER BY n";

/// Keeps a signature: `?1` the approval, `?2` the signer, `?3` when, `?4`
/// its place in the signing order (from 1).
pub const SIGN: &str =
    "INSERT INTO toolcall_signatures (id, signer, at_ms, n) VALUES (?1, ?2, ?3, ?4)";

/// Records the decision `?2` (JSON text) made at `?3` on the approval
/// `?1` if it is undecided, unused and unexpired at `?4`, and moves its
/// expiry to `?5` if that is later (a denial or an edit stands for its own
/// period; 0 for a decision that does not): the statement of a person's
/// decision, and of the last signature.
pub const DECIDE: &str = "UPDATE toolcall_approvals SET decision = ?2, decided_ms = ?3,
         expires_ms = CASE WHEN ?5 > expires_ms THEN ?5 ELSE expires_ms END
     WHERE id = ?1 AND decision IS NULL AND used_ms IS NULL AND expires_ms > ?4";

/// `sql` with Postgres's parameters: `$1` for `?1`. (The statements here
/// hold no other question mark.)
pub fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

/// What signing an approval does, once the store has read it (under the
/// lock that makes the signature and the decision one step) and its
/// signers so far ([`sign_step`]).
#[derive(Clone, Debug, PartialEq)]
pub enum SignStep {
    /// Nothing to write: the answer.
    Answer(SignOutcome),
    /// Keep the signature as the `n`th ([`SIGN`]); the question waits
    /// for more: the answer is [`SignOutcome::Signed`].
    Keep {
        /// The signature's place in the signing order, from 1.
        n: i64,
    },
    /// Keep the signature as the `n`th, and record `decision` ([`DECIDE`])
    /// in the same transaction: the answer is [`SignOutcome::Decided`].
    Decide {
        /// The signature's place in the signing order, from 1.
        n: i64,
        /// The decision as recorded: `by` the signers' names, in signing
        /// order, joined with `, `.
        decision: ApprovalDecision,
    },
}

/// What `signing` the approval `entry` (`None`: there is none) does, when
/// `signers` signed it before (in signing order): refused for an unknown,
/// decided or used, or expired approval (at `signing.now_ms`), and for a
/// second signature of one person (checked in that order); else kept, and
/// the `signing.needed`-th decides with `signing.decision`, its `by`
/// replaced.
pub fn sign_step(
    entry: Option<&ApprovalEntry>,
    signers: &[String],
    signing: &SignatureWrite<'_>,
) -> SignStep {
    let SignatureWrite {
        signer,
        needed,
        decision,
        now_ms,
        ..
    } = *signing;
    let Some(entry) = entry else {
        return SignStep::Answer(SignOutcome::Invalid);
    };
    if entry.approval.decision.is_some() || entry.used_ms.is_some() {
        return SignStep::Answer(SignOutcome::AlreadyDecided);
    }
    if entry.approval.expires_ms <= now_ms {
        return SignStep::Answer(SignOutcome::Expired);
    }
    if signers.iter().any(|s| s == signer) {
        return SignStep::Answer(SignOutcome::AlreadySigned);
    }
    let n = signers.len() + 1;
    let count = i64::try_from(n).unwrap_or(i64::MAX);
    if u32::try_from(n).is_ok_and(|n| n < needed) {
        return SignStep::Keep { n: count };
    }
    let mut names: Vec<&str> = signers.iter().map(String::as_str).collect();
    names.push(signer);
    SignStep::Decide {
        n: count,
        decision: ApprovalDecision {
            by: names.join(", "),
            ..decision.clone()
        },
    }
}

/// What [`QuestionStore::sign_approval`](toolcall_ledger::store::QuestionStore::sign_approval)
/// answers once `step` is written.
pub fn signed(step: &SignStep) -> SignOutcome {
    match step {
        SignStep::Answer(outcome) => outcome.clone(),
        SignStep::Keep { n } => SignOutcome::Signed {
            signatures: u32::try_from(*n).unwrap_or(u32::MAX),
        },
        SignStep::Decide { .. } => SignOutcome::Decided,
    }
}

/// The `?5` of [`DECIDE`]: until when `decision` keeps its question, or 0.
pub fn stands_until(decision: &toolcall_ledger::store::ApprovalDecision) -> i64 {
    decision.lasts_until_ms.map_or(0, crate::to_sql)
}
