//! The report's counts on the hand-built log: totals, per tool, rejections
//! by code, recoveries, host refusals, decisions paired with their question,
//! an empty log, and a bad line named.

use super::*;

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
    assert_eq!(
        recovered_by_code(&report),
        [("INVALID_ARGUMENTS", 0), ("POLICY_LIMIT", 1)]
    );
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
    let recovered = recovered_by_code(&report);
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
    assert_eq!(codes(&report), ["INVALID_ARGUMENTS"]);
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
    let recovered = recovered_by_code(&report);
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
