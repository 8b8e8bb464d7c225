//! Which argument types a tool parameter and its constraints apply to,
//! checked at compile time.
//!
//! `#[tool]` asserts, for each constraint on a parameter, that the
//! parameter's type has the matching kind: `pattern` on an integer, or
//! `min_length` on a bool, fails to compile with the message below, spanned
//! on the attribute's key. `Option<T>` has the kind of `T`.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value};

use crate::args::{FieldErrors, FieldMeta, Members};

/// A type that arrives as a JSON string.
#[diagnostic::on_unimplemented(
    message = "this constraint applies to strings, and `{Self}` is not a string type",
    label = "a string constraint on a parameter of type `{Self}`",
    note = "`pattern`, `min_length`, `max_length` and `format` take `String` (or `Option<String>`)"
)]
pub trait StringArg {
    /// What `#[tool]` asserts, as `<T as StringArg>::IS`: a path, not a bound
    /// of a function of this crate, so that the error names no line of it
    /// (an application's expected compile errors hold across releases).
    #[doc(hidden)]
    const IS: () = ();
}

/// A type that arrives as a JSON number.
#[diagnostic::on_unimplemented(
    message = "this constraint applies to numbers, and `{Self}` is not a number type",
    label = "a number constraint on a parameter of type `{Self}`",
    note = "`min`, `max`, `exclusive_min`, `exclusive_max` and `limit` take integers and floats (or their `Option`)"
)]
pub trait NumberArg {
    /// What `#[tool]` asserts, as `<T as NumberArg>::IS`: a path, not a bound
    /// of a function of this crate, so that the error names no line of it
    /// (an application's expected compile errors hold across releases).
    #[doc(hidden)]
    const IS: () = ();
}

/// A type that arrives as a JSON array.
#[diagnostic::on_unimplemented(
    message = "this constraint applies to lists, and `{Self}` is not a list type",
    label = "a list constraint on a parameter of type `{Self}`",
    note = "`min_items` and `max_items` take `Vec<T>`, sets, arrays (or their `Option`)"
)]
pub trait ListArg {
    /// What `#[tool]` asserts, as `<T as ListArg>::IS`: a path, not a bound
    /// of a function of this crate, so that the error names no line of it
    /// (an application's expected compile errors hold across releases).
    #[doc(hidden)]
    const IS: () = ();
}

impl StringArg for String {}
impl StringArg for Box<str> {}
impl StringArg for Arc<str> {}
impl StringArg for Cow<'static, str> {}
impl<T: StringArg> StringArg for Option<T> {}

macro_rules! numbers {
    ($($t:ty),*) => { $(impl NumberArg for $t {})* };
}
numbers!(
    i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64
);
impl<T: NumberArg> NumberArg for Option<T> {}

impl<T> ListArg for Vec<T> {}
impl<T> ListArg for VecDeque<T> {}
impl<T> ListArg for BTreeSet<T> {}
impl<T, S> ListArg for HashSet<T, S> {}
impl<T> ListArg for Box<[T]> {}
impl<T, const N: usize> ListArg for [T; N] {}
impl<T: ListArg> ListArg for Option<T> {}

/// A type a tool parameter can have: what the model sends is read into it
/// (`Deserialize`), the validated arguments are written out of it
/// (`Serialize`: the idempotency key, a confirmation's `pending`), and the
/// model is told its shape (`JsonSchema`, from schemars 1.x).
///
/// `#[tool]` asserts it once per parameter, spanned on the type: this is the
/// only error a type without the derives causes, because everything else the
/// macro generates reaches the three traits through [`Probe`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool argument: it needs `#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]`",
    label = "the model's argument is read into this type, validated, and described to the model from it",
    note = "add `#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]` to `{Self}` (and to every type inside it), with schemars 1.x: a `JsonSchema` derived with schemars 0.8 does not count",
    note = "a type from another crate needs those traits from its crate (often a `serde` or `schemars` feature), or a newtype of yours that derives them"
)]
// No supertraits: `<T as ArgType>::IS` would check each of them apart,
// three errors that each name this line, instead of this trait's one.
pub trait ArgType {
    /// What `#[tool]` asserts, as `<T as ArgType>::IS`: a path, not a bound
    /// of a function of this crate, so that the error names no line of it
    /// (an application's expected compile errors hold across releases).
    #[doc(hidden)]
    const IS: () = ();
}

#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + schemars::JsonSchema> ArgType for T {}

