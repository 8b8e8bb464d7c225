//! Every stage and every code of the pipeline, beyond the reference's suite.
//! The assertion that matters is what the backend saw: how many side
//! effects, how many attempts, under which keys.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orders::{Shop, get_order, refund_order};
use serde_json::{Value, json};
use toolcall::store::prelude::*;
use toolcall::{
    Call, Caller, Code, Ctx, Dispatcher, DispatcherBuilder, JsonLinesAudit, MemoryAudit, Policy,
    Rejection, ToolError, ToolResult, tool, tools,
};

// ---------------------------------------------------------------- orders

fn shop_dispatcher(shop: &Arc<Shop>) -> DispatcherBuilder<Shop> {
    let policy = Policy::new()
        .allow(["get_order", "refund_order"])
        .limit("max_refund_cents", 50_000);
    Dispatcher::builder(tools![get_order, refund_order].unwrap(), Arc::clone(shop))
        .part(Shop::reader)
        .policy(policy)
        .retry_backoff(Duration::ZERO)
}

const REFUND: &str =
    r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#;

async fn confirmed(d: &Dispatcher<Shop>, tool: &str, args: &str) -> ToolResult {
    d.execute(Call::new(tool, args).session("default").confirmed(true))
        .await
}

#[tokio::test]
async fn unknown_tool_lists_the_callers_allowed_tools_sorted() {
    let shop = Arc::new(Shop::new());
    let policy = Policy::new().allow(["refund_order", "get_order"]);
    let d = shop_dispatcher(&shop).policy(policy).build().unwrap();
    let result = d
        .execute(Call::new("delete_order", "{}").session("default"))
        .await;
    assert_eq!(result.code, Code::UnknownTool);
    assert_eq!(
        result.data["available"],
        json!(["get_order", "refund_order"]),
        "sorted, whatever the allowlist's order"
    );
}

