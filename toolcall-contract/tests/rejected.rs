//! The rejected calls of an audit log, read again with the current tools.

use serde_json::{Value, json};
use toolcall::{AuditRecord, Code, Rejection, tool, tools};
use toolcall_contract::rejected::{FieldTable, LeftOut, by_field, regression_calls};

/// One line of a shipment.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Line {
    /// The product.
    pub sku: String,
    /// How many.
    pub quantity: u32,
}

/// Ships goods.
#[tool(side_effect)]
fn ship(
    /// Where to.
    #[arg(min_length = 2)]
    city: String,
    /// What.
    lines: Vec<Line>,
) -> Result<Value, Rejection> {
    Ok(json!({"city": city, "lines": lines.len()}))
}

/// A call of `tool` refused for its `arguments`.
fn invalid(tool: &str, arguments: &str) -> AuditRecord {
    record(tool, arguments, Code::InvalidArguments)
}

fn record(tool: &str, arguments: &str, code: Code) -> AuditRecord {
    serde_json::from_value(json!({
        "session_id": "s",
        "caller": "default",
        "step": 1,
        "tool": tool,
        "arguments": arguments,
        "confirmed": false,
        "ok": code == Code::Ok,
        "code": code,
        "replayed": false,
        "duration_ms": 0.1,
    }))
    .unwrap()
}

