//! The tools' contract, `tools.lock.json`, and the check that a change to a
//! tool does not break the models and prompts written against it.
//!
//! A model learns a tool from its definition once and keeps sending what it
//! learned. When a tool's arguments change shape under the same name, the
//! old calls start failing validation and the error rate rises without any
//! test noticing. The lock file records, for every tool, what a caller
//! relies on; [`check`] compares it with the tools as they are now and names
//! every difference, each marked breaking or compatible. A breaking change
//! belongs in a new version of the tool (`#[tool(version = 2)]` publishes
//! `<name>_v2`), kept beside the old one until callers move.
//!
//! # The file
//!
//! ```json
//! {
//!   "format_version": 1,
//!   "tools": [
//!     {
//!       "name": "refund_order",
//!       "description": "Refund part or all of an order. ...",
//!       "side_effect": true,
//!       "high_risk": true,
//!       "schema_sha256": "3b1f...",
//!       "fields": [
//!         {
//!           "name": "amount_cents",
//!           "required": true,
//!           "description": "Refund amount in minor units (cents). 25.90 is 2590.",
//!           "type": "integer",
//!           "format": "int64",
//!           "constraints": { "maximum": 9223372036854775807, "minimum": 1 }
//!         },
//!         {
//!           "name": "currency",
//!           "required": true,
//!           "type": "string",
//!           "enum": ["BRL", "USD"]
//!         }
//!       ]
//!     }
//!   ]
//! }
//! ```
//!
//! Tools are sorted by name, fields by name, enum values by their canonical
//! JSON text and constraints by keyword, so the file only changes where the
//! contract does and reads well in a diff. Per field:
//!
//! | member | meaning |
//! |---|---|
//! | `name` | the member name the model sends |
//! | `required` | whether the member must be present |
//! | `description` | the field's description, when it has one |
//! | `type` | the JSON type: `string`, `integer`, `number`, `boolean`, `object`, `array`, `null`, several joined by `\|`, or `any` |
//! | `nullable` | present and `true` when `null` is accepted besides `type` |
//! | `format` | the schema's `format` (`email`, `uuid`, `int64`, ...) |
//! | `enum` | the accepted values, when the field is an enumeration |
//! | `constraints` | the validation keywords (`minimum`, `maxLength`, `pattern`, ...) |
//! | `fields` | the members of an object |
//! | `items` | the shape of an array's elements (same members, without `name`, `required`, `description`) |
//! | `values` | the shape of a map's values |
//!
//! `schema_sha256` is the hex SHA-256 of the tool's parameters schema in the
//! canonical JSON form of [`toolcall_core::canonical`]: a change the fields
//! above do not capture still changes it.
//!
//! # What breaks
//!
//! Under the same tool name, these changes are breaking: a tool removed; a
//! field removed, renamed (reported as one removed field paired with one
//! added field of the same type, as a probable rename), retyped, made
//! required, or added as required; `null` no longer accepted; an enum value
//! removed, or an enumeration imposed on a free field; a format added or
//! changed on a non-numeric field; a constraint added or tightened; and the
//! `side_effect` or `high_risk` flag lowered (the host would stop replaying,
//! or stop asking a person, for calls it used to protect).
//!
//! Compatible: a new tool, an optional field added, a field made optional,
//! `null` newly accepted, an enum value added, a constraint loosened or
//! removed, a flag raised, a description changed, and a schema change that
//! none of the above explains (reported so that it gets a look).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolcall_core::Registry;
use toolcall_core::canonical::{canonical_json, digest};

/// The version of the lock file's layout that this module writes and reads.
pub const FORMAT_VERSION: u64 = 1;

/// The contract of every tool in a registry, as kept in `tools.lock.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Lockfile {
    /// The layout's version, [`FORMAT_VERSION`].
    pub format_version: u64,
    /// The tools, sorted by name.
    pub tools: Vec<LockedTool>,
}

