//! A small bank written from the guide: what a newcomer meets when the
//! build goes wrong (the error's sentence and its fix, printed by `?` in
//! `main`), a status polled more often than the loop guard's default, a
//! dry run of a transfer that needs a person, and the audit read back.

use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};
use toolcall::store::now_ms;
use toolcall::store::prelude::*;
use toolcall::{
    Approvals, BuildError, Call, Code, Ctx, Dispatcher, MemoryAudit, Policy, Rejection, ToolResult,
    tool, tools,
};
use toolcall_testkit::answer::assert_would_ask_a_person;
use toolcall_testkit::bank::Bank;

const MISBUILT: &str = env!("CARGO_BIN_EXE_misbuilt");

/// Runs `misbuilt CASE`; its exit success and its standard error.
fn misbuilt(case: &str) -> (bool, String) {
    let output = Command::new(MISBUILT)
        .arg(case)
        .output()
        .expect("misbuilt runs");
    (
        output.status.success(),
        String::from_utf8(output.stderr).expect("standard error is UTF-8"),
    )
}

/// Runs `misbuilt CASE`, whose build must fail: what it printed.
fn refused(case: &str) -> String {
    let (ok, stderr) = misbuilt(case);
    assert!(!ok, "{case}: {stderr}");
    stderr
}

/// Runs `misbuilt CASE`, whose build succeeds only if `built`: what it
/// prints starts with `sentence`, tells `fix`, and shows the sentence, not
/// the fields of `variant` as `{:?}` would.
fn assert_printed(case: &str, built: bool, sentence: &str, fix: &str, variant: &str) {
    let (ok, stderr) = misbuilt(case);
    assert_eq!(ok, built, "{case}: {stderr}");
    assert!(stderr.starts_with(sentence), "{case}: {stderr}");
    assert!(stderr.contains(fix), "{case}: {stderr}");
    assert!(!stderr.contains(variant), "{case}: {stderr}");
}

#[test]
fn main_with_question_mark_prints_an_unknown_tool_with_the_name_meant() {
    let stderr = refused("unknown-tool");
    assert_eq!(
        stderr.trim_end(),
        "Error: caller `default` is allowed `transfer_mony`, but no tool has that name; \
         did you mean `transfer_money`?"
    );
    assert!(!stderr.contains("UnknownTool {"), "{stderr}");
}

#[test]
fn main_with_question_mark_prints_an_unknown_limit_with_the_name_meant() {
    assert_printed(
        "unknown-limit",
        false,
        "Error: caller `default` sets the limit `max_transfer_cent`",
        "did you mean `max_transfer_cents`?",
        "UnknownLimit {",
    );
}

#[test]
fn main_with_question_mark_prints_an_open_schema_with_its_fix() {
    assert_printed(
        "open-schema",
        false,
        "Error: tool `transfer_for`: the object at `/properties/requester` of its parameters schema accepts unknown members",
        "add #[serde(deny_unknown_fields)] to that type",
        "OpenSchema {",
    );
}

#[test]
fn main_with_question_mark_prints_a_duplicate_name_with_its_fix() {
    assert_eq!(
        refused("duplicate-name").trim_end(),
        "Error: two tools are named `transfer_money`; rename one with #[tool(name = \"...\")]"
    );
}

#[test]
fn a_warning_printed_with_debug_is_its_sentence() {
    assert_printed(
        "warning",
        true,
        "Warning: caller `default` may call `transfer_money`, whose argument `cents` is bounded by the limit `max_transfer_cents`",
        "Policy::limit(\"max_transfer_cents\", ...)",
        "LimitNotSet {",
    );
}

#[test]
fn the_fields_are_still_there_with_the_alternate_form() {
    let error = toolcall::BuildError::UnknownTool {
        caller: "default".into(),
        tool: "transfer_mony".into(),
        closest: Some("transfer_money"),
    };
    let fields = format!("{error:#?}");
    assert!(fields.starts_with("UnknownTool {"), "{fields}");
    assert!(
        fields.contains("closest: Some(\n        \"transfer_money\",\n    ),"),
        "{fields}"
    );
    assert_eq!(format!("{error:?}"), error.to_string());
    let error = toolcall::RegistryError::OpenSchema {
        tool: "transfer_for",
        path: "/properties/requester".into(),
    };
    assert!(format!("{error:#?}").starts_with("OpenSchema {"));
    assert_eq!(format!("{error:?}"), error.to_string());
}

