//! OpenAI Chat Completions: `tool_calls` in, `role: "tool"` messages out.

use serde_json::{Value, json};

use super::shape::{At, Ids, text_replies};
use super::{AdapterError, Outcome, Problem, ProviderCall};

pub(super) fn calls(root: At<'_>) -> Result<Vec<ProviderCall>, AdapterError> {
    root.object()?;
    // A whole completion: the message is that of the first choice.
    let message = match root.get("choices")? {
        Some(choices) => choices.first()?.member("message")?,
        None => root,
    };
    message.object()?;
    message.role_if_any("assistant", "`assistant`")?;
    let Some(tool_calls) = message.get("tool_calls")? else {
        return Ok(Vec::new());
    };
    let mut ids = Ids::default();
    let mut calls = Vec::new();
    for entry in tool_calls.items()? {
        entry.object()?;
        if let Some(kind) = entry.get("type")? {
            let found = kind.string()?;
            if found != "function" {
                return Err(kind.error(Problem::Unsupported {
                    found: found.to_owned(),
                    expected: "`function` (the only kind of tool call this adapter answers)",
                }));
            }
        }
        calls.push(ids.raw_call(&entry.member("id")?, &entry.member("function")?)?);
    }
    Ok(calls)
}

pub(super) fn reply(outcomes: &[Outcome]) -> Vec<Value> {
    text_replies(
        outcomes,
        |id, text| json!({"role": "tool", "tool_call_id": id, "content": text}),
    )
}
