//! A question put to a person about one exact call, and where it stands.
//!
//! A question has a **kind**: an *approval* asks whether a call may run (a
//! high-risk call, or a side effect untrusted output tainted); *in doubt*
//! asks whether an earlier attempt of a call whose outcome is unknown took
//! effect. Its answer is a **decision**, read as one [`Verdict`]. Its
//! **state** ([`QuestionState`]) is derived in one place,
//! [`ApprovalEntry::state`], from what the store keeps, at a given time;
//! every entry point reads that state.
//!
//! A question is bound to one exact call (its caller, conversation, tool and
//! validated arguments) and to who made it: the caller and the principal
//! behind it ([`Requester`]). Two principals mapped to one caller make two
//! questions of one call; the one who made a call never decides it.
//!
//! # A question's states
//!
//! | state | approval | in doubt | who moves it on |
//! |---|---|---|---|
//! | [open](QuestionState::Open) | a person (or N people) may approve, edit or deny | a person says *it happened* or *it did not* | a person; the host or the asking client where [`Answerers`] allow it |
//! | [signing](QuestionState::Signing) | some of the N signatures given | - | the other people, each once, never the requester |
//! | [decided](QuestionState::Decided) | approve, edit: the next carry-out runs it once; deny: every identical call is denied for the denial's own period, counted from the decision | happened: answered done, never run; not happened: run once | the next call carrying it out (an identical call, a call with the id, a wait, a task) |
//! | [running](QuestionState::Running), [done](QuestionState::Done) | replayed from its key, whoever asks; a denial or an edit still answers identical calls for its period | same | nobody: it is over |
//! | [expired](QuestionState::Expired) | nobody decided in time, or the decision was not carried out in time: it will not run, and the identical call asks anew | never: an unsettled question about an unknown outcome stays open | nobody |
//!
//! # Who may answer which question
//!
//! | question | answer | a person (inbox, host's API) | the host's `confirmed` or a bare question id | the MCP client that was asked |
//! |---|---|---|---|---|
//! | approval | approve, deny | yes, but never the requester | where the asking process was in host mode ([`Answerers::host`]) | in its own conversation, where the asking process let clients decide ([`Answerers::client`]) and so does the answering one |
//! | approval | edit | yes | no | no |
//! | in doubt | it happened, it did not | yes | never | never |
//! | in doubt | approve, deny, edit, cancel | never: an approval is not a settlement | never | never |
//!
//! A question is its caller's, its conversation's and its requester's:
//! nobody else's answer reaches it, and to anyone else its id is the same as
//! an id that does not exist. A decision is final: a second one is refused.

mod answerers;
mod kind;
mod records;
mod rules;
mod state;

pub use answerers::Answerers;
pub use kind::{IN_DOUBT, NEVER_MS, QuestionKind, Verdict};
pub use records::{
    ApprovalDecision, ApprovalEntry, ApprovalResult, AskApproval, Binding, DecideOutcome,
    OpenBounds, PendingApproval, Requester, SignOutcome, Signature, TakeApproval,
};
pub use rules::{Answer, Answerer, Refusal, may_answer};
pub use state::QuestionState;

/// An open question of the call `t` in session `s` by caller `c`, asked at
/// 0, for the tests of the rules a question is answered by.
#[cfg(test)]
fn open_entry(reason: Option<&str>, expires_ms: u64, answerers: Answerers) -> ApprovalEntry {
    ApprovalEntry {
        approval: PendingApproval {
            id: "q".into(),
            session: "s".into(),
            caller: "c".into(),
            tool: "t".into(),
            digest: "d".into(),
            arguments: serde_json::json!({}),
            step: 1,
            created_ms: 0,
            expires_ms,
            decision: None,
            reason: reason.map(str::to_owned),
            tainted: Vec::new(),
            answerers,
            principal: None,
            provenance: Vec::new(),
        },
        used_ms: None,
        result: None,
    }
}
