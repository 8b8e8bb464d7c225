//! The rejected calls of an audit log, read again with the current tools.

use serde_json::{Value, json};
use toolcall::{AuditRecord, Code, Rejection, tool, tools};
use toolcall_cli::rejected::{FieldTable, by_field, regression_calls};

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
        record(
            "ship",
            r#"{"city": "Recife", "lines": [{"sku": "A", "quantity": -1}, {"sku": "B", "quantity": 1.5}]}"#,
            Code::InvalidArguments,
        ),
        record(
            "ship",
            r#"{"city": "R", "lines": [{"sku": "A", "quantity": "two"}]}"#,
            Code::InvalidArguments,
        ),
        // Fixed since the log was written, or never a problem of fields.
        record(
            "ship",
            r#"{"city": "Natal", "lines": []}"#,
            Code::InvalidArguments,
        ),
        record("cancel", r#"{"id": 1}"#, Code::InvalidArguments),
        record("ship", "[1, 2]", Code::InvalidArguments),
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
        regression_calls(&records),
        [
            json!({"tool": "ship", "arguments": bad}),
            json!({"tool": "ship", "arguments": "{not json"}),
        ]
    );
}
