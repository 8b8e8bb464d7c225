//! Audit-log metrics: reading a log, the numbers on a hand-built log whose
//! answers are worked out below, the table, the JSON, and a log written by a
//! real dispatcher.

use std::io::{BufReader, Cursor};
use std::sync::Arc;

use serde_json::{Value, json};
use toolcall::{AuditRecord, Call, Decision, Dispatcher, JsonLinesAudit, Rejection};
use toolcall_cli::report::{ReadError, Report, read_audit};

/// One audit line. `extra` overrides or adds members (`replayed`,
/// `confirmed`, `approved_by`).
fn line(session: &str, tool: &str, code: &str, duration_ms: f64, extra: Value) -> String {
    let mut record = json!({
        "session_id": session,
        "caller": "support-bot",
        "step": 1,
        "tool": tool,
        "arguments": "{}",
        "confirmed": false,
        "ok": code == "OK",
        "code": code,
        "replayed": false,
        "duration_ms": duration_ms,
    });
    if let (Value::Object(record), Value::Object(extra)) = (&mut record, extra) {
        record.extend(extra);
    }
    record.to_string()
}

/// Fifteen records in four sessions, in log order. The expected numbers:
///
/// | # | session | tool | code | outcome | recovered? |
/// |---|---|---|---|---|---|
/// | 1 | s1 | get_order | OK | ok | |
/// | 2 | s1 | refund_order | INVALID_ARGUMENTS | rejected | yes: #4 awaits confirmation |
/// | 3 | s2 | refund_order | CURRENCY_MISMATCH | rejected | no: #7 rejected |
/// | 4 | s1 | refund_order | CONFIRMATION_REQUIRED | awaiting | |
/// | 5 | s1 | refund_order | OK, approved_by ana | ok, approved | |
/// | 6 | s1 | refund_order | OK, replayed, confirmed | ok, replayed (not an approval) | |
/// | 7 | s2 | refund_order | INVALID_ARGUMENTS | rejected | no: #8 rejected |
/// | 8 | s2 | refund_order | LOOP_DETECTED | rejected | no: #9 rejected |
/// | 9 | s2 | refund_order | CONFIRMATION_DENIED, approved_by bob | rejected, denied | yes: #13 ok |
/// | 10 | s3 | lookup | UNKNOWN_TOOL | rejected | no: nothing after |
/// | 11 | s3 | get_order | STEP_LIMIT | rejected | no: #12 rejected |
/// | 12 | s3 | get_order | STEP_LIMIT | rejected | no |
/// | 13 | s2 | refund_order | OK, confirmed | ok, approved | |
/// | 14 | s1 | refund_order | CONFIRMATION_EXPIRED | rejected | no |
/// | 15 | s4 | refund_order | CONFIRMATION_INVALID | rejected | no |
///
/// Durations are 1 to 15 ms in that order.
fn hand_built_log() -> String {
    let rows: [(&str, &str, &str, Value); 15] = [
        ("s1", "get_order", "OK", json!({})),
        ("s1", "refund_order", "INVALID_ARGUMENTS", json!({})),
        ("s2", "refund_order", "CURRENCY_MISMATCH", json!({})),
        ("s1", "refund_order", "CONFIRMATION_REQUIRED", json!({})),
        (
            "s1",
            "refund_order",
            "OK",
            json!({"approved_by": "ana", "confirmed": true}),
        ),
        (
            "s1",
            "refund_order",
            "OK",
            json!({"replayed": true, "confirmed": true}),
        ),
        ("s2", "refund_order", "INVALID_ARGUMENTS", json!({})),
        ("s2", "refund_order", "LOOP_DETECTED", json!({})),
        (
            "s2",
            "refund_order",
            "CONFIRMATION_DENIED",
            json!({"approved_by": "bob"}),
        ),
        ("s3", "lookup", "UNKNOWN_TOOL", json!({})),
        ("s3", "get_order", "STEP_LIMIT", json!({})),
        ("s3", "get_order", "STEP_LIMIT", json!({})),
        ("s2", "refund_order", "OK", json!({"confirmed": true})),
        ("s1", "refund_order", "CONFIRMATION_EXPIRED", json!({})),
        ("s4", "refund_order", "CONFIRMATION_INVALID", json!({})),
    ];
    let mut text = String::new();
    for (i, (session, tool, code, extra)) in rows.into_iter().enumerate() {
        text.push_str(&line(session, tool, code, (i + 1) as f64, extra));
        text.push('\n');
    }
    text
}

