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
//!   in declaration order.
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

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value, json};
use toolcall_core::{Policy, Registry, ToolSpec};

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
        Format::OpenAi => specs.map(openai_chat_tool).collect(),
        Format::OpenAiResponses => specs.map(openai_responses_tool).collect(),
        Format::Anthropic => specs.map(anthropic_tool).collect(),
        Format::Gemini => {
            let declarations: Vec<Value> = specs.map(gemini_declaration).collect();
            if declarations.is_empty() {
                Vec::new()
            } else {
                vec![json!({ "functionDeclarations": declarations })]
            }
        }
        Format::Mcp => specs.map(mcp_tool).collect(),
    };
    Value::Array(tools)
}

/// The parameters and `strict` flag OpenAI gets for a tool: the strict form
/// when there is one, otherwise the schema with `strict: false`, only its
/// out-of-range bounds removed ([`json_safe_bounds`]).
fn openai_parameters(spec: &ToolSpec) -> (Value, bool) {
    let schema = spec.parameters_schema();
    match openai_strict_schema(&schema) {
        Ok(strict) => (strict, true),
        Err(_) => (json_safe_bounds(&schema), false),
    }
}

/// One tool as OpenAI Chat Completions takes it: `{type: "function",
/// function: {name, description, parameters, strict}}`, with `strict: true`
/// and the schema of [`openai_strict_schema`] unless that schema has no
/// strict form (then `strict: false` and the schema as it is, but for the
/// bounds [`json_safe_bounds`] removes).
pub fn openai_chat_tool(spec: &ToolSpec) -> Value {
    let (parameters, strict) = openai_parameters(spec);
    json!({
        "type": "function",
        "function": {
            "name": spec.name(),
            "description": spec.description(),
            "parameters": parameters,
            "strict": strict,
        },
    })
}

/// One tool as the OpenAI Responses API takes it: `{type: "function", name,
/// description, parameters, strict}`, the parameters and flag as in
/// [`openai_chat_tool`].
pub fn openai_responses_tool(spec: &ToolSpec) -> Value {
    let (parameters, strict) = openai_parameters(spec);
    json!({
        "type": "function",
        "name": spec.name(),
        "description": spec.description(),
        "parameters": parameters,
        "strict": strict,
    })
}

/// One tool as Anthropic's Messages API takes it: `{name, description,
/// input_schema}`, the schema as it is but for the bounds
/// [`json_safe_bounds`] removes.
pub fn anthropic_tool(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name(),
        "description": spec.description(),
        "input_schema": json_safe_bounds(&spec.parameters_schema()),
    })
}

/// One Gemini `FunctionDeclaration`: `{name, description, parameters}`, the
/// parameters rewritten by [`gemini_schema`], and left out for a tool
/// without arguments. When that rewrite is not a complete `Schema` (a node
/// without `type`, an `anyOf`, an `OBJECT` without properties, an `ARRAY`
/// without items), the declaration is `{name, description,
/// parametersJsonSchema}` instead, with the schema of [`gemini_json_schema`].
pub fn gemini_declaration(spec: &ToolSpec) -> Value {
    let schema = spec.parameters_schema();
    let parameters = gemini_schema(&schema);
    let mut declaration = Map::new();
    declaration.insert("name".into(), spec.name().into());
    declaration.insert("description".into(), spec.description().into());
    let has_properties = parameters
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| !properties.is_empty());
    if !has_properties {
        // No arguments: Gemini refuses an `OBJECT` without properties.
    } else if gemini_schema_is_complete(&parameters) {
        declaration.insert("parameters".into(), parameters);
    } else {
        declaration.insert("parametersJsonSchema".into(), gemini_json_schema(&schema));
    }
    Value::Object(declaration)
}

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

// ------------------------------------------------------------ OpenAI strict

/// The string formats OpenAI's strict mode supports.
pub const OPENAI_STRING_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// The keywords a schema in OpenAI's strict mode may use.
pub const OPENAI_STRICT_KEYWORDS: [&str; 19] = [
    "type",
    "description",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// The most levels of nested objects OpenAI's strict mode accepts.
pub const OPENAI_MAX_DEPTH: usize = 10;

/// The most object properties, in all, OpenAI's strict mode accepts.
pub const OPENAI_MAX_PROPERTIES: usize = 5000;

/// Why a schema has no faithful form in OpenAI's strict mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotStrict {
    /// Where, as a JSON pointer into the original schema (`/` for the root).
    pub path: String,
    /// What strict mode cannot express there.
    pub reason: String,
}

