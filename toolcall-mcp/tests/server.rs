//! The MCP server against rmcp's own client, over an in-process pipe: what
//! the client sees, and what the backend really did.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, InitializeResult, ProtocolVersion,
    ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleClient, RoleServer, RunningService, serve_directly};
use rmcp::{ClientHandler, ErrorData, ServiceExt as _};
use serde_json::{Map, Value, json};
use toolcall::{Ctx, Dispatcher, Policy, Rejection, ToolError, tool, tools};
use toolcall_mcp::{McpServer, Options};

// ------------------------------------------------------------------ tools

/// A bank account with a counter of the transfers really made.
#[derive(Debug)]
struct Bank {
    balance_cents: AtomicI64,
    transfers: AtomicU64,
}

impl Bank {
    fn new() -> Arc<Bank> {
        Arc::new(Bank {
            balance_cents: AtomicI64::new(100_000),
            transfers: AtomicU64::new(0),
        })
    }

    fn transfers(&self) -> u64 {
        self.transfers.load(Ordering::SeqCst)
    }
}

/// Read the balance and the number of transfers made. No side effects.
#[tool]
fn balance(ctx: &Ctx<Bank>) -> Result<Value, Rejection> {
    Ok(json!({
        "balance_cents": ctx.state.balance_cents.load(Ordering::SeqCst),
        "transfers": ctx.state.transfers(),
    }))
}

/// Send money to another account. Amount in cents.
#[tool(side_effect, high_risk)]
fn transfer(
    ctx: &Ctx<Bank>,
    /// The receiving account, for example ACC-7.
    to: String,
    /// Amount in minor units (cents). 25.90 is 2590.
    #[arg(min = 1)]
    amount_cents: i64,
) -> Result<Value, ToolError> {
    ctx.state.transfers.fetch_add(1, Ordering::SeqCst);
    let left = ctx
        .state
        .balance_cents
        .fetch_sub(amount_cents, Ordering::SeqCst)
        - amount_cents;
    Ok(json!({"to": to, "amount_cents": amount_cents, "balance_cents": left}))
}

fn dispatcher(bank: &Arc<Bank>) -> Arc<Dispatcher<Bank>> {
    let registry = tools![balance, transfer].unwrap();
    Arc::new(
        Dispatcher::builder(registry, Arc::clone(bank))
            .build()
            .unwrap(),
    )
}

// ------------------------------------------------------------------ client

/// An MCP client whose person answers every approval question the same
/// way, or a client that cannot ask anyone (`answer: None`).
#[derive(Clone)]
struct Person {
    answer: Option<ElicitResult>,
    declares_elicitation: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Person {
    fn answering(answer: ElicitResult) -> Self {
        Person {
            answer: Some(answer),
            declares_elicitation: true,
            asked: Arc::default(),
        }
    }

    fn approving() -> Self {
        Person::answering(
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true})),
        )
    }

    fn unreachable() -> Self {
        Person {
            answer: None,
            declares_elicitation: false,
            asked: Arc::default(),
        }
    }

    /// A client that declares elicitation but fails to ask anyone.
    fn broken() -> Self {
        Person {
            answer: None,
            declares_elicitation: true,
            asked: Arc::default(),
        }
    }

    fn questions(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }

    fn config(&self) -> ClientConfig {
        let capabilities = if self.declares_elicitation {
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
            return Err(ErrorData::invalid_params("expected a form", None));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["properties"]["approve"]["type"], "boolean");
        assert_eq!(schema["required"], json!(["approve"]));
        self.asked.lock().unwrap().push(message);
        match &self.answer {
            Some(answer) => Ok(answer.clone()),
            None => Err(ErrorData::invalid_request("nobody to ask", None)),
        }
    }
}

type Client = RunningService<RoleClient, Person>;

/// Connects `person`'s client to a server over `dispatcher` through an
/// in-process pipe, with the `initialize` handshake.
async fn connect(
    dispatcher: Arc<Dispatcher<Bank>>,
    person: &Person,
) -> (
    Client,
    tokio::task::JoinHandle<Result<(), toolcall_mcp::Error>>,
) {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(toolcall_mcp::serve(
        dispatcher,
        Options::new("mcp-test"),
        server_io,
    ));
    let client = person.clone().serve(client_io).await.unwrap();
    (client, server)
}

/// Closes the client and checks that the server then stops cleanly.
async fn hang_up(client: Client, server: tokio::task::JoinHandle<Result<(), toolcall_mcp::Error>>) {
    client.cancel().await.unwrap();
    server
        .await
        .unwrap()
        .expect("the server stops without error when the client leaves");
}

