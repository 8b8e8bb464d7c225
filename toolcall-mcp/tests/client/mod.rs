//! The client side the in-process MCP tests share: rmcp's client with a
//! person behind it, the pipe that joins it to a server, and the reading
//! of what comes back.

// Each test file is a crate of its own and uses only part of this.
#![allow(dead_code)]

use std::any::Any;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, InitializeResult, ProtocolVersion,
    RequestMetaObject, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService, serve_directly};
use rmcp::{ClientHandler, ErrorData, ServiceExt as _};
use serde_json::{Map, Value, json};
use toolcall::Dispatcher;
use toolcall::store::Store;
use toolcall_mcp::{FrameGuard, McpServer, Options};
use toolcall_testkit::bank::Bank;

/// What the person behind a client does when asked.
#[derive(Clone)]
pub enum Behaviour {
    /// Answers every approval question the same way.
    Answer(ElicitResult),
    /// The client fails to ask anyone.
    Fail,
    /// Nobody ever answers.
    Hang,
    /// Answers the questions with these answers in turn, then the last one
    /// for every further question.
    InTurn(Arc<Mutex<Vec<ElicitResult>>>),
}

/// An MCP client with a person behind it, or a client that cannot ask
/// anyone (`behaviour: None`: it declares no elicitation). It records what
/// it was asked; the tests check it (an assertion in the handler would only
/// fail the client's task, and leave the server waiting).
#[derive(Clone)]
pub struct Person {
    behaviour: Option<Behaviour>,
    asked: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Person {
    pub fn with(behaviour: Option<Behaviour>) -> Self {
        Person {
            behaviour,
            asked: Arc::default(),
        }
    }

    pub fn answering(answer: ElicitResult) -> Self {
        Person::with(Some(Behaviour::Answer(answer)))
    }

    pub fn approving() -> Self {
        Person::answering(
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true})),
        )
    }

    /// A person who answers the questions in turn with `answers`.
    pub fn in_turn(mut answers: Vec<ElicitResult>) -> Self {
        answers.reverse();
        Person::with(Some(Behaviour::InTurn(Arc::new(Mutex::new(answers)))))
    }

    pub fn unreachable() -> Self {
        Person::with(None)
    }

    /// A client that declares elicitation but fails to ask anyone.
    pub fn broken() -> Self {
        Person::with(Some(Behaviour::Fail))
    }

    /// A client that declares elicitation, behind which nobody answers.
    pub fn absent() -> Self {
        Person::with(Some(Behaviour::Hang))
    }

    /// The messages of the questions asked so far, each checked to be a
    /// form with one required boolean `approve`.
    pub fn questions(&self) -> Vec<String> {
        let asked = self.asked.lock().unwrap().clone();
        asked
            .into_iter()
            .map(|(message, schema)| {
                assert_eq!(
                    schema["properties"]["approve"]["type"], "boolean",
                    "{schema}"
                );
                assert_eq!(schema["required"], json!(["approve"]), "{schema}");
                message
            })
            .collect()
    }

    pub fn config(&self) -> ClientConfig {
        let capabilities = if self.behaviour.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("test-client", "0.0.0"))
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        self.config()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            self.asked
                .lock()
                .unwrap()
                .push(("not a form".to_owned(), Value::Null));
            return Err(ErrorData::invalid_params("expected a form", None));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
        self.asked.lock().unwrap().push((message, schema));
        match &self.behaviour {
            Some(Behaviour::Answer(answer)) => Ok(answer.clone()),
            Some(Behaviour::InTurn(answers)) => {
                let mut answers = answers.lock().unwrap();
                let answer = if answers.len() > 1 {
                    answers.pop()
                } else {
                    answers.last().cloned()
                };
                answer.ok_or_else(|| ErrorData::invalid_request("no answer", None))
            }
            Some(Behaviour::Hang) => std::future::pending().await,
            Some(Behaviour::Fail) | None => Err(ErrorData::invalid_request("nobody to ask", None)),
        }
    }
}

pub type Client = RunningService<RoleClient, Person>;
pub type Server = tokio::task::JoinHandle<Result<(), toolcall_mcp::Error>>;

