//! Reading a provider's message member by member, with the path of each
//! member at hand for the error that names it.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{AdapterError, CallArguments, Problem, Provider, ProviderCall};

/// A value inside a provider's message, and where it is.
pub(super) struct At<'a> {
    provider: Provider,
    value: &'a Value,
    path: String,
}

impl<'a> At<'a> {
    /// The message itself.
    pub(super) fn root(provider: Provider, value: &'a Value) -> Self {
        At {
            provider,
            value,
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

    fn child(&self, value: &'a Value, path: String) -> At<'a> {
        At {
            provider: self.provider,
            value,
            path,
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
    pub(super) fn get(&self, name: &str) -> Option<At<'a>> {
        match self.value.get(name) {
            None | Some(Value::Null) => None,
            Some(value) => Some(self.child(value, self.member_path(name))),
        }
    }

    /// The member `name`, which the provider always sends.
    pub(super) fn member(&self, name: &str) -> Result<At<'a>, AdapterError> {
        self.get(name).ok_or_else(|| {
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
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, item)| self.child(item, format!("{}[{i}]", self.path)))
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
        if let Some(at) = self.get("role") {
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
            arguments: CallArguments::Raw(arguments.to_owned()),
        })
    }
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
