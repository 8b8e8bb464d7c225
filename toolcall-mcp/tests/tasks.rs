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
use toolcall::store::{ApprovalDecision, DecideOutcome, PendingApproval, now_ms};
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

const ASKING: TaskClient = TaskClient {
    elicits: true,
    tasks: true,
};
const POLLING: TaskClient = TaskClient {
    elicits: false,
    tasks: true,
};

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_travels_in_the_task_and_the_answer_runs_the_call_once() {
    let fleet = Fleet::new("answer");
    let one = fleet.replica(Approvals::Host);
    let client = connect(&one, "agent", ASKING);

    let task = start_transfer(&client).await;
    assert_eq!(task.status, TaskStatus::InputRequired);
    let read = get(&client, &task.task_id).await;
    let TaskPayload::InputRequired { input_requests } = &read.payload else {
        panic!("waiting for the person's answer: {read:?}")
    };
    let Some(InputRequest::Elicitation(question)) = input_requests.get("approval") else {
        panic!("the approval question: {input_requests:?}")
    };
    let question = serde_json::to_string(question).unwrap();
    assert!(
        question.contains("2590") && question.contains("ACC-7"),
        "{question}"
    );
    assert_eq!(fleet.transfers(), 0, "nothing runs before the answer");

    update(&client, &task.task_id, true).await.unwrap();
    let done = get(&client, &task.task_id).await;
    let result = completed(&done);
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["data"]["amount_cents"], 2590, "{result}");
    assert_eq!(fleet.transfers(), 1);

    // Read again, answered again, called again: nothing runs twice.
    assert_eq!(completed(&get(&client, &task.task_id).await), result);
    let again = update(&client, &task.task_id, true).await;
    assert!(again.is_err(), "a done task takes no answer: {again:?}");
    let retried = client.call_tool(transfer_call()).await.unwrap();
    assert_eq!(retried.structured_content.unwrap()["replayed"], true);
    assert_eq!(fleet.transfers(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_in_the_task_is_final() {
    let fleet = Fleet::new("no");
    let one = fleet.replica(Approvals::Host);
    let client = connect(&one, "agent", ASKING);
    let task = start_transfer(&client).await;
    update(&client, &task.task_id, false).await.unwrap();
    let result = completed(&get(&client, &task.task_id).await);
    assert_eq!(result["code"], "CONFIRMATION_DENIED", "{result}");
    // The host's confirmed cannot override it, nor a new identical call.
    let store = fleet.inbox();
    let decided = store.approval(&task.task_id).await.unwrap().unwrap();
    assert_eq!(decided.approval.decision.map(|d| d.approved), Some(false));
    assert_eq!(fleet.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_decision_completes_the_task_on_another_replica_after_a_restart() {
    let fleet = Fleet::new("replicas");
    let one = fleet.replica(Approvals::Inbox);
    let client = connect(&one, "agent", POLLING);
    let task = start_transfer(&client).await;
    assert_eq!(task.status, TaskStatus::Working, "waiting for the inbox");
    let waiting = get(&client, &task.task_id).await;
    assert_eq!(waiting.status(), TaskStatus::Working);
    assert_eq!(fleet.transfers(), 0);
    // The replica that made the task goes away.
    client.cancel().await.unwrap();
    drop(one);

    // A person decides in the inbox (another process over the store).
    let inbox = fleet.inbox();
    assert_eq!(
        inbox
            .decide_approval(&task.task_id, &person(true), now_ms())
            .await
            .unwrap(),
        DecideOutcome::Decided
    );

    // Two replicas started afterwards are asked at once: the call runs once.
    let two = fleet.replica(Approvals::Inbox);
    let three = fleet.replica(Approvals::Inbox);
    let (a, b) = (
        connect(&two, "agent", POLLING),
        connect(&three, "agent", POLLING),
    );
    let (first, second) = tokio::join!(get(&a, &task.task_id), get(&b, &task.task_id));
    assert_eq!(fleet.transfers(), 1, "{first:?} {second:?}");
    for read in [first, second] {
        assert!(
            matches!(read.status(), TaskStatus::Completed | TaskStatus::Working),
            "{read:?}"
        );
    }
    let on_two = completed(&get(&a, &task.task_id).await);
    let on_three = completed(&get(&b, &task.task_id).await);
    assert_eq!(on_two["ok"], true, "{on_two}");
    assert_eq!(on_two, on_three, "every replica answers the same result");
    assert_eq!(fleet.transfers(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_runs_nothing_and_stays_cancelled() {
    // In host mode the client that was asked may answer, and a cancel is
    // its no.
    let fleet = Fleet::new("cancel");
    let one = fleet.replica(Approvals::Host);
    let client = connect(&one, "agent", POLLING);
    let task = start_transfer(&client).await;
    cancel(&client, &task.task_id).await.unwrap();
    assert_eq!(
        get(&client, &task.task_id).await.status(),
        TaskStatus::Cancelled
    );
    // A person's yes after the cancel changes nothing.
    let inbox = fleet.inbox();
    assert_eq!(
        inbox
            .decide_approval(&task.task_id, &person(true), now_ms())
            .await
            .unwrap(),
        DecideOutcome::AlreadyDecided
    );
    assert_eq!(
        get(&client, &task.task_id).await.status(),
        TaskStatus::Cancelled
    );
    // The no is final: the identical call is denied, and nobody is asked.
    match client.peer().call_tool_once(transfer_call()).await.unwrap() {
        CallToolResponse::Complete(result) => {
            let result = result.structured_content.unwrap();
            assert_eq!(result["code"], "CONFIRMATION_DENIED", "{result}");
        }
        other => panic!("a denied call is denied again: {other:?}"),
    }
    assert_eq!(fleet.transfers(), 0);

    // A task a person decided is not cancelled: the decision stands.
    let decided = start_transfer_of(&connect(&one, "agent", POLLING), 2591).await;
    inbox
        .decide_approval(&decided.task_id, &person(true), now_ms())
        .await
        .unwrap();
    cancel(&client, &decided.task_id).await.unwrap();
    let result = completed(&get(&client, &decided.task_id).await);
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(fleet.transfers(), 1);
}

/// A task of a process that decides in the inbox was denied by the client's
/// cancel, with no elicitation capability: only a person decides there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_a_person_decides_the_client_can_neither_cancel_nor_answer() {
    let fleet = Fleet::new("inbox-only");
    let one = fleet.replica(Approvals::Inbox);
    for client in [POLLING, ASKING] {
        let client = connect(&one, "agent", client);
        let task = start_transfer(&client).await;
        for refused in [
            cancel(&client, &task.task_id).await,
            update(&client, &task.task_id, true).await,
            update(&client, &task.task_id, false).await,
        ] {
            let Err(ServiceError::McpError(error)) = refused else {
                panic!("refused: {refused:?}");
            };
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        }
        assert_eq!(
            get(&client, &task.task_id).await.status(),
            TaskStatus::Working,
            "still waiting for a person"
        );
        assert!(
            fleet
                .inbox()
                .approval(&task.task_id)
                .await
                .unwrap()
                .unwrap()
                .approval
                .decision
                .is_none()
        );
    }
    assert_eq!(fleet.transfers(), 0);
}

/// A task made on a replica that decides in the inbox was approved through
/// a replica that lets clients decide: the question keeps the asking
/// process's mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mode_that_asked_is_the_one_that_answers() {
    let fleet = Fleet::new("modes");
    let asking = fleet.replica(Approvals::Inbox);
    let task = start_transfer(&connect(&asking, "agent", ASKING)).await;
    let lenient = fleet.replica(Approvals::Host);
    let other = connect(&lenient, "agent", ASKING);
    let refused = update(&other, &task.task_id, true).await;
    assert!(
        matches!(&refused, Err(ServiceError::McpError(error)) if error.code == ErrorCode::INVALID_PARAMS),
        "{refused:?}"
    );
    let refused = cancel(&other, &task.task_id).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_ne!(
        get(&other, &task.task_id).await.status(),
        TaskStatus::InputRequired,
        "nor is the client asked there"
    );
    assert_eq!(fleet.transfers(), 0);
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_callers_task_is_unknown_to_them() {
    let fleet = Fleet::new("foreign");
    let one = fleet.replica(Approvals::Inbox);
    let agent = connect(&one, "agent", POLLING);
    let intruder = connect(&one, "intruder", POLLING);
    let task = start_transfer(&agent).await;

    let foreign = task_error(&intruder, &task.task_id).await;
    let made_up = task_error(&intruder, "no-such-task").await;
    assert!(foreign.contains("no task"), "{foreign}");
    assert_eq!(
        foreign.replace(&task.task_id, "ID"),
        made_up.replace("no-such-task", "ID"),
        "a foreign task reads as a made-up one"
    );
    for refused in [
        cancel(&intruder, &task.task_id).await,
        update(&intruder, &task.task_id, true).await,
    ] {
        assert!(refused.is_err());
    }
    assert_eq!(
        get(&agent, &task.task_id).await.status(),
        TaskStatus::Working
    );
    assert_eq!(fleet.transfers(), 0);
}

/// As [`connect`], as `caller` on behalf of `subject` (a token's person).
fn connect_as(replica: &Replica, caller: &str, subject: &str, client: TaskClient) -> Client {
    let caller = replica
        .caller(caller)
        .unwrap()
        .with_principal(toolcall::Principal::new(
            "https://auth.example.com",
            subject,
        ));
    serve_as(replica, caller, client, "desk")
}

/// Two principals behind one caller, in one conversation: alice's task,
/// its arguments and its cancel are hers; to bob it is a made-up id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_task_is_unknown_to_them() {
    let fleet = Fleet::new("principals");
    let one = fleet.replica(Approvals::Inbox);
    let alice = connect_as(&one, "agent", "alice", POLLING);
    let bob = connect_as(&one, "agent", "bob", POLLING);
    let task = start_transfer(&alice).await;
    let foreign = task_error(&bob, &task.task_id).await;
    let made_up = task_error(&bob, "no-such-task").await;
    assert_eq!(
        foreign.replace(&task.task_id, "ID"),
        made_up.replace("no-such-task", "ID"),
        "another principal's task reads as a made-up one"
    );
    assert!(cancel(&bob, &task.task_id).await.is_err());
    assert_eq!(
        get(&alice, &task.task_id).await.status(),
        TaskStatus::Working,
        "bob's cancel changed nothing"
    );
    // Bob's identical call is a question of his own, not alice's.
    let his = start_transfer(&bob).await;
    assert_ne!(his.task_id, task.task_id);
    assert_eq!(fleet.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_task_completes_as_expired_and_runs_nothing() {
    let fleet = Fleet::new("expired");
    let one = fleet.replica(Approvals::Inbox);
    let client = connect(&one, "agent", POLLING);
    // An approval whose time ran out, put in the store as the pipeline
    // would have (no wait for a clock).
    let store = fleet.inbox();
    let now = now_ms();
    store
        .put_approval(&PendingApproval {
            id: "expired-approval-1".into(),
            session: "desk".into(),
            caller: "agent".into(),
            tool: "transfer".into(),
            digest: "0".repeat(64),
            arguments: json!({"to": "ACC-7", "amount_cents": 2590}),
            step: 1,
            created_ms: now - 2_000,
            expires_ms: now - 1_000,
            decision: None,
            reason: None,
            tainted: Vec::new(),
            answerers: Default::default(),
            principal: None,
            provenance: Vec::new(),
        })
        .await
        .unwrap();
    let result = completed(&get(&client, "expired-approval-1").await);
    assert_eq!(result["code"], "CONFIRMATION_EXPIRED", "{result}");
    let answered = update(&client, "expired-approval-1", true).await;
    assert!(answered.is_err(), "an expired task takes no answer");
    assert_eq!(fleet.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_extension_or_with_tasks_off_the_call_answers_as_before() {
    let fleet = Fleet::new("before");
    let one = fleet.replica(Approvals::Inbox);
    let plain = connect(
        &one,
        "agent",
        TaskClient {
            elicits: false,
            tasks: false,
        },
    );
    let answered = plain.call_tool(transfer_call()).await.unwrap();
    let result = answered.structured_content.unwrap();
    assert_eq!(result["code"], "CONFIRMATION_REQUIRED", "{result}");
    let refused = plain
        .peer()
        .get_task(GetTaskParams::new(result["question_id"].as_str().unwrap()))
        .await;
    assert!(refused.is_err(), "tasks/get needs the extension declared");

    // A server that offers no tasks answers a client that declares them as
    // it answers any other.
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server_io);
    let server = McpServer::new(Arc::clone(&one), Options::conversation("desk").tasks(false));
    keep(serve_directly(
        server,
        FrameGuard::new(read, write),
        Some(rmcp::ClientHandler::get_info(&POLLING)),
    ));
    let mut server_config =
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build());
    server_config.protocol_version = ProtocolVersion::V_2026_07_28;
    let client = serve_directly(POLLING, client_io, Some(server_config.into()));
    match client.peer().call_tool_once(transfer_call()).await.unwrap() {
        CallToolResponse::Complete(result) => {
            let result = result.structured_content.unwrap();
            assert_eq!(result["code"], "CONFIRMATION_REQUIRED", "{result}");
        }
        other => panic!("no task from a server without tasks: {other:?}"),
    }
    assert_eq!(fleet.transfers(), 0);
}

// ------------------------------------------------------------------ over HTTP

/// Two replicas behind streamable HTTP over one SQLite file, each with the
/// fleet's tokens: a task made on one, whose server is then killed, is
/// answered by the other once a person decides in the inbox.
#[cfg(feature = "http")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_task_outlives_the_replica_that_made_it() {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use toolcall_mcp::http::{HttpOptions, router, serve};

    const TOKEN: &str = "token-of-the-agent-0123456789";
    let fleet = Fleet::new("http");
    let start = |replica: Replica| async move {
        let http = HttpOptions::new()
            .tokens(&format!("agent {TOKEN}\n"))
            .unwrap();
        let app = router(replica, Options::conversation("desk"), http).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        (addr, tokio::spawn(serve(listener, app)))
    };
    let connect = |addr: std::net::SocketAddr| async move {
        // reqwest may be built with `rustls-no-provider` (another crate of the
        // workspace asks for it): a client then needs a provider installed.
        // rustls 0.23.48 deprecates ring's provider (no post-quantum key
        // exchange); plain HTTP to localhost does not need any.
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
            .auth_header(TOKEN);
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("tasks-http", "0.0.0"),
        )
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the client connects")
    };
    let (a_addr, a_server) = start(fleet.replica(Approvals::Inbox)).await;
    let (b_addr, _b_server) = start(fleet.replica(Approvals::Inbox)).await;

    let on_a = connect(a_addr).await;
    let task = match on_a.peer().call_tool_once(transfer_call()).await.unwrap() {
        CallToolResponse::Task(created) => created.task,
        other => panic!("a task: {other:?}"),
    };
    assert_eq!(task.status, TaskStatus::Working);
    a_server.abort();
    let _ = a_server.await;
    drop(on_a);

    let inbox = fleet.inbox();
    inbox
        .decide_approval(&task.task_id, &person(true), now_ms())
        .await
        .unwrap();
    let on_b = connect(b_addr).await;
    let done = on_b
        .peer()
        .get_task(GetTaskParams::new(&task.task_id))
        .await
        .unwrap()
        .task;
    let result = completed(&done);
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(fleet.transfers(), 1);
    // The model's retry on the surviving replica is the stored answer.
    let retried = on_b.call_tool(transfer_call()).await.unwrap();
    assert_eq!(retried.structured_content.unwrap()["replayed"], true);
    assert_eq!(fleet.transfers(), 1);
}

/// A task whose carry-out was killed (the approval taken, no answer kept)
/// said `working` for ever, even once its call had completed elsewhere: it
/// answers where its call stands on its next `tasks/get`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_carry_out_died_answers_where_its_call_stands() {
    let fleet = Fleet::new("carry-out-died");
    let one = fleet.replica(Approvals::Inbox);
    let client = connect(&one, "agent", POLLING);
    let inbox = fleet.inbox();

    // Taken, run, its result recorded under its key, and the process died
    // before the task's answer was kept.
    let task = start_transfer(&client).await;
    inbox
        .decide_approval(&task.task_id, &person(true), now_ms())
        .await
        .unwrap();
    take(&inbox, &task.task_id).await;
    let key: toolcall::store::Key = toolcall_core::canonical::idempotency_key(
        "agent",
        "desk",
        "transfer",
        &json!({"to": "ACC-7", "amount_cents": 2590}),
    )
    .parse()
    .unwrap();
    let ran = toolcall::ToolResult::success(
        "transfer",
        json!({"to": "ACC-7", "amount_cents": 2590})
            .as_object()
            .unwrap()
            .clone(),
    );
    inbox.complete(&key, &ran).await.unwrap();
    let result = completed(&get(&client, &task.task_id).await);
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["replayed"], true, "{result}");
    assert_eq!(fleet.transfers(), 0, "nothing ran again");

    // Taken, and the process died before its claim: carried out now, once.
    let task = start_transfer_of(&client, 2591).await;
    inbox
        .decide_approval(&task.task_id, &person(true), now_ms())
        .await
        .unwrap();
    take(&inbox, &task.task_id).await;
    let result = completed(&get(&client, &task.task_id).await);
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(fleet.transfers(), 1);
    let again = completed(&get(&client, &task.task_id).await);
    assert_eq!(again, result);
    assert_eq!(fleet.transfers(), 1);
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
        store.take_approval(id, &binding, now_ms()).await.unwrap(),
        toolcall::store::TakeApproval::Taken(_)
    ));
}

/// `tasks/get` read another conversation's pending transfer, `tasks/update`
/// approved it and `tasks/cancel` denied it: a task is its conversation's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_conversations_task_is_unknown_to_the_same_caller() {
    let fleet = Fleet::new("conversations");
    let one = fleet.replica(Approvals::Host);
    let owner = connect_in(&one, "agent", ASKING, "desk");
    let task = start_transfer(&owner).await;
    let other = connect_in(&one, "agent", ASKING, "elsewhere");
    let unknown = |result: Result<(), ServiceError>| match result {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert!(error.message.contains("no task"), "{}", error.message);
        }
        other => panic!("unknown to another conversation: {other:?}"),
    };
    let read = other
        .peer()
        .get_task(GetTaskParams::new(&task.task_id))
        .await;
    assert!(read.is_err(), "{read:?}");
    unknown(update(&other, &task.task_id, true).await);
    unknown(cancel(&other, &task.task_id).await);
    assert_eq!(fleet.transfers(), 0);
    assert_eq!(
        get(&owner, &task.task_id).await.status(),
        TaskStatus::InputRequired,
        "still its owner's question"
    );
}

