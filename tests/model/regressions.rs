//! Counterexamples the model found, kept as plain tests.

use super::*;

/// Runs one case on the memory store and SQLite.
pub(crate) fn regression(case: Case) {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    toolcall_core::crash::set_hook(crash_hook);
    let dir = std::env::temp_dir().join(format!(
        "toolcall-model-regression-{}-{}",
        std::process::id(),
        now_ms()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let sqlite = Sqlite(dir.clone());
    runtime().block_on(async {
        let (stores, _) = Memory.make(0).await;
        run_case(&case, stores).await.unwrap();
        let (stores, _) = sqlite.make(0).await;
        run_case(&case, stores).await.unwrap();
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// The replicas of most cases: both leave the person's decision to the host.
const HOST: [Approvals; 2] = [Approvals::Host, Approvals::Host];

/// Replica 0 decides in the inbox, replica 1 through the host.
const INBOX_THEN_HOST: [Approvals; 2] = [Approvals::Inbox, Approvals::Host];

/// A case on two replicas that share no store, once `rules` are loaded.
pub(crate) fn case_on(modes: [Approvals; 2], rules: Rules, ops: Vec<Op>) -> Case {
    Case {
        modes,
        share: false,
        rules,
        ops,
    }
}

pub(crate) fn wipe_call(replica: usize, how: How) -> Op {
    failing_wipe_call(replica, how, Fault::None)
}

/// Bob's wipe of disk 1, in his conversation, meeting `fault`.
pub(crate) fn failing_wipe_call(replica: usize, how: How, fault: Fault) -> Op {
    Op::Call(Calling {
        fault,
        ..Calling::new((1, 1, WIPE, 1), None, replica, how)
    })
}

/// Alice's page of `arg` in `conversation` through `replica`, meeting
/// `fault`.
pub(crate) fn alices_page(
    conversation: usize,
    replica: usize,
    arg: i64,
    how: How,
    fault: Fault,
) -> Op {
    Op::Call(Calling {
        fault,
        ..Calling::new((0, conversation, PAGE, arg), None, replica, how)
    })
}

/// Ana says `said` to question `question` through `via` on replica 0;
/// `busy`: another process holds the call's resource meanwhile.
pub(crate) fn ana_says(question: usize, said: Said, via: Via, busy: bool) -> Op {
    Op::Answer {
        question,
        said,
        via,
        replica: 0,
        intruder: false,
        person: Person::Ana,
        busy,
    }
}

/// Bob's conversation reads untrusted output, on replica 0.
pub(crate) fn reads_untrusted_output() -> Op {
    Op::Read {
        caller: 1,
        conversation: 1,
        replica: 0,
    }
}

/// Replica 0 stops `what`; the store's answer is not lost.
pub(crate) fn stops(what: Stopped) -> Op {
    Op::Stop {
        what,
        replica: 0,
        lost: false,
    }
}

/// Replica 0 waits for the first question, its time already past.
pub(crate) fn waits_for_the_first_question() -> Op {
    Op::WaitFor {
        question: 0,
        replica: 0,
        first: First::Nothing,
        past: true,
    }
}

/// The first call made again by the other principal, who brings its
/// question's id.
pub(crate) fn again_with_the_others_id() -> Op {
    Op::Again {
        back: 0,
        other: true,
        replica: 0,
        how: How::OthersId,
        fault: Fault::None,
        client_answers: false,
    }
}

/// A denial of a high-risk call stopped holding once the conversation read
/// untrusted output: the call was a question for another reason then, and
/// a person was asked again.
#[test]
pub(crate) fn a_denial_holds_after_the_conversation_reads_untrusted_output() {
    regression(case_on(
        HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::WithId),
            ana_says(0, Said::Deny, Via::Host, false),
            reads_untrusted_output(),
            wipe_call(0, How::Plain),
            wipe_call(0, How::Confirmed),
        ],
    ));
}

/// A question asked by a replica that decides in the inbox was bypassed by
/// a host-mode replica's `confirmed`: the call ran without the person.
#[test]
pub(crate) fn the_hosts_confirmed_does_not_answer_a_question_only_a_person_may() {
    regression(case_on(
        INBOX_THEN_HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::Plain),
            wipe_call(1, How::Confirmed),
            ana_says(0, Said::Deny, Via::Host, false),
        ],
    ));
}

/// The same, for a question asked before the conversation read untrusted
/// output, and a confirmed call after.
#[test]
pub(crate) fn an_open_question_for_the_other_reason_is_not_answered_by_confirmed() {
    regression(case_on(
        INBOX_THEN_HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::Plain),
            reads_untrusted_output(),
            wipe_call(1, How::Confirmed),
            ana_says(0, Said::Deny, Via::Host, false),
        ],
    ));
}

/// One call, two questions (before and after untrusted output was read):
/// the first denied, the second approved; the denial won nothing.
#[test]
pub(crate) fn a_denial_of_a_call_stands_over_an_approval_of_its_other_question() {
    regression(case_on(
        INBOX_THEN_HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::Plain),
            reads_untrusted_output(),
            wipe_call(0, How::Plain),
            ana_says(0, Said::Deny, Via::Host, false),
            ana_says(1, Said::Approve, Via::Inbox, false),
            wipe_call(0, How::Plain),
        ],
    ));
}

