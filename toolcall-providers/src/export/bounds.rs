//! The numeric bounds every provider format but `neutral` removes.

use serde_json::Value;
use toolcall_core::schema::{self, Recursive, Schema, Transform};

use super::words::{describe, moved_sentence};

/// The largest integer every provider takes in a schema, 2^53 − 1 (the
/// largest a JSON number read as a double holds exactly).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `schema` without the numeric bounds (`minimum`, `maximum`,
/// `exclusiveMinimum`, `exclusiveMaximum`) whose magnitude exceeds
/// [`MAX_SAFE_INTEGER`], which OpenAI ("a numeric value in the function
/// parameters is too large") and Anthropic ("int too big to convert") refuse.
///
/// A bound is never clamped (a tighter bound would refuse values the
/// validator accepts): it is removed. The natural range of a 64-bit integer
/// (`i64::MIN`, `i64::MAX`, `u64::MAX`, which schemars writes for `i64`,
/// `u64`, `isize`, ...) goes without a word; any other bound removed is
/// stated in the description of its schema (`Must be at most
/// 10000000000000000000.`). The validator still enforces every bound.
pub fn json_safe_bounds(schema: &Value) -> Value {
    let mut schema = schema.clone();
    schema::apply(&mut Recursive(SafeBounds), &mut schema);
    schema
}

/// The transform of [`json_safe_bounds`], on one schema (not its
/// subschemas: wrap it in [`Recursive`] for those).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SafeBounds;

impl Transform for SafeBounds {
    fn transform(&mut self, schema: &mut Schema) {
        let Some(map) = schema.as_object_mut() else {
            return;
        };
        let mut notes = Vec::new();
        for keyword in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
            let Some(Value::Number(bound)) = map.get(keyword) else {
                continue;
            };
            if !beyond_safe_integer(bound) {
                continue;
            }
            let natural = is_64_bit_limit(bound);
            if let Some(bound) = super::take(map, keyword)
                && !natural
            {
                notes.push(moved_sentence(keyword, &bound));
            }
        }
        if !notes.is_empty()
            && let Some(description) = describe(map.get("description"), &notes)
        {
            map.insert("description".into(), description.into());
        }
    }
}

/// Whether `n`'s magnitude exceeds [`MAX_SAFE_INTEGER`].
fn beyond_safe_integer(n: &serde_json::Number) -> bool {
    if let Some(n) = n.as_u64() {
        n > MAX_SAFE_INTEGER
    } else if let Some(n) = n.as_i64() {
        n.unsigned_abs() > MAX_SAFE_INTEGER
    } else {
        n.as_f64()
            .is_some_and(|n| n.abs() > MAX_SAFE_INTEGER as f64)
    }
}

/// Whether `n` is an end of a 64-bit integer type's range.
fn is_64_bit_limit(n: &serde_json::Number) -> bool {
    matches!(n.as_i64(), Some(i64::MIN | i64::MAX)) || n.as_u64() == Some(u64::MAX)
}
