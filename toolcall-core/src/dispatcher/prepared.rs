//! A call that passed validation, as stages 4 to 8 carry it, and the
//! types every stage shares: [`Stage`], [`Approval`], [`Noted`].

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::ids::{Holder, holder_token};
use super::messages::Failure;
use super::stages::Stages;
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
    /// The validated arguments as JSON, made the first time a stage reads
    /// them whole ([`Prepared::json`]): most calls never do.
    pub json: OnceLock<Option<Value>>,
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

    /// The validated arguments as JSON, made now if no stage made them yet,
    /// for the stages that read them whole: the taint of a session that
    /// read untrusted output, a question to a person, an approval's
    /// binding, an untrusted tool's own arguments, the redaction of a
    /// stored result, a dry run's answer. (The limits and the resource
    /// locks read single fields: [`Prepared::member`].) `None` only for
    /// arguments that no longer validate or serialize, which a call that
    /// passed validation never has: the stage fails closed
    /// ([`Stages::json`]).
    pub fn json(&self) -> Option<&Value> {
        self.json
            .get_or_init(|| {
                let made = match &self.validated {
                    Some(typed) => typed.to_value(),
                    None => match self.spec.validate_members(&self.members) {
                        Ok(typed) => typed.to_value(),
                        Err(_) => return None,
                    },
                };
                made.inspect_err(|error| {
                    tracing::error!(tool = self.spec.name(), %error, "validated arguments do not serialize");
                })
                .ok()
            })
            .as_ref()
    }

    /// The lock to ask for with the call's start: of its one resource, for
    /// a side effect (a call naming none, or several, takes its locks at
    /// stage 5).
    pub fn early_lock(&mut self) -> Option<HeldLock> {
        if !self.spec.side_effect() {
            return None;
        }
        let resources = resource_keys(self)?;
        let early = match &resources {
            Resources::One(resource) => Some(HeldLock {
                resource: *resource,
                holder: holder_token(),
                freed: None,
            }),
            _ => None,
        };
        self.resources = Some(resources);
        early
    }

    /// The field at `index` of the tool's fields as JSON: read from the
    /// arguments' JSON if it was built, else from the typed arguments
    /// alone (the limits and the resource locks need no more). `Err` only
    /// for arguments that do not serialize, which the caller fails closed.
    pub fn member(&mut self, index: usize) -> Result<Value, ()> {
        let name = self.spec.fields().get(index).map_or("", |field| field.name);
        if let Some(Some(arguments)) = self.json.get() {
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

impl<St> Stages<St> {
    /// The call's arguments as JSON ([`Prepared::json`]), or the answer for
    /// arguments that cannot be read back (an internal error: they passed
    /// validation).
    pub(super) fn json<'p>(&self, prepared: &'p Prepared<'_>) -> Stage<&'p Value> {
        prepared
            .json()
            .ok_or_else(|| self.fail(Failure::InternalError, prepared.spec.name()))
    }
}

/// A person's decision that a call carried out: who took it, and the
/// arguments they put in place of the model's. The audit records both.
pub(super) struct Carried {
    pub by: String,
    pub edited: Option<Value>,
}

/// A resource lock a call holds (or asks for with its start).
pub(super) struct HeldLock {
    pub resource: Key,
    pub holder: Holder,
    /// Set once the lock was freed with the result's record (and from the
    /// moment that record is sent: the renewals stop).
    pub freed: Option<Arc<AtomicBool>>,
}

/// The lock keys of a call's resources (`#[arg(resource)]`), sorted:
/// SHA-256 of the resource's kind and the canonical value, so that every
/// tool naming the same kind of resource shares the lock. `None` for
/// arguments that cannot be read, which the call fails closed.
pub(super) fn resource_keys(prepared: &mut Prepared<'_>) -> Option<Resources> {
    // Read once per call: the call's start asked for the lock of its one
    // resource, and stages 5 to 8 take the same ones.
    if let Some(known) = prepared.resources.take() {
        return Some(known);
    }
    let mut keys = Resources::None;
    for (index, field) in prepared.spec.fields().iter().enumerate() {
        let Some(kind) = field.resource else {
            continue;
        };
        let value = prepared.member(index).ok()?;
        if !value.is_null() {
            keys.push(crate::canonical::resource_digest(kind, &value));
        }
    }
    if let Resources::Many(keys) = &mut keys {
        keys.sort_unstable();
        keys.dedup();
    }
    Some(keys)
}

/// A call's resource lock keys, sorted and distinct: most tools name one
/// resource or none, which takes no allocation.
pub(super) enum Resources {
    None,
    One(Key),
    Many(Vec<Key>),
}

impl Resources {
    fn push(&mut self, key: Key) {
        *self = match std::mem::replace(self, Resources::None) {
            Resources::None => Resources::One(key),
            Resources::One(first) => Resources::Many(vec![first, key]),
            Resources::Many(mut keys) => {
                keys.push(key);
                Resources::Many(keys)
            }
        };
    }
}

impl std::ops::Deref for Resources {
    type Target = [Key];

    fn deref(&self) -> &[Key] {
        match self {
            Resources::None => &[],
            Resources::One(key) => std::slice::from_ref(key),
            Resources::Many(keys) => keys,
        }
    }
}
