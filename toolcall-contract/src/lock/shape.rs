//! The reduction of a parameters schema to the [`Shape`]s a lock file
//! keeps: what a caller relies on, and an [`Opaque`] part for what the lock
//! cannot describe.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};
use toolcall_core::Registry;
use toolcall_core::canonical::{canonical_json, digest};
use toolcall_core::schema;

use super::LOCK_FORMAT_VERSION;
use super::file::{CONSTRAINTS, LockedField, LockedTool, Lockfile, Opaque, Shape, Variant};

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
            format_version: LOCK_FORMAT_VERSION,
            tools,
        }
    }
}

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

/// Whether `keyword` restricts nothing a caller sends: an annotation, or
/// the definitions `$ref`s name.
fn inert(keyword: &str) -> bool {
    schema::is_annotation(keyword) || schema::DEFINITIONS.contains(&keyword)
}

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
        return reference_shape(schema, reference, root, visiting);
    }
    let mut reduction = Reduction::new(map);
    reduction.alternatives(map, root, visiting);
    let mut shape = reduction.settle(map);
    members(&mut shape, map, root, visiting);
    if !reduction.not_described.is_empty() {
        let mut keywords = reduction.not_described;
        keywords.sort();
        keywords.dedup();
        shape.opaque = Some(opaque(schema, keywords));
    }
    shape
}

