//! What `#[tool]` generates: the function as written, the strict argument
//! struct, its schema from the same declaration as the validator, the spec,
//! and the registry entry.

use std::sync::Arc;

use orders::{Currency, RefundOrderArgs, RefundReason, Shop, get_order, refund_order};
use serde_json::json;
use toolcall::{
    BuildError, Call, Caller, Ctx, Dispatcher, Policy, Registry, RegistryError, Rejection, Tool,
    ToolArgs, tool, tools,
};

#[test]
fn the_function_stays_callable_as_written() {
    let shop = Arc::new(Shop::new());
    let ctx = Ctx::new(
        Arc::clone(&shop),
        "key-1",
        "s",
        Caller::new("me", Policy::new()),
    );
    let order = get_order(&ctx, "ORD-1002".to_owned()).unwrap();
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
                    "pattern": "^ORD-\\d{4}$"
                },
                "amount_cents": {
                    "type": "integer",
                    "format": "int64",
                    "description": "Refund amount in minor units (cents). 25.90 is 2590.",
                    "minimum": 1
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
        .execute(Call::new("dictionary-lookup", r#"{"word": "tool"}"#))
        .await;
    assert_eq!(ok.data["senses"], 1, "{ok:?}");
    let bad = d
        .execute(Call::new(
            "dictionary-lookup",
            r#"{"word": "tool", "senses": 6}"#,
        ))
        .await;
    assert_eq!(
        bad.message,
        "senses: 6 is greater than the maximum 5 (How many senses, at most.)"
    );
    let bad = d
        .execute(Call::new(
            "dictionary-lookup",
            r#"{"word": "tool", "senses": 0}"#,
        ))
        .await;
    assert_eq!(
        bad.message,
        "senses: 0 is less than the minimum 1 (How many senses, at most.)"
    );
}

#[test]
fn collect_finds_every_tool_linked_into_the_program() {
    let registry = Registry::collect().unwrap();
    let names: Vec<&str> = registry.iter().map(|s| s.name()).collect();
    for name in ["dictionary-lookup", "get_order", "refund_order", "shout"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

/// Says it louder.
#[tool]
fn shout(text: String) -> Result<String, Rejection> {
    Ok(text.to_uppercase())
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
    let error = Dispatcher::builder(tools![get_order].unwrap(), Arc::new(42_u32))
        .build()
        .unwrap_err();
    assert_eq!(
        error,
        BuildError::StateMismatch {
            tool: "get_order",
            expected: "orders::Shop",
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
