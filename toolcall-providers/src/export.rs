//! Tool definitions in each provider's format.
//!
//! [`definitions`] returns the exact value of the `tools` field of a request
//! to each API, for the tools a [`Policy`] allows, in registration order:
//!
//! | format | value |
//! |---|---|
//! | `neutral` | `[{name, description, parameters}]`, as [`Registry::definitions`] |
//! | `openai` | `[{type: "function", function: {name, description, parameters, strict}}]` (Chat Completions) |
//! | `openai-responses` | `[{type: "function", name, description, parameters, strict}]` (Responses) |
//! | `anthropic` | `[{name, description, input_schema}]` (Messages) |
//! | `gemini` | `[{functionDeclarations: [{name, description, parameters or parametersJsonSchema}, ...]}]` |
//! | `mcp` | one [`mcp_tool`] per tool, as `tools/list` lists them |
//!
//! The neutral format carries the parameters schema unchanged: it is exactly
//! what the validator enforces. Anthropic's `input_schema` and MCP's
//! `inputSchema` take JSON Schema as it is, so they carry it with one
//! change, the one every provider format makes (see [Numeric
//! bounds](#numeric-bounds-every-provider-format)): a `minimum`, `maximum`,
//! `exclusiveMinimum` or `exclusiveMaximum` beyond ±(2^53 − 1) is removed.
//! OpenAI's strict mode and Gemini's `parameters` accept only a subset, so
//! for them the schema is rewritten by [`openai_strict_schema`] and
//! [`gemini_schema`]. The one rule of every rewrite: **it never makes a value
//! the validator accepts invalid, and never hides a constraint from the
//! model.** A constraint the provider cannot express is removed from the
//! schema and written into the description of the schema that carried it
//! (`Must have at most 200 characters.`), so the model is still told; the
//! provider then accepts more than the validator does, and the validator
//! answers the difference with `INVALID_ARGUMENTS`, naming the field.
//!
//! # Numeric bounds (every provider format)
//!
//! schemars writes each Rust integer type's full range into the schema:
//! `i64` gets `minimum: -9223372036854775808` and `maximum:
//! 9223372036854775807`, `u64` (and `u128`, as the validator reads it)
//! `maximum: 18446744073709551615`. Providers refuse such numbers: OpenAI
//! with "a numeric value in the function parameters is too large", Anthropic
//! with "input_schema: int too big to convert" (MCP hosts hand `inputSchema`
//! to such APIs). So every format but `neutral` passes the schema through
//! [`json_safe_bounds`]: a bound whose magnitude exceeds
//! [`MAX_SAFE_INTEGER`] (2^53 − 1 = 9007199254740991) is removed, never
//! clamped (a tighter bound would refuse values the validator accepts).
//! The natural range of a 64-bit type (`i64::MIN`, `i64::MAX`, `u64::MAX`)
//! goes without a word, as its `format` (`int64`, `uint64`) says it where
//! the format is kept; any other bound removed is a bound the tool declared,
//! and is stated in the description (`Must be at most
//! 10000000000000000000.`). The validator still enforces every bound.
//!
//! # Shared clean-up (OpenAI and Gemini)
//!
//! * An enum of unit variants, which schemars writes as a `oneOf` of
//!   `const` branches (each with its variant's doc comment), becomes one
//!   `enum` of the values. The variants' docs move into the description:
//!   `Must match the order currency. BRL: Brazilian real. USD: United States dollar.`
//!   A `oneOf` of distinct constants and an `enum` of them accept the same values.
//! * `anyOf: [X, {type: "null"}]` (an `Option` of such an enum, say) becomes
//!   X with `null` added to its `type` (and to its `enum`); the field's own
//!   description wins over the type's doc comment.
//!
//! # OpenAI strict mode ([`openai_strict_schema`])
//!
//! Rules from OpenAI's Structured Outputs guide ("Supported schemas"), which
//! function calling with `strict: true` follows:
//!
//! * Every object gets `additionalProperties: false` and lists every
//!   property in `required`. A property that was optional becomes nullable
//!   (`type: [T, "null"]`, `null` added to an `enum`, a `{type: "null"}`
//!   branch added to an `anyOf`). This is faithful: the validator reads an
//!   argument sent as `null` exactly as an absent one, and a nested
//!   `Option` field reads `null` and absence alike too. A nested optional
//!   member that is not nullable (a `#[serde(default)]` field) has no
//!   faithful strict form: see below.
//! * Kept keywords: `type`, `description`, `enum`, `properties`, `required`,
//!   `additionalProperties`, `items`, `anyOf`, `$ref`, `$defs`, `pattern`,
//!   `format`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
//!   `multipleOf`, `minItems`, `maxItems`.
//! * `const: v` becomes `enum: [v]`.
//! * Nothing stands beside a `$ref` (OpenAI refuses "$ref cannot have
//!   keywords {'description'}"). A reference with a description (a
//!   documented field of a type in `$defs`, such as a recursive one) is
//!   replaced by the definition inlined, with the field's description, as
//!   OpenAI's own SDKs do; inside the definition it names, where inlining
//!   would not end, the field's description is dropped and the definition
//!   keeps its own. Annotations beside a `$ref` are dropped; a constraint
//!   beside it has no strict form. References into `definitions` are
//!   written into `$defs` (`definitions` is not a strict-mode keyword).
//! * `format` is kept on strings when it is one of OpenAI's list
//!   ([`OPENAI_STRING_FORMATS`]: `date-time`, `time`, `date`, `duration`,
//!   `email`, `hostname`, `ipv4`, `ipv6`, `uuid`). Another string format
//!   (`uri`) is moved into the description. The formats schemars puts on
//!   numbers (`int32`, `uint8`, `double`, ...) are dropped silently: the
//!   integer ranges they name are already stated by `minimum` and `maximum`.
//! * `minLength`, `maxLength`, `uniqueItems`, `minProperties`,
//!   `maxProperties`, `minContains`, `maxContains` are not in the supported
//!   list: moved into the description.
//! * Annotations (`title`, `default`, `examples`, `deprecated`, `readOnly`,
//!   `writeOnly`, `$comment`, `$schema`, `$id`, `contentEncoding`,
//!   `contentMediaType`) and unknown keywords, which constrain nothing, are dropped.
//!
//! Some schemas have no faithful strict form: a map (an object whose member
//! names are not known in advance), a value of any type, an applicator
//! strict mode forbids (`allOf`, a `oneOf` that is not an enum, `not`,
//! `if`/`then`/`else`, `patternProperties`, `prefixItems`, ...), a nested
//! optional member that cannot be `null`, or a schema over OpenAI's size
//! limits ([`OPENAI_MAX_DEPTH`] levels of nested objects,
//! [`OPENAI_MAX_PROPERTIES`] properties). For these [`openai_strict_schema`]
//! returns [`NotStrict`], and [`definitions`] exports that one tool with
//! `strict: false` and its schema as it is but for the numeric bounds
//! every provider format removes (without strict mode OpenAI accepts JSON
//! Schema as it is). Strict mode is a promise about what the
//! model sends; it is only made when it can be kept.
//!
//! # Gemini ([`gemini_schema`], [`gemini_json_schema`])
//!
//! A function declaration can carry its parameters in `parameters` (a
//! `Schema`, Google's select subset of the OpenAPI 3.0 schema object) or in
//! `parametersJsonSchema` (JSON Schema, mutually exclusive with
//! `parameters`). This module prefers **`parameters`**: it is the field
//! every Gemini endpoint (the Gemini API and Vertex AI, `v1` and `v1beta`)
//! and every model accepts, and its `Schema` message documents each field
//! it has, so the output can be checked to stay inside it, keyword by
//! keyword, and whatever falls outside is said in a description instead of
//! being silently ignored by the server.
//!
//! Some schemas have no complete `Schema` form, and Gemini refuses the
//! incomplete one: an `OBJECT` without properties (a map, an empty struct, a
//! recursion cut: "properties: should be non-empty for OBJECT type"), an
//! `ARRAY` without items (`Vec<serde_json::Value>`, a tuple: "items: missing
//! field"), a schema without `type` (a `serde_json::Value`, a `true`
//! schema: "schema didn't specify the schema type field"), an `anyOf`
//! (Vertex AI wants it alone in its node, without the description and
//! `nullable` the rewrite puts beside it). A tool whose [`gemini_schema`] has
//! one of these ([`gemini_schema_is_complete`] is false) is declared with
//! **`parametersJsonSchema`** instead, holding [`gemini_json_schema`]: the
//! tool's JSON Schema as it is, `$defs` and `$ref` included, with the
//! numeric bounds of every provider format removed and nothing beside a
//! `$ref` but `description` and `default` (Gemini refuses "$ref ... set
//! alongside unsupported fields"): annotations there are dropped,
//! constraints moved into the description.
//!
//! The rewrite into `Schema`:
//!
//! * `type` is the `Type` enum in capitals (`STRING`, `INTEGER`, `NUMBER`,
//!   `BOOLEAN`, `ARRAY`, `OBJECT`); `type: [T, "null"]` becomes `type: T,
//!   nullable: true`; a `{type: "null"}` branch of an `anyOf` becomes
//!   `nullable: true` on the `anyOf`.
//! * A string enum becomes `{type: STRING, format: "enum", enum: [...]}`
//!   (`null` moves to `nullable`); an enum of other values is moved into the
//!   description, since `Schema.enum` holds strings.
//! * `format` is kept only as `enum` and `date-time` on strings, the two the
//!   Gemini Developer API takes ("must be either 'enum' or 'date-time',
//!   otherwise requests will fail"). Other string formats (`email`, `uuid`,
//!   `date`, `uri`) are moved into the description; numeric formats
//!   (`int32`, `int64`, `double`, `uint8`, ...) are dropped, their ranges
//!   being in `minimum` and `maximum`.
//! * Kept: `description`, `title`, `nullable`, `enum`, `properties`,
//!   `required`, `items`, `minItems`, `maxItems`, `minLength`, `maxLength`,
//!   `pattern`, `minimum`, `maximum`, `minProperties`, `maxProperties`,
//!   `anyOf`, `default`. Each object gets `propertyOrdering`, its properties
//!   in the schema's order: declaration order when the application's
//!   `serde_json` keeps insertion order (its `preserve_order` feature, which
//!   this crate does not turn on for you), alphabetical otherwise.
//! * `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `uniqueItems`,
//!   `allOf`, `not`, and the rest of JSON Schema's assertions are moved into
//!   the description; `oneOf` becomes `anyOf` and the description says that
//!   exactly one alternative must match.
//! * `additionalProperties: false` is dropped: `Schema` cannot say an object
//!   is closed (the validator still refuses unknown members, naming them).
//!   A map's value schema (`additionalProperties: {...}`) is moved into the
//!   description, as the JSON of its Gemini form.
//! * `$ref` to `$defs` is inlined (`Schema` has no references), the field's
//!   description replacing the type's; a recursive reference is cut, its
//!   description (the field's, if it has one) followed by a note naming the
//!   type it repeats. The cut is an `OBJECT` without properties, so a
//!   recursive tool is declared with `parametersJsonSchema`.
//! * A tool without arguments has no `parameters`: Gemini refuses an
//!   `OBJECT` without properties there.

