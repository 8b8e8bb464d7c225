//! Who may give which answer to which question: the one table, and the
//! answers themselves.

use serde_json::Value;

use super::kind::{QuestionKind, Verdict};
use super::records::{ApprovalDecision, ApprovalEntry};
use super::state::QuestionState;
use crate::store::StoreError;

/// Who answers a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answerer<'a> {
    /// A person: signed in to the approval inbox, or deciding through the
    /// host's `Dispatcher::approve`, `deny`
    /// or `settle`. Named for the audit.
    Person(&'a str),
    /// The host asserting that a person approved, in host mode: the call's
    /// `confirmed`, or an approval id nobody decided.
    Host,
    /// The MCP client that made the call, answering the question it was
    /// asked (an elicitation, an `input_required` answer, `tasks/update`,
    /// `tasks/cancel`): only in its own conversation (`caller` and
    /// `session` are the answering request's), and only where the question
    /// and the answering server both let clients decide. `by` is recorded
    /// as the decider.
    Client {
        /// The caller of the answering request.
        caller: &'a str,
        /// The conversation of the answering request.
        session: &'a str,
        /// Who the store records as the decider.
        by: &'a str,
        /// Whether the answering server lets its clients decide (its mode,
        /// and in inbox mode its `--elicitation-approves`).
        allowed_here: bool,
    },
}

impl Answerer<'_> {
    /// The decider the store records.
    pub fn by(&self) -> &str {
        match self {
            Answerer::Person(by) => by,
            Answerer::Host => "host",
            Answerer::Client { by, .. } => by,
        }
    }
}

/// An answer to a question.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Answer<'a> {
    /// The call may run once, as asked.
    Approve,
    /// The call may run once, with these arguments in place of the model's
    /// (validated, checked and policed again as a new call).
    Edit(&'a Value),
    /// The call never runs; the decision's note is the model's reason.
    Deny,
    /// The earlier attempt of an in-doubt call took effect: it is done.
    Happened,
    /// The earlier attempt of an in-doubt call did not take effect: it runs
    /// once more, under its key.
    NotHappened,
}

impl Answer<'_> {
    /// The kind of question this answer answers.
    pub fn answers(&self) -> QuestionKind {
        match self {
            Answer::Approve | Answer::Edit(_) | Answer::Deny => QuestionKind::Approval,
            Answer::Happened | Answer::NotHappened => QuestionKind::InDoubt,
        }
    }

    /// What it decides.
    pub fn verdict(&self) -> Verdict {
        match self {
            Answer::Approve => Verdict::Approve,
            Answer::Edit(arguments) => Verdict::Edit((*arguments).clone()),
            Answer::Deny => Verdict::Deny,
            Answer::Happened => Verdict::Happened,
            Answer::NotHappened => Verdict::NotHappened,
        }
    }

    /// The decision the store keeps, by `by` with `note` at `now_ms`; a
    /// denial or an edit answers the identical calls for `stands_ms` from
    /// then ([`ApprovalDecision::lasts_until_ms`]). Of a question about an
    /// unknown outcome, `approved` is "it did not happen, run it once more".
    pub fn decision(&self, by: &str, note: &str, now_ms: u64, stands_ms: u64) -> ApprovalDecision {
        let verdict = self.verdict();
        let lasts_until_ms = verdict.stands().then(|| now_ms.saturating_add(stands_ms));
        let (approved, edited) = match verdict {
            Verdict::Approve | Verdict::NotHappened => (true, None),
            Verdict::Edit(arguments) => (true, Some(arguments)),
            Verdict::Deny | Verdict::Happened => (false, None),
        };
        ApprovalDecision {
            approved,
            by: by.to_owned(),
            note: note.to_owned(),
            edited_arguments: edited,
            decided_ms: now_ms,
            lasts_until_ms,
        }
    }
}

