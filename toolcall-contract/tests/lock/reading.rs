//! The lock file as a file: sorted whatever the registration order, what it
//! records, and the lock files of another version `parse` refuses.

use super::*;

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
