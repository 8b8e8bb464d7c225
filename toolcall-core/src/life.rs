//! A side-effecting call's life, in one place: its states, the questions it
//! asks a person, who may answer each, and what an unknown outcome allows.
//! Every entry point (a call, the host's `confirmed` and approval ids,
//! [`Dispatcher::approve`], [`deny`](crate::Dispatcher::deny) and
//! [`settle`](crate::Dispatcher::settle), the inbox's decisions, an MCP
//! client's answers and tasks, retries, crash and store recovery, dry runs)
//! asks this module, and refuses what it refuses.
//!
//! # A call's states
//!
//! A call is one exact call: its **caller**, its conversation, its tool and
//! its validated arguments, which its idempotency key digests. Two callers'
//! identical calls are two calls.
//!
//! | state | what it means | what an identical call gets |
//! |---|---|---|
//! | proposed | the model sent it; stages 0 to 6 run | its own answer |
//! | asked for approval | a high-risk or tainted call waits for a person ([`QuestionKind::Approval`]) | the same question, under the same id |
//! | decided | a person (or the host, or the client that was asked, where the question allows it) answered | the decision: an approval runs once, an edit runs the edited call, a denial is `CONFIRMATION_DENIED` for as long as the decision lasts |
//! | claimed, running | one process holds the key's claim and runs the handler | waits for it, then its answer |
//! | done | the outcome is recorded | the recorded answer, `replayed: true` |
//! | in doubt | the outcome is unknown: a lost answer, a timeout, a crash after the claim, or a result that could not be recorded | see [`after_unknown`]; for a backend that can neither be asked nor trusted with a key twice, a question to a person |
//! | asked whether it happened | an in-doubt call waits for a person ([`QuestionKind::InDoubt`]) | `IN_DOUBT`, the same question |
//! | settled | a person said it happened (done, replayed from then on) or did not (it runs once more, under its key) | as done, or as a call that runs |
//!
//! # Who may answer which question
//!
//! | question | answer | a person (inbox, host's API) | the host's `confirmed` or a bare approval id | the MCP client that was asked |
//! |---|---|---|---|---|
//! | approval | approve, deny | yes | where the asking process was in host mode ([`Answerers::host`]) | in its own conversation, where the asking process let clients decide ([`Answerers::client`]) and so does the answering one |
//! | approval | edit | yes | no | no |
//! | in doubt | it happened, it did not | yes | never | never |
//! | in doubt | approve, deny, edit, cancel | never: an approval is not a settlement | never | never |
//!
//! A question is its caller's and its conversation's: nobody else's answer
//! reaches it, and to anyone else its id is the same as an id that does
//! not exist. A decision is final: a second one is refused, and a denial
//! answers every identical call of the conversation while the question
//! lasts, whatever the call brings (`confirmed`, the question's id).
//!
//! # Unknown outcomes
//!
//! An unknown outcome is never retried on a guess ([`after_unknown`]): a
//! failure whose effect may have happened is retried only under a key the
//! backend honours, or after the backend was asked ([`Backend::Reconciles`]);
//! else it is in doubt at once and a person settles it. Only a failure the
//! handler says came before any effect ([`ToolError::NotApplied`](crate::ToolError::NotApplied))
//! is retried plainly.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::store::{
    ApprovalDecision, ApprovalEntry, AskApproval, Binding, DecideOutcome, OpenBounds,
    PendingApproval, SignOutcome, Store, StoreError, TakeApproval, Unsettled,
};
use crate::tool::ToolSpec;

#[cfg(doc)]
use crate::Dispatcher;

/// The reason a question about an unknown outcome carries
/// ([`PendingApproval::reason`]): `"in_doubt"`.
pub const IN_DOUBT: &str = "in_doubt";

