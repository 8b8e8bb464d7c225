//! Which argument types a constraint applies to, checked at compile time.
//!
//! `#[tool]` asserts, for each constraint on a parameter, that the
//! parameter's type has the matching kind: `pattern` on an integer, or
//! `min_length` on a bool, fails to compile with the message below, spanned
//! on the attribute's key. `Option<T>` has the kind of `T`.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::sync::Arc;

/// A type that arrives as a JSON string.
#[diagnostic::on_unimplemented(
    message = "this constraint applies to strings, and `{Self}` is not a string type",
    label = "a string constraint on a parameter of type `{Self}`",
    note = "`pattern`, `min_length`, `max_length` and `format` take `String` (or `Option<String>`)"
)]
pub trait StringArg {}

/// A type that arrives as a JSON number.
#[diagnostic::on_unimplemented(
    message = "this constraint applies to numbers, and `{Self}` is not a number type",
    label = "a number constraint on a parameter of type `{Self}`",
    note = "`min`, `max`, `exclusive_min`, `exclusive_max` and `limit` take integers and floats (or their `Option`)"
)]
pub trait NumberArg {}

/// A type that arrives as a JSON array.
#[diagnostic::on_unimplemented(
    message = "this constraint applies to lists, and `{Self}` is not a list type",
    label = "a list constraint on a parameter of type `{Self}`",
    note = "`min_items` and `max_items` take `Vec<T>`, sets, arrays (or their `Option`)"
)]
pub trait ListArg {}

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

/// Compiles only for string types.
pub const fn assert_string<T: StringArg + ?Sized>() {}

/// Compiles only for number types.
pub const fn assert_number<T: NumberArg + ?Sized>() {}

/// Compiles only for list types.
pub const fn assert_list<T: ListArg + ?Sized>() {}
