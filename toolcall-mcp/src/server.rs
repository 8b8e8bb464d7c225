//! The MCP handler: `tools/list`, `tools/call`, and the person's approval
//! of high-risk calls through elicitation.

mod approvals;
mod incoming;
mod question;
mod tasks;

use std::any::Any;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CustomRequest, CustomResult, ElicitRequest, ElicitResult, ErrorCode, GetTaskParams,
    GetTaskResult, Implementation, InputRequest, InputRequests, InputRequiredResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use toolcall_core::__private::echo::{MAX_NAME_ECHO, cut};
use toolcall_core::store::{MemoryStore, Store};
use toolcall_core::{Approvals, Arguments, Call, Caller, Code, Dispatcher, ToolResult};

use crate::{Conversations, Options};
use approvals::{OpenQuestion, PendingCall};
use incoming::{
    asks_dry_run, bad_conversation, call_span, elicits_forms, named_conversation, raw_arguments,
};
use question::{APPROVAL_INPUT, APPROVAL_STATE, approval_question};

/// An MCP server over a [`Dispatcher`], for **one connection**: implements
/// rmcp's [`ServerHandler`], so any rmcp transport can serve it.
///
/// Its calls run in the conversation [`Options::conversations`] gives it
/// ([`McpServer::session`]): one of its own, `<prefix>/<random id>`, or the
/// one every connection shares; a call may name another in its `_meta`
/// (see the [crate docs](crate#conversations)). The conversation scopes
/// the step budget, the loop guard, the idempotency keys, the taint of
/// untrusted output and the pending approvals. The server also remembers
/// the approval questions it asked its client as `input_required` results,
/// so that only this client's answer to a question this server asked, for
/// the exact call it was asked about, decides a pending approval. For a
/// client that cannot ask a person, it remembers the pending approvals it
/// answered with (`CONFIRMATION_REQUIRED`), so that an identical retry
/// brings the same approval back instead of asking again (see the
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
    /// Who calls: the dispatcher's default caller unless
    /// [`McpServer::caller`] names another.
    caller: Caller,
    /// The session of the calls that name no conversation:
    /// `<prefix>/<connection id>`, or the shared conversation.
    session: String,
    /// What the server remembers of the approvals of its client.
    memory: Arc<Memory>,
}

/// What a server remembers of its client's approvals; the servers of one
/// HTTP caller share one, since each of its stateless requests is served by
/// a server of its own.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// The approval questions this server asked its client as
    /// `input_required` results, by question id.
    open_questions: Mutex<HashMap<String, OpenQuestion>>,
    /// The calls this server answered with a pending approval, for a client
    /// that cannot ask a person, oldest first.
    pending_calls: Mutex<VecDeque<PendingCall>>,
    /// The conversations its caller named in `_meta` lately, least recent
    /// first ([`Options::max_named_conversations`]).
    named: Mutex<VecDeque<(String, std::time::Instant)>>,
}

impl Memory {
    /// `name`, a conversation `caller` names in `_meta`, if it may: one it
    /// named within the last hour, or a new one while it names fewer than
    /// [`Options::max_named_conversations`] in that hour. Otherwise what is
    /// wrong with it, in words.
    fn name(&self, name: &str, options: &Options) -> Result<String, String> {
        let mut named = self
            .named
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        named.retain(|(_, at)| at.elapsed() < NAMED_WINDOW);
        if let Some(at) = named.iter().position(|(known, _)| known == name) {
            named.remove(at);
        } else if named.len() >= options.max_named_conversations {
            return Err(format!(
                "names a new conversation, and this caller already named {} in the last hour \
                 ({} at most); go on in one of them, or wait",
                named.len(),
                options.max_named_conversations
            ));
        }
        named.push_back((name.to_owned(), std::time::Instant::now()));
        Ok(name.to_owned())
    }
}

/// How long a conversation a caller named counts toward its bound
/// ([`Options::max_named_conversations`]) after its last call.
const NAMED_WINDOW: std::time::Duration = std::time::Duration::from_secs(60 * 60);

