//! The export formats: golden files for each, a checker of each provider's
//! rules over the whole output, and agreement between the OpenAI-strict
//! schema, the original schema and the Rust validator.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;

use serde::{Deserialize, Serialize};

use serde_json::{Map, Value, json};

use toolcall::{Policy, Registry, Rejection, ToolSpec, tool};

use toolcall_providers::export::{self, Format, NotStrict};

// ------------------------------------------------------------------ the tools

/// A currency an order can be in.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema)]
pub enum Currency {
    /// Brazilian real.
    BRL,
    /// United States dollar.
    USD,
}

/// Why a refund is made.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    /// The goods arrived damaged.
    Damaged,
    /// The goods never arrived.
    NotDelivered,
}

/// How urgent a line is.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    High,
}

/// One line of a delivery.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Line {
    /// The product.
    pub sku: String,
    /// How many, at most 255.
    pub quantity: u8,
    /// Whether to wrap it as a gift.
    pub gift_wrap: Option<bool>,
    /// How urgent it is.
    pub priority: Option<Priority>,
}

/// Where a delivery goes.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Address {
    /// Street and number.
    pub street: String,
    /// The city.
    pub city: String,
    /// The postal code, if the country has them.
    pub postcode: Option<String>,
}

/// Read one order. No side effects.
#[tool]
pub fn get_order(
    /// Order id, for example ORD-1001.
    #[arg(pattern = "^ORD-[0-9]{4}$")]
    order_id: String,
) -> Result<Value, Rejection> {
    Ok(json!({ "order_id": order_id }))
}

/// Refund part or all of an order. Amount in cents.
#[tool(side_effect, high_risk)]
pub fn refund_order(
    /// Order id, for example ORD-1001.
    #[arg(pattern = "^ORD-[0-9]{4}$")]
    order_id: String,
    /// Refund amount in minor units (cents).
    #[arg(min = 1, limit = "max_refund_cents")]
    amount_cents: i64,
    /// Must match the order currency.
    currency: Currency,
    /// Why a refund is made.
    reason: RefundReason,
    /// A note for the customer.
    #[arg(min_length = 3, max_length = 200)]
    note: Option<String>,
) -> Result<Value, Rejection> {
    let _ = (order_id, amount_cents, currency, reason, note);
    Ok(json!({}))
}

/// Schedule a delivery of some lines to an address.
#[tool(side_effect)]
#[allow(clippy::too_many_arguments)]
pub fn schedule_delivery(
    /// Who to notify.
    #[arg(format = "email")]
    email: String,
    /// The delivery day.
    #[arg(format = "date")]
    deliver_on: String,
    /// Where the customer can follow the parcel.
    #[arg(format = "uri")]
    tracking_url: Option<String>,
    /// What to deliver.
    #[arg(min_items = 1, max_items = 3)]
    lines: Vec<Line>,
    /// Discount in percent, strictly between 0 and 100.
    #[arg(exclusive_min = 0, exclusive_max = 100)]
    discount: Option<f64>,
    /// The client's request id.
    #[arg(format = "uuid")]
    request_id: String,
    /// Where to deliver.
    address: Address,
    /// The currency to charge if the first one fails.
    backup_currency: Option<Currency>,
    /// How many delivery slots to book.
    #[arg(min = 1, max = 10)]
    slots: i32,
) -> Result<Value, Rejection> {
    let _ = (
        email,
        deliver_on,
        tracking_url,
        lines,
        discount,
        request_id,
        address,
        backup_currency,
        slots,
    );
    Ok(json!({}))
}

/// Set labels on the account, each with a weight.
#[tool(side_effect)]
pub fn set_labels(
    /// Label name to weight.
    labels: BTreeMap<String, u32>,
) -> Result<Value, Rejection> {
    Ok(json!({ "count": labels.len() }))
}

/// A filter over orders: a status, or the negation of a filter.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum Filter {
    /// Orders the inner filter does not match.
    Not {
        /// The negated filter.
        not: Box<Filter>,
    },
    /// Orders in one status.
    Status {
        /// The status, for example `paid`.
        status: String,
    },
}

/// Search orders. No side effects.
#[tool]
pub fn search_orders(
    /// Which orders.
    filter: Filter,
    /// How many orders at most.
    limit: u64,
    /// Only orders with a greater id.
    #[arg(min = 1, max = 10_000_000_000_000_000)]
    after_id: i64,
) -> Result<Value, Rejection> {
    let _ = (filter, limit, after_id);
    Ok(json!([]))
}

/// Options of a note; none yet.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteOptions {}

/// Attach free-form notes to the account.
#[tool(side_effect)]
pub fn annotate(
    /// The notes, any JSON values.
    notes: Vec<Value>,
    /// How to attach them.
    options: NoteOptions,
) -> Result<Value, Rejection> {
    let _ = options;
    Ok(json!({ "count": notes.len() }))
}

