//! The contract lock file: what it records, that it reads back what it
//! writes, and which changes `check` calls breaking.
//!
//! Three modules declare tools under the same names, as one codebase would
//! at three moments: `v1` is the locked contract, `breaking` changes it in
//! every way that breaks a caller, `compatible` in ways that do not.

use serde_json::json;
use toolcall::{Registry, Rejection};
use toolcall_contract::lock::{self, Change, ChangeKind, LockError, Lockfile, Severity};

type Out = Result<serde_json::Value, Rejection>;

fn done() -> Out {
    Ok(json!({}))
}

mod v1 {
    use super::{Out, done};
    use toolcall::tool;

    /// A currency.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        /// Brazilian real.
        Brl,
        /// United States dollar.
        Usd,
    }

    /// Why.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    pub enum Reason {
        Damaged,
        NotDelivered,
    }

    /// A label.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Label {
        /// Its text.
        pub name: String,
        /// Its colour.
        pub color: Option<String>,
    }

    /// Looks an order up.
    #[tool]
    pub fn get_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Refunds an order.
    #[tool(side_effect, high_risk)]
    pub fn refund_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
        /// Amount in cents.
        #[arg(min = 1)]
        amount_cents: i64,
        /// The order's currency.
        currency: Currency,
        /// Why.
        reason: Reason,
        /// A note.
        note: Option<String>,
    ) -> Out {
        let _ = (order_id, amount_cents, currency, reason, note);
        done()
    }

    /// Cancels an order.
    #[tool(side_effect)]
    pub fn cancel_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Ships an order.
    #[tool(side_effect)]
    pub fn ship_order(
        /// Order id.
        order_id: String,
        /// For the courier.
        #[arg(max_length = 10)]
        note: String,
    ) -> Out {
        let _ = (order_id, note);
        done()
    }

    /// Labels an order.
    #[tool(side_effect)]
    pub fn tag_order(
        /// Order id.
        order_id: String,
        /// The labels to set.
        labels: Vec<Label>,
    ) -> Out {
        let _ = (order_id, labels);
        done()
    }
}

mod breaking {
    use super::{Out, done};
    use toolcall::tool;

    /// A currency, USD gone.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        /// Brazilian real.
        Brl,
    }

    /// A label whose colour went away.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Label {
        /// Its text.
        pub name: String,
    }

    /// Looks an order up.
    #[tool]
    pub fn get_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Refunds an order: no longer high-risk, `order_id` renamed, the amount
    /// a string, USD gone, `reason` gone, a new required customer, and the
    /// note required.
    #[tool(side_effect)]
    pub fn refund_order(
        /// The order's reference.
        order_ref: String,
        /// The amount, as text.
        amount_cents: String,
        /// The currency.
        currency: Currency,
        /// The customer's id.
        customer_id: u64,
        /// A note.
        note: String,
    ) -> Out {
        let _ = (order_ref, amount_cents, currency, customer_id, note);
        done()
    }

    /// Cancels an order, version 2 (the old name is gone).
    #[tool(side_effect, name = "cancel_order", version = 2)]
    pub fn cancel_order(
        /// Order id.
        order_id: String,
        /// Why it is cancelled.
        reason: String,
    ) -> Out {
        let _ = (order_id, reason);
        done()
    }

    /// Ships an order: now a read, and a shorter note.
    #[tool]
    pub fn ship_order(
        /// Order id.
        order_id: String,
        /// For the courier.
        #[arg(max_length = 5)]
        note: String,
    ) -> Out {
        let _ = (order_id, note);
        done()
    }

    /// Labels an order.
    #[tool(side_effect)]
    pub fn tag_order(
        /// Order id.
        order_id: String,
        /// The labels to set.
        labels: Vec<Label>,
    ) -> Out {
        let _ = (order_id, labels);
        done()
    }
}

mod compatible {
    use super::{Out, done};
    use toolcall::tool;

    /// A currency, one more.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "UPPERCASE")]
    pub enum Currency {
        /// Brazilian real.
        Brl,
        /// United States dollar.
        Usd,
        /// Euro.
        Eur,
    }

    pub use super::v1::Reason;

