//! The host's decisions on calls that wait for a person: approve (the call
//! runs once, its checks re-run first) or deny (it never runs).

use std::any::Any;
use std::time::Instant;

use serde_json::{Map, Value};
use tracing::Instrument as _;

use super::Call;
use super::Dispatcher;
use super::audited::call_span;
use super::messages::{Details, Failure};
use super::stages::{Stage, Stages};
use crate::life::{self, Answer, Answerer, QuestionKind, QuestionState, Refusal, Verdict};
use crate::parse::Arguments;
use crate::policy::Caller;
use crate::result::{Code, ToolResult};
use crate::store::{ApprovalUse, Binding, PendingApproval, Requester, Store, TakeApproval, now_ms};

/// A person's decision on a pending approval, by its question id.
///
/// The decision is bound like the approval it answers: it names the session
/// and the caller the call was made in, and an approval asked for another
/// session or caller is [`CONFIRMATION_INVALID`](Code::ConfirmationInvalid),
/// as is a made-up id or one already used. Such an answer (and
/// `CONFIRMATION_EXPIRED`) names the id in its message, and the tool the
/// decision names ([`Decision::tool`]), or [`UNKNOWN_APPROVAL_TOOL`] when it
/// names none: the approval is gone, so nothing else knows the tool.
///
/// ```
/// use toolcall_core::Decision;
///
/// let decision = Decision::new("3f2a...", "conversation-42").by("ana@support");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Decision<'a> {
    pub(super) id: &'a str,
    pub(super) session: &'a str,
    caller: Option<&'a Caller>,
    tool: Option<&'a str>,
    pub(super) by: &'a str,
    pub(super) key_from_approval: bool,
    /// `Some` when the answer is the MCP client's, not a person's: whether
    /// the answering server lets its clients decide.
    pub(super) client: Option<bool>,
}

/// The `tool` of the answer to a decision on an approval that cannot be
/// found (made up, used, expired or bound to another call) when the decision
/// names no tool: `"(unknown approval)"`. Never a tool's name (a tool name
/// has no parentheses or spaces in any provider), and never empty.
pub const UNKNOWN_APPROVAL_TOOL: &str = "(unknown approval)";

impl<'a> Decision<'a> {
    /// A decision on the approval `id`, asked in `session`.
    pub fn new(id: &'a str, session: &'a str) -> Self {
        Decision {
            id,
            session,
            caller: None,
            tool: None,
            by: "",
            key_from_approval: false,
            client: None,
        }
    }

    /// The caller the call was made by (the dispatcher's default otherwise).
    pub fn caller(mut self, caller: &'a Caller) -> Self {
        self.caller = Some(caller);
        self
    }

    /// The tool the host believes it approves; another tool's approval is invalid.
    pub fn tool(mut self, tool: &'a str) -> Self {
        self.tool = Some(tool);
        self
    }

