//! Strict validation of a tool's arguments, field by field, every problem at once.
//!
//! The `#[tool]` macro generates, for each tool, an argument struct and a
//! table of [`FieldMeta`]: one entry per parameter with its name, its
//! description and its constraints. The same table feeds the JSON Schema the
//! model sees and the validator that runs, so the two cannot drift apart.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

use regex::Regex;
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};

use crate::suggest::closest;

mod read;
mod schema;

#[cfg(test)]
use read::rsplit_expected;
use read::{PlainStr, Problem, plain_string, plain_type_error, push_quoted, read_value};
pub(crate) use schema::finish_schema;

/// One parameter of a tool, as the validator and the schema see it.
#[derive(Debug)]
pub struct FieldMeta {
    /// The name in JSON (the parameter's name, or its `rename`).
    pub name: &'static str,
    /// The doc comment of the parameter: the field's description in the
    /// schema, and the hint repeated in every error about this field.
    pub description: &'static str,
    /// Checks on the value beyond its type.
    pub constraints: &'static [Constraint],
    /// Whether the value is kept out of audit records and logs.
    pub sensitive: bool,
    /// The kind of resource this parameter names (`#[arg(resource)]`):
    /// side-effecting calls whose values of one kind are equal run their
    /// check and handler one at a time, across every process sharing the store.
    pub resource: Option<&'static str>,
}

