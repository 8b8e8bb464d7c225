//! The question that asks a person to approve a call (elicitation): its
//! form, asking it with `elicitation/create`, and carrying out the answer,
//! there or in the retry that brings it (`input_required`).

use std::any::Any;

use rmcp::model::{
    CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext, RoleServer, ServiceError};
use serde_json::Value;
use toolcall_core::life::{self, Answer, Answerer, Refusal};
use toolcall_core::provenance::describe;
use toolcall_core::store::{Store, TaintSource, now_ms};
use toolcall_core::{Arguments, Code, Decision, ToolResult};

use super::McpServer;

/// Who the audit records as the approver of a decision a person took
/// through MCP (an answer to an approval question).
pub(super) const APPROVER: &str = "mcp-elicitation";

/// Who the audit records as the decider when no person answered: the server
/// denied the call because the question timed out or the client cancelled it.
const SERVER: &str = "mcp-server";

/// The key of the approval question in an `input_required` result.
pub(super) const APPROVAL_INPUT: &str = "approval";

/// How the `requestState` of an approval question starts; the confirmation
/// id follows.
pub(super) const APPROVAL_STATE: &str = "toolcall-approval:";

/// The property of the approval form that says yes.
const APPROVE_FIELD: &str = "approve";

/// What `data.reason` says when untrusted output taints a call.
pub(super) const UNTRUSTED_CONTEXT: &str = "untrusted_context";

impl<S: Any + Send + Sync, St: Store> McpServer<S, St> {
    /// Asks the person with an `elicitation/create` request (sessions opened
    /// with `initialize`), waiting at most the approval's lifetime, and
    /// decides the pending call `id` as they answer.
    pub(super) async fn ask(
        &self,
        id: &str,
        session: &str,
        tool: &str,
        question: ElicitRequestParams,
        asked: &ToolResult,
        context: &RequestContext<RoleServer>,
    ) -> ToolResult {
        // The approval expires after `approval_ttl`: an answer after that
        // could not run the call anyway.
        let ttl = self.dispatcher.settings().approval_ttl;
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(question));
        let sent = context
            .peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(ttl))
            .await;
        let handle = match sent {
            Ok(handle) => handle,
            Err(error) => {
                // Nothing ran; the approval stays pending until it expires.
                tracing::warn!(tool, %error, "asking the person through MCP failed");
                return asked.clone();
            }
        };
        let request_id = handle.id.clone();
        let answer = tokio::select! {
            answer = handle.await_response() => answer,
            () = context.ct.cancelled() => {
                // The client withdrew the call (or went away): withdraw the
                // question, and deny the call so that a late answer cannot
                // run what nobody waits for any more.
                let cancel = CancelledNotificationParam::new(
                    Some(request_id),
                    Some("the tool call was cancelled".to_owned()),
                );
                if let Err(error) = context.peer.notify_cancelled(cancel).await {
                    tracing::debug!(tool, %error, "could not withdraw the approval question");
                }
                tracing::info!(tool, "the tool call was cancelled while a person was asked");
                let decision = self.decision(id, session, tool, SERVER);
                return self
                    .dispatcher
                    .deny(decision, "the MCP client cancelled the call before a person answered")
                    .await;
            }
        };
        match answer {
            Ok(ClientResult::ElicitResult(answer)) => {
                let decision = self.decision(id, session, tool, APPROVER);
                if said_yes(&answer) {
                    tracing::info!(tool, "a person approved the call through MCP");
                    self.dispatcher.approve(decision).await
                } else {
                    self.deny_answer(decision, tool, &answer).await
                }
            }
            Err(ServiceError::Timeout { .. }) => {
                let decision = self.decision(id, session, tool, SERVER);
                self.dispatcher
                    .deny(decision, "nobody answered the approval request in time")
                    .await
            }
            Ok(other) => {
                tracing::warn!(
                    tool,
                    ?other,
                    "the MCP client answered the approval question with something else"
                );
                asked.clone()
            }
            Err(error) => {
                // Nothing ran; the approval stays pending until it expires.
                tracing::warn!(tool, %error, "asking the person through MCP failed");
                asked.clone()
            }
        }
    }

    /// Where the untrusted output that is why the pending call `id` asks
    /// (`result`'s `data.reason`) came from, as its question keeps it. None
    /// for another reason; none either when the store cannot say: the
    /// question still asks, showing less.
    pub(super) async fn provenance(&self, id: &str, result: &ToolResult) -> Vec<TaintSource> {
        if result.data.get("reason").and_then(Value::as_str) != Some(UNTRUSTED_CONTEXT) {
            return Vec::new();
        }
        match self.dispatcher.store().approval(id).await {
            Ok(entry) => entry
                .map(|entry| entry.approval.provenance)
                .unwrap_or_default(),
            Err(error) => {
                tracing::warn!(approval = id, %error, "could not read where the taint came from");
                Vec::new()
            }
        }
    }

    /// The result of a retry that answers a question this server asked: on
    /// yes, the call runs through the whole pipeline with the approval
    /// (which checks that it was given for exactly these arguments, and uses
    /// it up); otherwise it is denied. In inbox mode (asked only with
    /// [`Options::elicitation_approves`](crate::Options::elicitation_approves))
    /// the yes is recorded in the store first, as the person's decision.
    pub(super) async fn answered(
        &self,
        id: &str,
        session: &str,
        tool: &str,
        raw: &str,
        call_id: &str,
        answer: &ElicitResult,
    ) -> ToolResult {
        if !said_yes(answer) {
            return self
                .deny_answer(self.decision(id, session, tool, APPROVER), tool, answer)
                .await;
        }
        tracing::info!(tool, "a person approved the call through MCP");
        // The client's yes is recorded as the decision, where the question
        // takes it ([`life`]); whatever the store holds then (decided first
        // by someone else, say), the call below carries it out.
        let requester = self.requester();
        let binding = self.binding(session, tool, None, requester.as_deref());
        let answerer = Answerer::Client {
            caller: self.caller.id(),
            session,
            by: APPROVER,
            allowed_here: self.clients_decide(),
        };
        match life::decide(
            self.dispatcher.store(),
            id,
            Some(&binding),
            &answerer,
            &Answer::Approve,
            "",
            life::Moment::new(now_ms(), self.dispatcher.settings().denial_ttl),
        )
        .await
        {
            Ok(_) | Err(Refusal::Closed) => {}
            Err(refusal) => {
                tracing::info!(tool, approval = id, %refusal, "the client's answer was not taken");
                return refused(tool, id, &refusal);
            }
        }
        self.dispatcher
            .execute(
                self.pipeline_call(tool, Arguments::Raw(raw), session, call_id)
                    .approval(id),
            )
            .await
    }

    /// Denies the pending call as the person's answer (not a yes) says. A
    /// denial is final: every identical call of the conversation is denied
    /// while the question lasts. A dismissal (the person closed the question
    /// without choosing) decides nothing: the question stays open, nothing
    /// ran, and the next identical call asks it again.
    async fn deny_answer(
        &self,
        decision: Decision<'_>,
        tool: &str,
        answer: &ElicitResult,
    ) -> ToolResult {
        let reason = match answer.action {
            ElicitationAction::Decline => "the person declined it",
            ElicitationAction::Cancel => {
                tracing::info!(tool, "the person dismissed the approval question");
                return dismissed(tool, decision.id());
            }
            _ => "the person did not approve it",
        };
        tracing::info!(tool, reason, "the call was not approved");
        self.dispatcher.deny(decision, reason).await
    }

    /// A decision on the pending call `id` asked in `session`: the answer
    /// of this server's client, taken where the question and this server
    /// let clients decide.
    fn decision<'a>(
        &'a self,
        id: &'a str,
        session: &'a str,
        tool: &'a str,
        by: &'a str,
    ) -> Decision<'a> {
        Decision::new(id, session)
            .caller(&self.caller)
            .tool(tool)
            .by(by)
            .by_client(self.clients_decide())
    }
}

