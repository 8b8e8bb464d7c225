//! Gemini's schema subset and its JSON Schema form: a checker of each, and
//! what the subset cannot express stated in words.

use super::*;

// -------------------------------------------------------------- Gemini rules

use toolcall_providers::export::GEMINI_SCHEMA_KEYWORDS;

/// The checker below reads the crate's own list of the fields of Gemini's
/// `Schema` (the OpenAPI 3.0 subset); this pins it, so that a field added by
/// mistake cannot make the checker agree with the exporter.
#[test]
fn the_schema_fields_are_geminis() {
    insta::assert_snapshot!(
        GEMINI_SCHEMA_KEYWORDS.join(" "),
        @"type format title description nullable enum maxItems minItems properties required minProperties maxProperties minLength maxLength pattern example anyOf propertyOrdering default items minimum maximum"
    );
}

const GEMINI_TYPES: [&str; 6] = ["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"];

/// Asserts that `schema` and everything under it stay inside Gemini's `Schema`.
fn check_gemini_schema(schema: &Value, path: &str) {
    let map = schema
        .as_object()
        .unwrap_or_else(|| panic!("{path}: a schema object"));
    for keyword in map.keys() {
        assert!(
            GEMINI_SCHEMA_KEYWORDS.contains(&keyword.as_str()),
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
