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
    Policy::new().allow([
        "ping",
        "get_order",
        "refund_order",
        "schedule_delivery",
        "set_labels",
        "search_orders",
        "annotate",
    ])
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

/// 2^53 − 1: OpenAI and Anthropic refuse a schema holding a greater number.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

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
    if map.contains_key("$ref") {
        assert_eq!(
            map.len(),
            1,
            "{path}: `$ref` cannot have keywords beside it"
        );
        let reference = map["$ref"].as_str().unwrap();
        assert!(reference.starts_with("#/$defs/"), "{path}: {reference}");
    }
    check_safe_numbers(schema, path);
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
            assert!(
                ["set_labels", "annotate"].contains(&name),
                "{name}: only the map and any-value tools have no strict form"
            );
            assert_eq!(
                parameters,
                &export::json_safe_bounds(&original),
                "{name}: without strict, the schema as it is but for the bounds"
            );
            check_safe_numbers(parameters, name);
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
fn openai_puts_nothing_beside_a_ref() {
    let strict = export::openai_strict_schema(&spec("search_orders").parameters_schema()).unwrap();
    // The documented field of the recursive type: the definition inlined
    // with the field's description ...
    let not = &strict["properties"]["filter"]["anyOf"][0]["properties"]["not"];
    assert!(not.get("$ref").is_none());
    assert_eq!(not["description"], "The negated filter.");
    assert_eq!(not["anyOf"][1]["properties"]["status"]["type"], "string");
    // ... and inside the definition, where inlining would not end, the
    // reference alone.
    assert_eq!(
        not["anyOf"][0]["properties"]["not"],
        json!({"$ref": "#/$defs/Filter"})
    );
    assert_eq!(
        strict["$defs"]["Filter"]["anyOf"][0]["properties"]["not"],
        json!({"$ref": "#/$defs/Filter"})
    );
    assert_eq!(
        strict["$defs"]["Filter"]["description"],
        "A filter over orders: a status, or the negation of a filter."
    );
    // The bounds, as everywhere.
    assert!(strict["properties"]["limit"].get("maximum").is_none());
    assert_eq!(
        strict["properties"]["after_id"]["description"],
        "Only orders with a greater id. Must be at most 10000000000000000."
    );

    // `definitions` is not a strict-mode keyword: its members join `$defs`.
    let old_style = json!({
        "type": "object",
        "properties": {
            "tag": {"$ref": "#/definitions/Tag", "description": "The tag."},
            "tags": {"type": "array", "items": {"$ref": "#/definitions/Tag"}}
        },
        "required": ["tag", "tags"],
        "additionalProperties": false,
        "definitions": {"Tag": {"type": "string", "description": "A tag.", "title": "Tag"}}
    });
    let strict = export::openai_strict_schema(&old_style).unwrap();
    check_openai_strict(&strict, "old_style");
    assert!(strict.get("definitions").is_none());
    assert_eq!(
        strict["$defs"]["Tag"],
        json!({"type": "string", "description": "A tag."})
    );
    assert_eq!(
        strict["properties"]["tag"],
        json!({"type": "string", "description": "The tag."})
    );
    assert_eq!(
        strict["properties"]["tags"]["items"],
        json!({"$ref": "#/$defs/Tag"})
    );

    // A constraint beside a `$ref`, or a reference to nothing: no strict form.
    let mut constrained = old_style.clone();
    constrained["properties"]["tag"]["minLength"] = json!(2);
    assert_eq!(
        export::openai_strict_schema(&constrained).unwrap_err().path,
        "/properties/tag/minLength"
    );
    let mut dangling = old_style;
    dangling["properties"]["tag"]["$ref"] = json!("#/definitions/Missing");
    assert_eq!(
        export::openai_strict_schema(&dangling).unwrap_err().path,
        "/properties/tag/$ref"
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
    let search = json!({
        "filter": {"not": {"status": "cancelled"}},
        "limit": 20,
        "after_id": 1
    });
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
        ("search_orders", search.clone(), Same),
        (
            "search_orders",
            with(
                &search,
                "/filter",
                json!({"not": {"not": {"status": "paid"}}}),
            ),
            Same,
        ),
        (
            "search_orders",
            with(&search, "/filter", json!({"not": {"state": "paid"}})),
            Same,
        ),
        (
            "search_orders",
            with(
                &search,
                "/filter",
                json!({"status": "paid", "not": {"status": "new"}}),
            ),
            Same,
        ),
        (
            "search_orders",
            with(&search, "/limit", json!(u64::MAX)),
            Same,
        ),
        ("search_orders", with(&search, "/limit", json!(-1)), Same),
        (
            "search_orders",
            with(&search, "/after_id", json!(10_000_000_000_000_000_i64)),
            Same,
        ),
        (
            "search_orders",
            with(&search, "/after_id", json!(10_000_000_000_000_001_i64)),
            Relaxed("after_id", "maximum"),
        ),
        ("search_orders", with(&search, "/after_id", json!(0)), Same),
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
    assert_eq!(relaxed, 5, "every relaxed case ran");
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
    // Vertex AI: "schema didn't specify the schema type field".
    let ty = map
        .get("type")
        .unwrap_or_else(|| panic!("{path}: every schema has a type"))
        .as_str()
        .expect("one type, a string");
    assert!(GEMINI_TYPES.contains(&ty), "{path}: type {ty}");
    let ty = Some(ty);
    // Vertex AI: "When using anyOf, it must be the only field set", and
    // every schema has a type: no anyOf in a declaration.
    assert!(!map.contains_key("anyOf"), "{path}: anyOf beside a type");
    check_safe_numbers(schema, path);
    if let Some(nullable) = map.get("nullable") {
        assert!(nullable.is_boolean(), "{path}: nullable");
    }
    // The Gemini Developer API: "must be either 'enum' or 'date-time',
    // otherwise requests will fail".
    if let Some(format) = map.get("format") {
        assert_eq!(ty, Some("STRING"), "{path}: format {format} on {ty:?}");
        assert!(
            ["enum", "date-time"].contains(&format.as_str().unwrap()),
            "{path}: format {format}"
        );
    }
    // "properties: should be non-empty for OBJECT type".
    if ty == Some("OBJECT") {
        assert!(
            map.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| !p.is_empty()),
            "{path}: an OBJECT has properties"
        );
    }
    // "items: missing field".
    if ty == Some("ARRAY") {
        assert!(map.contains_key("items"), "{path}: an ARRAY has items");
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
    let mut as_json_schema = Vec::new();
    for declaration in tools[0]["functionDeclarations"].as_array().unwrap() {
        let name = declaration["name"].as_str().unwrap();
        for key in declaration.as_object().unwrap().keys() {
            assert!(
                ["name", "description", "parameters", "parametersJsonSchema"]
                    .contains(&key.as_str()),
                "{name}: {key}"
            );
        }
        assert!(declaration["description"].is_string());
        let original = spec(name).parameters_schema();
        if original["properties"].as_object().unwrap().is_empty() {
            assert!(
                declaration.get("parameters").is_none()
                    && declaration.get("parametersJsonSchema").is_none(),
                "{name}: no empty OBJECT"
            );
            continue;
        }
        if let Some(json_schema) = declaration.get("parametersJsonSchema") {
            assert!(declaration.get("parameters").is_none(), "{name}: exclusive");
            // Only when the `Schema` form would be refused ...
            assert!(
                !export::gemini_schema_is_complete(&export::gemini_schema(&original)),
                "{name}: parametersJsonSchema although parameters would do"
            );
            // ... and then the JSON Schema, only what Gemini refuses removed.
            assert_eq!(
                json_schema,
                &export::gemini_json_schema(&original),
                "{name}"
            );
            check_gemini_json_schema(json_schema, name);
            as_json_schema.push(name);
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
    // A map, a recursive type, and any-value items with an empty struct.
    assert_eq!(as_json_schema, ["set_labels", "search_orders", "annotate"]);
}

/// Asserts what Gemini's `parametersJsonSchema` refuses is absent: numbers
/// beyond ±(2^53 − 1), and keywords beside a `$ref` other than
/// `description` and `default` ("$ref ... was set alongside unsupported
/// fields").
fn check_gemini_json_schema(schema: &Value, path: &str) {
    check_safe_numbers(schema, path);
    assert_eq!(schema["type"], "object", "{path}");
    fn walk(value: &Value, path: &str) {
        match value {
            Value::Object(map) => {
                if map.contains_key("$ref") {
                    for key in map.keys() {
                        assert!(
                            ["$ref", "description", "default"].contains(&key.as_str()),
                            "{path}: `{key}` beside `$ref`"
                        );
                    }
                }
                for (key, member) in map {
                    walk(member, &format!("{path}/{key}"));
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}/{i}"));
                }
            }
            _ => {}
        }
    }
    walk(schema, path);
}

#[test]
fn gemini_states_what_its_subset_cannot_express() {
    let schema = export::gemini_schema(&spec("schedule_delivery").parameters_schema());
    let properties = &schema["properties"];
    assert_eq!(
        properties["discount"],
        json!({
            "type": "NUMBER",
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
    assert!(
        properties["slots"].get("format").is_none(),
        "nor int32: only enum and date-time are"
    );

    let labels = export::gemini_schema(&spec("set_labels").parameters_schema());
    assert_eq!(
        labels["properties"]["labels"]["description"],
        "Label name to weight. An object with any member names; every member's value is \
         {\"type\":\"INTEGER\",\"minimum\":0,\"maximum\":4294967295}."
    );
    // A map is an OBJECT without properties: no complete `Schema`.
    assert!(!export::gemini_schema_is_complete(&labels));

    // A recursion cut keeps the field's description and says what it repeats.
    let search = export::gemini_schema(&spec("search_orders").parameters_schema());
    let not = &search["properties"]["filter"]["anyOf"][0]["properties"]["not"];
    assert_eq!(not["description"], "The negated filter.");
    assert_eq!(
        not["anyOf"][0]["properties"]["not"],
        json!({
            "type": "OBJECT",
            "description": "The negated filter. A Filter, the same shape as the enclosing Filter (recursive)."
        })
    );
    assert!(!export::gemini_schema_is_complete(&search));
    // The bounds: u64's natural maximum goes, the declared one is stated.
    assert_eq!(
        search["properties"]["limit"],
        json!({"type": "INTEGER", "minimum": 0, "description": "How many orders at most."})
    );
    assert_eq!(
        search["properties"]["after_id"],
        json!({
            "type": "INTEGER",
            "minimum": 1,
            "description": "Only orders with a greater id. Must be at most 10000000000000000."
        })
    );

    // Any-value items and an empty struct.
    let annotate = export::gemini_schema(&spec("annotate").parameters_schema());
    assert!(annotate["properties"]["notes"].get("items").is_none());
    assert!(
        annotate["properties"]["options"]
            .get("properties")
            .is_none()
    );
    assert!(!export::gemini_schema_is_complete(&annotate));
}

#[test]
fn gemini_json_schema_keeps_the_schema_but_what_gemini_refuses() {
    let original = spec("search_orders").parameters_schema();
    let json_schema = export::gemini_json_schema(&original);
    // References stay, with their description.
    assert_eq!(
        json_schema["$defs"]["Filter"]["anyOf"][0]["properties"]["not"],
        json!({"$ref": "#/$defs/Filter", "description": "The negated filter."})
    );
    assert_eq!(
        json_schema["properties"]["filter"],
        original["properties"]["filter"]
    );
    assert!(json_schema["properties"]["limit"].get("maximum").is_none());
    assert_eq!(
        json_schema["properties"]["after_id"]["description"],
        "Only orders with a greater id. Must be at most 10000000000000000."
    );
    // Beside a `$ref`: annotations dropped, constraints said.
    let beside = json!({
        "type": "object",
        "properties": {
            "node": {
                "$ref": "#/$defs/Node",
                "description": "The node.",
                "default": null,
                "title": "Node",
                "minProperties": 1
            }
        },
        "$defs": {"Node": {"type": "object", "properties": {"id": {"type": "string"}}}}
    });
    assert_eq!(
        export::gemini_json_schema(&beside)["properties"]["node"],
        json!({
            "$ref": "#/$defs/Node",
            "description": "The node. Must have at least 1 member.",
            "default": null
        })
    );
}

// ---------------------------------------------------- Anthropic, MCP, neutral

#[test]
fn anthropic_takes_the_schema_as_it_is_but_for_too_large_bounds() {
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
        assert_eq!(
            tool["input_schema"],
            export::json_safe_bounds(&spec.parameters_schema())
        );
        assert_eq!(tool["input_schema"]["type"], "object");
        // "input_schema: int too big to convert".
        check_safe_numbers(&tool["input_schema"], spec.name());
        check_moved_constraints(
            &spec.parameters_schema(),
            &tool["input_schema"],
            spec.name(),
        );
    }
}

#[test]
fn too_large_bounds_are_dropped_and_declared_ones_stated() {
    let original = spec("search_orders").parameters_schema();
    let safe = export::json_safe_bounds(&original);
    // u64's natural maximum: nothing to say, its format says it.
    assert_eq!(
        safe["properties"]["limit"],
        json!({"type": "integer", "format": "uint64", "minimum": 0, "description": "How many orders at most."})
    );
    // A declared bound beyond 2^53 - 1: removed (never clamped) and stated.
    assert_eq!(
        safe["properties"]["after_id"],
        json!({
            "type": "integer",
            "format": "int64",
            "description": "Only orders with a greater id. Must be at most 10000000000000000.",
            "minimum": 1
        })
    );
    // i64's natural maximum, beside a declared minimum.
    let refund = export::json_safe_bounds(&spec("refund_order").parameters_schema());
    let amount = &refund["properties"]["amount_cents"];
    assert_eq!(amount["minimum"], 1);
    assert!(amount.get("maximum").is_none());
    assert_eq!(
        amount["description"],
        spec("refund_order").parameters_schema()["properties"]["amount_cents"]["description"]
    );
    // Every kind of bound, anywhere; data (enum, default) untouched; small
    // bounds kept.
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": -9223372036854775808_i64, "maximum": 9223372036854775807_i64},
            "b": {"type": "number", "exclusiveMinimum": -1e300, "exclusiveMaximum": 9007199254740992_u64},
            "c": {"type": "array", "items": {"type": "integer", "maximum": 9007199254740991_u64}},
            "d": {"enum": [18446744073709551615_u64], "default": 18446744073709551615_u64}
        },
        "$defs": {"D": {"anyOf": [{"type": "integer", "minimum": -9007199254740992_i64}]}}
    });
    let safe = export::json_safe_bounds(&schema);
    assert_eq!(safe["properties"]["a"], json!({"type": "integer"}));
    assert_eq!(
        safe["properties"]["b"],
        json!({
            "type": "number",
            "description": "Must be greater than -1e+300. Must be less than 9007199254740992."
        })
    );
    assert_eq!(safe["properties"]["c"], schema["properties"]["c"]);
    assert_eq!(safe["properties"]["d"], schema["properties"]["d"]);
    assert_eq!(
        safe["$defs"]["D"]["anyOf"][0],
        json!({"type": "integer", "description": "Must be at least -9007199254740992."})
    );
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
        let spec = spec(tool["name"].as_str().unwrap());
        assert_eq!(
            tool["inputSchema"],
            export::json_safe_bounds(&spec.parameters_schema())
        );
        check_safe_numbers(&tool["inputSchema"], spec.name());
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
        .execute(
            toolcall::Call::new("schedule_delivery", text.as_str())
                .session("default")
                .caller(&caller),
        )
        .await;
    assert!(result.ok, "{result:?}");
}
