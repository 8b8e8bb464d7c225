//! A newcomer's first hour: mistakes in the policy found when the dispatcher
//! is built, not on every call; messages the host owns; and answers that
//! cannot be right (a loop reported before any result existed, an approval
//! answered for no tool, a check's transient failure never retried). The
//! assertion that matters is what the backend saw, and the exact code.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use orders::{Shop, get_order, refund_order};
use serde_json::{Value, json};
use toolcall::{
    BuildError, BuildWarning, Call, Caller, Code, Ctx, Decision, Dispatcher, Failure, MemoryAudit,
    MessageContext, Policy, Rejection, ToolError, ToolResult, UNKNOWN_APPROVAL_TOOL, tool, tools,
};
use toolcall_testkit::answer::{assert_code_opens, assert_code_says};
use toolcall_testkit::run::all_at_once;

#[path = "shop.rs"]
mod shop;
use shop::shop_with;
use toolcall_testkit::count::counted;

const REFUND: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#;

// ------------------------------------------------------------ the backend

/// A backend that counts what reached it, can be slow, and whose checks can
/// fail transiently.
#[derive(Default)]
struct Backend {
    runs: AtomicU32,
    checks: AtomicU32,
    check_failures: AtomicU32,
    delay_ms: AtomicU32,
}

impl Backend {
    fn slow(delay_ms: u32) -> Arc<Backend> {
        let backend = Backend::default();
        backend.delay_ms.store(delay_ms, Ordering::SeqCst);
        Arc::new(backend)
    }

    fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }

    fn checks(&self) -> u32 {
        self.checks.load(Ordering::SeqCst)
    }
}

/// Moves money, slowly, with no deduplication of its own.
#[tool(side_effect)]
async fn transfer(
    ctx: &Ctx<Backend>,
    /// Who gets the money.
    to: String,
    /// Amount in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    let run = ctx.state.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let delay = ctx.state.delay_ms.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(u64::from(delay))).await;
    Ok(json!({"to": to, "cents": cents, "run": run}))
}

/// Pays a supplier. Amount in cents, bounded by the caller's limit.
#[tool(side_effect)]
async fn pay_out(
    ctx: &Ctx<Backend>,
    /// Amount in cents.
    #[arg(limit = "max_payout_cents")]
    cents: i64,
) -> Result<Value, Rejection> {
    counted(&ctx.state.runs, json!({"paid": cents}))
}

/// Books a room, after a check against a calendar that may be unreachable.
#[tool(side_effect, check = check_booking)]
async fn book(
    ctx: &Ctx<Backend>,
    /// The room, for example R-12.
    room: String,
) -> Result<Value, Rejection> {
    counted(&ctx.state.runs, json!({"booked": room}))
}

fn check_booking(_: &BookArgs, ctx: &Ctx<Backend>) -> Result<(), ToolError> {
    ctx.state.checks.fetch_add(1, Ordering::SeqCst);
    let left = ctx.state.check_failures.load(Ordering::SeqCst);
    if left > 0 {
        ctx.state.check_failures.store(left - 1, Ordering::SeqCst);
        return Err(ToolError::transient("calendar unreachable"));
    }
    Ok(())
}

/// Wires money abroad: a person approves each wire, after a slow check.
#[tool(side_effect, high_risk, check = check_wire)]
async fn wire(
    ctx: &Ctx<Backend>,
    /// The receiving account's IBAN.
    iban: String,
) -> Result<Value, Rejection> {
    counted(&ctx.state.runs, json!({"wired": iban}))
}

fn check_wire(_: &WireArgs, ctx: &Ctx<Backend>) -> Result<(), Rejection> {
    // A check blocks (it is not async): slow, it keeps its worker thread.
    let delay = ctx.state.delay_ms.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(u64::from(delay)));
    Ok(())
}

/// Reserves a table; the restaurant answers slowly that it is full.
#[tool(side_effect)]
async fn reserve(
    ctx: &Ctx<Backend>,
    /// How many people.
    people: u32,
) -> Result<Value, Rejection> {
    ctx.state.runs.fetch_add(1, Ordering::SeqCst);
    let delay = ctx.state.delay_ms.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(u64::from(delay))).await;
    Err(Rejection::new(
        "FULLY_BOOKED",
        format!("No table for {people} tonight."),
    ))
}

