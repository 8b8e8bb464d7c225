//! A call that passed validation, as stages 4 to 8 carry it, and the
//! types every stage shares: [`Stage`], [`Approval`], [`Noted`].

use serde_json::Value;

use super::inbox::Carried;
use super::locks::{HeldLock, Resources};
use crate::args::Members;
use crate::audit::ArgumentProblem;
use crate::policy::Caller;
use crate::result::ToolResult;
use crate::store::Key;
use crate::tool::{ToolSpec, Validated};

/// A stage that says no returns the finished result as its error: the
/// rejection *is* the answer.
pub(super) type Stage<T> = Result<T, ToolResult>;

/// How a high-risk call is approved, if it is.
#[derive(Clone, Copy)]
pub(super) enum Approval<'a> {
    /// Not yet: ask for it.
    None,
    /// The host says a person approved (the reference's `confirmed` flag),
    /// or the approval was already taken from the store.
    Given,
    /// A confirmation id that must match this exact call.
    Id(&'a str),
    /// The same call ran before with an unknown outcome: it passed stages 5
    /// to 7 then, and runs again under the same key without them.
    InDoubt,
}

/// What the pipeline notes of a call for its audit record, besides the
/// answer.
#[derive(Default)]
pub(super) struct Noted {
    /// The person's decision the call carried out, if it brought one.
    pub carried: Option<Carried>,
    /// Its taint, if it had one (see [`AuditRecord::tainted`](crate::AuditRecord::tainted)).
    pub tainted: Option<Vec<String>>,
    /// The problems stage 3 found in its arguments.
    pub problems: Vec<ArgumentProblem>,
}

/// A call that passed validation, with what the later stages need.
pub(super) struct Prepared<'a> {
    pub spec: &'static ToolSpec,
    /// The typed arguments, until execution hands them to the handler
    /// (see [`Prepared::typed`]).
    pub validated: Option<Box<dyn Validated>>,
    /// Where the arguments came from, for a retry's fresh copy.
    pub members: Members<'a>,
    /// The validated arguments as JSON, for the stages that read them whole
    /// (see `Dispatcher::with_arguments`); `None` until one of them does.
    pub arguments: Option<Value>,
    /// Whether untrusted output taints the call (see `taint_of`), as the
    /// pipeline found before stage 5; `None` for a call a person's
    /// decision carries out.
    pub tainted: Option<Vec<String>>,
    pub key: Key,
    /// A person settled the call's unknown outcome: the earlier attempt did
    /// not take effect, so an in-doubt call runs once (see `Doubt::Rerun`).
    pub settled: bool,
    pub session: &'a str,
    pub caller: &'a Caller,
    pub step: u64,
    /// The lock of the call's one resource: taken with the call's start
    /// and handed to stages 5 to 8, which take it over; then, while they
    /// run, the lock they hold, which the result's record frees too.
    pub lock: Option<HeldLock>,
    /// The lock keys of the call's resources, once read (see
    /// `resource_keys`): the call's start reads them, stages 5 to 8 take them.
    pub resources: Option<Resources>,
}

impl Prepared<'_> {
    /// Whether the call runs only with a person's approval (stage 7): a
    /// high-risk tool, or a side effect untrusted output tainted.
    pub fn needs_person(&self) -> bool {
        self.spec.high_risk() || self.tainted.is_some()
    }

    /// The validated arguments as JSON, once `Dispatcher::with_arguments`
    /// built them.
    pub fn arguments(&self) -> &Value {
        debug_assert!(
            self.arguments.is_some(),
            "{} reads its arguments as JSON before they were built",
            self.spec.name()
        );
        static NONE: Value = Value::Null;
        self.arguments.as_ref().unwrap_or(&NONE)
    }

    /// The field at `index` of the tool's fields as JSON: read from the
    /// arguments' JSON if it was built, else from the typed arguments
    /// alone (the limits and the resource locks need no more). `Err` only
    /// for arguments that do not serialize, which the caller fails closed.
    pub fn member(&mut self, index: usize) -> Result<Value, ()> {
        let name = self.spec.fields().get(index).map_or("", |field| field.name);
        if let Some(arguments) = &self.arguments {
            return Ok(arguments.get(name).cloned().unwrap_or(Value::Null));
        }
        let typed = self.typed().ok_or(())?;
        typed.member(index, name).map_err(|error| {
            tracing::error!(tool = self.spec.name(), %error, "validated arguments do not serialize");
        })
    }

    /// The typed arguments. Execution takes them (the handler consumes
    /// them); a stage after that reads them validated again from their
    /// members. `None` only if that fails, which a call that passed
    /// validation never does.
    pub fn typed(&mut self) -> Option<&dyn Validated> {
        if self.validated.is_none() {
            self.validated = self.spec.validate_members(&self.members).ok();
        }
        self.validated.as_deref()
    }
}
