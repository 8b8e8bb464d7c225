//! What the contract tests do to a lock file.

use serde_json::Value;

/// The entry of the tool `name` in a lock file read as JSON, to change it
/// as an older build would have written it.
pub fn locked_tool<'a>(locked: &'a mut Value, name: &str) -> &'a mut Value {
    locked["tools"]
        .as_array_mut()
        .expect("a lock file lists its tools")
        .iter_mut()
        .find(|tool| tool["name"] == name)
        .expect("the tool is locked")
}