/// What a question to a person asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The kind of `question`: [`InDoubt`](QuestionKind::InDoubt) for the
    /// reason [`IN_DOUBT`], else [`Approval`](QuestionKind::Approval).
    pub fn of(question: &PendingApproval) -> QuestionKind {
        if question.reason.as_deref() == Some(IN_DOUBT) {
            QuestionKind::InDoubt
        } else {
            QuestionKind::Approval
        }
    }

    /// The words an answer of the wrong kind is refused with.
    fn expects(self) -> &'static str {
        match self {
            QuestionKind::Approval => "it asks whether the call may run: approve, edit or deny it",
            QuestionKind::InDoubt => {
                "it asks whether an earlier attempt of the call took effect: only a person \
                 answers it, saying whether it happened"
            }
        }
    }
}

/// Who may answer a question besides a person, as the process that asked it
/// recorded with it ([`PendingApproval::answerers`]). A person (in the
/// inbox, or through the host's [`Dispatcher::approve`] and
/// [`deny`](crate::Dispatcher::deny)) may always answer an approval
/// question; nobody but a person ever answers a question about an unknown
/// outcome.
///
/// Kept in the store as a list of words (`["host", "client"]`); a question
/// recorded without it (by an earlier version) is a person's only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Answerers {
    host: bool,
    client: bool,
    /// Distinct people who must approve, when more than one (0 and 1: one).
    people: u8,
}

impl Default for Answerers {
    /// A person only ([`Answerers::PERSON`]).
    fn default() -> Self {
        Answerers::PERSON
    }
}

impl Answerers {
    /// A person only.
    pub const PERSON: Answerers = Answerers {
        host: false,
        client: false,
        people: 1,
    };

    /// A person, and the host too when `host` (the asking process was in
    /// [`Approvals::Host`](crate::Approvals::Host) mode), and the MCP client
    /// that made the call too when `client`.
    pub fn new(host: bool, client: bool) -> Answerers {
        Answerers {
            host,
            client,
            people: 1,
        }
    }

    /// The same answerers, `people` distinct persons of whom must approve
    /// (the tool's `#[tool(approvals = N)]`, or the operators' controls,
    /// when the question was asked): then neither the host nor a client
    /// answers it. Kept with the question (at most 10).
    pub fn people(self, people: u32) -> Answerers {
        let people = u8::try_from(people.clamp(1, 10)).unwrap_or(10);
        if people > 1 {
            Answerers {
                host: false,
                client: false,
                people,
            }
        } else {
            Answerers { people: 1, ..self }
        }
    }

    /// How many distinct people must approve: 1 unless the question was
    /// asked of more.
    pub fn people_needed(&self) -> u32 {
        u32::from(self.people.max(1))
    }

    /// Whether the host's `confirmed`, or an approval id the host brings
    /// for a question nobody decided, approves.
    pub fn host(&self) -> bool {
        self.host
    }

    /// Whether the MCP client that made the call may answer the question it
    /// was asked, in its own conversation.
    pub fn client(&self) -> bool {
        self.client
    }

    /// The words the store keeps, for a text column: `""` (a person only),
    /// `"host"`, `"client"` or `"host client"`, or `"people:N"` for a
    /// question N people must approve.
    pub fn to_words(&self) -> std::borrow::Cow<'static, str> {
        if self.people > 1 {
            return format!("people:{}", self.people).into();
        }
        match (self.host, self.client) {
            (false, false) => "",
            (true, false) => "host",
            (false, true) => "client",
            (true, true) => "host client",
        }
        .into()
    }

    /// [`to_words`](Answerers::to_words) read back; a word it does not
    /// know grants nothing.
    pub fn from_words(words: &str) -> Answerers {
        let mut answerers = Answerers::PERSON;
        for word in words.split_whitespace() {
            match word {
                "host" => answerers.host = true,
                "client" => answerers.client = true,
                _ => {
                    if let Some(people) = word
                        .strip_prefix("people:")
                        .and_then(|n| n.parse::<u32>().ok())
                    {
                        answerers = answerers.people(people);
                    }
                }
            }
        }
        answerers
    }
}

