//! OpenAI's strict mode: a checker of its rules, what it cannot express
//! stated in words, nothing beside a `$ref`, and no unfaithful strict form.

use super::*;

// --------------------------------------------------- OpenAI strict-mode rules

use toolcall_providers::export::{OPENAI_STRICT_KEYWORDS, OPENAI_STRING_FORMATS};

/// The checker below reads the crate's own lists; this pins them to OpenAI's
/// Structured Outputs guide, "Supported schemas", so that a list widened by
/// mistake cannot make the checker agree with the exporter.
#[test]
fn the_strict_mode_lists_are_the_guides() {
    insta::assert_snapshot!(
        OPENAI_STRICT_KEYWORDS.join(" "),
        @"type description enum properties required additionalProperties items anyOf $ref $defs pattern format minimum maximum exclusiveMinimum exclusiveMaximum multipleOf minItems maxItems"
    );
    insta::assert_snapshot!(
        OPENAI_STRING_FORMATS.join(" "),
        @"date-time time date duration email hostname ipv4 ipv6 uuid"
    );
}

const JSON_TYPES: [&str; 7] = [
    "string", "number", "integer", "boolean", "object", "array", "null",
];

/// Asserts OpenAI's strict-mode rules over `schema` and everything under it.
fn check_openai_strict(schema: &Value, path: &str) {
    let map = schema
        .as_object()
        .unwrap_or_else(|| panic!("{path}: a schema object"));
    for keyword in map.keys() {
        assert!(
            OPENAI_STRICT_KEYWORDS.contains(&keyword.as_str()),
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
            OPENAI_STRING_FORMATS.contains(&format.as_str().unwrap()),
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
        let keys = keys_of(tool);
        assert_eq!(keys, BTreeSet::from(["type", "function"]));
        &tool["function"]
    } else {
        tool
    };
    let mut expected = BTreeSet::from(["name", "description", "parameters", "strict"]);
    if !nested {
        expected.insert("type");
    }
    let keys = keys_of(function);
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
