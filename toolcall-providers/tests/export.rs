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
        ping,
        close_account
    ]
    .expect("the test tools form a registry")
}

/// Everything but `close_account`.
fn policy() -> Policy {
    Policy::new().allow([
        "ping",
        "get_order",
        "refund_order",
        "schedule_delivery",
        "set_labels",
    ])
}

const EXPORTED: [&str; 5] = [
    "get_order",
    "refund_order",
    "schedule_delivery",
    "set_labels",
    "ping",
];

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

// -------------------------------------------------------- shape and filtering

/// The names of the exported tools, whatever the format nests them in.
fn names(format: Format, tools: &Value) -> Vec<String> {
    let list = match format {
        Format::Gemini => &tools[0]["functionDeclarations"],
        _ => tools,
    };
    list.as_array()
        .expect("a list of tools")
        .iter()
        .map(|tool| {
            let name = match format {
                Format::OpenAi => &tool["function"]["name"],
                _ => &tool["name"],
            };
            name.as_str().expect("a name").to_owned()
        })
        .collect()
}

#[test]
fn every_format_lists_the_allowed_tools_in_registration_order() {
    let registry = registry();
    for format in Format::ALL {
        let tools = export::definitions(&registry, &policy(), format);
        assert_eq!(names(format, &tools), EXPORTED, "{format}");
    }
}

#[test]
fn nothing_allowed_is_an_empty_list_in_every_format() {
    for format in Format::ALL {
        assert_eq!(
            export::definitions(&registry(), &Policy::new(), format),
            json!([]),
            "{format}"
        );
    }
}

#[test]
fn neutral_is_the_registry_definitions() {
    let tools = export::definitions(&registry(), &policy(), Format::Neutral);
    assert_eq!(tools, Value::Array(registry().definitions(&policy())));
}

#[test]
fn format_names_round_trip() {
    for format in Format::ALL {
        assert_eq!(format.name().parse::<Format>(), Ok(format));
        assert_eq!(format.to_string(), format.name());
    }
    let error = "claude".parse::<Format>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown format `claude`; expected one of neutral, openai, openai-responses, anthropic, gemini, mcp"
    );
}

// --------------------------------------------------- OpenAI strict-mode rules

/// From OpenAI's Structured Outputs guide, "Supported schemas".
const OPENAI_KEYWORDS: [&str; 19] = [
    "type",
    "description",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];
const OPENAI_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
const JSON_TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];

fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Asserts OpenAI's strict-mode rules over `schema` and everything under it.
fn check_openai_strict(schema: &Value, path: &str) {
    let map = schema
        .as_object()
        .unwrap_or_else(|| panic!("{path}: a schema object"));
    for keyword in map.keys() {
        assert!(
            OPENAI_KEYWORDS.contains(&keyword.as_str()),
            "{path}: `{keyword}` is not a strict-mode keyword"
        );
    }
    assert!(
        ["type", "enum", "anyOf", "$ref"]
            .iter()
            .any(|k| map.contains_key(*k)),
        "{path}: every schema says what it is"
    );
    for t in types_of(schema) {
        assert!(JSON_TYPES.contains(&t), "{path}: type {t}");
    }
    if let Some(format) = map.get("format") {
        assert_eq!(
            types_of(schema).first(),
            Some(&"string"),
            "{path}: format on a string"
        );
        assert!(
            OPENAI_FORMATS.contains(&format.as_str().unwrap()),
            "{path}: format {format} is not supported"
        );
    }
    if let Some(Value::Array(values)) = map.get("enum")
        && values.iter().any(Value::is_null)
    {
        assert!(
            types_of(schema).contains(&"null"),
            "{path}: null enum value needs null type"
        );
    }
    if types_of(schema).contains(&"object") || map.contains_key("properties") {
        assert_eq!(
            map.get("additionalProperties"),
            Some(&Value::Bool(false)),
            "{path}: every object is closed"
        );
        let properties: BTreeSet<&str> = map["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{path}: properties"))
            .keys()
            .map(String::as_str)
            .collect();
        let required: BTreeSet<&str> = map["required"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: required"))
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert_eq!(required, properties, "{path}: every property is required");
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        for (name, property) in properties {
            check_openai_strict(property, &format!("{path}/properties/{name}"));
        }
    }
    if let Some(Value::Object(defs)) = map.get("$defs") {
        for (name, def) in defs {
            check_openai_strict(def, &format!("{path}/$defs/{name}"));
        }
    }
    if let Some(items) = map.get("items") {
        check_openai_strict(items, &format!("{path}/items"));
    }
    if let Some(Value::Array(branches)) = map.get("anyOf") {
        for (i, branch) in branches.iter().enumerate() {
            check_openai_strict(branch, &format!("{path}/anyOf/{i}"));
        }
    }
}