    /// A label with a priority.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Label {
        /// Its text.
        pub name: String,
        /// Its colour.
        pub color: Option<String>,
        /// Its rank.
        pub priority: Option<u8>,
    }

    /// Looks an order up, and now records that it did.
    #[tool(side_effect)]
    pub fn get_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Refunds part or all of an order.
    #[tool(side_effect, high_risk)]
    pub fn refund_order(
        /// Order id.
        #[arg(pattern = r"^ORD-\d{4}$")]
        order_id: String,
        /// Amount in minor units (cents).
        #[arg(min = 1)]
        amount_cents: i64,
        /// The order's currency.
        currency: Currency,
        /// Why.
        reason: Reason,
        /// A note.
        note: Option<String>,
        /// For the accounting team.
        memo: Option<String>,
    ) -> Out {
        let _ = (order_id, amount_cents, currency, reason, note, memo);
        done()
    }

    /// Cancels an order.
    #[tool(side_effect)]
    pub fn cancel_order(
        /// Order id.
        order_id: String,
    ) -> Out {
        let _ = order_id;
        done()
    }

    /// Ships an order.
    #[tool(side_effect)]
    pub fn ship_order(
        /// Order id.
        order_id: String,
        /// For the courier.
        #[arg(max_length = 20)]
        note: String,
    ) -> Out {
        let _ = (order_id, note);
        done()
    }

    /// Labels an order.
    #[tool(side_effect)]
    pub fn tag_order(
        /// Order id.
        order_id: String,
        /// The labels to set.
        labels: Vec<Label>,
    ) -> Out {
        let _ = (order_id, labels);
        done()
    }

    /// Lists a customer's orders.
    #[tool]
    pub fn list_orders(
        /// The customer's id.
        customer_id: String,
    ) -> Out {
        let _ = customer_id;
        done()
    }
}

fn locked() -> Lockfile {
    let registry: Registry = toolcall::tools![
        v1::ship_order,
        v1::refund_order,
        v1::get_order,
        v1::cancel_order,
        v1::tag_order
    ]
    .unwrap();
    Lockfile::from_registry(&registry)
}

fn after_breaking() -> Lockfile {
    let registry = toolcall::tools![
        breaking::get_order,
        breaking::refund_order,
        breaking::cancel_order,
        breaking::ship_order,
        breaking::tag_order
    ]
    .unwrap();
    Lockfile::from_registry(&registry)
}

fn after_compatible() -> Lockfile {
    let registry = toolcall::tools![
        compatible::get_order,
        compatible::refund_order,
        compatible::cancel_order,
        compatible::ship_order,
        compatible::tag_order,
        compatible::list_orders
    ]
    .unwrap();
    Lockfile::from_registry(&registry)
}

/// Each change as `breaking: ...`, `review: ...` or `compatible: ...`, as
/// `check` prints them.
fn lines(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|c| format!("{}: {c}", c.severity()))
        .collect()
}

#[test]
fn the_lock_file_reads_back_what_it_writes() {
    let lock = locked();
    let text = lock.to_json_pretty();
    let parsed = Lockfile::parse(&text).unwrap();
    assert_eq!(parsed, lock);
    assert_eq!(
        parsed.to_json_pretty(),
        text,
        "writing is byte-for-byte stable"
    );
    assert!(text.ends_with("}\n"));
    assert!(
        lock::check(&parsed, &lock).is_empty(),
        "no change, no report"
    );
    insta::assert_snapshot!("tools_lock_json", text);
}

#[test]
fn tools_and_fields_are_sorted_whatever_the_registration_order() {
    let lock = locked();
    let names: Vec<&str> = lock.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cancel_order",
            "get_order",
            "refund_order",
            "ship_order",
            "tag_order"
        ]
    );
    let refund = lock.tool("refund_order").unwrap();
    let fields: Vec<&str> = refund.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        fields,
        ["amount_cents", "currency", "note", "order_id", "reason"]
    );
}

