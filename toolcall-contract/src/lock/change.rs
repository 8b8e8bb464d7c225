//! One difference between two contracts, and how much it matters.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;
use toolcall_core::canonical::canonical_json;

/// One difference between the locked contract and the current one.
///
/// Its `Display` names the tool, the field (as a path, see the
/// [module docs](crate::lock)) and what changed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Change {
    /// The tool's name.
    pub tool: String,
    /// The field's path, for a change to a field.
    pub field: Option<String>,
    /// What changed.
    pub kind: ChangeKind,
}

/// How much a change matters to callers written against the locked contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// A caller may now fail: the change needs a new tool version.
    Breaking,
    /// Nothing a caller sends is refused, but what it means may have
    /// changed: a description (units, meanings), or a schema change the lock
    /// file does not describe. A person should read it.
    Review,
    /// Callers are unaffected.
    Compatible,
}

impl Severity {
    /// `breaking`, `review` or `compatible`: the prefix `check` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Breaking => "breaking",
            Severity::Review => "review",
            Severity::Compatible => "compatible",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What changed. See the [module docs](crate::lock) for which kinds break callers;
/// [`Change::severity`] decides it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A tool that is not in the lock file. Compatible.
    ToolAdded,
    /// A locked tool that is gone; `successor` is a new tool of the same
    /// base name with a version suffix, if there is one. Breaking.
    ToolRemoved {
        /// The new version that replaces it, such as `refund_order_v2`.
        successor: Option<String>,
    },
    /// `side_effect` or `high_risk` went from `true` to `false`. Breaking.
    FlagLowered {
        /// `side_effect` or `high_risk`.
        flag: &'static str,
    },
    /// `side_effect` or `high_risk` went from `false` to `true`. Compatible.
    FlagRaised {
        /// `side_effect` or `high_risk`.
        flag: &'static str,
    },
    /// The tool's, the field's or the variant's description changed. To review.
    DescriptionChanged,
    /// A new field. Breaking when it is required.
    FieldAdded {
        /// Whether it is required.
        required: bool,
        /// Its type.
        ty: String,
    },
    /// A field that is gone, not paired with an added one as a rename. Breaking.
    FieldRemoved {
        /// Its type.
        ty: String,
    },
    /// A field gone while exactly one field of the same shape and the same
    /// `required` appeared in the same object, and no other removed field
    /// has that shape: probably a rename. Breaking.
    FieldRenamed {
        /// The new field's path.
        to: String,
        /// The type both have.
        ty: String,
    },
    /// An optional field became required. Breaking.
    MadeRequired,
    /// A required field became optional. Compatible.
    MadeOptional,
    /// The JSON type changed. Breaking unless every type accepted before is
    /// still accepted (`integer` is accepted by `number`, everything by `any`).
    Retyped {
        /// The locked type.
        from: String,
        /// The current type.
        to: String,
    },
    /// `null` used to be accepted and no longer is. Breaking.
    NullRemoved,
    /// `null` is now accepted. Compatible.
    NullAllowed,
    /// The `format` changed. Breaking when a format was added or changed
    /// on a non-numeric field (numeric ranges are compared as constraints).
    FormatChanged {
        /// The locked format.
        from: Option<String>,
        /// The current format.
        to: Option<String>,
    },
    /// An enum value is no longer accepted. Breaking.
    EnumValueRemoved {
        /// The value.
        value: Value,
    },
    /// A new enum value. Compatible.
    EnumValueAdded {
        /// The value.
        value: Value,
    },
    /// A field that took any value of its type now takes only these. Breaking.
    EnumImposed {
        /// The accepted values.
        values: Vec<Value>,
    },
    /// A field that took a fixed set of values now takes any of its type. Compatible.
    EnumLifted,
    /// A variant of a union (an enum variant carrying data) is gone. Breaking.
    VariantRemoved {
        /// Its key.
        key: String,
    },
    /// A new variant of a union. Compatible.
    VariantAdded {
        /// Its key.
        key: String,
    },
    /// An object's named members became a map whose values accept each of
    /// them (a mismatch is reported on the member itself). Compatible.
    FieldsToMap {
        /// The type of the map's values.
        values: String,
    },
    /// A validation keyword changed. Breaking when it was added or now
    /// accepts less (a higher minimum, a lower maximum, another pattern).
    ConstraintChanged {
        /// The keyword, such as `maximum`.
        keyword: String,
        /// The locked value.
        from: Option<Value>,
        /// The current value.
        to: Option<Value>,
    },
    /// A part of the schema the lock file does not describe (see
    /// [`Opaque`](crate::lock::Opaque)) changed, appeared or went away, or the tool's schema
    /// changed while it has such a part and nothing described explains the
    /// change. Breaking, conservatively: what the lock cannot read, it
    /// cannot vouch for.
    OpaqueChanged {
        /// The keywords not described (of the current schema, or of the
        /// locked one if the part went away).
        keywords: Vec<String>,
        /// Whether this part's own hash differs; `false` when only the
        /// tool's hash tells that something changed.
        part_changed: bool,
    },
    /// The schema's hash differs but nothing the lock file describes
    /// explains it, and the schema has no opaque part. To review.
    SchemaChanged,
}