mod anthropic;
mod bounds;
mod cleanup;
mod gemini;
mod mcp;
mod openai;
mod words;

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};
use toolcall_core::schema;
use toolcall_core::{Policy, Registry};

pub use anthropic::anthropic_tool;
pub use bounds::{MAX_SAFE_INTEGER, json_safe_bounds};
pub use gemini::{
    GEMINI_FORMATS, GEMINI_SCHEMA_KEYWORDS, gemini_declaration, gemini_json_schema, gemini_schema,
    gemini_schema_is_complete,
};
pub use mcp::{mcp_tool, mcp_tool_for};
pub use openai::{
    NotStrict, OPENAI_MAX_DEPTH, OPENAI_MAX_PROPERTIES, OPENAI_STRICT_KEYWORDS,
    OPENAI_STRING_FORMATS, openai_chat_tool, openai_responses_tool, openai_strict_schema,
};

/// A provider's tool-definition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// `[{name, description, parameters}]`.
    Neutral,
    /// OpenAI Chat Completions.
    OpenAi,
    /// OpenAI Responses.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini.
    Gemini,
    /// Model Context Protocol `tools/list`.
    Mcp,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 6] = [
        Format::Neutral,
        Format::OpenAi,
        Format::OpenAiResponses,
        Format::Anthropic,
        Format::Gemini,
        Format::Mcp,
    ];

    /// The name on the command line: `neutral`, `openai`, `openai-responses`,
    /// `anthropic`, `gemini`, `mcp`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Neutral => "neutral",
            Format::OpenAi => "openai",
            Format::OpenAiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Gemini => "gemini",
            Format::Mcp => "mcp",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A format name that is not one of [`Format::ALL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown format `{}`; expected one of ", self.0)?;
        for (i, format) in Format::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(format.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|format| format.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_owned()))
    }
}

/// The value of the provider's `tools` field for the tools `policy` allows,
/// in registration order.
///
/// Gemini's value is one `Tool` holding every declaration,
/// `[{"functionDeclarations": [...]}]`, or `[]` when no tool is allowed (a
/// `Tool` without declarations declares nothing). See the
/// [module documentation](self) for how each format rewrites the schema.
pub fn definitions(registry: &Registry, policy: &Policy, format: Format) -> Value {
    let specs = registry.iter().filter(|spec| policy.allows(spec.name()));
    let tools: Vec<Value> = match format {
        Format::Neutral => registry.definitions(policy),
        Format::OpenAi => specs
            .map(|spec| openai::openai_chat_tool_of(spec, spec.parameters_schema_for(policy)))
            .collect(),
        Format::OpenAiResponses => specs
            .map(|spec| openai::openai_responses_tool_of(spec, spec.parameters_schema_for(policy)))
            .collect(),
        Format::Anthropic => specs
            .map(|spec| anthropic::anthropic_tool_of(spec, &spec.parameters_schema_for(policy)))
            .collect(),
        Format::Gemini => {
            let declarations: Vec<Value> = specs
                .map(|spec| gemini::gemini_declaration_of(spec, spec.parameters_schema_for(policy)))
                .collect();
            if declarations.is_empty() {
                Vec::new()
            } else {
                vec![json!({ "functionDeclarations": declarations })]
            }
        }
        Format::Mcp => specs.map(|spec| mcp_tool_for(spec, policy)).collect(),
    };
    Value::Array(tools)
}

/// Whether `schema`'s `type` is or includes `ty`.
/// Removes `key` from `map`, keeping the order of the others whether or
/// not the application's `serde_json` keeps insertion order (with
/// `preserve_order`, `Map::remove` would move the last member into the gap).
pub(super) fn take(map: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let value = map.get(key).cloned()?;
    map.retain(|name, _| name != key);
    Some(value)
}

fn is_type(schema: &Value, ty: &str) -> bool {
    schema
        .as_object()
        .is_some_and(|map| schema::has_type(map, ty))
}

/// Whether a rewrite into a provider's subset meets a keyword it has no
/// form for: an applicator it does not handle itself (every rewrite
/// handles its own few first), `dependentRequired` or `$dynamicRef`.
fn beyond_subset(keyword: &str) -> bool {
    schema::applicator(keyword).is_some() || matches!(keyword, "dependentRequired" | "$dynamicRef")
}