/// One tool's contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LockedTool {
    /// The name the model calls it by (with its `_v<N>` suffix, if versioned).
    pub name: String,
    /// The description the model reads.
    pub description: String,
    /// Whether the tool changes the world (its completed calls are replayed).
    pub side_effect: bool,
    /// Whether each call needs a person's approval.
    pub high_risk: bool,
    /// Hex SHA-256 of the canonical JSON form of the parameters schema.
    pub schema_sha256: String,
    /// The top-level arguments, sorted by name.
    pub fields: Vec<LockedField>,
}

/// One named member of an object: a tool argument, or a member of a nested object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LockedField {
    /// The member name the model sends.
    pub name: String,
    /// Whether it must be present.
    pub required: bool,
    /// Its description, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What values it takes.
    #[serde(flatten)]
    pub shape: Shape,
}

/// The type of a value, as far as callers depend on it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Shape {
    /// The JSON type (`string`, `integer`, ...), several joined by `|` in
    /// sorted order, or `any` when the schema does not restrict it. `null`
    /// is not listed here when other types are: see `nullable`.
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether `null` is accepted besides `ty`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nullable: bool,
    /// The schema's `format`, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The accepted values of an enumeration (without `null`, which is
    /// `nullable`), sorted by canonical JSON text.
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<Value>>,
    /// Validation keywords and their values, sorted by keyword.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub constraints: BTreeMap<String, Value>,
    /// The members of an object with declared properties, sorted by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<LockedField>>,
    /// The elements of an array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Shape>>,
    /// The values of a map (an object whose members are not declared by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Box<Shape>>,
}

/// Why a lock file could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum LockError {
    /// The text is not JSON.
    Json(serde_json::Error),
    /// The JSON has no numeric `format_version`: not a lock file.
    MissingVersion,
    /// The file was written in a layout this version does not read.
    UnsupportedVersion(u64),
    /// The layout is right but a member is missing or of the wrong kind.
    Invalid(serde_json::Error),
    /// Two entries share a tool name.
    DuplicateTool(String),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Json(error) => write!(f, "not JSON: {error}"),
            LockError::MissingVersion => {
                f.write_str("not a tools lock file: it has no numeric `format_version`")
            }
            LockError::UnsupportedVersion(found) => write!(
                f,
                "lock file format version {found} is not supported (this version reads {FORMAT_VERSION}); \
                 run `lock` again to rewrite it"
            ),
            LockError::Invalid(error) => write!(f, "not a valid tools lock file: {error}"),
            LockError::DuplicateTool(name) => {
                write!(f, "the lock file lists the tool `{name}` twice")
            }
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Json(error) | LockError::Invalid(error) => Some(error),
            _ => None,
        }
    }
}

