//! What `#[tool]` generates: the function as written, the strict argument
//! struct, its schema from the same declaration as the validator, the spec,
//! and the registry entry.

use std::sync::Arc;

use orders::{Currency, RefundOrderArgs, RefundReason, Shop, get_order, refund_order};
use serde_json::json;
use toolcall::__private::ToolArgs;
use toolcall::{
    BuildError, Call, Caller, Ctx, Dispatcher, Policy, Registry, RegistryError, Rejection, Tool,
    tool, tools,
};
use toolcall_tests::place;

#[test]
fn the_function_stays_callable_as_written() {
    let shop = Arc::new(Shop::new());
    let ctx = Ctx::new(
        Arc::clone(&shop),
        "key-1",
        "s",
        Caller::new("me", Policy::new()),
    );
    let reader = Ctx::new(
        Arc::new(shop.reader()),
        "key-1",
        "s",
        Caller::new("me", Policy::new()),
    );
    let order = futures_lite_block_on(get_order(&reader, "ORD-1002".to_owned())).unwrap();
    assert_eq!((order.total_cents, order.currency), (4500, Currency::USD));
    let refund = futures_lite_block_on(refund_order(
        &ctx,
        "ORD-1001".into(),
        100,
        Currency::BRL,
        RefundReason::Damaged,
    ))
    .unwrap();
    assert_eq!(refund.remaining_refundable_cents, 11_900);
    assert_eq!(shop.applied_refunds(), 1);
}

fn futures_lite_block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn the_args_struct_has_one_field_per_parameter() {
    let args = RefundOrderArgs {
        order_id: "ORD-1001".into(),
        amount_cents: 2590,
        currency: Currency::BRL,
        reason: RefundReason::NotDelivered,
    };
    assert_eq!(
        serde_json::to_value(&args).unwrap(),
        json!({"order_id": "ORD-1001", "amount_cents": 2590, "currency": "BRL", "reason": "not_delivered"})
    );
    let names: Vec<&str> = RefundOrderArgs::fields().iter().map(|f| f.name).collect();
    assert_eq!(names, ["order_id", "amount_cents", "currency", "reason"]);
}

#[test]
fn the_spec_carries_name_description_and_flags() {
    let spec = <refund_order as Tool>::spec();
    assert_eq!(spec.name(), "refund_order");
    assert_eq!(
        spec.description(),
        "Refund part or all of an order. Call get_order first. Amount in cents, in the order currency."
    );
    assert!(spec.side_effect() && spec.high_risk());
    let read = <get_order as Tool>::spec();
    assert!(!read.side_effect() && !read.high_risk());
}

#[test]
fn the_schema_comes_from_the_same_declaration_as_the_validator() {
    let schema = <refund_order as Tool>::spec().parameters_schema();
    assert_eq!(
        schema,
        json!({
            "type": "object",
            "properties": {
                "order_id": {
                    "type": "string",
                    "description": "Order id, for example ORD-1001.",
                    "pattern": "^ORD-[0-9]{4}$"
                },
                "amount_cents": {
                    "type": "integer",
                    "format": "int64",
                    "description": "Refund amount in minor units (cents). 25.90 is 2590.",
                    "minimum": 1,
                    "maximum": i64::MAX
                },
                "currency": {
                    "oneOf": [
                        {"type": "string", "const": "BRL", "description": "Brazilian real."},
                        {"type": "string", "const": "USD", "description": "United States dollar."}
                    ],
                    "description": "Must match the order currency."
                },
                "reason": {
                    "oneOf": [
                        {"type": "string", "const": "damaged", "description": "The goods arrived damaged."},
                        {"type": "string", "const": "not_delivered", "description": "The goods never arrived."},
                        {"type": "string", "const": "customer_request", "description": "The customer asked for it."}
                    ],
                    "description": "Why a refund is made."
                }
            },
            "required": ["order_id", "amount_cents", "currency", "reason"],
            "additionalProperties": false
        })
    );
}

