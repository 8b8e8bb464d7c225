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
//! place (most argument structs do not declare their fields sorted). The
//! buffers are kept per thread between calls, so a key allocates nothing
//! once they have grown.

use std::cell::RefCell;
use std::cmp::Ordering;
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

/// One member of an object being written: its name (a range of
/// `Writer::names`) and its `"name":value` text (a range of `Writer::out`).
struct Member {
    name: Range<usize>,
    text: Range<usize>,
}

/// The buffers of one canonical form.
#[derive(Default)]
pub(crate) struct Writer {
    out: String,
    names: String,
    members: Vec<Member>,
    scratch: String,
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

    /// Starts a member named `name` of the object opened at `first`.
    fn member(&mut self, first: usize, name: &str) {
        self.end_member(first);
        if self.members.len() > first {
            self.out.push(',');
        }
        let start = self.out.len();
        let at = self.names.len();
        self.names.push_str(name);
        write_string(&mut self.out, name);
        self.out.push(':');
        self.members.push(Member {
            name: at..self.names.len(),
            text: start..start,
        });
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
        let (names, members) = (&self.names, &mut self.members[first..]);
        let name = |m: &Member| &names[m.name.clone()];
        let sorted = members
            .windows(2)
            .all(|w| utf16_cmp(name(&w[0]), name(&w[1])) == Ordering::Less);
        if !sorted {
            members.sort_by(|a, b| utf16_cmp(name(a), name(b)));
            if members.windows(2).any(|w| name(&w[0]) == name(&w[1])) {
                return unsupported("a map that names a member twice");
            }
            // The members' texts follow each other, one comma apart, from
            // the first one written; put back in order, they fill the same
            // bytes, so the enclosing object's ranges stay right.
            let body = members
                .iter()
                .map(|m| m.text.start)
                .min()
                .unwrap_or(self.out.len());
            self.scratch.clear();
            for (i, m) in members.iter().enumerate() {
                if i > 0 {
                    self.scratch.push(',');
                }
                self.scratch.push_str(&self.out[m.text.clone()]);
            }
            self.out.truncate(body);
            self.out.push_str(&self.scratch);
        }
        // The object's names follow every enclosing object's: drop them.
        if let Some(start) = self.members[first..].iter().map(|m| m.name.start).min() {
            self.names.truncate(start);
        }
        self.members.truncate(first);
        self.out.push('}');
        Ok(())
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
        Text::Raw => match crate::parse::parse_value(text) {
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

    fn field<T: Serialize + ?Sized>(&mut self, name: &str, value: &T) -> Result<(), Unsupported> {
        if let Some(kind) = self.text {
            // The private struct's one field: the text.
            let text = value.serialize(NameOnly)?;
            return write_text(&mut self.writer.out, kind, &text);
        }
        let first = self.object.expect("an object");
        self.writer.member(first, name);
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

/// A map key: a string (or a unit variant, which serde_json writes as its
/// name), nothing else.
struct NameOnly;

const NOT_A_STRING: &str = "a map key that is not a string";

/// `NameOnly`'s refusals of one scalar argument each.
macro_rules! refuse_keys {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method(self, _: $ty) -> Result<String, Unsupported> {
            unsupported(NOT_A_STRING)
        }
    )*};
}

impl ser::Serializer for NameOnly {
    type Ok = String;
    type Error = Unsupported;
    type SerializeSeq = ser::Impossible<String, Unsupported>;
    type SerializeTuple = ser::Impossible<String, Unsupported>;
    type SerializeTupleStruct = ser::Impossible<String, Unsupported>;
    type SerializeTupleVariant = ser::Impossible<String, Unsupported>;
    type SerializeMap = ser::Impossible<String, Unsupported>;
    type SerializeStruct = ser::Impossible<String, Unsupported>;
    type SerializeStructVariant = ser::Impossible<String, Unsupported>;

    fn serialize_str(self, v: &str) -> Result<String, Unsupported> {
        Ok(v.to_owned())
    }

    fn serialize_char(self, v: char) -> Result<String, Unsupported> {
        Ok(v.to_string())
    }

    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, Unsupported> {
        Ok(variant.to_owned())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, Unsupported> {
        value.serialize(self)
    }

    refuse_keys! {
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str)
    }

    fn serialize_none(self) -> Result<String, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_unit(self) -> Result<String, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Unsupported> {
        unsupported(NOT_A_STRING)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Unsupported> {
        unsupported(NOT_A_STRING)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::{Value, json};

    use super::canonical_text;
    use crate::canonical::{canonical_json, idempotency_key, idempotency_key_of};

    /// The key both ways: streamed (or its fallback) and through `to_value`.
    fn both_keys<T: Serialize>(value: &T) -> (String, String) {
        let via_value = idempotency_key("s", "t", &serde_json::to_value(value).expect("to_value"));
        let streamed = idempotency_key_of("s", "t", value).expect("a key");
        (streamed.as_str().to_owned(), via_value)
    }

    fn same_as_value_path<T: Serialize>(value: &T) {
        let text = canonical_text(value).expect("the writer takes this shape");
        let want = canonical_json(&serde_json::to_value(value).expect("to_value"));
        assert_eq!(text, want);
        let (streamed, via_value) = both_keys(value);
        assert_eq!(streamed, via_value);
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { z: bool, a: Option<f64> },
    }

    #[derive(Serialize)]
    struct Inner {
        zeta: Vec<Shape>,
        alpha: char,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
    }

    #[derive(Serialize)]
    struct Args {
        order_id: String,
        amount_cents: i64,
        currency: &'static str,
        reason: Shape,
        nested: Inner,
        map: HashMap<String, u64>,
        bytes: serde_bytes_like::Bytes,
        big: u64,
        whole: f64,
        small: f32,
        nothing: Option<()>,
        unit: (),
        tuple: (u8, &'static str),
    }

    /// `serialize_bytes` without a dependency.
    mod serde_bytes_like {
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }

    #[test]
    fn typed_arguments_are_written_as_their_value_is() {
        let args = Args {
            order_id: "ORD-1001 \"quoted\" \\ \u{1f} é €".into(),
            amount_cents: -2590,
            currency: "BRL",
            reason: Shape::Struct {
                z: true,
                a: Some(0.1),
            },
            nested: Inner {
                zeta: vec![
                    Shape::Unit,
                    Shape::Newtype(7),
                    Shape::Tuple(-1, "x".into()),
                    Shape::Struct { z: false, a: None },
                ],
                alpha: '\n',
                skipped: None,
            },
            map: [
                ("b".to_owned(), 2),
                ("a".to_owned(), 1),
                ("\u{e000}".to_owned(), 3),
                ("😀".to_owned(), 4),
            ]
            .into_iter()
            .collect(),
            bytes: serde_bytes_like::Bytes(vec![0, 255]),
            big: u64::MAX,
            whole: 2.0,
            small: 0.1,
            nothing: None,
            unit: (),
            tuple: (1, "two"),
        };
        same_as_value_path(&args);
        // Members in canonical order, nested objects too.
        let text = canonical_text(&args).expect("written");
        assert!(
            text.starts_with(r#"{"amount_cents":-2590,"big":18446744073709551615,"#),
            "{text}"
        );
        // UTF-16 order: U+1F600 is written D83D DE00, before U+E000.
        assert!(
            text.contains("\"map\":{\"a\":1,\"b\":2,\"😀\":4,\"\u{e000}\":3}"),
            "{text}"
        );
    }

    #[test]
    fn shapes_the_writer_refuses_fall_back_to_the_value_path() {
        // A map key that is not a string.
        let numbers: BTreeMap<u32, &str> = [(2, "b"), (10, "a")].into_iter().collect();
        assert!(canonical_text(&numbers).is_err());
        let (streamed, via_value) = both_keys(&numbers);
        assert_eq!(streamed, via_value);
        // A double that is not finite (`to_value` makes it `null`).
        assert!(canonical_text(&f64::NAN).is_err());
        let (streamed, via_value) = both_keys(&vec![f64::INFINITY]);
        assert_eq!(streamed, via_value);
        // A 128-bit integer.
        assert!(canonical_text(&7i128).is_err());
        let (streamed, via_value) = both_keys(&7u128);
        assert_eq!(streamed, via_value);
    }

    #[test]
    fn a_raw_value_is_written_with_each_number_nearest_to_its_text() {
        let raw =
            |text: &str| serde_json::value::RawValue::from_string(text.to_owned()).expect("raw");
        let plain = raw(r#"{"b": [1, 2.50], "a": "\u00e9"}"#);
        assert_eq!(
            canonical_text(&plain).expect("written"),
            r#"{"a":"é","b":[1,2.5]}"#
        );
        let (streamed, via_value) = both_keys(&plain);
        assert_eq!(streamed, via_value);
        // `to_value` takes serde_json's double, one unit off without
        // `float_roundtrip`; the writer reads the text.
        let third = raw(r#"{"x": 333333333.33333329}"#);
        assert_eq!(
            canonical_text(&third).expect("written"),
            r#"{"x":333333333.3333333}"#
        );
        assert_eq!(
            idempotency_key_of("s", "t", &third)
                .expect("a key")
                .as_str(),
            idempotency_key("s", "t", &json!({"x": 333_333_333.333_333_3_f64}))
        );
        // Inside a struct, as an argument field.
        #[derive(Serialize)]
        struct WithRaw {
            z: Box<serde_json::value::RawValue>,
            a: u8,
        }
        let args = WithRaw {
            z: raw("[1e2, 0.1]"),
            a: 1,
        };
        assert_eq!(
            canonical_text(&args).expect("written"),
            r#"{"a":1,"z":[100,0.1]}"#
        );
        // Text that is no JSON the crate reads falls back to `to_value`.
        let twice = raw(r#"{"a": 1, "a": 2}"#);
        assert!(canonical_text(&twice).is_err());
        assert!(idempotency_key_of("s", "t", &twice).is_ok());
    }

    /// A map that names a member twice: `to_value` keeps one of them.
    struct Twice;

    impl Serialize for Twice {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(3))?;
            map.serialize_entry("b", &1)?;
            map.serialize_entry("a", &2)?;
            map.serialize_entry("b", &3)?;
            map.end()
        }
    }

    #[test]
    fn a_member_named_twice_falls_back_to_the_value_path() {
        assert!(canonical_text(&Twice).is_err());
        let (streamed, via_value) = both_keys(&Twice);
        assert_eq!(streamed, via_value);
    }

    #[test]
    fn the_buffers_are_reused_without_leaking_one_key_into_the_next() {
        let first = idempotency_key_of(
            "s",
            "t",
            &json!({"b": {"y": 1, "x": [1, {"q": 2, "p": 3}]}, "a": 0}),
        );
        let second = idempotency_key_of("s", "t", &json!({"a": 0}));
        assert_eq!(
            second.expect("a key").as_str(),
            idempotency_key("s", "t", &json!({"a": 0}))
        );
        assert_eq!(
            first.expect("a key").as_str(),
            idempotency_key(
                "s",
                "t",
                &json!({"a": 0, "b": {"x": [1, {"p": 3, "q": 2}], "y": 1}})
            )
        );
    }

    #[test]
    fn an_ended_object_leaves_nothing_behind_in_the_buffers() {
        let mut writer = super::Writer::default();
        json!({"b": {"z": 1, "y": {"q": [], "p": {}}}, "a": 0})
            .serialize(&mut writer)
            .expect("written");
        assert!(writer.names.is_empty(), "names left: {:?}", writer.names);
        assert!(writer.members.is_empty());
        assert_eq!(writer.out, r#"{"a":0,"b":{"y":{"p":{},"q":[]},"z":1}}"#);
    }

    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
            "[\u{0}-\u{1f}\"\\\\a]{0,4}".prop_map(Value::from),
        ];
        let name = prop_oneof![
            "[a-z_]{0,6}",
            "\\PC{0,4}",
            Just("\u{e000}".to_owned()),
            Just("😀".to_owned()),
            Just("\u{ffff}".to_owned()),
        ];
        leaf.prop_recursive(4, 32, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
                // In the order generated: `preserve_order` keeps it, so the
                // writer sees members out of canonical order.
                prop::collection::vec((name.clone(), inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_json_value_is_written_as_canonical_json_writes_it(value in any_value()) {
            prop_assert_eq!(canonical_text(&value).expect("a Value's shape"), canonical_json(&value));
            let (streamed, via_value) = both_keys(&value);
            prop_assert_eq!(streamed, via_value);
        }
    }
}
