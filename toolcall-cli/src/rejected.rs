//! The rejected calls of an audit log, read again: which fields the model
//! gets wrong, and the calls themselves, to replay as regression tests.
//!
//! An audit record keeps a call's arguments as the model sent them, not the
//! problems found in them. [`by_field`] validates the arguments of every
//! `INVALID_ARGUMENTS` record again with the tool's validator, so a spike in
//! one field (often a vague description, or a schema the backend moved away
//! from) shows by name. It reads the log with today's tools: a call the
//! current validator accepts is counted under the field `(valid now)`, one
//! of a tool no longer registered under `(unknown tool)`.
//!
//! [`regression_calls`] turns the distinct rejected calls into `replay`
//! lines: every real payload a model got wrong is a free test that the
//! pipeline keeps refusing it, with the same message. Values of `sensitive`
//! parameters were redacted in the audit (`"[redacted]"`), so those calls
//! replay with that text instead.

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
        let mut fields: BTreeMap<String, String> = BTreeMap::new();
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
            (Some(spec), Ok(arguments)) => match spec.validate_arguments(&arguments) {
                Ok(()) => {
                    fields.insert("(valid now)".to_owned(), String::new());
                }
                Err(errors) => {
                    for problem in errors.problems() {
                        fields
                            .entry(field_of(problem))
                            .or_insert_with(|| problem.clone());
                    }
                }
            },
        }
        for (field, example) in fields {
            let entry = counts
                .entry((record.tool.clone(), field))
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

/// The field path of a problem `path: problem (description)`, with array
/// indices left out so that `lines[0].sku` and `lines[3].sku` count together.
fn field_of(problem: &str) -> String {
    let path = problem.split_once(": ").map_or(problem, |(path, _)| path);
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

/// The distinct rejected calls (`INVALID_ARGUMENTS`, `INVALID_JSON`), in
/// log order, as `replay` lines: `{"tool": ..., "arguments": "<the text the
/// model sent>"}`.
pub fn regression_calls(records: &[AuditRecord]) -> Vec<Value> {
    let mut seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    records
        .iter()
        .filter(|r| matches!(r.code, Code::InvalidArguments | Code::InvalidJson))
        .filter(|r| seen.insert((r.tool.as_str(), r.arguments.as_str())))
        .map(|r| json!({"tool": r.tool, "arguments": r.arguments}))
        .collect()
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
