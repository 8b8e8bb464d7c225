//! Bounds and the audit: parsed arguments meet the limits of text, names and
//! floods come back bounded, and sensitive values are redacted at any depth.

use super::*;

// ------------------------------------------- one set of limits, bounded echo

#[tokio::test]
async fn parsed_arguments_meet_the_same_limits_as_text() {
    let (_, d) = shop_and_dispatcher();
    let huge = json!({"order_id": "O".repeat(200_000)});
    let result = in_default(&d, "get_order", &huge).await;
    assert_eq!(result.code, Code::InvalidJson);
    assert!(result.to_model_text().len() < 1_000);

    let mut deep = json!("ORD-1001");
    for _ in 0..40 {
        deep = json!([deep]);
    }
    let deep = json!({"order_id": deep});
    assert_eq!(
        in_default(&d, "get_order", &deep).await.code,
        Code::InvalidJson
    );
}

#[tokio::test]
async fn an_enormous_tool_name_is_not_echoed_whole() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let d = shop_dispatcher(&shop).audit(audit.clone()).build().unwrap();
    let name = "x".repeat(200_000);
    let result = in_default(&d, &name, "{}").await;
    assert_eq!(result.code, Code::UnknownTool);
    let text = result.to_model_text();
    assert!(text.len() < 1_000, "{} bytes", text.len());
    let record = &audit.records()[0];
    assert!(record.tool.len() < 300);
    assert_eq!(record.cut.len(), 1);
    assert_eq!(record.cut[0].field, "tool");
    assert_eq!(record.cut[0].bytes, 200_000);
    assert_eq!(record.cut[0].sha256.len(), 64);
}

#[tokio::test]
async fn over_limit_arguments_are_cut_in_the_audit_with_their_size_and_digest() {
    let shop = Arc::new(Shop::new());
    let audit = MemoryAudit::new();
    let d = shop_dispatcher(&shop).audit(audit.clone()).build().unwrap();
    let raw = format!(r#"{{"order_id": "{}"}}"#, "O".repeat(100_000));
    let result = d
        .execute(Call::new("get_order", raw.as_str()).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidJson);
    let record = &audit.records()[0];
    assert!(record.arguments.len() < 1_200, "{}", record.arguments.len());
    assert_eq!(record.cut[0].field, "arguments");
    assert_eq!(record.cut[0].bytes, raw.len() as u64);
}

#[tokio::test]
async fn a_flood_of_unknown_or_long_members_gets_a_bounded_answer() {
    let (_, d) = shop_and_dispatcher();
    let mut flood = serde_json::Map::new();
    for i in 0..3_000 {
        flood.insert(format!("field_{i}"), json!(i));
    }
    flood.insert("order_id".into(), json!("ORD-1001"));
    let result = d
        .execute(Call::new("get_order", &Value::Object(flood)).session("default"))
        .await;
    assert_code_says(&result, Code::InvalidArguments, "more problems");
    assert!(result.message.len() < 4_000, "{}", result.message.len());

    let long_value = json!({"order_id": "ORD-".repeat(10_000)});
    let result = in_default(&d, "get_order", &long_value).await;
    assert_eq!(result.code, Code::InvalidArguments);
    assert!(result.message.len() < 1_000, "{}", result.message.len());
    assert!(
        result.message.contains("Order id"),
        "the hint stays: {}",
        result.message
    );
}

// ------------------------------------------------------ sensitive values

/// A card; its number is never kept.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Card {
    /// The card number.
    #[schemars(extend("writeOnly" = true))]
    pub number: String,
    /// The brand.
    pub brand: String,
}

/// Pays with a card and e-mails a receipt.
#[tool(side_effect)]
fn pay_card(
    /// The cards to charge, in order.
    cards: Vec<Card>,
    /// Where the receipt goes.
    #[arg(sensitive)]
    email: String,
) -> Result<Value, Rejection> {
    Ok(
        json!({"receipt_to": email, "charged": cards.iter().map(|c| &c.number[c.number.len() - 4..]).collect::<Vec<_>>(), "echo": cards[0].number}),
    )
}

#[tokio::test]
async fn sensitive_values_are_redacted_at_any_depth_in_the_audit_and_the_stored_result() {
    let audit = MemoryAudit::new();
    let store = Arc::new(MemoryStore::default());
    let d = Dispatcher::builder(tools![pay_card].unwrap(), Arc::new(()))
        .audit(audit.clone())
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let args = r#"{"cards": [{"number": "4111111111111111", "brand": "visa"}], "email": "ana@example.com"}"#;
    let first = in_default(&d, "pay_card", args).await;
    assert!(first.ok, "{first:?}");
    assert_eq!(
        first.data["receipt_to"], "ana@example.com",
        "the model gets its answer"
    );

    for record in audit.records() {
        assert!(
            !record.arguments.contains("4111111111111111"),
            "{}",
            record.arguments
        );
        assert!(
            !record.arguments.contains("ana@example.com"),
            "{}",
            record.arguments
        );
        assert!(
            record.arguments.contains("visa"),
            "the rest is kept: {}",
            record.arguments
        );
    }

    // The stored copy, which replays answer from, holds neither.
    let replay = in_default(&d, "pay_card", args).await;
    assert!(replay.replayed);
    let stored = serde_json::to_string(&replay).unwrap();
    assert!(!stored.contains("4111111111111111"), "{stored}");
    assert!(!stored.contains("ana@example.com"), "{stored}");
    assert_eq!(
        replay.data["charged"],
        json!(["1111"]),
        "what is not secret stays"
    );

    // A nested sensitive value in arguments that fail validation is
    // redacted too.
    let bad =
        r#"{"cards": [{"number": "5500000000000004", "brand": 7}], "email": "ana@example.com"}"#;
    let rejected = in_default(&d, "pay_card", bad).await;
    assert_eq!(rejected.code, Code::InvalidArguments);
    let last = audit.records().pop().unwrap();
    assert!(
        !last.arguments.contains("5500000000000004"),
        "{}",
        last.arguments
    );
}

#[tokio::test]
async fn the_audit_keeps_a_rejected_calls_problems_but_no_sensitive_value_they_quote() {
    let audit = MemoryAudit::new();
    let d = Dispatcher::builder(tools![pay_card].unwrap(), Arc::new(()))
        .audit(audit.clone())
        .build()
        .unwrap();
    let bad = r#"{"cards": [{"number": 5500000000000004, "brand": "visa"}], "email": 912345678, "tip": 1}"#;
    let rejected = in_default(&d, "pay_card", bad).await;
    assert_eq!(rejected.code, Code::InvalidArguments);
    assert!(
        rejected.message.contains("5500000000000004") && rejected.message.contains("912345678"),
        "the model is told what it sent: {}",
        rejected.message
    );

    let record = audit.records().pop().unwrap();
    let paths: Vec<&str> = record.problems.iter().map(|p| p.path.as_ref()).collect();
    assert_eq!(paths, ["cards[0].number", "email", "tip"], "{record:?}");
    assert_eq!(record.problems[0].problem, REDACTED, "a writeOnly value");
    assert_eq!(
        record.problems[1].problem, REDACTED,
        "a sensitive parameter"
    );
    assert!(
        record.problems[2].problem.contains("unknown field"),
        "a member that is no field names no value: {:?}",
        record.problems[2]
    );
    assert_eq!(record.problems[1].description, "Where the receipt goes.");
    let line = serde_json::to_string(&record).unwrap();
    assert!(!line.contains("5500000000000004"), "{line}");
    assert!(!line.contains("912345678"), "{line}");
}
