//! The regression tape of a real model: the calls SmolLM2-135M-Instruct
//! sent through `orders agent` (scripts/real-model/run.sh) that the
//! pipeline rejected, as `report --rejected-calls` wrote them
//! (`real_model/rejected_calls.jsonl`; `run.sh --tape` adds the new ones).
//! Each is replayed on its own, in a fresh shop: the pipeline must still
//! refuse it, with a code and a message the model can act on, and run
//! nothing.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

const TAPE: &str = include_str!("real_model/rejected_calls.jsonl");

/// The codes of a refusal the model caused (not a failure of the tool or
/// the pipeline, not a wait for a person).
const MODEL_REFUSALS: [&str; 7] = [
    "INVALID_JSON",
    "INVALID_ARGUMENTS",
    "UNKNOWN_TOOL",
    "TOOL_NOT_ALLOWED",
    "ORDER_NOT_FOUND",
    "AMOUNT_EXCEEDS_REFUNDABLE",
    "CURRENCY_MISMATCH",
];

fn replay(line: &str) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_orders"))
        .args([
            "replay",
            "-",
            "--allow",
            "get_order,refund_order,read_messages,add_note",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the orders binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{line}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answers: Vec<&str> = stdout.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(answers.len(), 1, "one answer for {line}: {stdout}");
    serde_json::from_str(answers[0]).unwrap()
}

#[test]
fn every_call_the_real_model_sent_is_still_refused() {
    let lines: Vec<&str> = TAPE.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "the tape has calls");
    for line in lines {
        let call: Value = serde_json::from_str(line).expect("a replay line");
        assert!(call["tool"].is_string(), "{line}");
        let answer = replay(line);
        assert_eq!(answer["ok"], false, "{line}\n-> {answer}");
        let code = answer["code"].as_str().unwrap_or_default();
        assert!(
            MODEL_REFUSALS.contains(&code),
            "a refusal the model caused, not {code}: {line}\n-> {answer}"
        );
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "the model is told why: {answer}");
        assert!(
            answer
                .get("data")
                .is_none_or(|d| d.get("refund_id").is_none()),
            "{answer}"
        );
    }
}