/// A check on an argument's value beyond its type, declared with `#[arg(...)]`.
///
/// Each one is both a JSON Schema keyword and a runtime check, defined side
/// by side here, so what the model is told and what the code enforces come
/// from one declaration. A constraint applies only to values of its JSON type
/// (a length to strings, `minimum` to numbers), as in JSON Schema.
#[derive(Debug)]
#[non_exhaustive]
pub enum Constraint {
    /// `pattern`: the string must contain a match of this regular expression.
    Pattern(&'static Pattern),
    /// `minimum`: the number must be at least this.
    Minimum(Bound),
    /// `maximum`: the number must be at most this.
    Maximum(Bound),
    /// `exclusiveMinimum`: the number must be greater than this.
    ExclusiveMinimum(Bound),
    /// `exclusiveMaximum`: the number must be less than this.
    ExclusiveMaximum(Bound),
    /// `minLength`: the string must have at least this many characters.
    MinLength(usize),
    /// `maxLength`: the string must have at most this many characters.
    MaxLength(usize),
    /// `minItems`: the list must have at least this many items.
    MinItems(usize),
    /// `maxItems`: the list must have at most this many items.
    MaxItems(usize),
    /// `format`: the string must be of this format.
    Format(StringFormat),
    /// The number may not exceed the caller's policy limit of this name
    /// (`#[arg(limit = "...")]`). No schema keyword; checked at the policy
    /// stage, against the caller's [`Policy`](crate::Policy).
    Limit(&'static str),
}

impl Constraint {
    /// The JSON Schema keyword and value this constraint adds to the field's schema.
    pub fn keyword(&self) -> Option<(&'static str, Value)> {
        Some(match self {
            Constraint::Pattern(p) => ("pattern", p.as_str().into()),
            Constraint::Minimum(b) => ("minimum", b.to_json()),
            Constraint::Maximum(b) => ("maximum", b.to_json()),
            Constraint::ExclusiveMinimum(b) => ("exclusiveMinimum", b.to_json()),
            Constraint::ExclusiveMaximum(b) => ("exclusiveMaximum", b.to_json()),
            Constraint::MinLength(n) => ("minLength", (*n).into()),
            Constraint::MaxLength(n) => ("maxLength", (*n).into()),
            Constraint::MinItems(n) => ("minItems", (*n).into()),
            Constraint::MaxItems(n) => ("maxItems", (*n).into()),
            Constraint::Format(f) => ("format", f.as_str().into()),
            Constraint::Limit(_) => return None,
        })
    }

    /// What is wrong with `value`, if anything.
    pub fn violation(&self, value: &Value) -> Option<String> {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Constraint::Pattern(p) => {
                let text = value.as_str()?;
                (!p.is_match(text))
                    .then(|| format!("{value} does not match the pattern {}", p.as_str()))
            }
            Constraint::Minimum(b) => {
                (b.compare(value)? == Less).then(|| format!("{value} is less than the minimum {b}"))
            }
            Constraint::Maximum(b) => (b.compare(value)? == Greater)
                .then(|| format!("{value} is greater than the maximum {b}")),
            Constraint::ExclusiveMinimum(b) => matches!(b.compare(value)?, Less | Equal)
                .then(|| format!("{value} must be greater than {b}")),
            Constraint::ExclusiveMaximum(b) => matches!(b.compare(value)?, Greater | Equal)
                .then(|| format!("{value} must be less than {b}")),
            Constraint::MinLength(n) => {
                let len = value.as_str()?.chars().count();
                (len < *n).then(|| format!("{len} characters, fewer than the minimum {n}"))
            }
            Constraint::MaxLength(n) => {
                let len = value.as_str()?.chars().count();
                (len > *n).then(|| format!("{len} characters, more than the maximum {n}"))
            }
            Constraint::MinItems(n) => {
                let len = value.as_array()?.len();
                (len < *n).then(|| format!("{len} items, fewer than the minimum {n}"))
            }
            Constraint::MaxItems(n) => {
                let len = value.as_array()?.len();
                (len > *n).then(|| format!("{len} items, more than the maximum {n}"))
            }
            Constraint::Format(f) => {
                let text = value.as_str()?;
                (!f.accepts(text)).then(|| format!("{value} is not a valid {}", f.as_str()))
            }
            Constraint::Limit(_) => None,
        }
    }

    /// Whether a string value of `text` satisfies this constraint: what
    /// [`violation`](Self::violation) says of a JSON string, without one.
    /// The constraints of numbers and lists say nothing of a string.
    fn accepts_str(&self, text: &str) -> bool {
        match self {
            Constraint::Pattern(p) => p.is_match(text),
            Constraint::MinLength(n) => text.chars().count() >= *n,
            Constraint::MaxLength(n) => text.chars().count() <= *n,
            Constraint::Format(f) => f.accepts(text),
            Constraint::Minimum(_)
            | Constraint::Maximum(_)
            | Constraint::ExclusiveMinimum(_)
            | Constraint::ExclusiveMaximum(_)
            | Constraint::MinItems(_)
            | Constraint::MaxItems(_)
            | Constraint::Limit(_) => true,
        }
    }
}

pub use crate::format::StringFormat;

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

/// A regular expression with JSON Schema's meaning: ECMA-262, read with
/// the `u` flag, as the schema's readers (providers, MCP clients, JSON
/// Schema validators) read the same text.
///
/// `#[tool]` accepts a `pattern` only where Rust's `regex` and ECMA-262 read
/// it alike, and refuses at compile time, with the fix, what they read
/// differently (inline flags, `\p{...}`, POSIX classes, `\A`, nested
/// classes, ...). The classes both have but define differently run here with
/// ECMA-262's definitions: `\d` is `[0-9]` and `\w` `[0-9A-Za-z_]` (Rust's
/// are Unicode-aware), `\s` is ECMA-262's white space and line terminators
/// (U+FEFF is one, U+0085 is not), `\b` is the ASCII word boundary, and `.`
/// is any character but `\n`, `\r`, U+2028 and U+2029. Matching is Rust's:
/// linear in the text's length, whatever a model sends. Compiled on first
/// use.
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

    /// Whether `text` contains a match. A pattern that does not compile matches nothing.
    pub fn is_match(&self, text: &str) -> bool {
        self.compiled
            .get_or_init(|| Regex::new(&ecma_meaning(self.source)).ok())
            .as_ref()
            // `find`, not `is_match`: `\B` runs as `(?-u:\B)`, which holds
            // between two bytes of one character, and `regex`'s `is_match`
            // (regex 1.13) skips such an empty match together with a longer
            // one that began before it. `find` looks for the leftmost match
            // and passes over an empty one inside a character.
            .is_some_and(|re| re.find(text).is_some())
    }
}

/// ECMA-262's `\s`: its white space and line terminators.
const ECMA_SPACE: &str = r"[\t\n\x0B\x0C\r \xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}]";
/// ECMA-262's `\S`.
const ECMA_NOT_SPACE: &str = r"[^\t\n\x0B\x0C\r \xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}]";
/// ECMA-262's `.` without the `s` flag: any character but a line terminator.
const ECMA_DOT: &str = r"[^\n\r\x{2028}\x{2029}]";

