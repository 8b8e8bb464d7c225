//! What the schema tests of the SQL stores (SQLite's file, Postgres's
//! schema) put in a store and check in it: one body for both, so that a
//! store upgraded from an older version is held to the same behaviour
//! whichever database keeps it. Each store's test takes its tables back to
//! the older version and writes the older rows in its own dialect; these
//! check the store once it has upgraded them.

use std::time::Duration;
use toolcall::store::{
    ApprovalLookup, ApprovalUse, ControlsWrite, DecisionWrite, Exposure, Lease, LockAsk,
    QuestionLease, RateWindow, SignatureWrite,
};

use serde_json::json;
use toolcall::ToolResult;
use toolcall::store::{
    ApprovalDecision, AskApproval, Binding, Claim, ControlsChange, DecideOutcome, Key,
    PendingApproval, PendingQuery, RecordedOutcome, Requester, SignOutcome, Store, TaintSource,
    TakeApproval, now_ms,
};

/// The tables exactly as the first release created them (schema version
/// 0), in SQLite's types; Postgres's test writes `BIGINT` for `INTEGER`.
/// Written out here rather than taken from the stores' own schema, so that
/// a change to what the stores create cannot change what an old store is.
pub const FIRST_RELEASE: &str = "
CREATE TABLE IF NOT EXISTS toolcall_steps (
    session    TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_calls (
    key        TEXT PRIMARY KEY,
    count      INTEGER NOT NULL,
    touched_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolcall_records (
    key        TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    until_ms   INTEGER NOT NULL,
    result     TEXT,
    touched_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS toolcall_records_touched ON toolcall_records (touched_ms);
CREATE TABLE IF NOT EXISTS toolcall_approvals (
    id         TEXT PRIMARY KEY,
    session    TEXT NOT NULL,
    caller     TEXT NOT NULL,
    tool       TEXT NOT NULL,
    digest     TEXT NOT NULL,
    arguments  TEXT NOT NULL,
    step       INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL
);
";

/// The indexes a store of this version has, sorted by name, with the
/// indexes of its own dialect, `own`: what upgrading any older store
/// must leave.
pub fn indexes(own: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = [
        "toolcall_approvals_caller_open",
        "toolcall_approvals_created",
        "toolcall_approvals_decided",
        "toolcall_approvals_expires",
        "toolcall_approvals_open",
        "toolcall_approvals_session_created",
        "toolcall_approvals_session_digest",
        "toolcall_approvals_tool_created",
        "toolcall_calls_touched",
        "toolcall_locks_until",
        "toolcall_rates_until",
        "toolcall_records_asking",
        "toolcall_records_touched",
        "toolcall_steps_touched",
        "toolcall_taint_touched",
    ]
    .iter()
    .chain(own)
    .map(|name| name.to_string())
    .collect();
    all.sort();
    all
}

/// The store's key for a test's `name`.
pub fn key(name: &str) -> Key {
    Key::sha256(name)
}

/// `texts` in the order a table sorts them.
pub fn sorted<const N: usize>(mut texts: [String; N]) -> [String; N] {
    texts.sort();
    texts
}

/// A successful result of `pay`, told apart by `n`.
pub fn result(n: i64) -> ToolResult {
    ToolResult::success("pay", json!({"n": n}).as_object().unwrap().clone())
}

/// A question of the caller `c` in session `s` about a call of `pay`
/// (digest `d1`, one cent), asked now at step 1, open until `expires_ms`,
/// undecided: the rows the older versions' inserts write.
pub fn approval(id: &str, expires_ms: u64) -> PendingApproval {
    PendingApproval {
        digest: "d1".into(),
        expires_ms,
        ..crate::store::asked(id)
    }
}

/// ana's yes, decided at `decided_ms`.
pub fn yes(decided_ms: u64) -> ApprovalDecision {
    ApprovalDecision {
        approved: true,
        by: "ana".into(),
        note: String::new(),
        edited_arguments: None,
        decided_ms,
        lasts_until_ms: None,
    }
}

/// The binding of `s`, `c`, `pay` and `d1` (the rows' call) for `requester`.
/// A lease of a second from now: the claims these rows are read back by.
fn a_second_from_now() -> Lease {
    Lease {
        now_ms: now_ms(),
        lease_ms: 1_000,
    }
}

fn binding<'a>(requester: Requester<'a>) -> Binding<'a> {
    Binding {
        session: "s",
        caller: "c",
        tool: Some("pay"),
        digest: Some("d1"),
        requester,
    }
}

/// ana's yes to the approval `id`, now, decides it.
async fn decided<S: Store>(store: &S, id: &str) {
    let outcome = store
        .decide_approval(&DecisionWrite {
            id,
            decision: &yes(now_ms()),
            now_ms: now_ms(),
        })
        .await;
    assert_eq!(outcome.unwrap(), DecideOutcome::Decided, "{id}");
}

/// How many approvals wait in `store` now.
pub async fn waiting<S: Store>(store: &S) -> usize {
    store.pending_approvals(now_ms(), 10).await.unwrap().len()
}

/// The rows of the first release, upgraded: the session `old-session`
/// four steps in, `k-done` counted twice and completed with `result(7)`,
/// `k-held` claimed, `p1` pending at step 3. Then what the first release
/// lacked works: the `in_doubt` state and resource locks.
pub async fn first_release_rows_are_kept<S: Store>(store: &S) {
    assert_eq!(
        store.next_step("old-session", now_ms()).await.unwrap(),
        5,
        "the session keeps its count under its new key"
    );
    assert_eq!(store.count_call(&key("k-done"), now_ms()).await.unwrap(), 3);
    assert_eq!(
        store.outcome(&key("k-done")).await.unwrap(),
        Some(RecordedOutcome::Completed(Box::new(result(7))))
    );
    assert_eq!(
        store
            .claim(&key("k-done"), a_second_from_now())
            .await
            .unwrap(),
        Claim::Completed(result(7))
    );
    assert_eq!(
        store
            .claim(&key("k-held"), a_second_from_now())
            .await
            .unwrap(),
        Claim::InFlight
    );
    assert!(matches!(
        store
            .take_approval(&ApprovalUse {
                id: "p1",
                binding: &binding(Requester::Anyone),
                now_ms: now_ms()
            })
            .await
            .unwrap(),
        TakeApproval::Taken(PendingApproval { step: 3, .. })
    ));

    // The new state and the new table work.
    store.doubt(&key("k-held")).await.unwrap();
    assert_eq!(
        store.outcome(&key("k-held")).await.unwrap(),
        Some(RecordedOutcome::InDoubt)
    );
    assert_eq!(
        store
            .claim(&key("k-held"), a_second_from_now())
            .await
            .unwrap(),
        Claim::Acquired
    );
    store.complete(&key("k-held"), &result(8)).await.unwrap();
    assert!(
        store
            .lock_resource(
                &LockAsk {
                    resource: &key("order"),
                    holder: "h1",
                    lease_ms: 1_000
                },
                now_ms()
            )
            .await
            .unwrap()
    );
}

/// Version 1's approval `p1` (three steps in, one cent), asked before
/// decisions were kept: pending as it was asked, and decided now.
pub async fn version_1_approval_is_decided<S: Store>(store: &S) {
    let pending = store.pending_approvals(now_ms(), 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].arguments, json!({"cents": 1}));
    decided(store, "p1").await;
}

