//! The policies `--allow` gives, its default, and the narrowing of the
//! code's policy by `--allow` and `--limit`.

use toolcall_core::{Caller, Policy, Registry};

use crate::Error;

/// A policy that allows the named tools, and nothing else: what `--allow`
/// gives.
///
/// Names are trimmed, and empty ones between commas are skipped
/// (`"get_order, refund_order,"` names two tools). It is an error, never a
/// silent default:
///
/// * to name a tool the registry does not have (a typo would otherwise deny
///   every call, or print no definitions, without a word);
/// * to name no tool at all (`""`, `","`, `" "`): an allowlist that was given
///   but is empty fails closed. It never means "every tool"; an application
///   whose default is every tool says so with [`every_tool`] when `--allow`
///   is not given at all ([`App`](crate::App) does).
pub fn allowlist<T: AsRef<str>>(registry: &Registry, names: &[T]) -> Result<Policy, Error> {
    let names: Vec<&str> = names
        .iter()
        .map(|name| name.as_ref().trim())
        .filter(|name| !name.is_empty())
        .collect();
    let known = || {
        registry
            .iter()
            .map(|spec| spec.name())
            .collect::<Vec<_>>()
            .join(",")
    };
    if names.is_empty() {
        return Err(Error::Input(format!(
            "--allow names no tool: pass the tools the caller may use, comma-separated \
             (for example `--allow {}`), or leave --allow out for the default",
            known()
        )));
    }
    let unknown: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| registry.get(name).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Input(format!(
            "--allow names no tool `{}`; the tools are: {}",
            unknown.join("`, `"),
            known().replace(',', ", ")
        )));
    }
    Ok(Policy::new().allow(names))
}

/// A policy that allows every tool of the registry: an application's
/// explicit choice of default when no allowlist is given.
pub fn every_tool(registry: &Registry) -> Policy {
    Policy::new().allow(registry.iter().map(|spec| spec.name()))
}

/// The policy `caller` runs under when the command line narrows it: the
/// code's policy (`caller.policy()`) is the ceiling, and the command line
/// can only take from it, never add to it. [`App`](crate::App) applies it
/// to the caller its commands run as.
///
/// * `allow` (`--allow`), when given, must name at least one tool, each a
///   tool of the registry ([`allowlist`]'s errors) and allowed by the code:
///   naming one the code does not allow is an error that names what the
///   code allows. The caller may then call the tools named, and no other.
/// * each of `limits` (`--limit NAME=VALUE`) must be a limit the code sets,
///   to a value at most the code's: a limit the code does not set (every
///   call bounded by it is `POLICY_LIMIT`) or a higher value is an error
///   naming the code's limits. The lower value replaces the code's.
///
/// The taint level, and every limit the command line does not name, stay
/// the code's.
///
/// ```
/// # use toolcall_core::{Caller, Policy, Registry};
/// # let registry = Registry::default();
/// let code = Caller::new("default", Policy::new().limit("max_transfer_cents", 10_000));
/// let lower = [("max_transfer_cents".to_owned(), 500)];
/// let narrowed = toolcall_cli::narrow(&registry, &code, None::<&[&str]>, &lower).unwrap();
/// assert_eq!(narrowed.limit_of("max_transfer_cents"), Some(500));
/// let higher = [("max_transfer_cents".to_owned(), 50_000)];
/// let error = toolcall_cli::narrow(&registry, &code, None::<&[&str]>, &higher).unwrap_err();
/// assert!(error.to_string().contains("above the code's max_transfer_cents=10000"));
/// ```
pub fn narrow<T: AsRef<str>>(
    registry: &Registry,
    caller: &Caller,
    allow: Option<&[T]>,
    limits: &[(String, i64)],
) -> Result<Policy, Error> {
    let code = caller.policy();
    let who = caller.id();
    // What the code allows, in the registry's order.
    let allowed_by_code: Vec<&str> = registry
        .iter()
        .map(|spec| spec.name())
        .filter(|name| code.allows(name))
        .collect();
    let code_allows = || match allowed_by_code.as_slice() {
        [] => "no tool".to_owned(),
        names => names.join(", "),
    };
    let allowed: Vec<String> = match allow {
        None => code.allowed().map(str::to_owned).collect(),
        Some(names) => {
            let given = names.iter().any(|name| !name.as_ref().trim().is_empty());
            if !given {
                return Err(Error::Input(format!(
                    "--allow names no tool: pass the tools the caller may use, comma-separated \
                     (for example `--allow {}`), or leave --allow out for the default",
                    allowed_by_code.join(",")
                )));
            }
            let listed = allowlist(registry, names)?;
            let wider: Vec<&str> = listed.allowed().filter(|name| !code.allows(name)).collect();
            if !wider.is_empty() {
                return Err(Error::Input(format!(
                    "--allow names `{}`, which the code does not allow caller `{who}`: --allow \
                     can only narrow the code's policy, which allows {}",
                    wider.join("`, `"),
                    code_allows()
                )));
            }
            listed.allowed().map(str::to_owned).collect()
        }
    };
    let code_limits = || match code.limits().len() {
        0 => "the code sets none".to_owned(),
        _ => code
            .limits()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let mut narrowed = Policy::new().allow(allowed).taint(code.taint_level());
    for (name, value) in code.limits() {
        narrowed = narrowed.limit(name, value);
    }
    for (name, value) in limits {
        match code.limit_of(name) {
            None => {
                return Err(Error::Input(format!(
                    "--limit {name}={value}: the code sets no limit `{name}` for caller `{who}`, \
                     and the command line can only lower the code's limits ({})",
                    code_limits()
                )));
            }
            Some(ceiling) if *value > ceiling => {
                return Err(Error::Input(format!(
                    "--limit {name}={value} is above the code's {name}={ceiling} for caller \
                     `{who}`: the command line can only lower the code's limits ({})",
                    code_limits()
                )));
            }
            Some(_) => narrowed = narrowed.limit(name.as_str(), *value),
        }
    }
    Ok(narrowed)
}

/// Reads one `--limit`: `NAME=VALUE`, the value a whole number.
pub(crate) fn parse_limit(text: &str) -> Result<(String, i64), String> {
    let expected = || {
        format!(
            "`{text}` is not NAME=VALUE with a whole number (for example max_refund_cents=10000)"
        )
    };
    let (name, value) = text.split_once('=').ok_or_else(expected)?;
    let name = name.trim();
    if name.is_empty() {
        return Err(expected());
    }
    let value = value.trim().parse::<i64>().map_err(|_| expected())?;
    Ok((name.to_owned(), value))
}