impl Lockfile {
    /// The contract of every tool in `registry`, derived from each tool's
    /// [`parameters_schema`](toolcall_core::ToolSpec::parameters_schema).
    pub fn from_registry(registry: &Registry) -> Lockfile {
        let mut tools: Vec<LockedTool> = registry
            .iter()
            .map(|spec| {
                let schema = spec.parameters_schema();
                let root = shape_of(&schema, &schema, &mut Vec::new());
                LockedTool {
                    name: spec.name().to_owned(),
                    description: spec.description().to_owned(),
                    side_effect: spec.side_effect(),
                    high_risk: spec.high_risk(),
                    schema_sha256: digest(&schema),
                    fields: root.fields.unwrap_or_default(),
                }
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Lockfile {
            format_version: FORMAT_VERSION,
            tools,
        }
    }

    /// The tool of this name.
    pub fn tool(&self, name: &str) -> Option<&LockedTool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// The lock file's text: pretty JSON with two-space indents and a final
    /// newline. Writing the same registry twice gives the same bytes.
    pub fn to_json_pretty(&self) -> String {
        let mut text =
            serde_json::to_string_pretty(self).expect("a lock file always serializes to JSON");
        text.push('\n');
        text
    }

    /// Reads a lock file's text. The `format_version` is checked before
    /// anything else, so a file from a newer layout is named as such.
    pub fn parse(text: &str) -> Result<Lockfile, LockError> {
        let value: Value = serde_json::from_str(text).map_err(LockError::Json)?;
        match value.get("format_version").and_then(Value::as_u64) {
            None => return Err(LockError::MissingVersion),
            Some(FORMAT_VERSION) => {}
            Some(other) => return Err(LockError::UnsupportedVersion(other)),
        }
        let lock: Lockfile = serde_json::from_value(value).map_err(LockError::Invalid)?;
        let mut seen = BTreeSet::new();
        for tool in &lock.tools {
            if !seen.insert(tool.name.as_str()) {
                return Err(LockError::DuplicateTool(tool.name.clone()));
            }
        }
        Ok(lock)
    }
}

// ------------------------------------------------------------ schema reading

/// The keywords kept as constraints.
const CONSTRAINTS: &[&str] = &[
    "exclusiveMaximum",
    "exclusiveMinimum",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "pattern",
    "uniqueItems",
];

/// The shape of `schema`; `root` resolves local `$ref`s, `visiting` holds
/// the references being expanded, to stop at recursion.
fn shape_of(schema: &Value, root: &Value, visiting: &mut Vec<String>) -> Shape {
    let Value::Object(map) = schema else {
        // `true` or `{}`-like: anything goes.
        return Shape::any();
    };
    if let Some(Value::String(reference)) = map.get("$ref") {
        if visiting.contains(reference) {
            // A recursive type: name it rather than expand it forever.
            return Shape {
                ty: format!("recursive {reference}"),
                ..Shape::default()
            };
        }
        if let Some(target) = resolve(root, reference) {
            visiting.push(reference.clone());
            let shape = shape_of(target, root, visiting);
            visiting.pop();
            return shape;
        }
    }

    let mut types = BTreeSet::new();
    let mut nullable = false;
    match map.get("type") {
        Some(Value::String(t)) => {
            types.insert(t.clone());
        }
        Some(Value::Array(list)) => {
            types.extend(list.iter().filter_map(Value::as_str).map(str::to_owned))
        }
        _ => {}
    }
    if types.remove("null") {
        nullable = true;
    }

    let mut shape = Shape::default();
    let mut enum_values: Option<Vec<Value>> = match (map.get("enum"), map.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (None, Some(value)) => Some(vec![value.clone()]),
        _ => None,
    };

    // Alternatives: an enumeration written as `oneOf` constants, an
    // `Option<T>` written as `anyOf: [T, null]`, or a real union.
    let alternatives: Vec<&Value> = ["anyOf", "oneOf", "allOf"]
        .iter()
        .filter_map(|k| map.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    if !alternatives.is_empty() {
        let mut shapes: Vec<Shape> = Vec::new();
        for alternative in alternatives {
            let alt = shape_of(alternative, root, visiting);
            if alt.ty == "null" {
                nullable = true;
            } else {
                nullable |= alt.nullable;
                shapes.push(alt);
            }
        }
        if shapes.len() == 1 {
            let only = shapes.pop().unwrap_or_default();
            types.extend(split_types(&only.ty));
            shape = Shape {
                ty: String::new(),
                nullable: false,
                ..only
            };
            if enum_values.is_none() {
                enum_values = shape.enum_values.take();
            }
        } else if !shapes.is_empty() {
            for alt in &shapes {
                types.extend(split_types(&alt.ty));
            }
            if enum_values.is_none() && shapes.iter().all(|s| s.enum_values.is_some()) {
                enum_values = Some(
                    shapes
                        .iter()
                        .flat_map(|s| s.enum_values.iter().flatten().cloned())
                        .collect(),
                );
            }
        }
    }

    if let Some(values) = &mut enum_values {
        if values.iter().any(Value::is_null) {
            nullable = true;
            values.retain(|v| !v.is_null());
        }
        if types.is_empty() {
            types.extend(values.iter().map(|v| json_type(v).to_owned()));
        }
        values.sort_by_cached_key(canonical_json);
        values.dedup();
    }
    if types.is_empty() {
        if map.contains_key("properties") || map.contains_key("additionalProperties") {
            types.insert("object".to_owned());
        } else if map.contains_key("items") {
            types.insert("array".to_owned());
        }
    }
    // `integer` is a kind of `number`; a union of both is a number.
    if types.contains("number") {
        types.remove("integer");
    }

    shape.ty = match types.len() {
        0 if nullable => {
            nullable = false;
            "null".to_owned()
        }
        0 => "any".to_owned(),
        _ => types.into_iter().collect::<Vec<_>>().join("|"),
    };
    shape.nullable = nullable;
    shape.enum_values = enum_values.filter(|values| !values.is_empty());
    if let Some(Value::String(format)) = map.get("format") {
        shape.format = Some(format.clone());
    }
    for keyword in CONSTRAINTS {
        if let Some(value) = map.get(*keyword) {
            shape
                .constraints
                .insert((*keyword).to_owned(), value.clone());
        }
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        let required: BTreeSet<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields: Vec<LockedField> = properties
            .iter()
            .map(|(name, schema)| {
                field_of(
                    name,
                    required.contains(name.as_str()),
                    schema,
                    root,
                    visiting,
                )
            })
            .collect();
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        shape.fields = Some(fields);
    }
    if let Some(values @ Value::Object(_)) = map.get("additionalProperties") {
        shape.values = Some(Box::new(shape_of(values, root, visiting)));
    }
    if let Some(items @ (Value::Object(_) | Value::Bool(true))) = map.get("items") {
        shape.items = Some(Box::new(shape_of(items, root, visiting)));
    }
    shape
}

fn field_of(
    name: &str,
    required: bool,
    schema: &Value,
    root: &Value,
    visiting: &mut Vec<String>,
) -> LockedField {
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned);
    LockedField {
        name: name.to_owned(),
        required,
        description,
        shape: shape_of(schema, root, visiting),
    }
}

/// The target of a local reference such as `#/$defs/Line`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn split_types(ty: &str) -> impl Iterator<Item = String> + '_ {
    ty.split('|')
        .filter(|t| !t.is_empty() && *t != "any")
        .map(str::to_owned)
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Shape {
    fn any() -> Shape {
        Shape {
            ty: "any".to_owned(),
            ..Shape::default()
        }
    }
}

// ------------------------------------------------------------------ changes

/// One difference between the locked contract and the current one.
///
/// Its `Display` names the tool, the field (as a path: `lines[].sku` is
/// `sku` in the elements of `lines`, `limits{}` the values of the map
/// `limits`) and what changed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Change {
    /// The tool's name.
    pub tool: String,
    /// The field's path, for a change to a field.
    pub field: Option<String>,
    /// What changed.
    pub kind: ChangeKind,
}

/// What changed. See the [module docs](self) for which kinds break callers;
/// [`Change::is_breaking`] decides it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A tool that is not in the lock file. Compatible.
    ToolAdded,
    /// A locked tool that is gone; `successor` is a new tool of the same
    /// base name with a version suffix, if there is one. Breaking.
    ToolRemoved {
        /// The new version that replaces it, such as `refund_order_v2`.
        successor: Option<String>,
    },
    /// `side_effect` or `high_risk` went from `true` to `false`. Breaking.
    FlagLowered {
        /// `side_effect` or `high_risk`.
        flag: &'static str,
    },
    /// `side_effect` or `high_risk` went from `false` to `true`. Compatible.
    FlagRaised {
        /// `side_effect` or `high_risk`.
        flag: &'static str,
    },
    /// The tool's or the field's description changed. Compatible.
    DescriptionChanged,
    /// A new field. Breaking when it is required.
    FieldAdded {
        /// Whether it is required.
        required: bool,
        /// Its type.
        ty: String,
    },
    /// A field that is gone, with no added field of its type beside it. Breaking.
    FieldRemoved {
        /// Its type.
        ty: String,
    },
    /// A field gone while another of the same type appeared in the same
    /// object: probably a rename. Breaking.
    FieldRenamed {
        /// The new field's path.
        to: String,
        /// The type both have.
        ty: String,
    },
    /// An optional field became required. Breaking.
    MadeRequired,
    /// A required field became optional. Compatible.
    MadeOptional,
    /// The JSON type changed. Breaking.
    Retyped {
        /// The locked type.
        from: String,
        /// The current type.
        to: String,
    },
    /// `null` used to be accepted and no longer is. Breaking.
    NullRemoved,
    /// `null` is now accepted. Compatible.
    NullAllowed,
    /// The `format` changed. Breaking when a format was added or changed
    /// on a non-numeric field (numeric ranges are compared as constraints).
    FormatChanged {
        /// The locked format.
        from: Option<String>,
        /// The current format.
        to: Option<String>,
    },
    /// An enum value is no longer accepted. Breaking.
    EnumValueRemoved {
        /// The value.
        value: Value,
    },
    /// A new enum value. Compatible.
    EnumValueAdded {
        /// The value.
        value: Value,
    },
    /// A field that took any value of its type now takes only these. Breaking.
    EnumImposed {
        /// The accepted values.
        values: Vec<Value>,
    },
    /// A field that took a fixed set of values now takes any of its type. Compatible.
    EnumLifted,
    /// A validation keyword changed. Breaking when it was added or now
    /// accepts less (a higher minimum, a lower maximum, another pattern).
    ConstraintChanged {
        /// The keyword, such as `maximum`.
        keyword: String,
        /// The locked value.
        from: Option<Value>,
        /// The current value.
        to: Option<Value>,
    },
    /// The schema's hash differs but nothing above explains it. Compatible,
    /// reported so that someone looks.
    SchemaChanged,
}

