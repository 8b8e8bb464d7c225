//! Stages 1 to 3: the tool and the caller's allowlist, the parse, and
//! strict validation, which leave the call [`Prepared`] with its key; and
//! the arguments in every form a later stage reads of them (typed, a
//! field, JSON, the resource locks' keys), made here on demand.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::call::Call;
use super::ids::holder_token;
use super::messages::{Details, Failure};
use super::stages::{HeldLock, Stage, Stages};
use crate::args::{FieldErrors, Members};
use crate::audit::ArgumentProblem;
use crate::canonical::idempotency_key_value;
use crate::controls::Controls;
use crate::parse::{Arguments, RawMembers, member_values, parse_object, raw_members};
use crate::policy::{Caller, Policy};
use crate::result::ToolResult;
use crate::store::{Key, Store};
use crate::tool::{ToolSpec, Validated};

/// How many distinct people must approve a call of `spec`: the tool's own
/// count, or more if the operators' `controls` say so.
fn people(controls: &Controls, spec: &ToolSpec) -> u32 {
    controls.people_needed(spec.name()).max(spec.approvals())
}

impl<St: Store> Stages<St> {
    /// Stages 1 to 3, which ask nothing of the store: the call, valid and
    /// ready for the rest, or the answer that refuses it (with the
    /// problems stage 3 found in its arguments). Their answer waits for
    /// stage 0's, which needs the step: the step and the call's count are
    /// then taken at once.
    #[allow(clippy::too_many_arguments)] // the call's parts and what it was judged by
    pub(super) fn checked<'a>(
        &self,
        call: &Call<'a>,
        caller: &'a Caller,
        spec: Option<&'static ToolSpec>,
        raw: Option<&'a [(Cow<'a, str>, &'a RawValue)]>,
        object: &'a mut Option<Cow<'a, Map<String, Value>>>,
        problems: &mut Vec<ArgumentProblem>,
        controls: &Controls,
    ) -> Stage<Prepared<'a>> {
        // 1. Lookup and allowlist.
        let spec = self.allowed(call.tool, spec, caller.policy())?;

        // 2 and 3. Parse and strict validation. The common case, a raw
        // object plainly within the parse's bounds and valid, is read in one
        // pass, each member's text straight into its field's type; anything
        // else takes the full parse and validation, whose errors say all that
        // is wrong. (`raw`: the members of raw arguments, when the text is
        // plainly within the parse's bounds.)
        let fast = raw.and_then(|members| {
            let validated = spec.validate_members(&Members::Raw(members)).ok()?;
            Some((Members::Raw(members), validated))
        });
        let (members, validated) = match fast {
            Some(fast) => fast,
            None => {
                // Refused by the fast path, but read by it: its members,
                // parsed, say every problem without a second parse. (Read as
                // valid that way, the call takes the full parse as before.)
                let values = raw.and_then(|raw| member_values(raw, self.settings.max_depth));
                if let Some(values) = values
                    && let Err(errors) = spec.validate_members(&Members::Values(&values))
                {
                    let refused = self.refused(spec, &errors);
                    *problems = ArgumentProblem::all_of(spec, errors);
                    return Err(refused);
                }
                let object = &*object.insert(self.parse(call)?);
                let validated = self.validate(spec, object).map_err(|(refused, errors)| {
                    *problems = ArgumentProblem::all_of(spec, errors);
                    refused
                })?;
                (Members::Parsed(object), validated)
            }
        };
        self.prepared(
            spec,
            members,
            validated,
            call.session,
            caller,
            people(controls, spec),
            None,
        )
    }

    /// The members of raw arguments, for the one-pass reading of stages 2
    /// and 3, when the text is plainly within the parse's bounds.
    pub(super) fn raw_members_of<'a>(&self, call: &Call<'a>) -> Option<RawMembers<'a>> {
        match call.arguments {
            Arguments::Raw(raw) if raw.len() <= self.settings.max_argument_bytes => {
                raw_members(raw, self.settings.max_depth)
            }
            _ => None,
        }
    }

    /// Stage 2, the full parse: an object, bounded, no duplicate members.
    fn parse<'a>(&self, call: &Call<'a>) -> Stage<std::borrow::Cow<'a, Map<String, Value>>> {
        parse_object(
            call.arguments,
            self.settings.max_argument_bytes,
            self.settings.max_depth,
        )
        .map_err(|error| {
            let error = error.to_string();
            self.fail_with(
                Failure::InvalidJson,
                call.tool.to_owned(),
                &Details::detail(&error),
                Map::new(),
            )
        })
    }

    /// Stage 3 over a parsed object: the validated arguments, or the answer
    /// that names every problem, with the problems themselves.
    fn validate(
        &self,
        spec: &'static ToolSpec,
        object: &Map<String, Value>,
    ) -> Result<Box<dyn Validated>, (ToolResult, FieldErrors)> {
        spec.validate(object)
            .map_err(|errors| (self.refused(spec, &errors), errors))
    }

    /// The answer to arguments with `errors`: every problem, as the model
    /// reads them.
    fn refused(&self, spec: &'static ToolSpec, errors: &FieldErrors) -> ToolResult {
        self.messages.answer_with_detail(
            Failure::InvalidArguments,
            spec.name(),
            errors.text(),
            Map::new(),
        )
    }

    /// The key and the rest, for arguments that passed validation; their
    /// JSON is made when a stage reads it ([`Prepared::json`]).
    #[allow(clippy::too_many_arguments)]
    fn prepared<'a>(
        &self,
        spec: &'static ToolSpec,
        members: Members<'a>,
        validated: Box<dyn Validated>,
        session: &'a str,
        caller: &'a Caller,
        people: u32,
        key_from: Option<&str>,
    ) -> Stage<Prepared<'a>> {
        let name = spec.name();
        let unserializable = |error: serde_json::Error| {
            tracing::error!(tool = name, %error, "validated arguments do not serialize");
            self.fail(Failure::InternalError, name)
        };
        let key = match key_from {
            Some(approval) => idempotency_key_value(
                caller.id(),
                session,
                name,
                &Value::from(format!("approval:{approval}")),
            ),
            None => validated
                .key(caller.id(), session, name)
                .map_err(unserializable)?,
        };
        Ok(Prepared {
            spec,
            validated: Some(validated),
            members,
            json: OnceLock::new(),
            tainted: None,
            key,
            settled: false,
            session,
            caller,
            step: 0,
            client_answers: false,
            lock: None,
            claimed: None,
            resources: None,
            people,
            ruled: None,
        })
    }

    /// Stage 3, and the key: validated arguments, ready for the rest.
    /// `key_from` replaces the arguments as the key's source (an approval's id).
    pub(super) fn prepare<'a>(
        &self,
        spec: &'static ToolSpec,
        object: &'a Map<String, Value>,
        session: &'a str,
        caller: &'a Caller,
        step: u64,
        key_from: Option<&str>,
    ) -> Stage<Prepared<'a>> {
        let validated = self
            .validate(spec, object)
            .map_err(|(refused, _)| refused)?;
        let members = Members::Parsed(object);
        let people = people(&self.held_controls(), spec);
        let mut prepared =
            self.prepared(spec, members, validated, session, caller, people, key_from)?;
        prepared.step = step;
        // The approvals' paths, which read them whole.
        self.json(&prepared)?;
        Ok(prepared)
    }

    /// Stage 1, given what the registry holds under `name`.
    pub(super) fn allowed(
        &self,
        name: &str,
        found: Option<&'static ToolSpec>,
        policy: &Policy,
    ) -> Stage<&'static ToolSpec> {
        let Some(spec) = found else {
            let available: Vec<Value> = policy.allowed().map(Value::from).collect();
            let mut data = Map::new();
            data.insert("available".into(), Value::from(available));
            return Err(self.fail_with(
                Failure::UnknownTool,
                name.to_owned(),
                &Details::default(),
                data,
            ));
        };
        if !policy.allows(name) {
            // The registry's name, which is the call's.
            return Err(self.fail(Failure::ToolNotAllowed, spec.name()));
        }
        Ok(spec)
    }
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
    /// Whether untrusted output taints the call (see `session_taint` and
    /// `tainted_arguments`), as the pipeline found before stage 5; `None`
    /// for a call a person's decision carries out.
    pub tainted: Option<Vec<String>>,
    pub key: Key,
    /// A person settled the call's unknown outcome: the earlier attempt did
    /// not take effect, so an in-doubt call runs once (see `Doubt::Rerun`).
    pub settled: bool,
    pub session: &'a str,
    pub caller: &'a Caller,
    pub step: u64,
    /// Whether the client that made the call may answer its question
    /// ([`Call::client_answers`](super::call::Call::client_answers)).
    pub client_answers: bool,
    /// The lock of the call's one resource: taken with the call's start
    /// and handed to stages 5 to 8, which take it over; then, while they
    /// run, the lock they hold, which the result's record frees too.
    pub lock: Option<Box<HeldLock>>,
    /// The call's start claimed its key (see `CallStart::claimed`), with a
    /// lease to this time: stage 8 runs under that claim rather than taking
    /// one, and takes it (`None`) when it does.
    pub claimed: Option<u64>,
    /// The lock keys of the call's resources, once read (see
    /// `resource_keys`): the call's start reads them, stages 5 to 8 take them.
    pub resources: Option<Resources>,
    /// How many distinct people must approve the call: 1 unless the
    /// operators' controls say more (then it needs a person, as a
    /// high-risk call does).
    pub people: u32,
    /// The rule of the operators' controls that approved the call, as its
    /// approver (`rule:<name>`), when one did.
    pub ruled: Option<String>,
}

impl Prepared<'_> {
    /// Whether the call runs only with a person's approval (stage 7): a
    /// high-risk tool, or a side effect untrusted output tainted.
    pub fn needs_person(&self) -> bool {
        self.spec.high_risk() || self.tainted.is_some() || self.people > 1
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
