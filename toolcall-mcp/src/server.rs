//! The MCP handler: `tools/list`, `tools/call`, and the person's approval
//! of high-risk calls through elicitation.

use std::any::Any;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    Implementation, InputRequest, InputRequests, InputRequiredResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer, ServiceError};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use toolcall_core::{Call, Code, Decision, Dispatcher, MemoryStore, Store, ToolResult};

use crate::Options;

/// Who the audit records as the approver of a decision taken through MCP.
const APPROVER: &str = "mcp-elicitation";

/// The key of the approval question in an `input_required` result.
const APPROVAL_INPUT: &str = "approval";

/// How the `requestState` of an approval question starts; the confirmation
/// id follows.
const APPROVAL_STATE: &str = "toolcall-approval:";

/// The property of the approval form that says yes.
const APPROVE_FIELD: &str = "approve";

/// An MCP server over a [`Dispatcher`]: implements rmcp's
/// [`ServerHandler`], so any rmcp transport can serve it.
///
/// Cloning is cheap: the clones share the dispatcher.
///
/// ```no_run
/// use std::sync::Arc;
/// use toolcall_mcp::rmcp::ServiceExt as _;
/// use toolcall_mcp::{McpServer, Options};
///
/// # async fn run(dispatcher: toolcall_core::Dispatcher<()>) -> Result<(), Box<dyn std::error::Error>> {
/// let server = McpServer::new(Arc::new(dispatcher), Options::new("desk-42"));
/// let (ours, theirs) = tokio::io::duplex(64 * 1024);
/// # drop(theirs);
/// let running = server.serve(ours).await?;
/// running.waiting().await?;
/// # Ok(())
/// # }
/// ```
pub struct McpServer<S, St = MemoryStore> {
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Arc<Options>,
}

impl<S, St> Clone for McpServer<S, St> {
    fn clone(&self) -> Self {
        McpServer {
            dispatcher: Arc::clone(&self.dispatcher),
            options: Arc::clone(&self.options),
        }
    }
}

impl<S, St> std::fmt::Debug for McpServer<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<S: Any + Send + Sync, St: Store> McpServer<S, St> {
    /// A server whose calls run through `dispatcher`, in the session of `options`.
    pub fn new(dispatcher: Arc<Dispatcher<S, St>>, options: Options) -> Self {
        McpServer {
            dispatcher,
            options: Arc::new(options),
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
        let session = self.options.session.as_str();
        let tool = request.name.as_ref();

        // The retry of an approval question asked as `input_required`: the
        // answer decides the pending call; the call is not made again.
        if modern
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
            let result = match answer {
                Some(answer) => self.decide(id, tool, &answer).await,
                None => {
                    let decision = Decision::new(id, session).tool(tool).by(APPROVER);
                    self.dispatcher
                        .deny(
                            decision,
                            "the MCP client did not return the person's answer",
                        )
                        .await
                }
            };
            return to_mcp(&result).into();
        }

        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let call_id = context.id.to_string();
        let result = self
            .dispatcher
            .execute(
                Call::new(tool, &arguments)
                    .session(session)
                    .call_id(&call_id),
            )
            .await;

        let Some(id) = result
            .confirmation_id
            .as_deref()
            .filter(|_| result.code == Code::ConfirmationRequired)
        else {
            return to_mcp(&result).into();
        };
        if !context
            .client_capabilities()
            .as_ref()
            .is_some_and(elicits_forms)
        {
            tracing::debug!(tool, "the MCP client cannot ask a person; the call waits");
            return to_mcp(&result).into();
        }
        let question = match approval_question(&result) {
            Ok(question) => question,
            Err(error) => {
                tracing::warn!(tool, %error, "could not build the approval question");
                return to_mcp(&result).into();
            }
        };

        if modern {
            let mut requests = InputRequests::new();
            requests.insert(
                APPROVAL_INPUT.to_owned(),
                InputRequest::Elicitation(ElicitRequest::new(question)),
            );
            return InputRequiredResult::new(Some(requests), Some(format!("{APPROVAL_STATE}{id}")))
                .into();
        }

        let ttl = self.dispatcher.settings().approval_ttl;
        match context
            .peer
            .create_elicitation_with_timeout(question, Some(ttl))
            .await
        {
            Ok(answer) => to_mcp(&self.decide(id, tool, &answer).await).into(),
            Err(ServiceError::Timeout { .. }) => {
                let decision = Decision::new(id, session).tool(tool).by(APPROVER);
                let denied = self
                    .dispatcher
                    .deny(decision, "nobody answered the approval request in time")
                    .await;
                to_mcp(&denied).into()
            }
            Err(error) => {
                // Nothing ran; the approval stays pending until it expires.
                tracing::warn!(tool, %error, "asking the person through MCP failed");
                to_mcp(&result).into()
            }
        }
    }

    /// Approves or denies the pending call `id` as the person answered.
    async fn decide(&self, id: &str, tool: &str, answer: &ElicitResult) -> ToolResult {
        let decision = Decision::new(id, &self.options.session)
            .tool(tool)
            .by(APPROVER);
        let said_yes = answer
            .content
            .as_ref()
            .and_then(|content| content.get(APPROVE_FIELD))
            .and_then(Value::as_bool)
            == Some(true);
        let reason = match answer.action {
            ElicitationAction::Accept if said_yes => {
                tracing::info!(tool, "a person approved the call through MCP");
                return self.dispatcher.approve(decision).await;
            }
            ElicitationAction::Decline => "the person declined it",
            ElicitationAction::Cancel => "the person dismissed the approval request",
            _ => "the person did not approve it",
        };
        tracing::info!(tool, reason, "the call was not approved");
        self.dispatcher.deny(decision, reason).await
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
}

/// Whether the client can show a person a form (an empty elicitation
/// capability means forms, as before modes existed).
fn elicits_forms(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .elicitation
        .as_ref()
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// The form that asks a person to approve the pending call of a
/// `CONFIRMATION_REQUIRED` result: its tool and exact arguments, and one
/// yes-or-no field.
fn approval_question(result: &ToolResult) -> Result<ElicitRequestParams, String> {
    let tool = &result.tool;
    let pending = result.data.get("pending").cloned().unwrap_or(Value::Null);
    let arguments = serde_json::to_string_pretty(&pending).map_err(|error| error.to_string())?;
    let message = format!(
        "The assistant wants to call {tool} with exactly these arguments:\n\n{arguments}\n\n\
         Approve this call? It runs once, as shown, only if you approve."
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