/// `source` for Rust's `regex`, with ECMA-262's `\d`, `\D`, `\w`, `\W`,
/// `\s`, `\S`, `\b`, `\B` and `.`. Inside a class, `\d`-like classes
/// become nested classes (valid Rust), and `.` stays a character.
fn ecma_meaning(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 16);
    let mut chars = source.chars().peekable();
    // How deep in `[...]` (Rust nests classes); a `]` right after a class's
    // `[` or `[^` is a character, as Rust reads it.
    let mut depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') => out.push_str("[0-9]"),
                Some('D') => out.push_str("[^0-9]"),
                Some('w') => out.push_str("[0-9A-Za-z_]"),
                Some('W') => out.push_str("[^0-9A-Za-z_]"),
                Some('s') => out.push_str(ECMA_SPACE),
                Some('S') => out.push_str(ECMA_NOT_SPACE),
                Some('b') if depth == 0 => out.push_str(r"(?-u:\b)"),
                Some('B') if depth == 0 => out.push_str(r"(?-u:\B)"),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '[' => {
                depth += 1;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
            }
            ']' if depth > 0 => {
                depth -= 1;
                out.push(']');
            }
            '.' if depth == 0 => out.push_str(ECMA_DOT),
            c => out.push(c),
        }
    }
    out
}

/// The argument struct of a tool: built from a JSON object, strictly.
///
/// Implemented by `#[tool]`; not meant to be written by hand.
pub trait ToolArgs:
    serde::Serialize + schemars::JsonSchema + Send + Sync + Sized + 'static
{
    /// One entry per field, in declaration order.
    fn fields() -> &'static [FieldMeta];

    /// Builds the struct from the members of the arguments object,
    /// reporting every problem with its declared fields into `errors`.
    /// Returns `None` when any field is missing or invalid. Members that are
    /// not fields are not its concern: the validator reports them with
    /// [`FieldErrors::unknown_fields`], and
    /// [`ToolSpec::validate_arguments`](crate::ToolSpec::validate_arguments)
    /// does both.
    fn from_members(members: &Members<'_>, errors: &mut FieldErrors) -> Option<Self>;

    /// [`from_members`](ToolArgs::from_members) of a parsed object.
    fn from_object(object: &Map<String, Value>, errors: &mut FieldErrors) -> Option<Self> {
        Self::from_members(&Members::Parsed(object), errors)
    }

    /// The field at `index` of [`fields`](ToolArgs::fields) as JSON, as it
    /// serializes in the whole struct: what the policy limits and resource
    /// locks read, without the struct's whole `Value`. `None` where the
    /// type does not say (the dispatcher then reads the whole `Value`);
    /// `#[tool]` says for every field.
    #[doc(hidden)]
    fn member(&self, index: usize) -> Option<Result<Value, serde_json::Error>> {
        let _ = index;
        None
    }
}

/// The members of an arguments object, however they arrived: parsed into a
/// map, or (the dispatcher's fast path) as the raw text of each member,
/// read straight into the field's type.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Members<'a> {
    /// A parsed object.
    Parsed(&'a Map<String, Value>),
    /// Each member's name and raw JSON text, names unique.
    Raw(&'a [(std::borrow::Cow<'a, str>, &'a serde_json::value::RawValue)]),
    /// Each member's name and value, names unique, in the text's order:
    /// read as a parsed object is, every problem reported, without the
    /// map. (The dispatcher's reading of arguments the fast path refused.)
    Values(&'a [(std::borrow::Cow<'a, str>, MemberValue<'a>)]),
}

/// A member's value in [`Members::Values`]: parsed, or a string with no
/// escapes kept as its raw text, which reads as the parsed string would
/// (the same value, the same problems) with nothing parsed or copied first.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum MemberValue<'a> {
    /// The value, parsed.
    Parsed(Value),
    /// A JSON string with no escapes, quotes and all.
    Plain(&'a str),
}

impl<'a> MemberValue<'a> {
    /// `raw`, a member's JSON text, kept as text when it is a plain string,
    /// else parsed by `parse` (`None` when that fails).
    pub(crate) fn of(raw: &'a str, parse: impl FnOnce(&'a str) -> Option<Value>) -> Option<Self> {
        match plain_string(raw) {
            Some(_) => Some(MemberValue::Plain(raw)),
            None => parse(raw).map(MemberValue::Parsed),
        }
    }

    /// The value, parsed now if it is text.
    #[cfg(test)]
    pub(crate) fn to_value(&self) -> Value {
        match self {
            MemberValue::Parsed(value) => value.clone(),
            MemberValue::Plain(raw) => {
                Value::String(plain_string(raw).unwrap_or_default().to_owned())
            }
        }
    }
}

/// `names` in the order a `serde_json::Map` holding them lists them: as
/// given where the map keeps the order of insertion, sorted where it is a
/// `BTreeMap`.
fn in_map_order<'a>(names: impl Iterator<Item = &'a str>, keeps_order: bool) -> Vec<&'a str> {
    let mut names: Vec<&str> = names.collect();
    if !keeps_order {
        names.sort_unstable();
    }
    names
}

