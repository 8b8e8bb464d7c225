//! The tools' contract, `tools.lock.json`, and the check that a change to a
//! tool does not break the models and prompts written against it.
//!
//! A model learns a tool from its definition once and keeps sending what it
//! learned. When a tool's arguments change shape under the same name, the
//! old calls start failing validation and the error rate rises without any
//! test noticing. The lock file records, for every tool, what a caller
//! relies on; [`check`] compares it with the tools as they are now and names
//! every difference, each [`Severity::Breaking`], [`Severity::Review`] or
//! [`Severity::Compatible`]. A breaking change belongs in a new version of
//! the tool (`#[tool(version = 2)]` publishes `<name>_v2`), kept beside the
//! old one until callers move.
//!
//! # The file
//!
//! ```json
//! {
//!   "format_version": 2,
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
//!           "name": "payment",
//!           "required": true,
//!           "type": "object",
//!           "variants": [
//!             {
//!               "key": "kind=card",
//!               "type": "object",
//!               "fields": [
//!                 { "name": "kind", "required": true, "type": "string", "enum": ["card"] },
//!                 { "name": "number", "required": true, "type": "string" }
//!               ]
//!             },
//!             {
//!               "key": "kind=pix",
//!               "type": "object",
//!               "fields": [
//!                 { "name": "key", "required": true, "type": "string" },
//!                 { "name": "kind", "required": true, "type": "string", "enum": ["pix"] }
//!               ]
//!             }
//!           ]
//!         }
//!       ]
//!     }
//!   ]
//! }
//! ```
//!
//! Tools are sorted by name, fields by name, variants by key, enum values by
//! their canonical JSON text and constraints by keyword, so the file only
//! changes where the contract does and reads well in a diff. Per field:
//!
//! | member | meaning |
//! |---|---|
//! | `name` | the member name the model sends |
//! | `required` | whether the member must be present |
//! | `description` | the field's description, when it has one |
//! | `type` | the JSON type: `string`, `integer`, `number`, `boolean`, `object`, `array`, `null`, several joined by `\|`, or `any` |
//! | `nullable` | present and `true` when `null` is accepted besides `type` |
//! | `format` | the schema's `format` (`email`, `uuid`, `int64`, ...) |
//! | `enum` | the accepted values, when the field is an enumeration; in a union (see `variants`), the alternatives that are constants, such as the unit variants of a Rust enum whose other variants carry data |
//! | `constraints` | the validation keywords (`minimum`, `maxLength`, `pattern`, ...) |
//! | `fields` | the members of an object |
//! | `items` | the shape of an array's elements (same members, without `name`, `required`, `description`); with `prefix_items`, of the elements after them |
//! | `prefix_items` | the shapes of a tuple's elements, by position (the schema's `prefixItems`) |
//! | `values` | the shape of a map's values |
//! | `variants` | the alternatives of a union (`oneOf`/`anyOf`) that are not constants: the variants of a Rust enum that carry data, an untagged enum's members. Each has a `key`, an optional `description` and the members of a shape |
//! | `opaque` | present when this part of the schema uses keywords the lock file does not describe (`not`, `if`, `patternProperties`, an `allOf` of several schemas, ...): `keywords` lists them and `schema_sha256` is the hex SHA-256 of this part of the schema |
//!
//! A variant's `key` is what tells it apart, so that the same variant is
//! found again after a change: `kind=card` for a variant with a required
//! member holding a constant (the tag of `#[serde(tag = "kind")]`, the same
//! member name for all variants when there is one), the member name for an
//! object with a single required member (`by_id` for the externally tagged
//! `ById(..)`), and otherwise its type (`string`, `object`, ...), followed by
//! `#<position>` when two alternatives would share a key.
//!
//! `schema_sha256` is the hex SHA-256 of the tool's parameters schema in the
//! canonical JSON form of [`toolcall_core::canonical`]: a change the members
//! above do not capture still changes it.
//!
//! # What breaks
//!
//! Under the same tool name, these changes are **breaking**: a tool removed;
//! a field removed, renamed (reported as a probable rename when exactly one
//! removed and one added field of the same object have the same shape and the
//! same `required`, otherwise as a removed and an added field), made
//! required, or added as required; a type that no longer accepts every value
//! it used to (`integer` to `string`, `number` to `integer`; `integer` to
//! `number` is not); `null` no longer accepted; an enum value removed, or an
//! enumeration imposed on a free field; a variant removed; a format added or
//! changed on a non-numeric field; a constraint added or tightened; the
//! `side_effect` or `high_risk` flag lowered (the host would stop replaying,
//! or stop asking a person, for calls it used to protect); and any change to
//! a tool whose schema has an `opaque` part, when the structure the lock
//! file does describe explains nothing of it: what the lock file cannot read,
//! it cannot vouch for.
//!
//! To **review**: a description changed, of a tool, a field or a variant
//! (units and meanings live in descriptions: a field documented in cents and
//! now in reais keeps its type and breaks every caller), and a change of the
//! schema's hash that nothing structural explains.
//!
//! **Compatible**: a new tool, an optional field added, a field made
//! optional, a type widened, `null` newly accepted, an enum value or a
//! variant added, a constraint loosened or removed, a flag raised, and an
//! object whose named members became a map whose values accept each of them.
//!
//! Paths name where a change is: `lines[].sku` is `sku` in the elements of
//! `lines`, `limits{}` the values of the map `limits`, `pair[0]` the first
//! element of a tuple, and `payment(kind=card).number` the member `number`
//! of the variant `kind=card` of `payment`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolcall_core::Registry;
use toolcall_core::canonical::{canonical_json, digest};