#[test]
fn each_failing_field_is_counted_once_per_call_with_indices_left_out() {
    let registry = tools![ship].unwrap();
    let records = [
        // Two lines with a bad quantity: one rejection of `lines[].quantity`.
        invalid(
            "ship",
            r#"{"city": "Recife", "lines": [{"sku": "A", "quantity": -1}, {"sku": "B", "quantity": 1.5}]}"#,
        ),
        invalid(
            "ship",
            r#"{"city": "R", "lines": [{"sku": "A", "quantity": "two"}]}"#,
        ),
        // Fixed since the log was written, or never a problem of fields.
        invalid("ship", r#"{"city": "Natal", "lines": []}"#),
        invalid("cancel", r#"{"id": 1}"#),
        invalid("ship", "[1, 2]"),
        // Not INVALID_ARGUMENTS: not counted here.
        record("ship", r#"{"city": "X"}"#, Code::InvalidJson),
        record("ship", r#"{"city": "Recife", "lines": []}"#, Code::Ok),
    ];
    let rows: Vec<(String, String, u64)> = by_field(&records, &registry)
        .into_iter()
        .map(|row| (row.tool, row.field, row.rejected))
        .collect();
    let rows: Vec<(&str, &str, u64)> = rows
        .iter()
        .map(|(t, f, n)| (t.as_str(), f.as_str(), *n))
        .collect();
    assert_eq!(
        rows,
        [
            ("ship", "lines[].quantity", 2),
            ("cancel", "(unknown tool)", 1),
            ("ship", "(arguments)", 1),
            ("ship", "(valid now)", 1),
            ("ship", "city", 1),
        ]
    );

    let fields = by_field(&records, &registry);
    let city = fields.iter().find(|row| row.field == "city").unwrap();
    assert!(city.example.starts_with("city: "), "{}", city.example);
    let table = FieldTable(&fields).to_string();
    assert!(table.contains("lines[].quantity"), "{table}");
    assert_eq!(FieldTable(&[]).to_string(), "");
}

#[test]
fn a_member_name_with_a_colon_is_counted_under_its_whole_name() {
    // The field of a problem is read from its structure, not by splitting
    // its text at the first ": " (which cut `note: x` to `note`).
    let registry = tools![ship].unwrap();
    let records = [
        invalid("ship", r#"{"city": "Recife", "lines": [], "note: x": 1}"#),
        invalid("ship", r#"{"city": "Recife", "lines": [], "note: x": 2}"#),
    ];
    let rows: Vec<(String, u64)> = by_field(&records, &registry)
        .into_iter()
        .map(|row| (row.field, row.rejected))
        .collect();
    assert_eq!(rows, [("note: x".to_owned(), 2)]);
}

/// Ships goods, as the tool reads today: a city of one letter is fine now.
#[tool(side_effect, name = "ship")]
fn ship_today(
    /// Where to.
    city: String,
    /// What.
    lines: Vec<Line>,
) -> Result<Value, Rejection> {
    Ok(json!({"city": city, "lines": lines.len()}))
}

#[tokio::test]
async fn records_are_counted_by_the_problems_they_kept_whatever_the_tools_are_today() {
    let audit = toolcall::MemoryAudit::new();
    let d = toolcall::Dispatcher::builder(tools![ship].unwrap(), std::sync::Arc::new(()))
        .audit(audit.clone())
        .build()
        .unwrap();
    let bad = r#"{"city": "R", "lines": [{"sku": "A", "quantity": -1}]}"#;
    let told = d
        .execute(toolcall::Call::new("ship", bad).session("default"))
        .await;
    assert_eq!(told.code, Code::InvalidArguments);
    let records = audit.records();
    assert_eq!(records[0].problems.len(), 2, "{:?}", records[0]);

    let counted = |registry: &toolcall::Registry| -> Vec<(String, String)> {
        by_field(&records, registry)
            .into_iter()
            .map(|row| (row.field, row.example))
            .collect()
    };
    let then = counted(&tools![ship].unwrap());
    assert_eq!(
        then.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
        ["city", "lines[].quantity"]
    );
    assert!(
        told.message.starts_with(&then[0].1),
        "the example is what the model read: {} / {}",
        then[0].1,
        told.message
    );
    // The city's bound is gone today, and then the tool itself: the log
    // still says what the model was told.
    assert_eq!(counted(&tools![ship_today].unwrap()), then);
    assert_eq!(counted(&tools![pay].unwrap()), then);
}

#[test]
fn regression_calls_are_the_distinct_rejected_payloads_in_log_order() {
    let bad = r#"{"city": "R", "lines": []}"#;
    let records = [
        record("ship", bad, Code::InvalidArguments),
        record("ship", "{not json", Code::InvalidJson),
        record("ship", bad, Code::InvalidArguments),
        record("ship", r#"{"city": "Recife", "lines": []}"#, Code::Ok),
        record(
            "ship",
            r#"{"city": "Natal", "lines": []}"#,
            Code::LoopDetected,
        ),
    ];
    assert_eq!(
        regression_calls(&records, &tools![ship].unwrap()).calls,
        [
            json!({"tool": "ship", "arguments": bad}),
            json!({"tool": "ship", "arguments": "{not json"}),
        ]
    );
}

/// Pays with a card.
#[tool(side_effect)]
fn pay(
    /// The card number.
    #[arg(sensitive, pattern = r"^\d{16}$")]
    card: String,
    /// Amount in cents.
    #[arg(min = 1)]
    amount_cents: i64,
) -> Result<Value, Rejection> {
    Ok(json!({"paid": amount_cents, "card": card.len()}))
}

fn cut_record(tool: &str, arguments: &str, code: Code) -> AuditRecord {
    let mut record = serde_json::to_value(record(tool, arguments, code)).unwrap();
    record["cut"] = json!([{"field": "arguments", "bytes": 204_800, "sha256": "ab".repeat(32)}]);
    serde_json::from_value(record).unwrap()
}

/// `--rejected-calls` writes only what the audit kept: a redacted value as
/// `[redacted]`; never a sensitive value in plain text (a log written before
/// the parameter was marked, a member given twice); not the marker that
/// stands for whole arguments, nor arguments the audit cut.
#[test]
fn regression_calls_never_write_a_sensitive_value_and_leave_out_what_was_not_kept() {
    let registry = tools![ship, pay].unwrap();
    // Not the card pattern: a problem message would quote it.
    let secret = "4111-1111-1111-1111";
    let records = [
        // Redacted by the audit: written with the marker.
        invalid("pay", r#"{"card":"[redacted]","amount_cents":0}"#),
        // Not JSON, so the audit kept the marker alone: nothing to replay.
        record("pay", "[redacted]", Code::InvalidJson),
        // A log that kept the value: never copied.
        record(
            "pay",
            &format!(r#"{{"card":"{secret}","amount_cents":-1}}"#),
            Code::InvalidArguments,
        ),
        record(
            "pay",
            &format!(r#"{{"card":"{secret}","card":"[redacted]","amount_cents":1}}"#),
            Code::InvalidJson,
        ),
        record("pay", &format!(r#"{{"card":"{secret}""#), Code::InvalidJson),
        // Over-long arguments the audit cut (head…tail): not the payload.
        cut_record(
            "ship",
            r#"{"city": "Recife", "lines": [{"sku"…[cut 204,000 of 204,800 bytes]…"x"}]}"#,
            Code::InvalidJson,
        ),
        // Not JSON and no sensitive parameter: the model's broken text, kept.
        record("ship", r#"{"city": "R""#, Code::InvalidJson),
    ];
    let found = regression_calls(&records, &registry);
    assert_eq!(
        found.calls,
        [
            json!({"tool": "pay", "arguments": r#"{"card":"[redacted]","amount_cents":0}"#}),
            json!({"tool": "ship", "arguments": r#"{"city": "R""#}),
        ]
    );
    assert_eq!(
        found.left_out.clone().into_iter().collect::<Vec<_>>(),
        [
            (LeftOut::Redacted, 1),
            (LeftOut::Cut, 1),
            (LeftOut::NotRedacted, 3)
        ]
    );
    assert!(!found.to_jsonl().contains(secret));

    // The field report does not quote it either, even from such a log.
    let fields = by_field(&records[2..], &registry);
    let text = format!(
        "{}{}",
        FieldTable(&fields),
        toolcall_contract::rejected::to_json(&fields)
    );
    assert!(!text.contains(secret), "{text}");
    assert!(text.contains("amount_cents"), "{text}");
}

/// Records whose arguments are not JSON (a model's broken text, the
/// redaction marker, a cut head and tail) are counted, never a crash.
#[test]
fn the_report_reads_records_whose_arguments_are_not_json() {
    let registry = tools![ship, pay].unwrap();
    let records = [
        invalid("ship", "{not json"),
        invalid("pay", "[redacted]"),
        cut_record("ship", "{\"city\"…[cut 1 of 2 bytes]…}", Code::InvalidJson),
        record("ship", "", Code::ConfirmationRequired),
        record("ship", "\u{0}", Code::Ok),
    ];
    let report = toolcall_contract::report::Report::from_records(&records);
    assert_eq!(report.to_json()["totals"]["calls"], 5);
    let fields = by_field(&records, &registry);
    assert_eq!(
        fields
            .iter()
            .map(|row| (row.tool.as_str(), row.field.as_str(), row.rejected))
            .collect::<Vec<_>>(),
        [("pay", "(arguments)", 1), ("ship", "(arguments)", 1)]
    );
}