fn backend_dispatcher(backend: &Arc<Backend>) -> toolcall::DispatcherBuilder<Backend> {
    Dispatcher::builder(
        tools![transfer, pay_out, book, wire, reserve].unwrap(),
        Arc::clone(backend),
    )
    .policy(
        Policy::new()
            .allow(["transfer", "pay_out", "book", "wire", "reserve"])
            .limit("max_payout_cents", 10_000),
    )
    .retry_backoff(Duration::ZERO)
}

const TRANSFER: &str = r#"{"to": "ana", "cents": 2590}"#;

// ------------------------------------------- 1. the policy, checked at build

/// Builds the orders shop's dispatcher with a policy that allows `allow`
/// and sets `limit`, one of them a name no tool declares: the build is
/// refused with a message that names the typo and the name declared.
fn assert_refused_naming(allow: [&str; 2], limit: &str, typo: &str, declared: &str) {
    let registry = tools![get_order, refund_order].unwrap();
    let text = Dispatcher::builder(registry, Arc::new(Shop::new()))
        .part(Shop::reader)
        .policy(Policy::new().allow(allow).limit(limit, 50_000))
        .build()
        .expect_err("a name no tool declares is refused")
        .to_string();
    assert!(
        text.contains(&format!("`{typo}`")) && text.contains(&format!("`{declared}`")),
        "names the typo {typo} and the declared {declared}: {text}"
    );
}

#[test]
fn a_typo_in_the_allowlist_is_a_build_error_naming_the_real_tool() {
    assert_refused_naming(
        ["get_order", "refund_orders"],
        "max_refund_cents",
        "refund_orders",
        "refund_order",
    );
}

#[test]
fn a_typo_in_a_limit_is_a_build_error_naming_the_declared_limit() {
    assert_refused_naming(
        ["get_order", "refund_order"],
        "max_refund_cent",
        "max_refund_cent",
        "max_refund_cents",
    );
}

#[test]
fn the_errors_say_which_caller_and_which_name() {
    let registry = || tools![transfer, pay_out, book].unwrap();
    let backend = Backend::slow(0);
    let allowlist = Dispatcher::builder(registry(), Arc::clone(&backend))
        .policy(Policy::new().allow(["transfers"]))
        .build()
        .unwrap_err();
    assert_eq!(
        allowlist,
        BuildError::UnknownTool {
            caller: "default".into(),
            tool: "transfers".into(),
            closest: Some("transfer"),
        }
    );
    let limit = Dispatcher::builder(registry(), Arc::clone(&backend))
        .policy(Policy::new().allow(["pay_out"]).limit("max_payout_cent", 1))
        .build()
        .unwrap_err();
    assert_eq!(
        limit,
        BuildError::UnknownLimit {
            caller: "default".into(),
            limit: "max_payout_cent".into(),
            closest: Some("max_payout_cents"),
        }
    );
    assert!(
        limit
            .to_string()
            .contains("did you mean `max_payout_cents`?"),
        "{limit}"
    );
    // Nothing close: no guess.
    let stranger = Dispatcher::builder(registry(), Arc::clone(&backend))
        .policy(Policy::new().allow(["delete_everything"]))
        .build()
        .unwrap_err();
    assert!(
        matches!(&stranger, BuildError::UnknownTool { closest: None, .. }),
        "{stranger:?}"
    );
}

