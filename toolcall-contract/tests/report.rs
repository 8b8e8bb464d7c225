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

#[test]
fn totals_on_the_hand_built_log() {
    let report = hand_built_report();
    let t = &report.totals;
    assert_eq!(report.sessions, 6);
    assert_eq!(
        (
            t.calls,
            t.ok,
            t.awaiting_confirmation,
            t.rejected,
            t.refused_by_host
        ),
        (17, 4, 4, 5, 4),
        "21 records less 4 decisions"
    );
    assert!(close(t.rejection_rate().unwrap(), 5.0 / 17.0));
    assert_eq!(t.recovered, 3, "#2, #8 and #10");
    assert!(close(t.recovery_rate().unwrap(), 0.6));
    assert_eq!(t.replayed, 1);
    assert_eq!(t.loop_detected, 1);
    // The calls' durations: 1-4, 6-8, 10-17, 19, 21 (17 of them): ranks
    // ceil(8.5) = 9 and ceil(16.15) = 17.
    assert_eq!((t.p50_ms, t.p95_ms), (Some(11.0), Some(21.0)));

    let c = &report.confirmations;
    assert_eq!(
        (c.required, c.approved, c.approved_then_failed, c.denied),
        (4, 3, 1, 1),
        "approved: #5, #18 (then refused on re-check) and #20 (sent again confirmed)"
    );
    assert_eq!((c.expired, c.invalid, c.failed), (1, 1, 0));
    assert_eq!(c.decisions, 4);
    assert_eq!(c.unanswered, 1, "#21");
    assert_eq!(
        c.confirmed_unasked, 2,
        "#6 and #13 are calls, not approvals"
    );
    assert!(close(c.denial_rate().unwrap(), 0.25));
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
        (get.calls, get.ok, get.rejected, get.refused_by_host),
        (4, 2, 0, 2)
    );
    // Durations 1, 11, 12, 14: ranks 2 and ceil(3.8) = 4.
    assert_eq!((get.p50_ms, get.p95_ms), (Some(11.0), Some(14.0)));
    assert_eq!(get.rejection_rate(), Some(0.0));
    assert_eq!(get.recovery_rate(), None, "STEP_LIMIT is not a rejection");

    let lookup = &report.tools[1].stats;
    assert_eq!((lookup.calls, lookup.rejected, lookup.recovered), (1, 1, 1));
    assert_eq!(lookup.rejection_rate(), Some(1.0));

    let refund = &report.tools[2].stats;
    assert_eq!(
        (
            refund.calls,
            refund.ok,
            refund.awaiting_confirmation,
            refund.rejected,
            refund.refused_by_host,
            refund.recovered,
            refund.replayed,
            refund.loop_detected
        ),
        (12, 2, 4, 4, 2, 2, 1, 1)
    );
    // Durations 2-4, 6-8, 13, 15-17, 19, 21: ranks 6 and ceil(11.4) = 12.
    assert_eq!((refund.p50_ms, refund.p95_ms), (Some(8.0), Some(21.0)));
    assert!(close(refund.recovery_rate().unwrap(), 0.5));
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
            ("CURRENCY_MISMATCH", 1, 0),
            ("LOOP_DETECTED", 1, 1),
            ("UNKNOWN_TOOL", 1, 1),
        ],
        "refusals by the host (STEP_LIMIT, CONFIRMATION_*) are not rejections"
    );
    assert!(report.by_code.iter().all(|r| r.tool.is_none()));
    assert!(close(report.by_code[0].rate, 2.0 / 17.0), "over all calls");
    assert_eq!(report.by_code[0].recovery_rate(), Some(0.5));

    let pairs: Vec<(&str, &str, u64)> = report
        .by_tool_and_code
        .iter()
        .map(|r| (r.tool.as_deref().unwrap(), r.code.as_str(), r.rejected))
        .collect();
    assert_eq!(
        pairs,
        [
            ("lookup", "UNKNOWN_TOOL", 1),
            ("refund_order", "INVALID_ARGUMENTS", 2),
            ("refund_order", "CURRENCY_MISMATCH", 1),
            ("refund_order", "LOOP_DETECTED", 1),
        ]
    );
    assert!(
        close(report.by_tool_and_code[0].rate, 1.0),
        "over the tool's calls"
    );
    assert!(close(report.by_tool_and_code[1].rate, 2.0 / 12.0));
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
    ];
    let report = report_of(&log);
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
fn a_persons_decision_is_not_the_models_next_attempt() {
    let denied = json!({"approved_by": "bob"});
    let approved = json!({"approved_by": "ana", "confirmed": true});
    let log = [
        // Rejected, a person denies an earlier call, then the model's next
        // call gets through: recovered.
        line("a", "refund_order", "INVALID_ARGUMENTS", 1.0, json!({})),
        line("a", "refund_order", "CONFIRMATION_DENIED", 1.0, denied),
        line("a", "refund_order", "OK", 1.0, json!({})),
        // Rejected, then only a person's approval of an earlier call: the
        // model did not try again.
        line("b", "refund_order", "POLICY_LIMIT", 1.0, json!({})),
        line("b", "refund_order", "OK", 1.0, approved),
    ];
    let report = report_of(&log);
    let recovered: Vec<(&str, u64)> = report
        .by_code
        .iter()
        .map(|r| (r.code.as_str(), r.recovered))
        .collect();
    assert_eq!(recovered, [("INVALID_ARGUMENTS", 1), ("POLICY_LIMIT", 0)]);
    assert_eq!(report.totals.calls, 3, "the two decisions are not calls");
    assert_eq!(report.confirmations.decisions, 2);
}

