//! `orders replay`: one conversation over one store, its flags, and the
//! lines it refuses (malformed, a member twice, arguments over the limits)
//! or takes (a dry run).

use super::*;

#[test]
fn replay_is_one_conversation_over_one_store() {
    let calls = [
        json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\"}"}),
        refund(json!(25.9), true),
        refund(json!(2590), false),
        // The approved call answers the question, which is not the model
        // repeating itself: three identical calls follow, then the loop guard.
        refund(json!(2590), true),
        refund(json!(2590), true),
        refund(json!(2590), true),
        refund(json!(2590), true),
        json!({"tool": "get_order", "arguments": {"order_id": "ORD-1001"}}),
        json!({"tool": "delete_order", "arguments": ""}),
        json!({"tool": "get_order", "arguments": [1]}),
        json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\""}),
        json!({"tool": "get_order", "arguments": "{}"}),
    ];
    let results = replay(&["--max-steps", "11"], &calls);
    let expected = [
        (true, "OK", false),
        (false, "INVALID_ARGUMENTS", false),
        (false, "CONFIRMATION_REQUIRED", false),
        (true, "OK", false),
        (true, "OK", true),
        (true, "OK", true),
        (false, "LOOP_DETECTED", false),
        (true, "OK", false),
        (false, "UNKNOWN_TOOL", false),
        (false, "INVALID_JSON", false),
        (false, "INVALID_JSON", false),
        (false, "STEP_LIMIT", false),
    ];
    let expected: Vec<(bool, String, bool)> = expected
        .iter()
        .map(|(o, c, r)| (*o, c.to_string(), *r))
        .collect();
    assert_eq!(outcomes(&results), expected);
    assert_eq!(
        results[7]["data"]["refunded_cents"], 2590,
        "the refund was applied once"
    );
    assert_eq!(results[4]["data"], results[3]["data"]);
    assert_eq!(results[5]["data"], results[3]["data"]);
    assert_eq!(
        results[8]["data"]["available"],
        json!(["get_order", "refund_order"])
    );
}

#[test]
fn replay_flags_change_the_pipeline() {
    let calls = [
        refund(json!(2590), true),
        json!({"tool": "get_order", "arguments": "{\"order_id\": \"ORD-1001\"}"}),
        refund(json!(100), true),
    ];
    let results = replay(
        &["--allow", "refund_order", "--max-refund-cents", "1000"],
        &calls,
    );
    let codes: Vec<String> = outcomes(&results).into_iter().map(|o| o.1).collect();
    assert_eq!(codes, ["POLICY_LIMIT", "TOOL_NOT_ALLOWED", "OK"]);

    let lost = replay(
        &["--lose-next-response", "1", "--max-retries", "0"],
        &[refund(json!(2590), true), refund(json!(2590), true)],
    );
    let codes: Vec<String> = outcomes(&lost).into_iter().map(|o| o.1).collect();
    assert_eq!(codes, ["UPSTREAM_UNAVAILABLE", "OK"]);
    assert_eq!(
        lost[1]["data"]["remaining_refundable_cents"],
        12_000 - 2590,
        "not refunded twice"
    );
}

#[test]
fn a_malformed_replay_line_is_a_usage_error_on_stderr() {
    let output = orders(&["replay", "-"], "{\"tool\": \"get_order\"}\nnot json\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 2: not a replay call"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
}

/// A replay line's `arguments` written as an object are read as the text
/// the line has, as the pipeline reads a model's text: a member twice, at
/// any depth, is INVALID_JSON (it used to refund the last amount), and an
/// object over 64 KiB is refused by its size.
#[test]
fn replay_object_arguments_hold_to_the_same_limits_as_text() {
    let object = |extra: &str| {
        format!(
            r#"{{"tool": "refund_order", "confirmed": true, "arguments": {{"order_id": "ORD-1001", {extra} "currency": "BRL", "reason": "damaged"}}}}"#
        )
    };
    let lines = [
        object(r#""amount_cents": 100, "amount_cents": 200,"#),
        object(r#""amount_cents": 100, "note": {"by": "a", "by": "b"},"#),
        object(&format!(
            r#""amount_cents": 100, "note": "{}","#,
            "x".repeat(200_000)
        )),
        object(r#""amount_cents": 300,"#),
        r#"{"tool": "get_order", "arguments": {"order_id": "ORD-1001"}}"#.to_owned(),
    ];
    let input: String = lines.iter().map(|line| format!("{line}\n")).collect();
    let answers = results(orders(&["replay", "-", "--retry-backoff-ms", "0"], &input));
    let codes: Vec<String> = outcomes(&answers).into_iter().map(|o| o.1).collect();
    assert_eq!(
        codes,
        ["INVALID_JSON", "INVALID_JSON", "INVALID_JSON", "OK", "OK"]
    );
    let message = |i: usize| answers[i]["message"].as_str().unwrap().to_owned();
    assert!(
        message(0).contains("duplicate member `amount_cents`"),
        "{}",
        message(0)
    );
    assert!(
        message(1).contains("duplicate member `by`"),
        "{}",
        message(1)
    );
    assert!(
        message(2).contains("over the limit of 65536"),
        "{}",
        message(2)
    );
    assert_eq!(
        answers[4]["data"]["refunded_cents"], 300,
        "only the well-formed refund was applied"
    );
}

/// Members given twice in a replay line itself, outside its arguments, are
/// an error of the replay file naming the line, not the last one silently.
#[test]
fn a_replay_line_with_a_member_twice_is_refused_naming_the_line() {
    for (line, member) in [
        (
            r#"{"tool": "get_order", "tool": "refund_order", "arguments": {"order_id": "ORD-1001"}}"#,
            "tool",
        ),
        (
            r#"{"tool": "get_order", "arguments": {"order_id": "ORD-1001"}, "arguments": "{}"}"#,
            "arguments",
        ),
        (
            r#"{"tool": "get_order", "confirmed": false, "confirmed": true}"#,
            "confirmed",
        ),
    ] {
        let output = orders(
            &["replay", "-"],
            &format!("{{\"tool\": \"get_order\"}}\n{line}\n"),
        );
        assert_eq!(output.status.code(), Some(2), "{line}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("standard input: line 2: not a replay call")
                && stderr.contains(&format!("duplicate field `{member}`")),
            "{stderr}"
        );
        assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 1);
    }
}

#[test]
fn a_replay_line_may_be_a_dry_run() {
    let mut dry = refund(json!(2590), true);
    dry["dry_run"] = json!(true);
    let results = replay(&[], &[dry, refund(json!(2590), true)]);
    assert_eq!(results[0]["code"], "DRY_RUN");
    assert_eq!(
        results[0]["data"]["preview"],
        "would refund 2590 of 12000 cents of ORD-1001"
    );
    assert_eq!(results[1]["ok"], true, "{}", results[1]);
    assert_ne!(
        results[1]["replayed"], true,
        "the dry run left nothing to replay"
    );
}
