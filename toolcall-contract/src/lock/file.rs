//! The lock file's layout: what `tools.lock.json` holds, how it is written
//! and how it is read back.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::LOCK_FORMAT_VERSION;

/// The JSON Schema keywords a shape keeps as its constraints.
pub(super) const CONSTRAINTS: &[&str] = &[
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

/// The contract of every tool in a registry, as kept in `tools.lock.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Lockfile {
    /// The layout's version, [`LOCK_FORMAT_VERSION`].
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
    /// What tells it apart (see the [module docs](crate::lock)): `kind=card`,
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
                "lock file format version {found} is not supported (this version reads {LOCK_FORMAT_VERSION}); \
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
            Some(LOCK_FORMAT_VERSION) => {}
            Some(other) => return Err(LockError::UnsupportedVersion(other)),
        }
        known_members(&value)?;
        let lock: Lockfile = serde_path_to_error::deserialize(value).map_err(|error| {
            let at = error.path().to_string();
            let error = error.into_inner();
            LockError::Invalid(if at == "." {
                error
            } else {
                serde::de::Error::custom(format!("{at}: {error}"))
            })
        })?;
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

/// Refuses members the layout does not have in a field, a variant or a
/// shape, and constraints it does not know. `#[serde(flatten)]` rules out
/// `deny_unknown_fields` on fields and variants, hence this walk; the file,
/// its tools and opaque parts are checked by serde. Members of the wrong
/// kind are left to the deserializer.
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
    for (i, tool) in each(file.get("tools")) {
        let at = format!("tools[{i}]");
        for (j, field) in each(tool.get("fields")) {
            shape(field, &format!("{at}.fields[{j}]"), FIELD_MEMBERS)?;
        }
    }
    Ok(())
}