impl fmt::Display for NotStrict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no strict-mode form at `{}`: {}",
            if self.path.is_empty() {
                "/"
            } else {
                &self.path
            },
            self.reason
        )
    }
}

impl std::error::Error for NotStrict {}

/// Keywords that only annotate: dropped where a provider does not take them.
const ANNOTATIONS: [&str; 12] = [
    "title",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$schema",
    "$id",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords that combine or select subschemas; strict mode has none of them.
const APPLICATORS: [&str; 17] = [
    "allOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "patternProperties",
    "propertyNames",
    "prefixItems",
    "contains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "additionalItems",
];

/// `schema` in OpenAI's strict-mode subset, accepting no value the original
/// rejects except where a constraint moved into a description (see the
/// [module documentation](self) for every rule), or why it cannot be.
pub fn openai_strict_schema(schema: &Value) -> Result<Value, NotStrict> {
    let mut schema = simplify_node(&json_safe_bounds(schema));
    // The definitions as `simplify` leaves them, their value docs not yet
    // rendered: a reference inlined with the field's description renders
    // them after that description.
    let defs = definitions_of(&schema);
    render_value_docs(&mut schema);
    let mut strict = Strict {
        properties: 0,
        path: String::new(),
        defs,
        expanding: Vec::new(),
    };
    let out = strict.node(&schema, 0, true)?;
    if !is_type(&out, "object") || out.get("anyOf").is_some() {
        return Err(strict.fail("the root must be an object"));
    }
    Ok(out)
}

struct Strict {
    properties: usize,
    path: String,
    /// The root's definitions, by the reference that names them
    /// (`#/$defs/Name`, `#/definitions/Name`).
    defs: Map<String, Value>,
    /// The definitions being inlined, innermost last.
    expanding: Vec<String>,
}

impl Strict {
    fn fail(&self, reason: impl Into<String>) -> NotStrict {
        NotStrict {
            path: if self.path.is_empty() {
                "/".to_owned()
            } else {
                self.path.clone()
            },
            reason: reason.into(),
        }
    }

    /// Runs `f` with `segments` pushed onto the path.
    fn at<T>(&mut self, segments: &[&str], f: impl FnOnce(&mut Self) -> T) -> T {
        let len = self.path.len();
        for segment in segments {
            self.path.push('/');
            self.path
                .push_str(&segment.replace('~', "~0").replace('/', "~1"));
        }
        let out = f(self);
        self.path.truncate(len);
        out
    }

    /// One schema; `depth` counts the objects around it, `root` is the
    /// parameters object itself.
    fn node(&mut self, schema: &Value, depth: usize, root: bool) -> Result<Value, NotStrict> {
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(_) => return Err(self.fail("a boolean schema has no strict form")),
            _ => return Err(self.fail("not a schema")),
        };
        if let Some(reference) = map.get("$ref") {
            return self.reference(map, reference, depth, root);
        }
        let mut out = Map::new();
        let mut notes = Vec::new();
        let mut defs_out = Map::new();
        let object = is_type(schema, "object") || map.contains_key("properties");
        for (keyword, value) in map {
            let keyword = keyword.as_str();
            match keyword {
                "type" | "enum" | "pattern" | "minimum" | "maximum" | "exclusiveMinimum"
                | "exclusiveMaximum" | "multipleOf" | "minItems" | "maxItems" => {
                    out.insert(keyword.into(), value.clone());
                }
                "description" => {}
                "const" => {
                    out.insert("enum".into(), Value::Array(vec![value.clone()]));
                }
                "format" => {
                    let name = value.as_str().unwrap_or_default();
                    if is_type(schema, "string") {
                        if OPENAI_STRING_FORMATS.contains(&name) {
                            out.insert(keyword.into(), value.clone());
                        } else {
                            notes.push(moved_sentence(keyword, value));
                        }
                    }
                    // A number's format names its Rust type, whose range
                    // `minimum` and `maximum` already state.
                }
                "minLength" | "maxLength" | "uniqueItems" | "minProperties" | "maxProperties"
                | "minContains" | "maxContains" => notes.push(moved_sentence(keyword, value)),
                "items" => {
                    let items = self.at(&["items"], |s| s.node(value, depth, false))?;
                    out.insert(keyword.into(), items);
                }
                "anyOf" => {
                    let Value::Array(branches) = value else {
                        return Err(self.fail("anyOf is not an array"));
                    };
                    let mut converted = Vec::with_capacity(branches.len());
                    for (i, branch) in branches.iter().enumerate() {
                        converted.push(
                            self.at(&["anyOf", &i.to_string()], |s| s.node(branch, depth, false))?,
                        );
                    }
                    out.insert(keyword.into(), Value::Array(converted));
                }
                "$defs" | "definitions" => {
                    let Value::Object(defs) = value else {
                        return Err(self.fail("$defs is not an object"));
                    };
                    for (name, def) in defs {
                        let expanding = std::mem::replace(&mut self.expanding, vec![name.clone()]);
                        let def = self.at(&[keyword, name], |s| s.node(def, 0, false));
                        self.expanding = expanding;
                        // `definitions` is not a strict-mode keyword: its
                        // members join `$defs`, and references to them are
                        // written `#/$defs/Name`.
                        if defs_out.insert(name.clone(), def?).is_some() {
                            return Err(self.at(&[keyword, name], |s| {
                                s.fail("a name in both `$defs` and `definitions`")
                            }));
                        }
                    }
                }
                "properties" | "required" | "additionalProperties" => {}
                _ if APPLICATORS.contains(&keyword) => {
                    return Err(self.at(&[keyword], |s| {
                        s.fail(format!("strict mode does not support `{keyword}`"))
                    }));
                }
                // Annotations and unknown keywords constrain nothing.
                _ => {}
            }
        }
        if !defs_out.is_empty() {
            out.insert("$defs".into(), Value::Object(defs_out));
        }
        if object {
            self.object(map, &mut out, depth + 1, root)?;
        }
        let has_shape = ["type", "enum", "anyOf", "$ref"]
            .iter()
            .any(|k| out.contains_key(*k));
        if !has_shape {
            return Err(self.fail("a value of any type has no strict form"));
        }
        let description = describe(map.get("description"), &notes);
        if let Some(description) = description {
            out.insert("description".into(), description.into());
        }
        Ok(Value::Object(out))
    }

    /// A `$ref`. Strict mode allows no keyword beside it, so a reference
    /// with a description becomes the definition inlined, with that
    /// description (as OpenAI's own SDKs do); inside the definition it
    /// names, where inlining would not end, the description is dropped
    /// (the definition keeps its own).
    fn reference(
        &mut self,
        map: &Map<String, Value>,
        reference: &Value,
        depth: usize,
        root: bool,
    ) -> Result<Value, NotStrict> {
        let Some(reference) = reference.as_str() else {
            return Err(self.fail("$ref is not a string"));
        };
        let Some(def) = self.defs.get(reference).cloned() else {
            return Err(self.at(&["$ref"], |s| {
                s.fail(format!("`{reference}` names no definition of the root"))
            }));
        };
        if let Some(keyword) = map.keys().find(|k| {
            !matches!(k.as_str(), "$ref" | "description") && !ANNOTATIONS.contains(&k.as_str())
        }) {
            return Err(self.at(&[keyword], |s| {
                s.fail(format!("`{keyword}` beside `$ref` has no strict form"))
            }));
        }
        let name = def_name(reference).to_owned();
        match map.get("description") {
            Some(description) if !self.expanding.contains(&name) => {
                let mut def = def;
                if let Value::Object(def) = &mut def {
                    def.insert("description".into(), description.clone());
                }
                render_value_docs(&mut def);
                self.expanding.push(name);
                let out = self.node(&def, depth, root);
                self.expanding.pop();
                out
            }
            _ => Ok(json!({ "$ref": format!("#/$defs/{name}") })),
        }
    }

    fn object(
        &mut self,
        map: &Map<String, Value>,
        out: &mut Map<String, Value>,
        depth: usize,
        root: bool,
    ) -> Result<(), NotStrict> {
        if depth > OPENAI_MAX_DEPTH {
            return Err(self.fail(format!(
                "objects nested deeper than {OPENAI_MAX_DEPTH} levels"
            )));
        }
        match map.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            Some(Value::Object(_)) if !map.contains_key("properties") => {
                return Err(self
                    .fail("a map (member names not known in advance) cannot be a closed object"));
            }
            _ => return Err(self.fail("an open object cannot be a closed object")),
        }
        let empty = Map::new();
        let properties = match map.get("properties") {
            Some(Value::Object(properties)) => properties,
            None => &empty,
            Some(_) => return Err(self.fail("properties is not an object")),
        };
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        self.properties += properties.len();
        if self.properties > OPENAI_MAX_PROPERTIES {
            return Err(self.fail(format!(
                "more than {OPENAI_MAX_PROPERTIES} object properties"
            )));
        }
        let mut converted = Map::new();
        for (name, property) in properties {
            let schema = self.at(&["properties", name], |s| s.node(property, depth, false))?;
            let schema = if required.contains(&name.as_str()) || accepts_null(&schema) {
                schema
            } else if root {
                // An argument sent as `null` is read as absent.
                nullable(schema)
            } else {
                return Err(self.at(&["properties", name], |s| {
                    s.fail("an optional member that cannot be null (a default) has no strict form")
                }));
            };
            converted.insert(name.clone(), schema);
        }
        let names: Vec<Value> = converted.keys().cloned().map(Value::from).collect();
        out.insert("properties".into(), Value::Object(converted));
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(())
    }
}

