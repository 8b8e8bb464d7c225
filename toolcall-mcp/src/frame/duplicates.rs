//! Duplicate member names: a walk of a JSON value that refuses a member
//! name given twice in one object.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Whether `text` is one JSON value with no member name twice in one
/// object. Errors of the `Data` category are duplicates; any other is the
/// text's syntax (including serde_json's limits: nesting over 128, a number
/// out of range).
pub(crate) fn no_duplicates(text: &str) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    NoDuplicates.deserialize(&mut deserializer)?;
    deserializer.end()
}

/// Walks a JSON value and refuses a member name given twice in one object.
struct NoDuplicates;

impl<'de> DeserializeSeed<'de> for NoDuplicates {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NoDuplicates {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(NoDuplicates)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = Names::default();
        while let Some(Name(name)) = map.next_key()? {
            if !seen.insert(name) {
                return Err(de::Error::custom("a member name appears twice"));
            }
            map.next_value_seed(NoDuplicates)?;
        }
        Ok(())
    }
}

/// A member name: borrowed from the text, unless it holds an escape.
struct Name<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Name<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, name: &'de str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Borrowed(name)))
    }

    fn visit_str<E>(self, name: &str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Owned(name.to_owned())))
    }
}

/// How many member names of one object [`Names`] keeps in a list, compared
/// one by one, before it hashes them.
const FEW_NAMES: usize = 8;

/// The member names of one object seen so far: the first few in a list
/// (an object of a frame has a few members, and comparing them costs less
/// than hashing them), the rest in a set, so that an object of many members
/// costs no more than a set.
struct Names<'de> {
    few: [Cow<'de, str>; FEW_NAMES],
    len: usize,
    many: HashSet<Cow<'de, str>>,
}

impl Default for Names<'_> {
    fn default() -> Self {
        Names {
            few: std::array::from_fn(|_| Cow::Borrowed("")),
            len: 0,
            many: HashSet::new(),
        }
    }
}

impl<'de> Names<'de> {
    /// Adds `name`: `false` if it was seen already.
    fn insert(&mut self, name: Cow<'de, str>) -> bool {
        if self.few[..self.len].contains(&name) {
            return false;
        }
        if self.len < FEW_NAMES {
            self.few[self.len] = name;
            self.len += 1;
            return true;
        }
        self.many.insert(name)
    }
}