// ------------------------------------------------------------ the bank

/// Where a transfer is: `pending` until the bank settles it.
#[tool(max_repeats = 20)]
fn transfer_status(
    ctx: &Ctx<Bank>,
    /// The transfer's id, for example TR-1.
    transfer_id: String,
) -> Result<Value, Rejection> {
    let reads = ctx.state.saw("status read");
    Ok(json!({"transfer_id": transfer_id, "status": "pending", "read": reads}))
}

/// An account's balance, in cents.
#[tool]
fn get_balance(
    ctx: &Ctx<Bank>,
    /// The account, for example ACC-1.
    account: String,
) -> Result<Value, Rejection> {
    ctx.state.saw("balance read");
    Ok(json!({"account": account, "cents": 120_000}))
}

/// Moves money between two accounts.
#[tool(side_effect)]
fn transfer_money(
    ctx: &Ctx<Bank>,
    /// The account the money leaves.
    from: String,
    /// The account it goes to.
    to: String,
    /// Amount in cents.
    cents: i64,
) -> Result<Value, Rejection> {
    let n = ctx.state.saw("transfer");
    Ok(json!({"transfer_id": format!("TR-{n}"), "from": from, "to": to, "cents": cents}))
}

const STATUS: &str = r#"{"transfer_id": "TR-1"}"#;
const BALANCE: &str = r#"{"account": "ACC-1"}"#;
const TRANSFER: &str = r#"{"from": "ACC-1", "to": "ACC-2", "cents": 2590}"#;

fn bank_with(policy: Policy) -> (Arc<Bank>, Dispatcher<Bank>) {
    let bank = Bank::new();
    let dispatcher = Dispatcher::builder(
        tools![transfer_status, get_balance, transfer_money].unwrap(),
        Arc::clone(&bank),
    )
    .policy(policy)
    .build()
    .unwrap();
    (bank, dispatcher)
}

/// Makes the identical call `answered` times in one session, each answered
/// as asked, then once more: that last answer is returned.
async fn call_past(d: &Dispatcher<Bank>, tool: &str, args: &str, answered: usize) -> ToolResult {
    for n in 1..=answered {
        let r = d.execute(Call::new(tool, args).session("s")).await;
        assert_eq!(r.code, Code::Ok, "{tool}, call {n}: {}", r.message);
    }
    d.execute(Call::new(tool, args).session("s")).await
}

fn teller() -> Policy {
    Policy::new().allow(["transfer_status", "get_balance", "transfer_money"])
}

// ------------------------------------------------- polling a status

#[tokio::test]
async fn a_status_with_max_repeats_is_answered_every_time_it_is_polled() {
    let (bank, d) = bank_with(teller());
    assert_eq!(d.settings().max_duplicate_calls, 3);
    for poll in 1..=10 {
        let r = d
            .execute(Call::new("transfer_status", STATUS).session("s"))
            .await;
        assert_eq!(r.code, Code::Ok, "poll {poll}: {}", r.message);
        assert_eq!(r.data["read"], poll, "poll {poll} reached the bank");
    }
    assert_eq!(bank.seen("status read"), 10);
}

#[tokio::test]
async fn a_status_is_a_loop_past_its_max_repeats() {
    // Past the default step budget (10 calls a session) too.
    let bank = Bank::new();
    let d = Dispatcher::builder(tools![transfer_status].unwrap(), Arc::clone(&bank))
        .policy(Policy::new().allow(["transfer_status"]))
        .max_steps(30)
        .build()
        .unwrap();
    let r = call_past(&d, "transfer_status", STATUS, 20).await;
    assert_eq!(r.code, Code::LoopDetected, "{}", r.message);
    assert_eq!(bank.seen("status read"), 20);
}

#[tokio::test]
async fn a_read_without_max_repeats_is_a_loop_at_its_fourth_identical_call() {
    let (bank, d) = bank_with(teller());
    let r = call_past(&d, "get_balance", BALANCE, 3).await;
    assert_eq!(r.code, Code::LoopDetected, "{}", r.message);
    assert_eq!(bank.seen("balance read"), 3);
}