fn hand_built_report() -> Report {
    let records = read_audit(Cursor::new(hand_built_log())).unwrap();
    assert_eq!(records.len(), 15);
    Report::from_records(&records)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn totals_on_the_hand_built_log() {
    let report = hand_built_report();
    let t = &report.totals;
    assert_eq!(report.sessions, 4);
    assert_eq!(
        (t.calls, t.ok, t.awaiting_confirmation, t.rejected),
        (15, 4, 1, 10)
    );
    assert!(close(t.rejection_rate().unwrap(), 10.0 / 15.0));
    assert_eq!(t.recovered, 2, "#2 and #9");
    assert!(close(t.recovery_rate().unwrap(), 0.2));
    assert_eq!(t.replayed, 1);
    assert_eq!(t.loop_detected, 1);
    // Nearest rank over 1..=15: rank ceil(7.5) = 8 and ceil(14.25) = 15.
    assert_eq!((t.p50_ms, t.p95_ms), (Some(8.0), Some(15.0)));

    let c = &report.confirmations;
    assert_eq!(
        (c.required, c.approved, c.denied, c.expired, c.invalid),
        (1, 2, 1, 1, 1),
        "approved: #5 (approved_by) and #13 (confirmed); #6 is a replay"
    );
    assert!(close(c.denial_rate().unwrap(), 1.0 / 3.0));
    assert_eq!(
        (report.step_limit_calls, report.step_limit_sessions),
        (2, 1)
    );
}

#[test]
fn per_tool_counts_on_the_hand_built_log() {
    let report = hand_built_report();
    let tools: Vec<&str> = report.tools.iter().map(|t| t.tool.as_str()).collect();
    assert_eq!(tools, ["get_order", "lookup", "refund_order"]);

    let get = &report.tools[0].stats;
    assert_eq!(
        (get.calls, get.ok, get.rejected, get.recovered),
        (3, 1, 2, 0)
    );
    // Durations 1, 11, 12: ranks ceil(1.5) = 2 and ceil(2.85) = 3.
    assert_eq!((get.p50_ms, get.p95_ms), (Some(11.0), Some(12.0)));
    assert_eq!(get.recovery_rate(), Some(0.0));

    let lookup = &report.tools[1].stats;
    assert_eq!((lookup.calls, lookup.rejected), (1, 1));
    assert_eq!(lookup.rejection_rate(), Some(1.0));

    let refund = &report.tools[2].stats;
    assert_eq!(
        (
            refund.calls,
            refund.ok,
            refund.awaiting_confirmation,
            refund.rejected,
            refund.recovered,
            refund.replayed,
            refund.loop_detected
        ),
        (11, 3, 1, 7, 2, 1, 1)
    );
    // Durations 2..=9, 13, 14, 15: ranks 6 and 11.
    assert_eq!((refund.p50_ms, refund.p95_ms), (Some(7.0), Some(15.0)));
    assert!(close(refund.recovery_rate().unwrap(), 2.0 / 7.0));
}

#[test]
fn rejections_by_code_and_by_tool_and_code() {
    let report = hand_built_report();
    let by_code: Vec<(&str, u64, u64)> = report
        .by_code
        .iter()
        .map(|r| (r.code.as_str(), r.rejected, r.recovered))
        .collect();
    assert_eq!(
        by_code,
        [
            ("INVALID_ARGUMENTS", 2, 1),
            ("STEP_LIMIT", 2, 0),
            ("CONFIRMATION_DENIED", 1, 1),
            ("CONFIRMATION_EXPIRED", 1, 0),
            ("CONFIRMATION_INVALID", 1, 0),
            ("CURRENCY_MISMATCH", 1, 0),
            ("LOOP_DETECTED", 1, 0),
            ("UNKNOWN_TOOL", 1, 0),
        ]
    );
    assert!(report.by_code.iter().all(|r| r.tool.is_none()));
    assert!(close(report.by_code[0].rate, 2.0 / 15.0), "over all calls");
    assert_eq!(report.by_code[0].recovery_rate(), Some(0.5));

    let pairs: Vec<(&str, &str, u64)> = report
        .by_tool_and_code
        .iter()
        .map(|r| (r.tool.as_deref().unwrap(), r.code.as_str(), r.rejected))
        .collect();
    assert_eq!(
        pairs,
        [
            ("get_order", "STEP_LIMIT", 2),
            ("lookup", "UNKNOWN_TOOL", 1),
            ("refund_order", "INVALID_ARGUMENTS", 2),
            ("refund_order", "CONFIRMATION_DENIED", 1),
            ("refund_order", "CONFIRMATION_EXPIRED", 1),
            ("refund_order", "CONFIRMATION_INVALID", 1),
            ("refund_order", "CURRENCY_MISMATCH", 1),
            ("refund_order", "LOOP_DETECTED", 1),
        ]
    );
    assert!(
        close(report.by_tool_and_code[0].rate, 2.0 / 3.0),
        "over the tool's calls"
    );
    assert!(close(report.by_tool_and_code[2].rate, 2.0 / 11.0));
}

#[test]
fn recovery_looks_at_the_next_call_of_the_same_tool_in_the_same_session_only() {
    let log = [
        line("a", "refund_order", "INVALID_ARGUMENTS", 1.0, json!({})),
        // Another session's success, and another tool's, do not count.
        line("b", "refund_order", "OK", 1.0, json!({})),
        line("a", "get_order", "OK", 1.0, json!({})),
        line("a", "refund_order", "POLICY_LIMIT", 1.0, json!({})),
        line("a", "refund_order", "OK", 1.0, json!({})),
    ]
    .join("\n");
    let report = Report::from_records(&read_audit(Cursor::new(log)).unwrap());
    let refund = report
        .tools
        .iter()
        .find(|t| t.tool == "refund_order")
        .unwrap();
    assert_eq!(refund.stats.rejected, 2);
    assert_eq!(
        refund.stats.recovered, 1,
        "only the POLICY_LIMIT was followed by an OK"
    );
    let codes: Vec<(&str, u64)> = report
        .by_code
        .iter()
        .map(|r| (r.code.as_str(), r.recovered))
        .collect();
    assert_eq!(codes, [("INVALID_ARGUMENTS", 0), ("POLICY_LIMIT", 1)]);
}

#[test]
fn the_table_is_aligned() {
    let text = hand_built_report().to_string();
    insta::assert_snapshot!("report_table", text);
    // The per-tool table: every row as wide as its header, numbers right-aligned.
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("tool "))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 5, "header, three tools, (all)");
    assert!(
        table.iter().all(|l| l.len() == table[0].len()),
        "{table:#?}"
    );
    assert!(table[4].starts_with("(all) "));
    assert!(text.contains(
        "confirmations: 1 required, 2 approved, 1 denied, 1 expired, 1 invalid (denial rate 33.3%)"
    ));
    assert!(text.contains("step budget: 2 call(s) refused with STEP_LIMIT, in 1 session(s)"));
    assert!(
        !text.lines().any(|l| l.ends_with(' ')),
        "no trailing spaces"
    );
}

