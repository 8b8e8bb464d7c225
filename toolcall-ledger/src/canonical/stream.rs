//! The canonical form written straight from a `Serialize` value, without a
//! [`Value`](serde_json::Value) in between: what the idempotency key of
//! typed arguments is computed from.
//!
//! The writer produces the bytes [`canonical_json`](super::canonical_json)
//! writes for `serde_json::to_value(value)`, or refuses: it takes the shapes
//! argument structs are made of (structs, enums, options, sequences, maps
//! with string keys, strings, booleans, integers in the 64-bit range and
//! finite doubles, and the JSON text of serde_json's `RawValue` and, with
//! `arbitrary_precision`, `Number`) and answers [`Unsupported`] for the
//! rest (a map key that is not a string, a non-finite double, a 128-bit
//! integer, a map that names a member twice), where the caller falls back
//! to the `Value` path. The tests compare both paths over arbitrary JSON
//! values and over the example's argument types.
//!
//! A double is written as it is given: the argument struct holds the double
//! the crate read from the call's text, nearest to it (see the parent
//! module). JSON text (a `RawValue`, an `arbitrary_precision` number) is
//! read here the same way, each number the double nearest to its text,
//! not through `to_value`, which would take serde_json's reading.
//!
//! Members are written in the order serde gives them, each recorded with
//! its name; when an object ends, its members are put in canonical order in
//! place (most argument structs do not declare their fields sorted). A
//! struct gives its fields in the same order every time, each named by the
//! same string of the program: the canonical order of a set of fields is
//! found once and kept, by their names' addresses, for the thread's next
//! values (a map's keys are sorted every time). The buffers and the orders
//! are kept per thread between calls, so a key allocates nothing once they
//! have grown.

use std::cell::RefCell;
use std::fmt;
use std::ops::Range;

use serde::ser::{self, Serialize};
use sha2::{Digest, Sha256};

use super::{utf16_cmp, write_double, write_integer, write_string};

/// The value has a shape the streaming writer does not take; the caller
/// computes the canonical form through a `Value` instead.
#[derive(Debug)]
pub(crate) struct Unsupported(String);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not written by the streaming canonical writer: {}",
            self.0
        )
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

fn unsupported<T>(what: &str) -> Result<T, Unsupported> {
    Err(Unsupported(what.to_owned()))
}

/// One member of an object being written: its name and its
/// `"name":value` text (a range of `Writer::out`).
struct Member {
    name: Name,
    text: Range<usize>,
}

impl Member {
    /// A struct field's name as [`Order`] knows it: its address and length.
    fn field(&self) -> Option<(usize, usize)> {
        match self.name {
            Name::Field(name) => Some((name.as_ptr() as usize, name.len())),
            Name::Written(_) => None,
        }
    }
}

/// A member's name: a struct's field names its member with a string of the
/// program's (kept as it is), a map's key with one written to
/// `Writer::names`.
enum Name {
    Field(&'static str),
    Written(Range<usize>),
}

/// The canonical order of a struct's members, found once per thread: the
/// fields as serde gave them (each name's address and length: a field's
/// name is the same string of the program every time) and where each goes.
struct Order {
    fields: Vec<(usize, usize)>,
    sorted: Vec<usize>,
}

/// How many structs' orders a thread keeps: an application's argument
/// structs and the enums' struct variants among them.
const ORDERS: usize = 64;

/// The buffers of one canonical form.
#[derive(Default)]
pub(crate) struct Writer {
    out: String,
    names: String,
    members: Vec<Member>,
    scratch: String,
    orders: Vec<Order>,
    /// The canonical order of the object being closed: where each of its
    /// members goes (found, or copied from `orders`).
    order: Vec<usize>,
}

thread_local! {
    static WRITER: RefCell<Writer> = RefCell::new(Writer::default());
}

/// Feeds the canonical form of `value` to `hasher`, written with this
/// thread's buffers (fresh ones if they are in use).
pub(crate) fn hash_canonical<T: Serialize + ?Sized>(
    value: &T,
    hasher: &mut Sha256,
) -> Result<(), Unsupported> {
    let write = |writer: &mut Writer, hasher: &mut Sha256| {
        writer.clear();
        value.serialize(&mut *writer)?;
        hasher.update(writer.out.as_bytes());
        Ok(())
    };
    let reused = WRITER.try_with(|cell| {
        cell.try_borrow_mut()
            .ok()
            .map(|mut writer| write(&mut writer, hasher))
    });
    match reused {
        Ok(Some(result)) => result,
        _ => write(&mut Writer::default(), hasher),
    }
}

/// The canonical form of `value` as text (for tests and diagnostics).
#[cfg(test)]
pub(crate) fn canonical_text<T: Serialize + ?Sized>(value: &T) -> Result<String, Unsupported> {
    let mut writer = Writer::default();
    value.serialize(&mut writer)?;
    Ok(writer.out)
}

impl Writer {
    fn clear(&mut self) {
        // The structs' orders are kept: they hold no text of a value.
        self.out.clear();
        self.names.clear();
        self.members.clear();
        self.scratch.clear();
    }

