//! The contract lock file: what it records, that it reads back what it
//! writes, and which changes `check` calls breaking.
//!
//! Three modules declare tools under the same names, as one codebase would
//! at three moments: `v1` is the locked contract, `breaking` changes it in
//! every way that breaks a caller, `compatible` in ways that do not.

use serde_json::json;
use toolcall::{Registry, Rejection};
use toolcall_cli::lock::{self, Change, ChangeKind, LockError, Lockfile};

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
    pub fn cancel_order(order_id: String) -> Out {
        let _ = order_id;
        done()
    }

    /// Ships an order.
    #[tool(side_effect)]
    pub fn ship_order(
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
    pub fn tag_order(order_id: String, labels: Vec<Label>) -> Out {
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
        order_ref: String,
        amount_cents: String,
        currency: Currency,
        customer_id: u64,
        /// A note.
        note: String,
    ) -> Out {
        let _ = (order_ref, amount_cents, currency, customer_id, note);
        done()
    }

    /// Cancels an order, version 2 (the old name is gone).
    #[tool(side_effect, name = "cancel_order", version = 2)]
    pub fn cancel_order(order_id: String, reason: String) -> Out {
        let _ = (order_id, reason);
        done()
    }

    /// Ships an order: now a read, and a shorter note.
    #[tool]
    pub fn ship_order(
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
    pub fn tag_order(order_id: String, labels: Vec<Label>) -> Out {
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
    pub fn cancel_order(order_id: String) -> Out {
        let _ = order_id;
        done()
    }

    /// Ships an order.
    #[tool(side_effect)]
    pub fn ship_order(
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
    pub fn tag_order(order_id: String, labels: Vec<Label>) -> Out {
        let _ = (order_id, labels);
        done()
    }

    /// Lists a customer's orders.
    #[tool]
    pub fn list_orders(customer_id: String) -> Out {
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

/// Each change as `breaking: ...` or `compatible: ...`, as `check` prints them.
fn lines(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|c| {
            let kind = if c.is_breaking() {
                "breaking"
            } else {
                "compatible"
            };
            format!("{kind}: {c}")
        })
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
    let want = [
        "breaking: tool `cancel_order`: removed, replaced by `cancel_order_v2`; keep the old version beside the new one until callers move",
        "compatible: tool `cancel_order_v2`: new tool",
        "breaking: tool `refund_order`: `high_risk` lowered from true to false",
        "compatible: tool `refund_order`: description changed",
        "breaking: tool `refund_order`, field `order_id`: renamed? to `order_ref` (removed, and `order_ref` added, both string)",
        "breaking: tool `refund_order`, field `reason`: removed (string); calls that send it are now rejected",
        "breaking: tool `refund_order`, field `customer_id`: added as required (integer); calls without it are now rejected",
        "breaking: tool `refund_order`, field `amount_cents`: retyped from integer to string",
        "breaking: tool `refund_order`, field `currency`: enum value \"USD\" removed",
        "breaking: tool `refund_order`, field `note`: now required (was optional)",
        "breaking: tool `refund_order`, field `note`: no longer accepts null",
        "breaking: tool `ship_order`: `side_effect` lowered from true to false",
        "breaking: tool `ship_order`, field `note`: `maxLength` changed from 10 to 5",
        "breaking: tool `tag_order`, field `labels[].color`: removed (string); calls that send it are now rejected",
    ];
    for line in want {
        assert!(
            got.iter().any(|g| g == line),
            "missing {line}\n got:\n{}",
            got.join("\n")
        );
    }
    // Nothing else is reported as breaking.
    let unexpected: Vec<&String> = got
        .iter()
        .filter(|line| line.starts_with("breaking") && !want.contains(&line.as_str()))
        .collect();
    assert!(unexpected.is_empty(), "unexpected: {unexpected:?}");
    assert_eq!(changes.iter().filter(|c| c.is_breaking()).count(), 12);
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
        [ChangeKind::FieldRenamed { to, ty }] if to == "order_ref" && ty == "string"
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
    assert_eq!(
        got,
        [
            "compatible: tool `get_order`: `side_effect` raised from false to true",
            "compatible: tool `get_order`: description changed",
            "compatible: tool `list_orders`: new tool",
            "compatible: tool `refund_order`: description changed",
            "compatible: tool `refund_order`, field `memo`: added as optional (string)",
            "compatible: tool `refund_order`, field `amount_cents`: description changed",
            "compatible: tool `refund_order`, field `currency`: enum value \"EUR\" added",
            "compatible: tool `ship_order`, field `note`: `maxLength` changed from 10 to 20",
            "compatible: tool `tag_order`, field `labels[].priority`: added as optional (integer)",
        ],
        "got:\n{}",
        got.join("\n")
    );
    assert!(changes.iter().all(|c| !c.is_breaking()));
}

#[test]
fn a_schema_change_the_fields_do_not_explain_is_reported_as_compatible() {
    let mut current = locked();
    current.tools[0].schema_sha256 = "0".repeat(64);
    let changes = lock::check(&locked(), &current);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, ChangeKind::SchemaChanged);
    assert!(!changes[0].is_breaking());
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
    let newer = Lockfile::parse(r#"{"format_version": 2, "tools": []}"#).unwrap_err();
    assert!(matches!(newer, LockError::UnsupportedVersion(2)));
    assert!(newer.to_string().contains("version 2 is not supported"));
    assert!(matches!(
        Lockfile::parse(r#"{"format_version": 1, "tools": [{"name": "x"}]}"#),
        Err(LockError::Invalid(_))
    ));
    let one = json!({"name": "x", "description": "", "side_effect": false, "high_risk": false,
                     "schema_sha256": "", "fields": []});
    let twice = json!({"format_version": 1, "tools": [one, one]}).to_string();
    let error = Lockfile::parse(&twice).unwrap_err();
    assert!(matches!(error, LockError::DuplicateTool(ref name) if name == "x"));
    assert_eq!(error.to_string(), "the lock file lists the tool `x` twice");
    assert_eq!(
        Lockfile::parse(r#"{"format_version": 1, "tools": []}"#)
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
    pub fn file_tree(root: Category) -> Out {
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
