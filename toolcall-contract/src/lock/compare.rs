//! The comparison of a locked contract with the current one.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use super::change::{Change, ChangeKind, accepts_all};
use super::file::{LockedField, LockedTool, Lockfile, Opaque, Shape, Variant};
use super::shape::variant_keys;

/// Every difference between the `locked` contract and the `current` one,
/// tool by tool in name order, each with its [`Change::severity`]. New
/// tools and other compatible changes are listed too, so the lock file can
/// be brought up to date.
pub fn check(locked: &Lockfile, current: &Lockfile) -> Vec<Change> {
    let old: BTreeMap<&str, &LockedTool> =
        locked.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let new: BTreeMap<&str, &LockedTool> =
        current.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let names: BTreeSet<&str> = old.keys().chain(new.keys()).copied().collect();
    let mut changes = Vec::new();
    for name in names {
        match (old.get(name), new.get(name)) {
            (Some(_), None) => {
                let successor = new
                    .keys()
                    .filter(|candidate| !old.contains_key(*candidate))
                    .filter_map(|candidate| {
                        let (base, version) = split_version(candidate);
                        (base == split_version(name).0 && version.is_some())
                            .then_some((version, *candidate))
                    })
                    .max()
                    .map(|(_, candidate)| candidate.to_owned());
                changes.push(Change::tool(name, ChangeKind::ToolRemoved { successor }));
            }
            (None, Some(_)) => changes.push(Change::tool(name, ChangeKind::ToolAdded)),
            (Some(was), Some(now)) => compare_tool(was, now, &mut changes),
            (None, None) => {}
        }
    }
    changes
}

/// `refund_order_v2` is (`refund_order`, Some(2)); a name without the suffix has no version.
fn split_version(name: &str) -> (&str, Option<u64>) {
    if let Some((base, version)) = name.rsplit_once("_v")
        && !version.is_empty()
        && version.bytes().all(|b| b.is_ascii_digit())
        && let Ok(version) = version.parse()
    {
        return (base, Some(version));
    }
    (name, None)
}

fn compare_tool(was: &LockedTool, now: &LockedTool, changes: &mut Vec<Change>) {
    let tool = was.name.as_str();
    for (flag, old, new) in [
        ("side_effect", was.side_effect, now.side_effect),
        ("high_risk", was.high_risk, now.high_risk),
    ] {
        match (old, new) {
            (true, false) => changes.push(Change::tool(tool, ChangeKind::FlagLowered { flag })),
            (false, true) => changes.push(Change::tool(tool, ChangeKind::FlagRaised { flag })),
            _ => {}
        }
    }
    if was.description != now.description {
        changes.push(Change::tool(tool, ChangeKind::DescriptionChanged));
    }
    // The hash covers the parameters only: whether the comparison of what
    // the lock describes of them found anything decides the notice below,
    // whatever was said about the flags and the tool's description.
    let before = changes.len();
    compare_fields(tool, "", &was.fields, &now.fields, changes);
    if changes.len() == before && was.schema_sha256 != now.schema_sha256 {
        let mut opaque = Vec::new();
        for field in now.fields.iter().chain(&was.fields) {
            field.shape.opaque_parts(&field.name, &mut opaque);
        }
        match opaque.first() {
            Some((path, part)) => changes.push(Change::field(
                tool,
                path,
                ChangeKind::OpaqueChanged {
                    keywords: part.keywords.clone(),
                    part_changed: false,
                },
            )),
            None => changes.push(Change::tool(tool, ChangeKind::SchemaChanged)),
        }
    }
}

