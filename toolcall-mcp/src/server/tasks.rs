//! Durable tasks (the `io.modelcontextprotocol/tasks` extension): a call
//! that waits for a person is answered with a task whose whole state lives
//! in the store, in the call's approval. `tasks/get` reads it there, on
//! any replica and after any restart; a decision (the client's answer in
//! `tasks/update`, or a person's in the inbox) is carried out through the
//! pipeline by whichever replica sees it first, exactly once, and what came
//! of it is kept with the approval as the task's result.

use std::any::Any;

use rmcp::model::{
    CreateTaskResult, DetailedTask, ElicitRequest, ElicitResult, ErrorCode, InputRequest,
    InputRequests, InputResponses, JsonObject, Task, TaskPayload,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, model::TaskStatus};
use serde_json::{Map, Value};
use toolcall_core::__private::echo::cut;
use toolcall_core::life::{self, Answer, Answerer, QuestionKind, QuestionState, Refusal, Verdict};
use toolcall_core::store::{
    ApprovalEntry, ApprovalResult, Binding, RecordedOutcome, Requester, now_ms,
};
use toolcall_core::store::{ApprovalLookup, Store};
use toolcall_core::{Arguments, Code, Principal, ToolResult};

use super::question::{APPROVAL_INPUT, APPROVER, approval_question, said_yes};
use super::{McpServer, to_mcp};

/// Who the store records as the decider of a task its client cancelled
/// before a person decided: the call is denied, and the task reads
/// `cancelled`.
pub(super) const CANCELLED_BY: &str = "mcp-task-cancelled";

/// How often a client should poll a task, in milliseconds.
const POLL_INTERVAL_MS: u64 = 1_000;

/// The longest task id echoed in an error.
const MAX_TASK_ID_ECHO: usize = 128;