#[test]
fn the_json_has_the_documented_shape() {
    let json = hand_built_report().to_json();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "format_version",
            "sessions",
            "totals",
            "tools",
            "rejections_by_code",
            "rejections_by_tool_and_code",
            "confirmations",
            "step_limit"
        ]
    );
    assert_eq!(json["format_version"], 1);
    assert_eq!(json["totals"]["calls"], 15);
    assert_eq!(json["totals"]["recovery_rate"], 0.2);
    assert_eq!(
        json["totals"]["duration_ms"],
        json!({"p50": 8.0, "p95": 15.0})
    );
    assert_eq!(json["tools"][2]["tool"], "refund_order");
    assert_eq!(json["tools"][2]["awaiting_confirmation"], 1);
    assert_eq!(
        json["rejections_by_code"][0],
        json!({"code": "INVALID_ARGUMENTS", "rejected": 2, "rate": 2.0 / 15.0,
               "recovered": 1, "recovery_rate": 0.5})
    );
    assert_eq!(json["rejections_by_tool_and_code"][0]["tool"], "get_order");
    assert_eq!(
        json["confirmations"],
        json!({"required": 1, "approved": 2, "denied": 1, "expired": 1, "invalid": 1,
               "denial_rate": 1.0 / 3.0})
    );
    assert_eq!(json["step_limit"], json!({"calls": 2, "sessions": 1}));
    insta::assert_snapshot!("report_json", serde_json::to_string_pretty(&json).unwrap());
}

#[test]
fn an_empty_log_has_no_rates() {
    let report = Report::from_records(&[]);
    let json = report.to_json();
    assert_eq!(json["totals"]["calls"], 0);
    assert_eq!(json["totals"]["rejection_rate"], Value::Null);
    assert_eq!(json["totals"]["recovery_rate"], Value::Null);
    assert_eq!(json["totals"]["duration_ms"]["p50"], Value::Null);
    assert_eq!(json["confirmations"]["denial_rate"], Value::Null);
    assert_eq!(json["tools"], json!([]));
    assert_eq!(
        report.to_string(),
        "0 call(s) in 0 session(s): 0 ok, 0 awaiting confirmation, 0 rejected\n"
    );
}

