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
    json!({
        "name": spec.name(),
        "description": spec.description(),
        "inputSchema": json_safe_bounds(&spec.parameters_schema()),
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