/// Whether `schema` (in the strict subset) accepts `null`.
fn accepts_null(schema: &Value) -> bool {
    if let Some(Value::Array(branches)) = schema.get("anyOf") {
        return branches.iter().any(accepts_null);
    }
    let typed = match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => false,
    };
    let listed = match schema.get("enum") {
        Some(Value::Array(values)) => values.iter().any(Value::is_null),
        _ => true,
    };
    typed && listed
}

/// `schema`, accepting `null` too.
fn nullable(schema: Value) -> Value {
    if accepts_null(&schema) {
        return schema;
    }
    let Value::Object(mut map) = schema else {
        return schema;
    };
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.push(json!({"type": "null"}));
        return Value::Object(map);
    }
    if map.contains_key("$ref") {
        let description = map.remove("description");
        let mut wrapper = Map::new();
        wrapper.insert(
            "anyOf".into(),
            json!([Value::Object(map), {"type": "null"}]),
        );
        if let Some(description) = description {
            wrapper.insert("description".into(), description);
        }
        return Value::Object(wrapper);
    }
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) if !types.iter().any(|t| t == "null") => {
            types.push("null".into());
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
    Value::Object(map)
}

// ------------------------------------------------------------------- Gemini

/// The keywords of Gemini's `Schema` (the OpenAPI 3.0 subset of function
/// declarations).
pub const GEMINI_SCHEMA_KEYWORDS: [&str; 22] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// The `format`s Gemini takes, by `type`: the Gemini Developer API refuses
/// any other (Firebase AI Logic's `SchemaShared.format`: "must be either
/// 'enum' or 'date-time', otherwise requests will fail").
pub const GEMINI_FORMATS: [(&str, &str); 2] = [("STRING", "enum"), ("STRING", "date-time")];

