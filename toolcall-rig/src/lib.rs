//! A toolcall dispatcher's tools as [rig](https://docs.rs/rig-core) tools:
//! every tool call a rig agent makes goes through the pipeline (validation,
//! policy, idempotency keys, approvals, audit).
//!
//! [`RigTools`] takes the application's [`Dispatcher`], the conversation the
//! calls belong to (their session: step budget, replays, taint, pending
//! approvals are scoped to it) and, optionally, the caller they run as.
//! It gives each tool the caller may use as a rig tool handler
//! ([`PipelineTool`], rig's [`Serve`] for the tool family), registered
//! ([`RigTools::registered`]), in a [`ToolSet`] ([`RigTools::toolset`]) or
//! in a [`ToolServer`] ([`RigTools::tool_server`]) that an agent takes with
//! `AgentBuilder::tool_server_handle`.
//!
//! It follows rig 0.44 (`rig-core` and `rig-agent`, where `ToolSet` and
//! the tool server live since rig split them). rig 0.46 and later declare
//! `rust-version` 1.97.1, newer than the Rust this workspace builds and
//! tests with (1.95): this crate moves to them when CI's toolchain does.
//!
//! * **Arguments** reach the pipeline as the text the model wrote
//!   (`Arguments::Raw`): rig hands a tool handler the raw JSON, and it is
//!   never parsed and written again on the way, so a member written twice
//!   is `INVALID_JSON` and `25.90` where cents are wanted is an
//!   `INVALID_ARGUMENTS` that names the field.
//! * **Results**: the model reads the whole [`ToolResult`], exactly
//!   [`ToolResult::to_model_text`], as from any other host. A result with
//!   `ok: true` is rig's success, with that text as its output; any other is
//!   rig's failed result, with that same text as the model's feedback
//!   (`INVALID_ARGUMENTS` and `INVALID_JSON` are rig's `InvalidArgs`,
//!   `UNKNOWN_TOOL` is `NotFound`, a call that waits for a person, or that the
//!   policy or a person refused, is rig's refusal, `TIMEOUT` is `Timeout`, the rest `Other`), so a
//!   rig hook or trace sees that the call did not run.
//! * **Definitions**: each tool's description, and its parameters schema as
//!   the Anthropic format carries it (JSON Schema, the bounds no provider
//!   takes removed: [`toolcall_providers::export`]), which every rig provider
//!   translates.
//! * **The conversation** is [`RigTools::new`]'s, or, for one run, the
//!   [`Conversation`] the application puts in the run's `ToolContext`
//!   (`agent.prompt(..).tool_context(context)`): one toolset can serve
//!   every conversation of an agent.
//! * **Approvals**: a high-risk call answers `CONFIRMATION_REQUIRED`. With
//!   an approver ([`RigTools::approver`]: a person asked, in host mode),
//!   its yes runs the call once ([`Dispatcher::approve`]) and its no denies
//!   it ([`Dispatcher::deny`]), and the model reads what came of it in the
//!   answer to its call. Without one (or in inbox mode, where only a
//!   decision in the store approves), the model reads that the call waits
//!   for a person, who decides in the approval inbox.
//!
//! ```no_run
//! use std::sync::Arc;
//! use rig_agent::AgentBuilder;
//! use toolcall_rig::RigTools;
//! # fn dispatcher() -> Arc<toolcall_core::Dispatcher<()>> { unimplemented!() }
//! # fn model() -> rig_core::DynModel<rig_core::operation::Completion> { unimplemented!() }
//!
//! // One conversation: the session every call of this agent runs in.
//! let tools = RigTools::new(dispatcher(), "chat-42");
//! let agent = AgentBuilder::new(model())
//!     .preamble("You are the shop's support agent.")
//!     .tool_server_handle(tools.tool_server().run())
//!     .build();
//! ```

use std::any::Any;
use std::sync::Arc;