/// Asserts OpenAI's rules over one exported tool, for Chat Completions
/// (`nested`) or Responses.
fn check_openai_tool(tool: &Value, nested: bool) {
    assert_eq!(tool["type"], "function");
    let function = if nested {
        let keys: BTreeSet<&str> = tool
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, BTreeSet::from(["type", "function"]));
        &tool["function"]
    } else {
        tool
    };
    let mut expected = BTreeSet::from(["name", "description", "parameters", "strict"]);
    if !nested {
        expected.insert("type");
    }
    let keys: BTreeSet<&str> = function
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, expected);
    let name = function["name"].as_str().unwrap();
    assert!(
        name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
        "{name}: OpenAI's name rule"
    );
    let parameters = &function["parameters"];
    let original = spec(name).parameters_schema();
    match function["strict"] {
        Value::Bool(true) => {
            assert_eq!(
                parameters["type"], "object",
                "{name}: the root is an object"
            );
            assert!(
                parameters.get("anyOf").is_none(),
                "{name}: the root is no anyOf"
            );
            check_openai_strict(parameters, name);
            check_moved_constraints(&original, parameters, name);
        }
        Value::Bool(false) => {
            assert_eq!(name, "set_labels", "only the map tool has no strict form");
            assert_eq!(
                parameters, &original,
                "{name}: without strict, the schema as it is"
            );
        }
        ref other => panic!("{name}: strict is {other}"),
    }
}

#[test]
fn openai_chat_follows_strict_mode_rules() {
    let tools = export::definitions(&registry(), &policy(), Format::OpenAi);
    for tool in tools.as_array().unwrap() {
        check_openai_tool(tool, true);
    }
}

