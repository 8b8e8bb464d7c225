//! Sensitive values, kept out of every copy the pipeline makes: audit
//! records and stored results.
//!
//! A value is sensitive when its parameter is `#[arg(sensitive)]` (the whole
//! value, however deep), or when its schema, at any depth, says
//! `"writeOnly": true`: JSON Schema's word for a value that is sent but never
//! given back, which a nested type sets on a field with
//! `#[schemars(extend("writeOnly" = true))]`.

use serde_json::{Map, Value};

use crate::args::FieldMeta;

/// What stands in every copy for a sensitive value.
pub const REDACTED: &str = "[redacted]";

/// How deep the walk follows `$ref`s and combinators without going down
/// the value: a bound for schemas that refer to themselves.
const MAX_SCHEMA_HOPS: usize = 32;

/// Where a tool's sensitive values are.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Parameters marked `sensitive`: their whole value.
    top: Vec<&'static str>,
    /// The parameters' schema, when `writeOnly` appears anywhere in it.
    schema: Option<Value>,
}

impl Plan {
    /// The plan of a tool with `fields` and the parameters' `schema`.
    pub(crate) fn of(fields: &[FieldMeta], schema: Value) -> Plan {
        let top = fields
            .iter()
            .filter(|f| f.sensitive)
            .map(|f| f.name)
            .collect();
        let schema = mentions_write_only(&schema).then_some(schema);
        Plan { top, schema }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.top.is_empty() && self.schema.is_none()
    }

    /// Whether a problem found in the parameter `field` may quote a
    /// sensitive value: the parameter is `sensitive`, or its schema marks a
    /// value `writeOnly` or refers elsewhere (a `$ref` is not followed here:
    /// it is taken to hold one). Only with the tool's sensitive values in
    /// view: a tool without any answers `false` at once.
    pub(crate) fn covers(&self, field: &str) -> bool {
        if self.top.contains(&field) {
            return true;
        }
        let Some(schema) = &self.schema else {
            return false;
        };
        schema
            .get("properties")
            .and_then(|properties| properties.get(field))
            .is_some_and(|property| mentions_write_only(property) || mentions_ref(property))
    }

    /// Replaces every sensitive value in `arguments` by [`REDACTED`].
    pub(crate) fn redact(&self, arguments: &mut Value) {
        if let Value::Object(members) = arguments {
            for name in &self.top {
                if let Some(value) = members.get_mut(*name) {
                    *value = Value::from(REDACTED);
                }
            }
        }
        if let Some(schema) = &self.schema {
            walk(arguments, schema, schema, 0);
        }
    }

    /// The sensitive strings of `arguments` (at least 4 characters: a
    /// shorter one would match too much), to scrub from a copy of the
    /// tool's output.
    pub(crate) fn secrets(&self, arguments: &Value) -> Vec<String> {
        let mut redacted = arguments.clone();
        self.redact(&mut redacted);
        let mut secrets = Vec::new();
        differing_strings(arguments, &redacted, &mut secrets);
        secrets.retain(|s| s.chars().count() >= 4);
        secrets.sort_unstable();
        secrets.dedup();
        secrets
    }
}

/// Replaces, at any depth of `value`, every string equal to one of `secrets`.
pub(crate) fn scrub(value: &mut Value, secrets: &[String]) {
    match value {
        Value::String(text) if secrets.binary_search(text).is_ok() => {
            *value = Value::from(REDACTED);
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, secrets)),
        Value::Object(members) => members.values_mut().for_each(|v| scrub(v, secrets)),
        _ => {}
    }
}

/// Every string (or number, as text) of `original` that `redacted` replaced.
fn differing_strings(original: &Value, redacted: &Value, out: &mut Vec<String>) {
    match (original, redacted) {
        (Value::Array(a), Value::Array(b)) => {
            for (x, y) in a.iter().zip(b) {
                differing_strings(x, y, out);
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            for (name, x) in a {
                if let Some(y) = b.get(name) {
                    differing_strings(x, y, out);
                }
            }
        }
        (original, redacted) if original != redacted => collect_leaves(original, out),
        _ => {}
    }
}

fn collect_leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_leaves(v, out)),
        Value::Object(members) => members.values().for_each(|v| collect_leaves(v, out)),
        _ => {}
    }
}

fn mentions_write_only(schema: &Value) -> bool {
    match schema {
        Value::Object(members) => {
            members.get("writeOnly") == Some(&Value::Bool(true))
                || members.values().any(mentions_write_only)
        }
        Value::Array(items) => items.iter().any(mentions_write_only),
        _ => false,
    }
}

