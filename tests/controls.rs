//! The operators' controls on a fleet: two replicas (two dispatchers, each
//! with its own handle on one store) where one receives the operator's
//! change and the other must obey it on its next call. Each scenario runs
//! on the memory store (one process), SQLite (one file, two connections)
//! and Postgres (one schema, two connections), and counts what the backend
//! did.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use toolcall::store::Store;
use toolcall::{
    Call, Caller, Code, Ctx, Decision, Dispatcher, MemoryAudit, Policy, Principal, Rejection,
    ToolResult, tool, tools,
};
use toolcall_core::controls::{self, ChangeError, Controls, Target};
use toolcall_core::life::{Answer, Decided, Refusal};
use toolcall_testkit::count::counted;
use toolcall_tests::person_answers;

/// Counts what ran.
#[derive(Default)]
struct Shop {
    reads: AtomicU32,
    refunds: AtomicU32,
}

/// Reads an order.
#[tool]
async fn get_order(
    ctx: &Ctx<Shop>,
    /// The order's id.
    order_id: String,
) -> Result<Value, Rejection> {
    counted(
        &ctx.state.reads,
        json!({"order_id": order_id, "total_cents": 9000}),
    )
}

/// Refunds part of an order.
#[tool(side_effect, high_risk)]
async fn refund_order(
    ctx: &Ctx<Shop>,
    /// The order's id.
    order_id: String,
    /// The amount, in cents.
    #[arg(min = 1, limit = "max_refund_cents")]
    amount_cents: i64,
) -> Result<Value, Rejection> {
    counted(
        &ctx.state.refunds,
        json!({"order_id": order_id, "refunded_cents": amount_cents}),
    )
}

/// Closes an account: two people must approve, whatever the policy says.
#[tool(side_effect, high_risk, approvals = 2)]
async fn close_account(
    ctx: &Ctx<Shop>,
    /// The account's id.
    account_id: String,
) -> Result<Value, Rejection> {
    counted(&ctx.state.refunds, json!({"closed": account_id}))
}

struct Fleet<St> {
    shop: Arc<Shop>,
    /// Takes the operator's changes.
    a: Dispatcher<Shop, Arc<St>>,
    /// Never told: reads the store.
    b: Dispatcher<Shop, Arc<St>>,
    audit: MemoryAudit,
}

fn support() -> Caller {
    Caller::new(
        "support",
        Policy::new()
            .allow(["get_order", "refund_order"])
            .limit("max_refund_cents", 50_000),
    )
}

fn fleet<St: Store>(first: St, second: St) -> Fleet<St> {
    let shop = Arc::new(Shop::default());
    let audit = MemoryAudit::new();
    let build = |store: St| {
        Dispatcher::builder(
            tools![get_order, refund_order, close_account].unwrap(),
            Arc::clone(&shop),
        )
        .store(Arc::new(store))
        .caller(support())
        .callers([
            Caller::new(
                "reader",
                Policy::new().allow(["get_order", "close_account"]),
            ),
            Caller::new(
                "partner",
                Policy::new()
                    .allow(["get_order", "refund_order"])
                    .limit("max_refund_cents", 50_000),
            ),
        ])
        .audit(audit.clone())
        .build()
        .unwrap()
    };
    Fleet {
        a: build(first),
        b: build(second),
        shop,
        audit,
    }
}

impl<St: Store> Fleet<St> {
    /// The operator on duty (`oncall`) stops `target` through replica A.
    async fn stop(&self, target: Target, reason: &str) {
        controls::stop(&**self.a.store(), target, reason, "oncall")
            .await
            .unwrap();
    }

    /// The operator on duty lifts the stop of `target` through replica A.
    async fn resume(&self, target: Target) -> Result<u64, ChangeError> {
        controls::resume(&**self.a.store(), target, "oncall").await
    }

    /// The operators load `policy` through replica A, as read from `file`.
    async fn load(&self, policy: &Controls, file: &str) -> Result<u64, ChangeError> {
        let callers = self.a.callers();
        controls::load_policy(
            &**self.a.store(),
            self.a.registry(),
            &callers,
            policy,
            "ops",
            file,
        )
        .await
    }

    fn refunds(&self) -> u32 {
        self.shop.refunds.load(Ordering::SeqCst)
    }