/// Whether `serde_json::Map` keeps the order of insertion: whether some
/// crate of the application turned on `serde_json`'s `preserve_order`.
fn map_keeps_order() -> bool {
    static KEEPS: OnceLock<bool> = OnceLock::new();
    *KEEPS.get_or_init(|| {
        let mut map = Map::new();
        map.insert("b".to_owned(), Value::Null);
        map.insert("a".to_owned(), Value::Null);
        map.keys().next().is_some_and(|first| first == "b")
    })
}

/// The problems found in one set of arguments, in the order found.
#[derive(Debug, Default)]
pub struct FieldErrors {
    problems: Vec<FieldProblem>,
    /// The fast path's "not this way", with no problem to say (see
    /// [`unread`](FieldErrors::unread)).
    unread: bool,
}

/// One problem with one field: where, what, and the field's description,
/// so that the model's message and the tools that count rejections read
/// the same thing. Shown as `path: problem (description)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldProblem {
    path: Cow<'static, str>,
    problem: String,
    description: &'static str,
}

impl FieldProblem {
    /// The field, with the path inside it for a nested value
    /// (`lines[0].sku`), or the member's name for an unknown one.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong, for the model.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// The field's description, as its schema gives it (empty for a member
    /// that is no field).
    pub fn description(&self) -> &'static str {
        self.description
    }

    pub(crate) fn into_parts(self) -> (Cow<'static, str>, String, &'static str) {
        (self.path, self.problem, self.description)
    }

    fn new(path: impl Into<Cow<'static, str>>, problem: impl Into<String>) -> Self {
        FieldProblem {
            path: path.into(),
            problem: problem.into(),
            description: "",
        }
    }
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        show_problem(f, &self.path, &self.problem, self.description)
    }
}

/// `path: problem (description)`, the description left out when empty: a
/// problem as the model reads it, and as the audit shows it again.
pub(crate) fn show_problem(
    f: &mut impl fmt::Write,
    path: &str,
    problem: &str,
    description: &str,
) -> fmt::Result {
    f.write_str(path)?;
    f.write_str(": ")?;
    f.write_str(problem)?;
    if !description.is_empty() {
        f.write_str(" (")?;
        f.write_str(description)?;
        f.write_str(")")?;
    }
    Ok(())
}