#[test]
fn the_lock_records_flags_types_requirement_enums_and_nesting() {
    let lock = locked();
    let refund = lock.tool("refund_order").unwrap();
    assert!(refund.side_effect && refund.high_risk);
    assert_eq!(refund.description, "Refunds an order.");
    assert_eq!(refund.schema_sha256.len(), 64);
    let get = lock.tool("get_order").unwrap();
    assert!(!get.side_effect && !get.high_risk);

    let field = |name: &str| refund.fields.iter().find(|f| f.name == name).unwrap();
    let amount = field("amount_cents");
    assert!(amount.required);
    assert_eq!(amount.shape.ty, "integer");
    assert_eq!(amount.shape.format.as_deref(), Some("int64"));
    assert_eq!(amount.shape.constraints["minimum"], json!(1));
    assert_eq!(amount.description.as_deref(), Some("Amount in cents."));

    // A documented enum (schemars writes `oneOf` constants) and a plain one.
    let currency = field("currency");
    assert_eq!(currency.shape.ty, "string");
    assert_eq!(
        currency.shape.enum_values,
        Some(vec![json!("BRL"), json!("USD")])
    );
    let reason = field("reason");
    assert_eq!(
        reason.shape.enum_values,
        Some(vec![json!("damaged"), json!("not_delivered")])
    );

    let note = field("note");
    assert!(!note.required);
    assert!(note.shape.nullable);
    assert_eq!(note.shape.ty, "string");
    assert_eq!(
        field("order_id").shape.constraints["pattern"],
        json!(r"^ORD-\d{4}$")
    );

    let tag = lock.tool("tag_order").unwrap();
    let labels = tag.fields.iter().find(|f| f.name == "labels").unwrap();
    assert_eq!(labels.shape.ty, "array");
    let items = labels.shape.items.as_ref().unwrap();
    assert_eq!(items.ty, "object");
    let members: Vec<(&str, bool)> = items
        .fields
        .as_ref()
        .unwrap()
        .iter()
        .map(|f| (f.name.as_str(), f.required))
        .collect();
    assert_eq!(members, [("color", false), ("name", true)]);
}

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

