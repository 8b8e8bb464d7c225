//! The host's decisions on calls that wait for a person: approve (the call
//! runs once, its checks re-run first) or deny (it never runs).

use std::any::Any;
use std::time::Instant;

use serde_json::{Map, Value};
use tracing::Instrument as _;

use super::Approvals;
use super::Dispatcher;
use super::audited::call_span;
use super::execute::IN_DOUBT;
use super::messages::{Details, Failure};
use super::stages::{Stage, Stages};
use crate::parse::Arguments;
use crate::policy::Caller;
use crate::result::{Code, ToolResult};
use crate::store::{ApprovalDecision, Binding, PendingApproval, Store, TakeApproval, now_ms};

/// A person's decision on a pending approval, by its confirmation id.
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

    /// Who decided, for the audit record.
    pub fn by(mut self, person: &'a str) -> Self {
        self.by = person;
        self
    }

    /// Derive the idempotency key from this approval instead of the
    /// arguments: for domains where two identical actions are legitimate
    /// (two equal transfers, each approved), each approval runs once.
    pub fn key_from_approval(mut self, yes: bool) -> Self {
        self.key_from_approval = yes;
        self
    }
}

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// A person approved: the pending call runs, once. Its arguments are
    /// validated again and its business check and the caller's policy re-run
    /// against the current state first (much may change while a person
    /// reads). The result is the answer to the model's call.
    ///
    /// A decision already recorded in the store (a person's, in the inbox)
    /// is carried out as it is: a denial is `CONFIRMATION_DENIED`, edited
    /// arguments run in place of the model's. In [`Approvals::Inbox`] mode
    /// this decision is recorded in the store first.
    pub async fn approve(&self, decision: Decision<'_>) -> ToolResult {
        let session = crate::echo::bound(decision.session, crate::echo::MAX_ID_BYTES);
        let decision = Decision {
            session: &session,
            ..decision
        };
        let caller = decision.caller.unwrap_or(&self.caller);
        self.stages.record(&decision, caller, true, "").await;
        self.decide(decision, caller, |pending| async move {
            match &pending.decision {
                Some(recorded) if !recorded.approved => {
                    Err(self.stages.denied(pending.tool.clone(), &recorded.note))
                }
                _ => self.approved(&decision, caller, pending).await,
            }
        })
        .await
    }

    /// A person declined: the call never runs, and the model is told why, so
    /// that it does not ask again blindly.
    pub async fn deny(&self, decision: Decision<'_>, reason: &str) -> ToolResult {
        let session = crate::echo::bound(decision.session, crate::echo::MAX_ID_BYTES);
        let decision = Decision {
            session: &session,
            ..decision
        };
        let reason = crate::echo::bound(reason, crate::echo::MAX_NOTE_BYTES);
        let reason = reason.as_ref();
        let caller = decision.caller.unwrap_or(&self.caller);
        self.stages.record(&decision, caller, false, reason).await;
        self.decide(decision, caller, |pending| async move {
            if pending.reason.as_deref() == Some(IN_DOUBT) {
                // Of a question about an unknown outcome, a "no" says the
                // earlier attempt took effect.
                return self.happened_by_person(&decision, caller, &pending).await;
            }
            let reason = if reason.trim().is_empty() {
                "no reason given"
            } else {
                reason.trim()
            };
            Err(self.stages.fail_with(
                Failure::ConfirmationDenied,
                pending.tool.clone(),
                &Details::detail(reason),
                Map::new(),
            ))
        })
        .await
    }

    /// Takes the approval, runs `then` on it, and audits the decision.
    async fn decide<'d, F, Fut>(
        &'d self,
        decision: Decision<'d>,
        caller: &'d Caller,
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
        let binding = Binding {
            session: decision.session,
            caller: caller.id(),
            tool: decision.tool,
            digest: None,
        };
        let tool_hint = decision.tool.unwrap_or(UNKNOWN_APPROVAL_TOOL);
        let about_id = Details::approval(decision.id);
        let (pending, result) = async {
            match self
                .stages
                .store
                .take_approval(decision.id, &binding, now_ms())
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
                    if pending.decision.is_some() {
                        self.stages.settle(decision.id, &result).await;
                    }
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
                    self.stages.fail_with(
                        Failure::ConfirmationInvalid,
                        tool_hint.to_owned(),
                        &about_id,
                        Map::new(),
                    ),
                ),
            }
        }
        .instrument(span.clone())
        .await;
        let (tool, step, arguments) = match &pending {
            Some(p) => (
                p.tool.clone(),
                p.step,
                crate::tool::audit_text(
                    self.registry.get(&p.tool),
                    Arguments::Parsed(&p.arguments),
                ),
            ),
            None => (result.tool.to_string(), 0, String::new()),
        };
        let called = super::audited::Called {
            session: decision.session,
            caller,
            step,
            started,
            at_ms,
        };
        let mut record = called.ended(tool, arguments, &result);
        record.confirmed = pending.is_some() && result.code != Code::ConfirmationDenied;
        record.approved_by = Some(decision.by.to_owned());
        super::audited::hand(&*self.audit, record, &span);
        result
    }
}

impl<St: Store> Stages<St> {
    /// In inbox mode, the host's decision goes into the store first, like a
    /// person's in the inbox (the first decision stays the one).
    async fn record(&self, decision: &Decision<'_>, caller: &Caller, approved: bool, note: &str) {
        if self.settings.approvals != Approvals::Inbox {
            return;
        }
        let binding = Binding {
            session: decision.session,
            caller: caller.id(),
            tool: decision.tool,
            digest: None,
        };
        // Only an approval asked for this session and caller.
        let Ok(Some(entry)) = self.store.approval(decision.id).await else {
            return;
        };
        if !binding.matches(&entry.approval) {
            return;
        }
        let now = now_ms();
        let recorded = ApprovalDecision {
            approved,
            by: decision.by.to_owned(),
            note: note.to_owned(),
            edited_arguments: None,
            decided_ms: now,
        };
        if let Err(error) = self
            .store
            .decide_approval(decision.id, &recorded, now)
            .await
        {
            tracing::warn!(approval = decision.id, %error, "the host's decision could not be recorded");
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