    /// Starts an object: where its members begin in `members`.
    fn open_object(&mut self) -> usize {
        self.out.push('{');
        self.members.len()
    }

    /// Starts a member named `name` (a map's key) of the object opened at
    /// `first`.
    fn member(&mut self, first: usize, name: &str) {
        let at = self.names.len();
        self.names.push_str(name);
        self.start_member(first, name, Name::Written(at..self.names.len()));
    }

    /// Starts a member of the object opened at `first` for a struct's
    /// field named `name`.
    fn field(&mut self, first: usize, name: &'static str) {
        self.start_member(first, name, Name::Field(name));
    }

    fn start_member(&mut self, first: usize, text: &str, name: Name) {
        self.end_member(first);
        if self.members.len() > first {
            self.out.push(',');
        }
        let start = self.out.len();
        write_string(&mut self.out, text);
        self.out.push(':');
        self.members.push(Member {
            name,
            text: start..start,
        });
    }

    fn name<'a>(names: &'a str, member: &Member) -> &'a str {
        match &member.name {
            Name::Field(name) => name,
            Name::Written(range) => &names[range.clone()],
        }
    }

    /// Closes the text of the last member of the object opened at `first`.
    fn end_member(&mut self, first: usize) {
        if self.members.len() > first {
            let end = self.out.len();
            if let Some(last) = self.members.last_mut() {
                last.text.end = end;
            }
        }
    }

    /// Ends the object opened at `first`, its members in canonical order.
    fn close_object(&mut self, first: usize) -> Result<(), Unsupported> {
        self.end_member(first);
        self.order.clear();
        if self.members.len() - first < 2 {
            // Nothing to put in order.
            self.order.extend(0..self.members.len() - first);
        } else if !self.known_order(first) {
            let (names, members) = (&self.names, &self.members[first..]);
            let name = |i: usize| Self::name(names, &members[i]);
            self.order.extend(0..members.len());
            let sorted = (1..members.len()).all(|i| utf16_cmp(name(i - 1), name(i)).is_lt());
            if !sorted {
                self.order.sort_by(|&a, &b| utf16_cmp(name(a), name(b)));
                if self.order.windows(2).any(|w| name(w[0]) == name(w[1])) {
                    return unsupported("a map that names a member twice");
                }
            }
            self.keep_order(first);
        }
        let members = &self.members[first..];
        if self.order.iter().enumerate().any(|(i, &at)| i != at) {
            // The members' texts follow each other, one comma apart, from
            // the first one written; put back in order, they fill the same
            // bytes, so the enclosing object's ranges stay right.
            let body = members
                .iter()
                .map(|m| m.text.start)
                .min()
                .unwrap_or(self.out.len());
            self.scratch.clear();
            for (i, &at) in self.order.iter().enumerate() {
                if i > 0 {
                    self.scratch.push(',');
                }
                self.scratch.push_str(&self.out[members[at].text.clone()]);
            }
            self.out.truncate(body);
            self.out.push_str(&self.scratch);
        }
        // The object's written names follow every enclosing object's: drop
        // them.
        let written = members.iter().filter_map(|m| match &m.name {
            Name::Written(range) => Some(range.start),
            Name::Field(_) => None,
        });
        if let Some(start) = written.min() {
            self.names.truncate(start);
        }
        self.members.truncate(first);
        self.out.push('}');
        Ok(())
    }

    /// Whether the members from `first` are a struct's fields whose order
    /// this thread has found before: then it is in `self.order`.
    fn known_order(&mut self, first: usize) -> bool {
        let members = &self.members[first..];
        let Some(found) = self.orders.iter().find(|order| {
            order.fields.len() == members.len()
                && members
                    .iter()
                    .zip(&order.fields)
                    .all(|(member, field)| member.field() == Some(*field))
        }) else {
            return false;
        };
        self.order.extend_from_slice(&found.sorted);
        true
    }

    /// Keeps `self.order` as the order of the members from `first`, if
    /// they are a struct's fields (a map's keys change from value to value).
    fn keep_order(&mut self, first: usize) {
        let members = &self.members[first..];
        let fields: Option<Vec<(usize, usize)>> = members.iter().map(Member::field).collect();
        let Some(fields) = fields else {
            return;
        };
        if self.orders.len() == ORDERS {
            self.orders.remove(0);
        }
        self.orders.push(Order {
            fields,
            sorted: self.order.clone(),
        });
    }
}