impl Serialize for Answerers {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.to_words();
        let words: Vec<&str> = text.split_whitespace().collect();
        words.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Answerers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let words = Vec::<String>::deserialize(deserializer)?;
        Ok(Answerers::from_words(&words.join(" ")))
    }
}

/// Who answers a question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Answerer<'a> {
    /// A person: signed in to the approval inbox, or deciding through the
    /// host's [`Dispatcher::approve`], [`deny`](crate::Dispatcher::deny)
    /// or [`settle`](crate::Dispatcher::settle). Named for the audit.
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
    fn by(&self) -> &str {
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
    fn answers(&self) -> QuestionKind {
        match self {
            Answer::Approve | Answer::Edit(_) | Answer::Deny => QuestionKind::Approval,
            Answer::Happened | Answer::NotHappened => QuestionKind::InDoubt,
        }
    }

    /// The decision the store keeps, with `note`. Of a question about an
    /// unknown outcome, `approved` is "it did not happen, run it once more".
    fn decision(&self, by: &str, note: &str, now_ms: u64) -> ApprovalDecision {
        let (approved, edited) = match self {
            Answer::Approve | Answer::NotHappened => (true, None),
            Answer::Edit(arguments) => (true, Some((*arguments).clone())),
            Answer::Deny | Answer::Happened => (false, None),
        };
        ApprovalDecision {
            approved,
            by: by.to_owned(),
            note: note.to_owned(),
            edited_arguments: edited,
            decided_ms: now_ms,
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
    /// Decided already (by someone else, or differently), used up, or
    /// expired: the first decision stands.
    Closed,
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
            Refusal::Closed => f.write_str(
                "the question was decided, used up or expired; the first decision stands",
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
/// question](self#who-may-answer-which-question), and nothing else. A
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
    if !entry.is_open(now_ms) {
        return Err(Refusal::Closed);
    }
    Ok(())
}

/// What [`decide`] recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decided {
    /// This answer is the decision now.
    Recorded,
    /// A signature of a question that needs more than one person (the
    /// operators' controls): kept; the question waits for the rest.
    Signed {
        /// Distinct people who signed, this one included.
        signatures: u32,
        /// How many must.
        needed: u32,
    },
    /// The same answerer's same answer was recorded before (a double
    /// click): one decision, and the same outcome.
    Again,
}

/// The one way a decision is recorded: reads the question `id`, refuses
/// what [`may_answer`] refuses, and records `answer`, with the answerer's
/// `note` (a denial's is the model's reason), as the decision with
/// [`Store::decide_approval`], which keeps the first of two racing ones.
/// `binding`, when given, is what the question must have been asked for
/// (the host's API: its conversation, caller and tool); another's is
/// [`Refusal::Unknown`].
pub async fn decide<St: Store + ?Sized>(
    store: &St,
    id: &str,
    binding: Option<&Binding<'_>>,
    answerer: &Answerer<'_>,
    answer: &Answer<'_>,
    note: &str,
    now_ms: u64,
) -> Result<Decided, Refusal> {
    let entry = match store.approval(id).await {
        Ok(Some(entry)) => entry,
        Ok(None) => return Err(Refusal::Unknown),
        Err(error) => return Err(Refusal::Store(error)),
    };
    if binding.is_some_and(|binding| !binding.matches(&entry.approval)) {
        return Err(Refusal::Unknown);
    }
    let decision = answer.decision(answerer.by(), note, now_ms);
    if let Err(refusal) = may_answer(&entry, answerer, answer, now_ms) {
        return match refusal {
            Refusal::Closed if same_decision(&entry, &decision) => Ok(Decided::Again),
            refusal => Err(refusal),
        };
    }
    // "It did not happen" runs the call once more: not while it is stopped.
    if matches!(answer, Answer::NotHappened) {
        controlled(store, &entry, answerer, answer).await?;
    }
    if matches!(answer, Answer::Approve | Answer::Edit(_)) {
        let needed = controlled(store, &entry, answerer, answer).await?;
        if needed > 1 {
            return match store
                .sign_approval(id, answerer.by(), needed, &decision, now_ms)
                .await
            {
                Ok(SignOutcome::Signed { signatures }) => {
                    Ok(Decided::Signed { signatures, needed })
                }
                Ok(SignOutcome::Decided) => Ok(Decided::Recorded),
                // The same person's second signature counts once.
                Ok(SignOutcome::AlreadySigned) => {
                    let signatures = store.signatures(id).await.map_err(Refusal::Store)?;
                    Ok(Decided::Signed {
                        signatures: u32::try_from(signatures.len()).unwrap_or(u32::MAX),
                        needed,
                    })
                }
                Ok(SignOutcome::AlreadyDecided | SignOutcome::Expired) => Err(Refusal::Closed),
                Ok(_) => Err(Refusal::Unknown),
                Err(error) => Err(Refusal::Store(error)),
            };
        }
    }
    match store.decide_approval(id, &decision, now_ms).await {
        Ok(DecideOutcome::Decided) => Ok(Decided::Recorded),
        Ok(DecideOutcome::AlreadyDecided) => match store.approval(id).await {
            Ok(Some(entry)) if same_decision(&entry, &decision) => Ok(Decided::Again),
            Ok(Some(_)) => Err(Refusal::Closed),
            Ok(None) => Err(Refusal::Unknown),
            Err(error) => Err(Refusal::Store(error)),
        },
        Ok(DecideOutcome::Expired) => Err(Refusal::Closed),
        Ok(_) => Err(Refusal::Unknown),
        Err(error) => Err(Refusal::Store(error)),
    }
}

/// What the operators' controls say of approving `entry`: refused while its
/// tool or its caller is stopped; otherwise how many distinct people must
/// approve it, and, when more than one, refused for an answerer who cannot
/// be one of them (the host, a client, the one who made the call) and for
/// an edit (each signs the same call).
async fn controlled<St: Store + ?Sized>(
    store: &St,
    entry: &ApprovalEntry,
    answerer: &Answerer<'_>,
    answer: &Answer<'_>,
) -> Result<u32, Refusal> {
    let stored = store.controls(0).await.map_err(Refusal::Store)?;
    let current = match stored {
        Some(stored) => crate::controls::Current::read(&stored)
            .map_err(|why| Refusal::Store(StoreError::new(why)))?,
        None => crate::controls::Current::default(),
    };
    let question = &entry.approval;
    if let Some(stop) = current.controls.stopped(&question.tool, &question.caller) {
        return Err(Refusal::Controls(format!(
            "{} is stopped by an operator ({}): it cannot be approved, nor run again, until it is enabled again",
            stop.target, stop.reason
        )));
    }
    if matches!(answer, Answer::NotHappened) {
        return Ok(1);
    }
    let needed = current
        .controls
        .people_needed(&question.tool)
        .max(question.answerers.people_needed());
    if needed <= 1 {
        return Ok(1);
    }
    let Answerer::Person(by) = answerer else {
        return Err(Refusal::Controls(format!(
            "{} needs the approval of {needed} people, each in the approval inbox",
            question.tool
        )));
    };
    let requester = question
        .principal
        .as_ref()
        .is_some_and(|principal| principal.subject == *by)
        || question.caller == *by;
    if requester {
        return Err(Refusal::Controls(format!(
            "{by} made this call and may not approve it: {} needs {needed} other people",
            question.tool
        )));
    }
    if matches!(answer, Answer::Edit(_)) {
        return Err(Refusal::Controls(format!(
            "{} needs the approval of {needed} people, who each sign the same call: deny it \
             and ask for the call you want instead of editing it",
            question.tool
        )));
    }
    Ok(needed)
}

/// Whether the decision kept with `entry` is `decision` (the same decider,
/// the same answer), whenever it was taken.
fn same_decision(entry: &ApprovalEntry, decision: &ApprovalDecision) -> bool {
    entry.approval.decision.as_ref().is_some_and(|kept| {
        kept.approved == decision.approved
            && kept.by == decision.by
            && kept.note == decision.note
            && kept.edited_arguments == decision.edited_arguments
    })
}

/// Whether a decision kept with a question still answers the identical
/// calls that come after it was carried out: a denial and an edit do (an
/// identical call is denied, or gets the edited call's answer), while the
/// question lasts; a plain approval was the one run, which the key
/// replays.
pub fn lasts(entry: &ApprovalEntry, now_ms: u64) -> bool {
    entry.approval.expires_ms > now_ms
        && QuestionKind::of(&entry.approval) == QuestionKind::Approval
        && entry
            .approval
            .decision
            .as_ref()
            .is_some_and(|decision| !decision.approved || decision.edited_arguments.is_some())
}

/// What [`surface`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Surfaced {
    /// Questions asked of a person about unknown outcomes no question asked
    /// about yet.
    pub asked: usize,
    /// Unknown outcomes a person already said took effect, recorded as done
    /// now (an identical call replays them).
    pub settled: usize,
}

/// The most unknown outcomes one [`surface`] looks at.
const SURFACE_LIMIT: usize = 256;

/// Makes every unknown outcome the store knows of a person's question:
/// for each key in doubt (or claimed by a lease that ran out) whose claim
/// kept a question ([`Store::unsettled`]), asks it (a fresh id, lasting
/// `ttl`) unless a question about that call is open or decided; and records
/// as done, at once, those a person already said took effect, so that they
/// are never asked again. What an approval inbox does before it lists
/// (toolcall-inbox), and what an operator's sweep may do: an unknown outcome
/// reaches a person without waiting for an identical call. Answers asked
/// are bounded by nothing (an unknown outcome must reach a person), and at
/// most 256 keys are looked at per sweep.
pub async fn surface<St: Store + ?Sized>(
    store: &St,
    now_ms: u64,
    ttl: std::time::Duration,
) -> Result<Surfaced, StoreError> {
    let mut done = Surfaced::default();
    for Unsettled { key, mut question } in store.unsettled(now_ms, SURFACE_LIMIT).await? {
        let binding = Binding {
            session: &question.session,
            caller: &question.caller,
            tool: Some(&question.tool),
            digest: Some(&question.digest),
        };
        let found = store
            .find_approval(&binding, Some(IN_DOUBT), now_ms)
            .await?;
        if let Some(entry) = found.filter(|entry| entry.used_ms.is_none()) {
            if let Some(decision) = entry.approval.decision.filter(|d| !d.approved) {
                // A person said it happened: done, and nothing runs.
                let result = happened(&question.tool, &decision.by);
                store.complete(&key, &result).await?;
                if let TakeApproval::Taken(_) = store
                    .take_approval(&entry.approval.id, &binding, now_ms)
                    .await?
                {
                    let came = crate::store::ApprovalResult {
                        ok: true,
                        code: result.code.as_str().to_owned(),
                        replayed: false,
                        at_ms: now_ms,
                        answer: Some(result),
                    };
                    store.settle_approval(&entry.approval.id, &came).await?;
                }
                done.settled += 1;
            }
            // Open, or "it did not happen", which the call's next attempt
            // carries out: with a person already.
            continue;
        }
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        question.id = crate::dispatcher::ids::confirmation_id();
        question.created_ms = now_ms;
        question.expires_ms = now_ms.saturating_add(ttl_ms);
        question.decision = None;
        question.reason = Some(IN_DOUBT.to_owned());
        question.answerers = Answerers::PERSON;
        if let AskApproval::Created = store.ask_approval(&question, OpenBounds::NONE).await? {
            done.asked += 1;
        }
    }
    Ok(done)
}

/// The answer of a call a person said took effect: ok, nothing run, who
/// said so in `data.settled_by`; what every identical call replays.
pub(crate) fn happened(tool: &str, by: &str) -> crate::ToolResult {
    let mut data = serde_json::Map::new();
    data.insert("settled_by_person".into(), Value::Bool(true));
    data.insert("happened".into(), Value::Bool(true));
    if !by.is_empty() {
        data.insert("settled_by".into(), Value::from(by));
    }
    let mut result = crate::ToolResult::success(tool.to_owned(), data);
    result.message = format!(
        "A person checked that an earlier attempt of {tool} with these exact arguments took \
         effect. It was not run again."
    );
    result
}

/// What a tool's backend promises about its idempotency key, as the tool
/// declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// `#[tool(idempotent_backend)]`: it applies one key at most once, so
    /// an attempt may be made again under the same key.
    HonoursKey,
    /// `#[tool(reconcile = path)]` (and not the above): it can be asked
    /// whether the call with a key took effect.
    Reconciles,
    /// Neither: an unknown outcome is a person's to settle.
    Neither,
}

