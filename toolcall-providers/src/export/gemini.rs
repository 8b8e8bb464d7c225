//! Google Gemini: a function declaration's `parameters` in Gemini's
//! `Schema` subset ([`gemini_schema`]), or its `parametersJsonSchema`
//! ([`gemini_json_schema`]) when that subset cannot say it all.

use serde_json::{Map, Value, json};
use toolcall_core::ToolSpec;
use toolcall_core::schema::{self, Recursive, Schema, Transform};

use super::beyond_subset;
use super::bounds::json_safe_bounds;
use super::cleanup::{def_name, definitions_of, render_value_docs, simplify};
use super::words::{describe, list_values, moved_sentence};

/// One Gemini `FunctionDeclaration`: `{name, description, parameters}`, the
/// parameters rewritten by [`gemini_schema`], and left out for a tool
/// without arguments. When that rewrite is not a complete `Schema` (a node
/// without `type`, an `anyOf`, an `OBJECT` without properties, an `ARRAY`
/// without items), the declaration is `{name, description,
/// parametersJsonSchema}` instead, with the schema of [`gemini_json_schema`].
pub fn gemini_declaration(spec: &ToolSpec) -> Value {
    gemini_declaration_of(spec, spec.parameters_schema())
}

/// [`gemini_declaration`] with the schema one caller sees.
pub(crate) fn gemini_declaration_of(spec: &ToolSpec, schema: Value) -> Value {
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
/// description. See the [module documentation](crate::export) for every rule.
pub fn gemini_schema(schema: &Value) -> Value {
    let mut schema = simplify(&json_safe_bounds(schema));
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
    schema::apply(&mut Recursive(RefSiblings), &mut schema);
    schema
}

/// Gemini's rule for a `$ref`: nothing beside it but `description` and
/// `default`. Annotations there are dropped, constraints moved into the
/// description.
#[derive(Clone, Copy, Debug, Default)]
struct RefSiblings;

impl Transform for RefSiblings {
    fn transform(&mut self, schema: &mut Schema) {
        let Some(map) = schema.as_object_mut() else {
            return;
        };
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
            if let Some(value) = super::take(map, &keyword)
                && !schema::is_annotation(&keyword)
            {
                notes.push(moved_sentence(&keyword, &value));
            }
        }
        if let Some(description) = describe(map.get("description"), &notes) {
            map.insert("description".into(), description.into());
        }
    }
}

struct Gemini {
    /// The root's definitions, by the reference that names them.
    defs: Map<String, Value>,
    expanding: Vec<String>,
}

/// A node of the `Schema` being written: its keywords, the sentences its
/// description gains, and whether it accepts `null`.
#[derive(Default)]
struct Node {
    out: Map<String, Value>,
    notes: Vec<String>,
    nullable: bool,
}

impl Node {
    /// `type` in capitals, `null` as `nullable`, and a string enumeration
    /// (`enum`, `const`) as `format: "enum"`; another enumeration in words.
    fn type_and_values(&mut self, map: &Map<String, Value>) {
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
            self.nullable = true;
            types.retain(|t| t != "null");
        }
        let values: Option<Vec<Value>> = match (map.get("enum"), map.get("const")) {
            (Some(Value::Array(values)), _) => Some(values.clone()),
            (None, Some(value)) => Some(vec![value.clone()]),
            _ => None,
        };
        let values = values.map(|mut values| {
            if values.iter().any(Value::is_null) && values.len() > 1 {
                self.nullable = true;
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
                self.out.insert("type".into(), single.to_uppercase().into());
            }
            several => {
                let branches: Vec<Value> = several
                    .iter()
                    .map(|t| json!({"type": t.to_uppercase()}))
                    .collect();
                self.out.insert("anyOf".into(), Value::Array(branches));
            }
        }
        if let Some(values) = values {
            if self.gemini_type() == Some("STRING") && values.iter().all(Value::is_string) {
                self.out.insert("format".into(), "enum".into());
                self.out.insert("enum".into(), Value::Array(values));
            } else {
                self.notes
                    .push(format!("Must be one of: {}.", list_values(&values)));
            }
        }
    }