fn compare_fields(
    tool: &str,
    prefix: &str,
    was: &[LockedField],
    now: &[LockedField],
    changes: &mut Vec<Change>,
) {
    let path = |name: &str| format!("{prefix}{name}");
    let old: BTreeMap<&str, &LockedField> = was.iter().map(|f| (f.name.as_str(), f)).collect();
    let new: BTreeMap<&str, &LockedField> = now.iter().map(|f| (f.name.as_str(), f)).collect();
    let removed: Vec<&LockedField> = old
        .iter()
        .filter(|(n, _)| !new.contains_key(*n))
        .map(|(_, f)| *f)
        .collect();
    let mut added: Vec<&LockedField> = new
        .iter()
        .filter(|(n, _)| !old.contains_key(*n))
        .map(|(_, f)| *f)
        .collect();

    // A rename is guessed only when it is the one reading: the same shape
    // and the same `required` on both sides, one field each.
    let alike = |a: &LockedField, b: &LockedField| a.required == b.required && a.shape == b.shape;
    let mut renamed: Vec<(&LockedField, &LockedField)> = Vec::new();
    for gone in &removed {
        let partners: Vec<&&LockedField> = added.iter().filter(|a| alike(gone, a)).collect();
        if let [partner] = partners[..]
            && removed.iter().filter(|r| alike(r, partner)).count() == 1
        {
            renamed.push((gone, partner));
        }
    }
    added.retain(|a| !renamed.iter().any(|(_, to)| std::ptr::eq(*to, *a)));
    for gone in removed {
        match renamed.iter().find(|(from, _)| std::ptr::eq(*from, gone)) {
            Some((_, to)) => changes.push(Change::field(
                tool,
                &path(&gone.name),
                ChangeKind::FieldRenamed {
                    to: path(&to.name),
                    ty: gone.shape.ty.clone(),
                },
            )),
            None => changes.push(Change::field(
                tool,
                &path(&gone.name),
                ChangeKind::FieldRemoved {
                    ty: gone.shape.ty.clone(),
                },
            )),
        }
    }
    for new_field in added {
        changes.push(Change::field(
            tool,
            &path(&new_field.name),
            ChangeKind::FieldAdded {
                required: new_field.required,
                ty: new_field.shape.ty.clone(),
            },
        ));
    }
    for (name, old_field) in &old {
        let Some(new_field) = new.get(name) else {
            continue;
        };
        let here = path(name);
        match (old_field.required, new_field.required) {
            (false, true) => changes.push(Change::field(tool, &here, ChangeKind::MadeRequired)),
            (true, false) => changes.push(Change::field(tool, &here, ChangeKind::MadeOptional)),
            _ => {}
        }
        if old_field.description != new_field.description {
            changes.push(Change::field(tool, &here, ChangeKind::DescriptionChanged));
        }
        compare_shapes(tool, &here, &old_field.shape, &new_field.shape, changes);
    }
}

fn compare_shapes(tool: &str, here: &str, was: &Shape, now: &Shape, changes: &mut Vec<Change>) {
    let change = |kind: ChangeKind| Change::field(tool, here, kind);
    if now.is_any() {
        // A value that now may be anything accepts what it used to.
        if !was.is_any() {
            changes.push(change(ChangeKind::Retyped {
                from: was.ty.clone(),
                to: now.ty.clone(),
            }));
        }
        return;
    }
    if was.opaque != now.opaque {
        let keywords = now.opaque.as_ref().or(was.opaque.as_ref());
        changes.push(change(ChangeKind::OpaqueChanged {
            keywords: keywords.map(|o| o.keywords.clone()).unwrap_or_default(),
            part_changed: true,
        }));
    }
    let union = was.variants.is_some() || now.variants.is_some();
    // In a union the variants tell what changed better than the joined types.
    if !union && was.ty != now.ty {
        changes.push(change(ChangeKind::Retyped {
            from: was.ty.clone(),
            to: now.ty.clone(),
        }));
        if !accepts_all(&was.ty, &now.ty) {
            // Everything else about a retyped value is moot.
            return;
        }
    }
    match (was.nullable, now.nullable) {
        (true, false) => changes.push(change(ChangeKind::NullRemoved)),
        (false, true) => changes.push(change(ChangeKind::NullAllowed)),
        _ => {}
    }
    if was.format != now.format {
        changes.push(change(ChangeKind::FormatChanged {
            from: was.format.clone(),
            to: now.format.clone(),
        }));
    }
    let none = Vec::new();
    match (&was.enum_values, &now.enum_values) {
        // In a union, the constants are alternatives like the variants:
        // each one gone or new is reported on its own.
        (old, new) if old.is_some() && new.is_some() || union => {
            let (old, new) = (old.as_ref().unwrap_or(&none), new.as_ref().unwrap_or(&none));
            for value in old.iter().filter(|v| !new.contains(v)) {
                changes.push(change(ChangeKind::EnumValueRemoved {
                    value: value.clone(),
                }));
            }
            for value in new.iter().filter(|v| !old.contains(v)) {
                changes.push(change(ChangeKind::EnumValueAdded {
                    value: value.clone(),
                }));
            }
        }
        (None, Some(new)) => changes.push(change(ChangeKind::EnumImposed {
            values: new.clone(),
        })),
        (Some(_), None) => changes.push(change(ChangeKind::EnumLifted)),
        (_, _) => {}
    }
    let keywords: BTreeSet<&String> = was
        .constraints
        .keys()
        .chain(now.constraints.keys())
        .collect();
    for keyword in keywords {
        let (from, to) = (was.constraints.get(keyword), now.constraints.get(keyword));
        if from != to {
            changes.push(change(ChangeKind::ConstraintChanged {
                keyword: keyword.clone(),
                from: from.cloned(),
                to: to.cloned(),
            }));
        }
    }
    if union {
        compare_variants(
            tool,
            here,
            &was.alternatives(),
            &now.alternatives(),
            changes,
        );
        return;
    }
    compare_members(tool, here, was, now, changes);
}