/// The Gemini `Type`s.
const GEMINI_TYPES: [&str; 6] = ["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"];

/// `schema` as a Gemini `Schema` (the OpenAPI 3.0 subset of function
/// declarations), each constraint outside that subset moved into a
/// description. See the [module documentation](self) for every rule.
pub fn gemini_schema(schema: &Value) -> Value {
    let mut schema = simplify_node(&json_safe_bounds(schema));
    let defs = definitions_of(&schema);
    render_value_docs(&mut schema);
    let mut gemini = Gemini {
        defs,
        expanding: Vec::new(),
    };
    gemini.node(&schema)
}

/// Whether `schema` (a [`gemini_schema`]) is a `Schema` every Gemini endpoint
/// takes as it is: every node has a `type` and no `anyOf` (Vertex AI wants
/// `anyOf` alone in its node, without the description or `nullable` that
/// carry what the rewrite says), every `OBJECT` has properties and every
/// `ARRAY` has items.
pub fn gemini_schema_is_complete(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    if map.contains_key("anyOf") {
        return false;
    }
    match map.get("type").and_then(Value::as_str) {
        Some("OBJECT") => map
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| {
                !properties.is_empty() && properties.values().all(gemini_schema_is_complete)
            }),
        Some("ARRAY") => map.get("items").is_some_and(gemini_schema_is_complete),
        Some(ty) => GEMINI_TYPES.contains(&ty),
        None => false,
    }
}

/// `schema` as Gemini's `parametersJsonSchema` takes it: the JSON Schema as
/// it is, but for the bounds [`json_safe_bounds`] removes and the keywords
/// Gemini refuses beside a `$ref` (it allows only `description` and
/// `default` there): annotations are dropped, constraints moved into the
/// description.
pub fn gemini_json_schema(schema: &Value) -> Value {
    let mut schema = json_safe_bounds(schema);
    for_each_schema(&mut schema, &mut |map| {
        if !map.contains_key("$ref") {
            return;
        }
        let beside: Vec<String> = map
            .keys()
            .filter(|k| !matches!(k.as_str(), "$ref" | "description" | "default"))
            .cloned()
            .collect();
        let mut notes = Vec::new();
        for keyword in beside {
            if let Some(value) = map.shift_remove(&keyword)
                && !ANNOTATIONS.contains(&keyword.as_str())
            {
                notes.push(moved_sentence(&keyword, &value));
            }
        }
        if let Some(description) = describe(map.get("description"), &notes) {
            map.insert("description".into(), description.into());
        }
    });
    schema
}

