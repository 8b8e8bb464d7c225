//! Where a question stands at a given time, derived from what the store
//! keeps: here, and nowhere else. Every entry point (the inbox's pages and
//! its JSON, tasks, elicitations, waits, a call that brings the question's
//! id, the identical call, the host's answers, dry runs) reads this state;
//! none tests the stored fields itself. A question's kind and what its
//! decision decided are read here too.

use super::kind::{IN_DOUBT, QuestionKind, Verdict};
use super::records::{ApprovalDecision, ApprovalEntry, ApprovalResult, PendingApproval, Signature};

/// Where a question stands: see the [module](super#a-questions-states) for
/// the table, and [`ApprovalEntry::state`] for how it is read.
#[derive(Clone, Debug, PartialEq)]
pub enum QuestionState {
    /// A person may answer it: an approval nobody decided and whose time
    /// runs, or a question about an unknown outcome nobody settled (which
    /// never runs out of time).
    Open,
    /// An approval several people must sign, some of whom have: still open
    /// to the others.
    Signing {
        /// Who signed, in signing order.
        signed_by: Vec<String>,
        /// How many distinct people must.
        needed: u32,
    },
    /// Decided, and not carried out yet.
    Decided(Verdict),
    /// A call took the decision and has not recorded what came of it: it
    /// runs now, here or on another replica (or its process died, which the
    /// call's key tells).
    Running(Verdict),
    /// What came of the decision.
    Done(Verdict, Box<ApprovalResult>),
    /// Nobody decided it in time, or its decision (an approval, an edit, a
    /// denial whose own period ended) was not carried out in time. Only an
    /// approval expires.
    Expired,
}

impl QuestionState {
    /// Whether a person may still answer it (open, or signing).
    pub fn is_open(&self) -> bool {
        matches!(self, QuestionState::Open | QuestionState::Signing { .. })
    }

    /// What was decided, once something was.
    pub fn verdict(&self) -> Option<&Verdict> {
        match self {
            QuestionState::Decided(verdict)
            | QuestionState::Running(verdict)
            | QuestionState::Done(verdict, _) => Some(verdict),
            _ => None,
        }
    }

    /// One word for it: `open`, `signing`, `decided`, `running`, `done`,
    /// `expired`.
    pub fn word(&self) -> &'static str {
        match self {
            QuestionState::Open => "open",
            QuestionState::Signing { .. } => "signing",
            QuestionState::Decided(_) => "decided",
            QuestionState::Running(_) => "running",
            QuestionState::Done(..) => "done",
            QuestionState::Expired => "expired",
        }
    }
}

impl ApprovalEntry {
    /// Where the question stands at `now_ms`: the one derivation of a
    /// question's state from its stored decision, use, result and expiry.
    /// A question about an unknown outcome never expires; an approval
    /// expires while nobody carried a decision out.
    pub fn state(&self, now_ms: u64) -> QuestionState {
        let kind = self.approval.kind();
        let expired = kind == QuestionKind::Approval && self.approval.expires_ms <= now_ms;
        let verdict = self
            .approval
            .decision
            .as_ref()
            .map_or(Verdict::Approve, |decision| Verdict::of(kind, decision));
        match (&self.approval.decision, self.used_ms, &self.result) {
            (None, None, _) if expired => QuestionState::Expired,
            (None, None, _) => QuestionState::Open,
            (_, None, _) if expired => QuestionState::Expired,
            (_, None, _) => QuestionState::Decided(verdict),
            (_, Some(_), None) => QuestionState::Running(verdict),
            (_, Some(_), Some(result)) => QuestionState::Done(verdict, Box::new(result.clone())),
        }
    }

    /// As [`state`](ApprovalEntry::state), with the `signatures` kept on
    /// the question and the `needed` count: an open question someone
    /// signed is [`Signing`](QuestionState::Signing).
    pub fn state_signed(
        &self,
        signatures: &[Signature],
        needed: u32,
        now_ms: u64,
    ) -> QuestionState {
        match self.state(now_ms) {
            QuestionState::Open if needed > 1 && !signatures.is_empty() => QuestionState::Signing {
                signed_by: signatures.iter().map(|s| s.by.clone()).collect(),
                needed,
            },
            state => state,
        }
    }

    /// Whether a call may still join the run this question's decision
    /// allowed, under the call's key (while the question lasts): past it,
    /// the key may be forgotten, and only a new question runs the call.
    pub fn joinable(&self, now_ms: u64) -> bool {
        self.approval.expires_ms > now_ms
    }

    /// The decision that still answers this call's identical calls at
    /// `now_ms`, whether carried out or not: a denial or an edit
    /// ([`Verdict::stands`]) within its own period.
    pub fn standing(&self, now_ms: u64) -> Option<Verdict> {
        if self.approval.expires_ms <= now_ms {
            return None;
        }
        self.state(now_ms)
            .verdict()
            .filter(|verdict| verdict.stands())
            .cloned()
    }
}

