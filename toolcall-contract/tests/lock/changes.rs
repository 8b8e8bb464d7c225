//! What a change to the tools is: each breaking kind detected and named,
//! compatible changes reported, schema changes for review, recursive types,
//! and what the lock cannot describe.

use super::*;

#[test]
fn every_breaking_change_is_detected_and_named() {
    let changes = lock::check(&locked(), &after_breaking());
    let got = lines(&changes);
    // `order_id` and `order_ref` are both strings, but `order_ref` lost the
    // pattern and the description: not the same shape, so not guessed as a
    // rename (a removed and an added field are what a caller sees).
    let review = "description changed; check that the meaning (a unit, a format) did not";
    let want = [
        "breaking: tool `cancel_order`: removed, replaced by `cancel_order_v2`; keep the old version beside the new one until callers move".to_owned(),
        "compatible: tool `cancel_order_v2`: new tool".to_owned(),
        "breaking: tool `refund_order`: `high_risk` lowered from true to false".to_owned(),
        format!("review: tool `refund_order`: {review}"),
        "breaking: tool `refund_order`, field `order_id`: removed (string); calls that send it are now rejected".to_owned(),
        "breaking: tool `refund_order`, field `reason`: removed (string); calls that send it are now rejected".to_owned(),
        "breaking: tool `refund_order`, field `customer_id`: added as required (integer); calls without it are now rejected".to_owned(),
        "breaking: tool `refund_order`, field `order_ref`: added as required (string); calls without it are now rejected".to_owned(),
        format!("review: tool `refund_order`, field `amount_cents`: {review}"),
        "breaking: tool `refund_order`, field `amount_cents`: retyped from integer to string".to_owned(),
        format!("review: tool `refund_order`, field `currency`: {review}"),
        "breaking: tool `refund_order`, field `currency`: enum value \"USD\" removed".to_owned(),
        "breaking: tool `refund_order`, field `note`: now required (was optional)".to_owned(),
        "breaking: tool `refund_order`, field `note`: no longer accepts null".to_owned(),
        "breaking: tool `ship_order`: `side_effect` lowered from true to false".to_owned(),
        format!("review: tool `ship_order`: {review}"),
        "breaking: tool `ship_order`, field `note`: `maxLength` changed from 10 to 5".to_owned(),
        "breaking: tool `tag_order`, field `labels[].color`: removed (string); calls that send it are now rejected".to_owned(),
    ];
    assert_eq!(got, want, "got:\n{}", got.join("\n"));
    assert_eq!(changes.iter().filter(|c| c.is_breaking()).count(), 13);
    assert_eq!(changes.iter().filter(|c| c.needs_review()).count(), 4);
}

#[test]
fn each_breaking_kind_is_breaking_on_its_own() {
    let changes = lock::check(&locked(), &after_breaking());
    let kind_of = |tool: &str, field: Option<&str>| -> Vec<&ChangeKind> {
        changes
            .iter()
            .filter(|c| c.tool == tool && c.field.as_deref() == field)
            .map(|c| &c.kind)
            .collect()
    };
    assert!(matches!(
        kind_of("cancel_order", None)[..],
        [ChangeKind::ToolRemoved { successor: Some(s) }] if s == "cancel_order_v2"
    ));
    assert!(matches!(
        kind_of("refund_order", Some("order_id"))[..],
        [ChangeKind::FieldRemoved { ty }] if ty == "string"
    ));
    assert!(kind_of("refund_order", Some("amount_cents")).iter().any(
        |k| matches!(k, ChangeKind::Retyped { from, to } if from == "integer" && to == "string")
    ));
    for change in changes.iter().filter(|c| {
        !matches!(
            c.kind,
            ChangeKind::ToolAdded | ChangeKind::DescriptionChanged
        )
    }) {
        assert!(change.is_breaking(), "{change}");
        assert_eq!(change.severity(), Severity::Breaking);
        assert!(!change.needs_review());
    }
}

