//! Tasks across replicas: over HTTP a task outlives the replica that made
//! it, a dead carry-out answers where its call stands, and an unknown
//! outcome's question is no task answer.

use super::*;

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
    person_approves(&inbox, &task.task_id).await;
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
    retry_replays_the_one_transfer(&on_b, &fleet).await;
}

/// A task whose carry-out was killed (the approval taken, no answer kept)
/// said `working` for ever, even once its call had completed elsewhere: it
/// answers where its call stands on its next `tasks/get`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_carry_out_died_answers_where_its_call_stands() {
    let (fleet, _one, client) = fleet_with_agent("carry-out-died", Approvals::Inbox, POLLING);
    let inbox = fleet.inbox();

    // Taken, run, its result recorded under its key, and the process died
    // before the task's answer was kept.
    let task = start_transfer(&client).await;
    person_approves(&inbox, &task.task_id).await;
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
    person_approves(&inbox, &task.task_id).await;
    take(&inbox, &task.task_id).await;
    let result = completed(&get(&client, &task.task_id).await);
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(fleet.transfers(), 1);
    let again = completed(&get(&client, &task.task_id).await);
    assert_eq!(again, result);
    assert_eq!(fleet.transfers(), 1);
}

/// A transfer whose answer was lost is asked about as "approve this call?"
/// through its task, and a yes ran it again; a cancel said it happened.
/// Only a person answers whether it took effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_about_an_unknown_outcome_is_no_task_answer() {
    let (fleet, _one, client) = fleet_with_agent("in-doubt", Approvals::Host, ASKING);
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
        let error = invalid_params(refused);
        assert!(error.message.contains("only a person"), "{}", error.message);
    }
    let kept = fleet.inbox().approval(&doubt.id).await.unwrap().unwrap();
    assert!(kept.approval.decision.is_none(), "nothing was decided");
    assert_eq!(fleet.transfers(), 1, "never run again on a client's word");
}