fn arguments(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

async fn call(client: &Client, tool: &'static str, args: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments(args)))
        .await
        .expect("every outcome is a tool result, never a protocol error")
}

/// The `ToolResult` JSON of an MCP result (its `structuredContent`), checked
/// against its text block and its `isError`.
fn result_json(result: &CallToolResult) -> Value {
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

fn code(result: &Value) -> &str {
    result.get("code").and_then(Value::as_str).unwrap_or("OK")
}

fn refund_args() -> Value {
    json!({"to": "ACC-7", "amount_cents": 2590})
}

// ------------------------------------------------------------------ tests

#[tokio::test]
async fn lists_the_tools_with_schemas_and_annotations() {
    let bank = Bank::new();
    let person = Person::unreachable();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let info = client.peer_info().expect("initialized");
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolcall");
    assert!(info.capabilities.tools.is_some());

    let tools = client.list_all_tools().await.unwrap();
    let listed: Vec<Value> = tools
        .iter()
        .map(|tool| serde_json::to_value(tool).unwrap())
        .collect();
    let names: Vec<&str> = listed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["balance", "transfer"]);

    let read = &listed[0];
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    assert_eq!(read["annotations"]["destructiveHint"], false);

    let write = &listed[1];
    assert_eq!(
        write["description"],
        "Send money to another account. Amount in cents."
    );
    assert_eq!(write["annotations"]["readOnlyHint"], false);
    assert_eq!(write["annotations"]["destructiveHint"], true);
    assert_eq!(write["annotations"]["idempotentHint"], true);
    assert_eq!(write["annotations"]["openWorldHint"], true);
    assert_eq!(
        write["inputSchema"]["properties"]["amount_cents"]["type"],
        "integer"
    );
    assert_eq!(write["inputSchema"]["additionalProperties"], false);

    hang_up(client, server).await;
}

#[tokio::test]
async fn lists_only_what_the_default_caller_may_call() {
    let bank = Bank::new();
    let registry = tools![balance, transfer].unwrap();
    let dispatcher = Arc::new(
        Dispatcher::builder(registry, Arc::clone(&bank))
            .policy(Policy::new().allow(["balance"]))
            .build()
            .unwrap(),
    );
    let person = Person::approving();
    let (client, server) = connect(dispatcher, &person).await;

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["balance"]);

    let refused = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&refused), "TOOL_NOT_ALLOWED");
    assert!(person.questions().is_empty());
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_float_for_an_integer_is_a_tool_error_naming_the_field() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let result = call(
        &client,
        "transfer",
        json!({"to": "ACC-7", "amount_cents": 25.9}),
    )
    .await;
    assert_eq!(result.is_error, Some(true));
    let structured = result_json(&result);
    assert_eq!(code(&structured), "INVALID_ARGUMENTS");
    assert!(
        structured["message"]
            .as_str()
            .unwrap()
            .contains("amount_cents"),
        "{structured}"
    );
    assert!(
        person.questions().is_empty(),
        "nobody is asked about an invalid call"
    );
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn an_unknown_tool_is_a_tool_error_not_a_protocol_error() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let result = call(&client, "wire_everything", json!({})).await;
    let structured = result_json(&result);
    assert_eq!(code(&structured), "UNKNOWN_TOOL");
    assert_eq!(
        structured["data"]["available"],
        json!(["balance", "transfer"])
    );

    // A call without arguments at all is a call with `{}`.
    let read = client
        .call_tool(CallToolRequestParams::new("balance"))
        .await
        .unwrap();
    assert_eq!(read.is_error, Some(false));
    assert_eq!(result_json(&read)["data"]["transfers"], 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_declined_approval_executes_nothing() {
    let bank = Bank::new();
    let person = Person::answering(ElicitResult::new(ElicitationAction::Decline));
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let result = call(&client, "transfer", refund_args()).await;
    let structured = result_json(&result);
    assert_eq!(code(&structured), "CONFIRMATION_DENIED", "{structured}");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(bank.transfers(), 0);

    let questions = person.questions();
    assert_eq!(questions.len(), 1);
    assert!(questions[0].contains("transfer"), "{}", questions[0]);
    assert!(
        questions[0].contains("\"amount_cents\": 2590"),
        "{}",
        questions[0]
    );
    assert!(
        questions[0].contains("\"to\": \"ACC-7\""),
        "{}",
        questions[0]
    );

    let read = result_json(&call(&client, "balance", json!({})).await);
    assert_eq!(
        read["data"],
        json!({"balance_cents": 100_000, "transfers": 0})
    );

    hang_up(client, server).await;
}

#[tokio::test]
async fn accepting_without_saying_yes_or_cancelling_executes_nothing() {
    for answer in [
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": false})),
        ElicitResult::new(ElicitationAction::Accept),
        ElicitResult::new(ElicitationAction::Cancel),
    ] {
        let bank = Bank::new();
        let person = Person::answering(answer);
        let (client, server) = connect(dispatcher(&bank), &person).await;

        let result = result_json(&call(&client, "transfer", refund_args()).await);
        assert_eq!(code(&result), "CONFIRMATION_DENIED", "{result}");
        assert_eq!(bank.transfers(), 0);

        hang_up(client, server).await;
    }
}

#[tokio::test]
async fn an_accepted_approval_executes_once_and_the_repeat_is_replayed() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let first = call(&client, "transfer", refund_args()).await;
    assert_eq!(first.is_error, Some(false));
    let first = result_json(&first);
    assert_eq!(
        first["data"],
        json!({"to": "ACC-7", "amount_cents": 2590, "balance_cents": 97_410})
    );
    assert_eq!(first.get("replayed"), None);
    assert_eq!(bank.transfers(), 1);
    assert_eq!(person.questions().len(), 1);

    // The model retries the identical call (a lost response, a confused
    // loop): the stored result comes back, and nobody is asked again.
    let again = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["data"], first["data"]);
    assert_eq!(bank.transfers(), 1);
    assert_eq!(person.questions().len(), 1);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_client_without_elicitation_gets_confirmation_required() {
    let bank = Bank::new();
    let person = Person::unreachable();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let result = call(&client, "transfer", refund_args()).await;
    assert_eq!(result.is_error, Some(true));
    let structured = result_json(&result);
    assert_eq!(code(&structured), "CONFIRMATION_REQUIRED");
    assert_eq!(structured["data"]["pending"], refund_args());
    assert!(structured["confirmation_id"].is_string());
    assert!(person.questions().is_empty());
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn a_failed_question_leaves_the_call_waiting() {
    let bank = Bank::new();
    let person = Person::broken();
    let (client, server) = connect(dispatcher(&bank), &person).await;

    let result = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&result), "CONFIRMATION_REQUIRED", "{result}");
    assert_eq!(person.questions().len(), 1);
    assert_eq!(bank.transfers(), 0);

    hang_up(client, server).await;
}