/// Chooses, by method resolution, between the real use of a parameter's
/// type (when it is an [`ArgType`]) and a stand-in that never runs (when it
/// is not, and `<T as ArgType>::IS` has already failed the build with the one
/// message that says the fix). Call the methods as `(&Probe::<T>::new()).m()`
/// with [`ArgProbe`] and [`ArgFallback`] in scope.
pub struct Probe<T>(PhantomData<fn() -> T>);

impl<T> Probe<T> {
    /// The probe of `T`.
    pub const fn new() -> Self {
        Probe(PhantomData)
    }
}

impl<T> Default for Probe<T> {
    fn default() -> Self {
        Probe::new()
    }
}

/// The real uses of a parameter's type.
pub trait ArgProbe<T> {
    /// The value, to serialize.
    fn ser<'a>(&self, value: &'a T) -> &'a T;
    /// Reads and validates the field (see [`FieldErrors::field`]).
    fn read(&self, errors: &mut FieldErrors, members: &Members<'_>, meta: &FieldMeta) -> Option<T>;
    /// The field's schema, and whether the field may be left out.
    fn property(&self, generator: &mut SchemaGenerator) -> (Schema, bool);
}

impl<T: serde::Serialize + serde::de::DeserializeOwned + schemars::JsonSchema> ArgProbe<T>
    for Probe<T>
{
    fn ser<'a>(&self, value: &'a T) -> &'a T {
        value
    }

    fn read(&self, errors: &mut FieldErrors, members: &Members<'_>, meta: &FieldMeta) -> Option<T> {
        errors.field::<T>(members, meta)
    }

    fn property(&self, generator: &mut SchemaGenerator) -> (Schema, bool) {
        // What `#[derive(JsonSchema)]` does for a field: an `Option` may be
        // left out when arguments are read.
        let optional = generator.contract().is_deserialize() && T::_schemars_private_is_option();
        (generator.subschema_for::<T>(), optional)
    }
}

/// The stand-ins, chosen only when the type is not an [`ArgType`], in a
/// build that `<T as ArgType>::IS` fails anyway.
pub trait ArgFallback<T> {
    /// Never called.
    fn ser(&self, value: &T) -> Unreachable;
    /// Never called.
    fn read(&self, errors: &mut FieldErrors, members: &Members<'_>, meta: &FieldMeta) -> Option<T>;
    /// Never called.
    fn property(&self, generator: &mut SchemaGenerator) -> (Schema, bool);
}

impl<T> ArgFallback<T> for &Probe<T> {
    fn ser(&self, _: &T) -> Unreachable {
        Unreachable(())
    }

    fn read(&self, _: &mut FieldErrors, _: &Members<'_>, _: &FieldMeta) -> Option<T> {
        None
    }

    fn property(&self, _: &mut SchemaGenerator) -> (Schema, bool) {
        (Schema::default(), false)
    }
}

/// What [`ArgFallback::ser`] gives: serializable, never serialized.
pub struct Unreachable(());

impl serde::Serialize for Unreachable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "a tool argument whose type is not serializable",
        ))
    }
}

/// The schema of an argument struct, before its properties.
pub fn object_schema() -> Schema {
    schemars::json_schema!({ "type": "object" })
}

/// Adds one property to an argument struct's schema, as
/// `#[derive(JsonSchema)]` does: its doc comment as its `description` (a
/// first line starting with `#` as its `title`), `required` unless it may be
/// left out.
pub fn insert_property(
    schema: &mut Schema,
    name: &str,
    doc: &str,
    (mut property, optional): (Schema, bool),
) {
    let (title, description) = title_and_description(doc);
    for (key, value) in [("title", title), ("description", description)] {
        if !value.is_empty() {
            property.insert(key.to_owned(), value.into());
        }
    }
    let object = schema.ensure_object();
    if let Some(properties) = object
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
    {
        properties.insert(name.to_owned(), property.into());
    }
    if !optional
        && let Some(required) = object
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
    {
        required.push(name.into());
    }
}

/// A doc comment's title and description, as schemars reads them: a first
/// line that starts with `#` is the title, the rest the description.
fn title_and_description(doc: &str) -> (&str, &str) {
    let doc = doc.trim();
    match doc.strip_prefix('#') {
        Some(_) => {
            let end = doc.find('\n').unwrap_or(doc.len());
            (doc[..end].trim_start_matches('#').trim(), doc[end..].trim())
        }
        None => ("", doc),
    }
}
