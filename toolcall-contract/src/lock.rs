//! The tools' contract, `tools.lock.json`, and the check that a change to a
//! tool does not break the models and prompts written against it.
//!
//! A model learns a tool from its definition once and keeps sending what it
//! learned. When a tool's arguments change shape under the same name, the
//! old calls start failing validation and the error rate rises without any
//! test noticing. The lock file records, for every tool, what a caller
//! relies on; [`check`] compares it with the tools as they are now and names
//! every difference, each [`Severity::Breaking`], [`Severity::Review`] or
//! [`Severity::Compatible`]. A breaking change belongs in a new version of
//! the tool (`#[tool(version = 2)]` publishes `<name>_v2`), kept beside the
//! old one until callers move.
//!
//! # The file
//!
//! ```json
//! {
//!   "format_version": 2,
//!   "tools": [
//!     {
//!       "name": "refund_order",
//!       "description": "Refund part or all of an order. ...",
//!       "side_effect": true,
//!       "high_risk": true,
//!       "schema_sha256": "3b1f...",
//!       "fields": [
//!         {
//!           "name": "amount_cents",
//!           "required": true,
//!           "description": "Refund amount in minor units (cents). 25.90 is 2590.",
//!           "type": "integer",
//!           "format": "int64",
//!           "constraints": { "maximum": 9223372036854775807, "minimum": 1 }
//!         },
//!         {
//!           "name": "payment",
//!           "required": true,
//!           "type": "object",
//!           "variants": [
//!             {
//!               "key": "kind=card",
//!               "type": "object",
//!               "fields": [
//!                 { "name": "kind", "required": true, "type": "string", "enum": ["card"] },
//!                 { "name": "number", "required": true, "type": "string" }
//!               ]
//!             },
//!             {
//!               "key": "kind=pix",
//!               "type": "object",
//!               "fields": [
//!                 { "name": "key", "required": true, "type": "string" },
//!                 { "name": "kind", "required": true, "type": "string", "enum": ["pix"] }
//!               ]
//!             }
//!           ]
//!         }
//!       ]
//!     }
//!   ]
//! }
//! ```
//!
//! Tools are sorted by name, fields by name, variants by key, enum values by
//! their canonical JSON text and constraints by keyword, so the file only
//! changes where the contract does and reads well in a diff. Per field:
//!
//! | member | meaning |
//! |---|---|
//! | `name` | the member name the model sends |
//! | `required` | whether the member must be present |
//! | `description` | the field's description, when it has one |
//! | `type` | the JSON type: `string`, `integer`, `number`, `boolean`, `object`, `array`, `null`, several joined by `\|`, or `any` |
//! | `nullable` | present and `true` when `null` is accepted besides `type` |
//! | `format` | the schema's `format` (`email`, `uuid`, `int64`, ...) |
//! | `enum` | the accepted values, when the field is an enumeration; in a union (see `variants`), the alternatives that are constants, such as the unit variants of a Rust enum whose other variants carry data |
//! | `constraints` | the validation keywords (`minimum`, `maxLength`, `pattern`, ...) |
//! | `fields` | the members of an object |
//! | `items` | the shape of an array's elements (same members, without `name`, `required`, `description`); with `prefix_items`, of the elements after them |
//! | `prefix_items` | the shapes of a tuple's elements, by position (the schema's `prefixItems`) |
//! | `values` | the shape of a map's values |
//! | `variants` | the alternatives of a union (`oneOf`/`anyOf`) that are not constants: the variants of a Rust enum that carry data, an untagged enum's members. Each has a `key`, an optional `description` and the members of a shape |
//! | `opaque` | present when this part of the schema uses keywords the lock file does not describe (`not`, `if`, `patternProperties`, an `allOf` of several schemas, ...): `keywords` lists them and `schema_sha256` is the hex SHA-256 of this part of the schema |
//!
//! A variant's `key` is what tells it apart, so that the same variant is
//! found again after a change: `kind=card` for a variant with a required
//! member holding a constant (the tag of `#[serde(tag = "kind")]`, the same
//! member name for all variants when there is one), the member name for an
//! object with a single required member (`by_id` for the externally tagged
//! `ById(..)`), and otherwise its type (`string`, `object`, ...), followed by
//! `#<position>` when two alternatives would share a key.
//!
//! `schema_sha256` is the hex SHA-256 of the tool's parameters schema in the
//! canonical JSON form of [`toolcall_core::canonical`]: a change the members
//! above do not capture still changes it.
//!
//! # What breaks
//!
//! Under the same tool name, these changes are **breaking**: a tool removed;
//! a field removed, renamed (reported as a probable rename when exactly one
//! removed and one added field of the same object have the same shape and the
//! same `required`, otherwise as a removed and an added field), made
//! required, or added as required; a type that no longer accepts every value
//! it used to (`integer` to `string`, `number` to `integer`; `integer` to
//! `number` is not); `null` no longer accepted; an enum value removed, or an
//! enumeration imposed on a free field; a variant removed; a format added or
//! changed on a non-numeric field; a constraint added or tightened; the
//! `side_effect` or `high_risk` flag lowered (the host would stop replaying,
//! or stop asking a person, for calls it used to protect); and any change to
//! a tool whose schema has an `opaque` part, when the structure the lock
//! file does describe explains nothing of it: what the lock file cannot read,
//! it cannot vouch for.
//!
//! To **review**: a description changed, of a tool, a field or a variant
//! (units and meanings live in descriptions: a field documented in cents and
//! now in reais keeps its type and breaks every caller), and a change of the
//! schema's hash that nothing structural explains.
//!
//! **Compatible**: a new tool, an optional field added, a field made
//! optional, a type widened, `null` newly accepted, an enum value or a
//! variant added, a constraint loosened or removed, a flag raised, and an
//! object whose named members became a map whose values accept each of them.
//!
//! Paths name where a change is: `lines[].sku` is `sku` in the elements of
//! `lines`, `limits{}` the values of the map `limits`, `pair[0]` the first
//! element of a tuple, and `payment(kind=card).number` the member `number`
//! of the variant `kind=card` of `payment`.

mod change;
mod compare;
mod file;
mod shape;

pub use change::{Change, ChangeKind, Severity};
pub use compare::check;
pub use file::{LockError, LockedField, LockedTool, Lockfile, Opaque, Shape, Variant};

/// The version of the lock file's layout that this module writes and reads.
///
/// Version 2 added `variants`, `prefix_items` and `opaque`; a version 1 file
/// described enums with data and tuples too coarsely to check against, and
/// is refused with the advice to run `lock` again.
pub const LOCK_FORMAT_VERSION: u64 = 2;
