//! The MCP handler: `tools/list`, `tools/call`, and the person's approval
//! of high-risk calls through elicitation.

use std::any::Any;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientResult, ContentBlock, CustomRequest, CustomResult, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, ErrorCode,
    Implementation, InputRequest, InputRequests, InputRequiredResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, ServerRequest, Tool,
};
use rmcp::service::{PeerRequestOptions, RequestContext, RoleServer, ServiceError};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use toolcall_core::canonical::digest;
use toolcall_core::echo::{MAX_NAME_ECHO, cut};
use toolcall_core::store::now_ms;
use toolcall_core::{
    Approvals, Arguments, Call, Code, Decision, Dispatcher, MemoryStore, Store, ToolResult,
};

use crate::Options;
use crate::frame::{RawArguments, no_duplicates};

/// Who the audit records as the approver of a decision a person took
/// through MCP (an answer to an approval question).
const APPROVER: &str = "mcp-elicitation";

/// Who the audit records as the decider when no person answered: the server
/// denied the call because the question timed out or the client cancelled it.
const SERVER: &str = "mcp-server";

/// The key of the approval question in an `input_required` result.
const APPROVAL_INPUT: &str = "approval";

/// How the `requestState` of an approval question starts; the confirmation
/// id follows.
const APPROVAL_STATE: &str = "toolcall-approval:";

/// The property of the approval form that says yes.
const APPROVE_FIELD: &str = "approve";

/// The key in a `tools/call` request's `_meta` that asks for a dry run
/// ([`Call::dry_run`]) when it is `true`.
const DRY_RUN_META: &str = "toolcall/dry_run";

/// What `data.reason` says when untrusted output taints a call.
const UNTRUSTED_CONTEXT: &str = "untrusted_context";

/// How many `input_required` approval questions one connection keeps open
/// at most; past it, the oldest is forgotten (its approval then expires
/// unused in the store).
const MAX_OPEN_QUESTIONS: usize = 256;

/// How many pending approvals handed to a client that cannot ask a person
/// one connection remembers at most; past it, the oldest is forgotten (a
/// retry of its call is then a fresh call).
const MAX_HANDED_APPROVALS: usize = 256;

/// An MCP server over a [`Dispatcher`], for **one connection**: implements
/// rmcp's [`ServerHandler`], so any rmcp transport can serve it.
///
/// Each server has its own session, `<Options::session>/<random id>` (see
/// [`McpServer::session`]): the step budget, the loop guard and the
/// idempotency keys of its calls are its own. It also remembers the approval
/// questions it asked its client as `input_required` results, so that only
/// this client's answer to a question this server asked, for the exact call
/// it was asked about, decides a pending approval. For a client that cannot
/// ask a person, it remembers the pending approvals it answered with
/// (`CONFIRMATION_REQUIRED`), so that an identical retry brings the same
/// approval back instead of asking again (see the
/// [crate docs](crate#waiting-for-the-inbox)).
///
/// Make one per connection; [`serve`](crate::serve) does. A transport that
/// serves many clients takes a factory:
/// `move || Ok(McpServer::new(Arc::clone(&dispatcher), options.clone()))`.
///
/// ```no_run
/// use std::sync::Arc;
/// use toolcall_mcp::rmcp::ServiceExt as _;
/// use toolcall_mcp::{McpServer, Options};
///
/// # async fn run(dispatcher: toolcall_core::Dispatcher<()>) -> Result<(), Box<dyn std::error::Error>> {
/// let server = McpServer::new(Arc::new(dispatcher), Options::new("desk-42"));
/// assert!(server.session().starts_with("desk-42/"));
/// let (ours, theirs) = tokio::io::duplex(64 * 1024);
/// # drop(theirs);
/// let running = server.serve(ours).await?;
/// running.waiting().await?;
/// # Ok(())
/// # }
/// ```
pub struct McpServer<S, St = MemoryStore> {
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
    /// `<options.session>/<connection id>`.
    session: String,
    /// The approval questions this server asked its client as
    /// `input_required` results, by confirmation id.
    asked: Mutex<HashMap<String, Asked>>,
    /// The pending approvals this server answered a call with, to a client
    /// that cannot ask a person, oldest first.
    handed: Mutex<VecDeque<Handed>>,
}

/// An approval question asked as `input_required`: the call it is about.
#[derive(Debug)]
struct Asked {
    tool: String,
    /// The digests of the canonical JSON of the arguments as the client sent
    /// them, and of the validated arguments the person was shown; a retry
    /// must repeat one.
    arguments: [String; 2],
    asked_at: Instant,
}