impl<S: Any + Send + Sync, St: Store> McpServer<S, St> {
    /// Whether this request may be answered with a task: the server offers
    /// tasks ([`Options::tasks`](crate::Options::tasks)) and the client
    /// declared the extension.
    pub(super) fn tasks_for(&self, context: &RequestContext<RoleServer>) -> bool {
        self.options.tasks
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks())
    }

    /// The task a call that waits for the person's decision on the pending
    /// approval `id` is answered with: its id is the approval's.
    pub(super) async fn created_task(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<CreateTaskResult, ErrorData> {
        let detailed = self.task(id, context).await?;
        tracing::info!(task = id, status = ?detailed.status(), "the call waits for a person as a task");
        Ok(CreateTaskResult::new(detailed.task))
    }

    /// `tasks/get`: the task's state as the store holds it. A decision not
    /// carried out yet is carried out first, and so is one a call took and
    /// left without an answer (its process died, say), which then answers
    /// what came of the call, whichever replica ran it: the task completes
    /// on whichever replica the client asks, even if the one that made it
    /// is gone.
    pub(super) async fn task(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<DetailedTask, ErrorData> {
        let mut entry = self.task_entry(id).await?;
        let mut in_doubt = false;
        let mut held = None;
        match entry.state(now_ms()) {
            QuestionState::Decided(_) => {
                let answer = self.carry_out_task(&entry).await;
                // Not carried out for now (the operators stopped it, or
                // another call holds its resource): the decision was given
                // back, and the task says why while it waits.
                if matches!(answer.code, Code::Stopped | Code::ResourceBusy) {
                    held = Some(answer.message);
                }
                entry = self.task_entry(id).await?;
            }
            QuestionState::Running(_) => {
                in_doubt = self.look_at_running(&entry).await;
                entry = self.task_entry(id).await?;
            }
            _ => {}
        }
        Ok(self.detailed(&entry, context, in_doubt, held.as_deref()))
    }

    /// A task whose approval a call took and left without an answer: where
    /// its call stands, on any replica ([`Dispatcher::recorded`](toolcall_core::Dispatcher::recorded)).
    /// Completed, its answer is the task's; in flight, it runs; never run
    /// to the end (its process died before its claim), it is carried out
    /// now, under its key, which runs it at most once; in doubt, a person
    /// settles it (`true`), and a settlement that says it did not happen is
    /// carried out.
    async fn look_at_running(&self, entry: &ApprovalEntry) -> bool {
        let approval = &entry.approval;
        // The call the decision ran: the person's edit, when they edited it.
        let arguments = approval
            .decision
            .as_ref()
            .and_then(|decision| decision.edited_arguments.as_ref())
            .unwrap_or(&approval.arguments);
        let recorded = self
            .dispatcher
            .recorded(&approval.tool, arguments, &approval.session, &self.caller)
            .await;
        match recorded {
            Ok(Some(RecordedOutcome::Completed(stored))) => {
                // Answered through the pipeline, as a replay of the key: the
                // process that ran it may have died before its audit record,
                // and the pipeline's answer says what the stored result does
                // not (a person's edit: `data.edited_by_person`).
                let replayed = self.carry_out_task(entry).await;
                let answer = if replayed.ok == stored.ok && replayed.code == stored.code {
                    replayed
                } else {
                    *stored
                };
                let came = ApprovalResult {
                    ok: answer.ok,
                    code: answer.code.as_str().to_owned(),
                    replayed: true,
                    at_ms: now_ms(),
                    answer: Some(answer),
                };
                if let Err(error) = self
                    .dispatcher
                    .store()
                    .settle_approval(&approval.id, &came)
                    .await
                {
                    tracing::warn!(task = approval.id, %error, "what came of a task could not be recorded");
                }
                false
            }
            Ok(None) => {
                let _ = self.carry_out_task(entry).await;
                false
            }
            Ok(Some(RecordedOutcome::InDoubt)) => {
                let binding = Binding {
                    session: &approval.session,
                    caller: &approval.caller,
                    tool: Some(&approval.tool),
                    digest: Some(&approval.digest),
                    requester: Requester::Anyone,
                };
                let settled = self
                    .dispatcher
                    .store()
                    .find_approval(&ApprovalLookup {
                        binding: &binding,
                        reason: Some(toolcall_core::life::IN_DOUBT),
                        now_ms: now_ms(),
                    })
                    .await;
                match settled {
                    Ok(Some(settlement))
                        if matches!(settlement.state(now_ms()), QuestionState::Decided(_)) =>
                    {
                        self.carry_out_task(&settlement).await;
                        false
                    }
                    // A person is asked already.
                    Ok(Some(_)) | Err(_) => true,
                    // Nobody was asked: the call's holder died with its
                    // outcome unknown (its lease ran out). The pipeline
                    // settles it as it settles any call in doubt: under its
                    // key again where the backend honours it, by its
                    // `reconcile`, or by asking a person, once.
                    Ok(None) => {
                        self.carry_out_task(entry).await;
                        !matches!(
                            self.dispatcher
                                .recorded(
                                    &approval.tool,
                                    arguments,
                                    &approval.session,
                                    &self.caller,
                                )
                                .await,
                            Ok(Some(RecordedOutcome::Completed(_)))
                        )
                    }
                }
            }
            Ok(_) => false,
            Err(answer) => {
                tracing::warn!(task = approval.id, code = %answer.code, "could not read where a task's call stands");
                false
            }
        }
    }

    /// `tasks/update`: the client's answer to the approval question of an
    /// open task, recorded as the decision and carried out, where the
    /// question takes the client's answer (the asking process let clients
    /// decide, and so does this one); a question about an unknown outcome
    /// never does.
    pub(super) async fn update_task(
        &self,
        id: &str,
        responses: &InputResponses,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let entry = self.task_entry(id).await?;
        if !entry.state(now_ms()).is_open() {
            return Err(ErrorData::invalid_params(
                format!(
                    "task {} asks for no input: it was decided, ran or expired; read it with \
                     tasks/get",
                    cut(id, MAX_TASK_ID_ECHO)
                ),
                None,
            ));
        }
        if entry.approval.kind() == QuestionKind::InDoubt || !self.elicits(context) {
            let refusal = match entry.approval.kind() {
                QuestionKind::InDoubt => Refusal::NotPermitted(QuestionKind::InDoubt),
                _ => Refusal::NotPermitted(QuestionKind::Approval),
            };
            return Err(self.task_refused(id, &refusal));
        }
        let answer = responses
            .get(APPROVAL_INPUT)
            .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok())
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!(
                        "inputResponses must answer `{APPROVAL_INPUT}` with an elicitation \
                         result"
                    ),
                    None,
                )
            })?;
        let yes = said_yes(&answer);
        let (answer, note) = if yes {
            (Answer::Approve, "")
        } else {
            (Answer::Deny, "the person did not approve it")
        };
        self.decide_task(&entry, &answer, note, APPROVER).await
    }

    /// `tasks/cancel`: a task still waiting for the client's answer is
    /// denied (nothing ran, nothing will), and reads `cancelled` from then
    /// on. A task whose question only a person answers (the asking process
    /// or this one decides in the inbox, or it asks whether an earlier
    /// attempt took effect) cannot be cancelled by the client: `-32602`,
    /// nothing changed. A task already decided, running or done is left as
    /// it is: what was decided stands, and a call that runs is never cut
    /// halfway.
    pub(super) async fn cancel_task(&self, id: &str) -> Result<(), ErrorData> {
        let entry = self.task_entry(id).await?;
        if !entry.state(now_ms()).is_open() {
            tracing::debug!(
                task = id,
                "a cancel for a task past its question changes nothing"
            );
            return Ok(());
        }
        self.decide_task(
            &entry,
            &Answer::Deny,
            "the MCP client cancelled the task before a person decided",
            CANCELLED_BY,
        )
        .await
    }

    /// The approval behind the task `id`, if it is this server's caller's,
    /// in one of its conversations ([`McpServer::owns_session`]), made by
    /// the principal behind it (the person or client a token names); any
    /// other (unknown, purged, another caller's, another conversation's or
    /// another principal's) is the same error, so that a task id, its
    /// arguments and its cancel tell and give nothing to anyone else.
    async fn task_entry(&self, id: &str) -> Result<ApprovalEntry, ErrorData> {
        let unknown = || {
            ErrorData::invalid_params(
                format!("no task {} for this caller", cut(id, MAX_TASK_ID_ECHO)),
                None,
            )
        };
        match self.dispatcher.store().approval(id).await {
            Ok(Some(entry))
                if entry.approval.caller == self.caller.id()
                    && self.owns_session(&entry.approval.session)
                    && entry.approval.principal.as_ref().map(Principal::requester)
                        == self.caller.principal().map(Principal::requester) =>
            {
                Ok(entry)
            }
            Ok(_) => Err(unknown()),
            Err(error) => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("the store is unavailable ({error}); ask for the task again"),
                None,
            )),
        }
    }

    /// Records the client's answer on an open task, as [`life::decide`]
    /// takes it, then carries the decision out. Someone else may have
    /// decided first (the inbox, another replica): the call then carries
    /// out theirs. An answer the question does not take is the error.
    async fn decide_task(
        &self,
        entry: &ApprovalEntry,
        answer: &Answer<'_>,
        note: &str,
        by: &str,
    ) -> Result<(), ErrorData> {
        let id = entry.approval.id.as_str();
        let answerer = Answerer::Client {
            caller: self.caller.id(),
            session: &entry.approval.session,
            by,
            allowed_here: self.clients_decide(),
        };
        match life::decide(
            self.dispatcher.store(),
            id,
            None,
            &answerer,
            answer,
            note,
            life::Moment::new(now_ms(), self.dispatcher.settings().denial_ttl),
        )
        .await
        {
            Ok(_) | Err(Refusal::Closed) => {
                if let Ok(entry) = self.task_entry(id).await
                    && matches!(entry.state(now_ms()), QuestionState::Decided(_))
                {
                    self.carry_out_task(&entry).await;
                }
                Ok(())
            }
            Err(Refusal::Store(error)) => Err(ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("the store is unavailable ({error}); nothing was decided, try again"),
                None,
            )),
            Err(refusal) => Err(self.task_refused(id, &refusal)),
        }
    }

    /// The error for an answer a task's question does not take.
    fn task_refused(&self, id: &str, refusal: &Refusal) -> ErrorData {
        let why = match refusal {
            Refusal::Unknown => {
                return ErrorData::invalid_params(
                    format!("no task {} for this caller", cut(id, MAX_TASK_ID_ECHO)),
                    None,
                );
            }
            Refusal::NotPermitted(QuestionKind::Approval) => {
                "a person decides this call in the approval inbox, not the client; wait for the \
                 task with tasks/get"
                    .to_owned()
            }
            Refusal::NotPermitted(QuestionKind::InDoubt) | Refusal::WrongKind(_) => {
                "it asks whether an earlier attempt of the call took effect, which only a person \
                 answers (in the approval inbox); wait for the task with tasks/get"
                    .to_owned()
            }
            other => other.to_string(),
        };
        ErrorData::invalid_params(
            format!(
                "task {} does not take this answer: {why}",
                cut(id, MAX_TASK_ID_ECHO)
            ),
            None,
        )
    }

    /// Carries out the decision recorded on a task's question: the call is
    /// made again through the whole pipeline: with the approval, which it
    /// uses up at most once (so two replicas never both run it), or finds
    /// taken and answers what came of the call; or, for a question about an
    /// unknown outcome, as the call itself, which settles it as the person
    /// said. What came of it is kept with the question.
    async fn carry_out_task(&self, entry: &ApprovalEntry) -> ToolResult {
        let approval = &entry.approval;
        let call_id = format!("task:{}", approval.id);
        let call = self.pipeline_call(
            &approval.tool,
            Arguments::Parsed(&approval.arguments),
            &approval.session,
            &call_id,
        );
        let call = match approval.kind() {
            QuestionKind::InDoubt => call,
            _ => call.approval(&approval.id),
        };
        let answer = self.dispatcher.execute(call).await;
        tracing::info!(task = approval.id, code = %answer.code, "a task's decision was carried out");
        answer
    }

    /// The task as the client reads it, from its question's
    /// [state](ApprovalEntry::state). `outcome_unknown`: the call a
    /// decision ran is in doubt; `held`: why a decision waits to be carried
    /// out (the operators stopped it, a resource is held).
    fn detailed(
        &self,
        entry: &ApprovalEntry,
        context: &RequestContext<RoleServer>,
        outcome_unknown: bool,
        held: Option<&str>,
    ) -> DetailedTask {
        let approval = &entry.approval;
        let mut updated = approval
            .decision
            .as_ref()
            .map_or(approval.created_ms, |decision| decision.decided_ms);
        let in_doubt = approval.kind() == QuestionKind::InDoubt;
        let state = entry.state(now_ms());
        let payload = match &state {
            QuestionState::Open
                if !in_doubt && approval.answerers.client() && self.elicits(context) =>
            {
                match approval_question(&asked(entry), &approval.provenance) {
                    Ok(question) => {
                        let mut requests = InputRequests::new();
                        requests.insert(
                            APPROVAL_INPUT.to_owned(),
                            InputRequest::Elicitation(ElicitRequest::new(question)),
                        );
                        TaskPayload::InputRequired {
                            input_requests: requests,
                        }
                    }
                    Err(error) => {
                        tracing::warn!(task = approval.id, %error, "could not build the approval question");
                        TaskPayload::Working
                    }
                }
            }
            QuestionState::Done(verdict, came) => {
                updated = updated.max(came.at_ms);
                let cancelled = *verdict == Verdict::Deny
                    && approval
                        .decision
                        .as_ref()
                        .is_some_and(|decision| decision.by == CANCELLED_BY);
                if cancelled {
                    TaskPayload::Cancelled
                } else {
                    TaskPayload::Completed {
                        result: mcp_object(&answer_of(entry, came)),
                    }
                }
            }
            QuestionState::Expired => {
                updated = updated.max(approval.expires_ms);
                TaskPayload::Completed {
                    result: mcp_object(&expired(entry)),
                }
            }
            _ => TaskPayload::Working,
        };
        let message = match (&state, payload.status()) {
            (_, TaskStatus::InputRequired) => "waiting for a person to approve the call",
            (_, TaskStatus::Working) if outcome_unknown => {
                "whether the approved call took effect is unknown: waiting for a person to settle \
                 it in the approval inbox"
            }
            (_, TaskStatus::Working) if held.is_some() => held.unwrap_or_default(),
            (QuestionState::Running(_), TaskStatus::Working) => "the approved call is running",
            (QuestionState::Decided(_), TaskStatus::Working) => {
                "a decision was taken; the call is being carried out"
            }
            (_, TaskStatus::Working) if in_doubt => {
                "whether an earlier attempt took effect is unknown: waiting for a person to \
                 settle it in the approval inbox"
            }
            (_, TaskStatus::Working) => "waiting for a person's decision in the approval inbox",
            (_, TaskStatus::Cancelled) => "cancelled before a person decided; nothing ran",
            _ => "done",
        };
        // A question about an unknown outcome has no end: its task is kept
        // as long as the store keeps it.
        let ttl = if in_doubt {
            u64::try_from(i64::MAX).unwrap_or(u64::MAX)
        } else {
            approval.expires_ms.saturating_sub(approval.created_ms)
        };
        let task = Task::new(
            approval.id.clone(),
            payload.status(),
            rfc3339(approval.created_ms),
            rfc3339(updated),
        )
        .with_status_message(message)
        .with_ttl_ms(ttl)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
        DetailedTask::new(task, payload)
    }
}