    /// The `Type` written, if it is one.
    fn gemini_type(&self) -> Option<&str> {
        self.out.get("type").and_then(Value::as_str)
    }

    /// `format` when Gemini takes it; a string's other format in words.
    fn format(&mut self, value: &Value) {
        if self.out.contains_key("format") {
            return;
        }
        let name = value.as_str().unwrap_or_default();
        let documented = self
            .gemini_type()
            .is_some_and(|t| GEMINI_FORMATS.iter().any(|(ty, f)| *ty == t && *f == name));
        if documented {
            self.out.insert("format".into(), value.clone());
        } else if self.gemini_type() == Some("STRING") {
            self.notes.push(moved_sentence("format", value));
        }
        // A number's format (`int64`, `double`, `uint8`, ...) names a Rust
        // type, whose range `minimum` and `maximum` state; Gemini takes no
        // numeric format.
    }

    /// The node, its description followed by the notes.
    fn finish(mut self, map: &Map<String, Value>) -> Value {
        if self.nullable {
            self.out.insert("nullable".into(), true.into());
        }
        if let Some(description) = describe(map.get("description"), &self.notes) {
            self.out.insert("description".into(), description.into());
        }
        Value::Object(self.out)
    }
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
        let mut node = Node::default();
        node.type_and_values(map);
        for (keyword, value) in map {
            self.keyword(&mut node, keyword, value);
        }
        node.finish(map)
    }

    /// One keyword of a schema, into `node`.
    fn keyword(&mut self, node: &mut Node, keyword: &str, value: &Value) {
        match keyword {
            "type" | "enum" | "const" | "description" | "$defs" | "definitions" => {}
            "title" | "default" | "minItems" | "maxItems" | "minLength" | "maxLength"
            | "pattern" | "minimum" | "maximum" | "minProperties" | "maxProperties"
            | "required" => {
                node.out.insert(keyword.into(), value.clone());
            }
            "format" => node.format(value),
            "properties" => {
                if let Value::Object(properties) = value {
                    let converted: Map<String, Value> = properties
                        .iter()
                        .map(|(name, property)| (name.clone(), self.node(property)))
                        .collect();
                    let order: Vec<Value> = properties.keys().cloned().map(Value::from).collect();
                    node.out
                        .insert("properties".into(), Value::Object(converted));
                    node.out
                        .insert("propertyOrdering".into(), Value::Array(order));
                }
            }
            // Closed (`false`) or open (`true`), `Schema` cannot say; a
            // map's value schema goes into the description.
            "additionalProperties" if value.is_object() => {
                let values = self.node(value);
                node.notes.push(format!(
                    "An object with any member names; every member's value is {}.",
                    Value::to_string(&values)
                ));
            }
            "additionalProperties" => {}
            "items" if value.is_object() => {
                node.out.insert(keyword.into(), self.node(value));
            }
            "anyOf" | "oneOf" => self.any_of(node, keyword, value),
            _ if schema::is_annotation(keyword) => {}
            "items" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" | "uniqueItems"
            | "minContains" | "maxContains" => node.notes.push(moved_sentence(keyword, value)),
            _ if beyond_subset(keyword) => node.notes.push(moved_sentence(keyword, value)),
            // Unknown keywords constrain nothing.
            _ => {}
        }
    }

    /// `anyOf`, or `oneOf` said as an `anyOf` whose description asks for
    /// exactly one; a `{type: "null"}` branch as `nullable`.
    fn any_of(&mut self, node: &mut Node, keyword: &str, value: &Value) {
        let Value::Array(branches) = value else {
            return;
        };
        let mut converted = Vec::new();
        for branch in branches {
            if branch.get("type") == Some(&json!("null"))
                && branch.as_object().is_some_and(|b| b.len() == 1)
            {
                node.nullable = true;
            } else {
                converted.push(self.node(branch));
            }
        }
        if keyword == "oneOf" && converted.len() > 1 {
            node.notes
                .push("Must match exactly one of the alternatives.".into());
        }
        match node.out.get_mut("anyOf") {
            Some(Value::Array(existing)) => existing.extend(converted),
            _ => {
                node.out.insert("anyOf".into(), Value::Array(converted));
            }
        }
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