/// A compound value being written: a sequence (`object` is `None`) or an
/// object, and whether it is wrapped in `{"variant":...}`; or one of
/// serde_json's private structs that pass JSON text (`text`).
pub(crate) struct Compound<'w> {
    writer: &'w mut Writer,
    first: bool,
    object: Option<usize>,
    variant: Option<usize>,
    text: Option<Text>,
}

/// The JSON text serde_json passes through a private struct of one field.
#[derive(Clone, Copy)]
enum Text {
    /// A `RawValue`: any JSON text, as the value's source wrote it.
    Raw,
    /// A `Number` with `arbitrary_precision`: a number's text.
    Number,
}

/// serde_json's private struct of a `RawValue`.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";
/// serde_json's private struct of a `Number` (with `arbitrary_precision`).
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Writes JSON `text` passed by serde_json's private structs in the
/// canonical form, every number the double nearest to its text (RFC 8785),
/// not serde_json's reading of it (which `to_value` would take).
fn write_text(out: &mut String, kind: Text, text: &str) -> Result<(), Unsupported> {
    match kind {
        Text::Raw => match crate::json::parse_value(text) {
            Ok(value) => {
                super::write_value(out, &value);
                Ok(())
            }
            Err(_) => unsupported("a raw value that is not JSON this crate reads"),
        },
        Text::Number => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            let integer = digits.bytes().all(|b| b.is_ascii_digit());
            match (
                text.parse::<i64>(),
                text.parse::<u64>(),
                text.parse::<f64>(),
            ) {
                (Ok(n), _, _) if integer => write_integer(out, n < 0, n.unsigned_abs()),
                (_, Ok(n), _) if integer => write_integer(out, false, n),
                (_, _, Ok(f)) if f.is_finite() => write_double(out, f),
                _ => return unsupported("a number no double holds"),
            }
            Ok(())
        }
    }
}

impl<'w> Compound<'w> {
    fn seq(writer: &'w mut Writer, variant: Option<usize>) -> Self {
        writer.out.push('[');
        Compound {
            writer,
            first: true,
            object: None,
            variant,
            text: None,
        }
    }

    fn text(writer: &'w mut Writer, text: Text) -> Self {
        Compound {
            writer,
            first: true,
            object: None,
            variant: None,
            text: Some(text),
        }
    }

    fn object(writer: &'w mut Writer, variant: Option<usize>) -> Self {
        let first = writer.open_object();
        Compound {
            writer,
            first: true,
            object: Some(first),
            variant,
            text: None,
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        if !self.first {
            self.writer.out.push(',');
        }
        self.first = false;
        value.serialize(&mut *self.writer)
    }

    fn field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        if let Some(kind) = self.text {
            // The private struct's one field: the text.
            let text = value.serialize(NameOnly)?;
            return write_text(&mut self.writer.out, kind, &text);
        }
        let first = self.object.expect("an object");
        self.writer.field(first, name);
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), Unsupported> {
        if self.text.is_some() {
            return Ok(());
        }
        match self.object {
            Some(first) => self.writer.close_object(first)?,
            None => self.writer.out.push(']'),
        }
        if let Some(first) = self.variant {
            self.writer.close_object(first)?;
        }
        Ok(())
    }
}

/// Opens `{"variant":` for an enum's newtype, tuple and struct variants.
fn open_variant(writer: &mut Writer, variant: &str) -> usize {
    let first = writer.open_object();
    writer.member(first, variant);
    first
}

