//! Strict validation of a tool's arguments, field by field, every problem at once.
//!
//! The `#[tool]` macro generates, for each tool, an argument struct and a
//! table of [`FieldMeta`]: one entry per parameter with its name, its
//! description and its constraints. The same table feeds the JSON Schema the
//! model sees and the validator that runs, so the two cannot drift apart.

use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use regex::Regex;
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};

/// One parameter of a tool, as the validator and the schema see it.
#[derive(Debug)]
pub struct FieldMeta {
    /// The name in JSON.
    pub name: &'static str,
    /// The doc comment of the parameter: the field's description in the
    /// schema, and the hint repeated in every error about this field.
    pub description: &'static str,
    /// Checks on the value beyond its type.
    pub constraints: &'static [Constraint],
}

/// A check on an argument's value beyond its type, declared with `#[arg(...)]`.
#[derive(Debug)]
#[non_exhaustive]
pub enum Constraint {
    /// The string must match this regular expression (`#[arg(pattern = "...")]`).
    Pattern(&'static Pattern),
    /// The number must be at least this (`#[arg(min = ...)]`).
    Minimum(Bound),
    /// The number must be at most this (`#[arg(max = ...)]`).
    Maximum(Bound),
    /// The number may not exceed the caller's policy limit of this name
    /// (`#[arg(limit = "...")]`). Checked at the policy stage, not here.
    Limit(&'static str),
}

/// A numeric bound written in a `#[arg]` attribute.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// An integer bound.
    Int(i64),
    /// A floating-point bound.
    Float(f64),
}

impl Bound {
    fn to_json(self) -> Value {
        match self {
            Bound::Int(n) => Value::from(n),
            Bound::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }

    /// `value` compared with the bound, or `None` when `value` is not a number.
    fn compare(self, value: &Value) -> Option<std::cmp::Ordering> {
        let number = value.as_number()?;
        match (self, number.as_i64()) {
            (Bound::Int(bound), Some(n)) => Some(n.cmp(&bound)),
            (Bound::Int(bound), None) => number.as_f64()?.partial_cmp(&(bound as f64)),
            (Bound::Float(bound), _) => number.as_f64()?.partial_cmp(&bound),
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Int(n) => write!(f, "{n}"),
            Bound::Float(x) => write!(f, "{x}"),
        }
    }
}

/// A regular expression compiled on first use. The macro has already checked
/// at compile time that it parses.
#[derive(Debug)]
pub struct Pattern {
    source: &'static str,
    compiled: OnceLock<Option<Regex>>,
}

impl Pattern {
    /// A pattern from its source text.
    pub const fn new(source: &'static str) -> Self {
        Pattern {
            source,
            compiled: OnceLock::new(),
        }
    }

    /// The source text, as the schema shows it.
    pub fn as_str(&self) -> &'static str {
        self.source
    }

    /// Whether `text` matches. A pattern that does not compile matches nothing.
    pub fn is_match(&self, text: &str) -> bool {
        self.compiled
            .get_or_init(|| Regex::new(self.source).ok())
            .as_ref()
            .is_some_and(|re| re.is_match(text))
    }
}

/// The argument struct of a tool: built from a JSON object, strictly.
///
/// Implemented by `#[tool]`; not meant to be written by hand.
pub trait ToolArgs: serde::Serialize + schemars::JsonSchema + Send + Sized + 'static {
    /// One entry per field, in declaration order.
    fn fields() -> &'static [FieldMeta];

    /// Builds the struct from `object`, reporting every problem into `errors`.
    /// Returns `None` when any field is missing or invalid.
    fn from_object(object: &Map<String, Value>, errors: &mut FieldErrors) -> Option<Self>;
}

/// The problems found in one set of arguments, in the order found.
#[derive(Debug, Default)]
pub struct FieldErrors {
    problems: Vec<String>,
}

