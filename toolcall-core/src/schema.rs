//! What toolcall knows of JSON Schema's structure, in one place.
//!
//! Every part of toolcall that reads or rewrites a parameters schema (the
//! registry's closed-object check, the provider exports, the lock file's
//! shape reduction) walks it the same way:
//!
//! * [`APPLICATORS`]: the keywords whose value holds subschemas, and how
//!   ([`Holds`]: one schema, an array of them, a map of them). A keyword not
//!   listed holds data (`enum`, `const`, `default`, `examples`), never a
//!   schema, and is not walked into.
//! * [`ANNOTATIONS`]: the keywords that describe without restricting what is
//!   accepted.
//! * [`subschemas`] lists a schema's direct subschemas with where each is;
//!   [`find`] searches every subschema, depth first, and names the first
//!   match by its JSON Pointer.
//! * Rewrites are [`schemars::transform::Transform`]s, as schemars' own are:
//!   [`transform_subschemas`] applies one to a schema's direct subschemas
//!   and [`Recursive`] to a schema and every subschema below it, over the
//!   keywords of [`APPLICATORS`] (schemars' own
//!   [`RecursiveTransform`](schemars::transform::RecursiveTransform) leaves
//!   out `dependentSchemas`, `dependencies`, `unevaluatedProperties` and
//!   `unevaluatedItems`).
//!
//! ```
//! use serde_json::json;
//! use toolcall_core::schema::{self, Recursive, Transform};
//!
//! let mut parameters = json!({
//!     "type": "object",
//!     "properties": {"lines": {"type": "array", "items": {"type": "object", "title": "Line"}}},
//!     "title": "Order",
//! });
//! // The first object that does not say whether it accepts other members.
//! let open = schema::find(&parameters, |map| {
//!     schema::has_type(map, "object") && !map.contains_key("additionalProperties")
//! });
//! assert_eq!(open.as_deref(), Some("/"));
//!
//! // Drop every `title`, at every depth.
//! let mut untitle = Recursive(|schema: &mut schemars::Schema| {
//!     schema.remove("title");
//! });
//! untitle.transform((&mut parameters).try_into().unwrap());
//! assert!(!parameters.to_string().contains("title"));
//! ```

use std::fmt;

use serde_json::{Map, Value};

pub use schemars::Schema;
pub use schemars::transform::Transform;

/// What the value of an applicator keyword holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Holds {
    /// One schema (`not`, `additionalProperties`, ...).
    Schema,
    /// An array of schemas (`anyOf`, `prefixItems`, ...).
    Array,
    /// A map of names to schemas (`properties`, `$defs`, ...).
    Map,
    /// One schema, or an array of them (`items`, which is an array of
    /// schemas, by position, before draft 2020-12).
    SchemaOrArray,
}

/// The keywords whose value holds subschemas, of every draft toolcall meets
/// (draft 7 and 2020-12), with what each holds.
pub const APPLICATORS: [(&str, Holds); 21] = [
    ("properties", Holds::Map),
    ("patternProperties", Holds::Map),
    ("$defs", Holds::Map),
    ("definitions", Holds::Map),
    ("dependentSchemas", Holds::Map),
    // Draft 7: a member is a schema or an array of member names (data).
    ("dependencies", Holds::Map),
    ("anyOf", Holds::Array),
    ("oneOf", Holds::Array),
    ("allOf", Holds::Array),
    ("prefixItems", Holds::Array),
    ("items", Holds::SchemaOrArray),
    ("additionalProperties", Holds::Schema),
    ("not", Holds::Schema),
    ("if", Holds::Schema),
    ("then", Holds::Schema),
    ("else", Holds::Schema),
    ("contains", Holds::Schema),
    ("propertyNames", Holds::Schema),
    ("unevaluatedProperties", Holds::Schema),
    ("unevaluatedItems", Holds::Schema),
    ("additionalItems", Holds::Schema),
];

/// The keywords that hold definitions for references rather than constrain
/// the value: members of [`APPLICATORS`] whose subschemas apply only where a
/// `$ref` names them.
pub const DEFINITIONS: [&str; 2] = ["$defs", "definitions"];