/// A pending approval a call was answered with (`CONFIRMATION_REQUIRED`)
/// by a server whose client cannot ask a person: an identical retry brings
/// it back.
#[derive(Debug)]
struct Handed {
    id: String,
    tool: String,
    /// As in [`Asked::arguments`]: the digests of the canonical JSON of the
    /// arguments as sent, and as validated; a retry must repeat one.
    arguments: [String; 2],
    /// When the approval expires (at the latest), in ms since the epoch.
    expires_ms: u64,
}

impl<S, St> std::fmt::Debug for McpServer<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("options", &self.options)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl<S: Any + Send + Sync, St: Store> McpServer<S, St> {
    /// A server for one connection, whose calls run through `dispatcher` in
    /// a new session under [`Options::session`].
    pub fn new(dispatcher: Arc<Dispatcher<S, St>>, options: Options) -> Self {
        let session = format!("{}/{}", options.session, connection_id());
        McpServer {
            dispatcher,
            options,
            session,
            asked: Mutex::default(),
            handed: Mutex::default(),
        }
    }

    /// The dispatcher the calls run through.
    pub fn dispatcher(&self) -> &Arc<Dispatcher<S, St>> {
        &self.dispatcher
    }

    /// The options the server runs with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The session this connection's calls run in:
    /// `<Options::session>/<random connection id>`.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The tools the default caller may call, as `tools/list` describes them.
    pub fn tools(&self) -> Result<Vec<Tool>, serde_json::Error> {
        let policy = self.dispatcher.default_caller().policy();
        self.dispatcher
            .registry()
            .iter()
            .filter(|spec| policy.allows(spec.name()))
            .map(|spec| serde_json::from_value(toolcall_providers::export::mcp_tool(spec)))
            .collect()
    }

    /// Answers one `tools/call`.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        let elicits = context
            .client_capabilities()
            .as_ref()
            .is_some_and(elicits_forms);
        let tool = request.name.as_ref();
        let raw = raw_arguments(&request, &context);
        let call_id = context.id.to_string();
        let dry_run = asks_dry_run(&request, &context);