/// The version of the lock file's layout that this module writes and reads.
///
/// Version 2 added `variants`, `prefix_items` and `opaque`; a version 1 file
/// described enums with data and tuples too coarsely to check against, and
/// is refused with the advice to run `lock` again.
pub const FORMAT_VERSION: u64 = 2;

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

/// One alternative of a union: a variant of an enum that carries data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Variant {
    /// What tells it apart (see the [module docs](self)): `kind=card`,
    /// `by_id`, `string`, `object#2`.
    pub key: String,
    /// Its description, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What values it takes.
    #[serde(flatten)]
    pub shape: Shape,
}

/// A part of a schema that uses keywords the lock file does not describe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Opaque {
    /// The keywords not described, sorted.
    pub keywords: Vec<String>,
    /// Hex SHA-256 of the canonical JSON form of this part of the schema.
    pub schema_sha256: String,
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
    /// `nullable`), sorted by canonical JSON text. With `variants`, the
    /// alternatives of the union that are constants.
    #[serde(rename = "enum", default, skip_serializing_if = "Option::is_none")]
    pub enum_values: Option<Vec<Value>>,
    /// Validation keywords and their values, sorted by keyword.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub constraints: BTreeMap<String, Value>,
    /// The members of an object with declared properties, sorted by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<LockedField>>,
    /// The elements of an array (after the `prefix_items`, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Shape>>,
    /// The elements of a tuple, by position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_items: Option<Vec<Shape>>,
    /// The values of a map (an object whose members are not declared by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Box<Shape>>,
    /// The alternatives of a union that are not constants, sorted by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<Vec<Variant>>,
    /// Set when this part of the schema uses keywords the lock does not describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Opaque>,
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
    /// A member this layout does not have, such as a misspelt `"enums"`:
    /// ignoring it would silently drop part of the contract.
    UnknownMember {
        /// Where, as a path such as `tools[2].fields[0]`.
        at: String,
        /// The member's name.
        member: String,
    },
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
            LockError::UnknownMember { at, member } => write!(
                f,
                "not a valid tools lock file: unknown member `{member}` in {at}"
            ),
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
    /// anything else, so a file from another layout is named as such; then
    /// every member is checked against the layout, so that a misspelt one
    /// is an error rather than a part of the contract silently left out.
    pub fn parse(text: &str) -> Result<Lockfile, LockError> {
        let value: Value = serde_json::from_str(text).map_err(LockError::Json)?;
        match value.get("format_version").and_then(Value::as_u64) {
            None => return Err(LockError::MissingVersion),
            Some(FORMAT_VERSION) => {}
            Some(other) => return Err(LockError::UnsupportedVersion(other)),
        }
        known_members(&value)?;
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

// ------------------------------------------------------------ member check

const FILE_MEMBERS: &[&str] = &["format_version", "tools"];
const TOOL_MEMBERS: &[&str] = &[
    "name",
    "description",
    "side_effect",
    "high_risk",
    "schema_sha256",
    "fields",
];
const SHAPE_MEMBERS: &[&str] = &[
    "type",
    "nullable",
    "format",
    "enum",
    "constraints",
    "fields",
    "items",
    "prefix_items",
    "values",
    "variants",
    "opaque",
];
const FIELD_MEMBERS: &[&str] = &["name", "required", "description"];
const VARIANT_MEMBERS: &[&str] = &["key", "description"];

/// Refuses members the layout does not have. `#[serde(flatten)]` rules out
/// `deny_unknown_fields` on fields and variants, hence this walk. Members of
/// the wrong kind are left to the deserializer.
fn known_members(file: &Value) -> Result<(), LockError> {
    fn only(value: &Value, at: &str, allowed: &[&[&str]]) -> Result<(), LockError> {
        if let Value::Object(map) = value {
            for key in map.keys() {
                if !allowed.iter().any(|list| list.contains(&key.as_str())) {
                    return Err(LockError::UnknownMember {
                        at: at.to_owned(),
                        member: key.clone(),
                    });
                }
            }
        }
        Ok(())
    }
    fn each(value: Option<&Value>) -> impl Iterator<Item = (usize, &Value)> {
        value
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
    }
    fn shape(value: &Value, at: &str, own: &[&str]) -> Result<(), LockError> {
        only(value, at, &[own, SHAPE_MEMBERS])?;
        if let Some(Value::Object(constraints)) = value.get("constraints") {
            for key in constraints.keys() {
                if !CONSTRAINTS.contains(&key.as_str()) {
                    return Err(LockError::UnknownMember {
                        at: format!("{at}.constraints"),
                        member: key.clone(),
                    });
                }
            }
        }
        if let Some(opaque) = value.get("opaque") {
            only(
                opaque,
                &format!("{at}.opaque"),
                &[&["keywords", "schema_sha256"]],
            )?;
        }
        for (i, field) in each(value.get("fields")) {
            shape(field, &format!("{at}.fields[{i}]"), FIELD_MEMBERS)?;
        }
        for (i, variant) in each(value.get("variants")) {
            shape(variant, &format!("{at}.variants[{i}]"), VARIANT_MEMBERS)?;
        }
        for (i, item) in each(value.get("prefix_items")) {
            shape(item, &format!("{at}.prefix_items[{i}]"), &[])?;
        }
        for member in ["items", "values"] {
            if let Some(inner) = value.get(member) {
                shape(inner, &format!("{at}.{member}"), &[])?;
            }
        }
        Ok(())
    }
    only(file, "the file", &[FILE_MEMBERS])?;
    for (i, tool) in each(file.get("tools")) {
        let at = format!("tools[{i}]");
        only(tool, &at, &[TOOL_MEMBERS])?;
        for (j, field) in each(tool.get("fields")) {
            shape(field, &format!("{at}.fields[{j}]"), FIELD_MEMBERS)?;
        }
    }
    Ok(())
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

/// The keywords the lock describes, besides [`CONSTRAINTS`].
const DESCRIBED: &[&str] = &[
    "$ref",
    "type",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "format",
];

/// Keywords that annotate without restricting what is accepted.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// The shape of `schema`; `root` resolves local `$ref`s, `visiting` holds
/// the references being expanded, to stop at recursion.
fn shape_of(schema: &Value, root: &Value, visiting: &mut Vec<String>) -> Shape {
    let map = match schema {
        Value::Object(map) => map,
        // `false` accepts nothing: not something the members describe.
        Value::Bool(false) => {
            return Shape {
                opaque: Some(opaque(schema, vec!["false".to_owned()])),
                ..Shape::any()
            };
        }
        // `true` or anything else: anything goes.
        _ => return Shape::any(),
    };
    if let Some(Value::String(reference)) = map.get("$ref") {
        // Keywords beside the reference that restrict further.
        let beside: Vec<String> = map
            .keys()
            .filter(|k| *k != "$ref" && !ANNOTATIONS.contains(&k.as_str()))
            .cloned()
            .collect();
        let mut shape = if visiting.contains(reference) {
            // A recursive type: name it rather than expand it forever.
            Shape {
                ty: format!("recursive {reference}"),
                ..Shape::default()
            }
        } else if let Some(target) = resolve(root, reference) {
            visiting.push(reference.clone());
            let shape = shape_of(target, root, visiting);
            visiting.pop();
            shape
        } else {
            Shape {
                opaque: Some(opaque(schema, vec!["$ref".to_owned()])),
                ..Shape::any()
            }
        };
        if !beside.is_empty() && shape.opaque.is_none() {
            shape.opaque = Some(opaque(schema, beside));
        }
        return shape;
    }

    let mut not_described: Vec<String> = map
        .keys()
        .filter(|k| {
            !DESCRIBED.contains(&k.as_str())
                && !ANNOTATIONS.contains(&k.as_str())
                && !CONSTRAINTS.contains(&k.as_str())
        })
        .cloned()
        .collect();

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
    let mut anything = false;

    // Alternatives: an enumeration written as `oneOf` constants, an
    // `Option<T>` written as `anyOf: [T, null]`, an enum whose variants
    // carry data, or an untagged union.
    let keywords: Vec<&str> = ["anyOf", "oneOf", "allOf"]
        .into_iter()
        .filter(|k| map.get(*k).and_then(Value::as_array).is_some())
        .collect();
    if keywords.len() > 1 {
        not_described.extend(keywords.iter().map(|k| (*k).to_owned()));
    }
    if let Some(Value::Array(list)) = map.get("allOf")
        && list.len() > 1
    {
        // An intersection: the lock does not merge schemas.
        not_described.push("allOf".to_owned());
    }
    let alternatives: Vec<&Value> = keywords
        .iter()
        .filter_map(|k| map.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    if !alternatives.is_empty() {
        let one_of = keywords.contains(&"oneOf");
        let mut constants: Vec<Value> = Vec::new();
        let mut data: Vec<(Shape, Option<String>)> = Vec::new();
        for alternative in alternatives {
            let mut alt = shape_of(alternative, root, visiting);
            if alt.ty == "null" && alt.opaque.is_none() {
                nullable = true;
                continue;
            }
            nullable |= alt.nullable;
            alt.nullable = false;
            if alt.is_any() {
                anything = true;
            } else if alt.is_constants() {
                types.extend(split_types(&alt.ty));
                constants.extend(alt.enum_values.take().unwrap_or_default());
            } else {
                let description = alternative
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                data.push((alt, description));
            }
        }
        if data.is_empty() {
            if enum_values.is_none() && !constants.is_empty() {
                enum_values = Some(constants);
            }
        } else if data.len() == 1 && constants.is_empty() && !one_of {
            // `anyOf: [T, null]` or `allOf: [T]`: T itself.
            let (only, _) = data.pop().unwrap_or_default();
            types.extend(split_types(&only.ty));
            shape = Shape {
                ty: String::new(),
                nullable: false,
                ..only
            };
            if enum_values.is_none() {
                enum_values = shape.enum_values.take();
            }
        } else {
            for (alt, _) in &data {
                types.extend(split_types(&alt.ty));
            }
            if enum_values.is_none() && !constants.is_empty() {
                enum_values = Some(constants);
            }
            shape.variants = Some(variants(data));
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
        } else if map.contains_key("items") || map.contains_key("prefixItems") {
            types.insert("array".to_owned());
        }
    }
    // `integer` is a kind of `number`; a union of both is a number.
    if types.contains("number") {
        types.remove("integer");
    }

    shape.ty = match types.len() {
        _ if anything => "any".to_owned(),
        0 if nullable => {
            nullable = false;
            "null".to_owned()
        }
        0 => "any".to_owned(),
        _ => types.into_iter().collect::<Vec<_>>().join("|"),
    };
    if anything {
        // A union with an alternative that takes anything takes anything.
        shape.variants = None;
        enum_values = None;
        nullable = false;
    }
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
    if let Some(Value::Array(positions)) = map.get("prefixItems") {
        shape.prefix_items = Some(
            positions
                .iter()
                .map(|item| shape_of(item, root, visiting))
                .collect(),
        );
    }
    if let Some(items @ (Value::Object(_) | Value::Bool(true))) = map.get("items") {
        shape.items = Some(Box::new(shape_of(items, root, visiting)));
    }
    if !not_described.is_empty() {
        not_described.sort();
        not_described.dedup();
        shape.opaque = Some(opaque(schema, not_described));
    }
    shape
}

fn opaque(schema: &Value, keywords: Vec<String>) -> Opaque {
    Opaque {
        keywords,
        schema_sha256: digest(schema),
    }
}

/// Keys the alternatives of a union (see the module docs) and sorts them by key.
fn variants(alternatives: Vec<(Shape, Option<String>)>) -> Vec<Variant> {
    let shapes: Vec<&Shape> = alternatives.iter().map(|(shape, _)| shape).collect();
    let keys = variant_keys(&shapes);
    let mut variants: Vec<Variant> = alternatives
        .into_iter()
        .zip(keys)
        .map(|((shape, description), key)| Variant {
            key,
            description,
            shape,
        })
        .collect();
    variants.sort_by(|a, b| a.key.cmp(&b.key));
    variants
}

/// The key of each alternative, in order.
fn variant_keys(shapes: &[&Shape]) -> Vec<String> {
    // Members that hold a single constant and are required: tags.
    let tags = |shape: &Shape| -> BTreeMap<String, String> {
        shape
            .fields
            .iter()
            .flatten()
            .filter(|f| f.required && f.shape.fields.is_none())
            .filter_map(|f| match f.shape.enum_values.as_deref() {
                Some([value]) => Some((f.name.clone(), key_text(value))),
                _ => None,
            })
            .collect()
    };
    let all_tags: Vec<BTreeMap<String, String>> = shapes.iter().map(|s| tags(s)).collect();
    // The tag member all object alternatives share, if there is one.
    let shared: Option<&String> = all_tags
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| t.keys().collect::<BTreeSet<_>>())
        .reduce(|a, b| a.intersection(&b).copied().collect())
        .and_then(|common| common.into_iter().next());
    let base: Vec<String> = shapes
        .iter()
        .zip(&all_tags)
        .map(|(shape, tags)| {
            let tag = shared
                .and_then(|name| tags.get_key_value(name))
                .or_else(|| tags.iter().next());
            if let Some((name, value)) = tag {
                return format!("{name}={value}");
            }
            match shape.fields.as_deref() {
                Some([only]) if only.required => only.name.clone(),
                _ => shape.ty.clone(),
            }
        })
        .collect();
    base.iter()
        .enumerate()
        .map(|(i, key)| {
            if base.iter().filter(|k| *k == key).count() > 1 {
                format!("{key}#{i}")
            } else {
                key.clone()
            }
        })
        .collect()
}

/// A constant as it appears in a key: a string bare, anything else as JSON.
fn key_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => canonical_json(other),
    }
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

    /// Takes any value: no type, nothing else restricting it.
    fn is_any(&self) -> bool {
        self.ty == "any"
            && self.opaque.is_none()
            && self.enum_values.is_none()
            && self.constraints.is_empty()
            && self.format.is_none()
            && self.fields.is_none()
            && self.items.is_none()
            && self.prefix_items.is_none()
            && self.values.is_none()
            && self.variants.is_none()
    }

    /// Only a set of constants: an enumeration of plain values.
    fn is_constants(&self) -> bool {
        self.enum_values.is_some()
            && self.opaque.is_none()
            && self.fields.is_none()
            && self.items.is_none()
            && self.prefix_items.is_none()
            && self.values.is_none()
            && self.variants.is_none()
    }

    /// The shape as a list of alternatives: its variants, nothing for a
    /// plain enumeration (its values are compared as such), or itself as
    /// the only alternative, keyed as it would be in a union.
    fn alternatives(&self) -> Cow<'_, [Variant]> {
        if let Some(variants) = &self.variants {
            return Cow::Borrowed(variants);
        }
        if self.is_constants() {
            return Cow::Borrowed(&[]);
        }
        let key = variant_keys(&[self]).pop().unwrap_or_default();
        Cow::Owned(vec![Variant {
            key,
            description: None,
            shape: Shape {
                nullable: false,
                ..self.clone()
            },
        }])
    }

    /// The shape of the tuple element at `index`.
    fn position(&self, index: usize) -> Shape {
        self.prefix_items
            .as_ref()
            .and_then(|items| items.get(index))
            .cloned()
            .or_else(|| self.items.as_deref().cloned())
            .unwrap_or_else(Shape::any)
    }

    /// Every opaque part inside, with its path below `here`.
    fn opaque_parts<'a>(&'a self, here: &str, out: &mut Vec<(String, &'a Opaque)>) {
        if let Some(opaque) = &self.opaque {
            out.push((here.to_owned(), opaque));
        }
        for field in self.fields.iter().flatten() {
            field
                .shape
                .opaque_parts(&format!("{here}.{}", field.name), out);
        }
        for variant in self.variants.iter().flatten() {
            variant
                .shape
                .opaque_parts(&format!("{here}({})", variant.key), out);
        }
        for (i, item) in self.prefix_items.iter().flatten().enumerate() {
            item.opaque_parts(&format!("{here}[{i}]"), out);
        }
        if let Some(items) = &self.items {
            items.opaque_parts(&format!("{here}[]"), out);
        }
        if let Some(values) = &self.values {
            values.opaque_parts(&format!("{here}{{}}"), out);
        }
    }
}

