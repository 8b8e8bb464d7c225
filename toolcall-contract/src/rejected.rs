//! The rejected calls of an audit log, read again: which fields the model
//! gets wrong, and the calls themselves, to replay as regression tests.
//!
//! [`by_field`] counts the `INVALID_ARGUMENTS` records by the fields the
//! model got wrong, so that a spike in one field (often a vague
//! description, or a schema the backend moved away from) shows by name. An
//! audit record keeps the problems the model was told
//! ([`AuditRecord::problems`]); those are what it counts, whatever the tools
//! are today. A record written before records kept them is read again with
//! today's tools: its arguments are validated anew, a call the current
//! validator accepts is counted under the field `(valid now)`, and one of a
//! tool no longer registered under `(unknown tool)`.
//!
//! [`regression_calls`] turns the distinct rejected calls into `replay`
//! lines: every real payload a model got wrong is a free test that the
//! pipeline keeps refusing it, with the same message. It writes only what
//! the audit kept: values of `sensitive` parameters were redacted in the
//! audit (`"[redacted]"`), so those calls replay with that text instead, and
//! a call the audit did not keep whole (redacted altogether, or cut because
//! it was over-long) is left out and counted ([`LeftOut`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use serde_json::{Value, json};
use toolcall_core::{AuditRecord, Code, Registry};

/// `INVALID_ARGUMENTS` rejections of one field of one tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRejections {
    /// The tool.
    pub tool: String,
    /// The field, as a path: `amount_cents`, `lines[].sku` (indices left
    /// out), or `(valid now)`, `(unknown tool)`, `(arguments)` (not an object).
    pub field: String,
    /// Rejected calls in which this field had a problem.
    pub rejected: u64,
    /// The first problem found, as the model was told it.
    pub example: String,
}

/// `INVALID_ARGUMENTS` rejections by tool and field, most frequent first
/// (ties by tool, then field). A call with problems in two fields counts
/// once for each.
pub fn by_field(records: &[AuditRecord], registry: &Registry) -> Vec<FieldRejections> {
    let mut counts: BTreeMap<(String, String), (u64, String)> = BTreeMap::new();
    for record in records.iter().filter(|r| r.code == Code::InvalidArguments) {
        let fields = failing_fields(record, registry);
        for (field, example) in fields {
            let entry = counts
                .entry((record.tool.to_string(), field))
                .or_insert((0, example));
            entry.0 += 1;
        }
    }
    let mut rows: Vec<FieldRejections> = counts
        .into_iter()
        .map(|((tool, field), (rejected, example))| FieldRejections {
            tool,
            field,
            rejected,
            example,
        })
        .collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.rejected));
    rows
}

/// The fields a rejected call got wrong, each with its first problem as the
/// model read it: the problems its record kept, or, in a record written
/// before records kept them, what today's tools find in its arguments.
fn failing_fields(record: &AuditRecord, registry: &Registry) -> BTreeMap<String, String> {
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    if !record.problems.is_empty() {
        for problem in &record.problems {
            fields
                .entry(field_path(&problem.path))
                .or_insert_with(|| problem.to_string());
        }
        return fields;
    }
    match (
        registry.get(&record.tool),
        serde_json::from_str::<Value>(&record.arguments),
    ) {
        (None, _) => {
            fields.insert("(unknown tool)".to_owned(), String::new());
        }
        (Some(_), Err(_) | Ok(Value::Array(_) | Value::Null | Value::Bool(_)))
        | (Some(_), Ok(Value::Number(_) | Value::String(_))) => {
            fields.insert("(arguments)".to_owned(), "not a JSON object".to_owned());
        }
        (Some(spec), Ok(mut arguments)) => {
            // As the audit does, whatever this log holds: a problem
            // may quote the value, and the report prints the first one.
            spec.redact_arguments(&mut arguments);
            match spec.validate_arguments(&arguments) {
                Ok(()) => {
                    fields.insert("(valid now)".to_owned(), String::new());
                }
                Err(errors) => {
                    for problem in errors.problems() {
                        fields
                            .entry(field_path(problem.path()))
                            .or_insert_with(|| problem.to_string());
                    }
                }
            }
        }
    }
    fields
}

/// A problem's field path with array indices left out, so that
/// `lines[0].sku` and `lines[3].sku` count together.
fn field_path(path: &str) -> String {
    let mut field = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                field.push('[');
            }
            ']' => {
                in_index = false;
                field.push(']');
            }
            _ if in_index => {}
            _ => field.push(c),
        }
    }
    field
}

/// The text an audit record holds in place of a sensitive value, or of
/// arguments that could not be redacted member by member (text that is not
/// a JSON object).
pub use toolcall_core::REDACTED;

/// Why [`regression_calls`] left a rejected call out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LeftOut {
    /// The audit kept [`REDACTED`] in place of the whole arguments (text
    /// that was not a JSON object, of a tool with `sensitive` parameters):
    /// there is no payload to replay.
    Redacted,
    /// The audit kept only part of the arguments (their head and tail,
    /// with the size and SHA-256 of the whole in the record's `cut`), as it
    /// does for arguments over the size limit: replayed, that text would be
    /// refused for its syntax, not for what the model sent.
    Cut,
    /// The arguments of a tool whose parameters are `sensitive` (in the
    /// current registry) hold a value of such a parameter that is not
    /// [`REDACTED`], or cannot be read to check: an audit written before
    /// the parameter was marked, say. Written to a file, the value would
    /// be kept there in plain text.
    NotRedacted,
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LeftOut::Redacted => "the audit redacted the whole arguments",
            LeftOut::Cut => "the audit kept only part of over-long arguments",
            LeftOut::NotRedacted => {
                "sensitive values in the audit are not redacted; not copied to the file"
            }
        })
    }
}

