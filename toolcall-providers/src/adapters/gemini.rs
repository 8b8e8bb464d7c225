//! Gemini: `functionCall` parts in, one user content of `functionResponse`
//! parts out.

use serde_json::{Map, Value, json};

use super::shape::{At, Ids};
use super::{AdapterError, CallArguments, Outcome, ProviderCall};

pub(super) fn calls(root: At<'_>) -> Result<Vec<ProviderCall>, AdapterError> {
    root.object()?;
    // A whole response, a candidate, or a content.
    let content = if let Some(candidates) = root.get("candidates")? {
        candidates.first()?.member("content")?
    } else if let Some(content) = root.get("content")? {
        content
    } else {
        root
    };
    content.object()?;
    content.role_if_any("model", "`model`")?;
    let mut ids = Ids::default();
    let mut calls = Vec::new();
    for part in content.member("parts")?.items()? {
        part.object()?;
        let Some(call) = part.get("functionCall")? else {
            continue;
        };
        call.object()?;
        let name = call.member("name")?.word()?;
        let id = match call.get("id")? {
            Some(id_at) => {
                let id = id_at.word()?;
                ids.check(&id_at, id)?;
                Some(id.to_owned())
            }
            None => None,
        };
        // No `args` means no arguments. Any other value goes to the
        // pipeline, which refuses one that is not an object as INVALID_JSON.
        let arguments = match call.get("args")? {
            Some(args) => args.arguments(),
            None => CallArguments::Parsed(Value::Object(Map::new())),
        };
        calls.push(ProviderCall {
            id,
            name: name.to_owned(),
            arguments,
        });
    }
    Ok(calls)
}

pub(super) fn reply(outcomes: &[Outcome]) -> Vec<Value> {
    let parts: Vec<Value> = outcomes
        .iter()
        .map(|outcome| {
            let result =
                serde_json::to_value(&outcome.result).expect("a ToolResult always serializes");
            let key = if outcome.result.ok { "output" } else { "error" };
            let mut response = Map::new();
            response.insert("name".into(), outcome.call.name().into());
            if let Some(id) = outcome.call.id() {
                response.insert("id".into(), id.into());
            }
            response.insert("response".into(), json!({ key: result }));
            json!({ "functionResponse": response })
        })
        .collect();
    vec![json!({"role": "user", "parts": parts})]
}
