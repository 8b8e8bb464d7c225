//! What is checked when a dispatcher is built: every tool's context (and
//! its check's) against the state, and every known caller's policy against
//! the tools, so that a typo is an error at startup, not a refusal on every
//! call.

use crate::suggest::closest;
use std::collections::BTreeSet;
use std::fmt;

use crate::args::Constraint;
use crate::policy::Caller;
use crate::registry::{Registry, debug_variant};

/// Why a dispatcher could not be built, or a caller does not fit it.
///
/// Its `Debug` form is its `Display` sentence (what is wrong, the closest
/// real name, the fix), so that `?` in a `main` returning
/// `Result<(), Box<dyn Error>>` prints the sentence; `{:#?}` shows the
/// fields, for a `match` to be written against.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A tool's context needs state of another type than the dispatcher's,
    /// and no [part](super::DispatcherBuilder::part) of it has that type.
    StateMismatch {
        /// The tool.
        tool: &'static str,
        /// The state type its `&Ctx<...>` names.
        expected: &'static str,
        /// The dispatcher's state type.
        found: &'static str,
    },
    /// A tool's business check (`#[tool(check = path)]`) takes a context
    /// whose state is of another type than the dispatcher's: every call
    /// would end in `INTERNAL_ERROR`.
    CheckStateMismatch {
        /// The tool whose check it is.
        tool: &'static str,
        /// The state type the check's `&Ctx<...>` names.
        expected: &'static str,
        /// The dispatcher's state type.
        found: &'static str,
    },
    /// A tool's `reconcile` function (`#[tool(reconcile = path)]`) takes a
    /// context whose state is of another type than the dispatcher's: a call
    /// of unknown outcome could never be looked up.
    ReconcileStateMismatch {
        /// The tool whose reconcile function it is.
        tool: &'static str,
        /// The state type the function's `&Ctx<...>` names.
        expected: &'static str,
        /// The dispatcher's state type.
        found: &'static str,
    },
    /// A caller's allowlist names a tool the registry does not have: the
    /// caller would get `UNKNOWN_TOOL` for it (or `TOOL_NOT_ALLOWED` for the
    /// tool meant) on every call.
    UnknownTool {
        /// The caller's id.
        caller: String,
        /// The name on the allowlist.
        tool: String,
        /// The registered tool closest to it, if one is close enough to be
        /// the one meant.
        closest: Option<&'static str>,
    },
    /// A caller's policy sets a limit no tool declares (with
    /// `#[arg(limit = "...")]`): it bounds nothing, and the limit meant is
    /// not set, so every call bounded by it is `POLICY_LIMIT`.
    UnknownLimit {
        /// The caller's id.
        caller: String,
        /// The name the policy sets.
        limit: String,
        /// The declared limit closest to it, if one is close enough to be
        /// the one meant.
        closest: Option<&'static str>,
    },
    /// A caller's policy bounds the repeats
    /// ([`Policy::max_repeats`](crate::Policy::max_repeats)) of a tool the
    /// registry does not have: the tool meant keeps the default bound.
    UnknownRepeatedTool {
        /// The caller's id.
        caller: String,
        /// The name the policy gives.
        tool: String,
        /// The registered tool closest to it, if one is close enough to be
        /// the one meant.
        closest: Option<&'static str>,
    },
    /// A caller's policy bounds the repeats
    /// ([`Policy::max_repeats`](crate::Policy::max_repeats)) of a side
    /// effect: its identical call is answered with its first result, never
    /// run again, so the bound would change nothing.
    RepeatsOfSideEffect {
        /// The caller's id.
        caller: String,
        /// The side-effecting tool.
        tool: &'static str,
    },
    /// Two parts of the state given to
    /// [`DispatcherBuilder::part`](super::DispatcherBuilder::part) have one
    /// type, or a part has the state's own type: a `&Ctx<...>` of that
    /// type could get either, and a tool meant to hold one (a read-only
    /// connection) could hold the other.
    DuplicatePart {
        /// The part's type.
        part: &'static str,
    },
    /// Two different callers given to the dispatcher share an id: audit
    /// records, approvals and [`Dispatcher::caller`](super::Dispatcher::caller)
    /// could not tell them apart.
    DuplicateCaller {
        /// The id.
        caller: String,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let did_you_mean = |f: &mut fmt::Formatter<'_>, closest: &Option<&str>| match closest {
            Some(name) => write!(f, "; did you mean `{name}`?"),
            None => Ok(()),
        };
        match self {
            BuildError::StateMismatch {
                tool,
                expected,
                found,
            } => {
                write!(
                    f,
                    "tool `{tool}` takes `&Ctx<{expected}>` but the dispatcher's state is `{found}`"
                )?;
                no_such_part(f, expected, found)
            }
            BuildError::CheckStateMismatch {
                tool,
                expected,
                found,
            } => {
                write!(
                    f,
                    "the check of tool `{tool}` takes `&Ctx<{expected}>` but the dispatcher's state is `{found}`"
                )?;
                no_such_part(f, expected, found)
            }
            BuildError::ReconcileStateMismatch {
                tool,
                expected,
                found,
            } => {
                write!(
                    f,
                    "the reconcile function of tool `{tool}` takes `&Ctx<{expected}>` but the dispatcher's state is `{found}`"
                )?;
                no_such_part(f, expected, found)
            }
            BuildError::UnknownTool {
                caller,
                tool,
                closest,
            } => {
                write!(
                    f,
                    "caller `{caller}` is allowed `{tool}`, but no tool has that name"
                )?;
                did_you_mean(f, closest)
            }
            BuildError::UnknownLimit {
                caller,
                limit,
                closest,
            } => {
                write!(
                    f,
                    "caller `{caller}` sets the limit `{limit}`, but no tool declares it \
                     (with #[arg(limit = \"...\")] or #[tool(limits = [\"...\"])])"
                )?;
                did_you_mean(f, closest)
            }
            BuildError::UnknownRepeatedTool {
                caller,
                tool,
                closest,
            } => {
                write!(
                    f,
                    "caller `{caller}` sets max_repeats of `{tool}`, but no tool has that name"
                )?;
                did_you_mean(f, closest)
            }
            BuildError::RepeatsOfSideEffect { caller, tool } => write!(
                f,
                "caller `{caller}` sets max_repeats of `{tool}`, a side effect: its identical call \
                 is answered with its first result, never run again; remove \
                 Policy::max_repeats(\"{tool}\", ...), or bound a read-only tool"
            ),
            BuildError::DuplicatePart { part } => write!(
                f,
                "the part `{part}` is given twice to DispatcherBuilder::part, or is the \
                 state's own type: a `&Ctx<{part}>` could get either; give each part a \
                 type of its own (a newtype)"
            ),
            BuildError::DuplicateCaller { caller } => write!(
                f,
                "two different callers have the id `{caller}`; give each its own id"
            ),
        }
    }
}