/// Why the approval `id`, asked now, asks a person (`reason`, `tainted`)
/// is kept with it.
pub async fn keeps_why_an_approval_asks<S: Store>(store: &S, id: &str) {
    let why = PendingApproval {
        reason: Some("untrusted_context".into()),
        tainted: vec!["cents".into()],
        ..approval(id, now_ms() + 600_000)
    };
    store.put_approval(&why).await.unwrap();
    assert_eq!(store.approval(id).await.unwrap().unwrap().approval, why);
}

/// Version 2's approval `p1`, asked before there was a reason: none, and
/// no tainted arguments; `p2`, asked now, keeps why.
pub async fn version_2_approval_gains_why<S: Store>(store: &S) {
    let old = store.approval("p1").await.unwrap().unwrap().approval;
    assert_eq!((old.reason, old.tainted), (None, Vec::<String>::new()));
    keeps_why_an_approval_asks(store, "p2").await;
}

/// Version 4's approval `p1`, asked before the upgrade: found by its call
/// and its session, asked again as itself, listed by its session.
pub async fn version_4_approval_is_found_by_session_and_call<S: Store>(store: &S) {
    let found = store
        .find_approval(&ApprovalLookup {
            binding: &binding(Requester::Anyone),
            reason: None,
            now_ms: now_ms(),
        })
        .await
        .unwrap()
        .map(|e| e.approval.id);
    assert_eq!(found.as_deref(), Some("p1"));
    let same = PendingApproval {
        created_ms: now_ms(),
        ..approval("p2", now_ms() + 600_000)
    };
    match store.ask_approval(&same, 20).await.unwrap() {
        AskApproval::Existing(entry) => assert_eq!(entry.approval.id, "p1"),
        other => panic!("expected p1, got {other:?}"),
    }
    let query = PendingQuery {
        session: Some("s"),
        ..PendingQuery::new(now_ms(), 10)
    };
    let page = store.pending_page(&query).await.unwrap();
    assert_eq!((page.total, page.items.len()), (1, 1));
}

