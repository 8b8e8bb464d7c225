//! Stages 1 to 3: the tool and the caller's allowlist, the parse, and
//! strict validation, which leaves the call [`Prepared`] with its key.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::call::Call;
use super::messages::{Details, Failure};
use super::prepared::{Prepared, Stage};
use super::stages::Stages;
use crate::args::{FieldErrors, Members};
use crate::audit::ArgumentProblem;
use crate::canonical::idempotency_key_value;
use crate::parse::{Arguments, RawMembers, member_values, parse_object, raw_members};
use crate::policy::{Caller, Policy};
use crate::result::ToolResult;
use crate::store::Store;
use crate::tool::{ToolSpec, Validated};

impl<St: Store> Stages<St> {
    /// Stages 1 to 3, which ask nothing of the store: the call, valid and
    /// ready for the rest, or the answer that refuses it (with the
    /// problems stage 3 found in its arguments). Their answer waits for
    /// stage 0's, which needs the step: the step and the call's count are
    /// then taken at once.
    pub(super) fn checked<'a>(
        &self,
        call: &Call<'a>,
        caller: &'a Caller,
        spec: Option<&'static ToolSpec>,
        raw: Option<&'a [(Cow<'a, str>, &'a RawValue)]>,
        object: &'a mut Option<Cow<'a, Map<String, Value>>>,
        problems: &mut Vec<ArgumentProblem>,
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
        match fast {
            Some((members, validated)) => {
                self.prepared(spec, members, validated, call.session, caller, 0, None)
            }
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
                let members = Members::Parsed(object);
                self.prepared(spec, members, validated, call.session, caller, 0, None)
            }
        }
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
        step: u64,
        key_from: Option<&str>,
    ) -> Stage<Prepared<'a>> {
        let name = spec.name();
        let unserializable = |error: serde_json::Error| {
            tracing::error!(tool = name, %error, "validated arguments do not serialize");
            self.fail(Failure::InternalError, name)
        };
        let key = match key_from {
            Some(approval) => {
                idempotency_key_value(session, name, &Value::from(format!("approval:{approval}")))
            }
            None => validated.key(session, name).map_err(unserializable)?,
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
            step,
            lock: None,
            resources: None,
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
        let prepared = self.prepared(spec, members, validated, session, caller, step, key_from)?;
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