#[tokio::test]
async fn allowlists_are_per_caller() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let reader = Caller::new("read-only-bot", Policy::new().allow(["get_order"]));
    let refused = d
        .execute(
            Call::new("refund_order", REFUND)
                .session("default")
                .caller(&reader)
                .confirmed(true),
        )
        .await;
    assert_eq!(refused.code, Code::ToolNotAllowed);
    let read = d
        .execute(
            Call::new("get_order", r#"{"order_id": "ORD-1001"}"#)
                .session("default")
                .caller(&reader),
        )
        .await;
    assert!(read.ok);
    assert_eq!(shop.applied_refunds(), 0);
    assert!(
        confirmed(&d, "refund_order", REFUND).await.ok,
        "the default caller may refund"
    );
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn malformed_arguments_are_invalid_json_and_do_nothing() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).max_steps(100).build().unwrap();
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let huge = format!(r#"{{"order_id": "{}"}}"#, "9".repeat(70 * 1024));
    let cases = [
        r#"{"order_id": "ORD-1001""#.to_owned(),
        "[]".to_owned(),
        "2590".to_owned(),
        "null".to_owned(),
        "\"ORD-1001\"".to_owned(),
        " ".to_owned(),
        "{'order_id': 'ORD-1001'}".to_owned(),
        r#"{"order_id": "ORD-1001", "amount_cents": 1, "amount_cents": 2590, "currency": "BRL", "reason": "damaged"}"#
            .to_owned(),
        format!(r#"{{"order_id": "ORD-1001", "x": {deep}}}"#),
        huge,
        r#"{"order_id": "ORD-1001"} trailing"#.to_owned(),
    ];
    for raw in &cases {
        let result = confirmed(&d, "refund_order", raw).await;
        assert_eq!(result.code, Code::InvalidJson, "{raw:.80}: {result:?}");
        assert!(
            result.message.starts_with("Arguments"),
            "{}",
            result.message
        );
    }
    let array = json!([1, 2]);
    assert_eq!(
        d.execute(Call::new("get_order", &array).session("default"))
            .await
            .code,
        Code::InvalidJson
    );
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn empty_text_means_no_arguments() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let result = d
        .execute(Call::new("get_order", "").session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidArguments);
    assert_eq!(
        result.message,
        "order_id: field required (Order id, for example ORD-1001.)"
    );
}

#[tokio::test]
async fn invalid_arguments_list_every_problem_at_once_with_the_hint() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let raw = r#"{"order_id": "1001", "amount_cents": 25.9, "currency": "EUR", "force": true}"#;
    let result = confirmed(&d, "refund_order", raw).await;
    assert_eq!(result.code, Code::InvalidArguments);
    let problems: Vec<&str> = result.message.split("; ").collect();
    assert_eq!(problems.len(), 5, "{}", result.message);
    assert!(
        problems[0].starts_with(r#"order_id: "1001" does not match the pattern ^ORD-[0-9]{4}$"#)
    );
    assert!(
        problems[1]
            .starts_with("amount_cents: invalid type: floating point `25.9`, expected an integer")
    );
    assert!(problems[1].ends_with("(Refund amount in minor units (cents). 25.90 is 2590.)"));
    assert!(problems[2].starts_with("currency: unknown variant `EUR`, expected `BRL` or `USD`"));
    assert_eq!(
        problems[3],
        "reason: field required (Why a refund is made.)"
    );
    assert!(problems[4].starts_with("force: unknown field"));
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn invalid_arguments_read_whole_as_the_model_gets_them() {
    // The whole text, not its beginning: how each problem is written (a
    // suggestion, the list of fields, serde's words made plain) is what
    // the model reads, and stays the same however it is produced.
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let cases = [
        (
            "refund_order",
            r#"{"orderId": "ORD-1001", "amount_cents": "2590", "currency": "usd", "reason": "damaged"}"#,
            "order_id: field required (Order id, for example ORD-1001.); \
             amount_cents: invalid type: string \"2590\", expected an integer that fits in i64 \
             (Refund amount in minor units (cents). 25.90 is 2590.); \
             currency: unknown variant `usd`, expected `BRL` or `USD` (Must match the order currency.); \
             orderId: unknown field, did you mean `order_id`?",
        ),
        (
            "refund_order",
            r#"{"order_id": "ORD-1001", "amount_cents": 1e300, "currency": "BRL", "reason": "damaged", "zzz": 1}"#,
            "amount_cents: invalid type: floating point `1e+300`, expected an integer that fits in i64 \
             (Refund amount in minor units (cents). 25.90 is 2590.); \
             zzz: unknown field, expected one of `order_id`, `amount_cents`, `currency`, `reason`",
        ),
        (
            "get_order",
            r#"{"order_id": -1}"#,
            "order_id: invalid type: integer `-1`, expected a string (Order id, for example ORD-1001.)",
        ),
    ];
    for (tool, raw, problems) in cases {
        let result = confirmed(&d, tool, raw).await;
        assert_eq!(result.code, Code::InvalidArguments);
        assert!(
            result.message.starts_with(problems),
            "expected the problems\n{problems}\nin\n{}",
            result.message
        );
        let rest = &result.message[problems.len()..];
        assert!(!rest.contains("; "), "no other problem follows: {rest:?}");
    }
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn the_audit_keeps_the_problems_the_model_was_told_and_only_those() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let d = shop_dispatcher(&shop).audit(audit.clone()).build().unwrap();
    let raw = r#"{"order_id": "1001", "amount_cents": 25.9, "currency": "EUR", "force": true}"#;
    let result = confirmed(&d, "refund_order", raw).await;
    assert_eq!(result.code, Code::InvalidArguments);
    let record = audit.records().pop().unwrap();
    let told: Vec<String> = record.problems.iter().map(ToString::to_string).collect();
    assert_eq!(told.len(), 5, "{told:?}");
    assert!(
        result.message.starts_with(&told.join("; ")),
        "the record shows what the model read:\n{}\n{}",
        told.join("; "),
        result.message
    );
    let paths: Vec<&str> = record.problems.iter().map(|p| p.path.as_ref()).collect();
    assert_eq!(
        paths,
        ["order_id", "amount_cents", "currency", "reason", "force"]
    );

    // A JSON line keeps them.
    let line = serde_json::to_string(&record).unwrap();
    let read: toolcall::AuditRecord = serde_json::from_str(&line).unwrap();
    assert_eq!(read.problems, record.problems);

    // As many as the model was shown: the first 20.
    let many: String = (0..30).map(|i| format!(r#", "extra{i}": 1"#)).collect();
    let raw = format!(r#"{{"order_id": "ORD-1001"{many}}}"#);
    let result = d
        .execute(Call::new("get_order", raw.as_str()).session("default"))
        .await;
    assert!(
        result.message.contains("and 10 more problems"),
        "{}",
        result.message
    );
    let record = audit.records().pop().unwrap();
    assert_eq!(record.problems.len(), 20);
    assert_eq!(record.problems[19].path, "extra19");

    // Any other answer keeps none: valid, not JSON, replayed, refused later.
    for (tool, args) in [
        ("get_order", r#"{"order_id": "ORD-1001"}"#),
        ("get_order", "{"),
        ("refund_order", REFUND),
        ("refund_order", REFUND),
        ("refund_order", &REFUND.replace("BRL", "USD")),
    ] {
        let result = confirmed(&d, tool, args).await;
        let record = audit.records().pop().unwrap();
        assert_eq!(record.code, result.code);
        assert!(record.problems.is_empty(), "{record:?}");
    }
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn an_unknown_field_names_the_closest_real_one() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let result = d
        .execute(Call::new("get_order", r#"{"orderId": "ORD-1001"}"#).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidArguments);
    assert!(
        result
            .message
            .contains("orderId: unknown field, did you mean `order_id`?"),
        "{}",
        result.message
    );
    let result = d
        .execute(
            Call::new("get_order", r#"{"order_id": "ORD-1001", "verbose": true}"#)
                .session("default"),
        )
        .await;
    assert!(
        result
            .message
            .contains("verbose: unknown field, expected one of `order_id`"),
        "{}",
        result.message
    );
}

#[tokio::test]
async fn integers_never_come_from_floats_strings_booleans_or_overflow() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    for amount in [
        "2590.0",
        "\"2590\"",
        "true",
        "9223372036854775808",
        "-9223372036854775809",
        "1e3",
        "null",
    ] {
        let raw = REFUND.replace("2590", amount);
        let result = confirmed(&d, "refund_order", &raw).await;
        assert_eq!(result.code, Code::InvalidArguments, "{amount}: {result:?}");
        assert!(
            result.message.starts_with("amount_cents: "),
            "{amount}: {}",
            result.message
        );
    }
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn the_model_cannot_confirm_its_own_call() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let raw = r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "damaged", "confirmed": true}"#;
    let result = d
        .execute(Call::new("refund_order", raw).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidArguments);
    let result = d
        .execute(Call::new("refund_order", REFUND).session("default"))
        .await;
    assert_eq!(result.code, Code::ConfirmationRequired);
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn confirmation_carries_the_validated_arguments() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let raw =
        r#"{ "reason":"damaged","currency" : "BRL", "amount_cents":2590,"order_id":"ORD-1001" }"#;
    let result = d
        .execute(Call::new("refund_order", raw).session("default"))
        .await;
    assert_eq!(result.code, Code::ConfirmationRequired);
    assert_eq!(
        result.message,
        "refund_order needs user approval before it runs."
    );
    let pending = serde_json::to_string(&result.data["pending"]).unwrap();
    assert_eq!(
        pending,
        r#"{"order_id":"ORD-1001","amount_cents":2590,"currency":"BRL","reason":"damaged"}"#
    );
    assert_eq!(shop.applied_refunds(), 0);
}

fn refund_of(cents: i64) -> String {
    format!(
        r#"{{"order_id": "ORD-1001", "amount_cents": {cents}, "currency": "BRL", "reason": "damaged"}}"#
    )
}

#[tokio::test]
async fn an_identical_high_risk_call_asked_again_is_the_same_question() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let first = d
        .execute(Call::new("refund_order", REFUND).session("default"))
        .await;
    assert_eq!(first.code, Code::ConfirmationRequired);
    let id = first.question_id.clone().expect("an id to approve");
    // A client that cannot bring the id back asks again, and again; the
    // spacing and the order of the members make no other call.
    let respaced =
        r#"{ "reason":"damaged","currency" : "BRL", "amount_cents":2590,"order_id":"ORD-1001" }"#;
    for args in [REFUND, REFUND, respaced, REFUND, REFUND, respaced] {
        let again = d
            .execute(Call::new("refund_order", args).session("default"))
            .await;
        assert_eq!(again.code, Code::ConfirmationRequired);
        assert_eq!(again.question_id.as_deref(), Some(id.as_str()));
        assert_eq!(again.data, first.data, "the same answer as the first time");
        assert_eq!(again.message, first.message);
    }
    let pending = d
        .store()
        .pending_approvals(toolcall::store::now_ms(), 100)
        .await
        .unwrap();
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, [id.as_str()], "one question in the store");
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn a_conversation_at_its_bound_of_questions_is_refused_and_another_is_still_asked() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop)
        .max_pending_approvals(3)
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for cents in 1..=3 {
        let asked = d
            .execute(Call::new("refund_order", refund_of(cents).as_str()).session("looping"))
            .await;
        assert_eq!(asked.code, Code::ConfirmationRequired);
        ids.push(asked.question_id.expect("an id"));
    }
    let refused = d
        .execute(Call::new("refund_order", refund_of(4).as_str()).session("looping"))
        .await;
    assert_eq!(refused.code, Code::PendingLimit, "{refused:?}");
    assert!(!refused.ok);
    assert_eq!(refused.question_id, None);
    assert!(refused.message.contains("3 call(s)"), "{}", refused.message);
    // A call already asked is still the same question.
    let again = d
        .execute(Call::new("refund_order", refund_of(2).as_str()).session("looping"))
        .await;
    assert_eq!(again.code, Code::ConfirmationRequired);
    assert_eq!(again.question_id.as_ref(), Some(&ids[1]));
    // Another conversation is still asked.
    let other = d
        .execute(Call::new("refund_order", refund_of(4).as_str()).session("calm"))
        .await;
    assert_eq!(other.code, Code::ConfirmationRequired);
    let other_id = other.question_id.expect("an id");
    let now = toolcall::store::now_ms();
    let mut stored: Vec<String> = d
        .store()
        .pending_approvals(now, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    stored.sort();
    let mut want = ids.clone();
    want.push(other_id);
    want.sort();
    assert_eq!(stored, want, "nothing stored for the refused call");
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn spacing_member_order_and_parsed_objects_are_one_call() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop)
        .max_duplicate_calls(10)
        .build()
        .unwrap();
    let first = confirmed(&d, "refund_order", REFUND).await;
    assert!(first.ok && !first.replayed);
    let respaced =
        r#"{"reason":"damaged","currency":"BRL","amount_cents":2590,"order_id":"ORD-1001"}"#;
    assert!(confirmed(&d, "refund_order", respaced).await.replayed);
    let parsed: Value = serde_json::from_str(REFUND).unwrap();
    let replay = d
        .execute(
            Call::new("refund_order", &parsed)
                .session("default")
                .confirmed(true),
        )
        .await;
    assert!(replay.replayed);
    assert_eq!(replay.data, first.data);
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn a_repeated_side_effect_hits_the_loop_guard_after_its_replays() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let results = [
        confirmed(&d, "refund_order", REFUND).await,
        confirmed(&d, "refund_order", REFUND).await,
        confirmed(&d, "refund_order", REFUND).await,
        confirmed(&d, "refund_order", REFUND).await,
    ];
    let outcome: Vec<(bool, &str, bool)> = results
        .iter()
        .map(|r| (r.ok, r.code.as_str(), r.replayed))
        .collect();
    assert_eq!(
        outcome,
        [
            (true, "OK", false),
            (true, "OK", true),
            (true, "OK", true),
            (false, "LOOP_DETECTED", false)
        ]
    );
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn the_business_check_runs_before_the_policy() {
    let shop = Arc::new(Shop::new());
    let policy = Policy::new()
        .allow(["refund_order"])
        .limit("max_refund_cents", 1_000);
    let d = shop_dispatcher(&shop).policy(policy).build().unwrap();
    let over_refundable = REFUND.replace("2590", "99999");
    assert_eq!(
        confirmed(&d, "refund_order", &over_refundable).await.code,
        "AMOUNT_EXCEEDS_REFUNDABLE"
    );
    let over_limit = confirmed(&d, "refund_order", REFUND).await;
    assert_eq!(over_limit.code, Code::PolicyLimit);
    assert!(
        over_limit
            .message
            .contains("limit of 1000 (max_refund_cents)"),
        "{}",
        over_limit.message
    );
    let under = REFUND.replace("2590", "1000");
    assert!(confirmed(&d, "refund_order", &under).await.ok);
    assert_eq!(shop.applied_refunds(), 1);
}

#[tokio::test]
async fn a_limit_the_policy_does_not_set_fails_closed() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop)
        .policy(Policy::new().allow(["refund_order"]))
        .build()
        .unwrap();
    let result = confirmed(&d, "refund_order", REFUND).await;
    assert_eq!(result.code, Code::PolicyLimit);
    assert!(
        result.message.contains("not set for this caller"),
        "{}",
        result.message
    );
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn exhausted_retries_leave_the_outcome_to_the_backends_key() {
    let shop = Arc::new(Shop::new());
    shop.lose_next_responses(1);
    let d = shop_dispatcher(&shop).max_retries(0).build().unwrap();
    let lost = confirmed(&d, "refund_order", REFUND).await;
    assert_eq!(lost.code, Code::UpstreamUnavailable);
    assert_eq!(
        shop.applied_refunds(),
        1,
        "the backend committed before the answer was lost"
    );
    // Not a completed call, so not replayed: it runs again, under the same
    // key, and the backend recognises it.
    let again = confirmed(&d, "refund_order", REFUND).await;
    assert!(again.ok && !again.replayed, "{again:?}");
    assert_eq!(again.data["remaining_refundable_cents"], 12_000 - 2590);
    assert_eq!(shop.applied_refunds(), 1);
    assert_eq!(shop.order("ORD-1001").unwrap().refunded_cents, 2590);
}

#[tokio::test]
async fn sessions_have_their_own_budget_and_keys() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).max_steps(1).build().unwrap();
    let a = d
        .execute(
            Call::new("refund_order", REFUND)
                .session("a")
                .confirmed(true),
        )
        .await;
    let b = d
        .execute(
            Call::new("refund_order", REFUND)
                .session("b")
                .confirmed(true),
        )
        .await;
    assert!(a.ok && b.ok && !b.replayed);
    assert_eq!(
        shop.applied_refunds(),
        2,
        "two conversations asked for two refunds"
    );
    let a_again = d
        .execute(Call::new("get_order", r#"{"order_id": "ORD-1001"}"#).session("a"))
        .await;
    assert_eq!(a_again.code, Code::StepLimit);
}

#[tokio::test]
async fn every_call_leaves_exactly_one_audit_record() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let dir = std::env::temp_dir().join(format!("toolcall-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("audit.jsonl");
    let _ = std::fs::remove_file(&path);
    let memory = shop_dispatcher(&shop)
        .audit(audit.clone())
        .max_steps(9)
        .build()
        .unwrap();
    let file = shop_dispatcher(&shop)
        .audit(JsonLinesAudit::open(&path).unwrap())
        .build()
        .unwrap();
    let calls: [(&str, &str, bool); 10] = [
        ("get_order", r#"{"order_id": "ORD-1001"}"#, false),
        ("nope", "{}", false),
        ("get_order", "{", false),
        ("get_order", r#"{"order_id": 1}"#, false),
        ("refund_order", REFUND, false),
        ("refund_order", REFUND, true),
        ("refund_order", REFUND, true),
        ("get_order", r#"{"order_id": "ORD-9999"}"#, false),
        ("refund_order", &REFUND.replace("BRL", "USD"), true),
        ("get_order", r#"{"order_id": "ORD-1001"}"#, false),
    ];
    for d in [&memory, &file] {
        for (tool, args, confirmed) in calls {
            d.execute(
                Call::new(tool, args)
                    .session("default")
                    .confirmed(confirmed)
                    .call_id("call-1"),
            )
            .await;
        }
    }
    let records = audit.records();
    let codes: Vec<String> = records.iter().map(|r| r.code.to_string()).collect();
    assert_eq!(
        codes,
        [
            "OK",
            "UNKNOWN_TOOL",
            "INVALID_JSON",
            "INVALID_ARGUMENTS",
            "CONFIRMATION_REQUIRED",
            "OK",
            "OK",
            "ORDER_NOT_FOUND",
            "CURRENCY_MISMATCH",
            "STEP_LIMIT"
        ]
    );
    let steps: Vec<u64> = records.iter().map(|r| r.step.unwrap()).collect();
    assert_eq!(steps, (1..=10).collect::<Vec<u64>>());
    assert!(records[6].replayed);
    assert!(records[5].confirmed);
    assert_eq!(records[2].arguments, "{");
    assert_eq!(records[0].call_id.as_deref(), Some("call-1"));
    assert_eq!(records[0].session_id, "default");
    assert_eq!(records[0].caller, "default");
    let lines: Vec<toolcall::AuditRecord> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 10);
    assert_eq!(
        lines.iter().map(|r| r.code.to_string()).collect::<Vec<_>>()[..9],
        codes[..9]
    );
    assert_eq!(
        shop.applied_refunds(),
        1,
        "the second dispatcher's key matched the backend's record"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn model_text_leaves_default_fields_out() {
    let shop = Arc::new(Shop::new());
    let d = shop_dispatcher(&shop).build().unwrap();
    let read = d
        .execute(Call::new("get_order", r#"{"order_id": "ORD-1002"}"#).session("default"))
        .await;
    assert_eq!(
        read.to_model_text(),
        r#"{"ok":true,"tool":"get_order","data":{"order_id":"ORD-1002","total_cents":4500,"refunded_cents":0,"currency":"USD"}}"#
    );
    let unknown = d.execute(Call::new("x", "").session("default")).await;
    assert_eq!(
        unknown.to_model_text(),
        r#"{"ok":false,"tool":"x","code":"UNKNOWN_TOOL","message":"No tool named 'x'.","data":{"available":["get_order","refund_order"]}}"#
    );
    let back: ToolResult = serde_json::from_str(&unknown.to_model_text()).unwrap();
    assert_eq!(back, unknown);
}

// ------------------------------------------------- tools of this test file

/// A backend that counts what reached it.
#[derive(Default)]
struct Probe {
    attempts: AtomicU32,
    failures_left: AtomicU32,
    keys: Mutex<Vec<String>>,
}

impl Probe {
    fn failing(times: u32) -> Arc<Probe> {
        let probe = Probe::default();
        probe.failures_left.store(times, Ordering::SeqCst);
        Arc::new(probe)
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

/// Sends a message through a backend that may time out, and keeps one
/// message per idempotency key.
#[tool(side_effect, idempotent_backend)]
async fn send(
    ctx: &Ctx<Probe>,
    /// The message's text.
    text: String,
) -> Result<serde_json::Value, ToolError> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    ctx.state
        .keys
        .lock()
        .unwrap()
        .push(ctx.idempotency_key.to_string());
    let left = ctx.state.failures_left.load(Ordering::SeqCst);
    if left > 0 {
        ctx.state.failures_left.store(left - 1, Ordering::SeqCst);
        return Err(ToolError::transient("timeout"));
    }
    Ok(json!({"sent": text}))
}

/// Always refuses, as a business rule.
#[tool(side_effect)]
fn refuse(ctx: &Ctx<Probe>) -> Result<(), Rejection> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    Err(Rejection::new("NOT_TODAY", "Not today."))
}

/// Fails with a bug.
#[tool(side_effect)]
fn broken(ctx: &Ctx<Probe>) -> Result<(), ToolError> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    Err(ToolError::internal("invariant violated"))
}

/// Panics.
#[tool(side_effect)]
fn explode(
    ctx: &Ctx<Probe>,
    /// After how many steps it panics, if given.
    after: Option<u32>,
) -> Result<(), ToolError> {
    ctx.state.attempts.fetch_add(1, Ordering::SeqCst);
    panic!("boom after {after:?}");
}

/// Panics in its check.
#[tool(check = panicking_check)]
fn guarded() -> Result<(), Rejection> {
    Ok(())
}

fn panicking_check(_: &GuardedArgs, _: &Ctx<Probe>) -> Result<(), Rejection> {
    panic!("check bug")
}

/// Takes nothing, answers a constant.
#[tool]
fn ping() -> Result<&'static str, Rejection> {
    Ok("pong")
}

fn probe_dispatcher(probe: &Arc<Probe>) -> Dispatcher<Probe> {
    let registry = tools![send, refuse, broken, explode, guarded, ping].unwrap();
    Dispatcher::builder(registry, Arc::clone(probe))
        .retry_backoff(Duration::ZERO)
        .build()
        .unwrap()
}

#[tokio::test]
async fn transient_failures_are_retried_under_the_same_key() {
    let probe = Probe::failing(2);
    let d = probe_dispatcher(&probe);
    let result = d
        .execute(Call::new("send", r#"{"text": "hi"}"#).session("default"))
        .await;
    assert!(result.ok, "{result:?}");
    assert_eq!(result.data["sent"], "hi");
    assert_eq!(probe.attempts(), 3);
    let keys = probe.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|k| *k == keys[0] && k.len() == 64));
}

#[tokio::test]
async fn retries_are_bounded_then_upstream_unavailable() {
    let probe = Probe::failing(10);
    let d = probe_dispatcher(&probe);
    let result = d
        .execute(Call::new("send", r#"{"text": "hi"}"#).session("default"))
        .await;
    assert_eq!(result.code, Code::UpstreamUnavailable);
    assert_eq!(
        probe.attempts(),
        3,
        "one attempt and the default two retries"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_backoff_grows_with_the_attempt() {
    let probe = Probe::failing(2);
    let registry = tools![send].unwrap();
    let d = Dispatcher::builder(registry, Arc::clone(&probe))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    assert!(
        d.execute(Call::new("send", r#"{"text": "hi"}"#).session("default"))
            .await
            .ok
    );
    // 200 ms before the first retry, 400 ms before the second (paused clock).
    assert_eq!(started.elapsed(), Duration::from_millis(600));
}

#[tokio::test]
async fn business_rejections_and_bugs_are_never_retried() {
    let probe = Arc::new(Probe::default());
    let d = probe_dispatcher(&probe);
    let refused = d.execute(Call::new("refuse", "").session("default")).await;
    assert_eq!(
        (refused.code.as_str(), refused.message.as_str()),
        ("NOT_TODAY", "Not today.")
    );
    assert_eq!(probe.attempts(), 1);
    let broken = d
        .execute(Call::new("broken", "{}").session("default"))
        .await;
    assert_eq!(broken.code, Code::InternalError);
    assert_eq!(probe.attempts(), 2);
}

#[tokio::test]
async fn a_panic_is_an_internal_error_and_the_dispatcher_goes_on() {
    let probe = Arc::new(Probe::default());
    let d = probe_dispatcher(&probe);
    let exploded = d
        .execute(Call::new("explode", r#"{"after": 3}"#).session("default"))
        .await;
    assert_eq!(exploded.code, Code::InternalError);
    assert_eq!(
        exploded.message,
        "The tool failed unexpectedly. Do not retry; tell the user."
    );
    assert_eq!(probe.attempts(), 1, "a panic is not retried");
    assert_eq!(
        d.execute(Call::new("guarded", "").session("default"))
            .await
            .code,
        Code::InternalError
    );
    let pong = d.execute(Call::new("ping", "").session("default")).await;
    assert_eq!(pong.data["result"], "pong", "{pong:?}");
}

#[tokio::test]
async fn an_optional_argument_may_be_absent_or_null_and_is_one_call() {
    let probe = Arc::new(Probe::default());
    let d = Dispatcher::builder(tools![explode].unwrap(), Arc::clone(&probe))
        .max_duplicate_calls(2)
        .build()
        .unwrap();
    assert_eq!(
        d.execute(Call::new("explode", "").session("default"))
            .await
            .code,
        Code::InternalError
    );
    assert_eq!(
        d.execute(Call::new("explode", r#"{"after": null}"#).session("default"))
            .await
            .code,
        Code::InternalError
    );
    assert_eq!(
        d.execute(Call::new("explode", "{}").session("default"))
            .await
            .code,
        Code::LoopDetected
    );
    assert_eq!(probe.attempts(), 2);
    let wrong = d
        .execute(Call::new("explode", r#"{"after": -1}"#).session("default"))
        .await;
    assert_eq!(wrong.code, Code::InvalidArguments);
    assert!(
        wrong.message.starts_with(
            "after: invalid value: integer `-1`, expected a non-negative integer that fits in u32"
        ),
        "{}",
        wrong.message
    );
}