impl Change {
    fn tool(tool: &str, kind: ChangeKind) -> Change {
        Change {
            tool: tool.to_owned(),
            field: None,
            kind,
        }
    }

    fn field(tool: &str, field: &str, kind: ChangeKind) -> Change {
        Change {
            tool: tool.to_owned(),
            field: Some(field.to_owned()),
            kind,
        }
    }

    /// Whether a caller written against the locked contract may now fail:
    /// such a change needs a new tool version, not the same name.
    pub fn is_breaking(&self) -> bool {
        match &self.kind {
            ChangeKind::ToolRemoved { .. }
            | ChangeKind::FlagLowered { .. }
            | ChangeKind::FieldRemoved { .. }
            | ChangeKind::FieldRenamed { .. }
            | ChangeKind::MadeRequired
            | ChangeKind::NullRemoved
            | ChangeKind::EnumValueRemoved { .. }
            | ChangeKind::EnumImposed { .. } => true,
            ChangeKind::FieldAdded { required, .. } => *required,
            // A value that now may be anything accepts what it used to.
            ChangeKind::Retyped { to, .. } if to == "any" => false,
            ChangeKind::FormatChanged { to, .. } => to.is_some() && !self.numeric_format(),
            ChangeKind::ConstraintChanged { keyword, from, to } => {
                constraint_tightened(keyword, from.as_ref(), to.as_ref())
            }
            ChangeKind::Retyped { .. } => true,
            ChangeKind::ToolAdded
            | ChangeKind::FlagRaised { .. }
            | ChangeKind::DescriptionChanged
            | ChangeKind::MadeOptional
            | ChangeKind::NullAllowed
            | ChangeKind::EnumValueAdded { .. }
            | ChangeKind::EnumLifted
            | ChangeKind::SchemaChanged => false,
        }
    }