/// A host's confirmed attempt died after its claim; then a person denied
/// the call's open question. The person's "it did not happen" ran it: the
/// denial must stand over the attempt's approval.
#[test]
pub(crate) fn a_denial_after_an_attempt_began_keeps_the_call_from_running_again() {
    regression(case_on(
        HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::WithId),
            failing_wipe_call(0, How::Confirmed, Fault::CrashAfterClaim),
            ana_says(0, Said::Deny, Via::Host, false),
        ],
    ));
}

/// An unknown outcome of a stopped tool, settled by the host as "it did not
/// happen": the system refuses it (it would run the call again while the
/// tool is stopped), and the model said it was taken. The model judged
/// the stop only for approvals; the person's answer, checked against the
/// backend, turned "it happened" into "it did not happen" after the
/// model's own check of the known defect. Found with
/// `TOOLCALL_MODEL_SEED=7 TOOLCALL_MODEL_CASES=400`.
#[test]
pub(crate) fn it_did_not_happen_is_refused_while_the_tool_is_stopped() {
    let page_call = |fault, client_answers| {
        Op::Call(Calling {
            fault,
            client_answers,
            ..Calling::new((1, 0, 0, 0), None, 0, How::Plain)
        })
    };
    regression(case_on(
        HOST,
        Rules::Lift,
        vec![
            page_call(Fault::Store(Outage::AnswersLost, "claim"), false),
            page_call(Fault::CrashBeforeComplete, true),
            stops(Stopped::Tool(0)),
            ana_says(1, Said::Happened, Via::Host, false),
        ],
    ));
}

/// Ana approves the newest question through `via` on replica 0; `busy`:
/// another process holds the call's resource meanwhile.
pub(crate) fn ana_approves(via: Via, busy: bool) -> Op {
    ana_says(0, Said::Approve, via, busy)
}

/// The defect the chaos run found (an approved call that found its
/// resource held spent the person's decision), as the model meets it since
/// it holds resources: a wipe is asked about; the host's `approve` runs
/// while another process holds the disk (`RESOURCE_BUSY`, nothing runs);
/// once the disk is free, the identical call carries the decision out
/// without asking anyone again. Found by the model with the decision no
/// longer given back (`TOOLCALL_MODEL_CASES=400`, the default seed).
#[test]
pub(crate) fn an_approval_carried_out_while_the_disk_is_held_is_not_asked_again() {
    for modes in [
        [Approvals::Host, Approvals::Host],
        [Approvals::Inbox, Approvals::Host],
    ] {
        regression(case_on(
            modes,
            Rules::Lift,
            vec![
                wipe_call(0, How::Plain),
                ana_approves(Via::Host, true),
                wipe_call(1, How::Plain),
            ],
        ));
    }
}

/// The same with the tool stopped: a wipe is asked about and approved in
/// the inbox; the operators stop `wipe`; the host's `approve` answers
/// `STOPPED`. That spent the decision: once `wipe` was enabled, the
/// identical call asked the person again. Found with
/// `TOOLCALL_MODEL_SEED=202 TOOLCALL_MODEL_CASES=200`.
#[test]
pub(crate) fn an_approval_carried_out_while_the_tool_is_stopped_is_not_asked_again() {
    regression(case_on(
        HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::Plain),
            ana_approves(Via::Inbox, false),
            stops(Stopped::Tool(WIPE)),
            ana_approves(Via::Host, false),
        ],
    ));
}

/// The model's own error, not toolcall's: a page the store failed to begin
/// is counted against the rate limit only if the replica had read the limit
/// (a replica reads a policy loaded through the other one as a call begins,
/// and nothing is counted otherwise). The model counted it always, and
/// predicted `RATE_LIMITED` for a page the limit still admitted. Found with
/// `TOOLCALL_MODEL_SEED=808 TOOLCALL_MODEL_CASES=400`; the second case is a
/// replica that had read the limit, whose page is counted.
#[test]
pub(crate) fn a_page_the_store_failed_to_begin_is_counted_as_the_replica_judged_it() {
    let down = Fault::Store(Outage::Down, "begin_call");
    for ops in [
        vec![
            alices_page(0, 0, 0, How::Plain, down),
            alices_page(
                1,
                0,
                1,
                How::Plain,
                Fault::Store(Outage::AnswersLost, "doubt"),
            ),
            alices_page(1, 1, 0, How::Confirmed, Fault::LoseAnswer),
        ],
        vec![
            alices_page(0, 0, 0, How::Plain, Fault::None),
            alices_page(1, 0, 1, How::Plain, down),
            alices_page(1, 1, 0, How::Plain, Fault::None),
        ],
    ] {
        regression(case_on(HOST, Rules::Limits, ops));
    }
}

