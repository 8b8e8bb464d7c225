//! Whose task it is: another caller's, principal's or conversation's task is
//! unknown to them.

use super::*;

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