#[test]
fn openai_responses_follows_strict_mode_rules() {
    let tools = export::definitions(&registry(), &policy(), Format::OpenAiResponses);
    for tool in tools.as_array().unwrap() {
        check_openai_tool(tool, false);
    }
    // Both APIs get the same function.
    let chat = export::definitions(&registry(), &policy(), Format::OpenAi);
    for (chat, responses) in chat
        .as_array()
        .unwrap()
        .iter()
        .zip(tools.as_array().unwrap())
    {
        for key in ["name", "description", "parameters", "strict"] {
            assert_eq!(chat["function"][key], responses[key]);
        }
    }
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

#[test]
fn openai_states_what_strict_mode_cannot_express() {
    let strict = export::openai_strict_schema(&spec("refund_order").parameters_schema()).unwrap();
    let note = &strict["properties"]["note"];
    assert_eq!(note["type"], json!(["string", "null"]));
    assert!(note.get("minLength").is_none() && note.get("maxLength").is_none());
    assert_eq!(
        note["description"],
        "A note for the customer. Must have at least 3 characters. Must have at most 200 characters."
    );
    // The enum's value docs move into the description; the field's wins.
    assert_eq!(
        strict["properties"]["currency"],
        json!({
            "type": "string",
            "enum": ["BRL", "USD"],
            "description": "Must match the order currency. BRL: Brazilian real. USD: United States dollar."
        })
    );
    // The pattern is supported, and kept.
    assert_eq!(
        strict["properties"]["order_id"]["pattern"],
        "^ORD-[0-9]{4}$"
    );

    let strict =
        export::openai_strict_schema(&spec("schedule_delivery").parameters_schema()).unwrap();
    let url = &strict["properties"]["tracking_url"];
    assert!(url.get("format").is_none(), "uri is not on OpenAI's list");
    assert_eq!(
        url["description"],
        "Where the customer can follow the parcel. Must be an absolute URI (RFC 3986)."
    );
    assert_eq!(strict["properties"]["email"]["format"], "email");
    // An optional enum: nullable, its type's doc replaced by the field's.
    assert_eq!(
        strict["properties"]["backup_currency"],
        json!({
            "type": ["string", "null"],
            "enum": ["BRL", "USD", null],
            "description": "The currency to charge if the first one fails. BRL: Brazilian real. USD: United States dollar."
        })
    );
}

#[test]
fn openai_refuses_what_has_no_faithful_strict_form() {
    // A map.
    let error = export::openai_strict_schema(&spec("set_labels").parameters_schema()).unwrap_err();
    assert_eq!(error.path, "/properties/labels");
    assert!(error.reason.contains("map"), "{error}");

    // A nested member with a default: `null` would not be read as absent.
    let with_default = json!({
        "type": "object",
        "properties": {
            "page": {
                "type": "object",
                "properties": {"size": {"type": "integer", "default": 10}},
                "additionalProperties": false
            }
        },
        "required": ["page"],
        "additionalProperties": false
    });
    let error = export::openai_strict_schema(&with_default).unwrap_err();
    assert_eq!(
        error,
        NotStrict {
            path: "/properties/page/properties/size".into(),
            reason: "an optional member that cannot be null (a default) has no strict form".into(),
        }
    );

    // A union that is not an enum.
    let union = json!({
        "type": "object",
        "properties": {"id": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        "required": ["id"],
        "additionalProperties": false
    });
    let error = export::openai_strict_schema(&union).unwrap_err();
    assert_eq!(error.path, "/properties/id/oneOf");

    // A value of any type.
    let any = json!({
        "type": "object",
        "properties": {"payload": {"description": "Anything."}},
        "required": ["payload"],
        "additionalProperties": false
    });
    assert_eq!(
        export::openai_strict_schema(&any).unwrap_err().path,
        "/properties/payload"
    );

    // Deeper than OpenAI's nesting limit.
    let mut deep = json!({"type": "string"});
    for _ in 0..export::OPENAI_MAX_DEPTH {
        deep = json!({
            "type": "object",
            "properties": {"inner": deep},
            "required": ["inner"],
            "additionalProperties": false
        });
    }
    assert!(export::openai_strict_schema(&deep).is_ok(), "at the limit");
    let deeper = json!({
        "type": "object",
        "properties": {"inner": deep},
        "required": ["inner"],
        "additionalProperties": false
    });
    assert!(export::openai_strict_schema(&deeper).is_err(), "one over");
}

// ---------------------------------------------------------- agreement (OpenAI)

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("a valid draft 2020-12 schema")
}

/// What the strict schema is expected to say about a case.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The same as the Rust validator.
    Same,
    /// Accepts it although the validator does not, because the keyword
    /// (second) of the property (first) moved into its description.
    Relaxed(&'static str, &'static str),
}

fn with(base: &Value, pointer: &str, value: Value) -> Value {
    let mut out = base.clone();
    *out.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = value;
    out
}

fn with_member(base: &Value, pointer: &str, name: &str, value: Value) -> Value {
    let mut out = base.clone();
    out.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("{pointer}"))
        .insert(name.into(), value);
    out
}

fn without(base: &Value, pointer: &str, name: &str) -> Value {
    let mut out = base.clone();
    out.pointer_mut(pointer)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("{pointer}"))
        .remove(name);
    out
}

