//! OpenAI Responses: `function_call` items in, `function_call_output` items out.

use serde_json::{Value, json};

use super::shape::{At, Ids, kind, text_replies};
use super::{AdapterError, Outcome, Problem, Provider, ProviderCall};

pub(super) fn calls(root: At<'_>) -> Result<Vec<ProviderCall>, AdapterError> {
    let message = root.value();
    let items = match message {
        Value::Array(_) => root.items()?,
        Value::Object(object) if object.contains_key("output") => root.member("output")?.items()?,
        Value::Object(object) if object.contains_key("type") => vec![root],
        // Neither a response nor an item: name what a response has.
        Value::Object(_) => {
            return Err(AdapterError::new(
                Provider::OpenAiResponses,
                "output",
                Problem::Missing,
            ));
        }
        _ => {
            return Err(root.error(Problem::WrongType {
                expected: "a response, an array of output items or one item",
                found: kind(message),
            }));
        }
    };
    let mut ids = Ids::default();
    let mut calls = Vec::new();
    for item in items {
        item.object()?;
        let kind_at = item.member("type")?;
        match kind_at.string()? {
            "function_call" => {}
            // Calls the client must answer with an output item this adapter
            // cannot write (`custom_tool_call_output`,
            // `computer_call_output`, ...): without one, the next request is
            // refused, so say so now (as Chat Completions does).
            kind @ ("custom_tool_call"
            | "computer_call"
            | "local_shell_call"
            | "shell_call"
            | "apply_patch_call"
            | "mcp_approval_request") => {
                return Err(kind_at.error(Problem::Unsupported {
                    found: kind.to_owned(),
                    expected: "`function_call` (the only kind of client-side tool call this adapter answers)",
                }));
            }
            // Reasoning, messages, tools the server ran (web search, file
            // search, code interpreter, remote MCP calls).
            _ => continue,
        }
        calls.push(ids.raw_call(&item.member("call_id")?, &item)?);
    }
    Ok(calls)
}

pub(super) fn reply(outcomes: &[Outcome]) -> Vec<Value> {
    text_replies(
        outcomes,
        |id, text| json!({"type": "function_call_output", "call_id": id, "output": text}),
    )
}