/// A page whose answer was lost is in doubt: its call answers `IN_DOUBT`
/// with a question for a person, who must say whether it happened. A wait
/// for that question (`Dispatcher::wait_for_decision`) answers it again,
/// `IN_DOUBT` with the same id. It answered `CONFIRMATION_REQUIRED`, "page
/// needs user approval before it runs", of a page that may have run: the
/// wait answered an open question as an approval (`Stages::asked`),
/// whatever its kind.
#[test]
pub(crate) fn a_wait_on_an_unknown_outcome_asks_it_again() {
    regression(case_on(
        HOST,
        Rules::Lift,
        vec![
            alices_page(0, 0, 0, How::Plain, Fault::LoseAnswer),
            waits_for_the_first_question(),
        ],
    ));
}

/// In host mode a wipe is asked about; the host's `confirmed` runs the
/// identical call (its question, which the host may answer, stays open).
/// A wait for the question answers what came of the call (replayed). It
/// answered `CONFIRMATION_REQUIRED`, "wipe needs user approval before it
/// runs", of a wipe the backend ran: the wait read only the question, not
/// the call's key.
#[test]
pub(crate) fn a_wait_on_a_call_that_ran_answers_what_came_of_it() {
    regression(case_on(
        HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::Plain),
            wipe_call(0, How::Confirmed),
            waits_for_the_first_question(),
        ],
    ));
}

/// A wipe is asked about and approved in the inbox; nobody carries it out
/// within the approval's time. The host's `approve` of it then answers
/// `CONFIRMATION_EXPIRED`, and the question stays expired everywhere. The
/// store read it running (`QuestionState::Running(Approve)`) for good: the
/// take of an expired decision marked it used
/// (`QuestionStore::take_approval`, memory and SQL stores alike), and from
/// then on a person's answer was refused as closed, not expired, and a
/// wait or a call with the id was `CONFIRMATION_INVALID`.
#[test]
pub(crate) fn the_hosts_answer_leaves_an_expired_decision_expired() {
    regression(case_on(
        HOST,
        Rules::Lift,
        vec![
            wipe_call(0, How::Plain),
            ana_approves(Via::Inbox, false),
            Op::Tick(Tick::Approval),
            ana_approves(Via::Host, false),
        ],
    ));
}

/// In host mode a wipe is asked about; the host's `confirmed` runs the
/// identical call (its question, which the host may answer, stays open);
/// the question's time passes. The host's `approve` of it answers
/// `CONFIRMATION_EXPIRED`, "ask the user again if they still want it", of
/// a wipe the backend ran; it was to answer what came of the call
/// (replayed). The same with the operators asking two people for a wipe
/// after it ran: the host's `approve` of its open question, the first
/// signature, answers `CONFIRMATION_REQUIRED`, "needs user approval before
/// it runs". As the wait above, the host's answer reads the question, not
/// the call's key.
#[test]
pub(crate) fn the_hosts_answer_to_a_call_that_ran_is_what_came_of_it() {
    let two_people = Op::Load {
        rules: Rules::TwoPeople,
        replica: 0,
    };
    for then in [Op::Tick(Tick::Approval), two_people] {
        regression(case_on(
            HOST,
            Rules::Lift,
            vec![
                wipe_call(0, How::Plain),
                wipe_call(0, How::Confirmed),
                then,
                ana_approves(Via::Host, false),
            ],
        ));
    }
}

/// The operators ask two people for a wipe; in host mode, ana (a principal
/// behind bob's caller) makes one and is asked. Bo makes the identical call
/// through the same caller, bringing ana's question's id: he is answered
/// `CONFIRMATION_INVALID`, as in inbox mode. He was answered
/// `CONFIRMATION_REQUIRED` with her question (its id, its signatures):
/// stage 7 read a question several people must sign by its id alone
/// (`Stages::awaiting_signatures`), without the call's binding.
#[test]
pub(crate) fn another_principals_question_id_is_not_this_calls() {
    regression(case_on(
        HOST,
        Rules::TwoPeople,
        vec![
            Op::Call(Calling::new((1, 1, WIPE, 1), Some(0), 0, How::Plain)),
            again_with_the_others_id(),
        ],
    ));
}

/// In host mode bob's caller, no principal behind it, makes a wipe and is
/// asked; ana, a principal behind the same caller, makes the identical call
/// bringing that question's id: `CONFIRMATION_INVALID` on every store. On
/// Postgres the call took the caller's question and the wipe ran: its
/// `take_approval` matched a question's conversation, caller, tool and
/// arguments, not its requester (`Binding::requester`). Run with
/// `TOOLCALL_POSTGRES_URL`.
#[test]
pub(crate) fn another_principals_question_is_not_taken() {
    let Some(url) = postgres_url() else {
        return;
    };
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let case = case_on(
        HOST,
        Rules::Lift,
        vec![wipe_call(0, How::Plain), again_with_the_others_id()],
    );
    runtime().block_on(async {
        let postgres = Postgres(url);
        let (stores, cleaner) = postgres.make(u32::MAX).await;
        let checked = run_case(&case, stores).await;
        postgres.clean(cleaner).await;
        checked.unwrap();
    });
}