impl FieldErrors {
    /// Whether nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
    }

    /// The problems, each as `field: problem (description)`.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Reads one field: its type by serde, then its constraints. A field that
    /// is absent is read as `null`, so an `Option` may be left out and
    /// anything else is reported as missing.
    pub fn field<T: DeserializeOwned>(
        &mut self,
        object: &Map<String, Value>,
        meta: &FieldMeta,
    ) -> Option<T> {
        let Some(value) = object.get(meta.name) else {
            return match T::deserialize(&Value::Null) {
                Ok(absent) => Some(absent),
                Err(_) => {
                    self.push(meta, format_args!("field required"));
                    None
                }
            };
        };
        let typed = match T::deserialize(value) {
            Ok(typed) => typed,
            Err(error) => {
                self.push(
                    meta,
                    format_args!("{}", plain_type_error(&error.to_string())),
                );
                return None;
            }
        };
        if value.is_null() {
            return Some(typed);
        }
        let before = self.problems.len();
        for constraint in meta.constraints {
            self.check(meta, constraint, value);
        }
        (self.problems.len() == before).then_some(typed)
    }

    /// Reports every member of `object` that is not a field, with the
    /// closest field name as a suggestion when one is close enough.
    pub fn unknown_fields(&mut self, object: &Map<String, Value>, fields: &[FieldMeta]) {
        for name in object.keys() {
            if fields.iter().any(|f| f.name == name) {
                continue;
            }
            let mut problem = format!("{name}: unknown field");
            match closest(name, fields.iter().map(|f| f.name)) {
                Some(suggestion) => {
                    let _ = write!(problem, ", did you mean `{suggestion}`?");
                }
                None if fields.is_empty() => problem.push_str(", this tool takes no arguments"),
                None => {
                    problem.push_str(", expected one of ");
                    for (i, field) in fields.iter().enumerate() {
                        let sep = if i == 0 { "" } else { ", " };
                        let _ = write!(problem, "{sep}`{}`", field.name);
                    }
                }
            }
            self.problems.push(problem);
        }
    }

    fn check(&mut self, meta: &FieldMeta, constraint: &Constraint, value: &Value) {
        match constraint {
            Constraint::Pattern(pattern) => {
                if let Some(text) = value.as_str()
                    && !pattern.is_match(text)
                {
                    self.push(
                        meta,
                        format_args!("{value} does not match the pattern {}", pattern.as_str()),
                    );
                }
            }
            Constraint::Minimum(bound) => {
                if bound.compare(value) == Some(std::cmp::Ordering::Less) {
                    self.push(
                        meta,
                        format_args!("{value} is less than the minimum {bound}"),
                    );
                }
            }
            Constraint::Maximum(bound) => {
                if bound.compare(value) == Some(std::cmp::Ordering::Greater) {
                    self.push(
                        meta,
                        format_args!("{value} is greater than the maximum {bound}"),
                    );
                }
            }
            Constraint::Limit(_) => {}
        }
    }

    fn push(&mut self, meta: &FieldMeta, problem: fmt::Arguments<'_>) {
        let mut line = format!("{}: {problem}", meta.name);
        if !meta.description.is_empty() {
            let _ = write!(line, " ({})", meta.description);
        }
        self.problems.push(line);
    }
}

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("; "))
    }
}

/// serde names Rust types ("expected i64"); the model knows JSON types.
fn plain_type_error(message: &str) -> String {
    const INTEGERS: [&str; 12] = [
        "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
    ];
    for ty in INTEGERS {
        if let Some(head) = message.strip_suffix(&format!("expected {ty}")) {
            let kind = if ty.starts_with('u') {
                "a non-negative integer"
            } else {
                "an integer"
            };
            return format!("{head}expected {kind} that fits in {ty}");
        }
    }
    for (ty, plain) in [
        ("f32", "a number"),
        ("f64", "a number"),
        ("a boolean", "true or false"),
    ] {
        if let Some(head) = message.strip_suffix(&format!("expected {ty}")) {
            return format!("{head}expected {plain}");
        }
    }
    message.to_owned()
}

/// The candidate closest to `name`, if it is close enough to be a likely typo
/// or a different spelling (`orderId` for `order_id`, `amount` for `amount_cents`).
fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = normalize(name);
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let have = normalize(candidate);
        let distance = if have == wanted {
            0
        } else if wanted.len() >= 3 && (have.starts_with(&wanted) || wanted.starts_with(&have)) {
            1
        } else {
            edit_distance(&wanted, &have)
        };
        let allowed = (wanted.len().max(have.len()) / 3).max(1);
        if distance <= allowed && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Adds the constraints of `fields` to the property schemas of `schema`,
/// closes the object and drops what the generator adds for Rust readers
/// (`$schema`, `title`, the struct's doc).
pub(crate) fn finish_schema(mut schema: Value, fields: &[FieldMeta]) -> Value {
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
                    match constraint {
                        Constraint::Pattern(p) => {
                            property.insert("pattern".into(), p.as_str().into());
                        }
                        Constraint::Minimum(b) => {
                            property.insert("minimum".into(), b.to_json());
                        }
                        Constraint::Maximum(b) => {
                            property.insert("maximum".into(), b.to_json());
                        }
                        Constraint::Limit(_) => {}
                    }
                }
            }
        }
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_misses_only() {
        let fields = ["order_id", "amount_cents", "currency", "reason"];
        let suggest = |name: &str| closest(name, fields.iter().copied());
        assert_eq!(suggest("orderId"), Some("order_id"));
        assert_eq!(suggest("amount"), Some("amount_cents"));
        assert_eq!(suggest("currncy"), Some("currency"));
        assert_eq!(suggest("Reason"), Some("reason"));
        assert_eq!(suggest("force"), None);
        assert_eq!(suggest("x"), None);
    }

    #[test]
    fn integer_type_errors_speak_json() {
        assert_eq!(
            plain_type_error("invalid type: floating point `25.9`, expected i64"),
            "invalid type: floating point `25.9`, expected an integer that fits in i64"
        );
        assert_eq!(
            plain_type_error("invalid type: string \"x\", expected u32"),
            "invalid type: string \"x\", expected a non-negative integer that fits in u32"
        );
    }
}