struct Gemini {
    /// The root's definitions, by the reference that names them.
    defs: Map<String, Value>,
    expanding: Vec<String>,
}

impl Gemini {
    fn node(&mut self, schema: &Value) -> Value {
        let Value::Object(map) = schema else {
            // `true`: anything; `false` cannot occur in a usable schema.
            return json!({});
        };
        if let Some(Value::String(reference)) = map.get("$ref") {
            return self.reference(map, reference);
        }
        let mut out = Map::new();
        let mut notes = Vec::new();
        let mut nullable_flag = false;

        // The type, and what `null` becomes.
        let mut types: Vec<String> = match map.get("type") {
            Some(Value::String(t)) => vec![t.clone()],
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .map(Into::into)
                .collect(),
            _ => Vec::new(),
        };
        if types.iter().any(|t| t == "null") && types.len() > 1 {
            nullable_flag = true;
            types.retain(|t| t != "null");
        }
        let values: Option<Vec<Value>> = match (map.get("enum"), map.get("const")) {
            (Some(Value::Array(values)), _) => Some(values.clone()),
            (None, Some(value)) => Some(vec![value.clone()]),
            _ => None,
        };
        let values = values.map(|mut values| {
            if values.iter().any(Value::is_null) && values.len() > 1 {
                nullable_flag = true;
                values.retain(|v| !v.is_null());
            }
            values
        });
        if let Some(values) = &values
            && values.iter().all(Value::is_string)
            && types.iter().all(|t| t == "string")
        {
            types = vec!["string".into()];
        }
        match types.as_slice() {
            [] => {}
            [single] => {
                out.insert("type".into(), single.to_uppercase().into());
            }
            several => {
                let branches: Vec<Value> = several
                    .iter()
                    .map(|t| json!({"type": t.to_uppercase()}))
                    .collect();
                out.insert("anyOf".into(), Value::Array(branches));
            }
        }
        let gemini_type = out.get("type").and_then(Value::as_str).map(str::to_owned);

        if let Some(values) = values {
            if gemini_type.as_deref() == Some("STRING") && values.iter().all(Value::is_string) {
                out.insert("format".into(), "enum".into());
                out.insert("enum".into(), Value::Array(values));
            } else {
                notes.push(format!("Must be one of: {}.", list_values(&values)));
            }
        }

        for (keyword, value) in map {
            let keyword = keyword.as_str();
            match keyword {
                "type" | "enum" | "const" | "description" | "$defs" | "definitions" => {}
                "title" | "default" | "minItems" | "maxItems" | "minLength" | "maxLength"
                | "pattern" | "minimum" | "maximum" | "minProperties" | "maxProperties" => {
                    out.insert(keyword.into(), value.clone());
                }
                "format" => {
                    if out.contains_key("format") {
                        continue;
                    }
                    let name = value.as_str().unwrap_or_default();
                    let documented = gemini_type.as_deref().is_some_and(|t| {
                        GEMINI_FORMATS.iter().any(|(ty, f)| *ty == t && *f == name)
                    });
                    if documented {
                        out.insert(keyword.into(), value.clone());
                    } else if gemini_type.as_deref() == Some("STRING") {
                        notes.push(moved_sentence(keyword, value));
                    }
                    // A number's format (`int64`, `double`, `uint8`, ...)
                    // names a Rust type, whose range `minimum` and `maximum`
                    // state; Gemini takes no numeric format.
                }
                "properties" => {
                    if let Value::Object(properties) = value {
                        let mut converted = Map::new();
                        for (name, property) in properties {
                            converted.insert(name.clone(), self.node(property));
                        }
                        let order: Vec<Value> =
                            properties.keys().cloned().map(Value::from).collect();
                        out.insert("properties".into(), Value::Object(converted));
                        out.insert("propertyOrdering".into(), Value::Array(order));
                    }
                }
                "required" => {
                    out.insert(keyword.into(), value.clone());
                }
                // Closed (`false`) or open (`true`), `Schema` cannot say; a
                // map's value schema goes into the description.
                "additionalProperties" if value.is_object() => {
                    let values = self.node(value);
                    notes.push(format!(
                        "An object with any member names; every member's value is {}.",
                        Value::to_string(&values)
                    ));
                }
                "additionalProperties" => {}
                "items" => {
                    if value.is_object() {
                        out.insert(keyword.into(), self.node(value));
                    } else {
                        notes.push(moved_sentence(keyword, value));
                    }
                }
                "anyOf" | "oneOf" => {
                    let Value::Array(branches) = value else {
                        continue;
                    };
                    let mut converted = Vec::new();
                    for branch in branches {
                        if branch.get("type") == Some(&json!("null"))
                            && branch.as_object().is_some_and(|b| b.len() == 1)
                        {
                            nullable_flag = true;
                        } else {
                            converted.push(self.node(branch));
                        }
                    }
                    if keyword == "oneOf" && converted.len() > 1 {
                        notes.push("Must match exactly one of the alternatives.".into());
                    }
                    match out.get_mut("anyOf") {
                        Some(Value::Array(existing)) => existing.extend(converted),
                        _ => {
                            out.insert("anyOf".into(), Value::Array(converted));
                        }
                    }
                }
                _ if ANNOTATIONS.contains(&keyword) => {}
                "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" | "uniqueItems"
                | "minContains" | "maxContains" => notes.push(moved_sentence(keyword, value)),
                _ if APPLICATORS.contains(&keyword) => notes.push(moved_sentence(keyword, value)),
                // Unknown keywords constrain nothing.
                _ => {}
            }
        }
        if nullable_flag {
            out.insert("nullable".into(), true.into());
        }
        if let Some(description) = describe(map.get("description"), &notes) {
            out.insert("description".into(), description.into());
        }
        Value::Object(out)
    }