/// The keywords that annotate a schema without restricting what it accepts
/// (OpenAPI's `example` among them).
pub const ANNOTATIONS: [&str; 14] = [
    "title",
    "description",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "$schema",
    "$id",
    "$anchor",
    "contentEncoding",
    "contentMediaType",
];

/// What `keyword`'s value holds, if it is an applicator.
pub fn applicator(keyword: &str) -> Option<Holds> {
    APPLICATORS
        .iter()
        .find(|(name, _)| *name == keyword)
        .map(|(_, holds)| *holds)
}

/// Whether `keyword` only annotates.
pub fn is_annotation(keyword: &str) -> bool {
    ANNOTATIONS.contains(&keyword)
}

/// Whether the schema's `type` is `ty` or a list that includes it.
pub fn has_type(schema: &Map<String, Value>, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(types)) => types.iter().any(|t| t == ty),
        _ => false,
    }
}

/// Where a subschema is in its parent: the applicator keyword, and the
/// member name or the position inside its value when it holds several.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location<'a> {
    /// The applicator keyword.
    pub keyword: &'a str,
    /// The member name (a map) or the position (an array), if any.
    pub member: Option<Member<'a>>,
}

/// A member of an applicator's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member<'a> {
    /// A name in a map of schemas.
    Name(&'a str),
    /// A position in an array of schemas.
    Index(usize),
}

impl fmt::Display for Location<'_> {
    /// The JSON Pointer suffix: `/properties/a~1b`, `/anyOf/0`, `/items`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}", escape_pointer(self.keyword))?;
        match self.member {
            Some(Member::Name(name)) => write!(f, "/{}", escape_pointer(name)),
            Some(Member::Index(i)) => write!(f, "/{i}"),
            None => Ok(()),
        }
    }
}

/// `segment` escaped for a JSON Pointer (`~` as `~0`, `/` as `~1`).
pub(crate) fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The direct subschemas of `schema`, in keyword order, each with its
/// location. Only objects and booleans are schemas: an array of member
/// names under `dependencies` is data, and is skipped.
pub fn subschemas(schema: &Value) -> impl Iterator<Item = (Location<'_>, &Value)> {
    schema
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(move |(keyword, value)| {
            let keyword = keyword.as_str();
            let found: Vec<(Location<'_>, &Value)> = match (applicator(keyword), value) {
                (Some(Holds::Map), Value::Object(members)) => members
                    .iter()
                    .map(|(name, s)| (Some(Member::Name(name.as_str())), s))
                    .map(|(member, s)| (Location { keyword, member }, s))
                    .collect(),
                (Some(Holds::Array | Holds::SchemaOrArray), Value::Array(schemas)) => schemas
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        (
                            Location {
                                keyword,
                                member: Some(Member::Index(i)),
                            },
                            s,
                        )
                    })
                    .collect(),
                (Some(Holds::Schema | Holds::SchemaOrArray), _) => {
                    vec![(
                        Location {
                            keyword,
                            member: None,
                        },
                        value,
                    )]
                }
                _ => Vec::new(),
            };
            found
                .into_iter()
                .filter(|(_, s)| s.is_object() || s.is_boolean())
        })
}

/// Calls `f` on each direct subschema held by a schema object's members,
/// mutably, in keyword order.
fn for_each_member_schema_mut(map: &mut Map<String, Value>, f: &mut dyn FnMut(&mut Value)) {
    for (keyword, value) in map.iter_mut() {
        let children: Vec<&mut Value> = match (applicator(keyword), value) {
            (Some(Holds::Map), Value::Object(members)) => members.values_mut().collect(),
            (Some(Holds::Array | Holds::SchemaOrArray), Value::Array(schemas)) => {
                schemas.iter_mut().collect()
            }
            (Some(Holds::Schema | Holds::SchemaOrArray), value) => vec![value],
            _ => Vec::new(),
        };
        children
            .into_iter()
            .filter(|s| s.is_object() || s.is_boolean())
            .for_each(&mut *f);
    }
}

