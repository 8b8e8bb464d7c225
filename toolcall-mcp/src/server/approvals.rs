//! What one connection remembers of its approvals: the questions it asked
//! its client as `input_required`, and the pending approvals it answered a
//! client that cannot ask a person with; and, for such a client, the wait
//! for a decision in the store (the inbox).

use std::any::Any;
use std::collections::VecDeque;
use std::sync::PoisonError;
use std::time::Instant;

use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use toolcall_core::canonical::digest;
use toolcall_core::life::QuestionState;
use toolcall_core::store::now_ms;
use toolcall_core::store::{ApprovalLookup, Store};
use toolcall_core::store::{Binding, PendingApproval, Requester};
use toolcall_core::{Approvals, Arguments, ToolResult};

use super::McpServer;
use super::question::UNTRUSTED_CONTEXT;
use crate::frame::no_duplicates;

/// How many `input_required` approval questions one connection keeps open
/// at most; past it, the oldest is forgotten (its approval then expires
/// unused in the store).
const MAX_OPEN_QUESTIONS: usize = 256;

/// How many calls answered with a pending approval, for a client that
/// cannot ask a person, one connection remembers at most; past it, the oldest is forgotten (a
/// retry of its call is then a fresh call).
const MAX_PENDING_CALLS: usize = 256;

/// An approval question asked as `input_required` and not yet answered:
/// the call it is about.
#[derive(Debug)]
pub(super) struct OpenQuestion {
    /// The session the call was asked in; the answer must come from it.
    session: String,
    tool: String,
    /// The digests of the canonical JSON of the arguments as the client sent
    /// them, and of the validated arguments the person was shown; a retry
    /// must repeat one.
    arguments: [String; 2],
    asked_at: Instant,
}

/// A call answered with a pending approval (`CONFIRMATION_REQUIRED`) by a
/// server whose client cannot ask a person: an identical retry brings the
/// approval back.
#[derive(Debug)]
pub(super) struct PendingCall {
    pub(super) id: String,
    /// The session of the call.
    session: String,
    tool: String,
    /// As in [`OpenQuestion::arguments`]: the digests of the canonical JSON
    /// of the arguments as sent, and as validated; a retry must repeat one.
    arguments: [String; 2],
    /// When the approval expires (at the latest), in ms since the epoch.
    pub(super) expires_ms: u64,
}

