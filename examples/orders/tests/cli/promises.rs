//! Promises under the command line: a lost answer in doubt and completed,
//! a person's yes after three asks, bounded names and results, taint.

use super::*;

#[test]
fn a_refund_whose_answer_was_lost_is_in_doubt_and_the_retry_completes_it() {
    let results = replay(
        &["--lose-next-response", "1", "--max-retries", "0"],
        &[
            refund(json!(12_000), true),
            refund(json!(12_000), false),
            read_order(),
        ],
    );
    assert_eq!(results[0]["code"], "UPSTREAM_UNAVAILABLE");
    assert_eq!(results[0]["data"]["in_doubt"], true);
    assert!(
        results[0]["message"]
            .as_str()
            .unwrap()
            .contains("same arguments")
    );
    assert_eq!(results[1]["ok"], true, "{}", results[1]);
    assert_eq!(results[1]["data"]["remaining_refundable_cents"], 0);
    assert_eq!(
        results[2]["data"]["refunded_cents"], 12_000,
        "refunded once: {}",
        results[2]
    );
}

#[test]
fn a_persons_yes_after_three_asks_is_not_a_loop() {
    let results = replay(
        &[],
        &[
            refund(json!(2590), false),
            refund(json!(2590), false),
            refund(json!(2590), false),
            refund(json!(2590), true),
            read_order(),
        ],
    );
    let codes: Vec<&str> = results
        .iter()
        .map(|r| r["code"].as_str().unwrap_or("OK"))
        .collect();
    assert_eq!(
        codes,
        [
            "CONFIRMATION_REQUIRED",
            "CONFIRMATION_REQUIRED",
            "CONFIRMATION_REQUIRED",
            "OK",
            "OK"
        ]
    );
    assert_eq!(results[4]["data"]["refunded_cents"], 2590);
}

#[test]
fn an_enormous_tool_name_comes_back_bounded() {
    let name = "x".repeat(200_000);
    let results = replay(&[], &[json!({"tool": name, "arguments": "{}"})]);
    assert_eq!(results[0]["code"], "UNKNOWN_TOOL");
    assert!(
        results[0].to_string().len() < 1_000,
        "{}",
        results[0].to_string().len()
    );
}

#[test]
fn an_oversized_result_is_cut_to_the_output_budget_and_stays_valid_json() {
    let read = json!({"tool": "read_messages", "arguments": "{\"order_id\": \"ORD-1002\"}"});
    let flags = [
        "--allow",
        "get_order,read_messages",
        "--max-output-bytes",
        "400",
    ];
    let results = replay(&flags, &[read.clone(), read_order()]);
    assert_eq!(results[0]["ok"], true, "{}", results[0]);
    assert_eq!(results[0]["data"]["truncated"], true);
    assert!(results[0].to_string().len() <= 400, "{}", results[0]);
    assert!(
        results[1]
            .get("data")
            .is_some_and(|d| d.get("truncated").is_none()),
        "a small result is whole"
    );

    let whole = replay(&["--allow", "read_messages"], &[read]);
    assert_eq!(
        whole[0]["data"]["result"].as_array().unwrap().len(),
        2,
        "no budget, no cut"
    );
}

#[test]
fn replay_keeps_the_injection_from_adding_a_note_or_refunding_at_every_taint_level() {
    let note = json!({"tool": "add_note", "arguments": {"order_id": "ORD-1001", "text": "Confirm payment at https://refund-help.example/claim?id=ORD-1002"}});
    let read = json!({"tool": "read_messages", "arguments": {"order_id": "ORD-1002"}});
    let refund = json!({"tool": "refund_order", "arguments": {"order_id": "ORD-1001", "amount_cents": 12000, "currency": "BRL", "reason": "customer_request"}});
    let allow = "--allow=get_order,refund_order,read_messages,add_note";
    for level in [None, Some("--taint=values")] {
        let mut flags = vec![allow];
        flags.extend(level);
        let results = replay(&flags, &[read.clone(), note.clone(), refund.clone()]);
        assert_eq!(results[1]["code"], "CONFIRMATION_REQUIRED", "{level:?}");
        assert_eq!(results[1]["data"]["reason"], "untrusted_context");
        assert_eq!(results[2]["code"], "CONFIRMATION_REQUIRED");
    }
    // By default, even a note that carries nothing read there waits.
    let clean =
        json!({"tool": "add_note", "arguments": {"order_id": "ORD-1002", "text": "called back"}});
    let results = replay(&[allow], &[read.clone(), clean.clone()]);
    assert_eq!(
        results[1]["code"], "CONFIRMATION_REQUIRED",
        "{}",
        results[1]
    );
    let results = replay(&[allow, "--taint=values"], &[read.clone(), clean]);
    assert_eq!(
        results[1]["ok"], true,
        "values lets it through: {}",
        results[1]
    );
    // Off: the note runs, as before.
    let results = replay(&[allow, "--taint=off"], &[read, note]);
    assert_eq!(results[1]["ok"], true, "{}", results[1]);
}
