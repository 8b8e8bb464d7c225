//! The set of tools a dispatcher can run.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Value, json};

use crate::policy::Policy;
use crate::schema;
use crate::tool::{Tool, ToolSpec};

/// An entry `#[tool]` submits for [`Registry::collect`].
#[doc(hidden)]
pub struct ToolEntry(pub fn() -> &'static ToolSpec);

inventory::collect!(ToolEntry);

/// Registries of at most this many tools are searched by name, one after
/// the other; larger ones through their map.
const SCANNED: usize = 8;

/// The tools a dispatcher knows, by name.
///
/// Build one by naming the tools with [`tools!`](crate::tools), or take every
/// `#[tool]` linked into the program with [`Registry::collect`]. Either way,
/// two tools with one name are an error, not a silent override.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    tools: Vec<&'static ToolSpec>,
    by_name: HashMap<&'static str, usize>,
}

/// Why a registry could not be built.
///
/// Its `Debug` form is its `Display` sentence (what is wrong and the fix),
/// so that `?` in a `main` returning `Result<(), Box<dyn Error>>` prints
/// the sentence; `{:#?}` shows the fields.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools share a name.
    DuplicateName {
        /// The name both tools use.
        name: &'static str,
    },
    /// An object in a tool's schema would accept members it does not
    /// declare: the model would be told less than the validator enforces,
    /// or the validator would accept what the schema never mentioned.
    OpenSchema {
        /// The tool.
        tool: &'static str,
        /// Where in the parameters schema, as a JSON pointer.
        path: String,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::DuplicateName { name } => write!(
                f,
                "two tools are named `{name}`; rename one with #[tool(name = \"...\")]"
            ),
            RegistryError::OpenSchema { tool, path } => write!(
                f,
                "tool `{tool}`: the object at `{path}` of its parameters schema accepts unknown members; \
                 add #[serde(deny_unknown_fields)] to that type, so the model and the validator agree that \
                 unknown fields are errors"
            ),
        }
    }
}

impl fmt::Debug for RegistryError {
    /// The `Display` sentence; with `{:#?}`, the variant and its fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (variant, fields): (&str, &[(&str, &dyn fmt::Debug)]) = match self {
            RegistryError::DuplicateName { name } => ("DuplicateName", &[("name", name)]),
            RegistryError::OpenSchema { tool, path } => {
                ("OpenSchema", &[("tool", tool), ("path", path)])
            }
        };
        debug_variant(f, self, variant, fields)
    }
}

/// The `Debug` form of an error made when tools are put together: its
/// `Display` sentence, so that `?` in a `main` prints what to fix; with
/// `{:#?}`, `variant` and its `fields`, for a `match` to be written against.
pub(crate) fn debug_variant(
    f: &mut fmt::Formatter<'_>,
    sentence: &dyn fmt::Display,
    variant: &str,
    fields: &[(&str, &dyn fmt::Debug)],
) -> fmt::Result {
    if !f.alternate() {
        return sentence.fmt(f);
    }
    let mut debug = f.debug_struct(variant);
    for (name, value) in fields {
        debug.field(name, value);
    }
    debug.finish()
}

impl std::error::Error for RegistryError {}

impl Registry {
    /// A registry of these tools, in this order.
    pub fn from_specs(
        specs: impl IntoIterator<Item = &'static ToolSpec>,
    ) -> Result<Self, RegistryError> {
        let mut registry = Registry::default();
        for spec in specs {
            registry.insert(spec)?;
        }
        Ok(registry)
    }

    /// Every `#[tool]` linked into this program, sorted by name.
    pub fn collect() -> Result<Self, RegistryError> {
        Registry::from_specs(Registry::collect_specs())
    }