/// Argument objects as a strict model sends them (every member present),
/// valid and invalid, with what the strict schema should say of each.
fn cases() -> Vec<(&'static str, Value, Expect)> {
    use Expect::{Relaxed, Same};
    let order = json!({"order_id": "ORD-1001"});
    let refund = json!({
        "order_id": "ORD-1001",
        "amount_cents": 2590,
        "currency": "BRL",
        "reason": "damaged",
        "note": null
    });
    let delivery = json!({
        "email": "ana@example.com",
        "deliver_on": "2026-12-01",
        "tracking_url": null,
        "lines": [{"sku": "A-1", "quantity": 2, "gift_wrap": null, "priority": null}],
        "discount": null,
        "request_id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "address": {"street": "Rua A, 1", "city": "Recife", "postcode": null},
        "backup_currency": null,
        "slots": 2
    });
    let full = json!({
        "email": "ana@example.com",
        "deliver_on": "2024-02-29",
        "tracking_url": "https://example.com/track/1",
        "lines": [
            {"sku": "A-1", "quantity": 255, "gift_wrap": true, "priority": "high"},
            {"sku": "B-2", "quantity": 0, "gift_wrap": false, "priority": "low"}
        ],
        "discount": 12.5,
        "request_id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "address": {"street": "Rua A, 1", "city": "Recife", "postcode": "50000-000"},
        "backup_currency": "USD",
        "slots": 10
    });
    let line = delivery["lines"][0].clone();
    vec![
        ("get_order", order.clone(), Same),
        (
            "get_order",
            with(&order, "/order_id", json!("ORD-12")),
            Same,
        ),
        ("get_order", with(&order, "/order_id", json!(1001)), Same),
        ("get_order", json!({}), Same),
        (
            "get_order",
            with_member(&order, "", "force", json!(true)),
            Same,
        ),
        ("refund_order", refund.clone(), Same),
        (
            "refund_order",
            with(&refund, "/note", json!("Box crushed")),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/note", json!("ok")),
            Relaxed("note", "minLength"),
        ),
        (
            "refund_order",
            with(&refund, "/note", json!("x".repeat(201))),
            Relaxed("note", "maxLength"),
        ),
        (
            "refund_order",
            with(&refund, "/note", json!("x".repeat(200))),
            Same,
        ),
        ("refund_order", with(&refund, "/note", json!(7)), Same),
        (
            "refund_order",
            with(&refund, "/amount_cents", json!(0)),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/amount_cents", json!(25.9)),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/amount_cents", json!("2590")),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/currency", json!("EUR")),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/currency", json!(null)),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/reason", json!("not_delivered")),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/reason", json!("NotDelivered")),
            Same,
        ),
        (
            "refund_order",
            with(&refund, "/order_id", json!("ord-1001")),
            Same,
        ),
        ("refund_order", without(&refund, "", "amount_cents"), Same),
        ("schedule_delivery", delivery.clone(), Same),
        ("schedule_delivery", full.clone(), Same),
        (
            "schedule_delivery",
            with(&delivery, "/email", json!("no-at-sign")),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/email", json!(null)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/deliver_on", json!("2026-13-01")),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/request_id", json!("123")),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/tracking_url", json!("not a uri")),
            Relaxed("tracking_url", "format"),
        ),
        (
            "schedule_delivery",
            with(&delivery, "/tracking_url", json!("/relative")),
            Relaxed("tracking_url", "format"),
        ),
        (
            "schedule_delivery",
            with(&delivery, "/lines", json!([])),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/lines", json!([line, line, line, line])),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/lines/0/quantity", json!(256)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/lines/0/quantity", json!(-1)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/lines/0/priority", json!("urgent")),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/lines/0/gift_wrap", json!("yes")),
            Same,
        ),
        (
            "schedule_delivery",
            with_member(&delivery, "/lines/0", "colour", json!("red")),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/discount", json!(0)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/discount", json!(100)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/discount", json!(99.5)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/backup_currency", json!("EUR")),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/address/city", json!(null)),
            Same,
        ),
        (
            "schedule_delivery",
            without(&delivery, "/address", "city"),
            Same,
        ),
        (
            "schedule_delivery",
            with_member(&delivery, "/address", "zip", json!("1")),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/slots", json!(11)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/slots", json!(0)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/slots", json!(2.5)),
            Same,
        ),
        (
            "schedule_delivery",
            with(&delivery, "/slots", json!(3_000_000_000_i64)),
            Same,
        ),
        (
            "schedule_delivery",
            with_member(&delivery, "", "priority", json!("high")),
            Same,
        ),
        ("schedule_delivery", json!([]), Same),
    ]
}