/// How many approvals the first page of all lists in total.
pub async fn listed<S: Store>(store: &S) -> u64 {
    store
        .pending_page(&PendingQuery::new(now_ms(), 10))
        .await
        .unwrap()
        .total
}

/// Version 5's approval `p1`, and a lapsed claim of `k-old` that kept no
/// question: the approval is a person's only, no question is listed; then
/// the new columns keep who answers and a claim's question.
pub async fn version_5_gains_who_answers_and_the_questions_claims_keep<S: Store>(store: &S) {
    // An approval of version 5 is a person's only (the default).
    let old = store.approval("p1").await.unwrap().unwrap();
    assert_eq!(old.approval.answerers, Default::default());
    // Its lapsed claim kept no question: none to list.
    assert!(store.unsettled(now_ms(), 10).await.unwrap().is_empty());
    // The new columns work. The type of `answerers` is not the facade's, so
    // the host's is written as the store keeps it.
    let asked = PendingApproval {
        id: "p2".into(),
        answerers: serde_json::from_value(json!(["host"])).unwrap(),
        principal: None,
        provenance: Vec::new(),
        digest: "d2".into(),
        ..old.approval.clone()
    };
    assert_ne!(asked.answerers, old.approval.answerers);
    store.ask_approval(&asked, 5).await.unwrap();
    assert_eq!(
        store
            .approval("p2")
            .await
            .unwrap()
            .unwrap()
            .approval
            .answerers,
        asked.answerers
    );
    let question = PendingApproval {
        reason: Some("in_doubt".into()),
        ..asked
    };
    store
        .claim_asking(
            &key("k-new"),
            &QuestionLease {
                lease: Lease {
                    now_ms: now_ms(),
                    lease_ms: 1,
                },
                question: &question,
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let unsettled = store.unsettled(now_ms(), 10).await.unwrap();
    assert_eq!(unsettled.len(), 1);
    assert_eq!(unsettled[0].key, key("k-new"));
    assert_eq!(unsettled[0].question, question);
}

/// Version 6's approval `p1` was asked by nobody named; `p2`, asked now,
/// keeps its principal.
pub async fn version_6_approval_gains_the_principal<S: Store>(store: &S) {
    let old = store.approval("p1").await.unwrap().unwrap();
    assert_eq!(old.approval.principal, None, "asked by nobody named");
    let principal = toolcall::Principal::new("https://auth.example.com", "alice").client("desk");
    let asked = PendingApproval {
        id: "p2".into(),
        digest: "d2".into(),
        principal: Some(principal.clone()),
        provenance: Vec::new(),
        ..old.approval.clone()
    };
    store.ask_approval(&asked, 5).await.unwrap();
    let back = store.approval("p2").await.unwrap().unwrap();
    assert_eq!(back.approval.principal, Some(principal));
}

/// Version 8's tables work on a store of version 7 with its approval `p1`:
/// the operators' controls, a rate window, and a signature of `p1`.
pub async fn version_7_gains_the_operators_controls<S: Store>(store: &S) {
    assert_eq!(store.controls(0).await.unwrap(), None);
    let change = ControlsChange {
        version: 0,
        by: "ops".into(),
        at_ms: now_ms(),
        summary: "first".into(),
    };
    assert!(
        store
            .put_controls(&ControlsWrite {
                expected: 0,
                document: "{}",
                change: &change
            })
            .await
            .unwrap()
    );
    assert_eq!(store.controls(0).await.unwrap().unwrap().version, 1);
    let start = now_ms() / 60_000 * 60_000;
    assert!(
        store
            .take_rate(
                &RateWindow {
                    bucket: "b",
                    start_ms: start,
                    length_ms: 60_000
                },
                1
            )
            .await
            .unwrap()
    );
    assert_eq!(store.rate_count("b", start).await.unwrap(), 1);
    signed_once(store, "p1").await;
}

/// `id` signed by ana, the first of the two signatures it needs.
async fn signed_once<S: Store>(store: &S, id: &str) {
    let signed = store
        .sign_approval(&SignatureWrite {
            id,
            signer: "ana",
            needed: 2,
            decision: &yes(now_ms()),
            now_ms: now_ms(),
        })
        .await;
    assert_eq!(signed.unwrap(), SignOutcome::Signed { signatures: 1 });
}

/// Version 8's question `asked`, by alice's call, is bound to alice: found
/// for her, not for bob's identical call.
pub async fn version_8_question_is_bound_to_who_asked<S: Store>(store: &S) {
    for (subject, found) in [("alice", Some("asked")), ("bob", None)] {
        let requester = toolcall::Principal::new("https://auth.example.com", subject).requester();
        let binding = binding(Requester::Only(Some(&requester)));
        let entry = store
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason: None,
                now_ms: now_ms(),
            })
            .await
            .unwrap();
        assert_eq!(
            entry.map(|e| e.approval.id).as_deref(),
            found,
            "{subject}'s call finds {found:?}"
        );
    }
}