    fn numeric_format(&self) -> bool {
        let ChangeKind::FormatChanged { from, to } = &self.kind else {
            return false;
        };
        [from, to].into_iter().flatten().all(|f| {
            matches!(
                f.as_str(),
                "int8"
                    | "int16"
                    | "int32"
                    | "int64"
                    | "uint8"
                    | "uint16"
                    | "uint32"
                    | "uint64"
                    | "uint"
                    | "int"
                    | "float"
                    | "double"
            )
        })
    }
}

/// Whether changing `keyword` from `from` to `to` rejects values it used to accept.
fn constraint_tightened(keyword: &str, from: Option<&Value>, to: Option<&Value>) -> bool {
    let (from, to) = match (from, to) {
        (_, None) => return false,
        (None, Some(_)) => return true,
        (Some(from), Some(to)) => (from, to),
    };
    let number = |v: &Value| v.as_f64();
    match keyword {
        "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" => {
            match (number(from), number(to)) {
                (Some(a), Some(b)) => b > a,
                _ => from != to,
            }
        }
        "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" => {
            match (number(from), number(to)) {
                (Some(a), Some(b)) => b < a,
                _ => from != to,
            }
        }
        "uniqueItems" => to == &Value::Bool(true) && from != to,
        _ => from != to,
    }
}