    /// The question's id.
    pub fn id(&self) -> &'a str {
        self.id
    }

    /// Who decided, for the audit record.
    pub fn by(mut self, person: &'a str) -> Self {
        self.by = person;
        self
    }

    /// The answer is the client's that made the call (an MCP client
    /// answering the question it was asked), not a person's: it is taken only
    /// for an approval question, in the client's own conversation, where the
    /// question lets clients decide and, `allowed_here`, so does the
    /// answering server (see [`life`](crate::life#who-may-answer-which-question)).
    /// Otherwise it is `CONFIRMATION_INVALID`, and nothing is done.
    pub fn by_client(mut self, allowed_here: bool) -> Self {
        self.client = Some(allowed_here);
        self
    }

    /// Derive the idempotency key from this approval instead of the
    /// arguments: for domains where two identical actions are legitimate
    /// (two equal transfers, each approved), each approval runs once.
    pub fn key_from_approval(mut self, yes: bool) -> Self {
        self.key_from_approval = yes;
        self
    }

    /// Matches the question this decision names, whoever asked it: a
    /// decision names a question by id, and is bound only to its
    /// conversation, caller and (when named) tool.
    fn binding(&self, caller: &'a Caller) -> Binding<'a> {
        Binding {
            session: self.session,
            caller: caller.id(),
            tool: self.tool,
            digest: None,
            requester: Requester::Anyone,
        }
    }
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// A person approved: the pending call runs, once. Its arguments are
    /// validated again and its business check and the caller's policy re-run
    /// against the current state first (much may change while a person
    /// reads). The result is the answer to the model's call.
    ///
    /// The decision is recorded in the store first, in every mode, as the
    /// inbox records a person's ([`life::decide`]): the first decision
    /// stays the one. A decision someone recorded before (a person's, in
    /// the inbox) is carried out as it is: a denial is `CONFIRMATION_DENIED`,
    /// edited arguments run in place of the model's. A question about an
    /// unknown outcome is not approved: it is answered
    /// ([`answer_in_doubt`](Dispatcher::answer_in_doubt)); approving it is
    /// `CONFIRMATION_INVALID`, and nothing is done.
    pub async fn approve(&self, decision: Decision<'_>) -> ToolResult {
        self.answer(decision, Answer::Approve, "").await
    }

    /// A person declined: the call never runs, and the model is told why, so
    /// that it does not ask again blindly. The denial is recorded, and every
    /// identical call of the conversation is denied for as long as the
    /// question lasts ([`Settings::approval_ttl`](crate::Settings::approval_ttl)),
    /// whatever it brings. A question about an unknown outcome is not denied
    /// but answered ([`answer_in_doubt`](Dispatcher::answer_in_doubt)): denying it is
    /// `CONFIRMATION_INVALID`, and nothing is done.
    pub async fn deny(&self, decision: Decision<'_>, reason: &str) -> ToolResult {
        let reason = crate::echo::bound(reason, crate::echo::MAX_NOTE_BYTES);
        self.answer(decision, Answer::Deny, reason.trim()).await
    }

    /// A person answered a question about an unknown outcome (an `IN_DOUBT`
    /// answer's `question_id`): `happened`, the earlier attempt took
    /// effect, and the call is answered (and replayed from then on) as done,
    /// with nothing run; not `happened`, it did not, and the call runs once
    /// more under its key, its check and policy re-run first. Only a person
    /// answers it: an approval question is `CONFIRMATION_INVALID` here, and
    /// nothing is done.
    pub async fn answer_in_doubt(&self, decision: Decision<'_>, happened: bool) -> ToolResult {
        let answer = if happened {
            Answer::Happened
        } else {
            Answer::NotHappened
        };
        self.answer(decision, answer, "").await
    }

    /// The earlier name of [`answer_in_doubt`](Dispatcher::answer_in_doubt),
    /// which it calls.
    #[deprecated(note = "renamed to `answer_in_doubt`")]
    pub async fn settle(&self, decision: Decision<'_>, happened: bool) -> ToolResult {
        self.answer_in_doubt(decision, happened).await
    }

    /// The one way to wait for a person and carry out what they decided:
    /// waits until the question `id`, which `call` was answered with, is no
    /// longer open (woken by the store where it can be) or until `until_ms`,
    /// then answers what came of the call, as its [state](crate::life::QuestionState)
    /// says: a decision not carried out yet is carried out now, by `call`
    /// with the id (it runs once, edited, or is denied); one carried out
    /// elsewhere (another replica, a task, the host) is answered as it came
    /// (`replayed: true`), or joined while it runs; an expired question is
    /// `CONFIRMATION_EXPIRED`. Still open at `until_ms`, the answer is the
    /// question again (`CONFIRMATION_REQUIRED` with the same id, and the
    /// signatures it has; `IN_DOUBT` for a question about an unknown
    /// outcome), and nothing is taken: the host's bringing the id is never
    /// mistaken for an approval. But a call that ran meanwhile without the
    /// question (the host's `confirmed`) is answered as it came. Never
    /// `CONFIRMATION_REQUIRED` for a question that was decided or a call
    /// that ran, and never a second run.
    pub async fn wait_for_decision(&self, call: Call<'_>, id: &str, until_ms: u64) -> ToolResult {
        if let Ok(Some(entry)) = crate::life::wait(&self.stages.store, id, until_ms).await
            && entry.state(now_ms()).is_open()
        {
            // What the call's key holds decides before the question does: a
            // dry run of the identical call runs nothing, asks nobody, and
            // answers a completed call with what came of it.
            if let Some(came) = self.what_came_of(call).await {
                return came;
            }
            let tool = entry.approval.tool.clone();
            return self.stages.asked(&tool, &entry).await;
        }
        // Decided, carried out, expired, gone, or the store failed: the
        // call with the id is answered as the question stands.
        self.execute(call.approval(id)).await
    }

    /// Records `answer` as the decision on the question `decision` names
    /// (as [`life`] allows it), takes the question, carries out what is
    /// recorded on it, and audits the decision.
    async fn answer(&self, decision: Decision<'_>, answer: Answer<'_>, note: &str) -> ToolResult {
        let session = crate::echo::bound(decision.session, crate::echo::MAX_ID_BYTES);
        let decision = Decision {
            session: &session,
            ..decision
        };
        let caller = decision.caller.unwrap_or(&self.caller);
        let recorded = self.stages.record(&decision, caller, &answer, note).await;
        self.decide(decision, caller, recorded, |pending| async move {
            self.carry_out_decided(&decision, caller, pending, &answer, note)
                .await
        })
        .await
    }

    /// What a decision recorded on a question comes to: an approval runs
    /// the call (edited, if edited); a denial is `CONFIRMATION_DENIED` with
    /// its note; of a question about an unknown outcome, "it did not
    /// happen" runs it once more and "it happened" answers it as done.
    /// `answer` stands in for a decision the store does not keep.
    async fn carry_out_decided(
        &self,
        decision: &Decision<'_>,
        caller: &Caller,
        pending: PendingApproval,
        answer: &Answer<'_>,
        note: &str,
    ) -> Stage<ToolResult> {
        let (verdict, note) = match &pending.decision {
            Some(recorded) => (Verdict::of(pending.kind(), recorded), recorded.note.clone()),
            None => (answer.verdict(), note.to_owned()),
        };
        match verdict {
            Verdict::Happened => self.happened_by_person(decision, caller, &pending).await,
            Verdict::Deny => Err(self.stages.denied(pending.tool.clone(), &note)),
            _ => self.approved(decision, caller, pending).await,
        }
    }

    /// Takes the approval, runs `then` on it, and audits the decision.
    /// `recorded` is what recording the decision came to: a refusal is the
    /// answer, and nothing is taken.
    async fn decide<'d, F, Fut>(
        &'d self,
        decision: Decision<'d>,
        caller: &'d Caller,
        recorded: Stage<()>,
        then: F,
    ) -> ToolResult
    where
        F: FnOnce(PendingApproval) -> Fut,
        Fut: std::future::Future<Output = Stage<ToolResult>>,
    {
        let started = Instant::now();
        let at_ms = crate::store::now_ms();
        let span = call_span(
            decision.tool,
            decision.tool.and_then(|tool| self.registry.get(tool)),
            None,
        );
        let binding = decision.binding(caller);
        let tool_hint = decision.tool.unwrap_or(UNKNOWN_APPROVAL_TOOL);
        let about_id = Details::approval(decision.id);
        let (pending, result) = async {
            if let Err(refused) = recorded {
                return (None, refused);
            }
            match self
                .stages
                .store
                .take_approval(&ApprovalUse {
                    id: decision.id,
                    binding: &binding,
                    now_ms: now_ms(),
                })
                .await
            {
                Err(error) => (None, self.stages.store_unavailable(tool_hint, &error)),
                Ok(TakeApproval::Taken(pending)) => {
                    // The decision may not name the tool; the approval does.
                    span.record("gen_ai.tool.name", pending.tool.as_str());
                    if span.has_field("otel.name") {
                        span.record("otel.name", format!("execute_tool {}", pending.tool));
                    }
                    if let Some(spec) = self.registry.get(&pending.tool) {
                        span.record("gen_ai.tool.description", spec.description());
                    }
                    let result = match then(pending.clone()).await {
                        Ok(result) | Err(result) => result,
                    };
                    // (An undecided question the host approved by its id
                    // keeps nothing: the store ignores both.)
                    self.stages.settle_or_give_back(decision.id, &result).await;
                    (Some(pending), result)
                }
                Ok(TakeApproval::Expired) => (
                    None,
                    self.stages.fail_with(
                        Failure::ConfirmationExpired,
                        tool_hint.to_owned(),
                        &about_id,
                        Map::new(),
                    ),
                ),
                Ok(_) => (
                    None,
                    self.stages
                        .taken_elsewhere(&decision, &binding, tool_hint)
                        .await,
                ),
            }
        }
        .instrument(span.clone())
        .await;
        // "Expired" or "needs approval" is false of a call that ran without
        // its question (the host's `confirmed`, another replica): what its
        // key holds decides, as for a wait.
        let result = match result.code {
            Code::ConfirmationExpired | Code::ConfirmationRequired
                if pending.is_none() && !decision.key_from_approval =>
            {
                self.ran_without_it(&decision, caller)
                    .instrument(span.clone())
                    .await
                    .unwrap_or(result)
            }
            _ => result,
        };
        let called = super::audited::Called {
            session: decision.session,
            caller,
            step: 0,
            started,
            at_ms,
        };
        self.audit_decision(called, decision.by, pending.as_ref(), &result, &span);
        result
    }

    /// The audit record of a decision `by` a person: of the call it carried
    /// out (its tool, step and arguments) when it took the question, else
    /// of the answer's tool alone.
    fn audit_decision(
        &self,
        mut called: super::audited::Called<'_>,
        by: &str,
        pending: Option<&PendingApproval>,
        result: &ToolResult,
        span: &tracing::Span,
    ) {
        let (tool, arguments) = match pending {
            Some(p) => {
                called.step = p.step;
                let spec = self.registry.get(&p.tool);
                let arguments = crate::tool::audit_text(spec, Arguments::Parsed(&p.arguments));
                (p.tool.clone(), arguments)
            }
            None => (result.tool.to_string(), String::new()),
        };
        let mut record = called.ended(tool, arguments, result);
        record.confirmed = pending.is_some() && result.code != Code::ConfirmationDenied;
        record.approved_by = Some(by.to_owned());
        super::audited::hand(&*self.audit, record, span);
    }
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// What came of the call an approval question asked about, when that
    /// call ran without the question: its answer, replayed, read by a dry
    /// run of the identical call (which runs nothing, asks nobody and takes
    /// no step). `None` while the call has not run, and for a question that
    /// is not this decision's to read (another conversation, caller or
    /// tool) or is about an unknown outcome, whose answer is a person's.
    async fn ran_without_it(&self, decision: &Decision<'_>, caller: &Caller) -> Option<ToolResult> {
        let entry = self.stages.store.approval(decision.id).await.ok()??;
        let question = &entry.approval;
        let binding = decision.binding(caller);
        if question.kind() != QuestionKind::Approval || !binding.matches(question) {
            return None;
        }
        let call = Call::new(&question.tool, Arguments::Parsed(&question.arguments))
            .session(&question.session)
            .caller(caller);
        self.what_came_of(call).await
    }

    /// What came of `call` if it completed, read from its key by a dry run
    /// (nothing runs, nobody is asked, no step is taken, nothing is
    /// audited: the wait's or the host's answer is): its answer, replayed;
    /// `None` otherwise. What the wait and the host's answers
    /// read before they say a question is open or expired.
    async fn what_came_of(&self, call: Call<'_>) -> Option<ToolResult> {
        let looked = self
            .execute(Call {
                look: true,
                ..call.dry_run(true)
            })
            .await;
        (looked.replayed && looked.ok).then_some(looked)
    }
}