/// Version 9's taint of session `old` and approval `p1` show no source;
/// what is added now keeps where it came from.
pub async fn version_9_gains_where_taint_came_from<S: Store>(store: &S) {
    let source = TaintSource::from_output("read", Some("c1"), 1, &json!({"note": "hi"}), &[]);
    assert!(store.tainted("old", &[]).await.unwrap().any);
    assert!(
        store.taint_sources("old").await.unwrap().is_empty(),
        "none kept"
    );
    store
        .add_taint(&Exposure {
            session: "old",
            fingerprints: &[],
            source: &source,
        })
        .await
        .unwrap();
    assert_eq!(
        store.taint_sources("old").await.unwrap(),
        std::slice::from_ref(&source)
    );
    let old = store.approval("p1").await.unwrap().unwrap();
    assert!(old.approval.provenance.is_empty());
    let asked = PendingApproval {
        id: "p2".into(),
        digest: "d2".into(),
        provenance: vec![source.clone()],
        ..old.approval.clone()
    };
    store.ask_approval(&asked, 5).await.unwrap();
    let back = store.approval("p2").await.unwrap().unwrap();
    assert_eq!(back.approval.provenance, [source]);
}

/// What a version-9 process wrote after the upgrade: the session `other`
/// tainted with no source, and its third approval waiting.
pub async fn version_9_writes_still_count<S: Store>(store: &S) {
    assert!(store.tainted("other", &[]).await.unwrap().any);
    assert!(store.taint_sources("other").await.unwrap().is_empty());
    assert_eq!(waiting(store).await, 3);
}

/// Eleven writes, soon old, for a purge to sort out: a step of `s-old`, a
/// count of `c-old`, the records `r-done` (completed), `r-doubt` (in
/// doubt) and `r-held` (claimed for ten minutes), the approvals
/// `p-expired` and `p-valid` (open for ten minutes), the locks `lock-old`
/// (held a millisecond) and `lock-held` (ten minutes).
pub async fn eleven_writes_soon_old<S: Store>(store: &S) {
    step_count_and_result(store, ["s-old", "c-old", "r-done"], 1).await;
    store
        .claim(&key("r-doubt"), a_second_from_now())
        .await
        .unwrap();
    store.doubt(&key("r-doubt")).await.unwrap();
    store
        .claim(
            &key("r-held"),
            Lease {
                now_ms: now_ms(),
                lease_ms: 600_000,
            },
        )
        .await
        .unwrap();
    store
        .put_approval(&approval("p-expired", now_ms() - 1))
        .await
        .unwrap();
    store
        .put_approval(&approval("p-valid", now_ms() + 600_000))
        .await
        .unwrap();
    for (resource, lease_ms) in [("lock-old", 1), ("lock-held", 600_000)] {
        let ask = LockAsk {
            resource: &key(resource),
            holder: "h",
            lease_ms,
        };
        store.lock_resource(&ask, now_ms()).await.unwrap();
    }
}

/// Four writes after [`eleven_writes_soon_old`]: a step of `s-new`, a
/// count of `c-new`, and the record `r-new` claimed and completed.
pub async fn four_new_writes<S: Store>(store: &S) {
    step_count_and_result(store, ["s-new", "c-new", "r-new"], 2).await;
}

/// A step of `session`, a count of `counted`, and the record `recorded`
/// claimed and completed with `result(n)`: four writes.
async fn step_count_and_result<S: Store>(
    store: &S,
    [session, counted, recorded]: [&str; 3],
    n: i64,
) {
    store.next_step(session, now_ms()).await.unwrap();
    store.count_call(&key(counted), now_ms()).await.unwrap();
    store
        .claim(&key(recorded), a_second_from_now())
        .await
        .unwrap();
    store.complete(&key(recorded), &result(n)).await.unwrap();
}

/// The approvals `p-undecided` and `p-decided`, both open until
/// `expires_ms`; the second decided now.
/// Two approvals, each signed once of the two signatures it needs:
/// `p-gone`, expiring at `expires_ms`, and `p-kept`, expiring in an hour.
pub async fn two_approvals_signed_once<S: Store>(store: &S, expires_ms: u64) {
    for (id, expires) in [("p-gone", expires_ms), ("p-kept", now_ms() + 3_600_000)] {
        store.put_approval(&approval(id, expires)).await.unwrap();
        signed_once(store, id).await;
    }
}

pub async fn one_of_two_approvals_decided<S: Store>(store: &S, expires_ms: u64) {
    for id in ["p-undecided", "p-decided"] {
        store.put_approval(&approval(id, expires_ms)).await.unwrap();
    }
    decided(store, "p-decided").await;
}