/// Check that the service answers.
#[tool]
pub fn ping() -> Result<Value, Rejection> {
    Ok(json!({ "pong": true }))
}

/// Close the account for good.
#[tool(side_effect, high_risk)]
pub fn close_account(
    /// The account to close.
    account_id: String,
) -> Result<Value, Rejection> {
    Ok(json!({ "closed": account_id }))
}

fn registry() -> Registry {
    toolcall::tools![
        get_order,
        refund_order,
        schedule_delivery,
        set_labels,
        search_orders,
        annotate,
        ping,
        close_account
    ]
    .expect("the test tools form a registry")
}

/// Everything but `close_account`.
fn policy() -> Policy {
    Policy::new().allow(EXPORTED)
}

const EXPORTED: [&str; 7] = [
    "get_order",
    "refund_order",
    "schedule_delivery",
    "set_labels",
    "search_orders",
    "annotate",
    "ping",
];

/// A `schedule_delivery` call as a strict model writes it: every optional
/// argument present, as `null`.
fn strict_delivery() -> Value {
    json!({
        "email": "ana@example.com",
        "deliver_on": "2026-12-01",
        "tracking_url": null,
        "lines": [{"sku": "A-1", "quantity": 2, "gift_wrap": null, "priority": null}],
        "discount": null,
        "request_id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "address": {"street": "Rua A, 1", "city": "Recife", "postcode": null},
        "backup_currency": null,
        "slots": 2
    })
}

/// The member names of a JSON object.
fn keys_of(object: &Value) -> BTreeSet<&str> {
    object
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn spec(name: &str) -> &'static ToolSpec {
    registry().get(name).expect("a test tool")
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("JSON prints")
}

// --------------------------------------------------------------- golden files

#[test]
fn golden_files() {
    let registry = registry();
    for format in Format::ALL {
        let tools = export::definitions(&registry, &policy(), format);
        insta::assert_snapshot!(format.name(), pretty(&tools));
    }
}

// ---------------------------------------------------------- agreement (OpenAI)

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("a valid draft 2020-12 schema")
}

/// Every constraint keyword of `original` that the provider's schema no
/// longer has at the same place is stated in that place's description. The
/// formats of numbers are the exception: the range they name is still in
/// `minimum` and `maximum`.
fn check_moved_constraints(original: &Value, exported: &Value, path: &str) {
    const CONSTRAINTS: [&str; 10] = [
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    ];
    let description = exported
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_lowercase();
    let is_number = ["integer", "number"]
        .iter()
        .any(|t| types_of(original).contains(t));
    for keyword in CONSTRAINTS {
        let Some(value) = original.get(keyword) else {
            continue;
        };
        if exported.get(keyword) == Some(value) {
            continue;
        }
        if keyword == "format" && is_number {
            continue;
        }
        if keyword.ends_with("imum") && is_64_bit_limit(value) {
            // The natural range of a 64-bit integer, dropped without a word.
            continue;
        }
        let text = match value {
            Value::String(s) => s.to_lowercase(),
            other => other.to_string(),
        };
        assert!(
            description.contains(&text),
            "{path}: `{keyword}: {value}` was dropped but the description does not say it: {description:?}"
        );
        assert!(
            description.contains("must"),
            "{path}: the description states the rule"
        );
    }
    if let (Some(Value::Object(before)), Some(Value::Object(after))) =
        (original.get("properties"), exported.get("properties"))
    {
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "{path}: same properties, same order"
        );
        for (name, property) in before {
            check_moved_constraints(property, &after[name], &format!("{path}/{name}"));
        }
    }
    if let (Some(before), Some(after)) = (original.get("items"), exported.get("items")) {
        check_moved_constraints(before, after, &format!("{path}/items"));
    }
}

/// Asserts that no number anywhere in `value` exceeds ±(2^53 − 1).
fn check_safe_numbers(value: &Value, path: &str) {
    match value {
        Value::Number(n) => {
            let big = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => u > MAX_SAFE_INTEGER as u64,
                (None, Some(i)) => i.unsigned_abs() > MAX_SAFE_INTEGER as u64,
                _ => n.as_f64().unwrap().abs() > MAX_SAFE_INTEGER,
            };
            assert!(!big, "{path}: {n} is too large for a provider");
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_safe_numbers(item, &format!("{path}/{i}"));
            }
        }
        Value::Object(members) => {
            for (name, member) in members {
                check_safe_numbers(member, &format!("{path}/{name}"));
            }
        }
        _ => {}
    }
}

/// 2^53 − 1: OpenAI and Anthropic refuse a schema holding a greater number.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Whether `n` is an end of a 64-bit integer type's range, which the
/// provider formats drop without a word.
fn is_64_bit_limit(n: &Value) -> bool {
    matches!(n.as_i64(), Some(i64::MIN | i64::MAX)) || n.as_u64() == Some(u64::MAX)
}

fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

mod agreement;
mod formats;
mod gemini;
mod openai;