#[test]
fn a_removed_tool_without_successor_is_breaking() {
    let mut current = locked();
    current.tools.retain(|t| t.name != "get_order");
    let changes = lock::check(&locked(), &current);
    assert_eq!(
        lines(&changes),
        ["breaking: tool `get_order`: removed; a model that still calls it gets UNKNOWN_TOOL"]
    );
}

#[test]
fn an_added_field_without_a_partner_of_its_type_is_not_a_rename() {
    // `reason` (string) removed and `customer_id` (integer) added: one of each, no pairing.
    let changes = lock::check(&locked(), &after_breaking());
    assert!(changes.iter().any(|c| c.field.as_deref() == Some("reason")
        && matches!(c.kind, ChangeKind::FieldRemoved { .. })));
    assert!(
        changes
            .iter()
            .any(|c| c.field.as_deref() == Some("customer_id")
                && matches!(c.kind, ChangeKind::FieldAdded { required: true, .. }))
    );
}

#[test]
fn compatible_changes_are_reported_but_not_breaking() {
    let changes = lock::check(&locked(), &after_compatible());
    let got = lines(&changes);
    let review = "description changed; check that the meaning (a unit, a format) did not";
    assert_eq!(
        got,
        [
            "compatible: tool `get_order`: `side_effect` raised from false to true".to_owned(),
            format!("review: tool `get_order`: {review}"),
            "compatible: tool `list_orders`: new tool".to_owned(),
            format!("review: tool `refund_order`: {review}"),
            "compatible: tool `refund_order`, field `memo`: added as optional (string)".to_owned(),
            format!("review: tool `refund_order`, field `amount_cents`: {review}"),
            "compatible: tool `refund_order`, field `currency`: enum value \"EUR\" added"
                .to_owned(),
            "compatible: tool `ship_order`, field `note`: `maxLength` changed from 10 to 20"
                .to_owned(),
            "compatible: tool `tag_order`, field `labels[].priority`: added as optional (integer)"
                .to_owned(),
        ],
        "got:\n{}",
        got.join("\n")
    );
    assert!(changes.iter().all(|c| !c.is_breaking()));
}

#[test]
fn a_schema_change_the_fields_do_not_explain_is_reported_for_review() {
    let mut current = locked();
    current.tools[0].schema_sha256 = "0".repeat(64);
    let changes = lock::check(&locked(), &current);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, ChangeKind::SchemaChanged);
    assert!(!changes[0].is_breaking());
    assert!(changes[0].needs_review());
    assert!(
        changes[0]
            .to_string()
            .starts_with("tool `cancel_order`: parameters schema changed")
    );
}

#[test]
fn constraint_and_type_rules() {
    let base = locked();
    let mut current = base.clone();
    let refund = current
        .tools
        .iter_mut()
        .find(|t| t.name == "refund_order")
        .unwrap();
    let amount = refund
        .fields
        .iter_mut()
        .find(|f| f.name == "amount_cents")
        .unwrap();
    amount
        .shape
        .constraints
        .insert("minimum".into(), json!(100));
    amount
        .shape
        .constraints
        .insert("maximum".into(), json!(50_000));
    amount.shape.format = Some("int32".into());
    let note = refund.fields.iter_mut().find(|f| f.name == "note").unwrap();
    note.shape.format = Some("email".into());
    let order = refund
        .fields
        .iter_mut()
        .find(|f| f.name == "order_id")
        .unwrap();
    order.shape.constraints.remove("pattern");
    let got = lines(&lock::check(&base, &current));
    assert_eq!(
        got,
        [
            "compatible: tool `refund_order`, field `amount_cents`: format changed from int64 to int32",
            "breaking: tool `refund_order`, field `amount_cents`: `maximum` changed from 9223372036854775807 to 50000",
            "breaking: tool `refund_order`, field `amount_cents`: `minimum` changed from 1 to 100",
            "breaking: tool `refund_order`, field `note`: format changed from none to email",
            "compatible: tool `refund_order`, field `order_id`: `pattern` changed from \"^ORD-\\\\d{4}$\" to none",
        ],
        "got:\n{}",
        got.join("\n")
    );
}