/// The `CONFIRMATION_REQUIRED` answer the task's call got, as the approval
/// question is built from it.
fn asked(entry: &ApprovalEntry) -> ToolResult {
    let approval = &entry.approval;
    let mut asked = ToolResult::failure(
        approval.tool.clone(),
        Code::ConfirmationRequired,
        String::new(),
    )
    .with_data("pending", approval.arguments.clone());
    if let Some(reason) = &approval.reason {
        asked = asked.with_data("reason", reason.clone());
        if !approval.tainted.is_empty() {
            asked = asked.with_data("tainted", approval.tainted.clone());
        }
    }
    asked
}

/// What came of the task's call: the answer kept with the approval, or,
/// for a record written before answers were kept, one made of its code.
fn answer_of(entry: &ApprovalEntry, result: &ApprovalResult) -> ToolResult {
    if let Some(answer) = &result.answer {
        return answer.clone();
    }
    let tool = entry.approval.tool.clone();
    match serde_json::from_value::<Code>(Value::String(result.code.clone())) {
        _ if result.ok => ToolResult::success(tool, Map::new()),
        Ok(code) => ToolResult::failure(tool, code, String::new()),
        Err(_) => ToolResult::failure(
            tool,
            Code::InternalError,
            format!("The call ended with {}.", cut(&result.code, 64)),
        ),
    }
}

/// The answer of a task whose approval expired before a decision was
/// carried out: nothing ran.
fn expired(entry: &ApprovalEntry) -> ToolResult {
    ToolResult::failure(
        entry.approval.tool.clone(),
        Code::ConfirmationExpired,
        "The approval for this call expired before a decision was carried out; nothing ran. \
         Call the tool again to ask a person anew."
            .to_owned(),
    )
    .with_data("question_id", entry.approval.id.clone())
}

/// The MCP `CallToolResult` of `result`, as a JSON object.
fn mcp_object(result: &ToolResult) -> JsonObject {
    match serde_json::to_value(to_mcp(result)) {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

/// `ms` (since the Unix epoch) as an RFC 3339 UTC timestamp.
fn rfc3339(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|at| {
            at.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
}