impl Change {
    pub(crate) fn tool(tool: &str, kind: ChangeKind) -> Change {
        Change {
            tool: tool.to_owned(),
            field: None,
            kind,
        }
    }

    pub(crate) fn field(tool: &str, field: &str, kind: ChangeKind) -> Change {
        Change {
            tool: tool.to_owned(),
            field: (!field.is_empty()).then(|| field.to_owned()),
            kind,
        }
    }

    /// Whether the change breaks callers, needs a person's reading, or neither.
    pub fn severity(&self) -> Severity {
        let breaking = match &self.kind {
            ChangeKind::DescriptionChanged | ChangeKind::SchemaChanged => {
                return Severity::Review;
            }
            ChangeKind::ToolRemoved { .. }
            | ChangeKind::FlagLowered { .. }
            | ChangeKind::FieldRemoved { .. }
            | ChangeKind::FieldRenamed { .. }
            | ChangeKind::MadeRequired
            | ChangeKind::NullRemoved
            | ChangeKind::EnumValueRemoved { .. }
            | ChangeKind::EnumImposed { .. }
            | ChangeKind::VariantRemoved { .. }
            | ChangeKind::OpaqueChanged { .. } => true,
            ChangeKind::FieldAdded { required, .. } => *required,
            ChangeKind::Retyped { from, to } => !accepts_all(from, to),
            ChangeKind::FormatChanged { to, .. } => to.is_some() && !self.numeric_format(),
            ChangeKind::ConstraintChanged { keyword, from, to } => {
                constraint_tightened(keyword, from.as_ref(), to.as_ref())
            }
            ChangeKind::ToolAdded
            | ChangeKind::FlagRaised { .. }
            | ChangeKind::MadeOptional
            | ChangeKind::NullAllowed
            | ChangeKind::EnumValueAdded { .. }
            | ChangeKind::EnumLifted
            | ChangeKind::VariantAdded { .. }
            | ChangeKind::FieldsToMap { .. } => false,
        };
        if breaking {
            Severity::Breaking
        } else {
            Severity::Compatible
        }
    }

    /// Whether a caller written against the locked contract may now fail:
    /// such a change needs a new tool version, not the same name.
    pub fn is_breaking(&self) -> bool {
        self.severity() == Severity::Breaking
    }

    /// Whether the change keeps every call valid but should be read by a
    /// person: a description (the unit of an amount lives there), or a
    /// schema change the lock file does not describe.
    pub fn needs_review(&self) -> bool {
        self.severity() == Severity::Review
    }

    fn numeric_format(&self) -> bool {
        let ChangeKind::FormatChanged { from, to } = &self.kind else {
            return false;
        };
        [from, to].into_iter().flatten().all(|f| {
            matches!(
                f.as_str(),
                "int8"
                    | "int16"
                    | "int32"
                    | "int64"
                    | "uint8"
                    | "uint16"
                    | "uint32"
                    | "uint64"
                    | "uint"
                    | "int"
                    | "float"
                    | "double"
            )
        })
    }
}

/// Whether every value of the types `from` (joined by `|`) is of one of the
/// types `to`: `integer` is a `number`, and `any` takes everything.
pub(crate) fn accepts_all(from: &str, to: &str) -> bool {
    let to: BTreeSet<&str> = to.split('|').collect();
    if to.contains("any") {
        return true;
    }
    from.split('|')
        .all(|t| t != "any" && (to.contains(t) || (t == "integer" && to.contains("number"))))
}