#[test]
fn parse_refuses_what_is_not_a_lock_file_of_this_version() {
    assert!(matches!(Lockfile::parse("{"), Err(LockError::Json(_))));
    assert!(matches!(
        Lockfile::parse(r#"{"tools": []}"#),
        Err(LockError::MissingVersion)
    ));
    let newer = Lockfile::parse(r#"{"format_version": 3, "tools": []}"#).unwrap_err();
    assert!(matches!(newer, LockError::UnsupportedVersion(3)));
    assert!(newer.to_string().contains("version 3 is not supported"));
    // Version 1 collapsed enums with data: it is refused, to be written again.
    let older = Lockfile::parse(r#"{"format_version": 1, "tools": []}"#).unwrap_err();
    assert!(matches!(older, LockError::UnsupportedVersion(1)));
    assert!(older.to_string().contains("run `lock` again"));
    assert!(matches!(
        Lockfile::parse(r#"{"format_version": 2, "tools": [{"name": "x"}]}"#),
        Err(LockError::Invalid(_))
    ));
    let one = json!({"name": "x", "description": "", "side_effect": false, "high_risk": false,
                     "schema_sha256": "", "fields": []});
    let twice = json!({"format_version": 2, "tools": [one, one]}).to_string();
    let error = Lockfile::parse(&twice).unwrap_err();
    assert!(matches!(error, LockError::DuplicateTool(ref name) if name == "x"));
    assert_eq!(error.to_string(), "the lock file lists the tool `x` twice");
    assert_eq!(
        Lockfile::parse(r#"{"format_version": 2, "tools": []}"#)
            .unwrap()
            .tools
            .len(),
        0
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

// ------------------------------------------- unions, tuples, widening, renames

/// Two versions of one tool `t`, as a codebase would have them before and
/// after a change.
macro_rules! case {
    ($name:ident, { $($before:tt)* }, { $($after:tt)* }) => {
        mod $name {
            pub mod before {
                #![allow(dead_code)]
                use crate::{Out, done};
                use toolcall::tool;
                $($before)*
            }
            pub mod after {
                #![allow(dead_code)]
                use crate::{Out, done};
                use toolcall::tool;
                $($after)*
            }
        }
    };
}

/// The locks of the two versions of a case.
macro_rules! locks {
    ($name:ident) => {
        (
            Lockfile::from_registry(&toolcall::tools![$name::before::t].unwrap()),
            Lockfile::from_registry(&toolcall::tools![$name::after::t].unwrap()),
        )
    };
}

/// What `check` prints for a case, one line a change.
macro_rules! check {
    ($name:ident) => {{
        let (before, after) = locks!($name);
        lines(&lock::check(&before, &after))
    }};
}

case!(
    tagged_variant_removed,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Pix { key: String },
            Cash { cents: i64 },
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The payment.
            p: Pay,
        ) -> Out {
            let _ = p;
            done()
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Cash { cents: i64 },
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The payment.
            p: Pay,
        ) -> Out {
            let _ = p;
            done()
        }
    }
);

#[test]
fn a_removed_variant_of_a_tagged_enum_is_breaking() {
    let (before, _) = locks!(tagged_variant_removed);
    let p = &before.tools[0].fields[0];
    let keys: Vec<&str> = p
        .shape
        .variants
        .as_ref()
        .expect("the variants are in the lock")
        .iter()
        .map(|v| v.key.as_str())
        .collect();
    assert_eq!(keys, ["kind=card", "kind=cash", "kind=pix"]);
    let text = before.to_json_pretty();
    assert!(text.contains("\"key\": \"kind=pix\""), "{text}");
    assert_eq!(Lockfile::parse(&text).unwrap(), before);
    assert_eq!(
        check!(tagged_variant_removed),
        [
            "breaking: tool `t`, field `p`: variant `kind=pix` removed; calls that send it are now rejected"
        ]
    );
}

case!(
    variant_fields_changed,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Cash { cents: i64 },
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The payment.
            p: Pay,
        ) -> Out {
            let _ = p;
            done()
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: bool },
            Cash { cents: i64, change: bool },
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The payment.
            p: Pay,
        ) -> Out {
            let _ = p;
            done()
        }
    }
);

#[test]
fn a_variants_fields_are_compared_like_an_objects() {
    assert_eq!(
        check!(variant_fields_changed),
        [
            "breaking: tool `t`, field `p(kind=card).number`: retyped from string to boolean",
            "breaking: tool `t`, field `p(kind=cash).change`: added as required (boolean); calls without it are now rejected",
        ]
    );
}

case!(
    mixed_enum_value_removed,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason {
            Damaged,
            Late,
            Other(String),
        }
        /// Why.
        #[tool]
        pub fn t(
            /// Why.
            r: Reason,
        ) -> Out {
            let _ = r;
            done()
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason {
            Damaged,
            Other(String),
        }
        /// Why.
        #[tool]
        pub fn t(
            /// Why.
            r: Reason,
        ) -> Out {
            let _ = r;
            done()
        }
    }
);

#[test]
fn a_unit_variant_removed_beside_data_variants_is_breaking() {
    let (before, _) = locks!(mixed_enum_value_removed);
    let r = &before.tools[0].fields[0].shape;
    assert_eq!(r.ty, "object|string");
    assert_eq!(r.enum_values, Some(vec![json!("damaged"), json!("late")]));
    assert_eq!(r.variants.as_ref().unwrap()[0].key, "other");
    assert_eq!(
        check!(mixed_enum_value_removed),
        ["breaking: tool `t`, field `r`: enum value \"late\" removed"]
    );
}

case!(
    tuple_swapped,
    {
        /// A pair.
        #[tool]
        pub fn t(
            /// The pair.
            p: (i64, String),
        ) -> Out {
            let _ = p;
            done()
        }
    },
    {
        /// A pair.
        #[tool]
        pub fn t(
            /// The pair.
            p: (String, i64),
        ) -> Out {
            let _ = p;
            done()
        }
    }
);

#[test]
fn tuple_elements_are_compared_by_position() {
    let (before, _) = locks!(tuple_swapped);
    let positions = before.tools[0].fields[0]
        .shape
        .prefix_items
        .as_ref()
        .unwrap();
    assert_eq!(positions.len(), 2);
    assert_eq!(
        check!(tuple_swapped),
        [
            "breaking: tool `t`, field `p[0]`: retyped from integer to string",
            "breaking: tool `t`, field `p[1]`: retyped from string to integer",
        ]
    );
}

case!(
    variant_added_to_single,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The payment.
            p: Pay,
        ) -> Out {
            let _ = p;
            done()
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Pix { key: String },
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The payment.
            p: Pay,
        ) -> Out {
            let _ = p;
            done()
        }
    }
);

case!(
    data_variant_added_to_units,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason {
            Damaged,
            Late,
        }
        /// Why.
        #[tool]
        pub fn t(
            /// Why.
            r: Reason,
        ) -> Out {
            let _ = r;
            done()
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason {
            Damaged,
            Late,
            Other(String),
        }
        /// Why.
        #[tool]
        pub fn t(
            /// Why.
            r: Reason,
        ) -> Out {
            let _ = r;
            done()
        }
    }
);