#[test]
fn every_caller_the_host_names_is_checked_at_build_or_when_it_is_made() {
    let backend = Backend::slow(0);
    let support = Caller::new(
        "support",
        Policy::new()
            .allow(["transfer", "pay_out"])
            .limit("max_payout_cents", 500),
    );
    let reader = Caller::new("reader", Policy::new().allow(["boook"]));
    let refused = backend_dispatcher(&backend)
        .callers([support.clone(), reader])
        .build()
        .unwrap_err();
    assert_eq!(
        refused,
        BuildError::UnknownTool {
            caller: "reader".into(),
            tool: "boook".into(),
            closest: Some("book"),
        }
    );

    let d = backend_dispatcher(&backend)
        .callers([support.clone()])
        .build()
        .unwrap();
    assert_eq!(d.caller("support"), Some(&support));
    assert_eq!(d.caller("default"), Some(d.default_caller()));
    assert_eq!(d.caller("nobody"), None);

    // A caller made later, per tenant, is checked once when it is made.
    let tenant = Caller::new(
        "tenant-7",
        Policy::new()
            .allow(["pay_out"])
            .limit("max_payout_minuts", 5),
    );
    assert!(matches!(
        d.check_caller(&tenant),
        Err(BuildError::UnknownLimit {
            closest: Some("max_payout_cents"),
            ..
        })
    ));
    let unlimited = Caller::new("tenant-8", Policy::new().allow(["pay_out", "transfer"]));
    assert_eq!(
        d.check_caller(&unlimited).unwrap(),
        [BuildWarning::LimitNotSet {
            caller: "tenant-8".into(),
            tool: "pay_out",
            field: "cents",
            limit: "max_payout_cents",
        }]
    );

    let twin = Caller::new("support", Policy::new().allow(["transfer"]));
    assert_eq!(
        backend_dispatcher(&backend)
            .callers([support, twin])
            .build()
            .unwrap_err(),
        BuildError::DuplicateCaller {
            caller: "support".into()
        }
    );
}

