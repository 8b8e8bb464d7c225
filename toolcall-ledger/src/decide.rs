//! What people's answers do to the questions a store keeps: record a
//! decision ([`decide`]), wait for one ([`wait`]), and put every unknown
//! outcome to a person ([`surface`]).

use std::time::Duration;

use serde_json::Value;

use crate::question::{
    Answer, Answerer, Answerers, ApprovalDecision, ApprovalEntry, AskApproval, Binding,
    DecideOutcome, IN_DOUBT, NEVER_MS, OpenBounds, QuestionState, Refusal, Requester, SignOutcome,
    TakeApproval, Verdict, may_answer,
};
use crate::result::ToolResult;
use crate::store::{
    ApprovalLookup, ApprovalUse, DecisionWrite, SignatureWrite, Store, StoreError, Unsettled,
};

/// When a decision is recorded, and how long a denial or an edit answers
/// the identical calls from then ([`ApprovalDecision::lasts_until_ms`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moment {
    /// Now, in milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// How long a denial or an edit stands, in milliseconds.
    pub stands_ms: u64,
}

impl Moment {
    /// `now_ms`, with denials and edits standing for `stands`.
    pub fn new(now_ms: u64, stands: Duration) -> Moment {
        Moment {
            now_ms,
            stands_ms: u64::try_from(stands.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// `now_ms`, with denials and edits standing for [`DENIAL_TTL`].
impl From<u64> for Moment {
    fn from(now_ms: u64) -> Moment {
        Moment::new(now_ms, DENIAL_TTL)
    }
}

/// How long a denial or an edit answers the identical calls after it was
/// decided, unless a setting says otherwise: a day.
pub const DENIAL_TTL: Duration = Duration::from_secs(24 * 60 * 60);

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
/// [`QuestionStore::decide_approval`](crate::store::QuestionStore::decide_approval), which keeps the first of two racing ones.
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
    at: impl Into<Moment>,
) -> Result<Decided, Refusal> {
    let at = at.into();
    let now_ms = at.now_ms;
    let entry = match store.approval(id).await {
        Ok(Some(entry)) => entry,
        Ok(None) => return Err(Refusal::Unknown),
        Err(error) => return Err(Refusal::Store(error)),
    };
    if binding.is_some_and(|binding| !binding.matches(&entry.approval)) {
        return Err(Refusal::Unknown);
    }
    let decision = answer.decision(answerer.by(), note, now_ms, at.stands_ms);
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
                .sign_approval(&SignatureWrite {
                    id,
                    signer: answerer.by(),
                    needed,
                    decision: &decision,
                    now_ms,
                })
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
    let deciding = DecisionWrite {
        id,
        decision: &decision,
        now_ms,
    };
    match store.decide_approval(&deciding).await {
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
    // The one who made a call never approves it, however many must.
    if let Answerer::Person(by) = answerer
        && made_it(entry, by)
    {
        let who = match needed {
            1 => "another person decides it".to_owned(),
            _ => format!("{} needs {needed} other people", question.tool),
        };
        return Err(Refusal::Controls(format!(
            "{by} made this call and may not approve it: {who}"
        )));
    }
    if needed <= 1 {
        return Ok(1);
    }
    let Answerer::Person(_) = answerer else {
        return Err(Refusal::Controls(format!(
            "{} needs the approval of {needed} people, each in the approval inbox",
            question.tool
        )));
    };
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
    let kind = entry.approval.kind();
    entry.approval.decision.as_ref().is_some_and(|kept| {
        Verdict::of(kind, kept) == Verdict::of(kind, decision)
            && kept.by == decision.by
            && kept.note == decision.note
    })
}

/// Whether `by` made the call `entry` asks about: the principal behind its
/// caller (its subject), or the caller itself when no principal is.
fn made_it(entry: &ApprovalEntry, by: &str) -> bool {
    match &entry.approval.principal {
        Some(principal) => principal.subject == by,
        None => entry.approval.caller == by,
    }
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
/// kept a question ([`CallStore::unsettled`](crate::store::CallStore::unsettled)), asks it (a fresh id, lasting
/// `ttl`) unless a question about that call is open or decided; and records
/// as done, at once, those a person already said took effect, so that they
/// are never asked again. What an approval inbox does before it lists
/// (toolcall-inbox), and what an operator's sweep may do: an unknown outcome
/// reaches a person without waiting for an identical call. Answers asked
/// are bounded by nothing (an unknown outcome must reach a person), and at
/// most 256 keys are looked at per sweep.
pub async fn surface<St: Store + ?Sized>(store: &St, now_ms: u64) -> Result<Surfaced, StoreError> {
    let mut done = Surfaced::default();
    for Unsettled { key, mut question } in store.unsettled(now_ms, SURFACE_LIMIT).await? {
        let requester = question.requester();
        let binding = Binding {
            session: &question.session,
            caller: &question.caller,
            tool: Some(&question.tool),
            digest: Some(&question.digest),
            requester: Requester::Only(requester.as_deref()),
        };
        let found = store
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason: Some(IN_DOUBT),
                now_ms,
            })
            .await?;
        match found.map(|entry| (entry.state(now_ms), entry)) {
            // A person said it happened: done, and nothing runs.
            Some((QuestionState::Decided(Verdict::Happened), entry)) => {
                let by = entry.approval.decision.map(|d| d.by).unwrap_or_default();
                let result = happened(&question.tool, &by);
                store.complete(&key, &result).await?;
                if let TakeApproval::Taken(_) = store
                    .take_approval(&ApprovalUse {
                        id: &entry.approval.id,
                        binding: &binding,
                        now_ms,
                    })
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
                continue;
            }
            // Open, or "it did not happen", which the call's next attempt
            // carries out: with a person already.
            Some((state, _)) if state.is_open() || matches!(state, QuestionState::Decided(_)) => {
                continue;
            }
            // Carried out, and in doubt again: a new question.
            _ => {}
        }
        question.id = crate::ids::question_id();
        question.created_ms = now_ms;
        question.expires_ms = NEVER_MS;
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
#[doc(hidden)]
pub fn happened(tool: &str, by: &str) -> ToolResult {
    let mut data = serde_json::Map::new();
    data.insert("settled_by_person".into(), Value::Bool(true));
    data.insert("happened".into(), Value::Bool(true));
    if !by.is_empty() {
        data.insert("settled_by".into(), Value::from(by));
    }
    let mut result = ToolResult::success(tool.to_owned(), data);
    result.message = format!(
        "A person checked that an earlier attempt of {tool} with these exact arguments took \
         effect. It was not run again."
    );
    result
}

/// Waits until the question `id` is no longer open (decided, carried out,
/// expired, or gone), or until `until_ms`, and returns it as it is then:
/// `None` when there is none. Every wait for a decision is this one; what
/// the waiting call answers then is the question's
/// [state](ApprovalEntry::state). A store that can be woken (Postgres:
/// `LISTEN`) wakes it ([`QuestionStore::wait_approval`](crate::store::QuestionStore::wait_approval)).
pub async fn wait<St: Store + ?Sized>(
    store: &St,
    id: &str,
    until_ms: u64,
) -> Result<Option<ApprovalEntry>, StoreError> {
    store.wait_approval(id, until_ms).await
}
