//! What a question asks, and what was decided of it.

use serde_json::Value;

/// The reason a question about an unknown outcome carries
/// (`PendingApproval::reason`): `"in_doubt"`.
pub const IN_DOUBT: &str = "in_doubt";

/// What a question to a person asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuestionKind {
    /// Whether a call may run: a high-risk call, or a side effect untrusted
    /// output tainted. Answered by approving (as it is, or edited) or
    /// denying.
    Approval,
    /// Whether an earlier attempt of a call whose outcome is unknown took
    /// effect. Answered only by a person, as "it happened" or "it did not".
    InDoubt,
}

impl QuestionKind {
    /// The words an answer of the wrong kind is refused with.
    pub(crate) fn expects(self) -> &'static str {
        match self {
            QuestionKind::Approval => "it asks whether the call may run: approve, edit or deny it",
            QuestionKind::InDoubt => {
                "it asks whether an earlier attempt of the call took effect: only a person \
                 answers it, saying whether it happened"
            }
        }
    }
}

/// The expiry of a question that never expires: one about an unknown
/// outcome, which stays a person's until one answers it (a store keeps it as
/// a 64-bit signed integer, so it is `i64::MAX`).
pub const NEVER_MS: u64 = i64::MAX as u64;

/// What was decided of a question: the one reading of a stored decision
/// (whose `approved` means "it may run" of an approval and "it did not
/// happen, run it once more" of a question about an unknown outcome).
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The call may run once, as asked.
    Approve,
    /// The call may run once, with these arguments in place of the model's.
    Edit(Value),
    /// The call never runs.
    Deny,
    /// The earlier attempt took effect: the call is done, never run again.
    Happened,
    /// The earlier attempt did not take effect: it runs once more, under its
    /// key.
    NotHappened,
}

impl Verdict {
    /// Whether carrying it out runs the call (approved, edited, or it did
    /// not happen).
    pub fn runs(&self) -> bool {
        matches!(
            self,
            Verdict::Approve | Verdict::Edit(_) | Verdict::NotHappened
        )
    }

    /// Whether it answers the identical calls that come after it was
    /// carried out, for its own period: a denial (they are denied) and an
    /// edit (they get the edited call's answer). An approval was the one
    /// run, which the key replays; a settlement is the key's outcome.
    pub fn stands(&self) -> bool {
        matches!(self, Verdict::Deny | Verdict::Edit(_))
    }

    /// One word for it, as the inbox's JSON and the history say it:
    /// `approved`, `edited`, `denied`, `happened`, `not_happened`.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Approve => "approved",
            Verdict::Edit(_) => "edited",
            Verdict::Deny => "denied",
            Verdict::Happened => "happened",
            Verdict::NotHappened => "not_happened",
        }
    }
}