fn show(value: &Value) -> String {
    canonical_json(value)
}

fn show_opt(value: Option<&Value>) -> String {
    value.map_or_else(|| "none".to_owned(), show)
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool `{}`", self.tool)?;
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            ChangeKind::ToolAdded => f.write_str("new tool"),
            ChangeKind::ToolRemoved { successor: None } => {
                f.write_str("removed; a model that still calls it gets UNKNOWN_TOOL")
            }
            ChangeKind::ToolRemoved {
                successor: Some(next),
            } => write!(
                f,
                "removed, replaced by `{next}`; keep the old version beside the new one until callers move"
            ),
            ChangeKind::FlagLowered { flag } => write!(f, "`{flag}` lowered from true to false"),
            ChangeKind::FlagRaised { flag } => write!(f, "`{flag}` raised from false to true"),
            ChangeKind::DescriptionChanged => f.write_str("description changed"),
            ChangeKind::FieldAdded { required: true, ty } => {
                write!(
                    f,
                    "added as required ({ty}); calls without it are now rejected"
                )
            }
            ChangeKind::FieldAdded {
                required: false,
                ty,
            } => {
                write!(f, "added as optional ({ty})")
            }
            ChangeKind::FieldRemoved { ty } => {
                write!(f, "removed ({ty}); calls that send it are now rejected")
            }
            ChangeKind::FieldRenamed { to, ty } => write!(
                f,
                "renamed? to `{to}` (removed, and `{to}` added, both {ty})"
            ),
            ChangeKind::MadeRequired => f.write_str("now required (was optional)"),
            ChangeKind::MadeOptional => f.write_str("now optional (was required)"),
            ChangeKind::Retyped { from, to } => write!(f, "retyped from {from} to {to}"),
            ChangeKind::NullRemoved => f.write_str("no longer accepts null"),
            ChangeKind::NullAllowed => f.write_str("now accepts null"),
            ChangeKind::FormatChanged { from, to } => write!(
                f,
                "format changed from {} to {}",
                from.as_deref().unwrap_or("none"),
                to.as_deref().unwrap_or("none")
            ),
            ChangeKind::EnumValueRemoved { value } => {
                write!(f, "enum value {} removed", show(value))
            }
            ChangeKind::EnumValueAdded { value } => write!(f, "enum value {} added", show(value)),
            ChangeKind::EnumImposed { values } => write!(
                f,
                "now restricted to the values {}",
                show(&Value::Array(values.clone()))
            ),
            ChangeKind::EnumLifted => f.write_str("no longer restricted to an enumeration"),
            ChangeKind::ConstraintChanged { keyword, from, to } => write!(
                f,
                "`{keyword}` changed from {} to {}",
                show_opt(from.as_ref()),
                show_opt(to.as_ref())
            ),
            ChangeKind::SchemaChanged => f.write_str(
                "parameters schema changed (its hash differs) in a way the lock file does not \
                 describe field by field; review it",
            ),
        }
    }
}