#[test]
fn read_audit_skips_blank_lines_and_names_the_bad_one() {
    let good = line("s", "get_order", "OK", 0.5, json!({"call_id": "call_1"}));
    let text = format!("\n{good}\r\n   \n{good}\n");
    let records = read_audit(Cursor::new(text)).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].call_id.as_deref(), Some("call_1"));

    let text = format!("{good}\n\n{{\"tool\": \"x\"}}\n{good}\n");
    let error = read_audit(Cursor::new(text)).unwrap_err();
    assert!(matches!(error, ReadError::Record { line: 3, .. }));
    assert_eq!(error.line(), 3);
    let message = error.to_string();
    assert!(
        message.starts_with("line 3: not an audit record: missing field"),
        "{message}"
    );

    let error = read_audit(Cursor::new(format!("{good}\nnot json\n"))).unwrap_err();
    assert_eq!(error.line(), 2);

    let error = read_audit(Cursor::new(b"\xff\xfe\n".to_vec())).unwrap_err();
    assert!(
        matches!(error, ReadError::Io { line: 1, .. }),
        "invalid UTF-8: {error}"
    );
}

// ------------------------------------------------- a log from a real dispatcher

mod shop {
    use super::Rejection;
    use serde_json::{Value, json};
    use toolcall::tool;

    /// A currency.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        Brl,
        Usd,
    }

    /// Looks an order up.
    #[tool]
    pub fn get_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
    ) -> Result<Value, Rejection> {
        Ok(json!({"order_id": order_id, "total_cents": 5000, "currency": "BRL"}))
    }

    /// Refunds an order. Amount in cents.
    #[tool(side_effect, high_risk)]
    pub fn refund_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
        /// Amount in cents; 25.90 is 2590.
        #[arg(min = 1)]
        amount_cents: i64,
        /// The order's currency.
        currency: Currency,
    ) -> Result<Value, Rejection> {
        let _ = currency;
        Ok(json!({"order_id": order_id, "refunded_cents": amount_cents}))
    }
}

#[tokio::test]
async fn a_log_written_by_a_real_dispatcher() {
    let path =
        std::env::temp_dir().join(format!("toolcall-cli-report-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let registry = toolcall::tools![shop::get_order, shop::refund_order].unwrap();
    let dispatcher = Dispatcher::builder(registry, Arc::new(()))
        .audit(JsonLinesAudit::open(&path).unwrap())
        .max_steps(6)
        .build()
        .unwrap();

    // The reference conversation: a lookup, a refund in reais instead of
    // cents, the corrected refund (a person approves it), and the model's
    // retry, which is replayed.
    let refund = r#"{"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL"}"#;
    let lookup = Call::new("get_order", r#"{"order_id": "ORD-1001"}"#).session("demo");
    assert!(dispatcher.execute(lookup).await.ok);
    let wrong = r#"{"order_id": "ORD-1001", "amount_cents": 25.90, "currency": "BRL"}"#;
    let result = dispatcher
        .execute(Call::new("refund_order", wrong).session("demo"))
        .await;
    assert_eq!(result.code, "INVALID_ARGUMENTS");
    let asked = dispatcher
        .execute(Call::new("refund_order", refund).session("demo"))
        .await;
    assert_eq!(asked.code, "CONFIRMATION_REQUIRED");
    let id = asked.confirmation_id.unwrap();
    let approved = dispatcher
        .approve(Decision::new(&id, "demo").by("ana@support"))
        .await;
    assert!(approved.ok, "{approved:?}");
    let retry = dispatcher
        .execute(Call::new("refund_order", refund).session("demo"))
        .await;
    assert!(retry.replayed);

    // Another conversation runs past its step budget.
    for i in 0..7 {
        let args = format!(r#"{{"order_id": "ORD-100{i}"}}"#);
        dispatcher
            .execute(Call::new("get_order", args.as_str()).session("long"))
            .await;
    }

    let file = std::fs::File::open(&path).unwrap();
    let records: Vec<AuditRecord> = read_audit(BufReader::new(file)).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(records.len(), 5 + 7);
    let report = Report::from_records(&records);

    assert_eq!(report.sessions, 2);
    let t = &report.totals;
    assert_eq!(
        (t.calls, t.ok, t.awaiting_confirmation, t.rejected),
        (12, 9, 1, 2)
    );
    assert_eq!(t.recovered, 1, "the refund in cents came next");
    assert_eq!(t.replayed, 1);
    assert!(t.p50_ms.is_some() && t.p95_ms >= t.p50_ms);
    let c = &report.confirmations;
    assert_eq!((c.required, c.approved, c.denied), (1, 1, 0));
    assert_eq!(
        (report.step_limit_calls, report.step_limit_sessions),
        (1, 1)
    );
    let codes: Vec<&str> = report.by_code.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(codes, ["INVALID_ARGUMENTS", "STEP_LIMIT"]);
}
