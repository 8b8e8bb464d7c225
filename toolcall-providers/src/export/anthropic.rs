//! Anthropic Messages: the schema as it is, but for the numeric bounds.

use serde_json::{Value, json};
use toolcall_core::ToolSpec;

use super::bounds::json_safe_bounds;

/// One tool as Anthropic's Messages API takes it: `{name, description,
/// input_schema}`, the schema as it is but for the bounds
/// [`json_safe_bounds`] removes.
pub fn anthropic_tool(spec: &ToolSpec) -> Value {
    anthropic_tool_of(spec, &spec.parameters_schema())
}

/// [`anthropic_tool`] with the schema one caller sees.
pub(crate) fn anthropic_tool_of(spec: &ToolSpec, schema: &Value) -> Value {
    json!({
        "name": spec.name(),
        "description": spec.description(),
        "input_schema": json_safe_bounds(schema),
    })
}
