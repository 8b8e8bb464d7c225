//! Who may call what, and up to which limits.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What one caller may do: the tools it may call, and the limits on the
/// arguments that tools declare with `#[arg(limit = "...")]`.
///
/// Policy is data the host owns. Tools declare *which* limit bounds an
/// argument; the caller's policy says *how much*. A tool that declares a
/// limit the caller's policy does not set is refused with `POLICY_LIMIT`:
/// a missing limit fails closed.
///
/// A policy is checked against the tools when the dispatcher is built
/// ([`DispatcherBuilder::build`](crate::DispatcherBuilder::build) for the
/// default caller and those given to
/// [`callers`](crate::DispatcherBuilder::callers),
/// [`Dispatcher::check_caller`](crate::Dispatcher::check_caller) for any
/// other): a tool on the allowlist that no tool is named, or a limit no tool
/// declares, is a [`BuildError`](crate::BuildError) naming the closest real
/// name; an allowed tool whose declared limit the policy does not set is a
/// [`BuildWarning`](crate::BuildWarning).
///
/// ```
/// use toolcall_core::Policy;
///
/// let support = Policy::new()
///     .allow(["get_order", "refund_order"])
///     .limit("max_refund_cents", 50_000);
/// assert!(support.allows("refund_order"));
/// assert_eq!(support.limit_of("max_refund_cents"), Some(50_000));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    allowed: BTreeSet<String>,
    limits: BTreeMap<String, i64>,
}

impl Policy {
    /// A policy that allows nothing.
    pub fn new() -> Self {
        Policy::default()
    }

    /// Allows these tools, besides those already allowed.
    pub fn allow<I, T>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.allowed.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Sets the limit of this name.
    pub fn limit(mut self, name: impl Into<String>, value: i64) -> Self {
        self.limits.insert(name.into(), value);
        self
    }

    /// Whether the tool is on the allowlist.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed.contains(tool)
    }

    /// The allowed tools, sorted.
    pub fn allowed(&self) -> impl ExactSizeIterator<Item = &str> {
        self.allowed.iter().map(String::as_str)
    }

    /// The limit of this name, if the policy sets it.
    pub fn limit_of(&self, name: &str) -> Option<i64> {
        self.limits.get(name).copied()
    }

    /// Every limit the policy sets, by name, sorted.
    pub fn limits(&self) -> impl ExactSizeIterator<Item = (&str, i64)> {
        self.limits
            .iter()
            .map(|(name, value)| (name.as_str(), *value))
    }
}

/// Someone who calls tools (an agent, a channel, a tenant) and its policy.
///
/// Cheap to clone: clones share one allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    inner: Arc<CallerInner>,
}

#[derive(Debug, PartialEq, Eq)]
struct CallerInner {
    id: String,
    policy: Policy,
}

impl Caller {
    /// A caller with this id and policy.
    pub fn new(id: impl Into<String>, policy: Policy) -> Self {
        Caller {
            inner: Arc::new(CallerInner {
                id: id.into(),
                policy,
            }),
        }
    }

    /// The caller's id, as audit records show it.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// What the caller may do.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }
}