/// The replay lines [`regression_calls`] found, and what it left out.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RegressionCalls {
    /// The distinct rejected calls, in log order, as `replay` lines.
    pub calls: Vec<Value>,
    /// The rejected calls left out, by reason (distinct calls, as for
    /// `calls`).
    pub left_out: BTreeMap<LeftOut, u64>,
}

impl RegressionCalls {
    /// The calls as the text of a replay file: one JSON object a line.
    pub fn to_jsonl(&self) -> String {
        self.calls.iter().map(|call| format!("{call}\n")).collect()
    }
}

/// The distinct rejected calls (`INVALID_ARGUMENTS`, `INVALID_JSON`), in
/// log order, as `replay` lines: `{"tool": ..., "arguments": "<the text the
/// model sent>"}`.
///
/// Only what the audit kept is written, never more: a `sensitive`
/// parameter's value replays as [`REDACTED`] (the call may then be refused
/// for that text as well). A call whose arguments the audit did not keep
/// whole ([`LeftOut::Redacted`], [`LeftOut::Cut`]) is left out, and so is
/// one whose sensitive values (by `registry`'s tools) are not redacted
/// ([`LeftOut::NotRedacted`]): the file never holds a sensitive value in
/// plain text, whatever the log does.
pub fn regression_calls(records: &[AuditRecord], registry: &Registry) -> RegressionCalls {
    let mut seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut found = RegressionCalls::default();
    for record in records
        .iter()
        .filter(|r| matches!(r.code, Code::InvalidArguments | Code::InvalidJson))
        .filter(|r| seen.insert((&*r.tool, r.arguments.as_str())))
    {
        match left_out(record, registry) {
            Some(reason) => *found.left_out.entry(reason).or_default() += 1,
            None => found
                .calls
                .push(json!({"tool": record.tool, "arguments": record.arguments})),
        }
    }
    found
}

/// Why `record` cannot be written as a replay line, if it cannot.
fn left_out(record: &AuditRecord, registry: &Registry) -> Option<LeftOut> {
    if !record.cut.is_empty() {
        return Some(LeftOut::Cut);
    }
    if record.arguments == REDACTED {
        return Some(LeftOut::Redacted);
    }
    let sensitive: Vec<&str> = registry
        .get(&record.tool)
        .map(|spec| {
            spec.fields()
                .iter()
                .filter(|field| field.sensitive)
                .map(|field| field.name)
                .collect()
        })
        .unwrap_or_default();
    if !sensitive.is_empty() && !redacted(&record.arguments, &sensitive) {
        return Some(LeftOut::NotRedacted);
    }
    // Values sensitive at any depth (a nested `writeOnly` field): redacting
    // again must change nothing.
    if let Some(spec) = registry.get(&record.tool)
        && spec.has_sensitive_values()
    {
        let Ok(arguments) = serde_json::from_str::<Value>(&record.arguments) else {
            return Some(LeftOut::NotRedacted);
        };
        let mut again = arguments.clone();
        spec.redact_arguments(&mut again);
        if again != arguments {
            return Some(LeftOut::NotRedacted);
        }
    }
    None
}

/// Whether `arguments` are a JSON object in which every member named in
/// `sensitive`, every time it occurs, is [`REDACTED`]. Members are read as
/// written (a name given twice is checked twice), not through a map that
/// keeps one of them.
fn redacted(arguments: &str, sensitive: &[&str]) -> bool {
    let Ok(members) = toolcall_core::__private::members_of(arguments) else {
        return false;
    };
    members.iter().all(|(name, value)| {
        !sensitive.contains(&name.as_ref())
            || serde_json::from_str::<String>(value.get()).is_ok_and(|text| text == REDACTED)
    })
}

/// The by-field rows as JSON: `[{"tool", "field", "rejected", "example"}]`.
pub fn to_json(rows: &[FieldRejections]) -> Value {
    rows.iter()
        .map(|row| {
            json!({
                "tool": row.tool,
                "field": row.field,
                "rejected": row.rejected,
                "example": row.example,
            })
        })
        .collect()
}

/// The by-field rows as a table, under a heading; nothing without rows.
pub struct FieldTable<'a>(pub &'a [FieldRejections]);

impl fmt::Display for FieldTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        let headers = ["tool", "field", "rejected"];
        let width = |column: usize, cell: fn(&FieldRejections) -> usize| {
            self.0
                .iter()
                .map(cell)
                .max()
                .unwrap_or(0)
                .max(headers[column].len())
        };
        let tool = width(0, |row| row.tool.chars().count());
        let field = width(1, |row| row.field.chars().count());
        let rejected = width(2, |row| row.rejected.to_string().len());
        let mut out =
            String::from("INVALID_ARGUMENTS by field (validated again with the current tools)\n");
        let _ = writeln!(
            out,
            "{:<tool$}  {:<field$}  {:>rejected$}  first problem",
            headers[0], headers[1], headers[2]
        );
        for row in self.0 {
            let _ = writeln!(
                out,
                "{:<tool$}  {:<field$}  {:>rejected$}  {}",
                row.tool, row.field, row.rejected, row.example
            );
        }
        f.write_str(&out)
    }
}