#[test]
fn strict_schema_original_schema_and_validator_agree() {
    let mut relaxed = 0;
    for (i, (tool, arguments, expect)) in cases().into_iter().enumerate() {
        let spec = spec(tool);
        let original = spec.parameters_schema();
        let strict = export::openai_strict_schema(&original).expect("a strict form");
        let rust = spec.validate_arguments(&arguments).is_ok();
        let by_original = validator(&original).is_valid(&arguments);
        let by_strict = validator(&strict).is_valid(&arguments);
        let label = format!("case {i} ({tool}): {arguments}");
        assert_eq!(by_original, rust, "original schema vs validator, {label}");
        match expect {
            Expect::Same => assert_eq!(by_strict, rust, "strict schema vs validator, {label}"),
            Expect::Relaxed(property, keyword) => {
                relaxed += 1;
                assert!(!rust, "the validator refuses it, {label}");
                assert!(by_strict, "the strict schema lets it through, {label}");
                // Because `keyword` left the schema for the description ...
                let value = &original["properties"][property][keyword];
                assert!(!value.is_null(), "{label}");
                assert!(strict["properties"][property].get(keyword).is_none());
                let description = strict["properties"][property]["description"]
                    .as_str()
                    .unwrap()
                    .to_lowercase();
                let stated = match value {
                    Value::String(s) => s.to_lowercase(),
                    other => other.to_string(),
                };
                assert!(description.contains(&stated), "{label}: {description}");
                // ... and for no other reason: without it, the original agrees.
                let mut loosened = original.clone();
                loosened["properties"][property]
                    .as_object_mut()
                    .unwrap()
                    .remove(keyword);
                assert!(validator(&loosened).is_valid(&arguments), "{label}");
            }
        }
    }
    assert_eq!(relaxed, 4, "every relaxed case ran");
}

/// Optional arguments a strict model sends as `null` are read as absent by
/// the validator, so "required and nullable" is faithful; the strict schema
/// only insists that the model writes them out.
#[test]
fn null_is_absent_for_the_validator_and_required_for_strict_mode() {
    let mut checked = 0;
    for (tool, arguments, expect) in cases() {
        let Value::Object(members) = &arguments else {
            continue;
        };
        let spec = spec(tool);
        let original = spec.parameters_schema();
        let strict = export::openai_strict_schema(&original).unwrap();
        let optional: Vec<&String> = members
            .keys()
            .filter(|name| {
                !original["required"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(name.as_str()))
            })
            .collect();
        for name in optional {
            let omitted = without(&arguments, "", name);
            let rust = spec.validate_arguments(&arguments).is_ok();
            if members[name].is_null() {
                assert_eq!(
                    spec.validate_arguments(&omitted).is_ok(),
                    rust,
                    "{tool}: `{name}: null` is read as absent"
                );
                assert_eq!(
                    validator(&original).is_valid(&omitted),
                    validator(&original).is_valid(&arguments),
                    "{tool}: the original schema agrees"
                );
                checked += 1;
            }
            if matches!(expect, Expect::Same) && rust {
                assert!(
                    !validator(&strict).is_valid(&omitted),
                    "{tool}: strict mode wants `{name}` written out"
                );
            }
        }
    }
    assert!(checked >= 20, "only {checked} null members checked");
}

#[test]
fn a_tool_without_strict_form_keeps_its_schema_and_agrees() {
    let spec = spec("set_labels");
    let tools = export::definitions(
        &registry(),
        &Policy::new().allow(["set_labels"]),
        Format::OpenAi,
    );
    assert_eq!(tools[0]["function"]["strict"], false);
    let parameters = &tools[0]["function"]["parameters"];
    assert_eq!(parameters, &spec.parameters_schema());
    for (arguments, valid) in [
        (json!({"labels": {}}), true),
        (json!({"labels": {"vip": 3, "late payer": 0}}), true),
        (json!({"labels": {"vip": -1}}), false),
        (json!({"labels": {"vip": "3"}}), false),
        (json!({"labels": null}), false),
        (json!({}), false),
    ] {
        assert_eq!(
            spec.validate_arguments(&arguments).is_ok(),
            valid,
            "{arguments}"
        );
        assert_eq!(
            validator(parameters).is_valid(&arguments),
            valid,
            "{arguments}"
        );
    }
}

// -------------------------------------------------------------- Gemini rules

