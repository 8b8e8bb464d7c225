//! Whether the model may, must or must not call a tool: each API's
//! `tool_choice` field (Gemini's `toolConfig`).

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use crate::Format;

/// What a request lets the model do with the tools it is sent.
///
/// Written on a command line as `auto`, `required`, `none` or a tool's
/// name ([`FromStr`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model answers in words or calls tools, as it sees fit.
    #[default]
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call a tool (the tools are still described).
    None,
    /// The model must call this tool.
    Tool(String),
}

impl ToolChoice {
    /// The value of `format`'s field, `None` for a format without one
    /// (`neutral`, `mcp`): OpenAI Chat Completions' `tool_choice` (`"auto"`,
    /// `"required"`, `"none"`, `{"type": "function", "function": {"name"}}`),
    /// OpenAI Responses' (`{"type": "function", "name"}` for a tool),
    /// Anthropic's (`{"type": "auto" | "any" | "none"}`, `{"type": "tool",
    /// "name"}`), Gemini's `toolConfig` (`functionCallingConfig.mode`
    /// `AUTO`, `ANY`, `NONE`, or `ANY` with `allowedFunctionNames`).
    pub fn value(&self, format: Format) -> Option<Value> {
        match format {
            Format::OpenAi => Some(match self {
                ToolChoice::Tool(name) => {
                    json!({"type": "function", "function": {"name": name}})
                }
                other => json!(other.keyword()),
            }),
            Format::OpenAiResponses => Some(match self {
                ToolChoice::Tool(name) => json!({"type": "function", "name": name}),
                other => json!(other.keyword()),
            }),
            Format::Anthropic => Some(match self {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            }),
            Format::Gemini => Some(json!({"functionCallingConfig": match self {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::Required => json!({"mode": "ANY"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
            }})),
            Format::Neutral | Format::Mcp => None,
        }
    }

    /// The tool a request must call, when it names one.
    pub fn tool(&self) -> Option<&str> {
        match self {
            ToolChoice::Tool(name) => Some(name),
            _ => None,
        }
    }

    /// Whether the model must call a tool (`required`, or a tool's name).
    pub fn forces_a_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Tool(_))
    }

    fn keyword(&self) -> &str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::None => "none",
            ToolChoice::Tool(name) => name,
        }
    }
}

impl fmt::Display for ToolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())
    }
}

/// A tool choice written as nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmptyToolChoice;

impl fmt::Display for EmptyToolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool choice is auto, required, none or a tool's name")
    }
}

impl std::error::Error for EmptyToolChoice {}

impl FromStr for ToolChoice {
    type Err = EmptyToolChoice;

    /// `auto`, `required`, `none`, or a tool's name (any other text but
    /// the empty one).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text.trim() {
            "" => return Err(EmptyToolChoice),
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Tool(name.to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(choice: &str) -> Vec<Option<Value>> {
        let choice: ToolChoice = choice.parse().unwrap();
        Format::ALL.iter().map(|&f| choice.value(f)).collect()
    }

    #[test]
    fn each_choice_in_each_formats_field() {
        // neutral, openai, openai-responses, anthropic, gemini, mcp
        for (choice, anthropic, gemini) in [
            ("auto", "auto", "AUTO"),
            ("required", "any", "ANY"),
            ("none", "none", "NONE"),
        ] {
            assert_eq!(
                all(choice),
                vec![
                    None,
                    Some(json!(choice)),
                    Some(json!(choice)),
                    Some(json!({"type": anthropic})),
                    Some(json!({"functionCallingConfig": {"mode": gemini}})),
                    None,
                ],
                "{choice}"
            );
        }
        assert_eq!(
            all(" get_order "),
            vec![
                None,
                Some(json!({"type": "function", "function": {"name": "get_order"}})),
                Some(json!({"type": "function", "name": "get_order"})),
                Some(json!({"type": "tool", "name": "get_order"})),
                Some(json!({"functionCallingConfig": {
                    "mode": "ANY", "allowedFunctionNames": ["get_order"]}})),
                None,
            ]
        );
    }

    #[test]
    fn parsed_and_written_back() {
        for text in ["auto", "required", "none", "refund_order"] {
            let choice: ToolChoice = text.parse().unwrap();
            assert_eq!(choice.to_string(), text);
        }
        assert_eq!("".parse::<ToolChoice>(), Err(EmptyToolChoice));
        assert_eq!(" ".parse::<ToolChoice>(), Err(EmptyToolChoice));
        assert_eq!(ToolChoice::default(), ToolChoice::Auto);
        assert!(ToolChoice::Required.forces_a_call());
        assert!(ToolChoice::Tool("x".into()).forces_a_call());
        assert!(!ToolChoice::Auto.forces_a_call());
        assert!(!ToolChoice::None.forces_a_call());
        assert_eq!(ToolChoice::Tool("x".into()).tool(), Some("x"));
    }
}
