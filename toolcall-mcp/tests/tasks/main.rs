//! Durable tasks (`io.modelcontextprotocol/tasks`): a high-risk call that
//! waits for a person is a task kept in the store. rmcp's own client
//! drives them (`tasks/get`, `tasks/update`, `tasks/cancel`) against
//! servers that stand for replicas and restarts: dispatchers of their own
//! over one SQLite file, one backend counting what really ran.

use std::sync::Arc;

use std::sync::atomic::Ordering;

use std::time::Duration;

use toolcall::store::prelude::*;

#[cfg(feature = "http")]
use rmcp::ServiceExt as _;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ElicitResult, ElicitationAction, ErrorCode, GetTaskParams, Implementation, InitializeResult,
    InputRequest, InputResponses, ProtocolVersion, ServerCapabilities, TaskPayload, TaskStatus,
    UpdateTaskParams,
};

use rmcp::service::{RoleClient, RoleServer, RunningService, ServiceError, serve_directly};

use serde_json::{Value, json};

use toolcall::store::{ApprovalDecision, ApprovalUse, DecideOutcome, PendingApproval, now_ms};

use toolcall::{Approvals, Caller, Dispatcher, Policy, tools};

use toolcall_mcp::{FrameGuard, McpServer, Options};

use toolcall_sqlite::SqliteStore;

use toolcall_testkit::bank::{Bank, transfer};

// ------------------------------------------------------------------ bank

type Replica = Arc<Dispatcher<Bank, SqliteStore>>;

/// A replica: a dispatcher of its own over the SQLite file at `path`, with
/// the callers `agent` and `intruder`.
fn replica(bank: &Arc<Bank>, path: &std::path::Path, approvals: Approvals) -> Replica {
    let everything = || Policy::new().allow(["transfer"]);
    Arc::new(
        Dispatcher::builder(tools![transfer].unwrap(), Arc::clone(bank))
            .callers([
                Caller::new("agent", everything()),
                Caller::new("intruder", everything()),
            ])
            .approvals(approvals)
            .approval_ttl(Duration::from_secs(600))
            .store(SqliteStore::open(path).unwrap())
            .build()
            .unwrap(),
    )
}

/// One test's fleet: a SQLite file its replicas share (removed at the
/// end), and the backend they all call.
struct Fleet {
    path: std::path::PathBuf,
    bank: Arc<Bank>,
}