/// The fields of Gemini's `Schema` (the OpenAPI 3.0 subset).
const GEMINI_KEYWORDS: [&str; 22] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];
const GEMINI_TYPES: [&str; 6] = ["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"];

/// Asserts that `schema` and everything under it stay inside Gemini's `Schema`.
fn check_gemini_schema(schema: &Value, path: &str) {
    let map = schema
        .as_object()
        .unwrap_or_else(|| panic!("{path}: a schema object"));
    for keyword in map.keys() {
        assert!(
            GEMINI_KEYWORDS.contains(&keyword.as_str()),
            "{path}: `{keyword}` is not a field of Gemini's Schema"
        );
    }
    let ty = map
        .get("type")
        .map(|t| t.as_str().expect("one type, a string"));
    if let Some(ty) = ty {
        assert!(GEMINI_TYPES.contains(&ty), "{path}: type {ty}");
    }
    if let Some(nullable) = map.get("nullable") {
        assert!(nullable.is_boolean(), "{path}: nullable");
    }
    if let Some(format) = map.get("format") {
        let allowed: &[&str] = match ty {
            Some("STRING") => &["enum", "date-time"],
            Some("INTEGER") => &["int32", "int64"],
            Some("NUMBER") => &["float", "double"],
            _ => &[],
        };
        assert!(
            allowed.contains(&format.as_str().unwrap()),
            "{path}: format {format} on {ty:?}"
        );
    }
    if let Some(values) = map.get("enum") {
        assert_eq!(ty, Some("STRING"), "{path}: enums are strings");
        assert_eq!(
            map.get("format"),
            Some(&json!("enum")),
            "{path}: format enum"
        );
        assert!(values.as_array().unwrap().iter().all(Value::is_string));
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        assert_eq!(ty, Some("OBJECT"), "{path}");
        let order: Vec<&str> = map["propertyOrdering"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert_eq!(
            order,
            properties.keys().map(String::as_str).collect::<Vec<_>>(),
            "{path}: propertyOrdering lists the properties"
        );
        for name in map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            assert!(
                properties.contains_key(name.as_str().unwrap()),
                "{path}: required {name}"
            );
        }
        for (name, property) in properties {
            check_gemini_schema(property, &format!("{path}/properties/{name}"));
        }
    }
    if let Some(items) = map.get("items") {
        assert_eq!(ty, Some("ARRAY"), "{path}");
        check_gemini_schema(items, &format!("{path}/items"));
    }
    if let Some(Value::Array(branches)) = map.get("anyOf") {
        for (i, branch) in branches.iter().enumerate() {
            check_gemini_schema(branch, &format!("{path}/anyOf/{i}"));
        }
    }
}

#[test]
fn gemini_follows_its_schema_subset() {
    let tools = export::definitions(&registry(), &policy(), Format::Gemini);
    let tools = tools.as_array().unwrap();
    assert_eq!(tools.len(), 1, "one Tool holds every declaration");
    let keys: Vec<&String> = tools[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["functionDeclarations"]);
    for declaration in tools[0]["functionDeclarations"].as_array().unwrap() {
        let name = declaration["name"].as_str().unwrap();
        for key in declaration.as_object().unwrap().keys() {
            assert!(
                ["name", "description", "parameters"].contains(&key.as_str()),
                "{name}: {key}"
            );
        }
        assert!(declaration["description"].is_string());
        let original = spec(name).parameters_schema();
        if original["properties"].as_object().unwrap().is_empty() {
            assert!(
                declaration.get("parameters").is_none(),
                "{name}: no empty OBJECT"
            );
            continue;
        }
        let parameters = &declaration["parameters"];
        assert_eq!(parameters["type"], "OBJECT", "{name}");
        check_gemini_schema(parameters, name);
        check_moved_constraints(&original, parameters, name);
        assert_eq!(
            parameters["required"], original["required"],
            "{name}: Gemini knows optional parameters"
        );
    }
}

