//! Model Context Protocol `tools/list`: the schema as it is, but for the
//! numeric bounds, and annotations from the tool's flags.

use serde_json::{Value, json};
use toolcall_core::ToolSpec;

use super::bounds::json_safe_bounds;

/// One tool as MCP's `tools/list` describes it: `{name, description,
/// inputSchema, annotations}`, the schema as it is but for the bounds
/// [`json_safe_bounds`] removes (MCP hosts hand `inputSchema` to their model's
/// API), the annotations derived from the tool's flags.
pub fn mcp_tool(spec: &ToolSpec) -> Value {
    mcp_tool_of(spec, &spec.parameters_schema())
}

/// [`mcp_tool`] as one caller sees it: each argument's caller limit as its
/// `maximum` ([`ToolSpec::parameters_schema_for`]).
pub fn mcp_tool_for(spec: &ToolSpec, policy: &toolcall_core::Policy) -> Value {
    mcp_tool_of(spec, &spec.parameters_schema_for(policy))
}

fn mcp_tool_of(spec: &ToolSpec, schema: &Value) -> Value {
    json!({
        "name": spec.name(),
        "description": spec.description(),
        "inputSchema": json_safe_bounds(schema),
        "annotations": {
            // A tool without side effects only reads.
            "readOnlyHint": !spec.side_effect(),
            // High risk is what a person must approve: treat it as destructive.
            "destructiveHint": spec.side_effect() && spec.high_risk(),
            // The pipeline replays an identical call instead of repeating it.
            "idempotentHint": true,
            // A side effect reaches a system outside the conversation.
            "openWorldHint": spec.side_effect(),
        },
    })
}