/// Every difference between the `locked` contract and the `current` one,
/// tool by tool in name order. A change is breaking when it needs a new
/// tool version ([`Change::is_breaking`]); new tools and other compatible
/// changes are listed too, so the lock file can be brought up to date.
pub fn check(locked: &Lockfile, current: &Lockfile) -> Vec<Change> {
    let old: BTreeMap<&str, &LockedTool> =
        locked.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let new: BTreeMap<&str, &LockedTool> =
        current.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let names: BTreeSet<&str> = old.keys().chain(new.keys()).copied().collect();
    let mut changes = Vec::new();
    for name in names {
        match (old.get(name), new.get(name)) {
            (Some(_), None) => {
                let successor = new
                    .keys()
                    .filter(|candidate| !old.contains_key(*candidate))
                    .filter_map(|candidate| {
                        let (base, version) = split_version(candidate);
                        (base == split_version(name).0 && version.is_some())
                            .then_some((version, *candidate))
                    })
                    .max()
                    .map(|(_, candidate)| candidate.to_owned());
                changes.push(Change::tool(name, ChangeKind::ToolRemoved { successor }));
            }
            (None, Some(_)) => changes.push(Change::tool(name, ChangeKind::ToolAdded)),
            (Some(was), Some(now)) => compare_tool(was, now, &mut changes),
            (None, None) => {}
        }
    }
    changes
}

/// `refund_order_v2` is (`refund_order`, Some(2)); a name without the suffix has no version.
fn split_version(name: &str) -> (&str, Option<u64>) {
    if let Some((base, version)) = name.rsplit_once("_v")
        && !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit())
        && let Ok(version) = version.parse()
    {
        return (base, Some(version));
    }
    (name, None)
}

fn compare_tool(was: &LockedTool, now: &LockedTool, changes: &mut Vec<Change>) {
    let tool = was.name.as_str();
    let before = changes.len();
    for (flag, old, new) in [
        ("side_effect", was.side_effect, now.side_effect),
        ("high_risk", was.high_risk, now.high_risk),
    ] {
        match (old, new) {
            (true, false) => changes.push(Change::tool(tool, ChangeKind::FlagLowered { flag })),
            (false, true) => changes.push(Change::tool(tool, ChangeKind::FlagRaised { flag })),
            _ => {}
        }
    }
    if was.description != now.description {
        changes.push(Change::tool(tool, ChangeKind::DescriptionChanged));
    }
    compare_fields(tool, "", &was.fields, &now.fields, changes);
    if changes.len() == before && was.schema_sha256 != now.schema_sha256 {
        changes.push(Change::tool(tool, ChangeKind::SchemaChanged));
    }
}

fn compare_fields(
    tool: &str,
    prefix: &str,
    was: &[LockedField],
    now: &[LockedField],
    changes: &mut Vec<Change>,
) {
    let path = |name: &str| format!("{prefix}{name}");
    let old: BTreeMap<&str, &LockedField> = was.iter().map(|f| (f.name.as_str(), f)).collect();
    let new: BTreeMap<&str, &LockedField> = now.iter().map(|f| (f.name.as_str(), f)).collect();
    let removed: Vec<&LockedField> = old
        .iter()
        .filter(|(n, _)| !new.contains_key(*n))
        .map(|(_, f)| *f)
        .collect();
    let mut added: Vec<&LockedField> = new
        .iter()
        .filter(|(n, _)| !old.contains_key(*n))
        .map(|(_, f)| *f)
        .collect();

    for gone in removed {
        let partner = added.iter().position(|a| a.shape.ty == gone.shape.ty);
        match partner {
            Some(i) => {
                let to = added.remove(i);
                changes.push(Change::field(
                    tool,
                    &path(&gone.name),
                    ChangeKind::FieldRenamed {
                        to: path(&to.name),
                        ty: gone.shape.ty.clone(),
                    },
                ));
            }
            None => changes.push(Change::field(
                tool,
                &path(&gone.name),
                ChangeKind::FieldRemoved {
                    ty: gone.shape.ty.clone(),
                },
            )),
        }
    }
    for new_field in added {
        changes.push(Change::field(
            tool,
            &path(&new_field.name),
            ChangeKind::FieldAdded {
                required: new_field.required,
                ty: new_field.shape.ty.clone(),
            },
        ));
    }
    for (name, old_field) in &old {
        let Some(new_field) = new.get(name) else {
            continue;
        };
        let here = path(name);
        match (old_field.required, new_field.required) {
            (false, true) => changes.push(Change::field(tool, &here, ChangeKind::MadeRequired)),
            (true, false) => changes.push(Change::field(tool, &here, ChangeKind::MadeOptional)),
            _ => {}
        }
        if old_field.description != new_field.description {
            changes.push(Change::field(tool, &here, ChangeKind::DescriptionChanged));
        }
        compare_shapes(tool, &here, &old_field.shape, &new_field.shape, changes);
    }
}