    /// A `$ref` into `$defs`, inlined, the field's description replacing
    /// the definition's; a recursive one cut short, the field's description
    /// followed by the note that says what it repeats.
    fn reference(&mut self, map: &Map<String, Value>, reference: &str) -> Value {
        let name = def_name(reference).to_owned();
        let own = map.get("description");
        match self.defs.get(reference).cloned() {
            Some(_) if self.expanding.contains(&name) => {
                let note = format!("A {name}, the same shape as the enclosing {name} (recursive).");
                json!({"type": "OBJECT", "description": describe(own, &[note])})
            }
            Some(mut def) => {
                if let (Some(description), Value::Object(def)) = (own, &mut def) {
                    def.insert("description".into(), description.clone());
                }
                render_value_docs(&mut def);
                self.expanding.push(name);
                let out = self.node(&def);
                self.expanding.pop();
                out
            }
            None => {
                let note = format!("Must match the schema at {reference}.");
                json!({"description": describe(own, &[note])})
            }
        }
    }
}

// ------------------------------------------------------------------- shared

/// The largest integer every provider takes in a schema, 2^53 − 1 (the
/// largest a JSON number read as a double holds exactly).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `schema` without the numeric bounds (`minimum`, `maximum`,
/// `exclusiveMinimum`, `exclusiveMaximum`) whose magnitude exceeds
/// [`MAX_SAFE_INTEGER`], which OpenAI ("a numeric value in the function
/// parameters is too large") and Anthropic ("int too big to convert") refuse.
///
/// A bound is never clamped (a tighter bound would refuse values the
/// validator accepts): it is removed. The natural range of a 64-bit integer
/// (`i64::MIN`, `i64::MAX`, `u64::MAX`, which schemars writes for `i64`,
/// `u64`, `isize`, ...) goes without a word; any other bound removed is
/// stated in the description of its schema (`Must be at most
/// 10000000000000000000.`). The validator still enforces every bound.
pub fn json_safe_bounds(schema: &Value) -> Value {
    let mut schema = schema.clone();
    for_each_schema(&mut schema, &mut |map| {
        let mut notes = Vec::new();
        for keyword in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            let Some(Value::Number(bound)) = map.get(keyword) else {
                continue;
            };
            if !beyond_safe_integer(bound) {
                continue;
            }
            let natural = is_64_bit_limit(bound);
            if let Some(bound) = map.shift_remove(keyword)
                && !natural
            {
                notes.push(moved_sentence(keyword, &bound));
            }
        }
        if !notes.is_empty()
            && let Some(description) = describe(map.get("description"), &notes)
        {
            map.insert("description".into(), description.into());
        }
    });
    schema
}

/// Whether `n`'s magnitude exceeds [`MAX_SAFE_INTEGER`].
fn beyond_safe_integer(n: &serde_json::Number) -> bool {
    if let Some(n) = n.as_u64() {
        n > MAX_SAFE_INTEGER
    } else if let Some(n) = n.as_i64() {
        n.unsigned_abs() > MAX_SAFE_INTEGER
    } else {
        n.as_f64()
            .is_some_and(|n| n.abs() > MAX_SAFE_INTEGER as f64)
    }
}