#[tokio::test]
async fn a_side_effect_keeps_its_guard_whatever_the_reads_allow() {
    let (bank, d) = bank_with(teller().max_repeats("get_balance", 50));
    let mut codes = Vec::new();
    for _ in 0..4 {
        let r = d
            .execute(Call::new("transfer_money", TRANSFER).session("s"))
            .await;
        codes.push(r.code);
    }
    assert_eq!(
        codes,
        [Code::Ok, Code::Ok, Code::Ok, Code::LoopDetected],
        "replayed three times, then a loop"
    );
    assert_eq!(bank.seen("transfer"), 1, "ran once");
}

#[tokio::test]
async fn a_callers_max_repeats_replaces_the_tools_and_the_default() {
    let (bank, d) = bank_with(
        teller()
            .max_repeats("get_balance", 6)
            .max_repeats("transfer_status", 2),
    );
    let r = call_past(&d, "get_balance", BALANCE, 6).await;
    assert_eq!(r.code, Code::LoopDetected);
    assert_eq!(bank.seen("balance read"), 6);
    let r = call_past(&d, "transfer_status", STATUS, 2).await;
    assert_eq!(
        r.code,
        Code::LoopDetected,
        "the caller lowered the tool's 20"
    );
    assert_eq!(bank.seen("status read"), 2);
}

#[test]
fn max_repeats_of_an_unknown_tool_is_a_build_error_naming_the_tool_meant() {
    let error = Dispatcher::builder(tools![transfer_status, get_balance].unwrap(), Bank::new())
        .policy(teller_reads().max_repeats("transfer_statu", 30))
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        BuildError::UnknownRepeatedTool {
            caller: "default".into(),
            tool: "transfer_statu".into(),
            closest: Some("transfer_status"),
        }
    );
    assert_eq!(
        format!("{error:?}"),
        "caller `default` sets max_repeats of `transfer_statu`, but no tool has that name; \
         did you mean `transfer_status`?"
    );
}

#[test]
fn max_repeats_of_a_side_effect_is_a_build_error() {
    let error = Dispatcher::builder(tools![transfer_money].unwrap(), Bank::new())
        .policy(
            Policy::new()
                .allow(["transfer_money"])
                .max_repeats("transfer_money", 30),
        )
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        BuildError::RepeatsOfSideEffect {
            caller: "default".into(),
            tool: "transfer_money",
        }
    );
    assert!(
        error
            .to_string()
            .contains("remove Policy::max_repeats(\"transfer_money\", ...)")
    );
}

fn teller_reads() -> Policy {
    Policy::new().allow(["transfer_status", "get_balance"])
}

#[test]
fn the_spec_says_its_max_repeats() {
    let registry = tools![transfer_status, get_balance, transfer_money].unwrap();
    let repeats: Vec<_> = registry.iter().map(|spec| spec.max_repeats()).collect();
    assert_eq!(repeats, [Some(20), None, None]);
}

// ------------------------------------------------------------ dry runs

/// Wires money abroad: a person approves each wire.
#[tool(side_effect, high_risk, preview = preview_wire)]
fn wire_abroad(
    ctx: &Ctx<Bank>,
    /// The receiving account's IBAN.
    iban: String,
    /// Amount in cents, bounded by the caller's limit.
    #[arg(limit = "max_wire_cents")]
    cents: i64,
) -> Result<Value, Rejection> {
    ctx.state.saw("wire");
    Ok(json!({"wired": cents, "to": iban}))
}

fn preview_wire(args: &WireAbroadArgs, _: &Ctx<Bank>) -> String {
    format!("would wire {} cents to {}", args.cents, args.iban)
}

const WIRE: &str = r#"{"iban": "DE89370400440532013000", "cents": 50000}"#;