impl<St: Store> Stages<St> {
    /// Records the host's decision in the store, as [`life::decide`] allows
    /// it, in every mode (the first decision stays the one: a decision
    /// someone recorded first is carried out instead). An answer the
    /// question does not take is the answer (`CONFIRMATION_INVALID`,
    /// saying why), and nothing is done; an unknown question is left to the
    /// take, which refuses it the same way.
    async fn record(
        &self,
        decision: &Decision<'_>,
        caller: &Caller,
        answer: &Answer<'_>,
        note: &str,
    ) -> Stage<()> {
        let binding = decision.binding(caller);
        let answerer = match decision.client {
            Some(allowed_here) => Answerer::Client {
                caller: caller.id(),
                session: decision.session,
                by: decision.by,
                allowed_here,
            },
            None => Answerer::Person(decision.by),
        };
        let tool = decision.tool.unwrap_or(UNKNOWN_APPROVAL_TOOL);
        match life::decide(
            &self.store,
            decision.id,
            Some(&binding),
            &answerer,
            answer,
            note,
            life::Moment::new(now_ms(), self.settings.denial_ttl),
        )
        .await
        {
            // One signature of several: the call waits for the others.
            Ok(life::Decided::Signed { signatures, needed }) => {
                let mut data = Map::new();
                data.insert("signatures".into(), Value::from(signatures));
                data.insert("needed".into(), Value::from(needed));
                Err(self.waiting_on(tool, decision.id, data))
            }
            Ok(_) | Err(Refusal::Closed | Refusal::Unknown | Refusal::Expired) => Ok(()),
            Err(Refusal::Store(error)) => Err(self.store_unavailable(tool, &error)),
            Err(refusal) => {
                let why = refusal.to_string();
                Err(self.fail_with(
                    Failure::AnswerRefused,
                    tool.to_owned(),
                    &Details {
                        detail: Some(&why),
                        ..Details::approval(decision.id)
                    },
                    Map::new(),
                ))
            }
        }
    }