/// Whether `n` is an end of a 64-bit integer type's range.
fn is_64_bit_limit(n: &serde_json::Number) -> bool {
    matches!(n.as_i64(), Some(i64::MIN | i64::MAX)) || n.as_u64() == Some(u64::MAX)
}

/// Calls `f` on every schema object in `schema`: `schema` itself, then the
/// subschemas of its applicators (never the values of `enum`, `const`,
/// `default` or `examples`, which are data).
fn for_each_schema(schema: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    let Value::Object(map) = schema else {
        return;
    };
    f(map);
    for (keyword, value) in map.iter_mut() {
        match keyword.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(members) = value {
                    for member in members.values_mut() {
                        for_each_schema(member, f);
                    }
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" | "items" if value.is_array() => {
                for branch in value.as_array_mut().into_iter().flatten() {
                    for_each_schema(branch, f);
                }
            }
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "additionalItems" => for_each_schema(value, f),
            _ => {}
        }
    }
}

/// The root's definitions, keyed by the reference that names each
/// (`#/$defs/Name`, `#/definitions/Name`).
fn definitions_of(schema: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for keyword in ["$defs", "definitions"] {
        if let Some(Value::Object(members)) = schema.get(keyword) {
            for (name, def) in members {
                defs.insert(format!("#/{keyword}/{name}"), def.clone());
            }
        }
    }
    defs
}

/// The name a reference into `$defs` or `definitions` gives.
fn def_name(reference: &str) -> &str {
    reference
        .strip_prefix("#/$defs/")
        .or_else(|| reference.strip_prefix("#/definitions/"))
        .unwrap_or(reference)
}

/// The private key that carries an enum's value docs until they are
/// written into the description.
const VALUE_DOCS: &str = "x-toolcall-value-docs";

/// The clean-up every rewrite starts from: unit-variant enums as `enum`
/// (their value docs kept aside for [`render_value_docs`]), `anyOf: [X,
/// null]` as a nullable X.
fn simplify_node(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (keyword, value) in map {
        let value = match (keyword.as_str(), value) {
            ("properties" | "$defs" | "definitions", Value::Object(members)) => Value::Object(
                members
                    .iter()
                    .map(|(name, s)| (name.clone(), simplify_node(s)))
                    .collect(),
            ),
            (
                "items" | "additionalProperties" | "not" | "if" | "then" | "else",
                Value::Object(_),
            ) => simplify_node(value),
            ("anyOf" | "oneOf" | "allOf" | "prefixItems" | "items", Value::Array(branches)) => {
                Value::Array(branches.iter().map(simplify_node).collect())
            }
            _ => value.clone(),
        };
        out.insert(keyword.clone(), value);
    }
    const_enum(&mut out);
    nullable_any_of(out)
}

/// `oneOf` of constants as one `enum`, the constants' docs kept aside.
fn const_enum(map: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = map.get("oneOf") else {
        return;
    };
    let constant = |b: &Value| {
        b.as_object().is_some_and(|b| {
            b.contains_key("const")
                && b.keys()
                    .all(|k| matches!(k.as_str(), "const" | "type" | "description" | "title"))
        })
    };
    if branches.is_empty() || !branches.iter().all(constant) || map.contains_key("enum") {
        return;
    }
    let values: Vec<Value> = branches.iter().map(|b| b["const"].clone()).collect();
    let distinct = values
        .iter()
        .enumerate()
        .all(|(i, v)| !values[..i].contains(v));
    if !distinct {
        return;
    }
    let types: Vec<Option<&Value>> = branches.iter().map(|b| b.get("type")).collect();
    let common_type = types
        .first()
        .copied()
        .flatten()
        .filter(|t| types.iter().all(|other| *other == Some(*t)))
        .cloned();
    let docs: Vec<Value> = branches
        .iter()
        .filter_map(|b| {
            let description = b.get("description")?.as_str()?;
            Some(json!({"value": b["const"], "description": description}))
        })
        .collect();
    map.remove("oneOf");
    if let Some(t) = common_type
        && !map.contains_key("type")
    {
        map.insert("type".into(), t);
    }
    map.insert("enum".into(), Value::Array(values));
    if !docs.is_empty() {
        map.insert(VALUE_DOCS.into(), Value::Array(docs));
    }
}