        // The retry that answers an approval question asked as
        // `input_required`. It decides the pending call only if this server
        // asked this client about it, for this tool and these arguments, and
        // the client can still ask a person; anything else is a fresh call,
        // which leaves every pending approval alone.
        if modern
            && !dry_run
            && let Some(id) = request
                .request_state
                .as_deref()
                .and_then(|state| state.strip_prefix(APPROVAL_STATE))
        {
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(APPROVAL_INPUT))
                .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok());
            match answer {
                Some(answer) if elicits && self.take_question(id, tool, &raw) => {
                    return to_mcp(&self.answered(id, tool, &raw, &call_id, &answer).await).into();
                }
                _ => tracing::debug!(
                    tool,
                    "not an answer to an approval question this server asked; a fresh call"
                ),
            }
        }

        // A client that cannot ask a person has no way to bring an approval
        // back: an identical retry of a call this server answered
        // `CONFIRMATION_REQUIRED` brings the same approval, so that it is
        // not asked about twice and a decision on it is carried out.
        // A dry run asks no one and brings no approval back: the
        // dispatcher answers it without a `confirmation_id`.
        let recalled = if elicits || dry_run {
            None
        } else {
            self.recall(tool, &raw).await
        };
        let mut call = Call::new(tool, Arguments::Raw(&raw))
            .session(&self.session)
            .call_id(&call_id)
            .dry_run(dry_run);
        if let Some(handed) = &recalled {
            call = call.approval(&handed.id);
        }
        let result = self.dispatcher.execute(call).await;

        let Some(id) = result
            .confirmation_id
            .as_deref()
            .filter(|_| result.code == Code::ConfirmationRequired)
        else {
            return to_mcp(&result).into();
        };
        if !elicits {
            let answer = self
                .wait_for_decision(id, tool, &raw, &call_id, &result, &context)
                .await;
            // Still pending: remember it for a retry (nothing ran).
            if answer.code == Code::ConfirmationRequired
                && let Some(id) = answer.confirmation_id.as_deref()
            {
                let expires_ms = recalled
                    .filter(|handed| handed.id == id)
                    .map_or_else(|| self.expiry(), |handed| handed.expires_ms);
                self.remember_handed(id, tool, &raw, &answer, expires_ms);
            }
            return to_mcp(&answer).into();
        }
        let question = match approval_question(&result) {
            Ok(question) => question,
            Err(error) => {
                tracing::warn!(tool, %error, "could not build the approval question");
                return to_mcp(&result).into();
            }
        };

        if modern {
            self.remember_question(id, tool, &raw, &result);
            let mut requests = InputRequests::new();
            requests.insert(
                APPROVAL_INPUT.to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(question)),
            );
            return InputRequiredResult::new(Some(requests), Some(format!("{APPROVAL_STATE}{id}")))
                .into();
        }

        to_mcp(&self.ask(id, tool, question, &result, &context).await).into()
    }

    /// For a client that cannot ask a person: waits up to
    /// [`Options::wait_approval`] (never past the approval's lifetime) for a
    /// decision on the pending call `id` recorded in the store (a person's,
    /// in the approval inbox), woken by the store where it can be, then
    /// makes the call again with the approval, which carries the decision
    /// out: the call runs once, runs edited, or is denied. Without a
    /// decision by then, or if the client cancels the call, the answer is
    /// `asked` (`CONFIRMATION_REQUIRED`) and the approval stays pending.
    async fn wait_for_decision(
        &self,
        id: &str,
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
        let entry = tokio::select! {
            entry = self.dispatcher.store().wait_approval(id, until) => entry,
            () = context.ct.cancelled() => {
                tracing::info!(
                    tool,
                    approval = id,
                    "the tool call was cancelled while it waited for a decision; nothing ran"
                );
                return asked.clone();
            }
        };
        match entry {
            Ok(Some(entry)) if entry.approval.decision.is_some() && entry.used_ms.is_none() => {
                tracing::info!(
                    tool,
                    approval = id,
                    "a decision was recorded; carrying it out"
                );
                self.dispatcher
                    .execute(
                        Call::new(tool, Arguments::Raw(raw))
                            .session(&self.session)
                            .call_id(call_id)
                            .approval(id),
                    )
                    .await
            }
            Ok(_) => {
                tracing::debug!(tool, approval = id, "no decision in time; the call waits");
                asked.clone()
            }
            Err(error) => {
                tracing::warn!(tool, approval = id, %error, "waiting for a decision failed");
                asked.clone()
            }
        }
    }

    /// Asks the person with an `elicitation/create` request (sessions opened
    /// with `initialize`), waiting at most the approval's lifetime, and
    /// decides the pending call `id` as they answer.
    async fn ask(
        &self,
        id: &str,
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
                let decision = self.decision(id, tool, SERVER);
                return self
                    .dispatcher
                    .deny(decision, "the MCP client cancelled the call before a person answered")
                    .await;
            }
        };
        match answer {
            Ok(ClientResult::ElicitResult(answer)) => {
                let decision = self.decision(id, tool, APPROVER);
                if said_yes(&answer) {
                    tracing::info!(tool, "a person approved the call through MCP");
                    self.dispatcher.approve(decision).await
                } else {
                    self.deny_answer(decision, tool, &answer).await
                }
            }
            Err(ServiceError::Timeout { .. }) => {
                let decision = self.decision(id, tool, SERVER);
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

    /// The result of a retry that answers a question this server asked: on
    /// yes, the call runs through the whole pipeline with the approval
    /// (which checks that it was given for exactly these arguments, and uses
    /// it up); otherwise it is denied.
    async fn answered(
        &self,
        id: &str,
        tool: &str,
        raw: &str,
        call_id: &str,
        answer: &ElicitResult,
    ) -> ToolResult {
        if said_yes(answer) {
            tracing::info!(tool, "a person approved the call through MCP");
            return self
                .dispatcher
                .execute(
                    Call::new(tool, Arguments::Raw(raw))
                        .session(&self.session)
                        .call_id(call_id)
                        .approval(id),
                )
                .await;
        }
        self.deny_answer(self.decision(id, tool, APPROVER), tool, answer)
            .await
    }

    /// Denies the pending call as the person's answer (not a yes) says.
    async fn deny_answer(
        &self,
        decision: Decision<'_>,
        tool: &str,
        answer: &ElicitResult,
    ) -> ToolResult {
        let reason = match answer.action {
            ElicitationAction::Decline => "the person declined it",
            ElicitationAction::Cancel => "the person dismissed the approval request",
            _ => "the person did not approve it",
        };
        tracing::info!(tool, reason, "the call was not approved");
        self.dispatcher.deny(decision, reason).await
    }

    /// A decision on the pending call `id` of this connection's session.
    fn decision<'a>(&'a self, id: &'a str, tool: &'a str, by: &'a str) -> Decision<'a> {
        Decision::new(id, &self.session).tool(tool).by(by)
    }

    /// Remembers that this connection's client was asked, as
    /// `input_required`, to approve the call `id`.
    fn remember_question(&self, id: &str, tool: &str, raw: &str, asked: &ToolResult) {
        let pending = asked.data.get("pending").cloned().unwrap_or(Value::Null);
        // The pipeline read these arguments, so they are an object; should
        // they not be, only the validated form can match.
        let sent = sent_digest(raw).unwrap_or_default();
        let ttl = self.dispatcher.settings().approval_ttl;
        let mut questions = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
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
            Asked {
                tool: tool.to_owned(),
                arguments: [sent, digest(&pending)],
                asked_at: Instant::now(),
            },
        );
    }

    /// When an approval asked now expires at the latest, in ms since the epoch.
    fn expiry(&self) -> u64 {
        let ttl = self.dispatcher.settings().approval_ttl;
        now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
    }

    /// Remembers that a call to `tool` with the arguments `raw` was answered
    /// with the pending approval `id` (`asked`, `CONFIRMATION_REQUIRED`), for
    /// an identical retry to bring back.
    fn remember_handed(
        &self,
        id: &str,
        tool: &str,
        raw: &str,
        asked: &ToolResult,
        expires_ms: u64,
    ) {
        let pending = asked.data.get("pending").cloned().unwrap_or(Value::Null);
        let sent = sent_digest(raw).unwrap_or_default();
        let now = now_ms();
        let mut handed = self.handed.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget the expired approvals and this one's older entry, then the
        // oldest if too many are remembered.
        handed.retain(|entry| entry.expires_ms > now && entry.id != id);
        while handed.len() >= MAX_HANDED_APPROVALS {
            handed.pop_front();
        }
        handed.push_back(Handed {
            id: id.to_owned(),
            tool: tool.to_owned(),
            arguments: [sent, digest(&pending)],
            expires_ms,
        });
    }

    /// The pending approval an identical earlier call to `tool` (arguments
    /// `raw`) was answered with, if a retry may bring it: one with a
    /// decision recorded in the store, or (in [`Approvals::Inbox`] mode, where
    /// bringing an id approves nothing by itself) one still undecided. It
    /// is forgotten here; the call remembers it again if it is answered
    /// `CONFIRMATION_REQUIRED` once more. An approval used up, expired or
    /// gone is forgotten; in host mode an undecided one is left for a later
    /// retry, since bringing its id would approve it.
    async fn recall(&self, tool: &str, raw: &str) -> Option<Handed> {
        let sent = sent_digest(raw)?;
        let candidates: Vec<String> = {
            let now = now_ms();
            let mut handed = self.handed.lock().unwrap_or_else(PoisonError::into_inner);
            handed.retain(|entry| entry.expires_ms > now);
            handed
                .iter()
                .rev()
                .filter(|entry| entry.tool == tool && entry.arguments.contains(&sent))
                .map(|entry| entry.id.clone())
                .collect()
        };
        let inbox = self.dispatcher.settings().approvals == Approvals::Inbox;
        for id in candidates {
            let keep = match self.dispatcher.store().approval(&id).await {
                Ok(Some(entry))
                    if entry.used_ms.is_none()
                        && entry.approval.session == self.session
                        && entry.approval.expires_ms > now_ms() =>
                {
                    if entry.approval.decision.is_some() || inbox {
                        let mut handed = self.handed.lock().unwrap_or_else(PoisonError::into_inner);
                        // Another retry may have taken it meanwhile.
                        let Some(mut found) = handed
                            .iter()
                            .position(|entry| entry.id == id)
                            .and_then(|at| handed.remove(at))
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
                self.handed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|entry| entry.id != id);
            }
        }
        None
    }

    /// Whether `id` names a question this server asked its client about
    /// `tool` with these arguments (`raw`, as sent); if so it is forgotten
    /// (an answer is used once). Arguments the pipeline would refuse as
    /// `INVALID_JSON` (a member twice, not an object) answer nothing.
    fn take_question(&self, id: &str, tool: &str, raw: &str) -> bool {
        let Some(sent) = sent_digest(raw) else {
            return false;
        };
        let mut questions = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        let matches = questions
            .get(id)
            .is_some_and(|asked| asked.tool == tool && asked.arguments.contains(&sent));
        if matches {
            questions.remove(id);
        }
        matches
    }
}

impl<S: Any + Send + Sync, St: Store> ServerHandler for McpServer<S, St> {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.options.name.clone(),
                self.options.version.clone(),
            ))
            .with_instructions(
                "Every tool call is validated strictly and answered with a structured result: \
                 ok, code, message and data. Read the message of a failed call and correct the \
                 call instead of repeating it. High-risk tools run only after a person approves \
                 the exact call.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools().map_err(|error| {
            ErrorData::internal_error(format!("a tool definition is not valid MCP: {error}"), None)
        })?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(request, context).await)
    }

    /// An unknown method. rmcp's default answer repeats the whole method
    /// name, which the client can make as long as a message; this one cuts
    /// it as the pipeline cuts a tool name.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "Method not found: {}",
                cut(request.method.as_str(), MAX_NAME_ECHO)
            ),
            None,
        ))
    }
}