    /// The answer to a decision on a question that could not be taken
    /// because a call took it first (two replicas, the model's retry): what
    /// came of that call, replayed, or `CALL_IN_PROGRESS` while it runs;
    /// anything else is `CONFIRMATION_INVALID`. Never "nothing was done" for
    /// a call that ran.
    async fn taken_elsewhere(
        &self,
        decision: &Decision<'_>,
        binding: &Binding<'_>,
        tool: &str,
    ) -> ToolResult {
        let entry = match self.store.approval(decision.id).await {
            Ok(entry) => entry,
            Err(error) => return self.store_unavailable(tool, &error),
        };
        let now = now_ms();
        match entry
            .filter(|entry| binding.matches(&entry.approval))
            .map(|entry| {
                let tool = entry.approval.tool.clone();
                (entry.state(now), tool)
            }) {
            Some((QuestionState::Done(_, came), tool)) => match came.answer {
                Some(mut answer) => {
                    answer.replayed = true;
                    answer
                }
                None => self.fail(Failure::CallInProgress, tool),
            },
            Some((QuestionState::Running(_), tool)) => self.fail(Failure::CallInProgress, tool),
            _ => self.fail_with(
                Failure::ConfirmationInvalid,
                tool.to_owned(),
                &Details::approval(decision.id),
                Map::new(),
            ),
        }
    }

    /// The model's arguments a pending approval keeps, as an object, or
    /// `CONFIRMATION_INVALID` (naming the approval) for anything else.
    pub(super) fn pending_arguments<'p>(
        &self,
        id: &str,
        pending: &'p PendingApproval,
    ) -> Stage<&'p Map<String, Value>> {
        match &pending.arguments {
            Value::Object(object) => Ok(object),
            _ => Err(self.fail_with(
                Failure::ConfirmationInvalid,
                pending.tool.clone(),
                &Details::approval(id),
                Map::new(),
            )),
        }
    }
}