    fn reads(&self) -> u32 {
        self.shop.reads.load(Ordering::SeqCst)
    }
}

async fn call(
    d: &Dispatcher<Shop, impl Store>,
    session: &str,
    tool: &str,
    args: Value,
) -> ToolResult {
    let text = args.to_string();
    d.execute(Call::new(tool, text.as_str()).session(session))
        .await
}

/// Support's refund of `cents` on `order_id`, in `session`.
async fn refund(
    d: &Dispatcher<Shop, impl Store>,
    session: &str,
    order_id: &str,
    cents: i64,
) -> ToolResult {
    let args = json!({"order_id": order_id, "amount_cents": cents});
    call(d, session, REFUND, args).await
}

fn policy(toml: &str) -> Controls {
    toml::from_str(toml).unwrap()
}

macro_rules! on_every_store {
    ($name:ident, $tag:literal) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                let store = std::sync::Arc::new(toolcall::store::MemoryStore::default());
                super::$name(super::fleet(store.clone(), store)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let dir = std::env::temp_dir().join(format!(
                    "toolcall-controls-{}-{}",
                    stringify!($name),
                    std::process::id()
                ));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join("fleet.db");
                let first = toolcall_sqlite::SqliteStore::open(&path).unwrap();
                let second = toolcall_sqlite::SqliteStore::open(&path).unwrap();
                super::$name(super::fleet(first, second)).await;
                let _ = std::fs::remove_dir_all(&dir);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(url) = toolcall_tests::postgres_url() else {
                    return;
                };
                // A short name: Postgres cuts identifiers at 63 bytes.
                let schema = toolcall_tests::postgres_schema($tag);
                let first = toolcall_postgres::PostgresStore::connect_in_schema(&url, &schema)
                    .await
                    .unwrap();
                let second = toolcall_postgres::PostgresStore::connect_in_schema(&url, &schema)
                    .await
                    .unwrap();
                super::$name(super::fleet(first, second)).await;
                toolcall_postgres::PostgresStore::connect_in_schema(&url, &schema)
                    .await
                    .unwrap()
                    .drop_schema()
                    .await
                    .unwrap();
            }
        }
    };
}

on_every_store!(a_stop_reaches_a_replica_that_was_not_told, "stop");
on_every_store!(
    a_policy_reload_reaches_the_other_replica_and_a_bad_one_is_refused,
    "reload"
);
on_every_store!(
    a_rate_limit_is_counted_across_replicas_with_its_reset_time,
    "rate"
);
on_every_store!(
    two_people_approve_never_the_requester_and_racing_last_signatures_run_once,
    "people"
);
on_every_store!(a_rule_approves_small_refunds_and_the_audit_names_it, "rule");

on_every_store!(a_tool_that_asks_two_people_needs_no_policy, "tool2");
on_every_store!(
    a_read_alone_in_its_conversation_keeps_nothing_and_obeys_a_stop,
    "alone"
);

on_every_store!(
    reads_alone_started_after_a_stop_obey_it_while_others_are_on_their_way,
    "alone_busy"
);

const REFUND: &str = "refund_order";

