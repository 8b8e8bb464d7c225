//! What stage 8 and the settling of an unknown outcome need of a call:
//! its parts borrowed ([`CallParts`]), its arguments as JSON made only when
//! read ([`JsonArguments`]), and whether its key is in doubt ([`Doubt`]).

use std::sync::OnceLock;

use serde_json::Value;

use super::messages::Failure;
use super::stages::{Stage, Stages};
use crate::args::Members;
use crate::policy::Caller;
use crate::store::Key;
use crate::tool::ToolSpec;

/// Whether a side effect's key is in doubt when stage 8 runs it, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Doubt {
    /// Not that anyone knows: claim it and run.
    No,
    /// Its last run ended with an unknown outcome: settle it first
    /// (`reconcile`, a backend that honours the key, or a person).
    Unknown,
    /// A person settled it: the earlier attempt did not take effect, so it
    /// runs once under the same key.
    Rerun,
}

/// A call's parts, borrowed, as stage 8 and the settling of an unknown
/// outcome need them (borrowing nothing that is not `Sync`).
pub(super) struct CallParts<'a> {
    pub spec: &'static ToolSpec,
    pub key: &'a Key,
    pub arguments: JsonArguments<'a>,
    pub session: &'a str,
    pub caller: &'a Caller,
    pub step: u64,
}

/// A call's arguments as JSON for what stage 8 rarely needs them for (a
/// question about an unknown outcome, a stored result's redaction): what
/// the stages before made ([`Prepared::json`]), or made from the call's
/// members when first read. Most calls end without reading it, and make
/// nothing. (It borrows nothing that is not `Sync`: the typed arguments are
/// the handler's by then.)
pub(super) struct JsonArguments<'a> {
    made: &'a OnceLock<Option<Value>>,
    members: Members<'a>,
}

impl<'a> JsonArguments<'a> {
    pub(super) fn of(made: &'a OnceLock<Option<Value>>, members: &Members<'a>) -> Self {
        JsonArguments {
            made,
            members: *members,
        }
    }

    /// The JSON, made now if it was not; `None` only for arguments that no
    /// longer validate or serialize, which a call that passed validation
    /// never has.
    fn get(&self, spec: &ToolSpec) -> Option<&Value> {
        self.made
            .get_or_init(|| {
                let typed = spec.validate_members(&self.members).ok()?;
                typed.to_value().ok()
            })
            .as_ref()
    }
}

impl<St> Stages<St> {
    /// The arguments of `call` as JSON, or the answer for arguments that
    /// cannot be read back (an internal error: they passed validation).
    pub(super) fn arguments_of<'c>(&self, call: &'c CallParts<'_>) -> Stage<&'c Value> {
        self.arguments_in(call.spec, &call.arguments)
    }

    pub(super) fn arguments_in<'c>(
        &self,
        spec: &ToolSpec,
        arguments: &'c JsonArguments<'_>,
    ) -> Stage<&'c Value> {
        arguments.get(spec).ok_or_else(|| {
            tracing::error!(tool = spec.name(), "validated arguments do not serialize");
            self.fail(Failure::InternalError, spec.name())
        })
    }
}

/// A side effect whose backend can neither be asked (`reconcile`) nor
/// trusted with one key twice (`idempotent_backend`): a person answers
/// its unknown outcomes.
pub(super) fn unprotected(spec: &ToolSpec) -> bool {
    spec.side_effect() && !spec.reconciles() && !spec.idempotent_backend()
}
