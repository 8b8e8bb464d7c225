//! Every format: the allowed tools in registration order, the neutral
//! listing, names that round-trip, Anthropic's bounds, MCP's annotations,
//! and a strict call through the dispatcher.

use super::*;

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

// ---------------------------------------------------- Anthropic, MCP, neutral

#[test]
fn anthropic_takes_the_schema_as_it_is_but_for_too_large_bounds() {
    let tools = export::definitions(&registry(), &policy(), Format::Anthropic);
    for tool in tools.as_array().unwrap() {
        let keys = keys_of(tool);
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
        let keys = keys_of(tool);
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
    let arguments = strict_delivery();
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