#[tokio::test]
async fn the_server_works_as_a_bare_handler_too() {
    let bank = Bank::new();
    let server = McpServer::new(
        dispatcher(&bank),
        Options::new("s").name("bank").version("9"),
    );
    assert_eq!(server.options().session, "s");
    let tools = server.tools().unwrap();
    assert_eq!(tools.len(), 2);
    let info = rmcp::ServerHandler::get_info(&server);
    assert_eq!(info.server_info.name, "bank");
    assert_eq!(info.server_info.version, "9");
}

// ------------------------------------------------- protocol 2026-07-28 (MRTR)

/// Connects without a handshake on protocol 2026-07-28, where the server may
/// not send requests: the approval question travels as `input_required`,
/// and rmcp's client answers it and retries by itself.
async fn connect_modern(
    dispatcher: Arc<Dispatcher<Bank>>,
    person: &Person,
) -> (Client, RunningService<RoleServer, McpServer<Bank>>) {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let client_config = person
        .config()
        .with_protocol_version(ProtocolVersion::V_2026_07_28);
    let mut server_config =
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
    server_config.protocol_version = ProtocolVersion::V_2026_07_28;
    let server = serve_directly::<RoleServer, _, _, _, _>(
        McpServer::new(dispatcher, Options::new("mcp-test")),
        server_io,
        Some(client_config),
    );
    let client = serve_directly::<RoleClient, _, _, _, _>(
        person.clone(),
        client_io,
        Some(server_config.into()),
    );
    (client, server)
}

#[tokio::test]
async fn on_2026_07_28_the_approval_is_asked_as_input_required() {
    let bank = Bank::new();
    let person = Person::approving();
    let (client, server) = connect_modern(dispatcher(&bank), &person).await;

    let first = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&first), "OK", "{first}");
    assert_eq!(bank.transfers(), 1);
    assert_eq!(person.questions().len(), 1);
    assert!(person.questions()[0].contains("\"amount_cents\": 2590"));

    let again = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(again["replayed"], true);
    assert_eq!(bank.transfers(), 1);
    assert_eq!(person.questions().len(), 1);

    client.cancel().await.unwrap();
    server.cancel().await.unwrap();
}

#[tokio::test]
async fn on_2026_07_28_a_declined_approval_executes_nothing() {
    let bank = Bank::new();
    let person = Person::answering(ElicitResult::new(ElicitationAction::Decline));
    let (client, server) = connect_modern(dispatcher(&bank), &person).await;

    let result = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&result), "CONFIRMATION_DENIED", "{result}");
    assert_eq!(bank.transfers(), 0);

    // A forged answer to an approval that does not exist runs nothing either.
    let mut responses = rmcp::model::InputResponses::new();
    responses.insert(
        "approval".to_owned(),
        json!({"action": "accept", "content": {"approve": true}}),
    );
    let forged = client
        .call_tool_once(
            CallToolRequestParams::new("transfer")
                .with_arguments(arguments(refund_args()))
                .with_input_responses(responses)
                .with_request_state("toolcall-approval:made-up"),
        )
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::Complete(forged) = forged else {
        panic!("expected a complete result");
    };
    assert_eq!(code(&result_json(&forged)), "CONFIRMATION_INVALID");
    assert_eq!(bank.transfers(), 0);

    client.cancel().await.unwrap();
    server.cancel().await.unwrap();
}

#[tokio::test]
async fn on_2026_07_28_a_client_without_elicitation_gets_confirmation_required() {
    let bank = Bank::new();
    let person = Person::unreachable();
    let (client, server) = connect_modern(dispatcher(&bank), &person).await;

    let result = result_json(&call(&client, "transfer", refund_args()).await);
    assert_eq!(code(&result), "CONFIRMATION_REQUIRED");
    assert_eq!(bank.transfers(), 0);

    client.cancel().await.unwrap();
    server.cancel().await.unwrap();
}
