//! What every entry point says about a question as time passes, who asked
//! it, and who waits for it: one state, read the same everywhere. Time is
//! the test's own clock (`toolcall::store::clock`), moved forward on
//! purpose; each test runs on one thread. Each test counts what the
//! backend did, not only what the answer said.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use toolcall::store::prelude::*;
use toolcall::store::{MemoryStore, PendingQuery, Store, now_ms};
use toolcall::{
    Approvals, Call, Caller, Code, Ctx, Dispatcher, DispatcherBuilder, Policy, Principal,
    ToolError, ToolResult, tool, tools,
};
use toolcall_core::controls;
use toolcall_core::life::{self, Answer, Decided, QuestionState, Refusal};
use toolcall_ledger::store::clock;
use toolcall_testkit::count::counted;
use toolcall_testkit::run::one_thread as runtime;
use toolcall_tests::person_answers;

/// What ran, counted where it ran.
#[derive(Default)]
struct Shop {
    refunds: AtomicU32,
    notes: AtomicU32,
    closed: AtomicU32,
    /// The next note is written, then its answer is lost.
    lose_note: AtomicU32,
}

/// Refunds part of an order.
#[tool(side_effect, high_risk)]
async fn refund(
    ctx: &Ctx<Shop>,
    /// The order.
    order: String,
    /// In cents.
    cents: i64,
) -> Result<Value, ToolError> {
    counted(
        &ctx.state.refunds,
        json!({"order": order, "refunded": cents}),
    )
}

/// Adds a note to an order; the notes system promises nothing about keys.
#[tool(side_effect)]
async fn add_note(
    ctx: &Ctx<Shop>,
    /// The order.
    order: String,
    /// The note.
    text: String,
) -> Result<Value, ToolError> {
    ctx.state.notes.fetch_add(1, Ordering::SeqCst);
    if ctx
        .state
        .lose_note
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(ToolError::transient("the answer was lost"));
    }
    Ok(json!({"order": order, "noted": text}))
}

/// Closes an account: two people approve, never the one who asked.
#[tool(side_effect, high_risk, approvals = 2)]
async fn close_account(
    ctx: &Ctx<Shop>,
    /// The account.
    account: String,
) -> Result<Value, ToolError> {
    counted(&ctx.state.closed, json!({"closed": account}))
}

const TTL: Duration = Duration::from_secs(15 * 60);

type Desk = Dispatcher<Shop, Arc<MemoryStore>>;

/// A replica over `store` whose questions a person answers in the inbox.
fn inbox(shop: &Arc<Shop>, store: &Arc<MemoryStore>) -> DispatcherBuilder<Shop, Arc<MemoryStore>> {
    Dispatcher::builder(
        tools![refund, add_note, close_account].unwrap(),
        Arc::clone(shop),
    )
    .store(Arc::clone(store))
    .approvals(Approvals::Inbox)
}

/// A shop and the one store its replicas share.
fn shop_and_store() -> (Arc<Shop>, Arc<MemoryStore>) {
    (Arc::new(Shop::default()), Arc::new(MemoryStore::default()))
}

fn replica(shop: &Arc<Shop>, store: &Arc<MemoryStore>) -> Desk {
    inbox(shop, store)
        .approval_ttl(TTL)
        .max_retries(0)
        .retry_backoff(Duration::ZERO)
        .max_steps(1_000)
        .build()
        .unwrap()
}

/// Runs `test` on a runtime of one thread, on a clock of its own.
fn on_one_thread<F: std::future::Future<Output = ()>>(test: F) {
    clock::reset();
    runtime().block_on(test);
    clock::reset();
}

/// Runs `test` on one thread with a shop, its store and the replica
/// `desk` makes over them.
fn at_a_desk<Test>(
    desk: fn(&Arc<Shop>, &Arc<MemoryStore>) -> Desk,
    test: impl FnOnce(Arc<Shop>, Arc<MemoryStore>, Desk) -> Test,
) where
    Test: std::future::Future<Output = ()>,
{
    on_one_thread(async {
        let (shop, store) = shop_and_store();
        let d = desk(&shop, &store);
        test(shop, store, d).await;
    });
}

const REFUND: &str = r#"{"order": "O-1", "cents": 2500}"#;

fn call<'a>(tool: &'a str, args: &'a str) -> Call<'a> {
    Call::new(tool, args).session("s")
}

async fn person(
    store: &impl Store,
    id: &str,
    by: &str,
    answer: Answer<'_>,
) -> Result<Decided, Refusal> {
    person_answers(store, id, by, &answer).await
}

fn id_of(answer: &ToolResult) -> String {
    assert_eq!(answer.code, Code::ConfirmationRequired, "{answer:?}");
    answer.question_id.clone().unwrap()
}

