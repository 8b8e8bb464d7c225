//! The policies `--allow` gives, and its default.

use toolcall_core::{Policy, Registry};

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