/// Whether changing `keyword` from `from` to `to` rejects values it used to accept.
fn constraint_tightened(keyword: &str, from: Option<&Value>, to: Option<&Value>) -> bool {
    let (from, to) = match (from, to) {
        (_, None) => return false,
        (None, Some(_)) => return true,
        (Some(from), Some(to)) => (from, to),
    };
    let number = |v: &Value| v.as_f64();
    match keyword {
        "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties" => {
            match (number(from), number(to)) {
                (Some(a), Some(b)) => b > a,
                _ => from != to,
            }
        }
        "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties" => {
            match (number(from), number(to)) {
                (Some(a), Some(b)) => b < a,
                _ => from != to,
            }
        }
        "uniqueItems" => to == &Value::Bool(true) && from != to,
        _ => from != to,
    }
}

fn show(value: &Value) -> String {
    canonical_json(value)
}

fn show_opt(value: Option<&Value>) -> String {
    value.map_or_else(|| "none".to_owned(), show)
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tool `{}`", self.tool)?;
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        f.write_str(": ")?;
        match &self.kind {
            ChangeKind::ToolAdded => f.write_str("new tool"),
            ChangeKind::ToolRemoved { successor: None } => {
                f.write_str("removed; a model that still calls it gets UNKNOWN_TOOL")
            }
            ChangeKind::ToolRemoved {
                successor: Some(next),
            } => write!(
                f,
                "removed, replaced by `{next}`; keep the old version beside the new one until callers move"
            ),
            ChangeKind::FlagLowered { flag } => write!(f, "`{flag}` lowered from true to false"),
            ChangeKind::FlagRaised { flag } => write!(f, "`{flag}` raised from false to true"),
            ChangeKind::DescriptionChanged => f.write_str(
                "description changed; check that the meaning (a unit, a format) did not",
            ),
            ChangeKind::FieldAdded { required: true, ty } => {
                write!(
                    f,
                    "added as required ({ty}); calls without it are now rejected"
                )
            }
            ChangeKind::FieldAdded {
                required: false,
                ty,
            } => {
                write!(f, "added as optional ({ty})")
            }
            ChangeKind::FieldRemoved { ty } => {
                write!(f, "removed ({ty}); calls that send it are now rejected")
            }
            ChangeKind::FieldRenamed { to, ty } => write!(
                f,
                "renamed? to `{to}` (removed, and `{to}` added with the same shape, {ty})"
            ),
            ChangeKind::MadeRequired => f.write_str("now required (was optional)"),
            ChangeKind::MadeOptional => f.write_str("now optional (was required)"),
            ChangeKind::Retyped { from, to } if accepts_all(from, to) => {
                write!(f, "widened from {from} to {to}")
            }
            ChangeKind::Retyped { from, to } => write!(f, "retyped from {from} to {to}"),
            ChangeKind::NullRemoved => f.write_str("no longer accepts null"),
            ChangeKind::NullAllowed => f.write_str("now accepts null"),
            ChangeKind::FormatChanged { from, to } => write!(
                f,
                "format changed from {} to {}",
                from.as_deref().unwrap_or("none"),
                to.as_deref().unwrap_or("none")
            ),
            ChangeKind::EnumValueRemoved { value } => {
                write!(f, "enum value {} removed", show(value))
            }
            ChangeKind::EnumValueAdded { value } => write!(f, "enum value {} added", show(value)),
            ChangeKind::EnumImposed { values } => write!(
                f,
                "now restricted to the values {}",
                show(&Value::Array(values.clone()))
            ),
            ChangeKind::EnumLifted => f.write_str("no longer restricted to an enumeration"),
            ChangeKind::VariantRemoved { key } => write!(
                f,
                "variant `{key}` removed; calls that send it are now rejected"
            ),
            ChangeKind::VariantAdded { key } => write!(f, "variant `{key}` added"),
            ChangeKind::FieldsToMap { values } => write!(
                f,
                "named members became a map of {values}, which accepts each of them"
            ),
            ChangeKind::ConstraintChanged { keyword, from, to } => write!(
                f,
                "`{keyword}` changed from {} to {}",
                show_opt(from.as_ref()),
                show_opt(to.as_ref())
            ),
            ChangeKind::OpaqueChanged {
                keywords,
                part_changed,
            } => {
                let keywords = keywords
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                if *part_changed {
                    write!(
                        f,
                        "a part of the schema the lock file cannot describe ({keywords}) changed; \
                         treated as breaking: review it"
                    )
                } else {
                    write!(
                        f,
                        "parameters schema changed (its hash differs) and this part uses keywords \
                         the lock file cannot describe ({keywords}); treated as breaking: review it"
                    )
                }
            }
            ChangeKind::SchemaChanged => f.write_str(
                "parameters schema changed (its hash differs) in a way the lock file does not \
                 describe field by field; review it",
            ),
        }
    }
}
