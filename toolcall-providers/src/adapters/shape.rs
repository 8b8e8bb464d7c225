//! Reading a provider's message member by member, with the path of each
//! member at hand for the error that names it.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{AdapterError, CallArguments, Outcome, Problem, Provider, ProviderCall, raw};

/// A value inside a provider's message, and where it is; with its text as
/// the provider wrote it, when the message was read from text.
pub(super) struct At<'a> {
    provider: Provider,
    value: &'a Value,
    /// The value's own text, the same value as `value`: what the arguments
    /// of a call are passed as, so that the pipeline reads what the model
    /// wrote (a member twice, the size of the text).
    text: Option<&'a str>,
    path: String,
}

impl<'a> At<'a> {
    /// The message itself: `value`, parsed from `text` if the host had it.
    pub(super) fn root(provider: Provider, value: &'a Value, text: Option<&'a str>) -> Self {
        At {
            provider,
            value,
            text: text.map(raw::trim),
            path: String::new(),
        }
    }

    pub(super) fn value(&self) -> &'a Value {
        self.value
    }

    /// An error about this place.
    pub(super) fn error(&self, problem: Problem) -> AdapterError {
        AdapterError::new(self.provider, &self.path, problem)
    }

    fn wrong_type(&self, expected: &'static str) -> AdapterError {
        self.error(Problem::WrongType {
            expected,
            found: kind(self.value),
        })
    }

    fn child(&self, value: &'a Value, text: Option<&'a str>, path: String) -> At<'a> {
        At {
            provider: self.provider,
            value,
            text,
            path,
        }
    }

    /// The arguments of a call at this place: the text the provider wrote,
    /// when there is one, or else the parsed value.
    pub(super) fn arguments(&self) -> CallArguments {
        match self.text {
            Some(text) => CallArguments::Raw(text.to_owned()),
            None => CallArguments::Parsed(self.value.clone()),
        }
    }

    fn member_path(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// The member `name`, if there and not `null`.
    ///
    /// Read from text, an object with a member name twice is an error
    /// ([`Problem::DuplicateMember`]): which of the two the provider meant
    /// cannot be told, and a parser that keeps the other one would read
    /// another call than this adapter runs.
    pub(super) fn get(&self, name: &str) -> Result<Option<At<'a>>, AdapterError> {
        // Every member is looked at, whichever is asked for: a member twice
        // is an error even when the one that was parsed is `null`.
        let mut text = None;
        if let Some(members) = self.text.and_then(raw::members) {
            let mut seen = HashSet::new();
            for (member, member_text) in members {
                if !seen.insert(member.clone()) {
                    return Err(AdapterError::new(
                        self.provider,
                        &self.member_path(&member),
                        Problem::DuplicateMember,
                    ));
                }
                if member == name {
                    text = Some(member_text);
                }
            }
        }
        match self.value.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => Ok(Some(self.child(value, text, self.member_path(name)))),
        }
    }

    /// The member `name`, which the provider always sends.
    pub(super) fn member(&self, name: &str) -> Result<At<'a>, AdapterError> {
        self.get(name)?.ok_or_else(|| {
            AdapterError::new(self.provider, &self.member_path(name), Problem::Missing)
        })
    }

    /// This value as an object.
    pub(super) fn object(&self) -> Result<&'a Map<String, Value>, AdapterError> {
        self.value
            .as_object()
            .ok_or_else(|| self.wrong_type("an object"))
    }

    /// The items of this array, each with its index in its path.
    pub(super) fn items(&self) -> Result<Vec<At<'a>>, AdapterError> {
        let items = self
            .value
            .as_array()
            .ok_or_else(|| self.wrong_type("an array"))?;
        let texts = self
            .text
            .and_then(raw::items)
            .filter(|texts| texts.len() == items.len());
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let text = texts.as_ref().map(|texts| texts[i]);
                self.child(item, text, format!("{}[{i}]", self.path))
            })
            .collect())
    }

    /// The first item of this array, which must have one.
    pub(super) fn first(&self) -> Result<At<'a>, AdapterError> {
        self.items()?.into_iter().next().ok_or_else(|| {
            AdapterError::new(
                self.provider,
                &format!("{}[0]", self.path),
                Problem::Missing,
            )
        })
    }

    /// This value as a string.
    pub(super) fn string(&self) -> Result<&'a str, AdapterError> {
        self.value
            .as_str()
            .ok_or_else(|| self.wrong_type("a string"))
    }

    /// This value as a non-empty string: an id or a name.
    pub(super) fn word(&self) -> Result<&'a str, AdapterError> {
        match self.string()? {
            "" => Err(self.error(Problem::WrongType {
                expected: "a non-empty string",
                found: "an empty string",
            })),
            word => Ok(word),
        }
    }

    /// When this object has a `role`, that it is `role` (`expected` says so
    /// in an error): catches the host passing the wrong message of a
    /// conversation.
    pub(super) fn role_if_any(
        &self,
        role: &str,
        expected: &'static str,
    ) -> Result<(), AdapterError> {
        if let Some(at) = self.get("role")? {
            let found = at.string()?;
            if found != role {
                return Err(at.error(Problem::Unsupported {
                    found: found.to_owned(),
                    expected,
                }));
            }
        }
        Ok(())
    }
}

/// The ids of the calls read so far, to refuse a second call with one.
#[derive(Default)]
pub(super) struct Ids(HashSet<String>);

impl Ids {
    pub(super) fn check(&mut self, at: &At<'_>, id: &str) -> Result<(), AdapterError> {
        if self.0.insert(id.to_owned()) {
            Ok(())
        } else {
            Err(at.error(Problem::DuplicateId { id: id.to_owned() }))
        }
    }

    /// An OpenAI call: its id (unique in the message) at `id_at`, and a
    /// `name` and `arguments` (JSON text) in `fields`.
    pub(super) fn raw_call(
        &mut self,
        id_at: &At<'_>,
        fields: &At<'_>,
    ) -> Result<ProviderCall, AdapterError> {
        let id = id_at.word()?;
        self.check(id_at, id)?;
        fields.object()?;
        let name = fields.member("name")?.word()?;
        let arguments = fields.member("arguments")?.string()?;
        Ok(ProviderCall {
            id: Some(id.to_owned()),
            name: name.to_owned(),
            // The JSON string's content is the model's text, whatever the
            // message was read from.
            arguments: CallArguments::Raw(arguments.to_owned()),
        })
    }
}

/// One message a call, made by `message` of the call's id and the result as
/// the model reads it: the answer of both OpenAI APIs, which differ only in
/// the message's member names.
pub(super) fn text_replies(
    outcomes: &[Outcome],
    message: impl Fn(&str, String) -> Value,
) -> Vec<Value> {
    outcomes
        .iter()
        .map(|outcome| {
            message(
                outcome.call.id().unwrap_or_default(),
                outcome.result.to_model_text(),
            )
        })
        .collect()
}

/// The JSON type of a value, as an error message names it.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