#[tokio::test]
async fn a_declared_limit_no_caller_sets_is_a_warning_and_still_fails_closed() {
    let backend = Backend::slow(0);
    // No policy: the default caller may call everything and sets no limit.
    let d = Dispatcher::builder(
        tools![transfer, pay_out, book].unwrap(),
        Arc::clone(&backend),
    )
    .build()
    .unwrap();
    assert_eq!(
        d.warnings(),
        [BuildWarning::LimitNotSet {
            caller: "default".into(),
            tool: "pay_out",
            field: "cents",
            limit: "max_payout_cents",
        }]
    );
    assert!(
        d.warnings()[0]
            .to_string()
            .contains(r#"Policy::limit("max_payout_cents", ...)"#),
        "{}",
        d.warnings()[0]
    );
    let refused = d
        .execute(Call::new("pay_out", r#"{"cents": 1}"#).session("default"))
        .await;
    assert_eq!(refused.code, Code::PolicyLimit);
    assert_eq!(backend.runs(), 0);

    // Set, or not allowed at all: nothing to warn of.
    let quiet = backend_dispatcher(&backend)
        .callers([Caller::new("reader", Policy::new().allow(["book"]))])
        .build()
        .unwrap();
    assert!(quiet.warnings().is_empty(), "{:?}", quiet.warnings());
}

/// Shouts a text, after a check written against another state type.
#[tool(check = check_shout)]
fn shout(
    /// The text.
    text: String,
) -> Result<String, Rejection> {
    Ok(text.to_uppercase())
}

fn check_shout(_: &ShoutArgs, _: &Ctx<String>) -> Result<(), Rejection> {
    Ok(())
}

/// Charges a card; a lost answer is looked up with a function written
/// against another state type.
#[tool(side_effect, reconcile = find_charge)]
async fn charge(
    /// Amount in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    Ok(json!({"charged": cents}))
}

async fn find_charge(_: &Ctx<String>, _: &str) -> Result<Option<Value>, ToolError> {
    Ok(None)
}

#[test]
fn a_reconcile_function_written_for_another_state_is_refused_at_build() {
    let error = Dispatcher::builder(tools![charge].unwrap(), Backend::slow(0))
        .build()
        .expect_err("the lookup could never run");
    assert!(
        matches!(
            &error,
            BuildError::ReconcileStateMismatch { tool: "charge", .. }
        ),
        "{error:?}"
    );
}

#[test]
fn a_check_written_for_another_state_is_refused_at_build() {
    let built = Dispatcher::builder(tools![shout].unwrap(), Backend::slow(0)).build();
    let error = built.expect_err("the check could never run");
    assert!(
        matches!(
            &error,
            BuildError::CheckStateMismatch { tool: "shout", expected, .. } if expected.contains("String")
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("check of tool `shout`"),
        "{error}"
    );
}

// --------------------------------------------- 2. messages the host can own

/// The orders shop where a refund of more than 1 000 cents is over the
/// limit: [`REFUND`], 2 590, is refused whatever the host confirms.
fn small_refunds(builder: toolcall::DispatcherBuilder<Shop>) -> toolcall::DispatcherBuilder<Shop> {
    builder.policy(
        Policy::new()
            .allow(["get_order", "refund_order"])
            .limit("max_refund_cents", 1_000),
    )
}

/// [`REFUND`] with the host's say-so, in the conversation `default`.
async fn confirmed_refund(d: &Dispatcher<Shop>) -> ToolResult {
    let call = Call::new("refund_order", REFUND).session("default");
    d.execute(call.confirmed(true)).await
}

#[tokio::test]
async fn no_default_message_sends_the_user_to_a_human_agent() {
    let (shop, d) = shop_with(small_refunds);
    let over = confirmed_refund(&d).await;
    assert_code_says(&over, Code::PolicyLimit, "limit of 1000 (max_refund_cents)");
    assert!(
        !over.message.contains("human") && !over.message.contains("escalated"),
        "{}",
        over.message
    );
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn the_host_replaces_a_codes_message_and_the_code_and_data_stay() {
    let (shop, d) = shop_with(|builder| {
        small_refunds(builder)
            .message(Code::PolicyLimit, |m: &MessageContext| {
                format!(
                    "{} {} is over your plan ({} {}); suggest the Pro plan. [{}]",
                    m.field().unwrap(),
                    m.value().unwrap(),
                    m.limit().unwrap(),
                    m.limit_value().unwrap(),
                    m.failure(),
                )
            })
            .message(Code::UnknownTool, |m: &MessageContext| {
                format!(
                    "There is no {}; use one of {}.",
                    m.tool(),
                    m.data()["available"]
                )
            })
            .message(Code::ConfirmationRequired, |m: &MessageContext| {
                format!("Ask the user to confirm: {}", m.data()["pending"])
            })
    });

    let over = confirmed_refund(&d).await;
    assert_eq!(over.code, Code::PolicyLimit);
    assert_eq!(
        over.message,
        "amount_cents 2590 is over your plan (max_refund_cents 1000); suggest the Pro plan. \
         [POLICY_LIMIT (OverLimit)]"
    );
    assert!(over.data.is_empty());

    let unknown = d
        .execute(Call::new("cancel_order", "{}").session("default"))
        .await;
    assert_eq!(unknown.code, Code::UnknownTool);
    assert_eq!(
        unknown.data["available"],
        json!(["get_order", "refund_order"])
    );
    assert_eq!(
        unknown.message,
        r#"There is no cancel_order; use one of ["get_order","refund_order"]."#
    );

    let small = REFUND.replace("2590", "500");
    let asked = d
        .execute(Call::new("refund_order", &small).session("default"))
        .await;
    assert_eq!(asked.code, Code::ConfirmationRequired);
    assert_eq!(asked.data["pending"]["amount_cents"], 500);
    assert!(asked.question_id.is_some());
    assert!(
        asked.message.starts_with("Ask the user to confirm: {"),
        "{}",
        asked.message
    );

    // Codes the host did not replace keep their defaults.
    let malformed = d
        .execute(Call::new("get_order", "{").session("default"))
        .await;
    assert_code_opens(&malformed, Code::InvalidJson, "Arguments");
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn a_message_function_that_panics_leaves_the_default() {
    let backend = Backend::slow(0);
    let d = backend_dispatcher(&backend)
        .max_duplicate_calls(1)
        .message(Code::LoopDetected, |_: &MessageContext| panic!("host bug"))
        .build()
        .unwrap();
    assert!(
        d.execute(Call::new("transfer", TRANSFER).session("default"))
            .await
            .ok
    );
    let looped = d
        .execute(Call::new("transfer", TRANSFER).session("default"))
        .await;
    assert_eq!(looped.code, Code::LoopDetected);
    assert_eq!(
        looped.message,
        "This exact call was already made. Use the previous result."
    );
}

#[test]
fn one_table_holds_every_standard_failure_and_its_code() {
    let codes: Vec<String> = Failure::ALL.iter().map(|f| f.code().to_string()).collect();
    for code in [
        "STEP_LIMIT",
        "UNKNOWN_TOOL",
        "TOOL_NOT_ALLOWED",
        "INVALID_JSON",
        "INVALID_ARGUMENTS",
        "LOOP_DETECTED",
        "POLICY_LIMIT",
        "CONFIRMATION_REQUIRED",
        "CONFIRMATION_DENIED",
        "CONFIRMATION_EXPIRED",
        "CONFIRMATION_INVALID",
        "CALL_IN_PROGRESS",
        "RESOURCE_BUSY",
        "TIMEOUT",
        "STORE_UNAVAILABLE",
        "UPSTREAM_UNAVAILABLE",
        "INTERNAL_ERROR",
    ] {
        assert!(
            codes.iter().any(|c| c == code),
            "{code} is not in the table"
        );
    }
    assert!(!codes.iter().any(|c| c == "OK"));
}

// --------------------------------------------- 3. answers that must be right

#[test]
fn identical_calls_in_flight_beyond_the_loop_guard_wait_for_the_answer_instead_of_looping() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let backend = Backend::slow(300);
    // The default loop guard: three identical calls, then LOOP_DETECTED.
    let d = Arc::new(backend_dispatcher(&backend).max_steps(100).build().unwrap());
    let results: Vec<ToolResult> = runtime.block_on(all_at_once(16, || {
        let d = Arc::clone(&d);
        async move {
            d.execute(Call::new("transfer", TRANSFER).session("s"))
                .await
        }
    }));
    assert_eq!(backend.runs(), 1, "sixteen identical calls, one transfer");
    assert!(
        results
            .iter()
            .all(|r| r.ok && r.data["run"] == 1 && r.code == Code::Ok),
        "no call was told to use a result that did not exist yet: {results:?}"
    );
    assert_eq!(results.iter().filter(|r| !r.replayed).count(), 1);

    // Once answered, the same call again is the model repeating itself.
    let looped = runtime.block_on(d.execute(Call::new("transfer", TRANSFER).session("s")));
    assert_eq!(looped.code, Code::LoopDetected);
    assert_eq!(backend.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_twin_still_running_past_the_wait_is_call_in_progress_not_a_loop() {
    let backend = Backend::slow(400);
    let d = Arc::new(
        backend_dispatcher(&backend)
            .max_duplicate_calls(1)
            .claim_wait(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    let first = tokio::spawn({
        let d = Arc::clone(&d);
        async move {
            d.execute(Call::new("transfer", TRANSFER).session("default"))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = d
        .execute(Call::new("transfer", TRANSFER).session("default"))
        .await;
    assert_eq!(second.code, Code::CallInProgress, "{second:?}");
    let first = first.await.unwrap();
    assert!(first.ok && !first.replayed, "{first:?}");
    assert_eq!(backend.runs(), 1);
}

#[tokio::test]
async fn sequential_repeats_still_count_call_by_call() {
    let backend = Backend::slow(0);
    let d = backend_dispatcher(&backend).build().unwrap();
    let mut codes = Vec::new();
    for _ in 0..5 {
        let result = d
            .execute(Call::new("transfer", TRANSFER).session("default"))
            .await;
        codes.push((result.code.to_string(), result.replayed));
    }
    assert_eq!(
        codes,
        [
            ("OK".to_owned(), false),
            ("OK".to_owned(), true),
            ("OK".to_owned(), true),
            ("LOOP_DETECTED".to_owned(), false),
            ("LOOP_DETECTED".to_owned(), false),
        ]
    );
    assert_eq!(backend.runs(), 1);
}

#[tokio::test]
async fn an_unknown_approval_id_names_the_id_and_never_an_empty_tool() {
    let backend = Backend::slow(0);
    let d = backend_dispatcher(&backend).build().unwrap();
    let approved = d.approve(Decision::new("no-such-id", "s")).await;
    assert_eq!(approved.code, Code::ConfirmationInvalid);
    assert!(!approved.tool.is_empty(), "{approved:?}");
    assert_eq!(approved.tool, UNKNOWN_APPROVAL_TOOL);
    assert!(approved.message.contains("no-such-id"), "{approved:?}");

    let denied = d
        .deny(Decision::new("no-such-id", "s").tool("transfer"), "no")
        .await;
    assert_eq!(denied.code, Code::ConfirmationInvalid);
    assert_eq!(denied.tool, "transfer", "the decision named the tool");
    assert!(denied.message.contains("no-such-id"), "{denied:?}");

    // An id of any length is named, cut.
    let long = "7".repeat(100_000);
    let forged = d.approve(Decision::new(&long, "s")).await;
    assert_eq!(forged.code, Code::ConfirmationInvalid);
    assert!(forged.message.contains("7777"), "{}", forged.message);
    assert!(forged.message.len() < 1_000, "{}", forged.message.len());
    assert_eq!(backend.runs(), 0);
}

#[tokio::test]
async fn a_checks_transient_failure_is_retried_like_the_handler() {
    let backend = Backend::slow(0);
    backend.check_failures.store(2, Ordering::SeqCst);
    let d = backend_dispatcher(&backend).build().unwrap();
    let booked = d
        .execute(Call::new("book", r#"{"room": "R-12"}"#).session("default"))
        .await;
    assert!(booked.ok, "{booked:?}");
    assert_eq!(backend.checks(), 3, "two failures, then the check passed");
    assert_eq!(backend.runs(), 1);
}

#[tokio::test]
async fn a_check_that_stays_unreachable_is_upstream_unavailable_after_the_retries() {
    let backend = Backend::slow(0);
    backend.check_failures.store(100, Ordering::SeqCst);
    let d = backend_dispatcher(&backend).max_retries(3).build().unwrap();
    let refused = d
        .execute(Call::new("book", r#"{"room": "R-12"}"#).session("default"))
        .await;
    assert_eq!(refused.code, Code::UpstreamUnavailable);
    assert!(
        !refused.data.contains_key("in_doubt"),
        "nothing ran: not in doubt: {refused:?}"
    );
    assert_eq!(backend.checks(), 4, "one attempt and three retries");
    assert_eq!(backend.runs(), 0, "the handler never ran");
}

#[tokio::test]
async fn an_unknown_approval_is_audited_under_the_same_name() {
    let backend = Backend::slow(0);
    let audit = MemoryAudit::new();
    let d = backend_dispatcher(&backend)
        .audit(audit.clone())
        .build()
        .unwrap();
    d.approve(Decision::new("forged", "s").by("ana")).await;
    let records = audit.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].tool, UNKNOWN_APPROVAL_TOOL);
    assert_eq!(records[0].code, Code::ConfirmationInvalid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 6)]
async fn identical_questions_to_a_person_at_once_are_all_asked_as_one_after_the_other_would_be() {
    let backend = Backend::slow(50);
    let d = Arc::new(backend_dispatcher(&backend).max_steps(100).build().unwrap());
    let wire = r#"{"iban": "DE89370400440532013000"}"#;
    // One after the other, a question to a person is never counted as a loop.
    for _ in 0..5 {
        let asked = d.execute(Call::new("wire", wire).session("one")).await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
    }
    // Five at once: the same answers.
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let d = Arc::clone(&d);
            tokio::spawn(async move { d.execute(Call::new("wire", wire).session("many")).await })
        })
        .collect();
    for task in tasks {
        let asked = task.await.unwrap();
        assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    }
    assert_eq!(backend.runs(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twins_that_were_refused_make_the_late_ones_loops_only_once_refused() {
    let backend = Backend::slow(100);
    let audit = MemoryAudit::new();
    let d = Arc::new(
        backend_dispatcher(&backend)
            .audit(audit.clone())
            .build()
            .unwrap(),
    );
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let d = Arc::clone(&d);
            tokio::spawn(async move {
                d.execute(Call::new("reserve", r#"{"people": 4}"#).session("default"))
                    .await
            })
        })
        .collect();
    let mut codes = Vec::new();
    for task in tasks {
        codes.push(task.await.unwrap().code.to_string());
    }
    codes.sort();
    assert_eq!(
        codes,
        [
            "FULLY_BOOKED",
            "FULLY_BOOKED",
            "FULLY_BOOKED",
            "LOOP_DETECTED",
            "LOOP_DETECTED"
        ],
        "as one after the other"
    );
    assert_eq!(backend.runs(), 3, "three attempts, as one after the other");
    let answered: Vec<String> = audit.records().iter().map(|r| r.code.to_string()).collect();
    assert_eq!(
        answered[0], "FULLY_BOOKED",
        "no loop was reported before an answer existed: {answered:?}"
    );
}