use rig_agent::tool::server::ToolServer;
use rig_agent::tool::{RegisteredTool, ToolSet};
use rig_core::effect::{EffectKind, FamilyDescriptor, HandlerDescriptor, Outcome, family};
use rig_core::error::{ErrorKind, ErrorReport};
use rig_core::serve::{Dispatch, Reply, Serve};
use rig_core::tool::{ContextValue, ToolContext};
use rig_core::tool::{ToolErrorKind, ToolExecutionError, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolcall_core::store::{MemoryStore, Store};
use toolcall_core::{Approvals, Arguments, Call, Caller, Code, Decision, Dispatcher, ToolResult};

/// The conversation one rig run's tool calls belong to, in the run's
/// `ToolContext` (key `toolcall.conversation`): it stands for the session
/// [`RigTools::new`] names, for that run.
///
/// ```
/// use rig_core::tool::ToolContext;
/// use toolcall_rig::Conversation;
///
/// let mut context = ToolContext::new();
/// context.insert(Conversation("chat-42".to_owned())).unwrap();
/// // agent.prompt("...").tool_context(context)
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation(pub String);

impl ContextValue for Conversation {
    const KEY: &'static str = "toolcall.conversation";
}

/// Decides a call that waits for a person: the pipeline's
/// `CONFIRMATION_REQUIRED` answer in, yes or no out.
pub type Approver = dyn Fn(&ToolResult) -> bool + Send + Sync;
use toolcall_providers::Format;

/// A dispatcher's tools for rig, in one conversation, as one caller.
pub struct RigTools<S, St = MemoryStore> {
    shared: Arc<Shared<S, St>>,
}

impl<S, St> Clone for RigTools<S, St> {
    fn clone(&self) -> Self {
        RigTools {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<S, St> {
    dispatcher: Arc<Dispatcher<S, St>>,
    session: String,
    caller: Option<Caller>,
    approver: Option<Arc<Approver>>,
}

impl<S, St> RigTools<S, St>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    /// The dispatcher's tools, every call in conversation `session`, as the
    /// dispatcher's default caller.
    pub fn new(dispatcher: Arc<Dispatcher<S, St>>, session: impl Into<String>) -> Self {
        RigTools {
            shared: Arc::new(Shared {
                dispatcher,
                session: session.into(),
                caller: None,
                approver: None,
            }),
        }
    }

    /// Every call runs as `caller`, under its policy: only the tools it
    /// may use are offered. Give one the dispatcher knows
    /// ([`Dispatcher::caller`]), so that a decision on its approvals
    /// names the same caller.
    #[must_use]
    pub fn caller(self, caller: Caller) -> Self {
        RigTools {
            shared: Arc::new(Shared {
                dispatcher: Arc::clone(&self.shared.dispatcher),
                session: self.shared.session.clone(),
                caller: Some(caller),
                approver: self.shared.approver.clone(),
            }),
        }
    }

    /// Asks `approver` about each call that waits for a person (host mode):
    /// yes runs it once, no denies it, and the model reads what came of it.
    /// It gets the `CONFIRMATION_REQUIRED` result (the tool, and the
    /// arguments to approve in `data.pending`). In inbox mode it is not
    /// asked: only a decision in the store approves there.
    #[must_use]
    pub fn approver(self, approver: impl Fn(&ToolResult) -> bool + Send + Sync + 'static) -> Self {
        RigTools {
            shared: Arc::new(Shared {
                dispatcher: Arc::clone(&self.shared.dispatcher),
                session: self.shared.session.clone(),
                caller: self.shared.caller.clone(),
                approver: Some(Arc::new(approver)),
            }),
        }
    }

    /// The conversation the calls run in.
    pub fn session(&self) -> &str {
        &self.shared.session
    }

    /// One rig tool handler per tool the caller may use, in registration
    /// order.
    pub fn tools(&self) -> Vec<PipelineTool<S, St>> {
        let shared = &self.shared;
        let caller = shared
            .caller
            .as_ref()
            .unwrap_or_else(|| shared.dispatcher.default_caller());
        let definitions = toolcall_providers::definitions(
            shared.dispatcher.registry(),
            caller.policy(),
            Format::Anthropic,
        );
        definitions
            .as_array()
            .into_iter()
            .flatten()
            .map(|definition| PipelineTool {
                shared: Arc::clone(shared),
                name: definition["name"].as_str().unwrap_or_default().to_owned(),
                description: definition["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                parameters: definition["input_schema"].clone(),
            })
            .collect()
    }

    /// The tools as rig registrations, for a [`ToolSet`] or a [`ToolServer`].
    pub fn registered(&self) -> Vec<RegisteredTool> {
        self.tools()
            .into_iter()
            .filter_map(|tool| RegisteredTool::from_handler(tool).ok())
            .collect()
    }

    /// The tools as a rig [`ToolSet`].
    pub fn toolset(&self) -> ToolSet {
        let mut set = ToolSet::default();
        for tool in self.registered() {
            set.add_registered_tool(tool);
        }
        set
    }

    /// The tools in a rig [`ToolServer`]: `.run()` gives the handle an
    /// agent takes (`AgentBuilder::tool_server_handle`).
    pub fn tool_server(&self) -> ToolServer {
        self.registered()
            .into_iter()
            .fold(ToolServer::new(), ToolServer::registered_tool)
    }
}

/// One tool of the dispatcher as a rig tool handler: each call goes through
/// the pipeline in the conversation and as the caller its [`RigTools`] names.
pub struct PipelineTool<S, St = MemoryStore> {
    shared: Arc<Shared<S, St>>,
    name: String,
    description: String,
    parameters: Value,
}

impl<S, St> PipelineTool<S, St>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs one call with the arguments' text as the model wrote it, in
    /// `conversation` (the [`RigTools`]' session when `None`); the
    /// pipeline's result, after the approver (if any) decided a call that
    /// waits for a person.
    pub async fn call(&self, arguments: &str, conversation: Option<&str>) -> ToolResult {
        let shared = &self.shared;
        let session = conversation.unwrap_or(&shared.session);
        let mut call = Call::new(&self.name, Arguments::Raw(arguments)).session(session);
        if let Some(caller) = &shared.caller {
            call = call.caller(caller);
        }
        let result = shared.dispatcher.execute(call).await;
        let (Some(approver), Some(id)) = (&shared.approver, result.question_id.as_deref()) else {
            return result;
        };
        if result.code != Code::ConfirmationRequired
            || shared.dispatcher.settings().approvals == Approvals::Inbox
        {
            return result;
        }
        let mut decision = Decision::new(id, session).tool(&self.name).by("approver");
        if let Some(caller) = &shared.caller {
            decision = decision.caller(caller);
        }
        if approver(&result) {
            shared.dispatcher.approve(decision).await
        } else {
            shared
                .dispatcher
                .deny(decision, "the person asked declined")
                .await
        }
    }
}

impl<S, St> Serve for PipelineTool<S, St>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    type Family = family::Tool;

    fn descriptor(&self) -> HandlerDescriptor {
        HandlerDescriptor {
            key: rig_core::effect::tool_key(&self.name),
            family: FamilyDescriptor::Tool {
                name: self.name.clone(),
                description: self.description.clone(),
                parameters: self.parameters.clone(),
                embedding: None,
            },
            layers: Vec::new(),
        }
    }

    async fn serve(&self, kind: EffectKind, dispatch: Dispatch) -> Reply {
        match kind {
            EffectKind::ToolCall { name, args } if name == self.name => {
                let conversation = dispatch
                    .scope::<ToolContext>()
                    .and_then(|context| context.get::<Conversation>().ok().flatten());
                let result = self
                    .call(&args, conversation.as_ref().map(|c| c.0.as_str()))
                    .await;
                Reply::Outcome(Ok(Outcome::ToolResult {
                    result: rig_result(&result),
                }))
            }
            EffectKind::ToolCall { name, .. } => Reply::Outcome(Err(ErrorReport::new(
                ErrorKind::Internal,
                format!("the tool handler `{}` was asked to run `{name}`", self.name),
            ))),
            other => Reply::Outcome(Err(ErrorReport::new(
                ErrorKind::HandlerUnavailable,
                format!(
                    "the tool handler `{}` cannot serve a `{}` effect",
                    self.name,
                    other.name()
                ),
            ))),
        }
    }
}

/// The pipeline's result as rig's: the model reads
/// [`ToolResult::to_model_text`] either way; a result that is not `ok` is
/// rig's failed (or refused) result.
pub fn rig_result(result: &ToolResult) -> rig_core::tool::ToolResult {
    let text = result.to_model_text();
    if result.ok {
        return rig_core::tool::ToolResult::success(ToolOutput::text(text));
    }
    let message = format!("{}: {}", result.code, result.message);
    let error = match result.code {
        Code::InvalidArguments | Code::InvalidJson => {
            ToolExecutionError::new(ToolErrorKind::InvalidArgs, message)
        }
        Code::UnknownTool => ToolExecutionError::new(ToolErrorKind::NotFound, message),
        Code::Timeout => ToolExecutionError::new(ToolErrorKind::Timeout, message),
        Code::ConfirmationRequired
        | Code::ConfirmationDenied
        | Code::ToolNotAllowed
        | Code::PolicyLimit => ToolExecutionError::refused(message),
        _ => ToolExecutionError::new(ToolErrorKind::Other, message),
    };
    rig_core::tool::ToolResult::failed(error.with_model_feedback(text))
}