async fn a_stop_reaches_a_replica_that_was_not_told<St: Store>(fleet: Fleet<St>) {
    // B reads the (empty) controls first: what it holds must not outlive a
    // change it was not told of.
    let read = call(&fleet.b, "s1", "get_order", json!({"order_id": "A-1"})).await;
    assert!(read.ok, "{read:?}");
    // A question asked before the stop.
    let asked = refund(&fleet.b, "s1", "A-1", 500).await;
    assert_eq!(asked.code, Code::ConfirmationRequired);
    let id = asked.question_id.clone().unwrap();

    fleet.stop(Target::Tool(REFUND.into()), "fraud wave").await;

    // B's next call, another conversation: stopped, with the reason.
    let stopped = refund(&fleet.b, "s2", "B-2", 100).await;
    assert_eq!(stopped.code, Code::Stopped, "{stopped:?}");
    assert_eq!(stopped.data["reason"], "fraud wave");
    assert!(
        stopped.message.contains("fraud wave"),
        "{}",
        stopped.message
    );
    // Reads go on.
    assert!(
        call(&fleet.b, "s2", "get_order", json!({"order_id": "B-2"}))
            .await
            .ok
    );
    // The question asked before cannot be approved on either replica.
    let approved = fleet.b.approve(Decision::new(&id, "s1").by("ana")).await;
    assert_eq!(approved.code, Code::ConfirmationInvalid, "{approved:?}");
    assert!(approved.message.contains("stopped"), "{}", approved.message);
    let refused = person_answers(&**fleet.a.store(), &id, "ana", &Answer::Approve).await;
    assert!(matches!(refused, Err(Refusal::Controls(_))), "{refused:?}");
    assert_eq!(fleet.refunds(), 0);

    // Stopping the caller stops its reads too; everything, everything.
    fleet.stop(Target::Caller("support".into()), "audit").await;
    let read = call(&fleet.b, "s3", "get_order", json!({"order_id": "C-3"})).await;
    assert_eq!(read.code, Code::Stopped);
    fleet
        .resume(Target::Caller("support".into()))
        .await
        .unwrap();

    // Enabled again: the question is approved and runs once.
    fleet.resume(Target::Tool(REFUND.into())).await.unwrap();
    let again = fleet.resume(Target::Tool(REFUND.into())).await;
    assert!(matches!(again, Err(ChangeError::Unchanged(_))), "{again:?}");
    let approved = fleet.b.approve(Decision::new(&id, "s1").by("ana")).await;
    assert!(approved.ok, "{approved:?}");
    assert_eq!(fleet.refunds(), 1);

    // Every change is in the history, newest first, with who and what.
    let history = fleet.b.store().controls_history(10).await.unwrap();
    let summaries: Vec<&str> = history.iter().map(|c| c.summary.as_str()).collect();
    assert_eq!(
        summaries,
        [
            "enabled tool refund_order",
            "enabled caller support",
            "stopped caller support: audit",
            "stopped tool refund_order: fraud wave",
        ]
    );
    assert!(history.iter().all(|change| change.by == "oncall"));
    assert_eq!(history[0].version, 4);
    // The audit has the refusals with their code.
    let stops = fleet
        .audit
        .records()
        .iter()
        .filter(|r| r.code == Code::Stopped)
        .count();
    assert_eq!(stops, 2);
}

async fn a_policy_reload_reaches_the_other_replica_and_a_bad_one_is_refused<St: Store>(
    fleet: Fleet<St>,
) {
    let store = &**fleet.a.store();
    let callers = fleet.a.callers();
    let registry = fleet.a.registry();
    assert!(
        call(&fleet.b, "s", "get_order", json!({"order_id": "A-1"}))
            .await
            .ok
    );

    let narrowed = policy(
        r#"
        [callers.support]
        allow = ["get_order"]
        limits = { max_refund_cents = 100 }
        "#,
    );
    let version = fleet.load(&narrowed, "p.toml").await.unwrap();
    assert_eq!(version, 1);
    let refused = refund(&fleet.b, "s", "A-1", 50).await;
    assert_eq!(refused.code, Code::ToolNotAllowed, "{refused:?}");

    // A file that does not check is refused whole; the old policy stands.
    let bad = policy(
        r#"
        [callers.support]
        allow = ["get_ordr", "refund_order"]
        limits = { max_refund_cents = 90000 }

        [[rate_limits]]
        name = "reads"
        tool = "get_order"
        calls = 0
        per = "1m"
        "#,
    );
    let error = fleet.load(&bad, "bad.toml").await.unwrap_err();
    let ChangeError::Invalid(errors) = &error else {
        panic!("{error:?}");
    };
    let text = error.to_string();
    assert_eq!(errors.len(), 3, "{text}");
    assert!(text.contains("did you mean `get_order`"), "{text}");
    assert!(text.contains("above the code's 50000"), "{text}");
    assert!(text.contains("rate_limits[0].calls"), "{text}");
    assert_eq!(controls::read(store).await.unwrap().0, 1, "nothing written");
    let still = refund(&fleet.b, "s", "A-1", 50).await;
    assert_eq!(still.code, Code::ToolNotAllowed);

    // A file can only narrow: a tool the code does not allow is refused.
    let widening = policy(
        r#"
        [callers.reader]
        allow = ["refund_order"]
        "#,
    );
    let errors = controls::check(&widening, registry, &callers);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].problem.contains("only take tools away"),
        "{}",
        errors[0]
    );

    // Loaded again wider (the code's ceiling): B calls refunds again.
    fleet
        .load(&Controls::default(), "empty.toml")
        .await
        .unwrap();
    let asked = refund(&fleet.b, "s", "A-1", 50).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let history = store.controls_history(5).await.unwrap();
    assert_eq!(history.len(), 2);
    assert!(
        history[1].summary.contains("changed callers.support"),
        "{}",
        history[1].summary
    );
    assert_eq!(fleet.refunds(), 0);
}