#[test]
fn refusals_by_the_host_are_neither_rejections_nor_recoveries() {
    let log = [
        line("a", "refund_order", "CONFIRMATION_EXPIRED", 1.0, json!({})),
        line("a", "refund_order", "OK", 1.0, json!({})),
        line("a", "get_order", "INVALID_ARGUMENTS", 1.0, json!({})),
        // The next attempt is refused by the host: not a recovery.
        line("a", "get_order", "STEP_LIMIT", 1.0, json!({})),
        line("b", "refund_order", "CONFIRMATION_INVALID", 1.0, json!({})),
    ];
    let report = report_of(&log);
    let t = &report.totals;
    assert_eq!(
        (t.calls, t.ok, t.rejected, t.refused_by_host, t.recovered),
        (5, 1, 1, 3, 0)
    );
    assert!(close(t.rejection_rate().unwrap(), 0.2));
    assert_eq!(t.recovery_rate(), Some(0.0));
    let codes: Vec<&str> = report.by_code.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(codes, ["INVALID_ARGUMENTS"]);
    let c = &report.confirmations;
    assert_eq!((c.expired, c.invalid, c.decisions), (1, 1, 0));
    assert_eq!(report.step_limit_calls, 1);
}

#[test]
fn an_unknown_tool_is_recovered_by_the_next_call_of_any_tool() {
    let log = [
        line("a", "lookup_order", "UNKNOWN_TOOL", 1.0, json!({})),
        line("a", "get_order", "OK", 1.0, json!({})),
        line("a", "delete_order", "TOOL_NOT_ALLOWED", 1.0, json!({})),
        line("a", "cancel_order", "INVALID_ARGUMENTS", 1.0, json!({})),
        line("a", "cancel_order", "OK", 1.0, json!({})),
    ];
    let report = report_of(&log);
    let recovered: Vec<(&str, u64)> = report
        .by_code
        .iter()
        .map(|r| (r.code.as_str(), r.recovered))
        .collect();
    assert_eq!(
        recovered,
        [
            ("INVALID_ARGUMENTS", 1),
            ("TOOL_NOT_ALLOWED", 0),
            ("UNKNOWN_TOOL", 1),
        ],
        "TOOL_NOT_ALLOWED was followed by another rejection"
    );
}

