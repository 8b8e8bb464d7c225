//! A side-effecting call's life: the questions it asks a person, who may
//! answer each and how their state is derived
//! ([`toolcall_ledger::question`], re-exported here whole), and what an
//! unknown outcome allows ([`after_unknown`]). Every entry point (a call,
//! the host's `confirmed` and question ids, [`Dispatcher::approve`],
//! [`deny`](crate::Dispatcher::deny) and [`answer_in_doubt`](crate::Dispatcher::answer_in_doubt),
//! the inbox's decisions, an MCP client's answers and tasks, retries, crash
//! and store recovery, dry runs) asks this module, and refuses what it
//! refuses.
//!
//! # Unknown outcomes
//!
//! An unknown outcome is never retried on a guess ([`after_unknown`]): a
//! failure whose effect may have happened is retried only under a key the
//! backend honours, or after the backend was asked ([`Backend::Reconciles`]);
//! else it is in doubt at once and a person answers its question. Only a failure the
//! handler says came before any effect ([`ToolError::NotApplied`](crate::ToolError::NotApplied))
//! is retried plainly.

#[cfg(doc)]
use crate::Dispatcher;
pub use toolcall_ledger::decide::*;
pub use toolcall_ledger::question::*;

use crate::tool::ToolSpec;

/// What a tool's backend promises about its idempotency key, as the tool
/// declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// `#[tool(idempotent_backend)]`: it applies one key at most once, so
    /// an attempt may be made again under the same key.
    HonoursKey,
    /// `#[tool(reconcile = path)]` (and not the above): it can be asked
    /// whether the call with a key took effect.
    Reconciles,
    /// Neither: an unknown outcome is a person's to answer.
    Neither,
}

impl Backend {
    /// What `spec` declares. A tool that declares both `idempotent_backend`
    /// and `reconcile` is retried under its key (the cheaper of two safe
    /// ways); its `reconcile` is asked when the retries are spent, and when
    /// an identical call finds it in doubt.
    pub fn of(spec: &ToolSpec) -> Backend {
        if spec.idempotent_backend() {
            Backend::HonoursKey
        } else if spec.reconciles() {
            Backend::Reconciles
        } else {
            Backend::Neither
        }
    }
}

/// What comes after a side effect's attempt whose outcome is unknown (a
/// transient failure, a lost answer), while retries are left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AfterUnknown {
    /// Try again under the same key: the backend applies it once.
    Retry,
    /// Ask the backend (`reconcile`) first: done is the answer, not done
    /// is tried again, unknown is in doubt.
    AskBackend,
    /// Stop: the call is in doubt, and a person answers it.
    InDoubt,
}

/// The rule for an unknown outcome: never retried on a guess.
pub fn after_unknown(backend: Backend) -> AfterUnknown {
    match backend {
        Backend::HonoursKey => AfterUnknown::Retry,
        Backend::Reconciles => AfterUnknown::AskBackend,
        Backend::Neither => AfterUnknown::InDoubt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_outcome_is_retried_only_where_the_backend_allows() {
        assert_eq!(after_unknown(Backend::HonoursKey), AfterUnknown::Retry);
        assert_eq!(after_unknown(Backend::Reconciles), AfterUnknown::AskBackend);
        assert_eq!(after_unknown(Backend::Neither), AfterUnknown::InDoubt);
    }
}