/// The server's end of an in-process pipe, as `serve_stdio` reads standard
/// input and output: through a [`FrameGuard`].
pub fn guarded(
    io: tokio::io::DuplexStream,
) -> FrameGuard<
    tokio::io::ReadHalf<tokio::io::DuplexStream>,
    tokio::io::WriteHalf<tokio::io::DuplexStream>,
> {
    let (read, write) = tokio::io::split(io);
    FrameGuard::new(read, write)
}

/// A server over `dispatcher` with `options` on the server's end of a new
/// in-process pipe, [`guarded`]: the client's end, and the server's task.
pub fn serve_piped<S: Any + Send + Sync, St: Store + 'static>(
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
) -> (tokio::io::DuplexStream, Server) {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(toolcall_mcp::serve(dispatcher, options, guarded(server_io)));
    (client_io, server)
}

/// Connects `person`'s client to a server over `dispatcher` with `options`,
/// through an in-process pipe, with the `initialize` handshake.
pub async fn connect_with<St: Store + 'static>(
    dispatcher: Arc<Dispatcher<Bank, St>>,
    options: Options,
    person: &Person,
) -> (Client, Server) {
    let (client_io, server) = serve_piped(dispatcher, options);
    let client = person.clone().serve(client_io).await.unwrap();
    (client, server)
}

/// Connects without a handshake on protocol 2026-07-28, where the server may
/// not send requests: the approval question travels as `input_required`,
/// and rmcp's client answers it with the person's answer and retries by
/// itself.
pub async fn connect_modern_with<St: Store + 'static>(
    dispatcher: Arc<Dispatcher<Bank, St>>,
    options: Options,
    person: &Person,
) -> (Client, RunningService<RoleServer, McpServer<Bank, St>>) {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let client_config = person
        .config()
        .with_protocol_version(ProtocolVersion::V_2026_07_28);
    let mut server_config =
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
    server_config.protocol_version = ProtocolVersion::V_2026_07_28;
    let server = serve_directly::<RoleServer, _, _, _, _>(
        McpServer::new(dispatcher, options),
        guarded(server_io),
        Some(client_config),
    );
    let client = serve_directly::<RoleClient, _, _, _, _>(
        person.clone(),
        client_io,
        Some(server_config.into()),
    );
    (client, server)
}

/// Closes the client and checks that the server then stops cleanly.
pub async fn hang_up(client: Client, server: Server) {
    client.cancel().await.unwrap();
    server
        .await
        .unwrap()
        .expect("the server stops without error when the client leaves");
}

/// Ends a connection made by [`connect_modern_with`]: both sides stop
/// cleanly.
pub async fn hang_up_modern<S: rmcp::Service<RoleServer>>(
    client: Client,
    server: RunningService<RoleServer, S>,
) {
    client.cancel().await.unwrap();
    server.cancel().await.unwrap();
}

pub fn arguments(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

/// A `tools/call` request, naming `conversation` in its `_meta` when given.
pub fn request(
    tool: &'static str,
    args: Value,
    conversation: Option<Value>,
) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(tool).with_arguments(arguments(args));
    if let Some(conversation) = conversation {
        let mut meta = Map::new();
        meta.insert("toolcall/conversation".into(), conversation);
        params.meta = Some(RequestMetaObject::from(meta));
    }
    params
}

/// The `ToolResult` JSON of an MCP result (its `structuredContent`), checked
/// against its text block and its `isError`.
pub fn result_json(result: &CallToolResult) -> Value {
    let structured = result
        .structured_content
        .clone()
        .expect("every result carries structuredContent");
    assert_eq!(result.content.len(), 1);
    let text = &result.content[0].as_text().expect("a text block").text;
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        structured,
        "the text is the model text of the same result"
    );
    assert_eq!(
        result.is_error,
        Some(structured["ok"] != json!(true)),
        "isError is exactly `not ok`"
    );
    structured
}

pub fn code(result: &Value) -> &str {
    result.get("code").and_then(Value::as_str).unwrap_or("OK")
}

/// Whether a result is a stored answer, replayed (not a run).
pub fn replayed(result: &Value) -> bool {
    result.get("replayed") == Some(&json!(true))
}

pub fn refund_args() -> Value {
    json!({"to": "ACC-7", "amount_cents": 2590})
}
