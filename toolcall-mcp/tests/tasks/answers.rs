//! The question travels in the task: its answer runs the call once, a no is
//! final, an inbox decision completes it on another replica, a cancel runs
//! nothing, and the mode that asked is the one that answers.

use super::*;

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_travels_in_the_task_and_the_answer_runs_the_call_once() {
    let (fleet, _one, client) = fleet_with_agent("answer", Approvals::Host, ASKING);

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
    retry_replays_the_one_transfer(&client, &fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_in_the_task_is_final() {
    let (fleet, _one, client) = fleet_with_agent("no", Approvals::Host, ASKING);
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
    let (fleet, one, client) = fleet_with_agent("replicas", Approvals::Inbox, POLLING);
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
        person_approves(&inbox, &task.task_id).await,
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
    let (fleet, one, client) = fleet_with_agent("cancel", Approvals::Host, POLLING);
    let task = start_transfer(&client).await;
    cancel(&client, &task.task_id).await.unwrap();
    assert_eq!(
        get(&client, &task.task_id).await.status(),
        TaskStatus::Cancelled
    );
    // A person's yes after the cancel changes nothing.
    let inbox = fleet.inbox();
    assert_eq!(
        person_approves(&inbox, &task.task_id).await,
        DecideOutcome::AlreadyDecided
    );
    assert_eq!(
        get(&client, &task.task_id).await.status(),
        TaskStatus::Cancelled
    );
    // The no is final: the identical call is denied, and nobody is asked.
    let result = transfer_at_once(&client, "a denied call is denied again").await;
    assert_eq!(result["code"], "CONFIRMATION_DENIED", "{result}");
    assert_eq!(fleet.transfers(), 0);

    // A task a person decided is not cancelled: the decision stands.
    let decided = start_transfer_of(&connect(&one, "agent", POLLING), 2591).await;
    person_approves(&inbox, &decided.task_id).await;
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
            invalid_params(refused);
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
    invalid_params(update(&other, &task.task_id, true).await);
    let refused = cancel(&other, &task.task_id).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_ne!(
        get(&other, &task.task_id).await.status(),
        TaskStatus::InputRequired,
        "nor is the client asked there"
    );
    assert_eq!(fleet.transfers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_task_completes_as_expired_and_runs_nothing() {
    let (fleet, _one, client) = fleet_with_agent("expired", Approvals::Inbox, POLLING);
    // An approval whose time ran out, put in the store as the pipeline
    // would have (no wait for a clock).
    let store = fleet.inbox();
    let now = now_ms();
    store
        .put_approval(&PendingApproval {
            session: "desk".into(),
            caller: "agent".into(),
            tool: "transfer".into(),
            digest: "0".repeat(64),
            arguments: json!({"to": "ACC-7", "amount_cents": 2590}),
            created_ms: now - 2_000,
            expires_ms: now - 1_000,
            ..toolcall_testkit::store::asked("expired-approval-1")
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
    let result = transfer_at_once(&client, "no task from a server without tasks").await;
    assert_eq!(result["code"], "CONFIRMATION_REQUIRED", "{result}");
    assert_eq!(fleet.transfers(), 0);
}
