//! Anthropic Messages: `tool_use` blocks in, one user message of
//! `tool_result` blocks out.

use serde_json::{Value, json};

use super::shape::{At, Ids};
use super::{AdapterError, Outcome, ProviderCall};

pub(super) fn calls(root: At<'_>) -> Result<Vec<ProviderCall>, AdapterError> {
    root.object()?;
    root.role_if_any("assistant", "`assistant`")?;
    let content = root.member("content")?;
    // A plain string is text only: no tool calls.
    if content.value().is_string() {
        return Ok(Vec::new());
    }
    let mut ids = Ids::default();
    let mut calls = Vec::new();
    for block in content.items()? {
        block.object()?;
        if block.member("type")?.string()? != "tool_use" {
            continue;
        }
        let id_at = block.member("id")?;
        let id = id_at.word()?;
        ids.check(&id_at, id)?;
        let name = block.member("name")?.word()?;
        // Any value: one that is not an object is the pipeline's INVALID_JSON.
        let input = block.member("input")?;
        calls.push(ProviderCall {
            id: Some(id.to_owned()),
            name: name.to_owned(),
            arguments: input.arguments(),
        });
    }
    Ok(calls)
}

pub(super) fn reply(outcomes: &[Outcome]) -> Vec<Value> {
    let results: Vec<Value> = outcomes
        .iter()
        .map(|outcome| {
            json!({
                "type": "tool_result",
                "tool_use_id": outcome.call.id().unwrap_or_default(),
                "content": outcome.result.to_model_text(),
                "is_error": !outcome.result.ok,
            })
        })
        .collect();
    vec![json!({"role": "user", "content": results})]
}