/// A transfer whose answer was lost is asked about as "approve this call?"
/// through its task, and a yes ran it again; a cancel said it happened.
/// Only a person answers whether it took effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_about_an_unknown_outcome_is_no_task_answer() {
    let fleet = Fleet::new("in-doubt");
    let one = fleet.replica(Approvals::Host);
    let client = connect(&one, "agent", ASKING);
    let task = start_transfer(&client).await;
    fleet.bank.lose.store(true, Ordering::SeqCst);
    update(&client, &task.task_id, true).await.unwrap();
    assert_eq!(fleet.transfers(), 1, "it went through");
    let after = get(&client, &task.task_id).await;
    assert_eq!(after.status(), TaskStatus::Working, "{after:?}");
    // The question about the unknown outcome.
    let doubt = fleet
        .inbox()
        .pending_approvals(now_ms(), 10)
        .await
        .unwrap()
        .into_iter()
        .find(|q| q.reason.as_deref() == Some("in_doubt"))
        .expect("a person is asked whether it took effect");
    let read = get(&client, &doubt.id).await;
    assert_eq!(
        read.status(),
        TaskStatus::Working,
        "never input_required: {read:?}"
    );
    for refused in [
        update(&client, &doubt.id, true).await,
        update(&client, &doubt.id, false).await,
        cancel(&client, &doubt.id).await,
    ] {
        let Err(ServiceError::McpError(error)) = refused else {
            panic!("refused: {refused:?}");
        };
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("only a person"), "{}", error.message);
    }
    let kept = fleet.inbox().approval(&doubt.id).await.unwrap().unwrap();
    assert!(kept.approval.decision.is_none(), "nothing was decided");
    assert_eq!(fleet.transfers(), 1, "never run again on a client's word");
}