/// Why an answer was not taken. Nothing was changed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Refusal {
    /// No such question for this answerer: made up, purged, or someone
    /// else's (another caller's, another conversation's), which is not
    /// told apart.
    Unknown,
    /// Decided already (by someone else, or differently), or used up: the
    /// first decision stands.
    Closed,
    /// An approval nobody decided in time, or whose decision was not
    /// carried out in time: it will not run, and the identical call may be
    /// asked about anew.
    Expired,
    /// The question is of the other kind: an approval for a question about
    /// an unknown outcome, a settlement for an approval question, an edit
    /// of a question about an unknown outcome.
    WrongKind(QuestionKind),
    /// This answerer may not answer this question: the host or an MCP
    /// client where the question is a person's only.
    NotPermitted(QuestionKind),
    /// The operators' controls refuse it: the tool or the caller is
    /// stopped, or the question needs more than one person and this answer
    /// cannot be one of them (the one who made the call, the host, a
    /// client, an edit). Says which, in words.
    Controls(String),
    /// The store failed; try again.
    Store(StoreError),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unknown => f.write_str("no such question for this caller and conversation"),
            Refusal::Closed => {
                f.write_str("the question was decided or used up; the first decision stands")
            }
            Refusal::Expired => f.write_str(
                "the question expired before a decision on it was carried out: the call will \
                 not run; the identical call asks anew",
            ),
            Refusal::WrongKind(kind) => {
                write!(f, "not an answer to this question: {}", kind.expects())
            }
            Refusal::NotPermitted(QuestionKind::Approval) => f.write_str(
                "only a person decides this question (in the approval inbox), as the process \
                 that asked it said",
            ),
            Refusal::NotPermitted(QuestionKind::InDoubt) => f.write_str(
                "only a person answers whether an earlier attempt took effect (in the approval \
                 inbox)",
            ),
            Refusal::Controls(why) => f.write_str(why),
            Refusal::Store(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// Whether `answerer` may give `answer` to the question `entry`, as it
/// stands at `now_ms`: the whole table of [who may answer which
/// question](super#who-may-answer-which-question), and nothing else. A
/// person's identity and binding are the caller's to check (an inbox shows
/// every question; the host's API binds the decision to its conversation).
pub fn may_answer(
    entry: &ApprovalEntry,
    answerer: &Answerer<'_>,
    answer: &Answer<'_>,
    now_ms: u64,
) -> Result<(), Refusal> {
    let question = &entry.approval;
    let kind = QuestionKind::of(question);
    if let Answerer::Client {
        caller, session, ..
    } = answerer
        && (question.caller != *caller || question.session != *session)
    {
        return Err(Refusal::Unknown);
    }
    if answer.answers() != kind {
        return Err(Refusal::WrongKind(kind));
    }
    let permitted = match (answerer, kind) {
        (Answerer::Person(_), _) => true,
        (_, QuestionKind::InDoubt) => false,
        (_, QuestionKind::Approval) if matches!(answer, Answer::Edit(_)) => false,
        (Answerer::Host, QuestionKind::Approval) => question.answerers.host(),
        (Answerer::Client { allowed_here, .. }, QuestionKind::Approval) => {
            question.answerers.client() && *allowed_here
        }
    };
    if !permitted {
        return Err(Refusal::NotPermitted(kind));
    }
    match entry.state(now_ms) {
        state if state.is_open() => Ok(()),
        QuestionState::Expired => Err(Refusal::Expired),
        _ => Err(Refusal::Closed),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::question::{Answerers, IN_DOUBT};

    fn question(reason: Option<&str>, answerers: Answerers) -> ApprovalEntry {
        crate::question::open_entry(reason, 1_000, answerers)
    }

    fn client(allowed_here: bool) -> Answerer<'static> {
        Answerer::Client {
            caller: "c",
            session: "s",
            by: "mcp",
            allowed_here,
        }
    }

    #[test]
    fn nobody_but_a_person_answers_a_question_about_an_unknown_outcome() {
        let everyone = Answerers::new(true, true);
        let doubt = question(Some(IN_DOUBT), everyone);
        for answerer in [Answerer::Host, client(true)] {
            for answer in [Answer::Happened, Answer::NotHappened] {
                assert!(matches!(
                    may_answer(&doubt, &answerer, &answer, 1),
                    Err(Refusal::NotPermitted(QuestionKind::InDoubt))
                ));
            }
        }
        for answerer in [Answerer::Person("ana"), Answerer::Host, client(true)] {
            for answer in [Answer::Approve, Answer::Deny, Answer::Edit(&json!({}))] {
                assert!(matches!(
                    may_answer(&doubt, &answerer, &answer, 1),
                    Err(Refusal::WrongKind(QuestionKind::InDoubt))
                ));
            }
        }
        assert!(may_answer(&doubt, &Answerer::Person("ana"), &Answer::Happened, 1).is_ok());
        assert!(may_answer(&doubt, &Answerer::Person("ana"), &Answer::NotHappened, 1).is_ok());
    }

    #[test]
    fn the_recorded_mode_decides_and_so_does_the_answering_server() {
        let person_only = question(None, Answerers::PERSON);
        assert!(matches!(
            may_answer(&person_only, &Answerer::Host, &Answer::Approve, 1),
            Err(Refusal::NotPermitted(_))
        ));
        assert!(matches!(
            may_answer(&person_only, &client(true), &Answer::Deny, 1),
            Err(Refusal::NotPermitted(_))
        ));
        let clients = question(None, Answerers::new(false, true));
        assert!(may_answer(&clients, &client(true), &Answer::Approve, 1).is_ok());
        assert!(matches!(
            may_answer(&clients, &client(false), &Answer::Approve, 1),
            Err(Refusal::NotPermitted(_))
        ));
        assert!(matches!(
            may_answer(&clients, &client(true), &Answer::Edit(&json!({})), 1),
            Err(Refusal::NotPermitted(_))
        ));
        let host = question(None, Answerers::new(true, false));
        assert!(may_answer(&host, &Answerer::Host, &Answer::Approve, 1).is_ok());
    }

    #[test]
    fn another_conversations_or_callers_question_is_unknown_to_a_client() {
        let clients = question(None, Answerers::new(true, true));
        for (caller, session) in [("other", "s"), ("c", "other")] {
            let answerer = Answerer::Client {
                caller,
                session,
                by: "mcp",
                allowed_here: true,
            };
            assert!(matches!(
                may_answer(&clients, &answerer, &Answer::Approve, 1),
                Err(Refusal::Unknown)
            ));
        }
    }

    #[test]
    fn a_closed_question_takes_no_answer() {
        let mut decided = question(None, Answerers::new(true, true));
        decided.approval.decision = Some(Answer::Deny.decision("ana", "no", 1, 0));
        assert!(matches!(
            may_answer(&decided, &Answerer::Person("bo"), &Answer::Approve, 2),
            Err(Refusal::Closed)
        ));
        let open = question(None, Answerers::new(true, true));
        assert!(matches!(
            may_answer(&open, &Answerer::Person("bo"), &Answer::Approve, 1_000),
            Err(Refusal::Expired)
        ));
    }
}