    /// The specs of every `#[tool]` linked into this program, sorted by
    /// name: for building a registry of some of them.
    pub fn collect_specs() -> impl Iterator<Item = &'static ToolSpec> {
        let mut specs: Vec<&'static ToolSpec> = inventory::iter::<ToolEntry>
            .into_iter()
            .map(|entry| (entry.0)())
            .collect();
        specs.sort_by_key(|spec| spec.name());
        specs.into_iter()
    }

    fn insert(&mut self, spec: &'static ToolSpec) -> Result<(), RegistryError> {
        if self.by_name.contains_key(spec.name()) {
            return Err(RegistryError::DuplicateName { name: spec.name() });
        }
        if let Some(path) = open_object(&spec.parameters_schema()) {
            return Err(RegistryError::OpenSchema {
                tool: spec.name(),
                path,
            });
        }
        self.by_name.insert(spec.name(), self.tools.len());
        self.tools.push(spec);
        Ok(())
    }

    /// The tool of this name.
    pub fn get(&self, name: &str) -> Option<&'static ToolSpec> {
        // Among a few tools, comparing the names (their lengths first)
        // costs less than hashing the one asked for.
        if self.tools.len() <= SCANNED {
            return self.tools.iter().copied().find(|spec| spec.name() == name);
        }
        self.by_name.get(name).map(|&i| self.tools[i])
    }

    /// All tools, in registration order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'static ToolSpec> + Clone + '_ {
        self.tools.iter().copied()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Provider-neutral tool definitions, `[{name, description, parameters}]`,
    /// for the tools `policy` allows, in registration order. The parameters
    /// are the JSON Schema the validator enforces, each argument's caller
    /// limit as its `maximum` ([`ToolSpec::parameters_schema_for`]).
    pub fn definitions(&self, policy: &Policy) -> Vec<Value> {
        self.iter()
            .filter(|spec| policy.allows(spec.name()))
            .map(|spec| {
                json!({
                    "name": spec.name(),
                    "description": spec.description(),
                    "parameters": spec.parameters_schema_for(policy),
                })
            })
            .collect()
    }
}

/// The JSON pointer of the first object schema under `schema` that accepts
/// undeclared members. An object is closed with `additionalProperties: false`;
/// a map (`additionalProperties` a schema, no `properties`) declares every
/// member it accepts and counts as closed.
fn open_object(schema: &Value) -> Option<String> {
    schema::find(schema, |map| {
        let is_object = match map.get("type") {
            Some(Value::String(_) | Value::Array(_)) => schema::has_type(map, "object"),
            _ => map.contains_key("properties"),
        };
        let closed = match map.get("additionalProperties") {
            Some(Value::Bool(false)) => true,
            Some(Value::Object(_)) => !map.contains_key("properties"),
            _ => false,
        };
        is_object && !closed
    })
}

/// A function `tools![...]` names, with `T` the type named like it: the
/// type `#[tool]` writes, or, for a function without `#[tool]`, the
/// stand-in `tools![...]` declares, which is no [`Tool`].
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`tools![...]` names a function without `#[tool]`: `{Self}`",
    label = "this function has no `#[tool]`",
    note = "add `#[tool]` above the function (with a doc comment on it and on each parameter): `tools![...]` lists the functions `#[tool]` made tools"
)]
pub trait NamesATool<T> {
    /// The tool's spec.
    fn spec() -> &'static ToolSpec;

    /// The spec of the tool `function` is: what `tools![...]` calls, as
    /// `<_ as NamesATool<T>>::spec_of(function)`, a path rather than a
    /// bound of a function, so that the error names no line of the library.
    fn spec_of(_function: Self) -> &'static ToolSpec
    where
        Self: Sized,
    {
        Self::spec()
    }
}

#[diagnostic::do_not_recommend]
impl<F, T: Tool> NamesATool<T> for F {
    fn spec() -> &'static ToolSpec {
        T::spec()
    }
}

/// A [`Registry`] of the named `#[tool]` functions.
///
/// ```ignore
/// let registry = toolcall::tools![get_order, refund_order]?;
/// ```
///
/// Evaluates to `Result<Registry, RegistryError>`: two tools with one name
/// are refused.
///
/// A function without `#[tool]` fails the build with a message that names
/// it and says to add `#[tool]`.
#[macro_export]
macro_rules! tools {
    ($($tool:path),* $(,)?) => {
        $crate::Registry::from_specs([$({
            // The type named like the function is the one `#[tool]` wrote,
            // imported below; for a function without `#[tool]`, which has
            // none, it is this stand-in, which is no tool: the build fails
            // on `NamesATool`, whose message names the function.
            #[allow(non_camel_case_types, dead_code)]
            struct __toolcall_tool {}
            {
                #[allow(unused_imports)]
                use $tool as __toolcall_tool;
                <_ as $crate::__private::NamesATool<__toolcall_tool>>::spec_of($tool)
            }
        }),*])
    };
}
