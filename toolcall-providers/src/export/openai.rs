//! OpenAI: the Chat Completions and Responses tools, and the schema in
//! strict mode ([`openai_strict_schema`]).

use std::fmt;

use serde_json::{Map, Value, json};
use toolcall_core::{ToolSpec, schema};

use super::bounds::json_safe_bounds;
use super::cleanup::{
    accepts_null, def_name, definitions_of, nullable, render_value_docs, simplify,
};
use super::words::{describe, moved_sentence};
use super::{beyond_subset, is_type};

/// The parameters and `strict` flag OpenAI gets for a tool: the strict form
/// when there is one, otherwise the schema with `strict: false`, only its
/// out-of-range bounds removed ([`json_safe_bounds`]).
fn openai_parameters(schema: Value) -> (Value, bool) {
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
    openai_chat_tool_of(spec, spec.parameters_schema())
}

/// [`openai_chat_tool`] with the schema one caller sees.
pub(crate) fn openai_chat_tool_of(spec: &ToolSpec, schema: Value) -> Value {
    let (parameters, strict) = openai_parameters(schema);
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
    openai_responses_tool_of(spec, spec.parameters_schema())
}

/// [`openai_responses_tool`] with the schema one caller sees.
pub(crate) fn openai_responses_tool_of(spec: &ToolSpec, schema: Value) -> Value {
    let (parameters, strict) = openai_parameters(schema);
    json!({
        "type": "function",
        "name": spec.name(),
        "description": spec.description(),
        "parameters": parameters,
        "strict": strict,
    })
}

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

/// `schema` in OpenAI's strict-mode subset, accepting no value the original
/// rejects except where a constraint moved into a description (see the
/// [module documentation](crate::export) for every rule), or why it cannot be.
pub fn openai_strict_schema(schema: &Value) -> Result<Value, NotStrict> {
    let mut schema = simplify(&json_safe_bounds(schema));
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
                _ if beyond_subset(keyword) => {
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
        if let Some(keyword) = map
            .keys()
            .find(|k| k.as_str() != "$ref" && !schema::is_annotation(k))
        {
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