/// The fix of a context whose state the dispatcher does not hold.
fn no_such_part(f: &mut fmt::Formatter<'_>, expected: &str, found: &str) -> fmt::Result {
    write!(
        f,
        " and has no part of that type; make it one with \
         `DispatcherBuilder::part(|state: &{found}| -> {expected} {{ ... }})`, \
         or take `&Ctx<{found}>`"
    )
}

impl fmt::Debug for BuildError {
    /// The `Display` sentence; with `{:#?}`, the variant and its fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (variant, fields): (&str, &[(&str, &dyn fmt::Debug)]) = match self {
            BuildError::StateMismatch {
                tool,
                expected,
                found,
            } => (
                "StateMismatch",
                &[("tool", tool), ("expected", expected), ("found", found)],
            ),
            BuildError::CheckStateMismatch {
                tool,
                expected,
                found,
            } => (
                "CheckStateMismatch",
                &[("tool", tool), ("expected", expected), ("found", found)],
            ),
            BuildError::ReconcileStateMismatch {
                tool,
                expected,
                found,
            } => (
                "ReconcileStateMismatch",
                &[("tool", tool), ("expected", expected), ("found", found)],
            ),
            BuildError::UnknownTool {
                caller,
                tool,
                closest,
            } => (
                "UnknownTool",
                &[("caller", caller), ("tool", tool), ("closest", closest)],
            ),
            BuildError::UnknownLimit {
                caller,
                limit,
                closest,
            } => (
                "UnknownLimit",
                &[("caller", caller), ("limit", limit), ("closest", closest)],
            ),
            BuildError::UnknownRepeatedTool {
                caller,
                tool,
                closest,
            } => (
                "UnknownRepeatedTool",
                &[("caller", caller), ("tool", tool), ("closest", closest)],
            ),
            BuildError::RepeatsOfSideEffect { caller, tool } => {
                ("RepeatsOfSideEffect", &[("caller", caller), ("tool", tool)])
            }
            BuildError::DuplicatePart { part } => ("DuplicatePart", &[("part", part)]),
            BuildError::DuplicateCaller { caller } => ("DuplicateCaller", &[("caller", caller)]),
        };
        debug_variant(f, self, variant, fields)
    }
}