impl FieldErrors {
    /// Whether nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty() && !self.unread
    }

    /// The fast path's "not this way": no message (none is made), for a
    /// call the full reading then reports.
    pub(crate) fn unread() -> Self {
        FieldErrors {
            problems: Vec::new(),
            unread: true,
        }
    }

    pub(crate) fn not_an_object() -> Self {
        FieldErrors {
            problems: vec![FieldProblem::new("arguments", "must be a JSON object")],
            unread: false,
        }
    }

    /// The text the model reads, as `Display` shows it, written into room
    /// made for it at once (straight into the `String`, not through a
    /// `Formatter`'s calls of its writer).
    pub(crate) fn text(&self) -> String {
        let size: usize = (self.problems.iter().take(MAX_PROBLEMS_SHOWN))
            .map(|p| p.path.len() + p.problem.len() + p.description.len() + 8)
            .sum();
        let mut text = String::with_capacity(size + 32);
        let _ = self.write_to(&mut text);
        text
    }

    /// Every problem, `; `-separated; past the first 20, only their number
    /// (a model that sent 5,000 unknown members gets a bounded answer).
    fn write_to(&self, out: &mut impl fmt::Write) -> fmt::Result {
        for (i, problem) in self.problems.iter().take(MAX_PROBLEMS_SHOWN).enumerate() {
            if i > 0 {
                out.write_str("; ")?;
            }
            show_problem(out, &problem.path, &problem.problem, problem.description)?;
        }
        if self.problems.len() > MAX_PROBLEMS_SHOWN {
            write!(
                out,
                "; and {} more problems",
                self.problems.len() - MAX_PROBLEMS_SHOWN
            )?;
        }
        Ok(())
    }

    pub(crate) fn into_problems(self) -> Vec<FieldProblem> {
        self.problems
    }

    /// The problems, in the order found; each shows as
    /// `field: problem (description)`.
    pub fn problems(&self) -> &[FieldProblem] {
        &self.problems
    }

    /// Reads one field: its type by serde, then its constraints. A field that
    /// is absent is read as `null`, so an `Option` may be left out and
    /// anything else is reported as missing.
    #[doc(hidden)]
    pub fn field<T: DeserializeOwned>(
        &mut self,
        members: &Members<'_>,
        meta: &FieldMeta,
    ) -> Option<T> {
        let value = match members {
            Members::Parsed(object) => object.get(meta.name),
            Members::Raw(members) => return self.raw_field(members, meta),
            Members::Values(members) => match members.iter().find(|(name, _)| name == meta.name) {
                Some((_, MemberValue::Parsed(value))) => Some(value),
                Some((_, MemberValue::Plain(raw))) => return self.plain_field(raw, meta),
                None => None,
            },
        };
        let Some(value) = value else {
            return match T::deserialize(&Value::Null) {
                Ok(absent) => Some(absent),
                Err(_) => {
                    self.push(meta, "field required".to_owned());
                    None
                }
            };
        };
        let typed = match read_value::<T>(value) {
            Ok(typed) => typed,
            Err((path, problem)) => {
                self.push_at(meta, &path, problem);
                return None;
            }
        };
        if value.is_null() {
            return Some(typed);
        }
        let before = self.problems.len();
        for constraint in meta.constraints {
            if let Some(problem) = constraint.violation(value) {
                self.push(meta, problem);
            }
        }
        (self.problems.len() == before).then_some(typed)
    }

    /// [`field`](FieldErrors::field) of a plain string, from its raw text:
    /// the type read from the text between its quotes as from the parsed
    /// string, the constraints checked there; a parsed copy is made only to
    /// word a constraint's problem.
    fn plain_field<T: DeserializeOwned>(&mut self, raw: &str, meta: &FieldMeta) -> Option<T> {
        let text = plain_string(raw).unwrap_or_default();
        let typed = match T::deserialize(PlainStr(text)) {
            Ok(typed) => typed,
            Err(Problem(problem)) => {
                self.push(meta, plain_type_error(problem));
                return None;
            }
        };
        if meta.constraints.iter().all(|c| c.accepts_str(text)) {
            return Some(typed);
        }
        let value = Value::String(text.to_owned());
        for constraint in meta.constraints {
            if let Some(problem) = constraint.violation(&value) {
                self.push(meta, problem);
            }
        }
        None
    }

    /// The fast path's reading of one field from its raw text: the type
    /// straight from the text, the constraints on the text of a plain
    /// string or on a parsed copy of anything else, only when the field has
    /// any. A problem is recorded as an empty one, with no message to
    /// format, and the fields after it are not read: the dispatcher then
    /// reads the arguments again, their values parsed ([`Members::Values`])
    /// or the whole object, and that reading says what is wrong.
    fn raw_field<T: DeserializeOwned>(
        &mut self,
        members: &[(std::borrow::Cow<'_, str>, &serde_json::value::RawValue)],
        meta: &FieldMeta,
    ) -> Option<T> {
        if self.unread {
            // Refused already: the reading that says why comes next, so the
            // fields after the first problem are not read this way.
            return None;
        }
        let found = members.iter().find(|(name, _)| name == meta.name);
        let read = match found {
            None => T::deserialize(&Value::Null).ok(),
            Some((_, raw)) => serde_json::from_str::<T>(raw.get()).ok().filter(|_| {
                let raw = raw.get();
                if meta.constraints.is_empty() || raw == "null" {
                    return true;
                }
                // A string with no escapes is its text between the quotes:
                // checked there, with no copy of it made.
                if let Some(text) = plain_string(raw) {
                    return meta.constraints.iter().all(|c| c.accepts_str(text));
                }
                serde_json::from_str::<Value>(raw).is_ok_and(|value| {
                    meta.constraints
                        .iter()
                        .all(|constraint| constraint.violation(&value).is_none())
                })
            }),
        };
        if read.is_none() {
            self.unread = true;
        }
        read
    }

    /// Reports every member of `object` that is not a field, with the
    /// closest field name as a suggestion when one is close enough.
    #[doc(hidden)]
    pub fn unknown_fields(&mut self, object: &Map<String, Value>, fields: &[FieldMeta]) {
        self.unknown_members(&Members::Parsed(object), fields);
    }

    /// [`unknown_fields`](FieldErrors::unknown_fields) of any [`Members`],
    /// in the order a parsed object lists its members: the text's with
    /// `serde_json`'s `preserve_order`, sorted without it (raw members, read
    /// only when every member is a field, in the text's).
    #[doc(hidden)]
    pub fn unknown_members(&mut self, members: &Members<'_>, fields: &[FieldMeta]) {
        let known = |name: &str| fields.iter().any(|f| f.name == name);
        match members {
            Members::Parsed(object) => {
                for name in object.keys().filter(|name| !known(name)) {
                    self.unknown_member(name, fields);
                }
            }
            Members::Raw(members) => {
                for (name, _) in members.iter().filter(|(name, _)| !known(name)) {
                    self.unknown_member(name, fields);
                }
            }
            Members::Values(members) => {
                // Usually none, or one: a list only when there are some.
                let unknown = members
                    .iter()
                    .map(|(name, _)| name.as_ref())
                    .filter(|name| !known(name));
                for name in in_map_order(unknown, map_keeps_order()) {
                    self.unknown_member(name, fields);
                }
            }
        }
    }

    /// Reports `name`, a member that is no field, with the closest field
    /// name as a suggestion when one is close enough.
    fn unknown_member(&mut self, name: &str, fields: &[FieldMeta]) {
        let shown = crate::echo::cut(name, crate::echo::MAX_NAME_ECHO);
        // Sized for the longest answer: every field named, four bytes
        // of quotes and comma each.
        let names: usize = fields.iter().map(|f| f.name.len() + 4).sum();
        let mut problem = String::with_capacity(48 + names);
        problem.push_str("unknown field");
        match closest(name, fields.iter().map(|f| f.name)) {
            Some(suggestion) => {
                problem.push_str(", did you mean `");
                problem.push_str(suggestion);
                problem.push_str("`?");
            }
            None if fields.is_empty() => problem.push_str(", this tool takes no arguments"),
            None => {
                problem.push_str(", expected one of ");
                push_quoted(&mut problem, fields.iter().map(|field| field.name));
            }
        }
        self.problems
            .push(FieldProblem::new(shown.into_owned(), problem));
    }

    fn push(&mut self, meta: &FieldMeta, problem: String) {
        self.push_at(meta, "", problem);
    }

    /// A problem at `inner_path` inside the field (`""` for the field
    /// itself), the text kept as it is unless it is over-long.
    fn push_at(&mut self, meta: &FieldMeta, inner_path: &str, problem: String) {
        let problem = match crate::echo::cut(&problem, 2 * crate::echo::MAX_VALUE_ECHO) {
            std::borrow::Cow::Borrowed(_) => problem,
            std::borrow::Cow::Owned(cut) => cut,
        };
        let path = if inner_path.is_empty() {
            Cow::Borrowed(meta.name)
        } else {
            let separator = if inner_path.starts_with('[') { "" } else { "." };
            let inner_path = crate::echo::cut(inner_path, crate::echo::MAX_NAME_ECHO);
            Cow::Owned(format!("{}{separator}{inner_path}", meta.name))
        };
        self.problems.push(FieldProblem {
            path,
            problem,
            description: meta.description,
        });
    }
}

/// The most problems one answer lists; the rest are counted.
pub(crate) const MAX_PROBLEMS_SHOWN: usize = 20;

impl fmt::Display for FieldErrors {
    /// Every problem, `; `-separated; past the first 20, only their number
    /// (a model that sent 5,000 unknown members gets a bounded answer).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

#[cfg(test)]
mod tests;
