//! What the tests check of an answer the model reads: its code, and the
//! words of its message the model acts on.

use std::fmt;

use toolcall::{Code, ToolResult};

/// `answer` has `code`, and its message says `part` somewhere.
#[track_caller]
pub fn assert_code_says(answer: &ToolResult, code: Code, part: &str) {
    let says = answer.message.contains(part);
    assert_code_and(answer, code, says, format_args!("{part:?} not in"));
}

/// `answer` has `code`, and its message begins with `start`.
#[track_caller]
pub fn assert_code_opens(answer: &ToolResult, code: Code, start: &str) {
    let opens = answer.message.starts_with(start);
    assert_code_and(answer, code, opens, format_args!("{start:?} does not open"));
}

#[track_caller]
fn assert_code_and(answer: &ToolResult, code: Code, holds: bool, otherwise: fmt::Arguments<'_>) {
    assert_eq!(answer.code, code, "{answer:?}");
    assert!(holds, "{otherwise} {}", answer.message);
}

/// `dry` answers a dry run of a high-risk call that asked nobody: it says
/// a person would be asked, for the risk, about `preview`.
#[track_caller]
pub fn assert_would_ask_a_person(dry: &ToolResult, preview: &str) {
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert!(dry.ok);
    assert_eq!(dry.data["would"], "ask_a_person");
    assert_eq!(dry.data["reason"], "high_risk");
    assert_eq!(dry.data["preview"], preview);
    assert_eq!(dry.question_id, None);
}