/// What two shapes that are not unions hold: object members (or the map
/// they became), map values, tuple positions and array items.
fn compare_members(tool: &str, here: &str, was: &Shape, now: &Shape, changes: &mut Vec<Change>) {
    let change = |kind: ChangeKind| Change::field(tool, here, kind);
    let empty = Vec::new();
    let became_map = now.fields.is_none() && was.values.is_none();
    match (&was.fields, &now.values) {
        (Some(old), Some(values)) if became_map => {
            // A struct became a map: each member the callers send must
            // still be accepted as one of its values.
            for field in old {
                compare_shapes(
                    tool,
                    &format!("{here}.{}", field.name),
                    &field.shape,
                    values,
                    changes,
                );
            }
            changes.push(change(ChangeKind::FieldsToMap {
                values: values.ty.clone(),
            }));
        }
        _ => {
            match (&was.fields, &now.fields) {
                (None, None) => {}
                (old, new) => compare_fields(
                    tool,
                    &format!("{here}."),
                    old.as_ref().unwrap_or(&empty),
                    new.as_ref().unwrap_or(&empty),
                    changes,
                ),
            }
            compare_inner(
                tool,
                &format!("{here}{{}}"),
                &was.values,
                &now.values,
                changes,
            );
        }
    }
    if was.prefix_items.is_some() || now.prefix_items.is_some() {
        let count = [&was.prefix_items, &now.prefix_items]
            .into_iter()
            .flatten()
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        for index in 0..count {
            compare_shapes(
                tool,
                &format!("{here}[{index}]"),
                &was.position(index),
                &now.position(index),
                changes,
            );
        }
    }
    compare_inner(tool, &format!("{here}[]"), &was.items, &now.items, changes);
}

/// Array elements or map values: absent means anything.
fn compare_inner(
    tool: &str,
    here: &str,
    was: &Option<Box<Shape>>,
    now: &Option<Box<Shape>>,
    changes: &mut Vec<Change>,
) {
    match (was, now) {
        (Some(old), Some(new)) => compare_shapes(tool, here, old, new, changes),
        (Some(old), None) => compare_shapes(tool, here, old, &Shape::any(), changes),
        (None, Some(new)) => compare_shapes(tool, here, &Shape::any(), new, changes),
        (None, None) => {}
    }
}

fn compare_variants(
    tool: &str,
    here: &str,
    was: &[Variant],
    now: &[Variant],
    changes: &mut Vec<Change>,
) {
    let old: BTreeMap<&str, &Variant> = was.iter().map(|v| (v.key.as_str(), v)).collect();
    let new: BTreeMap<&str, &Variant> = now.iter().map(|v| (v.key.as_str(), v)).collect();
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        changes.push(Change::field(
            tool,
            here,
            ChangeKind::VariantRemoved {
                key: (*key).to_owned(),
            },
        ));
    }
    for key in new.keys().filter(|k| !old.contains_key(*k)) {
        changes.push(Change::field(
            tool,
            here,
            ChangeKind::VariantAdded {
                key: (*key).to_owned(),
            },
        ));
    }
    for (key, old_variant) in &old {
        let Some(new_variant) = new.get(key) else {
            continue;
        };
        let inner = format!("{here}({key})");
        if old_variant.description != new_variant.description {
            changes.push(Change::field(tool, &inner, ChangeKind::DescriptionChanged));
        }
        compare_shapes(
            tool,
            &inner,
            &old_variant.shape,
            &new_variant.shape,
            changes,
        );
    }
}

impl Shape {
    /// The shape as a list of alternatives: its variants, nothing for a
    /// plain enumeration (its values are compared as such), or itself as
    /// the only alternative, keyed as it would be in a union.
    fn alternatives(&self) -> Cow<'_, [Variant]> {
        if let Some(variants) = &self.variants {
            return Cow::Borrowed(variants);
        }
        if self.is_constants() {
            return Cow::Borrowed(&[]);
        }
        let key = variant_keys(&[self]).pop().unwrap_or_default();
        Cow::Owned(vec![Variant {
            key,
            description: None,
            shape: Shape {
                nullable: false,
                ..self.clone()
            },
        }])
    }

    /// The shape of the tuple element at `index`.
    fn position(&self, index: usize) -> Shape {
        self.prefix_items
            .as_ref()
            .and_then(|items| items.get(index))
            .cloned()
            .or_else(|| self.items.as_deref().cloned())
            .unwrap_or_else(Shape::any)
    }

    /// Every opaque part inside, with its path below `here`.
    fn opaque_parts<'a>(&'a self, here: &str, out: &mut Vec<(String, &'a Opaque)>) {
        if let Some(opaque) = &self.opaque {
            out.push((here.to_owned(), opaque));
        }
        for field in self.fields.iter().flatten() {
            field
                .shape
                .opaque_parts(&format!("{here}.{}", field.name), out);
        }
        for variant in self.variants.iter().flatten() {
            variant
                .shape
                .opaque_parts(&format!("{here}({})", variant.key), out);
        }
        for (i, item) in self.prefix_items.iter().flatten().enumerate() {
            item.opaque_parts(&format!("{here}[{i}]"), out);
        }
        if let Some(items) = &self.items {
            items.opaque_parts(&format!("{here}[]"), out);
        }
        if let Some(values) = &self.values {
            values.opaque_parts(&format!("{here}{{}}"), out);
        }
    }
}