async fn a_rate_limit_is_counted_across_replicas_with_its_reset_time<St: Store>(fleet: Fleet<St>) {
    let limits = policy(
        r#"
        [[rate_limits]]
        name = "reads"
        tool = "get_order"
        calls = 3
        per = "1h"
        "#,
    );
    fleet.load(&limits, "r.toml").await.unwrap();
    let read = |n: u32| json!({"order_id": format!("A-{n}")});
    for (n, replica) in [(1, &fleet.a), (2, &fleet.b), (3, &fleet.a)] {
        let answer = call(replica, &format!("s{n}"), "get_order", read(n)).await;
        assert!(answer.ok, "{answer:?}");
    }
    // A dry run reads the count and counts nothing.
    let dry = fleet
        .b
        .execute(
            Call::new("get_order", r#"{"order_id": "D-1"}"#)
                .session("d")
                .dry_run(true),
        )
        .await;
    assert_eq!(dry.code, Code::RateLimited, "{dry:?}");
    for replica in [&fleet.b, &fleet.a] {
        let over = call(replica, "s9", "get_order", read(9)).await;
        assert_eq!(over.code, Code::RateLimited, "{over:?}");
        let retry = over.data["retry_after_ms"].as_u64().unwrap();
        assert!(retry > 0 && retry <= 3_600_000, "{retry}");
        assert_eq!(over.data["limit"], "reads");
    }
    assert_eq!(fleet.reads(), 3, "nothing over the limit ran");
    // The limit counts one tool: refunds are asked as before.
    let asked = refund(&fleet.b, "s", "A-1", 5).await;
    assert_eq!(asked.code, Code::ConfirmationRequired);
    // Nothing over the limit took a step: the conversation's budget is
    // untouched by the refusals (its step is still 1 after one call).
    let records = fleet.audit.records();
    assert!(
        records
            .iter()
            .filter(|r| r.code == Code::RateLimited)
            .all(|r| r.step.is_none_or(|step| step == 0)),
        "{records:?}"
    );
}

async fn two_people_approve_never_the_requester_and_racing_last_signatures_run_once<St: Store>(
    fleet: Fleet<St>,
) {
    let store = &**fleet.a.store();
    fleet
        .load(&policy("[approvals]\nrefund_order = 2\n"), "two.toml")
        .await
        .unwrap();
    let carol = fleet
        .a
        .default_caller()
        .with_principal(Principal::new("https://auth.example.com", "carol"));
    let args = r#"{"order_id": "A-1", "amount_cents": 700}"#;
    let carols = || Call::new(REFUND, args).session("s").caller(&carol);
    let asked = fleet.b.execute(carols()).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let id = asked.question_id.clone().unwrap();

    // The host's word is one person's: not enough.
    let host = fleet.b.execute(carols().confirmed(true)).await;
    assert_eq!(host.code, Code::ConfirmationRequired, "{host:?}");
    // The requester may not sign.
    let own = person_answers(store, &id, "carol", &Answer::Approve).await;
    assert!(matches!(own, Err(Refusal::Controls(_))), "{own:?}");
    // One signature waits for the others; signing twice counts once.
    for _ in 0..2 {
        let first = person_answers(store, &id, "ana", &Answer::Approve)
            .await
            .unwrap();
        assert_eq!(
            first,
            Decided::Signed {
                signatures: 1,
                needed: 2
            }
        );
    }
    // The model's call bringing the id does not take it up undecided.
    let early = fleet.a.execute(carols().approval(&id)).await;
    assert_eq!(early.code, Code::ConfirmationRequired, "{early:?}");
    assert_eq!(early.question_id.as_deref(), Some(id.as_str()), "{early:?}");
    assert_eq!(fleet.refunds(), 0);

    // Two last signatures on two replicas at once: one decides and its
    // replica runs the call, once; the other is answered with what came of
    // it, never a second run.
    let (bob, dan) = tokio::join!(
        fleet
            .a
            .approve(Decision::new(&id, "s").caller(&carol).by("bob")),
        fleet
            .b
            .approve(Decision::new(&id, "s").caller(&carol).by("dan")),
    );
    assert_eq!(fleet.refunds(), 1, "{bob:?} {dan:?}");
    let ran: Vec<&ToolResult> = [&bob, &dan]
        .into_iter()
        .filter(|r| r.ok && !r.replayed)
        .collect();
    assert_eq!(ran.len(), 1, "{bob:?} {dan:?}");
    let signatures = store.signatures(&id).await.unwrap();
    assert_eq!(signatures.len(), 2, "{signatures:?}");
    assert_eq!(signatures[0].by, "ana");
    let again = fleet.b.execute(carols().approval(&id)).await;
    assert!(again.ok && again.replayed, "{again:?}");
    assert_eq!(fleet.refunds(), 1);
    let entry = store.approval(&id).await.unwrap().unwrap();
    let by = entry.approval.decision.unwrap().by;
    assert!(by.starts_with("ana, "), "{by}");
}

async fn a_rule_approves_small_refunds_and_the_audit_names_it<St: Store>(fleet: Fleet<St>) {
    let store = &**fleet.a.store();
    fleet
        .load(
            &policy(
                r#"
            [[approval_rules]]
            name = "small-refunds"
            tool = "refund_order"
            caller = "support"
            arguments.amount_cents = { max = 1000 }
            "#,
            ),
            "rules.toml",
        )
        .await
        .unwrap();
    // A dry run says the rule would approve it, and runs nothing.
    let dry = fleet
        .b
        .execute(
            Call::new(REFUND, r#"{"order_id": "A-1", "amount_cents": 1000}"#)
                .session("dry")
                .dry_run(true),
        )
        .await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "run", "{dry:?}");
    assert_eq!(dry.data["approved_by"], "rule:small-refunds");
    assert_eq!(fleet.refunds(), 0);
    let small = refund(&fleet.b, "s", "A-1", 1000).await;
    assert!(small.ok, "{small:?}");
    assert_eq!(fleet.refunds(), 1);
    let large = refund(&fleet.b, "s", "A-2", 1001).await;
    assert_eq!(large.code, Code::ConfirmationRequired);
    // Another caller: the rule names one.
    let other = fleet
        .b
        .execute(
            Call::new(REFUND, r#"{"order_id": "A-3", "amount_cents": 10}"#)
                .session("s")
                .caller(fleet.b.caller("partner").unwrap()),
        )
        .await;
    assert_eq!(other.code, Code::ConfirmationRequired);
    assert_eq!(fleet.refunds(), 1);
    let records = fleet.audit.records();
    let ruled: Vec<_> = records
        .iter()
        .filter(|r| r.approved_by.as_deref() == Some("rule:small-refunds"))
        .collect();
    assert_eq!(ruled.len(), 1, "{records:?}");
    assert!(ruled[0].ok && ruled[0].confirmed);
    // The store keeps the question, decided by the rule.
    let decided = store.decided_approvals(10).await.unwrap();
    assert!(
        decided.iter().any(|entry| entry
            .approval
            .decision
            .as_ref()
            .is_some_and(|d| d.by == "rule:small-refunds")),
        "{decided:?}"
    );
    // A replay of the small refund runs nothing more.
    let replay = refund(&fleet.a, "s", "A-1", 1000).await;
    assert!(replay.ok && replay.replayed, "{replay:?}");
    assert_eq!(fleet.refunds(), 1);
}

async fn a_tool_that_asks_two_people_needs_no_policy<St: Store>(fleet: Fleet<St>) {
    let reader = fleet.a.caller("reader").unwrap().clone();
    let args = r#"{"account_id": "AC-9"}"#;
    let call = || {
        Call::new("close_account", args)
            .session("s")
            .caller(&reader)
    };
    let asked = fleet.b.execute(call()).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let id = asked.question_id.clone().unwrap();
    // The question keeps what it needs: another replica reads it so.
    let kept = fleet.a.store().approval(&id).await.unwrap().unwrap();
    assert_eq!(kept.approval.answerers.people_needed(), 2);
    assert!(!kept.approval.answerers.host());
    let confirmed = fleet.a.execute(call().confirmed(true)).await;
    assert_eq!(confirmed.code, Code::ConfirmationRequired, "{confirmed:?}");
    let first = fleet
        .a
        .approve(Decision::new(&id, "s").caller(&reader).by("ana"))
        .await;
    assert_eq!(first.code, Code::ConfirmationRequired, "{first:?}");
    assert_eq!(first.data["signatures"], 1);
    assert_eq!(first.data["needed"], 2);
    assert_eq!(fleet.refunds(), 0);
    // The asking caller is not one of the people.
    let own = fleet
        .b
        .approve(Decision::new(&id, "s").caller(&reader).by("reader"))
        .await;
    assert_eq!(own.code, Code::ConfirmationInvalid, "{own:?}");
    let second = fleet
        .b
        .approve(Decision::new(&id, "s").caller(&reader).by("bob"))
        .await;
    assert!(second.ok, "{second:?}");
    assert_eq!(fleet.refunds(), 1);
    let replay = fleet.a.execute(call().approval(&id)).await;
    assert!(replay.ok && replay.replayed, "{replay:?}");
    assert_eq!(fleet.refunds(), 1);
}

async fn a_read_alone_in_its_conversation_keeps_nothing_and_obeys_a_stop<St: Store>(
    fleet: Fleet<St>,
) {
    let read = r#"{"order_id": "A-1"}"#;
    for _ in 0..3 {
        let alone = fleet
            .b
            .execute(Call::new("get_order", read).session("once").alone(true))
            .await;
        assert!(alone.ok, "{alone:?}");
    }
    // Nothing was kept of those: the conversation's next kept call is its
    // first step, and its first identical call.
    let kept = call(&fleet.a, "once", "get_order", json!({"order_id": "A-1"})).await;
    assert!(kept.ok, "{kept:?}");
    let steps: Vec<Option<u64>> = fleet.audit.records().iter().map(|r| r.step).collect();
    assert_eq!(steps, [Some(1), Some(1), Some(1), Some(1)], "{steps:?}");
    assert_eq!(fleet.reads(), 4);
    // Judged by the controls as any call: a stop made through the other
    // replica is obeyed on the next call alone.
    fleet
        .stop(Target::Tool("get_order".into()), "maintenance")
        .await;
    let stopped = fleet
        .b
        .execute(Call::new("get_order", read).session("twice").alone(true))
        .await;
    assert_eq!(stopped.code, Code::Stopped, "{stopped:?}");
    assert_eq!(fleet.reads(), 4);
}

/// Replica B serves reads alone in their conversations without pause; a
/// stop made through A binds every read that starts on B after it, however
/// many reads of the controls were on their way when it was made.
async fn reads_alone_started_after_a_stop_obey_it_while_others_are_on_their_way<St: Store>(
    fleet: Fleet<St>,
) {
    let read = r#"{"order_id": "A-1"}"#;
    let done = std::sync::atomic::AtomicBool::new(false);
    let fleet = &fleet;
    let alone = |session: String| async move {
        fleet
            .b
            .execute(Call::new("get_order", read).session(&session).alone(true))
            .await
    };
    let busy = |lane: u32| {
        let (done, alone) = (&done, &alone);
        async move {
            let mut n = 0;
            while !done.load(Ordering::SeqCst) {
                let answer = alone(format!("busy-{lane}-{n}")).await;
                assert!(answer.ok || answer.code == Code::Stopped, "{answer:?}");
                n += 1;
                // A store that answers at once never leaves the task.
                tokio::task::yield_now().await;
            }
        }
    };
    let operator = async {
        // Each round a stop made while reads are on their way, then lifted.
        for round in 0..24 {
            let ran = fleet.reads();
            while fleet.reads() < ran + 20 {
                tokio::task::yield_now().await;
            }
            fleet
                .stop(Target::Tool("get_order".into()), "maintenance")
                .await;
            for n in 0..5 {
                let answer = alone(format!("after-{round}-{n}")).await;
                assert_eq!(
                    answer.code,
                    Code::Stopped,
                    "a read started after the stop: {answer:?}"
                );
            }
            fleet
                .resume(Target::Tool("get_order".into()))
                .await
                .unwrap();
        }
        done.store(true, Ordering::SeqCst);
    };
    tokio::join!(busy(0), busy(1), busy(2), busy(3), operator);
}