impl<S, St> std::fmt::Debug for McpServer<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("options", &self.options)
            .field("session", &self.session)
            .field("caller", &self.caller.id())
            .finish_non_exhaustive()
    }
}

impl<S: Any + Send + Sync, St: Store> McpServer<S, St> {
    /// A server for one connection, whose calls run through `dispatcher` in
    /// the conversation [`Options::conversations`] says: a new one under its
    /// prefix, or the shared one.
    pub fn new(dispatcher: Arc<Dispatcher<S, St>>, options: Options) -> Self {
        let session = match &options.conversations {
            Conversations::PerConnection(prefix) => format!("{prefix}/{}", connection_id()),
            Conversations::Shared(conversation) => conversation.clone(),
        };
        McpServer {
            caller: dispatcher.default_caller().clone(),
            dispatcher,
            options,
            session,
            memory: Arc::default(),
        }
    }

    /// The same server with `caller` as the caller of every call it makes
    /// (its allowlist, its limits, and the audit's `caller`), in place of
    /// the dispatcher's default caller: `tools/list` lists what `caller` may
    /// call, and a conversation named in `_meta` is `caller`'s
    /// ([`Options::named_session`]). Check a caller the dispatcher was not
    /// built with once, with [`Dispatcher::check_caller`].
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// Shares `memory` with the other servers of one client.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn memory(mut self, memory: Arc<Memory>) -> Self {
        self.memory = memory;
        self
    }

    /// The caller of this server's calls.
    pub fn caller_id(&self) -> &str {
        self.caller.id()
    }

    /// Whose the conversations named in `_meta` are: the caller's, or,
    /// on behalf of a principal ([`Caller::with_principal`]), that
    /// principal's under the caller (its id, a unit separator, and a digest
    /// of the principal's issuer and subject), so that two people mapped to
    /// one caller never share a named conversation, its replays or its
    /// questions.
    fn owner(&self) -> Cow<'_, str> {
        match self.caller.principal() {
            None => Cow::Borrowed(self.caller.id()),
            Some(principal) => Cow::Owned(format!(
                "{}\u{1f}{}",
                self.caller.id(),
                &toolcall_core::store::session_key(&format!(
                    "{}\n{}",
                    principal.issuer, principal.subject
                ))[..32]
            )),
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

    /// The session this connection's calls run in when they name no
    /// conversation in their `_meta`: `<prefix>/<random connection id>`
    /// ([`Conversations::PerConnection`]), or the shared conversation
    /// ([`Conversations::Shared`]).
    pub fn session(&self) -> &str {
        &self.session
    }

    /// Whether this connection's default session may be used by others
    /// too (a shared conversation), so that a pending approval of its calls
    /// may have been handed to another connection.
    fn shared(&self, session: &str) -> bool {
        session != self.session || matches!(self.options.conversations, Conversations::Shared(_))
    }

    /// The tools this server's caller may call (the dispatcher's default
    /// caller unless [`McpServer::caller`] names another), as `tools/list`
    /// describes them.
    pub fn tools(&self) -> Result<Vec<Tool>, serde_json::Error> {
        let policy = self.caller.policy();
        self.dispatcher
            .registry()
            .iter()
            .filter(|spec| policy.allows(spec.name()))
            .map(|spec| {
                serde_json::from_value(toolcall_providers::export::mcp_tool_for(spec, policy))
            })
            .collect()
    }

    /// Whether a person's answer through this request's client (its
    /// elicitation) approves: never in inbox mode unless the operator said
    /// so, where only a decision in the store does; the client is then
    /// served as one that cannot ask a person.
    fn elicits(&self, context: &RequestContext<RoleServer>) -> bool {
        context
            .client_capabilities()
            .as_ref()
            .is_some_and(elicits_forms)
            && self.clients_decide()
    }

    /// Whether this server lets its clients answer the approval questions
    /// their calls ask (whatever a client can show): in host mode, and in
    /// inbox mode with [`Options::elicitation_approves`]. A question records
    /// it when it is asked ([`Call::client_answers`]), and an answer from a
    /// client is taken only where the question and the answering server
    /// both allow it (see [`toolcall_core::life`]).
    pub(crate) fn clients_decide(&self) -> bool {
        self.dispatcher.settings().approvals != Approvals::Inbox
            || self.options.elicitation_approves
    }

    /// A call of this server's caller in `session`: every call the server
    /// makes through the pipeline, so that each question it asks records
    /// whether its client may answer.
    pub(crate) fn pipeline_call<'a>(
        &'a self,
        tool: &'a str,
        arguments: Arguments<'a>,
        session: &'a str,
        call_id: &'a str,
    ) -> Call<'a> {
        Call::new(tool, arguments)
            .caller(&self.caller)
            .session(session)
            .call_id(call_id)
            .client_answers(self.clients_decide())
    }

    /// Whether `session` is one of this server's caller's conversations as
    /// this server reaches them: its own (the connection's, or the shared
    /// one) or one its caller names in `_meta`. A task, a question or an
    /// answer of any other conversation is not this client's.
    pub(crate) fn owns_session(&self, session: &str) -> bool {
        session == self.session
            || session
                .strip_prefix(&self.options.named_session(&self.owner(), ""))
                .is_some_and(|name| !name.is_empty())
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
        let elicits = self.elicits(&context);
        let tool = request.name.as_ref();
        let session = match self.session_of(&request, &context) {
            Ok(session) => session,
            Err(answer) => return (*answer).into(),
        };
        let raw = raw_arguments(&request, &context);
        let call_id = context.id.to_string();
        let call = Incoming {
            tool,
            session: session.as_ref(),
            raw: raw.as_ref(),
            call_id: &call_id,
            dry_run: asks_dry_run(&request, &context),
            elicits,
            modern,
            alone: self.alone(session.as_ref(), &context),
        };

        if let Some(answer) = self.answer_to_question(&request, &call).await {
            return answer;
        }
        let (result, recalled) = self.execute(&call).await;
        match result
            .question_id
            .as_deref()
            .filter(|_| result.code == Code::ConfirmationRequired)
        {
            // Boxed: the future of every call is as large as its largest
            // path, and this one (a task, a wait, a question) is rare.
            Some(id) => {
                let pending = Box::pin(self.pending(id, &call, &result, recalled, &context));
                pending.await
            }
            None => to_mcp(&result).into(),
        }
    }

    /// Whether a call in `session` is its conversation's only one: a
    /// stateless HTTP request (no `Mcp-Session-Id`), served by a server of
    /// its own whose connections each get a conversation of their own, that
    /// names none in its `_meta`. No call after it can name that
    /// conversation, so a read-only call leaves nothing in the store.
    fn alone(&self, session: &str, context: &RequestContext<RoleServer>) -> bool {
        #[cfg(feature = "http")]
        let stateless = context
            .extensions
            .get::<axum::http::request::Parts>()
            .is_some_and(|parts| !parts.headers.contains_key("mcp-session-id"));
        #[cfg(not(feature = "http"))]
        let stateless = {
            let _ = context;
            false
        };
        stateless
            && session == self.session
            && matches!(self.options.conversations, Conversations::PerConnection(_))
    }

    /// The session a call runs in: this connection's, or the conversation
    /// its `_meta` names; a name it may not use is the call's answer.
    fn session_of<'a>(
        &'a self,
        request: &'a CallToolRequestParams,
        context: &'a RequestContext<RoleServer>,
    ) -> Result<Cow<'a, str>, Box<CallToolResult>> {
        let named = named_conversation(request, context).and_then(|name| match name {
            Some(_) if self.options.pinned => Err(
                "is not accepted: this server runs every call in its own conversation (it is \
                 pinned)"
                    .to_owned(),
            ),
            Some(name) => self.memory.name(name, &self.options).map(Some),
            None => Ok(None),
        });
        match named {
            Ok(None) => Ok(Cow::Borrowed(self.session.as_str())),
            Ok(Some(name)) => Ok(Cow::Owned(self.options.named_session(&self.owner(), &name))),
            Err(problem) => {
                let tool = request.name.as_ref();
                tracing::debug!(tool, problem, "a call names a conversation it may not");
                Err(Box::new(to_mcp(&bad_conversation(tool, &problem))))
            }
        }
    }

    /// The answer to the retry that answers an approval question asked as
    /// `input_required`, if this call is one. It decides the pending call
    /// only if this server asked this client about it, for this tool and
    /// these arguments, and the client can still ask a person; anything
    /// else (`None`) is a fresh call, which leaves every pending approval
    /// alone.
    async fn answer_to_question(
        &self,
        request: &CallToolRequestParams,
        call: &Incoming<'_>,
    ) -> Option<CallToolResponse> {
        if !call.modern || call.dry_run {
            return None;
        }
        let id = request
            .request_state
            .as_deref()
            .and_then(|state| state.strip_prefix(APPROVAL_STATE))?;
        let answer = request
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(APPROVAL_INPUT))
            .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok());
        let Incoming {
            tool,
            session,
            raw,
            call_id,
            ..
        } = *call;
        match answer {
            Some(answer) if call.elicits && self.take_question(id, session, tool, raw) => {
                // Boxed, as every path that is not the plain call: the
                // future of every call is as large as its largest path.
                let answered = Box::pin(self.answered(id, session, tool, raw, call_id, &answer));
                Some(to_mcp(&answered.await).into())
            }
            _ => {
                tracing::debug!(
                    tool,
                    "not an answer to an approval question this server asked; a fresh call"
                );
                None
            }
        }
    }

    /// Runs the call through the pipeline: with the pending approval an
    /// identical call was answered with, if a retry brings it back (which it
    /// returns beside the result).
    async fn execute(&self, call: &Incoming<'_>) -> (ToolResult, Option<PendingCall>) {
        // A client that cannot ask a person has no way to bring an approval
        // back: an identical retry of a call this server answered
        // `CONFIRMATION_REQUIRED` brings the same approval, so that it is
        // not asked about twice and a decision on it is carried out.
        // A dry run asks no one and brings no approval back: the
        // dispatcher answers it without a `question_id`.
        // Most calls have nothing to bring back: the approvals are looked
        // for (boxed, as every path that is not the plain call) only when
        // one may be found.
        let recalled = if call.elicits || call.dry_run || !self.may_recall(call.session, call.tool)
        {
            None
        } else {
            let recall = Box::pin(self.recall(call.session, call.tool, call.raw));
            recall.await
        };
        let mut pipeline_call = self
            .pipeline_call(
                call.tool,
                Arguments::Raw(call.raw),
                call.session,
                call.call_id,
            )
            .dry_run(call.dry_run)
            .alone(call.alone);
        if let Some(pending) = &recalled {
            pipeline_call = pipeline_call.approval(&pending.id);
        }
        (self.dispatcher.execute(pipeline_call).await, recalled)
    }

    /// The answer to a call that waits for a person's approval (`result`,
    /// `CONFIRMATION_REQUIRED`, pending as `id`): a task, for a client that
    /// declared the tasks extension; the wait for a decision in the store,
    /// for a client that cannot ask a person; else the approval question.
    async fn pending(
        &self,
        id: &str,
        call: &Incoming<'_>,
        result: &ToolResult,
        recalled: Option<PendingCall>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let Incoming {
            tool, session, raw, ..
        } = *call;
        // A client that declared the tasks extension gets a task kept in
        // the store: it polls `tasks/get` on any replica, answers the
        // question with `tasks/update`, or waits for the inbox.
        if self.tasks_for(context) && !call.dry_run {
            match self.created_task(id, context).await {
                Ok(task) => return task.into(),
                Err(error) => {
                    tracing::warn!(tool, approval = id, %error, "could not make the call a task");
                }
            }
        }
        if !call.elicits {
            return to_mcp(
                &self
                    .wait_and_remember(id, call, result, recalled, context)
                    .await,
            )
            .into();
        }
        let provenance = self.provenance(id, result).await;
        let question = match approval_question(result, &provenance) {
            Ok(question) => question,
            Err(error) => {
                tracing::warn!(tool, %error, "could not build the approval question");
                return to_mcp(result).into();
            }
        };
        if call.modern {
            self.remember_question(id, session, tool, raw, result);
            let mut requests = InputRequests::new();
            requests.insert(
                APPROVAL_INPUT.to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(question)),
            );
            return InputRequiredResult::new(Some(requests), Some(format!("{APPROVAL_STATE}{id}")))
                .into();
        }
        to_mcp(&self.ask(id, session, tool, question, result, context).await).into()
    }

    /// For a client that cannot ask a person: the call's answer after the
    /// wait for a decision in the store; still pending, it is remembered
    /// for a retry to bring back (nothing ran).
    async fn wait_and_remember(
        &self,
        id: &str,
        call: &Incoming<'_>,
        asked: &ToolResult,
        recalled: Option<PendingCall>,
        context: &RequestContext<RoleServer>,
    ) -> ToolResult {
        let Incoming {
            tool,
            session,
            raw,
            call_id,
            ..
        } = *call;
        let answer = self
            .wait_for_decision(id, session, tool, raw, call_id, asked, context)
            .await;
        if answer.code == Code::ConfirmationRequired
            && let Some(id) = answer.question_id.as_deref()
        {
            let expires_ms = recalled
                .filter(|pending| pending.id == id)
                .map_or_else(|| self.expiry(), |pending| pending.expires_ms);
            self.remember_pending_call(id, session, tool, raw, &answer, expires_ms);
        }
        answer
    }
}