/// A person approves; another replica carries the approval out before the
/// waiting one looks: the wait answers what came of it, never "needs
/// approval", and nothing runs twice.
#[test]
fn a_wait_answers_a_decision_carried_out_elsewhere() {
    on_one_thread(async {
        let (shop, store) = shop_and_store();
        let (a, b) = (replica(&shop, &store), replica(&shop, &store));
        let id = id_of(&a.execute(call("refund", REFUND)).await);
        person(&*store, &id, "ana", Answer::Approve).await.unwrap();
        let ran = b.execute(call("refund", REFUND).approval(&id)).await;
        assert!(ran.ok && !ran.replayed, "{ran:?}");
        let waited = a
            .wait_for_decision(call("refund", REFUND), &id, now_ms() + 1_000)
            .await;
        assert!(waited.ok && waited.replayed, "{waited:?}");
        assert_eq!(shop.refunds.load(Ordering::SeqCst), 1);
        // Still open at the wait's end: the question, not an approval.
        let other = r#"{"order": "O-2", "cents": 100}"#;
        let id = id_of(&a.execute(call("refund", other)).await);
        let waited = a
            .wait_for_decision(call("refund", other), &id, now_ms() + 10)
            .await;
        assert_eq!(waited.code, Code::ConfirmationRequired, "{waited:?}");
        assert_eq!(waited.question_id.as_deref(), Some(id.as_str()));
        assert_eq!(shop.refunds.load(Ordering::SeqCst), 1);
    });
}

/// A note whose answer was lost is in doubt: its question never expires,
/// stays listed for a person, and is never answered "nothing ran".
#[test]
fn an_in_doubt_question_outlives_any_ttl_and_never_says_nothing_ran() {
    at_a_desk(replica, |shop, store, d| async move {
        shop.lose_note.store(1, Ordering::SeqCst);
        let args = r#"{"order": "O-1", "text": "called back"}"#;
        let lost = d.execute(call("add_note", args)).await;
        assert!(!lost.ok, "{lost:?}");
        let asked = d.execute(call("add_note", args)).await;
        assert_eq!(asked.code, Code::InDoubt, "{asked:?}");
        let id = asked.question_id.clone().unwrap();
        clock::advance(TTL * 10);
        let entry = store.approval(&id).await.unwrap().unwrap();
        assert_eq!(entry.state(now_ms()), QuestionState::Open);
        let listed = store
            .pending_page(&PendingQuery::new(now_ms(), 10))
            .await
            .unwrap();
        assert!(listed.items.iter().any(|q| q.id == id), "{listed:?}");
        let again = d.execute(call("add_note", args)).await;
        assert_eq!(again.code, Code::InDoubt, "{again:?}");
        assert!(!again.message.contains("nothing ran"), "{again:?}");
        // A person can still say what happened; it is then done.
        person(&*store, &id, "ana", Answer::Happened).await.unwrap();
        let done = d.execute(call("add_note", args)).await;
        assert!(done.ok, "{done:?}");
        assert_eq!(shop.notes.load(Ordering::SeqCst), 1);
    });
}

/// An approval nobody carried out in time is expired wherever it is read:
/// the person's same decision again is refused as expired (not "already
/// approved"), and a call with its id is `CONFIRMATION_EXPIRED`.
#[test]
fn an_approval_that_expired_unused_reads_expired_everywhere() {
    at_a_desk(replica, |shop, store, d| async move {
        let id = id_of(&d.execute(call("refund", REFUND)).await);
        person(&*store, &id, "ana", Answer::Approve).await.unwrap();
        clock::advance(TTL + Duration::from_secs(1));
        let entry = store.approval(&id).await.unwrap().unwrap();
        assert_eq!(entry.state(now_ms()), QuestionState::Expired);
        let again = person(&*store, &id, "ana", Answer::Approve).await;
        assert!(matches!(again, Err(Refusal::Expired)), "{again:?}");
        let with_id = d.execute(call("refund", REFUND).approval(&id)).await;
        assert_eq!(with_id.code, Code::ConfirmationExpired, "{with_id:?}");
        assert_eq!(shop.refunds.load(Ordering::SeqCst), 0);
        // The identical call asks anew, under a new id.
        let anew = id_of(&d.execute(call("refund", REFUND)).await);
        assert_ne!(anew, id);
    });
}

/// A denial given at the last minute of its question stands for its own
/// period, counted from the decision; then the identical call may ask anew.
#[test]
fn a_denial_stands_for_its_own_period() {
    at_a_desk(replica, |shop, store, d| async move {
        let id = id_of(&d.execute(call("refund", REFUND)).await);
        clock::advance(TTL - Duration::from_secs(60));
        person(&*store, &id, "ana", Answer::Deny).await.unwrap();
        for later in [Duration::from_secs(120), Duration::from_secs(6 * 3600)] {
            clock::advance(later);
            let again = d.execute(call("refund", REFUND)).await;
            assert_eq!(again.code, Code::ConfirmationDenied, "{again:?}");
        }
        clock::advance(life::DENIAL_TTL);
        let anew = d.execute(call("refund", REFUND)).await;
        assert_ne!(id_of(&anew), id);
        assert_eq!(shop.refunds.load(Ordering::SeqCst), 0);
    });
}