macro_rules! integers {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<(), Unsupported> {
            let v = i128::from(v);
            write_integer(&mut self.out, v < 0, v.unsigned_abs() as u64);
            Ok(())
        }
    )*};
}

impl<'w> ser::Serializer for &'w mut Writer {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Compound<'w>;
    type SerializeTuple = Compound<'w>;
    type SerializeTupleStruct = Compound<'w>;
    type SerializeTupleVariant = Compound<'w>;
    type SerializeMap = Compound<'w>;
    type SerializeStruct = Compound<'w>;
    type SerializeStructVariant = Compound<'w>;

    fn serialize_bool(self, v: bool) -> Result<(), Unsupported> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }

    integers!(
        serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_u8: u8, serialize_u16: u16, serialize_u32: u32, serialize_u64: u64
    );

    fn serialize_i128(self, _: i128) -> Result<(), Unsupported> {
        unsupported("a 128-bit integer")
    }

    fn serialize_u128(self, _: u128) -> Result<(), Unsupported> {
        unsupported("a 128-bit integer")
    }

    fn serialize_f32(self, v: f32) -> Result<(), Unsupported> {
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(self, v: f64) -> Result<(), Unsupported> {
        if !v.is_finite() {
            // `to_value` makes it `null`; rare enough to leave to that path.
            return unsupported("a double that is not finite");
        }
        // The `Value` path writes an integral double as a double too: a
        // `Number` made from an `f64` stays one.
        write_double(&mut self.out, v);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        write_string(&mut self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        write_string(&mut self.out, v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Unsupported> {
        let mut seq = Compound::seq(self, None);
        for byte in v {
            ser::SerializeSeq::serialize_element(&mut seq, byte)?;
        }
        seq.end()
    }

    fn serialize_none(self) -> Result<(), Unsupported> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Unsupported> {
        self.out.push_str("null");
        Ok(())
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Unsupported> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Unsupported> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        let first = open_variant(self, variant);
        value.serialize(&mut *self)?;
        self.close_object(first)
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'w>, Unsupported> {
        Ok(Compound::seq(self, None))
    }

    fn serialize_tuple(self, _: usize) -> Result<Compound<'w>, Unsupported> {
        Ok(Compound::seq(self, None))
    }

    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Compound<'w>, Unsupported> {
        Ok(Compound::seq(self, None))
    }

    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'w>, Unsupported> {
        let first = open_variant(self, variant);
        Ok(Compound::seq(self, Some(first)))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'w>, Unsupported> {
        Ok(Compound::object(self, None))
    }

    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Compound<'w>, Unsupported> {
        // serde_json's `RawValue` and (with `arbitrary_precision`) `Number`
        // pass their text through a private struct: read here, each number
        // the double nearest to its text (`to_value` would take serde_json's
        // reading of it, which may be one unit off).
        match name {
            RAW_VALUE_TOKEN => return Ok(Compound::text(self, Text::Raw)),
            NUMBER_TOKEN => return Ok(Compound::text(self, Text::Number)),
            _ if name.starts_with("$serde_json::private::") => return unsupported(name),
            _ => {}
        }
        Ok(Compound::object(self, None))
    }

    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'w>, Unsupported> {
        let first = open_variant(self, variant);
        Ok(Compound::object(self, Some(first)))
    }
}

/// The sequence-like compounds: each element after a comma.
macro_rules! sequence {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
                self.element(value)
            }

            fn end(self) -> Result<(), Unsupported> {
                Compound::end(self)
            }
        }
    )*};
}

sequence!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Unsupported;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        let name = key.serialize(NameOnly)?;
        let first = self.object.expect("an object");
        self.writer.member(first, &name);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), Unsupported> {
        Compound::end(self)
    }
}

/// The struct-like compounds: each field a member.
macro_rules! structure {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Unsupported;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                name: &'static str,
                value: &T,
            ) -> Result<(), Unsupported> {
                self.field(name, value)
            }

            fn end(self) -> Result<(), Unsupported> {
                Compound::end(self)
            }
        }
    )*};
}

structure!(SerializeStruct, SerializeStructVariant);

mod keys;

use keys::NameOnly;

#[cfg(test)]
mod tests;
