//! A policy loaded into the store's controls, once it checks.

use std::collections::{BTreeMap, BTreeSet};

use toolcall_ledger::controls::{ChangeError, Controls, RateLimit, update};

use super::validation::check;
use crate::policy::Caller;
use crate::registry::Registry;

/// Replaces the policy part of the controls kept in `store` with
/// `policy`'s (its stops are ignored: the stops kept stand), once it
/// checks against `registry` and `callers` ([`check`]); a policy
/// that does not check is refused and the old one kept.
pub async fn load_policy<St: crate::store::Store + ?Sized>(
    store: &St,
    registry: &Registry,
    callers: &[&Caller],
    policy: &Controls,
    by: &str,
    from: &str,
) -> Result<u64, ChangeError> {
    let errors = check(policy, registry, callers);
    if !errors.is_empty() {
        return Err(ChangeError::Invalid(errors));
    }
    update(store, by, |controls| {
        let before = controls.policy_part();
        let stops = std::mem::take(&mut controls.stops);
        *controls = policy.policy_part();
        controls.stops = stops;
        Ok(describe_policy_change(&before, &policy.policy_part(), from))
    })
    .await
}

/// What changed between two policies, in words, for the history.
fn describe_policy_change(before: &Controls, after: &Controls, from: &str) -> String {
    let mut parts = Vec::new();
    let callers: BTreeSet<&String> = before.callers.keys().chain(after.callers.keys()).collect();
    for id in callers {
        if before.callers.get(id) != after.callers.get(id) {
            parts.push(format!("callers.{id}"));
        }
    }
    let named = |limits: &[RateLimit]| -> BTreeMap<String, RateLimit> {
        limits.iter().map(|l| (l.name.clone(), l.clone())).collect()
    };
    let (old, new) = (named(&before.rate_limits), named(&after.rate_limits));
    for name in old.keys().chain(new.keys()).collect::<BTreeSet<_>>() {
        if old.get(name) != new.get(name) {
            parts.push(format!("rate_limits.{name}"));
        }
    }
    let tools: BTreeSet<&String> = before
        .approvals
        .keys()
        .chain(after.approvals.keys())
        .collect();
    for tool in tools {
        if before.approvals.get(tool) != after.approvals.get(tool) {
            parts.push(format!("approvals.{tool}"));
        }
    }
    if before.approval_rules != after.approval_rules {
        parts.push("approval_rules".to_owned());
    }
    if parts.is_empty() {
        format!("loaded the policy from {from}: no change")
    } else {
        format!(
            "loaded the policy from {from}: changed {}",
            parts.join(", ")
        )
    }
}