#[test]
fn adding_a_variant_is_compatible() {
    // Before: the one-variant enum lost its fields (`p.kind`, `p.number`
    // "removed"), and the unit-only enum was "retyped"; both breaking.
    assert_eq!(
        check!(variant_added_to_single),
        ["compatible: tool `t`, field `p`: variant `kind=pix` added"]
    );
    assert_eq!(
        check!(data_variant_added_to_units),
        ["compatible: tool `t`, field `r`: variant `other` added"]
    );
}

case!(
    integer_to_number,
    {
        /// A quantity.
        #[tool]
        pub fn t(
            /// The quantity.
            x: i64,
        ) -> Out {
            let _ = x;
            done()
        }
    },
    {
        /// A quantity.
        #[tool]
        pub fn t(
            /// The quantity.
            x: f64,
        ) -> Out {
            let _ = x;
            done()
        }
    }
);

#[test]
fn widening_a_type_is_compatible_and_narrowing_it_breaks() {
    let widened = check!(integer_to_number);
    assert_eq!(
        widened[0],
        "compatible: tool `t`, field `x`: widened from integer to number"
    );
    assert!(
        widened.iter().all(|l| l.starts_with("compatible")),
        "{widened:?}"
    );

    let (before, after) = locks!(integer_to_number);
    let narrowed = lines(&lock::check(&after, &before));
    assert_eq!(
        narrowed,
        ["breaking: tool `t`, field `x`: retyped from number to integer"]
    );
}

case!(
    struct_to_map,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Tags {
            pub color: String,
            pub size: String,
        }
        /// Tags.
        #[tool]
        pub fn t(
            /// The tags, by name.
            m: Tags,
        ) -> Out {
            let _ = m;
            done()
        }
    },
    {
        /// Tags.
        #[tool]
        pub fn t(
            /// The tags, by name.
            m: std::collections::BTreeMap<String, String>,
        ) -> Out {
            let _ = m;
            done()
        }
    }
);

case!(
    struct_to_narrower_map,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Tags {
            pub color: String,
            pub size: u32,
        }
        /// Tags.
        #[tool]
        pub fn t(
            /// The tags, by name.
            m: Tags,
        ) -> Out {
            let _ = m;
            done()
        }
    },
    {
        /// Tags.
        #[tool]
        pub fn t(
            /// The tags, by name.
            m: std::collections::BTreeMap<String, String>,
        ) -> Out {
            let _ = m;
            done()
        }
    }
);

#[test]
fn a_struct_that_becomes_a_map_of_its_values_is_compatible() {
    assert_eq!(
        check!(struct_to_map),
        [
            "compatible: tool `t`, field `m`: named members became a map of string, which accepts each of them"
        ]
    );
    let narrower = check!(struct_to_narrower_map);
    assert!(
        narrower.contains(
            &"breaking: tool `t`, field `m.size`: retyped from integer to string".to_owned()
        ),
        "{narrower:?}"
    );
}

case!(
    renames,
    {
        /// Renames.
        #[tool]
        pub fn t(
            /// The order.
            order_id: String,
            /// Left.
            left: u32,
            /// Right.
            right: u32,
        ) -> Out {
            let _ = (order_id, left, right);
            done()
        }
    },
    {
        /// Renames.
        #[tool]
        pub fn t(
            /// The order.
            order_ref: String,
            /// Left.
            first: u32,
            /// Left.
            second: u32,
        ) -> Out {
            let _ = (order_ref, first, second);
            done()
        }
    }
);

#[test]
fn a_rename_is_guessed_only_when_one_pairing_is_possible() {
    let got = check!(renames);
    assert_eq!(
        got,
        [
            "breaking: tool `t`, field `left`: removed (integer); calls that send it are now rejected",
            "breaking: tool `t`, field `order_id`: renamed? to `order_ref` (removed, and `order_ref` added with the same shape, string)",
            "breaking: tool `t`, field `right`: removed (integer); calls that send it are now rejected",
            "breaking: tool `t`, field `first`: added as required (integer); calls without it are now rejected",
            "breaking: tool `t`, field `second`: added as required (integer); calls without it are now rejected",
        ],
        "`left`/`right` → `first`/`second` could pair either way; got:\n{}",
        got.join("\n")
    );
}