#[test]
fn decisions_are_paired_with_the_confirmation_they_answer() {
    let asked = |args: &str| json!({"arguments": args});
    let log = [
        // One call approved through `approve`: one call, one approval.
        line(
            "a",
            "refund_order",
            "CONFIRMATION_REQUIRED",
            1.0,
            asked(r#"{"n": 1}"#),
        ),
        line(
            "a",
            "refund_order",
            "OK",
            1.0,
            json!({"arguments": r#"{"n":1}"#, "approved_by": "ana", "confirmed": true}),
        ),
        // Approved, but the re-run check refuses it: still an approval.
        line(
            "a",
            "refund_order",
            "CONFIRMATION_REQUIRED",
            1.0,
            asked(r#"{"n": 2}"#),
        ),
        line(
            "a",
            "refund_order",
            "POLICY_LIMIT",
            1.0,
            json!({"arguments": r#"{"n": 2}"#, "approved_by": "ana", "confirmed": true}),
        ),
        // A call the host marks confirmed without having been asked: no approval.
        line(
            "a",
            "refund_order",
            "OK",
            1.0,
            json!({"arguments": r#"{"n": 3}"#, "confirmed": true}),
        ),
        // Denied through `deny`.
        line(
            "a",
            "refund_order",
            "CONFIRMATION_REQUIRED",
            1.0,
            asked(r#"{"n": 4}"#),
        ),
        line(
            "a",
            "refund_order",
            "CONFIRMATION_DENIED",
            1.0,
            json!({"arguments": r#"{"n": 4}"#, "approved_by": "bob"}),
        ),
    ];
    let report = report_of(&log);
    let t = &report.totals;
    assert_eq!(
        (t.calls, t.ok, t.awaiting_confirmation, t.rejected),
        (4, 1, 3, 0),
        "three asked calls and the unasked confirmed one; the re-check's refusal is the decision's"
    );
    let c = &report.confirmations;
    assert_eq!(
        (c.required, c.approved, c.approved_then_failed, c.denied),
        (3, 2, 1, 1)
    );
    assert_eq!((c.decisions, c.unanswered, c.confirmed_unasked), (3, 0, 1));
    assert!(close(c.denial_rate().unwrap(), 1.0 / 3.0));
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
        "0 call(s) in 0 session(s): 0 ok, 0 awaiting confirmation, 0 rejected, 0 refused by the host, 0 failed\n"
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
    let id = asked.question_id.unwrap();
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
        (
            t.calls,
            t.ok,
            t.awaiting_confirmation,
            t.rejected,
            t.refused_by_host
        ),
        (11, 8, 1, 1, 1),
        "the approval is a decision, not a call; STEP_LIMIT is the host's refusal"
    );
    assert_eq!(t.recovered, 1, "the refund in cents came next");
    assert_eq!(t.replayed, 1);
    assert!(t.p50_ms.is_some() && t.p95_ms >= t.p50_ms);
    let c = &report.confirmations;
    assert_eq!((c.required, c.approved, c.denied), (1, 1, 0));
    assert_eq!(
        (c.decisions, c.unanswered),
        (1, 0),
        "the approval answers the call, its arguments compared as canonical JSON"
    );
    assert_eq!(
        (report.step_limit_calls, report.step_limit_sessions),
        (1, 1)
    );
    let codes: Vec<&str> = report.by_code.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(codes, ["INVALID_ARGUMENTS"]);
}

#[test]
fn failures_of_the_tool_or_the_pipeline_are_neither_rejections_nor_recoveries() {
    let log = [
        line("a", "refund_order", "UPSTREAM_UNAVAILABLE", 1.0, json!({})),
        line("a", "refund_order", "TIMEOUT", 1.0, json!({})),
        line("a", "refund_order", "INTERNAL_ERROR", 1.0, json!({})),
        line("a", "refund_order", "INVALID_ARGUMENTS", 1.0, json!({})),
        // The next attempt after the rejection fails: no recovery either.
        line("a", "refund_order", "CALL_IN_PROGRESS", 1.0, json!({})),
        line("a", "refund_order", "OK", 1.0, json!({})),
    ];
    let report = report_of(&log);
    let t = &report.totals;
    assert_eq!(
        (t.calls, t.ok, t.rejected, t.failed, t.refused_by_host),
        (6, 1, 1, 4, 0)
    );
    assert_eq!(t.recovered, 0);
    let codes: Vec<&str> = report.by_code.iter().map(|r| r.code.as_str()).collect();
    assert_eq!(
        codes,
        ["INVALID_ARGUMENTS"],
        "failures are not rejection codes"
    );
    assert!(
        report
            .to_string()
            .starts_with("6 call(s) in 1 session(s): 1 ok, 0 awaiting confirmation, 1 rejected, 0 refused by the host, 4 failed"),
        "{report}"
    );
    assert_eq!(report.to_json()["totals"]["failed"], 4);
}

/// A tool name or a code the model made up, with a newline and ANSI escapes
/// in it, cannot forge a row of the table nor recolour it: it is shown
/// escaped, and a huge one is cut.
#[test]
fn made_up_names_are_shown_escaped_and_bounded() {
    let forged = "fake\n(all)      99  99\u{1b}[32m";
    let report = report_of(&[
        line("s1", "get_order", "OK", 1.0, json!({})),
        line("s1", forged, "UNKNOWN_TOOL\u{1b}[0m", 1.0, json!({})),
        line("s1", &"x".repeat(100_000), "UNKNOWN_TOOL", 1.0, json!({})),
    ]);
    let text = report.to_string();
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(
        text.contains("fake\\n(all)      99  99\\u{1b}[32m"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("(all)")).count(),
        1,
        "one (all) row: {text}"
    );
    assert!(
        text.len() < 10_000,
        "the long name is cut: {} bytes",
        text.len()
    );
    assert!(text.contains("…[cut "), "{text}");
}

/// A call a rule of the operators' controls approved is the model's call,
/// counted apart: never a person's decision, nor a call sent confirmed
/// unasked.
#[test]
fn approvals_by_rule_are_counted_apart() {
    let ruled = json!({"approved_by": "rule:small-refunds", "confirmed": true});
    let log = [
        line("a", "refund_order", "OK", 1.0, ruled.clone()),
        line("a", "refund_order", "CONFIRMATION_REQUIRED", 1.0, json!({})),
        line(
            "a",
            "refund_order",
            "OK",
            1.0,
            json!({"approved_by": "ana", "confirmed": true}),
        ),
        line("b", "refund_order", "OK", 1.0, ruled),
    ];
    let report = report_of(&log);
    let c = &report.confirmations;
    assert_eq!(c.approved_by_rule, 2);
    assert_eq!((c.approved, c.decisions), (1, 1), "ana's decision alone");
    assert_eq!(c.confirmed_unasked, 0);
    assert_eq!(
        report.totals.calls, 3,
        "two calls by rule and the asked one"
    );
    assert_eq!(report.to_json()["confirmations"]["approved_by_rule"], 2);
    assert!(report.to_string().contains("2 approved by a rule"));
}