/// The shape of a schema with a `$ref`: the target's, opaque when keywords
/// beside the reference restrict further.
fn reference_shape(
    schema: &Value,
    reference: &String,
    root: &Value,
    visiting: &mut Vec<String>,
) -> Shape {
    let beside: Vec<String> = schema
        .as_object()
        .into_iter()
        .flat_map(|map| map.keys())
        .filter(|k| *k != "$ref" && !inert(k))
        .cloned()
        .collect();
    let mut shape = if visiting.contains(reference) {
        // A recursive type: name it rather than expand it forever.
        Shape {
            ty: format!("recursive {reference}"),
            ..Shape::default()
        }
    } else if let Some(target) = schema::resolve(root, reference) {
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
    shape
}

/// What one schema object's type comes to, gathered from `type`, `enum`,
/// `const` and its alternatives before it is written as a [`Shape`].
struct Reduction {
    types: BTreeSet<String>,
    nullable: bool,
    enum_values: Option<Vec<Value>>,
    /// An alternative takes anything.
    anything: bool,
    /// The shape an alternative gave (`anyOf: [T, null]` is T), or the variants.
    shape: Shape,
    /// The keywords the lock does not describe.
    not_described: Vec<String>,
}

impl Reduction {
    fn new(map: &Map<String, Value>) -> Reduction {
        let not_described: Vec<String> = map
            .keys()
            .filter(|k| {
                !DESCRIBED.contains(&k.as_str()) && !inert(k) && !CONSTRAINTS.contains(&k.as_str())
            })
            .cloned()
            .collect();
        let mut types = BTreeSet::new();
        match map.get("type") {
            Some(Value::String(t)) => {
                types.insert(t.clone());
            }
            Some(Value::Array(list)) => {
                types.extend(list.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
        let nullable = types.remove("null");
        let enum_values = match (map.get("enum"), map.get("const")) {
            (Some(Value::Array(values)), _) => Some(values.clone()),
            (None, Some(value)) => Some(vec![value.clone()]),
            _ => None,
        };
        Reduction {
            types,
            nullable,
            enum_values,
            anything: false,
            shape: Shape::default(),
            not_described,
        }
    }

    /// Alternatives: an enumeration written as `oneOf` constants, an
    /// `Option<T>` written as `anyOf: [T, null]`, an enum whose variants
    /// carry data, or an untagged union.
    fn alternatives(&mut self, map: &Map<String, Value>, root: &Value, visiting: &mut Vec<String>) {
        let keywords: Vec<&str> = ["anyOf", "oneOf", "allOf"]
            .into_iter()
            .filter(|k| map.get(*k).and_then(Value::as_array).is_some())
            .collect();
        if keywords.len() > 1 {
            self.not_described
                .extend(keywords.iter().map(|k| (*k).to_owned()));
        }
        if let Some(Value::Array(list)) = map.get("allOf")
            && list.len() > 1
        {
            // An intersection: the lock does not merge schemas.
            self.not_described.push("allOf".to_owned());
        }
        let alternatives: Vec<&Value> = keywords
            .iter()
            .filter_map(|k| map.get(*k).and_then(Value::as_array))
            .flatten()
            .collect();
        if alternatives.is_empty() {
            return;
        }
        let one_of = keywords.contains(&"oneOf");
        let mut constants: Vec<Value> = Vec::new();
        let mut data: Vec<(Shape, Option<String>)> = Vec::new();
        for alternative in alternatives {
            let mut alt = shape_of(alternative, root, visiting);
            if alt.ty == "null" && alt.opaque.is_none() {
                self.nullable = true;
                continue;
            }
            self.nullable |= alt.nullable;
            alt.nullable = false;
            if alt.is_any() {
                self.anything = true;
            } else if alt.is_constants() {
                self.types.extend(split_types(&alt.ty));
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
            if self.enum_values.is_none() && !constants.is_empty() {
                self.enum_values = Some(constants);
            }
        } else if data.len() == 1 && constants.is_empty() && !one_of {
            // `anyOf: [T, null]` or `allOf: [T]`: T itself.
            let (only, _) = data.pop().unwrap_or_default();
            self.types.extend(split_types(&only.ty));
            self.shape = Shape {
                ty: String::new(),
                nullable: false,
                ..only
            };
            if self.enum_values.is_none() {
                self.enum_values = self.shape.enum_values.take();
            }
        } else {
            for (alt, _) in &data {
                self.types.extend(split_types(&alt.ty));
            }
            if self.enum_values.is_none() && !constants.is_empty() {
                self.enum_values = Some(constants);
            }
            self.shape.variants = Some(variants(data));
        }
    }

    /// The shape with its type, nullability and enumeration settled.
    fn settle(&mut self, map: &Map<String, Value>) -> Shape {
        let mut enum_values = self.enum_values.take();
        let types = &mut self.types;
        let mut nullable = self.nullable;
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
        let mut shape = std::mem::take(&mut self.shape);
        shape.ty = match types.len() {
            _ if self.anything => "any".to_owned(),
            0 if nullable => {
                nullable = false;
                "null".to_owned()
            }
            0 => "any".to_owned(),
            _ => std::mem::take(types)
                .into_iter()
                .collect::<Vec<_>>()
                .join("|"),
        };
        if self.anything {
            // A union with an alternative that takes anything takes anything.
            shape.variants = None;
            enum_values = None;
            nullable = false;
        }
        shape.nullable = nullable;
        shape.enum_values = enum_values.filter(|values| !values.is_empty());
        shape
    }
}

/// The format, the constraints, and the shapes of what the value holds:
/// object members, map values, tuple positions, array items.
fn members(shape: &mut Shape, map: &Map<String, Value>, root: &Value, visiting: &mut Vec<String>) {
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
                locked_field(
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
pub(crate) fn variant_keys(shapes: &[&Shape]) -> Vec<String> {
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

fn locked_field(
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
    pub(crate) fn any() -> Shape {
        Shape {
            ty: "any".to_owned(),
            ..Shape::default()
        }
    }

    /// Takes any value: no type, nothing else restricting it.
    pub(crate) fn is_any(&self) -> bool {
        self.ty == "any"
            && self.enum_values.is_none()
            && self.constraints.is_empty()
            && self.format.is_none()
            && self.is_flat()
    }

    /// Only a set of constants: an enumeration of plain values.
    pub(crate) fn is_constants(&self) -> bool {
        self.enum_values.is_some() && self.is_flat()
    }

    /// Nothing inside: no fields, items, values or variants, and nothing
    /// kept opaque.
    fn is_flat(&self) -> bool {
        self.opaque.is_none()
            && self.fields.is_none()
            && self.items.is_none()
            && self.prefix_items.is_none()
            && self.values.is_none()
            && self.variants.is_none()
    }
}