fn compare_shapes(tool: &str, here: &str, was: &Shape, now: &Shape, changes: &mut Vec<Change>) {
    if was.ty != now.ty {
        changes.push(Change::field(
            tool,
            here,
            ChangeKind::Retyped {
                from: was.ty.clone(),
                to: now.ty.clone(),
            },
        ));
        // Everything else about a retyped value is moot.
        return;
    }
    match (was.nullable, now.nullable) {
        (true, false) => changes.push(Change::field(tool, here, ChangeKind::NullRemoved)),
        (false, true) => changes.push(Change::field(tool, here, ChangeKind::NullAllowed)),
        _ => {}
    }
    if was.format != now.format {
        changes.push(Change::field(
            tool,
            here,
            ChangeKind::FormatChanged {
                from: was.format.clone(),
                to: now.format.clone(),
            },
        ));
    }
    match (&was.enum_values, &now.enum_values) {
        (Some(old), Some(new)) => {
            for value in old.iter().filter(|v| !new.contains(v)) {
                changes.push(Change::field(
                    tool,
                    here,
                    ChangeKind::EnumValueRemoved {
                        value: value.clone(),
                    },
                ));
            }
            for value in new.iter().filter(|v| !old.contains(v)) {
                changes.push(Change::field(
                    tool,
                    here,
                    ChangeKind::EnumValueAdded {
                        value: value.clone(),
                    },
                ));
            }
        }
        (None, Some(new)) => changes.push(Change::field(
            tool,
            here,
            ChangeKind::EnumImposed {
                values: new.clone(),
            },
        )),
        (Some(_), None) => changes.push(Change::field(tool, here, ChangeKind::EnumLifted)),
        (None, None) => {}
    }
    let keywords: BTreeSet<&String> = was
        .constraints
        .keys()
        .chain(now.constraints.keys())
        .collect();
    for keyword in keywords {
        let (from, to) = (was.constraints.get(keyword), now.constraints.get(keyword));
        if from != to {
            changes.push(Change::field(
                tool,
                here,
                ChangeKind::ConstraintChanged {
                    keyword: keyword.clone(),
                    from: from.cloned(),
                    to: to.cloned(),
                },
            ));
        }
    }
    let empty = Vec::new();
    match (&was.fields, &now.fields) {
        (None, None) => {}
        (old, new) => compare_fields(
            tool,
            &format!("{here}."),
            old.as_ref().unwrap_or(&empty),
            new.as_ref().unwrap_or(&empty),
            changes,
        ),
    }
    for (suffix, old, new) in [
        ("[]", &was.items, &now.items),
        ("{}", &was.values, &now.values),
    ] {
        let inner = format!("{here}{suffix}");
        match (old, new) {
            (Some(old), Some(new)) => compare_shapes(tool, &inner, old, new, changes),
            (Some(old), None) => changes.push(Change::field(
                tool,
                &inner,
                ChangeKind::Retyped {
                    from: old.ty.clone(),
                    to: "any".to_owned(),
                },
            )),
            (None, Some(new)) => changes.push(Change::field(
                tool,
                &inner,
                ChangeKind::Retyped {
                    from: "any".to_owned(),
                    to: new.ty.clone(),
                },
            )),
            (None, None) => {}
        }
    }
}