fn wiring(approvals: Approvals) -> (Arc<Bank>, Dispatcher<Bank>, MemoryAudit) {
    let bank = Bank::new();
    let audit = MemoryAudit::new();
    let d = Dispatcher::builder(tools![wire_abroad].unwrap(), Arc::clone(&bank))
        .policy(
            Policy::new()
                .allow(["wire_abroad"])
                .limit("max_wire_cents", 100_000),
        )
        .approvals(approvals)
        .audit(audit.clone())
        .build()
        .unwrap();
    (bank, d, audit)
}

/// The model's wire of [`WIRE`] in the session `s`, with what `how` adds.
async fn wire<'a>(d: &Dispatcher<Bank>, how: impl FnOnce(Call<'a>) -> Call<'a>) -> ToolResult {
    d.execute(how(Call::new("wire_abroad", WIRE).session("s")))
        .await
}

async fn pending(d: &Dispatcher<Bank>) -> usize {
    d.store()
        .pending_approvals(now_ms(), 100)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_dry_run_of_a_high_risk_call_says_it_would_ask_a_person_and_asks_no_one() {
    let (bank, d, audit) = wiring(Approvals::Host);
    for _ in 0..5 {
        let dry = wire(&d, |c| c.dry_run(true)).await;
        assert_would_ask_a_person(&dry, "would wire 50000 cents to DE89370400440532013000");
        assert_eq!(dry.data["arguments"]["cents"], 50000);
        assert!(
            dry.message.contains("would wait for a person"),
            "{}",
            dry.message
        );
    }
    assert_eq!(pending(&d).await, 0, "no approval created");
    assert_eq!(bank.seen("wire"), 0, "nothing ran");
    assert_eq!(d.store().peek_step("s").await.unwrap(), 0, "no step used");
    assert!(
        audit
            .records()
            .iter()
            .all(|r| r.dry_run && r.step.is_none())
    );

    // The real call, after five dry runs, is asked about, not a loop.
    let real = wire(&d, |c| c).await;
    assert_eq!(real.code, Code::ConfirmationRequired, "{real:?}");
    assert!(real.question_id.is_some());
    assert_eq!(pending(&d).await, 1);
}

#[tokio::test]
async fn a_confirmed_dry_run_says_it_would_run_and_runs_nothing() {
    let (bank, d, _) = wiring(Approvals::Host);
    let dry = wire(&d, |c| c.confirmed(true).dry_run(true)).await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "run");
    assert!(dry.data.get("reason").is_none(), "{:?}", dry.data);
    assert_eq!(bank.seen("wire"), 0);
    let real = wire(&d, |c| c.confirmed(true)).await;
    assert_eq!(real.code, Code::Ok, "{real:?}");
    assert_eq!(bank.seen("wire"), 1);
}

#[tokio::test]
async fn a_dry_run_over_a_limit_says_it_would_be_refused_and_why() {
    let (bank, d, _) = wiring(Approvals::Host);
    let over = r#"{"iban": "DE89370400440532013000", "cents": 150000}"#;
    let dry = d
        .execute(Call::new("wire_abroad", over).session("s").dry_run(true))
        .await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "be_refused");
    assert_eq!(dry.data["refusal"]["code"], "POLICY_LIMIT");
    assert!(dry.message.contains("would be refused"), "{}", dry.message);
    let real = d.execute(Call::new("wire_abroad", over).session("s")).await;
    assert_eq!(
        real.code,
        Code::PolicyLimit,
        "the real call meets what the dry run said"
    );
    assert_eq!(pending(&d).await, 0);
    assert_eq!(bank.seen("wire"), 0);
}

#[tokio::test]
async fn a_dry_run_bringing_an_undecided_inbox_approval_would_wait_and_leaves_it_unused() {
    let (bank, d, _) = wiring(Approvals::Inbox);
    let asked = wire(&d, |c| c).await;
    assert_eq!(asked.code, Code::ConfirmationRequired, "{asked:?}");
    let id = asked.question_id.clone().unwrap();
    let dry = wire(&d, |c| c.approval(&id).dry_run(true)).await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "ask_a_person");
    assert_eq!(dry.data["reason"], "high_risk");
    let entry = d.store().approval(&id).await.unwrap().unwrap();
    assert_eq!(entry.used_ms, None, "looked at, not taken up");
    assert_eq!(pending(&d).await, 1, "the one question, no other");
    assert_eq!(bank.seen("wire"), 0);
}