/// One `tools/call` as the server reads it.
#[derive(Clone, Copy)]
struct Incoming<'a> {
    tool: &'a str,
    /// The session it runs in.
    session: &'a str,
    /// Its arguments as JSON text ([`raw_arguments`]).
    raw: &'a str,
    /// Its JSON-RPC request id, as text.
    call_id: &'a str,
    /// Whether it asks for a dry run.
    dry_run: bool,
    /// Whether a person's answer through the client approves
    /// ([`McpServer::elicits`]).
    elicits: bool,
    /// Whether the client speaks protocol 2026-07-28 or later (no requests
    /// from the server: a question is an `input_required` result).
    modern: bool,
    /// Whether the call is its conversation's only one ([`Call::alone`]).
    alone: bool,
}

impl<S: Any + Send + Sync, St: Store> ServerHandler for McpServer<S, St> {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools();
        let capabilities = if self.options.tasks {
            capabilities.enable_tasks()
        } else {
            capabilities
        };
        ServerConfig::new(capabilities.build())
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
        use tracing::Instrument as _;
        let span = call_span(&request, &context);
        // Boxed: rmcp runs each request in a task of its own, and the
        // runtime moves the task's future several times (spawning it,
        // starting it, storing its output): a call's future, the pipeline's
        // included, is kilobytes, a box is a pointer.
        // Boxed in a statement of its own: the temporaries of a statement
        // live until its end, and would be kept in this future past the
        // `.await`.
        let call = Box::pin(self.call(request, context).instrument(span));
        Ok(call.await)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        // Boxed, as every method but `tools/call`: the future of every
        // request is as large as the largest method's.
        let task = Box::pin(self.task(&request.task_id, &context));
        let task = task.await?;
        Ok(GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let update =
            Box::pin(self.update_task(&request.task_id, &request.input_responses, &context));
        update.await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let cancel = Box::pin(self.cancel_task(&request.task_id));
        cancel.await
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

/// 128 bits, hex: names one connection's session. A keyed hash (SipHash,
/// keyed from the OS's randomness once per process) of a counter, so that
/// no two connections of a process share one and no client can guess
/// another's, without a system call or a `format!` per connection: a
/// stateless HTTP request is a connection of its own.
fn connection_id() -> String {
    use std::hash::BuildHasher as _;
    static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
    static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
    let keys = KEYS.get_or_init(std::hash::RandomState::new);
    let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
    let bits = u128::from(keys.hash_one((n, 0u8))) << 64 | u128::from(keys.hash_one((n, 1u8)));
    const HEX: &[u8; 16] = b"0123456789abcdef";
    (0..32)
        .rev()
        .map(|digit| char::from(HEX[(bits >> (4 * digit)) as usize & 0xf]))
        .collect()
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