fn support() -> Caller {
    Caller::new(
        "support",
        Policy::new().allow(["refund", "add_note", "close_account"]),
    )
}

fn principal(subject: &str) -> Caller {
    support().with_principal(Principal::new("https://auth.example.com", subject))
}

fn with_support(shop: &Arc<Shop>, store: &Arc<MemoryStore>) -> Desk {
    inbox(shop, store)
        .caller(support())
        .max_pending_per_principal(2)
        .build()
        .unwrap()
}

/// Two principals on one caller and one conversation: bob's identical call
/// is a question of his own, so neither signs their own, and alice's call
/// runs once with the others' signatures.
#[test]
fn the_one_who_made_a_call_never_signs_it() {
    at_a_desk(with_support, |shop, store, d| async move {
        let (alice, bob) = (principal("alice"), principal("bob"));
        let args = r#"{"account": "AC-1"}"#;
        let hers = id_of(&d.execute(call("close_account", args).caller(&alice)).await);
        let his = id_of(&d.execute(call("close_account", args).caller(&bob)).await);
        assert_ne!(hers, his, "bob's call joined alice's question");
        for (id, own) in [(&hers, "alice"), (&his, "bob")] {
            let refused = person(&*store, id, own, Answer::Approve).await;
            assert!(
                matches!(refused, Err(Refusal::Controls(_))),
                "{own}: {refused:?}"
            );
        }
        let first = person(&*store, &hers, "bob", Answer::Approve)
            .await
            .unwrap();
        assert_eq!(
            first,
            Decided::Signed {
                signatures: 1,
                needed: 2
            }
        );
        // Where it stands, on every path: the call, and the call with its id.
        for asked in [
            d.execute(call("close_account", args).caller(&alice)).await,
            d.execute(call("close_account", args).caller(&alice).approval(&hers))
                .await,
        ] {
            assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
            assert_eq!(asked.data["needed"], 2, "{asked:?}");
            assert_eq!(asked.data["signatures"], 1, "{asked:?}");
            assert_eq!(asked.data["signed_by"], json!(["bob"]), "{asked:?}");
        }
        person(&*store, &hers, "dave", Answer::Approve)
            .await
            .unwrap();
        // Bob cannot carry out alice's question with its id.
        let stolen = d
            .execute(call("close_account", args).caller(&bob).approval(&hers))
            .await;
        assert_eq!(stolen.code, Code::ConfirmationInvalid, "{stolen:?}");
        let ran = d
            .execute(call("close_account", args).caller(&alice).approval(&hers))
            .await;
        assert!(ran.ok, "{ran:?}");
        assert_eq!(shop.closed.load(Ordering::SeqCst), 1);
        let entry = store.approval(&hers).await.unwrap().unwrap();
        assert_eq!(entry.approval.decision.unwrap().by, "bob, dave");
    });
}

/// One principal's open questions cannot fill what the others mapped to
/// its caller share.
#[test]
fn one_principal_cannot_fill_its_callers_questions() {
    at_a_desk(with_support, |_, _, d| async move {
        let (alice, bob) = (principal("alice"), principal("bob"));
        for n in 0..2 {
            let args = format!(r#"{{"order": "O-{n}", "cents": 1}}"#);
            id_of(&d.execute(call("refund", &args).caller(&alice)).await);
        }
        let full = d
            .execute(call("refund", r#"{"order": "O-9", "cents": 1}"#).caller(&alice))
            .await;
        assert_eq!(full.code, Code::PendingLimit, "{full:?}");
        id_of(
            &d.execute(call("refund", r#"{"order": "O-9", "cents": 1}"#).caller(&bob))
                .await,
        );
    });
}

/// The carry-out of a decided question is not a new call for a rate
/// limit: it was counted once, when it was asked.
#[test]
fn a_carry_out_is_not_counted_against_a_rate_limit() {
    at_a_desk(replica, |shop, store, d| async move {
        let policy: controls::Controls = toml_policy(
            "[[rate_limits]]\nname = \"refunds\"\ntool = \"refund\"\ncalls = 1\nper = \"1h\"\n",
        );
        controls::load_policy(
            &*store,
            d.registry(),
            &d.callers(),
            &policy,
            "ops",
            "p.toml",
        )
        .await
        .unwrap();
        let id = id_of(&d.execute(call("refund", REFUND)).await);
        person(&*store, &id, "ana", Answer::Approve).await.unwrap();
        let ran = d.execute(call("refund", REFUND).approval(&id)).await;
        assert!(ran.ok, "{ran:?}");
        assert_eq!(shop.refunds.load(Ordering::SeqCst), 1);
        // A new call is counted: the window is full.
        let limited = d
            .execute(call("refund", r#"{"order": "O-3", "cents": 1}"#))
            .await;
        assert_eq!(limited.code, Code::RateLimited, "{limited:?}");
    });
}

fn toml_policy(text: &str) -> controls::Controls {
    toml::from_str(text).unwrap()
}