fn mentions_ref(schema: &Value) -> bool {
    match schema {
        Value::Object(members) => {
            members.contains_key("$ref") || members.values().any(mentions_ref)
        }
        Value::Array(items) => items.iter().any(mentions_ref),
        _ => false,
    }
}

/// Redacts `value` where `schema` (within `root`, for `$ref`s) says writeOnly.
fn walk(value: &mut Value, schema: &Value, root: &Value, hops: usize) {
    let Value::Object(keywords) = schema else {
        return;
    };
    if keywords.get("writeOnly") == Some(&Value::Bool(true)) {
        *value = Value::from(REDACTED);
        return;
    }
    if hops < MAX_SCHEMA_HOPS {
        if let Some(target) = keywords
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| resolve(root, r))
        {
            walk(value, target, root, hops + 1);
        }
        for combinator in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = keywords.get(combinator) {
                for branch in branches {
                    walk(value, branch, root, hops + 1);
                }
            }
        }
    }
    match value {
        Value::Object(members) => walk_members(members, keywords, root),
        Value::Array(items) => {
            let prefix = match keywords.get("prefixItems") {
                Some(Value::Array(prefix)) => prefix.as_slice(),
                _ => &[],
            };
            for (i, item) in items.iter_mut().enumerate() {
                if let Some(item_schema) = prefix.get(i).or_else(|| keywords.get("items")) {
                    walk(item, item_schema, root, 0);
                }
            }
        }
        _ => {}
    }
}

fn walk_members(members: &mut Map<String, Value>, keywords: &Map<String, Value>, root: &Value) {
    let properties = keywords.get("properties").and_then(Value::as_object);
    let additional = keywords.get("additionalProperties");
    for (name, member) in members.iter_mut() {
        if let Some(member_schema) = properties.and_then(|p| p.get(name)).or(additional) {
            walk(member, member_schema, root, 0);
        }
    }
}

/// A local `$ref` (`#/$defs/Card`, `#/definitions/Card`) within `root`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(schema: Value, top: Vec<&'static str>) -> Plan {
        Plan {
            top,
            schema: mentions_write_only(&schema).then_some(schema),
        }
    }

    #[test]
    fn write_only_is_redacted_at_any_depth_through_refs_and_arrays() {
        let schema = json!({
            "type": "object",
            "properties": {
                "payer": {"$ref": "#/$defs/Payer"},
                "cards": {"type": "array", "items": {"$ref": "#/$defs/Card"}},
                "note": {"type": "string"}
            },
            "$defs": {
                "Payer": {"type": "object", "properties": {"card": {"$ref": "#/$defs/Card"}, "name": {"type": "string"}}},
                "Card": {"type": "object", "properties": {"number": {"type": "string", "writeOnly": true}, "brand": {"type": "string"}}}
            }
        });
        let plan = plan(schema, vec![]);
        let mut arguments = json!({
            "payer": {"name": "Ana", "card": {"number": "4111111111111111", "brand": "visa"}},
            "cards": [{"number": "5500000000000004", "brand": "mc"}],
            "note": "4111111111111111"
        });
        plan.redact(&mut arguments);
        assert_eq!(arguments["payer"]["card"]["number"], REDACTED);
        assert_eq!(arguments["payer"]["card"]["brand"], "visa");
        assert_eq!(arguments["cards"][0]["number"], REDACTED);
        assert_eq!(arguments["payer"]["name"], "Ana");
        assert_eq!(
            arguments["note"], "4111111111111111",
            "not sensitive by schema"
        );
    }

    #[test]
    fn a_self_referring_schema_ends() {
        let schema = json!({"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}], "writeOnly": false}}, "$ref": "#/$defs/A", "properties": {"x": {"writeOnly": true}}});
        let plan = plan(schema, vec![]);
        let mut arguments = json!({"x": 1});
        plan.redact(&mut arguments);
        assert_eq!(arguments["x"], REDACTED);
    }

    #[test]
    fn secrets_are_scrubbed_from_outputs() {
        let plan = plan(json!({}), vec!["email"]);
        let arguments = json!({"email": "ana@example.com", "n": 1});
        let secrets = plan.secrets(&arguments);
        assert_eq!(secrets, ["ana@example.com"]);
        let mut output =
            json!({"sent_to": "ana@example.com", "receipt": {"to": ["ana@example.com"]}, "n": 1});
        scrub(&mut output, &secrets);
        assert_eq!(output["sent_to"], REDACTED);
        assert_eq!(output["receipt"]["to"][0], REDACTED);
        assert_eq!(output["n"], 1);
    }
}