// ------------------------------------------------------------------ changes

/// One difference between the locked contract and the current one.
///
/// Its `Display` names the tool, the field (as a path, see the
/// [module docs](self)) and what changed.
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

/// How much a change matters to callers written against the locked contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// A caller may now fail: the change needs a new tool version.
    Breaking,
    /// Nothing a caller sends is refused, but what it means may have
    /// changed: a description (units, meanings), or a schema change the lock
    /// file does not describe. A person should read it.
    Review,
    /// Callers are unaffected.
    Compatible,
}

impl Severity {
    /// `breaking`, `review` or `compatible`: the prefix `check` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Breaking => "breaking",
            Severity::Review => "review",
            Severity::Compatible => "compatible",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What changed. See the [module docs](self) for which kinds break callers;
/// [`Change::severity`] decides it.
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
    /// The tool's, the field's or the variant's description changed. To review.
    DescriptionChanged,
    /// A new field. Breaking when it is required.
    FieldAdded {
        /// Whether it is required.
        required: bool,
        /// Its type.
        ty: String,
    },
    /// A field that is gone, not paired with an added one as a rename. Breaking.
    FieldRemoved {
        /// Its type.
        ty: String,
    },
    /// A field gone while exactly one field of the same shape and the same
    /// `required` appeared in the same object, and no other removed field
    /// has that shape: probably a rename. Breaking.
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
    /// The JSON type changed. Breaking unless every type accepted before is
    /// still accepted (`integer` is accepted by `number`, everything by `any`).
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
    /// A variant of a union (an enum variant carrying data) is gone. Breaking.
    VariantRemoved {
        /// Its key.
        key: String,
    },
    /// A new variant of a union. Compatible.
    VariantAdded {
        /// Its key.
        key: String,
    },
    /// An object's named members became a map whose values accept each of
    /// them (a mismatch is reported on the member itself). Compatible.
    FieldsToMap {
        /// The type of the map's values.
        values: String,
    },
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
    /// A part of the schema the lock file does not describe (see
    /// [`Opaque`]) changed, appeared or went away, or the tool's schema
    /// changed while it has such a part and nothing described explains the
    /// change. Breaking, conservatively: what the lock cannot read, it
    /// cannot vouch for.
    OpaqueChanged {
        /// The keywords not described (of the current schema, or of the
        /// locked one if the part went away).
        keywords: Vec<String>,
        /// Whether this part's own hash differs; `false` when only the
        /// tool's hash tells that something changed.
        part_changed: bool,
    },
    /// The schema's hash differs but nothing the lock file describes
    /// explains it, and the schema has no opaque part. To review.
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
            field: (!field.is_empty()).then(|| field.to_owned()),
            kind,
        }
    }

    /// Whether the change breaks callers, needs a person's reading, or neither.
    pub fn severity(&self) -> Severity {
        let breaking = match &self.kind {
            ChangeKind::DescriptionChanged | ChangeKind::SchemaChanged => {
                return Severity::Review;
            }
            ChangeKind::ToolRemoved { .. }
            | ChangeKind::FlagLowered { .. }
            | ChangeKind::FieldRemoved { .. }
            | ChangeKind::FieldRenamed { .. }
            | ChangeKind::MadeRequired
            | ChangeKind::NullRemoved
            | ChangeKind::EnumValueRemoved { .. }
            | ChangeKind::EnumImposed { .. }
            | ChangeKind::VariantRemoved { .. }
            | ChangeKind::OpaqueChanged { .. } => true,
            ChangeKind::FieldAdded { required, .. } => *required,
            ChangeKind::Retyped { from, to } => !accepts_all(from, to),
            ChangeKind::FormatChanged { to, .. } => to.is_some() && !self.numeric_format(),
            ChangeKind::ConstraintChanged { keyword, from, to } => {
                constraint_tightened(keyword, from.as_ref(), to.as_ref())
            }
            ChangeKind::ToolAdded
            | ChangeKind::FlagRaised { .. }
            | ChangeKind::MadeOptional
            | ChangeKind::NullAllowed
            | ChangeKind::EnumValueAdded { .. }
            | ChangeKind::EnumLifted
            | ChangeKind::VariantAdded { .. }
            | ChangeKind::FieldsToMap { .. } => false,
        };
        if breaking {
            Severity::Breaking
        } else {
            Severity::Compatible
        }
    }

    /// Whether a caller written against the locked contract may now fail:
    /// such a change needs a new tool version, not the same name.
    pub fn is_breaking(&self) -> bool {
        self.severity() == Severity::Breaking
    }

    /// Whether the change keeps every call valid but should be read by a
    /// person: a description (the unit of an amount lives there), or a
    /// schema change the lock file does not describe.
    pub fn needs_review(&self) -> bool {
        self.severity() == Severity::Review
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

/// Whether every value of the types `from` (joined by `|`) is of one of the
/// types `to`: `integer` is a `number`, and `any` takes everything.
fn accepts_all(from: &str, to: &str) -> bool {
    let to: BTreeSet<&str> = to.split('|').collect();
    if to.contains("any") {
        return true;
    }
    from.split('|')
        .all(|t| t != "any" && (to.contains(t) || (t == "integer" && to.contains("number"))))
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
            ChangeKind::DescriptionChanged => f.write_str(
                "description changed; check that the meaning (a unit, a format) did not",
            ),
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
                "renamed? to `{to}` (removed, and `{to}` added with the same shape, {ty})"
            ),
            ChangeKind::MadeRequired => f.write_str("now required (was optional)"),
            ChangeKind::MadeOptional => f.write_str("now optional (was required)"),
            ChangeKind::Retyped { from, to } if accepts_all(from, to) => {
                write!(f, "widened from {from} to {to}")
            }
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
            ChangeKind::VariantRemoved { key } => write!(
                f,
                "variant `{key}` removed; calls that send it are now rejected"
            ),
            ChangeKind::VariantAdded { key } => write!(f, "variant `{key}` added"),
            ChangeKind::FieldsToMap { values } => write!(
                f,
                "named members became a map of {values}, which accepts each of them"
            ),
            ChangeKind::ConstraintChanged { keyword, from, to } => write!(
                f,
                "`{keyword}` changed from {} to {}",
                show_opt(from.as_ref()),
                show_opt(to.as_ref())
            ),
            ChangeKind::OpaqueChanged {
                keywords,
                part_changed,
            } => {
                let keywords = keywords
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                if *part_changed {
                    write!(
                        f,
                        "a part of the schema the lock file cannot describe ({keywords}) changed; \
                         treated as breaking: review it"
                    )
                } else {
                    write!(
                        f,
                        "parameters schema changed (its hash differs) and this part uses keywords \
                         the lock file cannot describe ({keywords}); treated as breaking: review it"
                    )
                }
            }
            ChangeKind::SchemaChanged => f.write_str(
                "parameters schema changed (its hash differs) in a way the lock file does not \
                 describe field by field; review it",
            ),
        }
    }
}