/// A recursive argument type: the lock names the recursion instead of
/// expanding it forever.
mod recursive {
    use super::{Out, done};
    use toolcall::tool;

    /// A category and its children.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Category {
        pub name: String,
        pub children: Vec<Category>,
    }

    /// Files a tree of categories.
    #[tool]
    pub fn file_tree(
        /// The root category.
        root: Category,
    ) -> Out {
        let _ = root;
        done()
    }
}

#[test]
fn recursive_types_end_in_a_named_reference() {
    let registry = toolcall::tools![recursive::file_tree].unwrap();
    let lock = Lockfile::from_registry(&registry);
    let text = lock.to_json_pretty();
    assert!(text.contains("\"type\": \"recursive "), "{text}");
    assert_eq!(Lockfile::parse(&text).unwrap(), lock);
}

/// A type whose schema uses a keyword the lock does not describe.
mod opaque {
    macro_rules! sku {
        ($name:ident, $forbidden:literal) => {
            #[derive(serde::Serialize, serde::Deserialize)]
            pub struct $name(pub String);
            impl schemars::JsonSchema for $name {
                fn schema_name() -> std::borrow::Cow<'static, str> {
                    "Sku".into()
                }
                fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                    schemars::json_schema!({"type": "string", "not": {"const": $forbidden}})
                }
            }
        };
    }
    sku!(SkuA, "NONE");
    sku!(SkuB, "VOID");

    pub mod before {
        use crate::{Out, done};
        use toolcall::tool;
        /// Looks a product up.
        #[tool]
        pub fn t(
            /// The product's SKU.
            sku: super::SkuA,
            /// A note, if any.
            note: Option<String>,
        ) -> Out {
            let _ = (sku, note);
            done()
        }
    }
    pub mod after {
        use crate::{Out, done};
        use toolcall::tool;
        /// Looks a product up.
        #[tool]
        pub fn t(
            /// The product's SKU.
            sku: super::SkuB,
            /// A note.
            note: Option<String>,
        ) -> Out {
            let _ = (sku, note);
            done()
        }
    }
}

#[test]
fn what_the_lock_cannot_describe_is_opaque_and_a_change_to_it_breaks() {
    let (before, after) = locks!(opaque);
    let sku = &before.tools[0].fields[1];
    assert_eq!(sku.name, "sku");
    let part = sku.shape.opaque.as_ref().expect("`not` is not described");
    assert_eq!(part.keywords, ["not"]);
    assert_eq!(part.schema_sha256.len(), 64);
    let text = before.to_json_pretty();
    assert_eq!(Lockfile::parse(&text).unwrap(), before);

    // The forbidden value changed and a description was added: the second
    // does not hide the first.
    let changes = lock::check(&before, &after);
    assert_eq!(
        lines(&changes),
        [
            "review: tool `t`, field `note`: description changed; check that the meaning (a unit, a format) did not",
            "breaking: tool `t`, field `sku`: a part of the schema the lock file cannot describe (`not`) changed; treated as breaking: review it",
        ]
    );

    // Only the tool's hash says something changed: with an opaque part,
    // that is breaking too.
    let mut rehashed = before.clone();
    rehashed.tools[0].schema_sha256 = "0".repeat(64);
    let changes = lock::check(&before, &rehashed);
    assert_eq!(changes.len(), 1);
    assert!(matches!(
        &changes[0].kind,
        ChangeKind::OpaqueChanged { keywords, part_changed: false } if keywords == &["not"]
    ));
    assert!(changes[0].is_breaking());
    assert_eq!(changes[0].field.as_deref(), Some("sku"));
}