impl<S: Any + Send + Sync, St: Store> McpServer<S, St> {
    /// For a client that cannot ask a person: waits up to
    /// [`Options::wait_approval`](crate::Options::wait_approval) (never past
    /// the approval's lifetime) for the question `id` to be decided in the
    /// store (a person's decision, in the approval inbox), then answers what
    /// came of the call ([`Dispatcher::wait_for_decision`](toolcall_core::Dispatcher::wait_for_decision)):
    /// carried out now, or carried out elsewhere and replayed, denied,
    /// expired, or still waiting (`CONFIRMATION_REQUIRED`, the question
    /// stays). A client that cancels the call stops the wait: nothing ran.
    #[allow(clippy::too_many_arguments)] // one call's parts, each needed
    pub(super) async fn wait_for_decision(
        &self,
        id: &str,
        session: &str,
        tool: &str,
        raw: &str,
        call_id: &str,
        asked: &ToolResult,
        context: &RequestContext<RoleServer>,
    ) -> ToolResult {
        let wait = self
            .options
            .wait_approval
            .min(self.dispatcher.settings().approval_ttl);
        if wait.is_zero() {
            tracing::debug!(tool, "the MCP client cannot ask a person; the call waits");
            return asked.clone();
        }
        let until = now_ms().saturating_add(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
        tracing::info!(
            tool,
            approval = id,
            "the MCP client cannot ask a person; waiting for a decision in the store"
        );
        let call = self.pipeline_call(tool, Arguments::Raw(raw), session, call_id);
        tokio::select! {
            answer = self.dispatcher.wait_for_decision(call, id, until) => answer,
            () = context.ct.cancelled() => {
                tracing::info!(
                    tool,
                    approval = id,
                    "the tool call was cancelled while it waited for a decision; nothing ran"
                );
                asked.clone()
            }
        }
    }

    /// Remembers that this connection's client was asked, as
    /// `input_required`, to approve the call `id` made in `session`.
    pub(super) fn remember_question(
        &self,
        id: &str,
        session: &str,
        tool: &str,
        raw: &str,
        asked: &ToolResult,
    ) {
        // Before the lock: a parse and a hash of up to the whole frame.
        let arguments = asked_digests(raw, asked);
        let ttl = self.dispatcher.settings().approval_ttl;
        let mut questions = self
            .memory
            .open_questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Forget the questions whose approvals have expired, then the oldest
        // if too many are still open.
        questions.retain(|_, question| question.asked_at.elapsed() < ttl);
        while questions.len() >= MAX_OPEN_QUESTIONS {
            let Some(oldest) = questions
                .iter()
                .min_by_key(|(_, question)| question.asked_at)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            questions.remove(&oldest);
        }
        questions.insert(
            id.to_owned(),
            OpenQuestion {
                session: session.to_owned(),
                tool: tool.to_owned(),
                arguments,
                asked_at: Instant::now(),
            },
        );
    }

    /// Who this connection's caller asks as, for [`Self::binding`].
    pub(super) fn requester(&self) -> Option<String> {
        self.caller
            .principal()
            .map(toolcall_core::Principal::requester)
    }

    /// What ties an approval to this caller's call of `tool` in `session`:
    /// only its own requester's questions match. `requester` is
    /// [`Self::requester`], kept by the caller for the binding to borrow.
    pub(super) fn binding<'a>(
        &'a self,
        session: &'a str,
        tool: &'a str,
        digest: Option<&'a str>,
        requester: Option<&'a str>,
    ) -> Binding<'a> {
        Binding {
            session,
            caller: self.caller.id(),
            tool: Some(tool),
            digest,
            requester: Requester::Only(requester),
        }
    }

    /// When an approval asked now expires at the latest, in ms since the epoch.
    pub(super) fn expiry(&self) -> u64 {
        let ttl = self.dispatcher.settings().approval_ttl;
        now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
    }

    /// Remembers that a call to `tool` with the arguments `raw` was answered
    /// with the pending approval `id` (`asked`, `CONFIRMATION_REQUIRED`), for
    /// an identical retry to bring back.
    pub(super) fn remember_pending_call(
        &self,
        id: &str,
        session: &str,
        tool: &str,
        raw: &str,
        asked: &ToolResult,
        expires_ms: u64,
    ) {
        let arguments = asked_digests(raw, asked);
        // Forget the expired approvals and this one's older entry, then the
        // oldest if too many are remembered.
        let mut calls = self.pending_calls_unexpired();
        calls.retain(|entry| entry.id != id);
        while calls.len() >= MAX_PENDING_CALLS {
            calls.pop_front();
        }
        calls.push_back(PendingCall {
            id: id.to_owned(),
            session: session.to_owned(),
            tool: tool.to_owned(),
            arguments,
            expires_ms,
        });
    }

    /// Whether [`recall`](McpServer::recall) may find an approval for a
    /// call to `tool` in `session`: this connection remembers one for that
    /// tool and session, or the conversation is shared and the tool has side
    /// effects (only those wait for a person), so that the store may hold
    /// one. It reads nothing of the arguments (a parse, a canonical form and
    /// a hash), which most calls do not need.
    pub(super) fn may_recall(&self, session: &str, tool: &str) -> bool {
        let remembered = self
            .pending_calls_unexpired()
            .iter()
            .any(|entry| entry.session == session && entry.tool == tool);
        remembered || (self.shared(session) && self.side_effect(tool))
    }

    /// The calls this connection answered with a pending approval, the
    /// expired ones forgotten.
    fn pending_calls_unexpired(&self) -> std::sync::MutexGuard<'_, VecDeque<PendingCall>> {
        let now = now_ms();
        let mut calls = self
            .memory
            .pending_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        calls.retain(|entry| entry.expires_ms > now);
        calls
    }

    /// Whether `tool` is one of the registry's with side effects.
    fn side_effect(&self, tool: &str) -> bool {
        self.dispatcher
            .registry()
            .get(tool)
            .is_some_and(|spec| spec.side_effect())
    }

    /// The pending approval an identical earlier call to `tool` (arguments
    /// `raw`) in `session` was answered with, if a retry may bring it: one
    /// with a decision recorded in the store, or (in [`Approvals::Inbox`]
    /// mode, where bringing an id approves nothing by itself) one still
    /// undecided. It is forgotten here; the call remembers it again if it is
    /// answered `CONFIRMATION_REQUIRED` once more. An approval used up,
    /// expired or gone is forgotten; in host mode an undecided one is left
    /// for a later retry, since bringing its id would approve it.
    ///
    /// In a conversation other connections share, an approval another
    /// connection (or process) was handed is looked for in the store when
    /// this connection remembers none ([`McpServer::recall_from_store`]).
    pub(super) async fn recall(&self, session: &str, tool: &str, raw: &str) -> Option<PendingCall> {
        let sent = sent_digest(raw)?;
        let candidates: Vec<String> = self
            .pending_calls_unexpired()
            .iter()
            .rev()
            .filter(|entry| {
                entry.session == session && entry.tool == tool && entry.arguments.contains(&sent)
            })
            .map(|entry| entry.id.clone())
            .collect();
        let inbox = self.dispatcher.settings().approvals == Approvals::Inbox;
        for id in candidates {
            let keep = match self.dispatcher.store().approval(&id).await {
                Ok(Some(entry))
                    if entry.approval.session == session
                        && matches!(
                            entry.state(now_ms()),
                            QuestionState::Open | QuestionState::Decided(_)
                        ) =>
                {
                    if !entry.state(now_ms()).is_open() || inbox {
                        let mut calls = self
                            .memory
                            .pending_calls
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        // Another retry may have taken it meanwhile.
                        let Some(mut found) = calls
                            .iter()
                            .position(|entry| entry.id == id)
                            .and_then(|at| calls.remove(at))
                        else {
                            continue;
                        };
                        found.expires_ms = entry.approval.expires_ms;
                        tracing::debug!(
                            tool,
                            approval = id,
                            "an identical retry brings the pending approval back"
                        );
                        return Some(found);
                    }
                    true
                }
                Ok(_) => false,
                Err(error) => {
                    tracing::warn!(tool, approval = id, %error, "could not look the approval up");
                    true
                }
            };
            if !keep {
                self.memory
                    .pending_calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|entry| entry.id != id);
            }
        }
        if self.shared(session) {
            return self.recall_from_store(session, tool, &sent).await;
        }
        None
    }

    /// In a shared conversation: the approval of an identical call to
    /// `tool` in `session`, by this server's caller, that a retry may bring
    /// (as [`recall`](McpServer::recall) says), found in the store by the
    /// call's binding however many other approvals wait: a decided one, or
    /// (inbox mode) a pending one. Identical means the arguments as
    /// sent are, in canonical form, the validated ones the approval was
    /// asked for. Only for a tool with side effects (only those wait for a
    /// person), so that other calls cost the store nothing more.
    async fn recall_from_store(
        &self,
        session: &str,
        tool: &str,
        sent: &str,
    ) -> Option<PendingCall> {
        if !self.side_effect(tool) {
            return None;
        }
        let requester = self.requester();
        let binding = self.binding(session, tool, Some(sent), requester.as_deref());
        let store = self.dispatcher.store();
        let now = now_ms();
        let inbox = self.dispatcher.settings().approvals == Approvals::Inbox;
        // The store finds the call's approval by its binding, however many
        // others wait: a high-risk call's (no reason) or a tainted one's.
        let mut found: Option<PendingApproval> = None;
        for reason in [None, Some(UNTRUSTED_CONTEXT)] {
            match store
                .find_approval(&ApprovalLookup {
                    binding: &binding,
                    reason,
                    now_ms: now,
                })
                .await
            {
                Ok(Some(entry))
                    if match entry.state(now) {
                        QuestionState::Decided(_) => true,
                        state => state.is_open() && inbox,
                    } =>
                {
                    found = Some(entry.approval);
                    break;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(tool, %error, "could not look the call's approval up");
                    return None;
                }
            }
        }
        let approval = found?;
        tracing::debug!(
            tool,
            approval = approval.id,
            "an identical retry in a shared conversation brings its pending approval back"
        );
        Some(PendingCall {
            id: approval.id,
            session: session.to_owned(),
            tool: tool.to_owned(),
            arguments: [sent.to_owned(), approval.digest],
            expires_ms: approval.expires_ms,
        })
    }

    /// Whether `id` names a question this server asked its client about
    /// `tool` with these arguments (`raw`, as sent) in `session`; if so it is forgotten
    /// (an answer is used once). Arguments the pipeline would refuse as
    /// `INVALID_JSON` (a member twice, not an object) answer nothing.
    pub(super) fn take_question(&self, id: &str, session: &str, tool: &str, raw: &str) -> bool {
        let Some(sent) = sent_digest(raw) else {
            return false;
        };
        let mut questions = self
            .memory
            .open_questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let matches = questions.get(id).is_some_and(|asked| {
            asked.session == session && asked.tool == tool && asked.arguments.contains(&sent)
        });
        if matches {
            questions.remove(id);
        }
        matches
    }
}

/// The digests a retry's arguments may match to bring back the approval
/// `asked` (`CONFIRMATION_REQUIRED`) answered for arguments sent as `raw`:
/// as sent, and as the pipeline validated them. The pipeline read `raw`,
/// so it is an object; should it not be, only the validated form matches.
fn asked_digests(raw: &str, asked: &ToolResult) -> [String; 2] {
    let pending = asked.data.get("pending").cloned().unwrap_or(Value::Null);
    [sent_digest(raw).unwrap_or_default(), digest(&pending)]
}

/// The digest of the canonical form of arguments sent as `raw`, if they are
/// an object with no member twice.
fn sent_digest(raw: &str) -> Option<String> {
    no_duplicates(raw).ok()?;
    match serde_json::from_str::<Value>(raw).ok()? {
        object @ Value::Object(_) => Some(digest(&object)),
        _ => None,
    }
}