impl std::error::Error for BuildError {}

/// Something the dispatcher was built with that works, but probably not as
/// meant. Each is logged with `tracing::warn!` when found, and kept:
/// [`Dispatcher::warnings`](super::Dispatcher::warnings).
///
/// Its `Debug` form is its `Display` sentence, as [`BuildError`]'s is;
/// `{:#?}` shows the fields.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildWarning {
    /// A caller may call a tool that declares a limit on an argument, and
    /// its policy does not set that limit: every call of the tool with that
    /// argument is refused with `POLICY_LIMIT` (a missing limit fails
    /// closed). The dispatcher's default caller without a
    /// [`policy`](super::DispatcherBuilder::policy) allows every tool and
    /// sets no limit, so it warns for every limit; a host whose calls all
    /// name their caller gives the default one `Policy::new()` (nothing
    /// allowed, nothing to warn of).
    LimitNotSet {
        /// The caller's id.
        caller: String,
        /// The tool.
        tool: &'static str,
        /// The argument the limit bounds.
        field: &'static str,
        /// The limit's name.
        limit: &'static str,
    },
    /// A caller may call a tool whose check reads a limit by name
    /// (`#[tool(limits = ["..."])]`, [`Ctx::within_limit`](crate::Ctx::within_limit)),
    /// and its policy does not set it: every call the check bounds by it is
    /// refused with `POLICY_LIMIT`.
    NamedLimitNotSet {
        /// The caller's id.
        caller: String,
        /// The tool.
        tool: &'static str,
        /// The limit's name.
        limit: &'static str,
    },
}

impl fmt::Display for BuildWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildWarning::LimitNotSet {
                caller,
                tool,
                field,
                limit,
            } => write!(
                f,
                "caller `{caller}` may call `{tool}`, whose argument `{field}` is bounded by the \
                 limit `{limit}`, but does not set it: every such call is POLICY_LIMIT \
                 (set it with Policy::limit(\"{limit}\", ...))"
            ),
            BuildWarning::NamedLimitNotSet {
                caller,
                tool,
                limit,
            } => write!(
                f,
                "caller `{caller}` may call `{tool}`, whose check reads the limit `{limit}`, but \
                 does not set it: every call it bounds is POLICY_LIMIT (set it with \
                 Policy::limit(\"{limit}\", ...))"
            ),
        }
    }
}

impl fmt::Debug for BuildWarning {
    /// The `Display` sentence; with `{:#?}`, the variant and its fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (variant, fields): (&str, &[(&str, &dyn fmt::Debug)]) = match self {
            BuildWarning::LimitNotSet {
                caller,
                tool,
                field,
                limit,
            } => (
                "LimitNotSet",
                &[
                    ("caller", caller),
                    ("tool", tool),
                    ("field", field),
                    ("limit", limit),
                ],
            ),
            BuildWarning::NamedLimitNotSet {
                caller,
                tool,
                limit,
            } => (
                "NamedLimitNotSet",
                &[("caller", caller), ("tool", tool), ("limit", limit)],
            ),
        };
        debug_variant(f, self, variant, fields)
    }
}

