//! The schema the model sees: the generator's, with the fields'
//! constraints and the integer types' ranges added.

use serde_json::{Map, Value};

use super::FieldMeta;

/// Adds the constraints of `fields` to the property schemas of `schema`,
/// states the range of every Rust integer type, closes the object, and drops
/// what the generator adds for Rust readers (`$schema`, `title`, the
/// struct's doc).
pub(crate) fn finish_schema(mut schema: Value, fields: &[FieldMeta]) -> Value {
    add_integer_ranges(&mut schema);
    if let Some(root) = schema.as_object_mut() {
        root.remove("$schema");
        root.remove("title");
        // The struct's own doc is about Rust; the tool's description is the model's.
        root.remove("description");
        root.insert("additionalProperties".into(), Value::Bool(false));
        if !root.contains_key("properties") {
            root.insert("properties".into(), Value::Object(Map::new()));
        }
        if let Some(Value::Object(properties)) = root.get_mut("properties") {
            for field in fields {
                let Some(Value::Object(property)) = properties.get_mut(field.name) else {
                    continue;
                };
                if !field.description.is_empty() {
                    property.insert("description".into(), field.description.into());
                }
                for constraint in field.constraints {
                    if let Some((keyword, value)) = constraint.keyword() {
                        insert_tighter(property, keyword, value);
                    }
                }
            }
        }
    }
    schema
}

/// Sets `keyword`, keeping an existing `minimum` or `maximum` that is
/// already tighter (the Rust type's own range, say).
fn insert_tighter(schema: &mut Map<String, Value>, keyword: &str, value: Value) {
    let keep_existing = match (keyword, schema.get(keyword), value.as_f64()) {
        ("minimum", Some(old), Some(new)) => old.as_f64().is_some_and(|old| old > new),
        ("maximum", Some(old), Some(new)) => old.as_f64().is_some_and(|old| old < new),
        _ => false,
    };
    if !keep_existing {
        schema.insert(keyword.into(), value);
    }
}

/// Every integer schema states its Rust type's range (schemars names the
/// type in `format` but bounds only the unsigned ones below), so that a
/// JSON Schema validator refuses what the Rust type cannot hold, as the
/// validator here does.
fn add_integer_ranges(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let is_integer = match map.get("type") {
                Some(Value::String(t)) => t == "integer",
                Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
                _ => false,
            };
            if is_integer {
                let range: Option<(Value, Value)> = match map.get("format").and_then(Value::as_str)
                {
                    Some("int8") => Some((i8::MIN.into(), i8::MAX.into())),
                    Some("int16") => Some((i16::MIN.into(), i16::MAX.into())),
                    Some("int32") => Some((i32::MIN.into(), i32::MAX.into())),
                    Some("int64" | "int") => Some((i64::MIN.into(), i64::MAX.into())),
                    // A JSON number here is at most a u64 (serde_json without
                    // arbitrary precision), so that is what an i128 can receive.
                    Some("int128") => Some((i64::MIN.into(), u64::MAX.into())),
                    Some("uint8") => Some((0.into(), u8::MAX.into())),
                    Some("uint16") => Some((0.into(), u16::MAX.into())),
                    Some("uint32") => Some((0.into(), u32::MAX.into())),
                    Some("uint64" | "uint" | "uint128") => Some((0.into(), u64::MAX.into())),
                    _ => None,
                };
                if let Some((min, max)) = range {
                    insert_tighter(map, "minimum", min);
                    insert_tighter(map, "maximum", max);
                }
            }
            map.values_mut().for_each(add_integer_ranges);
        }
        Value::Array(items) => items.iter_mut().for_each(add_integer_ranges),
        _ => {}
    }
}