/// Every difference between the `locked` contract and the `current` one,
/// tool by tool in name order, each with its [`Change::severity`]. New
/// tools and other compatible changes are listed too, so the lock file can
/// be brought up to date.
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
    // The hash covers the parameters only: whether the comparison of what
    // the lock describes of them found anything decides the notice below,
    // whatever was said about the flags and the tool's description.
    let before = changes.len();
    compare_fields(tool, "", &was.fields, &now.fields, changes);
    if changes.len() == before && was.schema_sha256 != now.schema_sha256 {
        let mut opaque = Vec::new();
        for field in now.fields.iter().chain(&was.fields) {
            field.shape.opaque_parts(&field.name, &mut opaque);
        }
        match opaque.first() {
            Some((path, part)) => changes.push(Change::field(
                tool,
                path,
                ChangeKind::OpaqueChanged {
                    keywords: part.keywords.clone(),
                    part_changed: false,
                },
            )),
            None => changes.push(Change::tool(tool, ChangeKind::SchemaChanged)),
        }
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

    // A rename is guessed only when it is the one reading: the same shape
    // and the same `required` on both sides, one field each.
    let alike = |a: &LockedField, b: &LockedField| a.required == b.required && a.shape == b.shape;
    let mut renamed: Vec<(&LockedField, &LockedField)> = Vec::new();
    for gone in &removed {
        let partners: Vec<&&LockedField> = added.iter().filter(|a| alike(gone, a)).collect();
        if let [partner] = partners[..]
            && removed.iter().filter(|r| alike(r, partner)).count() == 1
        {
            renamed.push((gone, partner));
        }
    }
    added.retain(|a| !renamed.iter().any(|(_, to)| std::ptr::eq(*to, *a)));
    for gone in removed {
        match renamed.iter().find(|(from, _)| std::ptr::eq(*from, gone)) {
            Some((_, to)) => changes.push(Change::field(
                tool,
                &path(&gone.name),
                ChangeKind::FieldRenamed {
                    to: path(&to.name),
                    ty: gone.shape.ty.clone(),
                },
            )),
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
    let change = |kind: ChangeKind| Change::field(tool, here, kind);
    if now.is_any() {
        // A value that now may be anything accepts what it used to.
        if !was.is_any() {
            changes.push(change(ChangeKind::Retyped {
                from: was.ty.clone(),
                to: now.ty.clone(),
            }));
        }
        return;
    }
    if was.opaque != now.opaque {
        let keywords = now.opaque.as_ref().or(was.opaque.as_ref());
        changes.push(change(ChangeKind::OpaqueChanged {
            keywords: keywords.map(|o| o.keywords.clone()).unwrap_or_default(),
            part_changed: true,
        }));
    }
    let union = was.variants.is_some() || now.variants.is_some();
    // In a union the variants tell what changed better than the joined types.
    if !union && was.ty != now.ty {
        changes.push(change(ChangeKind::Retyped {
            from: was.ty.clone(),
            to: now.ty.clone(),
        }));
        if !accepts_all(&was.ty, &now.ty) {
            // Everything else about a retyped value is moot.
            return;
        }
    }
    match (was.nullable, now.nullable) {
        (true, false) => changes.push(change(ChangeKind::NullRemoved)),
        (false, true) => changes.push(change(ChangeKind::NullAllowed)),
        _ => {}
    }
    if was.format != now.format {
        changes.push(change(ChangeKind::FormatChanged {
            from: was.format.clone(),
            to: now.format.clone(),
        }));
    }
    let none = Vec::new();
    match (&was.enum_values, &now.enum_values) {
        // In a union, the constants are alternatives like the variants:
        // each one gone or new is reported on its own.
        (old, new) if old.is_some() && new.is_some() || union => {
            let (old, new) = (old.as_ref().unwrap_or(&none), new.as_ref().unwrap_or(&none));
            for value in old.iter().filter(|v| !new.contains(v)) {
                changes.push(change(ChangeKind::EnumValueRemoved {
                    value: value.clone(),
                }));
            }
            for value in new.iter().filter(|v| !old.contains(v)) {
                changes.push(change(ChangeKind::EnumValueAdded {
                    value: value.clone(),
                }));
            }
        }
        (None, Some(new)) => changes.push(change(ChangeKind::EnumImposed {
            values: new.clone(),
        })),
        (Some(_), None) => changes.push(change(ChangeKind::EnumLifted)),
        (_, _) => {}
    }
    let keywords: BTreeSet<&String> = was
        .constraints
        .keys()
        .chain(now.constraints.keys())
        .collect();
    for keyword in keywords {
        let (from, to) = (was.constraints.get(keyword), now.constraints.get(keyword));
        if from != to {
            changes.push(change(ChangeKind::ConstraintChanged {
                keyword: keyword.clone(),
                from: from.cloned(),
                to: to.cloned(),
            }));
        }
    }
    if union {
        compare_variants(
            tool,
            here,
            &was.alternatives(),
            &now.alternatives(),
            changes,
        );
        return;
    }

    let empty = Vec::new();
    let became_map = now.fields.is_none() && was.values.is_none();
    match (&was.fields, &now.values) {
        (Some(old), Some(values)) if became_map => {
            // A struct became a map: each member the callers send must
            // still be accepted as one of its values.
            for field in old {
                compare_shapes(
                    tool,
                    &format!("{here}.{}", field.name),
                    &field.shape,
                    values,
                    changes,
                );
            }
            changes.push(change(ChangeKind::FieldsToMap {
                values: values.ty.clone(),
            }));
        }
        _ => {
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
            compare_inner(
                tool,
                &format!("{here}{{}}"),
                &was.values,
                &now.values,
                changes,
            );
        }
    }
    if was.prefix_items.is_some() || now.prefix_items.is_some() {
        let count = [&was.prefix_items, &now.prefix_items]
            .into_iter()
            .flatten()
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        for index in 0..count {
            compare_shapes(
                tool,
                &format!("{here}[{index}]"),
                &was.position(index),
                &now.position(index),
                changes,
            );
        }
    }
    compare_inner(tool, &format!("{here}[]"), &was.items, &now.items, changes);
}

/// Array elements or map values: absent means anything.
fn compare_inner(
    tool: &str,
    here: &str,
    was: &Option<Box<Shape>>,
    now: &Option<Box<Shape>>,
    changes: &mut Vec<Change>,
) {
    match (was, now) {
        (Some(old), Some(new)) => compare_shapes(tool, here, old, new, changes),
        (Some(old), None) => compare_shapes(tool, here, old, &Shape::any(), changes),
        (None, Some(new)) => compare_shapes(tool, here, &Shape::any(), new, changes),
        (None, None) => {}
    }
}

fn compare_variants(
    tool: &str,
    here: &str,
    was: &[Variant],
    now: &[Variant],
    changes: &mut Vec<Change>,
) {
    let old: BTreeMap<&str, &Variant> = was.iter().map(|v| (v.key.as_str(), v)).collect();
    let new: BTreeMap<&str, &Variant> = now.iter().map(|v| (v.key.as_str(), v)).collect();
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        changes.push(Change::field(
            tool,
            here,
            ChangeKind::VariantRemoved {
                key: (*key).to_owned(),
            },
        ));
    }
    for key in new.keys().filter(|k| !old.contains_key(*k)) {
        changes.push(Change::field(
            tool,
            here,
            ChangeKind::VariantAdded {
                key: (*key).to_owned(),
            },
        ));
    }
    for (key, old_variant) in &old {
        let Some(new_variant) = new.get(key) else {
            continue;
        };
        let inner = format!("{here}({key})");
        if old_variant.description != new_variant.description {
            changes.push(Change::field(tool, &inner, ChangeKind::DescriptionChanged));
        }
        compare_shapes(
            tool,
            &inner,
            &old_variant.shape,
            &new_variant.shape,
            changes,
        );
    }
}