/// Checks a caller's policy against the tools: the errors first (the first
/// found), then every warning, logged.
pub(super) fn check_caller(
    registry: &Registry,
    caller: &Caller,
) -> Result<Vec<BuildWarning>, BuildError> {
    let policy = caller.policy();
    for tool in policy.allowed() {
        if registry.get(tool).is_none() {
            return Err(BuildError::UnknownTool {
                caller: caller.id().to_owned(),
                tool: tool.to_owned(),
                closest: closest(tool, registry.iter().map(|spec| spec.name())),
            });
        }
    }
    for (tool, _) in policy.repeats() {
        match registry.get(tool) {
            None => {
                return Err(BuildError::UnknownRepeatedTool {
                    caller: caller.id().to_owned(),
                    tool: tool.to_owned(),
                    closest: closest(tool, registry.iter().map(|spec| spec.name())),
                });
            }
            Some(spec) if spec.side_effect() => {
                return Err(BuildError::RepeatsOfSideEffect {
                    caller: caller.id().to_owned(),
                    tool: spec.name(),
                });
            }
            Some(_) => {}
        }
    }
    let declared: BTreeSet<&'static str> = registry
        .iter()
        .flat_map(|spec| {
            limits_of(spec)
                .map(|(_, limit)| limit)
                .chain(spec.named_limits().iter().copied())
        })
        .collect();
    for (limit, _) in policy.limits() {
        if !declared.contains(limit) {
            return Err(BuildError::UnknownLimit {
                caller: caller.id().to_owned(),
                limit: limit.to_owned(),
                closest: closest(limit, declared.iter().copied()),
            });
        }
    }
    let mut warnings = Vec::new();
    for spec in registry.iter().filter(|spec| policy.allows(spec.name())) {
        for (field, limit) in limits_of(spec) {
            if policy.limit_of(limit).is_none() {
                let warning = BuildWarning::LimitNotSet {
                    caller: caller.id().to_owned(),
                    tool: spec.name(),
                    field,
                    limit,
                };
                tracing::warn!(caller = caller.id(), tool = spec.name(), limit, "{warning}");
                warnings.push(warning);
            }
        }
        for &limit in spec.named_limits() {
            if policy.limit_of(limit).is_none() {
                let warning = BuildWarning::NamedLimitNotSet {
                    caller: caller.id().to_owned(),
                    tool: spec.name(),
                    limit,
                };
                tracing::warn!(caller = caller.id(), tool = spec.name(), limit, "{warning}");
                warnings.push(warning);
            }
        }
    }
    Ok(warnings)
}

/// The limits a tool declares, with the argument each bounds.
fn limits_of(spec: &'static crate::ToolSpec) -> impl Iterator<Item = (&'static str, &'static str)> {
    spec.fields().iter().flat_map(|field| {
        field
            .constraints
            .iter()
            .filter_map(move |constraint| match constraint {
                Constraint::Limit(limit) => Some((field.name, *limit)),
                _ => None,
            })
    })
}

#[cfg(test)]
mod tests {
    use crate::suggest::assert_suggests;

    #[test]
    fn typos_find_the_real_name_and_strangers_find_none() {
        assert_suggests(
            &["get_order", "refund_order", "create_event"],
            &[
                ("create_events", Some("create_event")),
                ("refund_orders", Some("refund_order")),
                ("refundOrder", Some("refund_order")),
                ("getorder", Some("get_order")),
                ("delete_everything", None),
            ],
        );
        assert_suggests(
            &["max_duration_minutes", "max_refund_cents"],
            &[
                ("max_duration_minuts", Some("max_duration_minutes")),
                ("max_refund_cent", Some("max_refund_cents")),
                ("daily_cap", None),
            ],
        );
    }
}