/// Applies `t` to each direct subschema of `schema` (every keyword of
/// [`APPLICATORS`]): what [`schemars::transform::transform_subschemas`]
/// does, over the full list.
pub fn transform_subschemas<T: Transform + ?Sized>(t: &mut T, schema: &mut Schema) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    for_each_member_schema_mut(map, &mut |child| {
        if let Ok(child) = <&mut Schema>::try_from(child) {
            t.transform(child);
        }
    });
}

/// A transform of one schema applied to it and then to every subschema
/// below it, depth first, the parent before its children (as
/// [`RecursiveTransform`](schemars::transform::RecursiveTransform), over
/// every keyword of [`APPLICATORS`]).
#[derive(Clone, Debug)]
pub struct Recursive<T>(pub T);

impl<T: Transform> Transform for Recursive<T> {
    fn transform(&mut self, schema: &mut Schema) {
        self.0.transform(schema);
        transform_subschemas(self, schema);
    }
}

/// Applies `t` to `schema` when it is a schema (an object or a boolean).
pub fn apply(t: &mut impl Transform, schema: &mut Value) {
    if let Ok(schema) = <&mut Schema>::try_from(schema) {
        t.transform(schema);
    }
}

/// The JSON Pointer (`/` for the root) of the first schema object under
/// `schema`, `schema` itself included, that `matches`: depth first, each
/// parent before its children, in keyword order.
pub fn find(
    schema: &Value,
    mut matches: impl FnMut(&Map<String, Value>) -> bool,
) -> Option<String> {
    fn walk(
        schema: &Value,
        path: &mut String,
        matches: &mut dyn FnMut(&Map<String, Value>) -> bool,
    ) -> bool {
        let Value::Object(map) = schema else {
            return false;
        };
        if matches(map) {
            return true;
        }
        for (location, child) in subschemas(schema) {
            let len = path.len();
            path.push_str(&location.to_string());
            if walk(child, path, matches) {
                return true;
            }
            path.truncate(len);
        }
        false
    }
    let mut path = String::new();
    walk(schema, &mut path, &mut matches).then(|| {
        if path.is_empty() {
            "/".to_owned()
        } else {
            path
        }
    })
}

/// The target of a local reference such as `#/$defs/Line` in `root`.
pub fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    root.pointer(reference.strip_prefix('#')?)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subschemas_are_named_by_their_pointer() {
        let schema = json!({
            "properties": {"a/b": {"type": "string"}},
            "anyOf": [{"type": "null"}, true],
            "items": {"type": "integer"},
            "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
            "enum": [{"type": "object"}],
        });
        let found: Vec<String> = subschemas(&schema)
            .map(|(location, _)| location.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "/properties/a~1b",
                "/anyOf/0",
                "/anyOf/1",
                "/items",
                "/dependencies/c"
            ]
        );
    }

    #[test]
    fn find_reaches_every_applicator_and_never_data() {
        let schema = json!({
            "enum": [{"deep": true}],
            "default": {"deep": true},
            "unevaluatedProperties": {"items": [{"x": 1}, {"deep": true}]},
        });
        let deep = |map: &Map<String, Value>| map.contains_key("deep");
        assert_eq!(
            find(&schema, deep).as_deref(),
            Some("/unevaluatedProperties/items/1")
        );
        assert_eq!(find(&json!({"deep": 1}), deep).as_deref(), Some("/"));
        assert_eq!(find(&json!({"const": {"deep": 1}}), deep), None);
    }

    #[test]
    fn recursive_reaches_what_schemars_does_not() {
        let mut schema = json!({
            "dependentSchemas": {"a": {"title": "x"}},
            "unevaluatedItems": {"title": "x"},
            "title": "x",
        });
        apply(
            &mut Recursive(|s: &mut Schema| {
                s.remove("title");
            }),
            &mut schema,
        );
        assert_eq!(
            schema,
            json!({"dependentSchemas": {"a": {}}, "unevaluatedItems": {}})
        );
    }

    #[test]
    fn local_references_resolve() {
        let root = json!({"$defs": {"Line": {"type": "object"}}});
        assert_eq!(
            resolve(&root, "#/$defs/Line"),
            Some(&json!({"type": "object"}))
        );
        assert_eq!(resolve(&root, "other.json#/Line"), None);
    }
}