/// The arguments of a call as JSON text, for the pipeline to parse
/// ([`Arguments::Raw`]): exactly what the client sent when the call came
/// through a [`FrameGuard`](crate::FrameGuard), else (a transport that
/// hands rmcp parsed messages) rmcp's map written out again. No arguments
/// (or `null`) are `{}`.
fn raw_arguments<'a>(
    request: &'a CallToolRequestParams,
    context: &'a RequestContext<RoleServer>,
) -> Cow<'a, str> {
    match context.extensions.get::<RawArguments>() {
        Some(RawArguments(raw)) => Cow::Borrowed(raw.as_deref().unwrap_or("{}")),
        None => match &request.arguments {
            Some(arguments) => Cow::Owned(Value::Object(arguments.clone()).to_string()),
            None => Cow::Borrowed("{}"),
        },
    }
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

/// Whether the person accepted and said yes.
fn said_yes(answer: &ElicitResult) -> bool {
    answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|content| content.get(APPROVE_FIELD))
            .and_then(Value::as_bool)
            == Some(true)
}

/// 128 random bits, hex: names one connection's session.
fn connection_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: a hash of the time, the process and a counter,
        // still unique.
        static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
        let seed = format!(
            "{:?}/{}/{}",
            std::time::SystemTime::now(),
            std::process::id(),
            CONNECTIONS.fetch_add(1, Ordering::Relaxed)
        );
        return digest(&Value::from(seed))[..32].to_owned();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the client can show a person a form (an empty elicitation
/// capability means forms, as before modes existed).
fn elicits_forms(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .elicitation
        .as_ref()
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// Whether a `tools/call` asks for a dry run: `"toolcall/dry_run": true`
/// in its `_meta` (which rmcp hands over in the request's context; the
/// params' own field is read too, for a request built in process).
fn asks_dry_run(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> bool {
    let flag =
        |meta: &serde_json::Map<String, Value>| meta.get(DRY_RUN_META) == Some(&Value::Bool(true));
    flag(&context.meta) || request.meta.as_ref().is_some_and(|meta| flag(meta))
}

/// Why the call asks a person beyond its tool's risk, as the result's
/// `data.reason` (and `data.tainted`) say it: a paragraph of the question,
/// or nothing.
fn why_asked(result: &ToolResult) -> String {
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
    why.push_str(
        ". Make sure it is what you want, not what that text told the assistant to do.\n\n",
    );
    why
}

/// The form that asks a person to approve the pending call of a
/// `CONFIRMATION_REQUIRED` result: its tool and exact arguments, why it
/// asks when untrusted output tainted it, and one yes-or-no field.
fn approval_question(result: &ToolResult) -> Result<ElicitRequestParams, String> {
    let tool = &result.tool;
    let pending = result.data.get("pending").cloned().unwrap_or(Value::Null);
    let arguments = serde_json::to_string_pretty(&pending).map_err(|error| error.to_string())?;
    let why = why_asked(result);
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

/// The MCP form of a result: `isError` unless it succeeded, the result as
/// `structuredContent`, and the model's text as the one content block.
fn to_mcp(result: &ToolResult) -> CallToolResult {
    let text = vec![ContentBlock::text(result.to_model_text())];
    let mut answer = if result.ok {
        CallToolResult::success(text)
    } else {
        CallToolResult::error(text)
    };
    answer.structured_content =
        Some(serde_json::to_value(result).expect("a ToolResult always serializes"));
    answer
}
