//! Unions, tuples, maps and renames: tagged enums and their variants,
//! tuple elements by position, widening and narrowing, descriptions; and
//! unknown members of the file, a tool or a variant, named where they are.

use super::*;

case!(
    tagged_variant_removed,
    tool {
        about: "Pays.",
        arg: p,
        doc: "The payment.",
        ty: Pay
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Pix { key: String },
            Cash { cents: i64 },
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Cash { cents: i64 },
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
    tool {
        about: "Pays.",
        arg: p,
        doc: "The payment.",
        ty: Pay
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Cash { cents: i64 },
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: bool },
            Cash { cents: i64, change: bool },
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
    tool {
        about: "Why.",
        arg: r,
        doc: "Why.",
        ty: Reason
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason {
            Damaged,
            Late,
            Other(String),
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason {
            Damaged,
            Other(String),
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
    tool {
        about: "A pair.",
        arg: p,
        doc: "The pair.",
        ty: Pair
    },
    {
        pub type Pair = (i64, String);
    },
    {
        pub type Pair = (String, i64);
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
    tool {
        about: "Pays.",
        arg: p,
        doc: "The payment.",
        ty: Pay
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum Pay {
            Card { number: String },
            Pix { key: String },
        }
    }
);

case!(
    data_variant_added_to_units,
    tool {
        about: "Why.",
        arg: r,
        doc: "Why.",
        ty: Reason
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum Reason {
            Damaged,
            Late,
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
    tool {
        about: "A quantity.",
        arg: x,
        doc: "The quantity.",
        ty: Quantity
    },
    {
        pub type Quantity = i64;
    },
    {
        pub type Quantity = f64;
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
    tool {
        about: "Tags.",
        arg: m,
        doc: "The tags, by name.",
        ty: Tags
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Tags {
            pub color: String,
            pub size: String,
        }
    },
    {
        pub type Tags = std::collections::BTreeMap<String, String>;
    }
);

case!(
    struct_to_narrower_map,
    tool {
        about: "Tags.",
        arg: m,
        doc: "The tags, by name.",
        ty: Tags
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Tags {
            pub color: String,
            pub size: u32,
        }
    },
    {
        pub type Tags = std::collections::BTreeMap<String, String>;
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
    tool {
        about: "Pays.",
        arg: m,
        doc: "The amount to pay.",
        ty: Money
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Money {
            /// Amount in cents. 25.90 is 2590.
            pub amount: i64,
        }
    },
    {
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct Money {
            /// Amount in reais.
            pub amount: i64,
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
