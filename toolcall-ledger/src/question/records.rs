//! The records of a question as a store keeps them: what was asked, the
//! decision, what came of it, and what the store's question methods take
//! and answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::answerers::Answerers;
use super::kind::QuestionKind;
use crate::policy::Principal;
use crate::provenance::TaintSource;
use crate::result::ToolResult;

/// An approval a person has not given yet, bound to one exact call. Stores
/// keep it as it is and give it back whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The question id handed to the host.
    pub id: String,
    /// The conversation of the call.
    pub session: String,
    /// The caller's id.
    pub caller: String,
    /// The tool.
    pub tool: String,
    /// Hex SHA-256 of the canonical validated arguments.
    pub digest: String,
    /// The validated arguments, as shown to the person.
    pub arguments: Value,
    /// The session's step count when the call asked for approval.
    pub step: u64,
    /// When it was asked for, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it stops being valid, in milliseconds since the Unix epoch.
    pub expires_ms: u64,
    /// A person's decision, once one is recorded (`QuestionStore::decide_approval`,
    /// the inbox's): it travels with the approval until a call uses it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalDecision>,
    /// Why the call asks a person beyond its tool's risk, as the answer's
    /// `data.reason` says it: `"untrusted_context"` when the session read
    /// untrusted output ([`Policy::taint`](crate::Policy::taint)); `None`
    /// for a high-risk call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The arguments that carry a value read in untrusted output, as the
    /// answer's `data.tainted` names them (empty when the reason is not
    /// taint, or when the whole session is tainted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tainted: Vec<String>,
    /// Who may answer it besides a person, as the process that asked it
    /// recorded ([who may answer which question](super#who-may-answer-which-question)): the
    /// host where it was in host mode, the MCP client that made the call
    /// where the server let its clients decide. A question about an unknown
    /// outcome is a person's only, whatever this says.
    #[serde(default)]
    pub answerers: Answerers,
    /// Who authenticated behind the caller that asked
    /// ([`Caller::with_principal`](crate::Caller::with_principal)), shown
    /// to the person who decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
    /// Where the untrusted output that is the reason came from
    /// ([`TaintSource`]: which call, and its text, bounded), newest first,
    /// shown beside the call to the person who decides; empty when the
    /// reason is not taint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<TaintSource>,
}

impl PendingApproval {
    /// What the question asks: approval, or whether an earlier attempt took
    /// effect.
    pub fn kind(&self) -> QuestionKind {
        QuestionKind::of(self)
    }

    /// Whether `other` is bound to the same requester as this one.
    pub fn same_requester(&self, other: &PendingApproval) -> bool {
        self.requester() == other.requester()
    }

    /// Who the question is bound to, as a key a store can index and
    /// compare: the principal's issuer and subject
    /// ([`Principal::requester`]); `None` for a call with no principal
    /// behind its caller, and for a question about an unknown outcome,
    /// which is its call's key's whoever asks (one outcome, one question).
    pub fn requester(&self) -> Option<String> {
        if self.kind() == QuestionKind::InDoubt {
            return None;
        }
        self.principal.as_ref().map(Principal::requester)
    }
}

/// What a question must match to be used: one exact call, and who made it.
#[derive(Clone, Copy, Debug)]
pub struct Binding<'a> {
    /// The session of the call being approved.
    pub session: &'a str,
    /// The caller's id.
    pub caller: &'a str,
    /// The tool, when the host names it.
    pub tool: Option<&'a str>,
    /// The digest of the arguments, when the call brings its own.
    pub digest: Option<&'a str>,
    /// Who must have asked it: a call matches only its own requester's
    /// questions; a decision by the host names none ([`Requester::Anyone`]).
    pub requester: Requester<'a>,
}

impl Binding<'_> {
    /// Whether `approval` was asked for this exact call, by this requester.
    pub fn matches(&self, approval: &PendingApproval) -> bool {
        approval.session == self.session
            && approval.caller == self.caller
            && self.tool.is_none_or(|tool| tool == approval.tool)
            && self.digest.is_none_or(|digest| digest == approval.digest)
            && self.requester.admits(approval.requester().as_deref())
    }
}

/// Who a question is bound to besides its call: the principal that asked
/// (an OAuth subject and its issuer), as [`PendingApproval::requester`]
/// writes it. Two principals mapped to one caller make two questions of one
/// call, so that neither joins the other's and nobody decides their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requester<'a> {
    /// Any requester: a decision by the host, which names a question by id
    /// and is bound to its conversation, caller and tool.
    Anyone,
    /// Exactly this requester, or a call with no principal behind it
    /// (`None`): what a call matches its own questions with.
    Only(Option<&'a str>),
}

impl Requester<'_> {
    /// Whether a question asked by `asked_by` is this requester's.
    pub fn admits(&self, asked_by: Option<&str>) -> bool {
        match self {
            Requester::Anyone => true,
            Requester::Only(requester) => *requester == asked_by,
        }
    }
}

/// What taking an approval found.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // returned once per decision, never stored
#[non_exhaustive]
pub enum TakeApproval {
    /// It matched, and is now used up.
    Taken(PendingApproval),
    /// It existed but ran out of time; it is gone now.
    Expired,
    /// No such approval, already used, or asked for another call. Nothing
    /// was changed.
    Invalid,
}

/// A person's decision on a pending approval, kept with it in the store
/// until an agent's call uses it up (`QuestionStore::take_approval`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// Whether the call may run.
    pub approved: bool,
    /// Who decided (the inbox's signed-in person), for the audit.
    pub by: String,
    /// Why, as the person wrote it (shown to the model on a denial).
    #[serde(default)]
    pub note: String,
    /// The arguments the person approved instead of the model's, when they
    /// changed them: the call runs with these, validated, checked and
    /// policed again as a new call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_arguments: Option<Value>,
    /// When it was decided, in milliseconds since the Unix epoch.
    pub decided_ms: u64,
    /// Until when a denial or an edit answers the identical calls, in
    /// milliseconds since the Unix epoch: the store moves the question's
    /// expiry there when it records the decision (never earlier). `None`:
    /// the question's own expiry (an approval, a settlement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lasts_until_ms: Option<u64>,
}

