//! A call the model proposes, as the host hands it to the dispatcher.

#[cfg(doc)]
use super::{DispatcherBuilder, Settings};
use crate::parse::Arguments;
use crate::policy::Caller;

/// ```
/// use toolcall_core::Call;
///
/// let call = Call::new("refund_order", r#"{"order_id": "ORD-1001"}"#)
///     .session("conversation-42")
///     .confirmed(true)
///     .call_id("call_abc123");
/// assert_eq!(call.tool(), "refund_order");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    pub(super) tool: &'a str,
    pub(super) arguments: Arguments<'a>,
    /// The conversation, once named: by [`Call::session`], or by the
    /// dispatcher's default ([`Settings::default_session`]); empty until then.
    pub(super) session: &'a str,
    /// The conversation as the store counts its steps and keeps its taint:
    /// the session, scoped to the caller unless callers share conversations
    /// ([`Settings::callers_share_conversations`]); set once the call
    /// enters the pipeline.
    pub(super) scope: &'a str,
    pub(super) named: bool,
    pub(super) caller: Option<&'a Caller>,
    pub(super) confirmed: bool,
    pub(super) approval: Option<&'a str>,
    pub(super) call_id: Option<&'a str>,
    pub(super) dry_run: bool,
    pub(super) client_answers: bool,
    pub(super) alone: bool,
    /// A look the dispatcher takes for itself (what came of a call, for a
    /// wait or a host's answer): its answer is read, and it leaves no
    /// audit record of its own, since nobody made it.
    pub(super) look: bool,
}

impl<'a> Call<'a> {
    /// A call of `tool` with these arguments, by the dispatcher's default
    /// caller, not confirmed. It names no conversation yet: name one with
    /// [`session`](Call::session). A call that names none runs in the
    /// dispatcher's [`default_session`](DispatcherBuilder::default_session)
    /// when it has one, and is refused (`CONVERSATION_REQUIRED`, nothing
    /// run, no step taken) when it has none: two users' calls never share a
    /// conversation, its step budget or its replays, by accident.
    pub fn new(tool: &'a str, arguments: impl Into<Arguments<'a>>) -> Self {
        Call {
            tool,
            arguments: arguments.into(),
            session: "",
            scope: "",
            named: false,
            caller: None,
            confirmed: false,
            approval: None,
            call_id: None,
            dry_run: false,
            client_answers: false,
            alone: false,
            look: false,
        }
    }

    /// The conversation this call belongs to: the scope of the step budget,
    /// the loop guard, the idempotency key, the taint of untrusted output
    /// and the approvals a person gives. Two users, two conversations. It is
    /// the caller's: another caller naming the same conversation has its
    /// own replays, counts and questions, and (unless
    /// [`Settings::callers_share_conversations`]) its own step budget and
    /// taint.
    pub fn session(mut self, session: &'a str) -> Self {
        self.session = session;
        self.named = true;
        self
    }

    /// The conversation the call names, if it names one.
    pub fn session_id(&self) -> Option<&'a str> {
        self.named.then_some(self.session)
    }

    /// Who is calling, with their allowlist and limits; the dispatcher's
    /// default caller otherwise.
    pub fn caller(mut self, caller: &'a Caller) -> Self {
        self.caller = Some(caller);
        self
    }

    /// Whether a person approved this exact call. Only the host sets this,
    /// never the model.
    pub fn confirmed(mut self, confirmed: bool) -> Self {
        self.confirmed = confirmed;
        self
    }

    /// The question id of an approval a person gave for exactly this
    /// call (from a `CONFIRMATION_REQUIRED` result's `question_id`). It
    /// is used up; one asked for another session, caller, tool or other
    /// arguments, or one already used or expired, executes nothing.
    pub fn approval(mut self, question_id: &'a str) -> Self {
        self.approval = Some(question_id);
        self
    }

    /// The provider's id of the call, kept in the audit record.
    pub fn call_id(mut self, call_id: &'a str) -> Self {
        self.call_id = Some(call_id);
        self
    }

    /// A dry run: the call goes through every stage up to execution
    /// (lookup, validation, replay of a completed side effect, the check,
    /// the policy, the approval) and stops there. It uses no step, is not
    /// counted by the loop guard, creates no pending approval, takes no
    /// approval up and runs nothing: it answers what the real call would
    /// get, and where that call would run, `ok: true` with code `DRY_RUN`,
    /// the validated arguments in `data.arguments` and, when the tool
    /// declares `#[tool(preview = path)]`, what it would do in
    /// `data.preview`, and `data.would: "run"`. Where the real call would
    /// wait for a person (a high-risk or tainted call without approval, or
    /// an inbox approval no one has decided yet), it answers `DRY_RUN` with
    /// `data.would: "ask_a_person"` and `data.reason` (`"high_risk"` or
    /// `"untrusted_context"`, with `data.tainted` when the level names
    /// fields). Where the real call would be refused at those stages (the
    /// check, a policy limit, a denied, invalid or expired approval), it
    /// answers `DRY_RUN` with `data.would: "be_refused"` and the refusal the
    /// real call would get in `data.refusal` (`code`, `message`, `data`).
    /// A call refused before (unknown tool, invalid arguments) or replayed
    /// gets that answer, as the real call would.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// Whether the client that makes this call (an MCP client) may answer
    /// the question to a person the call asks, where the answering process
    /// lets its clients decide too: the question records it
    /// ([`PendingApproval::answerers`](crate::store::PendingApproval::answerers),
    /// see [`life`](crate::life#who-may-answer-which-question)). An MCP
    /// server sets it when it would ask its client (host mode, or inbox mode
    /// with approvals by elicitation); nothing else should. Never for a
    /// question about an unknown outcome.
    pub fn client_answers(mut self, yes: bool) -> Self {
        self.client_answers = yes;
        self
    }

    /// Whether the call is its conversation's only one: a conversation made
    /// for it, which no call after it names (a stateless HTTP request that
    /// names none; an MCP server sets it). A read-only call alone then
    /// leaves nothing in the store: no step is kept (its step is 1), nor a
    /// count of its repeats, nor its session's taint. A side effect is
    /// kept as always (its record answers a retry and an unknown outcome).
    pub fn alone(mut self, yes: bool) -> Self {
        self.alone = yes;
        self
    }

    /// Whether the call is a dry run ([`Call::dry_run`]).
    pub fn is_dry_run(&self) -> bool {
        self.dry_run
    }

    /// The tool asked for.
    pub fn tool(&self) -> &'a str {
        self.tool
    }
}