impl QuestionKind {
    /// The kind of `question`: [`InDoubt`](QuestionKind::InDoubt) for the
    /// reason [`IN_DOUBT`], else [`Approval`](QuestionKind::Approval).
    pub fn of(question: &PendingApproval) -> QuestionKind {
        if question.reason.as_deref() == Some(IN_DOUBT) {
            QuestionKind::InDoubt
        } else {
            QuestionKind::Approval
        }
    }
}

impl Verdict {
    /// What `decision`, kept with a question of `kind`, decided.
    pub fn of(kind: QuestionKind, decision: &ApprovalDecision) -> Verdict {
        match (kind, decision.approved, &decision.edited_arguments) {
            (QuestionKind::InDoubt, true, _) => Verdict::NotHappened,
            (QuestionKind::InDoubt, false, _) => Verdict::Happened,
            (QuestionKind::Approval, true, Some(edited)) => Verdict::Edit(edited.clone()),
            (QuestionKind::Approval, true, None) => Verdict::Approve,
            (QuestionKind::Approval, false, _) => Verdict::Deny,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::question::{Answerers, ApprovalDecision, IN_DOUBT, NEVER_MS};

    fn entry(reason: Option<&str>, expires_ms: u64) -> ApprovalEntry {
        crate::question::open_entry(reason, expires_ms, Answerers::PERSON)
    }

    fn decided(mut entry: ApprovalEntry, approved: bool, edited: bool) -> ApprovalEntry {
        entry.approval.decision = Some(ApprovalDecision {
            approved,
            by: "ana".into(),
            note: String::new(),
            edited_arguments: edited.then(|| json!({"x": 1})),
            decided_ms: 10,
            lasts_until_ms: None,
        });
        entry
    }

    fn result() -> ApprovalResult {
        ApprovalResult {
            ok: true,
            code: "OK".into(),
            replayed: false,
            at_ms: 20,
            answer: None,
        }
    }

    #[test]
    fn an_approval_is_open_until_its_time_then_expired_decided_or_not() {
        let open = entry(None, 100);
        assert_eq!(open.state(99), QuestionState::Open);
        assert_eq!(open.state(100), QuestionState::Expired);
        let approved = decided(entry(None, 100), true, false);
        assert_eq!(approved.state(99), QuestionState::Decided(Verdict::Approve));
        // Approved and never carried out: expired, wherever it is read.
        assert_eq!(approved.state(100), QuestionState::Expired);
        assert!(!approved.state(100).is_open());
    }

    #[test]
    fn a_question_about_an_unknown_outcome_never_expires() {
        let doubt = entry(Some(IN_DOUBT), 100);
        assert_eq!(doubt.state(u64::MAX), QuestionState::Open);
        let settled = decided(entry(Some(IN_DOUBT), 100), false, false);
        assert_eq!(
            settled.state(1_000),
            QuestionState::Decided(Verdict::Happened)
        );
        let again = decided(entry(Some(IN_DOUBT), NEVER_MS), true, false);
        assert_eq!(
            again.state(1_000),
            QuestionState::Decided(Verdict::NotHappened)
        );
    }

    #[test]
    fn a_carried_out_decision_is_running_then_done_whatever_the_time() {
        let mut running = decided(entry(None, 100), true, false);
        running.used_ms = Some(50);
        assert_eq!(
            running.state(1_000),
            QuestionState::Running(Verdict::Approve)
        );
        running.result = Some(result());
        assert_eq!(
            running.state(1_000),
            QuestionState::Done(Verdict::Approve, Box::new(result()))
        );
    }

    #[test]
    fn a_denial_and_an_edit_stand_for_their_period_an_approval_never() {
        for (approved, edited, stands) in [
            (false, false, true),
            (true, true, true),
            (true, false, false),
        ] {
            let mut used = decided(entry(None, 100), approved, edited);
            used.used_ms = Some(50);
            assert_eq!(used.standing(99).is_some(), stands, "{approved} {edited}");
            assert_eq!(used.standing(100), None);
        }
    }

    #[test]
    fn signatures_make_an_open_question_signing() {
        let open = entry(None, 100);
        let signed = [Signature {
            by: "ana".into(),
            at_ms: 5,
        }];
        assert_eq!(
            open.state_signed(&signed, 2, 50),
            QuestionState::Signing {
                signed_by: vec!["ana".into()],
                needed: 2
            }
        );
        assert_eq!(open.state_signed(&[], 2, 50), QuestionState::Open);
        assert_eq!(open.state_signed(&signed, 2, 100), QuestionState::Expired);
    }
}