/// `anyOf: [X, {type: "null"}]` as X accepting `null`, when X has a plain
/// type and no keyword clashes with the outer schema's.
fn nullable_any_of(mut map: Map<String, Value>) -> Value {
    let Some(Value::Array(branches)) = map.get("anyOf") else {
        return Value::Object(map);
    };
    let is_null = |b: &Value| b == &json!({"type": "null"});
    let [a, b] = branches.as_slice() else {
        return Value::Object(map);
    };
    let inner = match (is_null(a), is_null(b)) {
        (true, false) => b,
        (false, true) => a,
        _ => return Value::Object(map),
    };
    let Value::Object(inner) = inner else {
        return Value::Object(map);
    };
    let plain = inner.contains_key("type")
        && !["anyOf", "oneOf", "allOf", "$ref", "not", "if"]
            .iter()
            .any(|k| inner.contains_key(*k));
    let clash = inner
        .keys()
        .any(|k| map.contains_key(k) && !matches!(k.as_str(), "description" | "title" | "anyOf"));
    if !plain || clash {
        return Value::Object(map);
    }
    let inner = inner.clone();
    map.remove("anyOf");
    for (keyword, value) in inner {
        // The field's own description wins over its type's doc comment.
        if !map.contains_key(&keyword) {
            map.insert(keyword, value);
        }
    }
    nullable(Value::Object(map))
}

/// Writes the kept value docs of every enum into its description.
fn render_value_docs(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(docs)) = map.remove(VALUE_DOCS) {
                let listed: Vec<String> = docs
                    .iter()
                    .map(|doc| {
                        let value = match &doc["value"] {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        let text = doc["description"].as_str().unwrap_or_default();
                        sentence(&format!("{value}: {text}"))
                    })
                    .collect();
                let own = map.get("description").and_then(Value::as_str);
                let mut text = own.map(sentence).unwrap_or_default();
                for line in listed {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(&line);
                }
                map.insert("description".into(), text.into());
            }
            map.values_mut().for_each(render_value_docs);
        }
        Value::Array(items) => items.iter_mut().for_each(render_value_docs),
        _ => {}
    }
}

/// `text` ending with a full stop (or other closing punctuation).
fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() || text.ends_with(['.', '!', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// The description `own`, followed by the notes of the constraints moved into it.
fn describe(own: Option<&Value>, notes: &[String]) -> Option<String> {
    let own = own.and_then(Value::as_str);
    if notes.is_empty() {
        return own.map(str::to_owned);
    }
    let mut text = own.map(sentence).unwrap_or_default();
    for note in notes {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(note);
    }
    Some(text)
}

/// A constraint, in words, as a description states it once its keyword is gone.
fn moved_sentence(keyword: &str, value: &Value) -> String {
    let count = |unit: &str| {
        let n = value.as_u64().unwrap_or(0);
        format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
    };
    match keyword {
        "minLength" => format!("Must have at least {}.", count("character")),
        "maxLength" => format!("Must have at most {}.", count("character")),
        "minItems" => format!("Must have at least {}.", count("item")),
        "maxItems" => format!("Must have at most {}.", count("item")),
        "minProperties" => format!("Must have at least {}.", count("member")),
        "maxProperties" => format!("Must have at most {}.", count("member")),
        "minimum" => format!("Must be at least {value}."),
        "maximum" => format!("Must be at most {value}."),
        "exclusiveMinimum" => format!("Must be greater than {value}."),
        "exclusiveMaximum" => format!("Must be less than {value}."),
        "multipleOf" => format!("Must be a multiple of {value}."),
        "uniqueItems" if value == &Value::Bool(true) => "The items must be distinct.".into(),
        "pattern" => format!(
            "Must match the regular expression {}.",
            value.as_str().unwrap_or_default()
        ),
        "format" => {
            let name = value.as_str().unwrap_or_default();
            let what = match name {
                "email" => "an email address".to_owned(),
                "uuid" => "a UUID (8-4-4-4-12 hexadecimal digits)".to_owned(),
                "date" => "a date, YYYY-MM-DD".to_owned(),
                "date-time" => "an RFC 3339 date-time with an offset".to_owned(),
                "time" => "an RFC 3339 time".to_owned(),
                "uri" => "an absolute URI (RFC 3986)".to_owned(),
                other => format!("in the `{other}` format"),
            };
            format!("Must be {what}.")
        }
        _ => format!("Must also satisfy the JSON Schema keyword `{keyword}`: {value}."),
    }
}

/// The values of an enum, for a sentence.
fn list_values(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `schema`'s `type` is or includes `ty`.
fn is_type(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(types)) => types.iter().any(|t| t == ty),
        _ => false,
    }
}
