//! Stages 1 to 4 on the shop: unknown tools and allowlists per caller,
//! malformed and invalid arguments listed at once as the model gets them,
//! the closest real field, integers, and what the audit keeps of them.

use super::*;

#[tokio::test]
async fn unknown_tool_lists_the_callers_allowed_tools_sorted() {
    let shop = Arc::new(Shop::new());
    let policy = Policy::new().allow(["refund_order", "get_order"]);
    let d = shop_dispatcher(&shop).policy(policy).build().unwrap();
    let result = in_default(&d, "delete_order", "{}").await;
    assert_eq!(result.code, Code::UnknownTool);
    assert_eq!(
        result.data["available"],
        json!(["get_order", "refund_order"]),
        "sorted, whatever the allowlist's order"
    );
}

#[tokio::test]
async fn allowlists_are_per_caller() {
    let (shop, d) = shop_and_dispatcher();
    let reader = Caller::new("read-only-bot", Policy::new().allow(["get_order"]));
    let refused = in_default_with(&d, "refund_order", REFUND, |c| {
        c.caller(&reader).confirmed(true)
    })
    .await;
    assert_eq!(refused.code, Code::ToolNotAllowed);
    let read = in_default_with(&d, "get_order", r#"{"order_id": "ORD-1001"}"#, |c| {
        c.caller(&reader)
    })
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
    let (shop, d) = shop_with(|b| b.max_steps(100));
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
        assert_code_opens(&result, Code::InvalidJson, "Arguments");
    }
    let array = json!([1, 2]);
    assert_eq!(
        in_default(&d, "get_order", &array).await.code,
        Code::InvalidJson
    );
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn empty_text_means_no_arguments() {
    let (_, d) = shop_and_dispatcher();
    let result = in_default(&d, "get_order", "").await;
    assert_eq!(result.code, Code::InvalidArguments);
    assert_eq!(
        result.message,
        "order_id: field required (Order id, for example ORD-1001.)"
    );
}

#[tokio::test]
async fn invalid_arguments_list_every_problem_at_once_with_the_hint() {
    let (shop, d) = shop_and_dispatcher();
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
    let (shop, d) = shop_and_dispatcher();
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
    let (_, d) = shop_and_dispatcher();
    let result = in_default(&d, "get_order", r#"{"orderId": "ORD-1001"}"#).await;
    assert_code_says(
        &result,
        Code::InvalidArguments,
        "orderId: unknown field, did you mean `order_id`?",
    );
    let result = in_default(
        &d,
        "get_order",
        r#"{"order_id": "ORD-1001", "verbose": true}"#,
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
    let (shop, d) = shop_and_dispatcher();
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
        assert_code_opens(&result, Code::InvalidArguments, "amount_cents: ");
    }
    assert_eq!(shop.applied_refunds(), 0);
}

#[tokio::test]
async fn an_optional_argument_may_be_absent_or_null_and_is_one_call() {
    let probe = Arc::new(Probe::default());
    let d = Dispatcher::builder(tools![explode].unwrap(), Arc::clone(&probe))
        .max_duplicate_calls(2)
        .build()
        .unwrap();
    assert_eq!(
        in_default(&d, "explode", "").await.code,
        Code::InternalError
    );
    assert_eq!(
        in_default(&d, "explode", r#"{"after": null}"#).await.code,
        Code::InternalError
    );
    assert_eq!(
        in_default(&d, "explode", "{}").await.code,
        Code::LoopDetected
    );
    assert_eq!(probe.attempts(), 2);
    let wrong = in_default(&d, "explode", r#"{"after": -1}"#).await;
    assert_eq!(wrong.code, Code::InvalidArguments);
    assert!(
        wrong.message.starts_with(
            "after: invalid value: integer `-1`, expected a non-negative integer that fits in u32"
        ),
        "{}",
        wrong.message
    );
}