/// What recording a decision found (`QuestionStore::decide_approval`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecideOutcome {
    /// This decision is the one: it is stored with the approval.
    Decided,
    /// Someone decided first (another click, another person), or an
    /// agent's call already used it up: nothing was changed.
    AlreadyDecided,
    /// It ran out of time before anyone decided: nothing was changed.
    Expired,
    /// No such approval (made up, or purged).
    Invalid,
}

/// What came of a decided approval once an agent's call used it up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalResult {
    /// Whether the call's answer was ok.
    pub ok: bool,
    /// The answer's code (`OK`, `CONFIRMATION_DENIED`, `AMOUNT_EXCEEDS_REFUNDABLE`, ...).
    pub code: String,
    /// Whether the answer was a replay of a call that had already run.
    #[serde(default)]
    pub replayed: bool,
    /// When the call was answered, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The whole answer, as the model was given it (within the output
    /// budget): what a durable task that waited for this approval completes
    /// with, on any replica and after a restart. `None` in records written
    /// before the answer was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<ToolResult>,
}

/// An approval as the store keeps it, with its life after the question:
/// the decision (in [`PendingApproval::decision`]), when an agent's call
/// used it up, and what came of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalEntry {
    /// The approval, with its decision if one was recorded.
    pub approval: PendingApproval,
    /// When an agent's call used it up (`QuestionStore::take_approval`).
    #[serde(default)]
    pub used_ms: Option<u64>,
    /// What came of it (`QuestionStore::settle_approval`).
    #[serde(default)]
    pub result: Option<ApprovalResult>,
}

impl ApprovalEntry {
    /// Whether a person may still decide it at `now_ms`: its
    /// [state](ApprovalEntry::state) is open (or signing).
    pub fn is_open(&self, now_ms: u64) -> bool {
        self.state(now_ms).is_open()
    }
}

/// What asking for an approval found (`QuestionStore::ask_approval`).
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // returned once per question, never stored
#[non_exhaustive]
pub enum AskApproval {
    /// No approval was asked for this exact call yet: this one is stored.
    Created,
    /// This exact call (same session, caller, tool, digest and reason)
    /// already has an approval, unused and unexpired, decided or not:
    /// nothing was written, and this is that approval. Asking again is the
    /// same question, with the same id.
    Existing(ApprovalEntry),
    /// The conversation (the session, of the approval's caller) already has
    /// as many open approvals (undecided, unused, unexpired) as it may:
    /// nothing was written.
    Full {
        /// How many open approvals the conversation has.
        open: usize,
    },
    /// The approval's caller already has as many open approvals as it may,
    /// in all its conversations together: nothing was written.
    CallerFull {
        /// How many open approvals the caller has.
        open: usize,
    },
    /// The approval's requester (the principal behind its caller) already
    /// has as many open approvals as it may: nothing was written. One
    /// principal cannot fill what the others mapped to its caller share.
    RequesterFull {
        /// How many open approvals the requester has.
        open: usize,
    },
}

/// How many open approvals (undecided, unused, unexpired) may be there
/// before one more is asked for (`QuestionStore::ask_approval`). A `usize` is a
/// bound on the conversation alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenBounds {
    /// In the approval's conversation: its session, of its caller.
    pub conversation: usize,
    /// Of the approval's caller, in all its conversations.
    pub caller: usize,
    /// Of the approval's requester (the principal behind its caller), in
    /// all its conversations; no bound for a call with no principal.
    pub requester: usize,
}

impl OpenBounds {
    /// No bound at all: what a question about an unknown outcome is asked
    /// with (it must reach a person).
    pub const NONE: OpenBounds = OpenBounds {
        conversation: usize::MAX,
        caller: usize::MAX,
        requester: usize::MAX,
    };

    /// What a store answers, given how many open approvals the
    /// conversation, the caller and the requester have: `Some` when one
    /// more is over a bound.
    pub fn over(
        &self,
        conversation: usize,
        caller: usize,
        requester: usize,
    ) -> Option<AskApproval> {
        if conversation >= self.conversation {
            Some(AskApproval::Full { open: conversation })
        } else if requester >= self.requester {
            Some(AskApproval::RequesterFull { open: requester })
        } else if caller >= self.caller {
            Some(AskApproval::CallerFull { open: caller })
        } else {
            None
        }
    }
}

impl From<usize> for OpenBounds {
    fn from(conversation: usize) -> Self {
        OpenBounds {
            conversation,
            caller: usize::MAX,
            requester: usize::MAX,
        }
    }
}

/// One person's signature on a question that needs more than one
/// (`QuestionStore::sign_approval`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// Who signed.
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// What `QuestionStore::sign_approval` did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignOutcome {
    /// The signature is kept; the question waits for more. `signatures`:
    /// how many distinct people have signed, this one included.
    Signed {
        /// Distinct signers so far.
        signatures: u32,
    },
    /// The signature was the last one needed: it is kept and, in the same
    /// atomic step, the approval is decided (approved, `by` the signers'
    /// names in signing order joined with `, `).
    Decided,
    /// This person signed already: nothing was changed.
    AlreadySigned,
    /// Decided already (approved, denied or used): nothing was changed.
    AlreadyDecided,
    /// It ran out of time before it was decided: nothing was changed.
    Expired,
    /// No such approval (made up, or purged).
    Invalid,
}