#[test]
fn gemini_states_what_its_subset_cannot_express() {
    let schema = export::gemini_schema(&spec("schedule_delivery").parameters_schema());
    let properties = &schema["properties"];
    assert_eq!(
        properties["discount"],
        json!({
            "type": "NUMBER",
            "format": "double",
            "nullable": true,
            "description": "Discount in percent, strictly between 0 and 100. Must be greater than 0. Must be less than 100."
        })
    );
    assert_eq!(
        properties["email"],
        json!({"type": "STRING", "description": "Who to notify. Must be an email address."})
    );
    assert_eq!(
        properties["backup_currency"],
        json!({
            "type": "STRING",
            "format": "enum",
            "enum": ["BRL", "USD"],
            "nullable": true,
            "description": "The currency to charge if the first one fails. BRL: Brazilian real. USD: United States dollar."
        })
    );
    let quantity = &properties["lines"]["items"]["properties"]["quantity"];
    assert_eq!(
        (&quantity["minimum"], &quantity["maximum"]),
        (&json!(0), &json!(255))
    );
    assert!(
        quantity.get("format").is_none(),
        "uint8 is not a Gemini format"
    );
    assert_eq!(properties["slots"]["format"], "int32");

    let labels = export::gemini_schema(&spec("set_labels").parameters_schema());
    assert_eq!(
        labels["properties"]["labels"]["description"],
        "Label name to weight. An object with any member names; every member's value is \
         {\"type\":\"INTEGER\",\"minimum\":0,\"maximum\":4294967295}."
    );
}

// ---------------------------------------------------- Anthropic, MCP, neutral

#[test]
fn anthropic_takes_the_schema_as_it_is() {
    let tools = export::definitions(&registry(), &policy(), Format::Anthropic);
    for tool in tools.as_array().unwrap() {
        let keys: BTreeSet<&str> = tool
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["name", "description", "input_schema"])
        );
        let spec = spec(tool["name"].as_str().unwrap());
        assert_eq!(tool["description"], spec.description());
        assert_eq!(tool["input_schema"], spec.parameters_schema());
        assert_eq!(tool["input_schema"]["type"], "object");
    }
}

#[test]
fn mcp_annotations_follow_the_flags() {
    let tools = export::definitions(&registry(), &policy(), Format::Mcp);
    let by_name: Map<String, Value> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| (tool["name"].as_str().unwrap().to_owned(), tool.clone()))
        .collect();
    for tool in by_name.values() {
        let keys: BTreeSet<&str> = tool
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["name", "description", "inputSchema", "annotations"])
        );
        assert_eq!(tool["inputSchema"]["type"], "object");
    }
    let hints = |name: &str| {
        let a = &by_name[name]["annotations"];
        (
            a["readOnlyHint"].as_bool().unwrap(),
            a["destructiveHint"].as_bool().unwrap(),
            a["openWorldHint"].as_bool().unwrap(),
        )
    };
    assert_eq!(hints("get_order"), (true, false, false));
    assert_eq!(hints("refund_order"), (false, true, true));
    assert_eq!(hints("schedule_delivery"), (false, false, true));
    assert_eq!(hints("ping"), (true, false, false));
}

/// The tools really run as exported: a call a strict model would make
/// (every optional argument written out as `null`) passes the dispatcher.
#[tokio::test]
async fn a_strict_call_passes_the_dispatcher() {
    let dispatcher = toolcall::Dispatcher::builder(registry(), std::sync::Arc::new(()))
        .build()
        .expect("a dispatcher without state");
    let caller = toolcall::Caller::new("agent", policy());
    let arguments = json!({
        "email": "ana@example.com",
        "deliver_on": "2026-12-01",
        "tracking_url": null,
        "lines": [{"sku": "A-1", "quantity": 2, "gift_wrap": null, "priority": null}],
        "discount": null,
        "request_id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "address": {"street": "Rua A, 1", "city": "Recife", "postcode": null},
        "backup_currency": null,
        "slots": 2
    });
    let strict =
        export::openai_strict_schema(&spec("schedule_delivery").parameters_schema()).unwrap();
    assert!(validator(&strict).is_valid(&arguments));
    let text = arguments.to_string();
    let result = dispatcher
        .execute(toolcall::Call::new("schedule_delivery", text.as_str()).caller(&caller))
        .await;
    assert!(result.ok, "{result:?}");
}