impl Backend {
    /// What `spec` declares. A tool that declares both `idempotent_backend`
    /// and `reconcile` is retried under its key (the cheaper of two safe
    /// ways); its `reconcile` is asked when the retries are spent, and when
    /// an identical call finds it in doubt.
    pub fn of(spec: &ToolSpec) -> Backend {
        if spec.idempotent_backend() {
            Backend::HonoursKey
        } else if spec.reconciles() {
            Backend::Reconciles
        } else {
            Backend::Neither
        }
    }
}

/// What comes after a side effect's attempt whose outcome is unknown (a
/// transient failure, a lost answer), while retries are left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AfterUnknown {
    /// Try again under the same key: the backend applies it once.
    Retry,
    /// Ask the backend (`reconcile`) first: done is the answer, not done
    /// is tried again, unknown is in doubt.
    AskBackend,
    /// Stop: the call is in doubt, and a person settles it.
    InDoubt,
}

/// The rule for an unknown outcome: never retried on a guess.
pub fn after_unknown(backend: Backend) -> AfterUnknown {
    match backend {
        Backend::HonoursKey => AfterUnknown::Retry,
        Backend::Reconciles => AfterUnknown::AskBackend,
        Backend::Neither => AfterUnknown::InDoubt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(reason: Option<&str>, answerers: Answerers) -> ApprovalEntry {
        ApprovalEntry {
            approval: PendingApproval {
                id: "q".into(),
                session: "s".into(),
                caller: "c".into(),
                tool: "t".into(),
                digest: "d".into(),
                arguments: json!({}),
                step: 1,
                created_ms: 0,
                expires_ms: 1_000,
                decision: None,
                reason: reason.map(str::to_owned),
                tainted: Vec::new(),
                answerers,
                principal: None,
            },
            used_ms: None,
            result: None,
        }
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
        decided.approval.decision = Some(Answer::Deny.decision("ana", "no", 1));
        assert!(matches!(
            may_answer(&decided, &Answerer::Person("bo"), &Answer::Approve, 2),
            Err(Refusal::Closed)
        ));
        let open = question(None, Answerers::new(true, true));
        assert!(matches!(
            may_answer(&open, &Answerer::Person("bo"), &Answer::Approve, 1_000),
            Err(Refusal::Closed)
        ));
    }

    #[test]
    fn answerers_read_back_as_written_and_grant_nothing_unknown() {
        for answerers in [
            Answerers::PERSON,
            Answerers::new(true, false),
            Answerers::new(false, true),
            Answerers::new(true, true),
        ] {
            assert_eq!(Answerers::from_words(&answerers.to_words()), answerers);
            let json = serde_json::to_value(answerers).unwrap();
            assert_eq!(
                serde_json::from_value::<Answerers>(json).unwrap(),
                answerers
            );
        }
        assert_eq!(Answerers::from_words("root everyone"), Answerers::PERSON);
    }

    #[test]
    fn an_unknown_outcome_is_retried_only_where_the_backend_allows() {
        assert_eq!(after_unknown(Backend::HonoursKey), AfterUnknown::Retry);
        assert_eq!(after_unknown(Backend::Reconciles), AfterUnknown::AskBackend);
        assert_eq!(after_unknown(Backend::Neither), AfterUnknown::InDoubt);
    }
}
