//! The clean-up every rewrite into a provider's subset starts from, and
//! what the rewrites share about references and nullability.

use serde_json::{Map, Value, json};
use toolcall_core::schema::{self, Schema, Transform};

use super::words::sentence;

/// Whether `schema` (in the strict subset) accepts `null`.
pub(crate) fn accepts_null(schema: &Value) -> bool {
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
pub(crate) fn nullable(schema: Value) -> Value {
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

/// The root's definitions, keyed by the reference that names each
/// (`#/$defs/Name`, `#/definitions/Name`).
pub(crate) fn definitions_of(schema: &Value) -> Map<String, Value> {
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
pub(crate) fn def_name(reference: &str) -> &str {
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
pub(crate) fn simplify(schema: &Value) -> Value {
    let mut schema = schema.clone();
    schema::apply(&mut Simplify, &mut schema);
    schema
}

/// The transform of [`simplify`]: every subschema first, then the schema.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Simplify;

impl Transform for Simplify {
    fn transform(&mut self, schema: &mut Schema) {
        schema::transform_subschemas(self, schema);
        if let Some(map) = schema.as_object_mut() {
            const_enum(map);
            nullable_any_of(map);
        }
    }
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
fn nullable_any_of(map: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = map.get("anyOf") else {
        return;
    };
    let is_null = |b: &Value| b == &json!({"type": "null"});
    let [a, b] = branches.as_slice() else {
        return;
    };
    let inner = match (is_null(a), is_null(b)) {
        (true, false) => b,
        (false, true) => a,
        _ => return,
    };
    let Value::Object(inner) = inner else {
        return;
    };
    let plain = inner.contains_key("type")
        && !["anyOf", "oneOf", "allOf", "$ref", "not", "if"]
            .iter()
            .any(|k| inner.contains_key(*k));
    let clash = inner
        .keys()
        .any(|k| map.contains_key(k) && !matches!(k.as_str(), "description" | "title" | "anyOf"));
    if !plain || clash {
        return;
    }
    let inner = inner.clone();
    map.remove("anyOf");
    for (keyword, value) in inner {
        // The field's own description wins over its type's doc comment.
        if !map.contains_key(&keyword) {
            map.insert(keyword, value);
        }
    }
    if let Value::Object(nullable) = nullable(Value::Object(std::mem::take(map))) {
        *map = nullable;
    }
}

/// Writes the kept value docs of every enum into its description.
pub(crate) fn render_value_docs(schema: &mut Value) {
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