impl Fleet {
    fn new(name: &str) -> Fleet {
        let dir = std::env::temp_dir().join(format!(
            "toolcall-mcp-tasks-{name}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Fleet {
            path: dir.join("store.db"),
            bank: Arc::default(),
        }
    }

    /// A replica started now.
    fn replica(&self, approvals: Approvals) -> Replica {
        replica(&self.bank, &self.path, approvals)
    }

    /// The store as the inbox, another process, opens it.
    fn inbox(&self) -> SqliteStore {
        SqliteStore::open(&self.path).unwrap()
    }

    fn transfers(&self) -> u64 {
        self.bank.transfers()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

// ------------------------------------------------------------------ client

/// A client on protocol 2026-07-28, declaring the tasks extension, and the
/// elicitation capability when `elicits`. It is never sent an
/// `elicitation/create`: a task carries its question in `inputRequests`.
#[derive(Clone)]
struct TaskClient {
    elicits: bool,
    tasks: bool,
}

impl rmcp::ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        let builder = ClientCapabilities::builder;
        let capabilities = match (self.elicits, self.tasks) {
            (true, true) => builder().enable_elicitation().enable_tasks().build(),
            (true, false) => builder().enable_elicitation().build(),
            (false, true) => builder().enable_tasks().build(),
            (false, false) => builder().build(),
        };
        ClientConfig::new(capabilities, Implementation::new("tasks-test", "0.0.0"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        panic!("a task asks its question in inputRequests, never with elicitation/create")
    }
}

type Client = RunningService<RoleClient, TaskClient>;

/// Connects `client` to a server over `replica` whose calls are `caller`'s,
/// in the shared conversation `desk`, over an in-process pipe.
/// A fleet named `name`, one replica of it deciding by `approvals`, and
/// `client` connected to that replica as `agent`.
fn fleet_with_agent(
    name: &str,
    approvals: Approvals,
    client: TaskClient,
) -> (Fleet, Replica, Client) {
    let fleet = Fleet::new(name);
    let one = fleet.replica(approvals);
    let client = connect(&one, "agent", client);
    (fleet, one, client)
}

fn connect(replica: &Replica, caller: &str, client: TaskClient) -> Client {
    connect_in(replica, caller, client, "desk")
}

/// As [`connect`], in the shared conversation `conversation`.
fn connect_in(replica: &Replica, caller: &str, client: TaskClient, conversation: &str) -> Client {
    let caller = replica.caller(caller).unwrap().clone();
    serve_as(replica, caller, client, conversation)
}

/// Connects `client` to a server over `replica` whose calls are `caller`'s,
/// in the shared conversation `conversation`, over an in-process pipe.
fn serve_as(
    replica: &Replica,
    caller: toolcall::Caller,
    client: TaskClient,
    conversation: &str,
) -> Client {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server_io);
    let client_config = rmcp::ClientHandler::get_info(&client);
    let mut server_config = InitializeResult::new(
        ServerCapabilities::builder()
            .enable_tools()
            .enable_tasks()
            .build(),
    );
    server_config.protocol_version = ProtocolVersion::V_2026_07_28;
    let server =
        McpServer::new(Arc::clone(replica), Options::conversation(conversation)).caller(caller);
    keep(serve_directly(
        server,
        FrameGuard::new(read, write),
        Some(client_config),
    ));
    serve_directly(client, client_io, Some(server_config.into()))
}

/// Keeps a server serving until its client goes.
fn keep<S: rmcp::ServerHandler>(server: RunningService<RoleServer, S>) {
    tokio::spawn(server.waiting());
}

fn transfer_call() -> CallToolRequestParams {
    let Value::Object(args) = json!({"to": "ACC-7", "amount_cents": 2590}) else {
        unreachable!()
    };
    CallToolRequestParams::new("transfer").with_arguments(args)
}

/// Calls `transfer` and answers the task the server made of it.
async fn start_transfer(client: &Client) -> rmcp::model::Task {
    start_transfer_of(client, 2590).await
}

/// What `tasks/get` of a task `client` may not see answers: an error.
async fn task_error(client: &Client, id: &str) -> String {
    let peer = client.peer();
    peer.get_task(GetTaskParams::new(id))
        .await
        .unwrap_err()
        .to_string()
}

async fn get(client: &Client, id: &str) -> rmcp::model::DetailedTask {
    client
        .peer()
        .get_task(GetTaskParams::new(id))
        .await
        .expect("tasks/get answers")
        .task
}

/// The `ToolResult` JSON of a completed task.
fn completed(task: &rmcp::model::DetailedTask) -> Value {
    match &task.payload {
        TaskPayload::Completed { result } => result["structuredContent"].clone(),
        other => panic!("the task is not completed: {other:?}"),
    }
}

/// Answers the task's approval question, yes or no, with `tasks/update`.
async fn update(client: &Client, id: &str, approve: bool) -> Result<(), ServiceError> {
    client
        .peer()
        .update_task(UpdateTaskParams::new(id, answer(approve)))
        .await
}

async fn cancel(client: &Client, id: &str) -> Result<(), ServiceError> {
    client.peer().cancel_task(CancelTaskParams::new(id)).await
}

fn answer(approve: bool) -> InputResponses {
    let answer =
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": approve}));
    InputResponses::from([("approval".to_owned(), serde_json::to_value(answer).unwrap())])
}

fn person(approved: bool) -> ApprovalDecision {
    ApprovalDecision {
        approved,
        by: "ana@example.com".into(),
        note: if approved {
            String::new()
        } else {
            "not this one".into()
        },
        edited_arguments: None,
        decided_ms: now_ms(),
        lasts_until_ms: None,
    }
}

/// A person's yes to `id`, given in the inbox.
async fn person_approves(store: &SqliteStore, id: &str) -> DecideOutcome {
    store
        .decide_approval(&toolcall::store::DecisionWrite {
            id,
            decision: &person(true),
            now_ms: now_ms(),
        })
        .await
        .unwrap()
}

/// The error of a request refused as invalid params.
fn invalid_params(refused: Result<(), ServiceError>) -> rmcp::ErrorData {
    let Err(ServiceError::McpError(error)) = refused else {
        panic!("refused: {refused:?}");
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    error
}

const ASKING: TaskClient = TaskClient {
    elicits: true,
    tasks: true,
};

const POLLING: TaskClient = TaskClient {
    elicits: false,
    tasks: true,
};

/// Calls `transfer` of `amount_cents` and answers the task made of it.
async fn start_transfer_of(client: &Client, amount_cents: i64) -> rmcp::model::Task {
    let Value::Object(args) = json!({"to": "ACC-7", "amount_cents": amount_cents}) else {
        unreachable!()
    };
    let call = CallToolRequestParams::new("transfer").with_arguments(args);
    match client.peer().call_tool_once(call).await.unwrap() {
        CallToolResponse::Task(created) => created.task,
        other => panic!("a call that waits for a person is a task: {other:?}"),
    }
}

/// The model's retry of the transfer through `client` is replayed, and the
/// fleet's bank moved money once.
async fn retry_replays_the_one_transfer<H: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, H>,
    fleet: &Fleet,
) {
    let retried = client.call_tool(transfer_call()).await.unwrap();
    assert_eq!(retried.structured_content.unwrap()["replayed"], true);
    assert_eq!(fleet.transfers(), 1);
}

/// Calls `transfer` as `transfer_call` makes it, which must answer at once
/// (`why` says why no task): the result's structured content.
async fn transfer_at_once(client: &Client, why: &str) -> Value {
    match client.peer().call_tool_once(transfer_call()).await.unwrap() {
        CallToolResponse::Complete(result) => result.structured_content.unwrap(),
        other => panic!("{why}: {other:?}"),
    }
}

/// Uses the approval up, as a call that takes it and then dies does.
async fn take(store: &SqliteStore, id: &str) {
    let binding = toolcall::store::Binding {
        session: "desk",
        caller: "agent",
        tool: Some("transfer"),
        digest: None,
        requester: toolcall::store::Requester::Anyone,
    };
    assert!(matches!(
        store
            .take_approval(&ApprovalUse {
                id,
                binding: &binding,
                now_ms: now_ms()
            })
            .await
            .unwrap(),
        toolcall::store::TakeApproval::Taken(_)
    ));
}

mod answers;
mod owners;
mod replicas;