/// The answer when the person dismissed the question without deciding:
/// still `CONFIRMATION_REQUIRED` under the same id, nothing ran.
fn dismissed(tool: &str, id: &str) -> ToolResult {
    let mut result = ToolResult::failure(
        tool.to_owned(),
        Code::ConfirmationRequired,
        format!(
            "The person dismissed the approval question of {tool} without deciding; nothing \
             ran. Do not call it again unless the user asks for it: the same question is \
             asked again."
        ),
    );
    result.question_id = Some(id.to_owned());
    result
}

/// The answer to a client's answer the question does not take: nothing was
/// done, and why.
pub(super) fn refused(tool: &str, id: &str, refusal: &Refusal) -> ToolResult {
    ToolResult::failure(
        tool.to_owned(),
        Code::ConfirmationInvalid,
        format!("The question {id} does not take this answer: {refusal}. Nothing was done."),
    )
    .with_data("question_id", id.to_owned())
}

/// Whether the person accepted and said yes.
pub(super) fn said_yes(answer: &ElicitResult) -> bool {
    answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|content| content.get(APPROVE_FIELD))
            .and_then(Value::as_bool)
            == Some(true)
}

/// Why the call asks a person beyond its tool's risk, as the result's
/// `data.reason` (and `data.tainted`) say it: a paragraph of the question,
/// or nothing.
fn why_asked(result: &ToolResult, provenance: &[TaintSource]) -> String {
    if result.data.get("reason").and_then(Value::as_str) != Some(UNTRUSTED_CONTEXT) {
        return String::new();
    }
    let fields: Vec<&str> = result
        .data
        .get("tainted")
        .and_then(Value::as_array)
        .map(|fields| fields.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut why = String::from(
        "Asked because this conversation read untrusted output (text written by others)",
    );
    if !fields.is_empty() {
        why.push_str("; these arguments carry values read there: ");
        why.push_str(&fields.join(", "));
    }
    why.push_str(". Make sure it is what you want, not what that text told the assistant to do.");
    // What the text said, made visible (it can neither forge a line of
    // this message nor read backwards), beside the call.
    let said = describe(provenance);
    if !said.is_empty() {
        why.push_str("\n\n");
        why.push_str(&said);
    }
    why.push_str("\n\n");
    why
}

/// The form that asks a person to approve the pending call of a
/// `CONFIRMATION_REQUIRED` result: its tool and exact arguments, why it
/// asks when untrusted output tainted it (and, from `provenance`, which
/// output and what it said), and one yes-or-no field.
pub(super) fn approval_question(
    result: &ToolResult,
    provenance: &[TaintSource],
) -> Result<ElicitRequestParams, String> {
    let tool = &result.tool;
    let pending = result.data.get("pending").cloned().unwrap_or(Value::Null);
    let arguments = serde_json::to_string_pretty(&pending).map_err(|error| error.to_string())?;
    let why = why_asked(result, provenance);
    let message = format!(
        "The assistant wants to call {tool} with exactly these arguments:\n\n{arguments}\n\n\
         {why}Approve this call? It runs once, as shown, only if you approve."
    );
    let schema = ElicitationSchema::builder()
        .required_bool_property(APPROVE_FIELD, |field| {
            field
                .title("Approve")
                .description(format!("Run {tool} with the arguments shown"))
        })
        .build()?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}