/// Looks a word up.
///
/// Answers with the word's definition, or `UNKNOWN_WORD`.
#[tool(name = "dictionary-lookup")]
fn lookup(
    /// The word.
    word: String,
    /// How many senses, at most.
    #[arg(min = 1, max = 5)]
    senses: Option<u8>,
) -> Result<serde_json::Value, Rejection> {
    Ok(json!({"word": word, "senses": senses.unwrap_or(1)}))
}

#[tokio::test]
async fn name_docs_optional_and_bounds() {
    let spec = <lookup as Tool>::spec();
    assert_eq!(spec.name(), "dictionary-lookup");
    assert_eq!(
        spec.description(),
        "Looks a word up.\n\nAnswers with the word's definition, or `UNKNOWN_WORD`."
    );
    let schema = spec.parameters_schema();
    assert_eq!(schema["required"], json!(["word"]));
    assert_eq!(schema["properties"]["senses"]["minimum"], 1);
    assert_eq!(schema["properties"]["senses"]["maximum"], 5);

    let d = Dispatcher::builder(tools![lookup].unwrap(), Arc::new(()))
        .build()
        .unwrap();
    let ok = d
        .execute(Call::new("dictionary-lookup", r#"{"word": "tool"}"#).session("default"))
        .await;
    assert_eq!(ok.data["senses"], 1, "{ok:?}");
    for (senses, message) in [
        (6, "senses: 6 is greater than the maximum 5"),
        (0, "senses: 0 is less than the minimum 1"),
    ] {
        let args = json!({"word": "tool", "senses": senses}).to_string();
        let bad = d
            .execute(Call::new("dictionary-lookup", args.as_str()).session("default"))
            .await;
        assert_eq!(
            bad.message,
            format!("{message} (How many senses, at most.)")
        );
    }
}

#[test]
fn collect_finds_every_tool_linked_into_the_program() {
    // This test binary also links `leaky`, whose schema is open on purpose:
    // collect refuses the whole set, naming it.
    assert!(matches!(
        Registry::collect(),
        Err(RegistryError::OpenSchema { tool: "leaky", .. })
    ));
    let registry = Registry::from_specs(
        toolcall::Registry::collect_specs().filter(|spec| spec.name() != "leaky"),
    )
    .unwrap();
    let names: Vec<&str> = registry.iter().map(|s| s.name()).collect();
    for name in [
        "dictionary-lookup",
        "get_order",
        "refund_order",
        "shout",
        "place_order_v2",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

/// Says it louder.
#[tool]
fn shout(
    /// What to shout.
    text: String,
) -> Result<String, Rejection> {
    Ok(text.to_uppercase())
}

macro_rules! echo_tools {
    ($($name:ident),*) => {$(
        /// Gives its text back.
        #[tool]
        fn $name(
            /// The text.
            text: String,
        ) -> Result<String, Rejection> {
            Ok(text)
        }
    )*};
}

echo_tools!(
    echo_a, echo_b, echo_c, echo_d, echo_e, echo_f, echo_g, echo_h, echo_i, echo_j
);

#[test]
fn a_registry_finds_each_tool_by_its_exact_name_and_no_other() {
    // A few tools are looked up one after the other, many through a map:
    // both ways find the same tools and refuse the same names.
    let small = tools![echo_a, echo_b, shout].unwrap();
    let large = tools![
        echo_a, echo_b, echo_c, echo_d, echo_e, echo_f, echo_g, echo_h, echo_i, echo_j, shout
    ]
    .unwrap();
    for registry in [&small, &large] {
        let names: Vec<&str> = registry.iter().map(|spec| spec.name()).collect();
        for name in &names {
            assert_eq!(registry.get(name).map(|spec| spec.name()), Some(*name));
        }
        for unknown in [
            "", "echo", "echo_", "echo_a ", " echo_a", "ECHO_A", "echo_aa", "echo_k", "shou",
            "shout\0",
        ] {
            assert!(registry.get(unknown).is_none(), "{unknown:?} in {names:?}");
        }
    }
    assert!(small.get("echo_c").is_none() && large.get("echo_c").is_some());
}

#[test]
fn two_tools_with_one_name_are_refused() {
    let error = tools![shout, get_order, get_order].unwrap_err();
    assert_eq!(error, RegistryError::DuplicateName { name: "get_order" });
    assert!(
        error
            .to_string()
            .contains("rename one with #[tool(name = \"...\")]")
    );
}

#[test]
fn a_tool_whose_context_needs_other_state_is_refused_at_build() {
    let error = Dispatcher::builder(tools![refund_order].unwrap(), Arc::new(42_u32))
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        BuildError::StateMismatch {
            tool: "refund_order",
            expected: "orders::shop::Shop",
            found: "u32"
        }
    );
}

#[test]
fn definitions_follow_the_allowlist() {
    let registry = tools![get_order, refund_order].unwrap();
    let definitions = registry.definitions(&Policy::new().allow(["get_order"]));
    assert_eq!(definitions.len(), 1);
    assert_eq!(definitions[0]["name"], "get_order");
    assert_eq!(
        definitions[0]["description"],
        "Read one order: total, amount already refunded and currency. No side effects."
    );
    assert_eq!(
        definitions[0]["parameters"]["required"],
        json!(["order_id"])
    );
}

// ------------------------------------------------ the whole attribute surface

fn place_args(overrides: serde_json::Value) -> String {
    let mut args = json!({
        "email": "ana@example.com",
        "deliver_on": "2026-12-01",
        "lines": [{"sku": "A-1", "quantity": 2}],
        "requestId": "67e55044-10b1-426f-9247-bb680e5fe0c8",
    });
    for (key, value) in overrides.as_object().unwrap() {
        args[key] = value.clone();
    }
    args.to_string()
}

async fn place_message(raw: &str) -> String {
    let d = Dispatcher::builder(tools![place].unwrap(), Arc::new(()))
        .build()
        .unwrap();
    let result = d
        .execute(Call::new("place_order_v2", raw).session("default"))
        .await;
    if result.ok {
        "OK".to_owned()
    } else {
        result.message
    }
}

#[tokio::test]
async fn every_constraint_is_enforced_with_its_message() {
    assert_eq!(place_message(&place_args(json!({}))).await, "OK");
    let cases = [
        (
            json!({"email": "ana"}),
            "email: \"ana\" is not a valid email (Customer email.)",
        ),
        (
            json!({"deliver_on": "2026-02-30"}),
            "deliver_on: \"2026-02-30\" is not a valid date (Delivery day.)",
        ),
        (
            json!({"lines": []}),
            "lines: 0 items, fewer than the minimum 1 (The lines.)",
        ),
        (
            json!({"lines": [{"sku": "a", "quantity": 1}, {"sku": "b", "quantity": 1}, {"sku": "c", "quantity": 1}, {"sku": "d", "quantity": 1}]}),
            "lines: 4 items, more than the maximum 3 (The lines.)",
        ),
        (
            json!({"discount": 0}),
            "discount: 0 must be greater than 0 (Discount in percent, strictly between 0 and 100.)",
        ),
        (
            json!({"discount": 100.0}),
            "discount: 100.0 must be less than 100 (Discount in percent, strictly between 0 and 100.)",
        ),
        (
            json!({"requestId": "nope"}),
            "requestId: \"nope\" is not a valid uuid (The client's request id.)",
        ),
        (
            json!({"note": "x"}),
            "note: 1 characters, fewer than the minimum 2 (A note for the courier.)",
        ),
        (
            json!({"note": "ça va?"}),
            "note: 6 characters, more than the maximum 5 (A note for the courier.)",
        ),
    ];
    for (overrides, want) in cases {
        assert_eq!(
            place_message(&place_args(overrides.clone())).await,
            want,
            "{overrides}"
        );
    }
    assert_eq!(
        place_message(&place_args(json!({"discount": 99.5, "note": "été"}))).await,
        "OK"
    );
}

#[tokio::test]
async fn nested_values_are_as_strict_as_the_top_level_and_errors_say_where() {
    let quantity = place_message(&place_args(
        json!({"lines": [{"sku": "A-1", "quantity": 2.5}]}),
    ))
    .await;
    assert_eq!(
        quantity,
        "lines[0].quantity: invalid type: floating point `2.5`, expected a non-negative integer that fits in u32 (The lines.)"
    );
    let extra = place_message(&place_args(
        json!({"lines": [{"sku": "A-1", "quantity": 2, "gift": true}]}),
    ))
    .await;
    assert_eq!(
        extra,
        "lines[0].gift: unknown field `gift`, expected `sku` or `quantity` (The lines.)"
    );
}

#[tokio::test]
async fn rename_is_the_json_name_and_the_rust_name_is_unknown() {
    let raw = place_args(json!({})).replace("requestId", "request_id");
    let message = place_message(&raw).await;
    assert!(message.contains("requestId: field required"), "{message}");
    assert!(
        message.contains("request_id: unknown field, did you mean `requestId`?"),
        "{message}"
    );
    let schema = <place as Tool>::spec().parameters_schema();
    assert!(schema["properties"].get("requestId").is_some());
    assert!(schema["properties"].get("request_id").is_none());
}

#[tokio::test]
async fn sensitive_values_stay_out_of_the_audit() {
    let audit = toolcall::MemoryAudit::new();
    let d = Dispatcher::builder(tools![place].unwrap(), Arc::new(()))
        .audit(audit.clone())
        .build()
        .unwrap();
    d.execute(Call::new("place_order_v2", place_args(json!({})).as_str()).session("default"))
        .await;
    d.execute(Call::new("place_order_v2", r#"{"email": "ana@example.com", "#).session("default"))
        .await;
    let parsed = json!({"email": "bia@example.com", "lines": 3});
    d.execute(Call::new("place_order_v2", &parsed).session("default"))
        .await;
    let records = audit.records();
    assert_eq!(records.len(), 3);
    for record in &records {
        assert!(
            !record.arguments.contains("@example.com"),
            "{}",
            record.arguments
        );
    }
    let first: serde_json::Value = serde_json::from_str(&records[0].arguments).unwrap();
    assert_eq!(first["email"], "[redacted]");
    assert_eq!(
        first["deliver_on"], "2026-12-01",
        "only the sensitive member is hidden"
    );
    assert_eq!(
        records[1].arguments, "[redacted]",
        "unparseable text is not kept at all"
    );
}

#[test]
fn the_schema_carries_every_constraint_keyword() {
    let schema = <place as Tool>::spec().parameters_schema();
    let p = &schema["properties"];
    assert_eq!(p["email"]["format"], "email");
    assert_eq!(p["deliver_on"]["format"], "date");
    assert_eq!(
        (
            p["lines"]["minItems"].clone(),
            p["lines"]["maxItems"].clone()
        ),
        (json!(1), json!(3))
    );
    assert_eq!(p["lines"]["items"]["additionalProperties"], false);
    assert_eq!(p["discount"]["exclusiveMinimum"], 0);
    assert_eq!(p["discount"]["exclusiveMaximum"], 100);
    assert_eq!(
        (
            p["note"]["minLength"].clone(),
            p["note"]["maxLength"].clone()
        ),
        (json!(2), json!(5))
    );
    assert_eq!(p["requestId"]["format"], "uuid");
    assert_eq!(
        schema["required"],
        json!(["email", "deliver_on", "lines", "requestId"])
    );
}

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct OpenLine {
    sku: String,
}

/// Takes a nested type that forgot `deny_unknown_fields`.
#[tool]
fn leaky(
    /// The order lines.
    lines: Vec<OpenLine>,
) -> Result<usize, Rejection> {
    Ok(lines.len())
}

#[test]
fn an_open_nested_object_is_refused_when_the_registry_is_built() {
    let error = tools![get_order, leaky].unwrap_err();
    assert_eq!(
        error,
        RegistryError::OpenSchema {
            tool: "leaky",
            path: "/properties/lines/items".to_owned()
        }
    );
    assert!(
        error.to_string().contains("#[serde(deny_unknown_fields)]"),
        "{error}"
    );
}
