//! Audit-log metrics: reading a log, the numbers on a hand-built log whose
//! answers are worked out below, the table, the JSON, and a log written by a
//! real dispatcher.

use std::io::{BufReader, Cursor};

use std::sync::Arc;

use serde_json::{Value, json};

use toolcall::{AuditRecord, Call, Decision, Dispatcher, JsonLinesAudit, Rejection};

use toolcall_contract::report::{ReadError, Report, read_audit};

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

/// Twenty-one records in six sessions, in log order. Decisions (D) are not
/// calls. The expected numbers:
///
/// | # | session | tool | code | class | recovered? |
/// |---|---|---|---|---|---|
/// | 1 | s1 | get_order | OK | ok | |
/// | 2 | s1 | refund_order | INVALID_ARGUMENTS | rejected | yes: #4 awaits confirmation |
/// | 3 | s2 | refund_order | CURRENCY_MISMATCH | rejected | no: #7 rejected |
/// | 4 | s1 | refund_order | CONFIRMATION_REQUIRED | awaiting | |
/// | 5 | s1 | refund_order | OK, approved_by ana | D: approved, answers #4 | |
/// | 6 | s1 | refund_order | OK, replayed, confirmed | ok, replayed, confirmed unasked | |
/// | 7 | s2 | refund_order | INVALID_ARGUMENTS | rejected | no: #8 rejected |
/// | 8 | s2 | refund_order | LOOP_DETECTED | rejected | yes: #9 is a decision, #13 ok |
/// | 9 | s2 | refund_order | CONFIRMATION_DENIED, approved_by bob | D: denied | |
/// | 10 | s3 | lookup | UNKNOWN_TOOL | rejected | yes: #11, another tool, ok |
/// | 11 | s3 | get_order | OK | ok | |
/// | 12 | s3 | get_order | STEP_LIMIT | refused by the host | |
/// | 13 | s2 | refund_order | OK, confirmed | ok, confirmed unasked | |
/// | 14 | s3 | get_order | STEP_LIMIT | refused by the host | |
/// | 15 | s1 | refund_order | CONFIRMATION_EXPIRED | refused by the host | |
/// | 16 | s4 | refund_order | CONFIRMATION_INVALID | refused by the host | |
/// | 17 | s5 | refund_order `{"order_id": "ORD-1", "amount_cents": 10}` | CONFIRMATION_REQUIRED | awaiting | |
/// | 18 | s5 | refund_order, same arguments compact and reordered | POLICY_LIMIT, approved_by ana, confirmed | D: approved then failed, answers #17 | |
/// | 19 | s6 | refund_order `{"order_id": "ORD-2"}` | CONFIRMATION_REQUIRED | awaiting | |
/// | 20 | s6 | refund_order, same arguments | OK, confirmed | D: approved (the host sent the call again), answers #19 | |
/// | 21 | s6 | refund_order `{"order_id": "ORD-3"}` | CONFIRMATION_REQUIRED | awaiting, never answered | |
///
/// Durations are 1 to 21 ms in that order.
fn hand_built_log() -> String {
    let rows: [(&str, &str, &str, Value); 21] = [
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
        ("s3", "get_order", "OK", json!({})),
        ("s3", "get_order", "STEP_LIMIT", json!({})),
        ("s2", "refund_order", "OK", json!({"confirmed": true})),
        ("s3", "get_order", "STEP_LIMIT", json!({})),
        ("s1", "refund_order", "CONFIRMATION_EXPIRED", json!({})),
        ("s4", "refund_order", "CONFIRMATION_INVALID", json!({})),
        (
            "s5",
            "refund_order",
            "CONFIRMATION_REQUIRED",
            json!({"arguments": r#"{"order_id": "ORD-1", "amount_cents": 10}"#}),
        ),
        (
            "s5",
            "refund_order",
            "POLICY_LIMIT",
            json!({"arguments": r#"{"amount_cents":10,"order_id":"ORD-1"}"#,
                   "approved_by": "ana", "confirmed": true}),
        ),
        (
            "s6",
            "refund_order",
            "CONFIRMATION_REQUIRED",
            json!({"arguments": r#"{"order_id": "ORD-2"}"#}),
        ),
        (
            "s6",
            "refund_order",
            "OK",
            json!({"arguments": r#"{"order_id":"ORD-2"}"#, "confirmed": true}),
        ),
        (
            "s6",
            "refund_order",
            "CONFIRMATION_REQUIRED",
            json!({"arguments": r#"{"order_id": "ORD-3"}"#}),
        ),
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
    assert_eq!(records.len(), 21);
    Report::from_records(&records)
}

fn report_of(lines: &[String]) -> Report {
    Report::from_records(&read_audit(Cursor::new(lines.join("\n"))).unwrap())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// The rejection codes of a report, in its order.
fn codes(report: &Report) -> Vec<&str> {
    report.by_code.iter().map(|r| r.code.as_str()).collect()
}

/// Each rejection code with how many of its rejections were recovered.
fn recovered_by_code(report: &Report) -> Vec<(&str, u64)> {
    report
        .by_code
        .iter()
        .map(|r| (r.code.as_str(), r.recovered))
        .collect()
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
    assert!(text.starts_with(
        "17 call(s) in 6 session(s): 4 ok, 4 awaiting confirmation, 5 rejected, 4 refused by the host, 0 failed\n\
         4 decision(s) on approvals, not counted as calls\n"
    ));
    assert!(text.contains(
        "confirmations: 4 required, 3 approved, 1 denied, 1 expired, 1 invalid (denial rate 25.0%)\n  \
         1 approved then failed, 0 decision(s) not carried out, 1 never answered, \
         2 call(s) sent confirmed unasked, 0 approved by a rule\n"
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
    assert_eq!(json["format_version"], 2);
    let stats: Vec<&str> = json["totals"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        stats,
        [
            "calls",
            "ok",
            "awaiting_confirmation",
            "rejected",
            "refused_by_host",
            "failed",
            "rejection_rate",
            "recovered",
            "recovery_rate",
            "replayed",
            "loop_detected",
            "duration_ms"
        ]
    );
    assert_eq!(json["totals"]["calls"], 17);
    assert_eq!(json["totals"]["refused_by_host"], 4);
    assert_eq!(json["totals"]["recovery_rate"], 0.6);
    assert_eq!(
        json["totals"]["duration_ms"],
        json!({"p50": 11.0, "p95": 21.0})
    );
    assert_eq!(json["tools"][2]["tool"], "refund_order");
    assert_eq!(json["tools"][2]["awaiting_confirmation"], 4);
    assert_eq!(
        json["rejections_by_code"][0],
        json!({"code": "INVALID_ARGUMENTS", "rejected": 2, "rate": 2.0 / 17.0,
               "recovered": 1, "recovery_rate": 0.5})
    );
    assert_eq!(json["rejections_by_tool_and_code"][0]["tool"], "lookup");
    assert_eq!(
        json["confirmations"],
        json!({"required": 4, "approved": 3, "approved_then_failed": 1, "denied": 1,
               "expired": 1, "invalid": 1, "failed": 0, "unanswered": 1, "decisions": 4,
               "confirmed_unasked": 2, "approved_by_rule": 0, "denial_rate": 0.25})
    );
    assert_eq!(json["step_limit"], json!({"calls": 2, "sessions": 1}));
    insta::assert_snapshot!("report_json", serde_json::to_string_pretty(&json).unwrap());
}

mod counts;
mod real_logs;