case!(
    unit_in_description,
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Money {
            /// Amount in cents. 25.90 is 2590.
            pub amount: i64,
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The amount to pay.
            m: Money,
        ) -> Out {
            let _ = m;
            done()
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Money {
            /// Amount in reais.
            pub amount: i64,
        }
        /// Pays.
        #[tool]
        pub fn t(
            /// The amount to pay.
            m: Money,
        ) -> Out {
            let _ = m;
            done()
        }
    }
);

#[test]
fn a_description_change_is_for_review_not_compatible() {
    let (before, after) = locks!(unit_in_description);
    let changes = lock::check(&before, &after);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].severity(), Severity::Review);
    assert!(changes[0].needs_review() && !changes[0].is_breaking());
    assert_eq!(
        lines(&changes),
        [
            "review: tool `t`, field `m.amount`: description changed; check that the meaning (a unit, a format) did not"
        ]
    );
    assert_eq!(Severity::Breaking.as_str(), "breaking");
    assert_eq!(Severity::Compatible.to_string(), "compatible");
}

#[test]
fn the_schema_notice_is_not_swallowed_by_another_change() {
    let mut current = locked();
    current.tools[0].description = "Cancels an order, now politely.".into();
    current.tools[0].schema_sha256 = "0".repeat(64);
    let got = lines(&lock::check(&locked(), &current));
    assert_eq!(
        got,
        [
            "review: tool `cancel_order`: description changed; check that the meaning (a unit, a format) did not",
            "review: tool `cancel_order`: parameters schema changed (its hash differs) in a way the lock file does not describe field by field; review it",
        ]
    );
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

#[test]
fn unknown_members_in_the_lock_file_are_refused() {
    let mut value: serde_json::Value = serde_json::from_str(&locked().to_json_pretty()).unwrap();
    let currency = &mut value["tools"][2]["fields"][1];
    assert_eq!(currency["name"], "currency");
    let values = currency.as_object_mut().unwrap().remove("enum").unwrap();
    currency["enums"] = values;
    let error = Lockfile::parse(&value.to_string()).unwrap_err();
    assert!(
        matches!(&error, LockError::UnknownMember { at, member } if at == "tools[2].fields[1]" && member == "enums"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "not a valid tools lock file: unknown member `enums` in tools[2].fields[1]"
    );

    // A misspelt constraint, and a member of a variant.
    let mut value: serde_json::Value = serde_json::from_str(&locked().to_json_pretty()).unwrap();
    value["tools"][3]["fields"][0]["constraints"] = json!({"maxLenght": 10});
    assert!(matches!(
        Lockfile::parse(&value.to_string()),
        Err(LockError::UnknownMember { member, .. }) if member == "maxLenght"
    ));
    let (before, _) = locks!(tagged_variant_removed);
    let mut value: serde_json::Value = serde_json::from_str(&before.to_json_pretty()).unwrap();
    value["tools"][0]["fields"][0]["variants"][0]["requried"] = json!(true);
    assert!(matches!(
        Lockfile::parse(&value.to_string()),
        Err(LockError::UnknownMember { at, member }) if at == "tools[0].fields[0].variants[0]" && member == "requried"
    ));
}

/// A misspelt member of the file or of a tool is refused by the layout
/// itself, the message naming the member and the tool it is in.
#[test]
fn parse_names_an_unknown_member_of_a_tool_and_where_it_is() {
    let mut value: serde_json::Value = serde_json::from_str(&locked().to_json_pretty()).unwrap();
    value["tools"][1]["side_efect"] = json!(true);
    let error = Lockfile::parse(&value.to_string()).unwrap_err();
    assert!(matches!(error, LockError::Invalid(_)), "{error:?}");
    let text = error.to_string();
    assert!(
        text.starts_with(
            "not a valid tools lock file: tools[1].side_efect: unknown field `side_efect`"
        ),
        "{text}"
    );

    let mut value: serde_json::Value = serde_json::from_str(&locked().to_json_pretty()).unwrap();
    value["format_versoin"] = json!(2);
    let text = Lockfile::parse(&value.to_string()).unwrap_err().to_string();
    assert!(
        text.starts_with(
            "not a valid tools lock file: format_versoin: unknown field `format_versoin`"
        ),
        "{text}"
    );
}
