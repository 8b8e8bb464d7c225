use super::*;

fn parse(raw: &str) -> Result<Map<String, Value>, String> {
    parse_object(Arguments::Raw(raw), 1024, 4)
        .map(Cow::into_owned)
        .map_err(|e| e.to_string())
}

#[test]
fn empty_text_is_an_empty_object() {
    assert_eq!(parse(""), Ok(Map::new()));
}

#[test]
fn white_space_alone_is_not_json() {
    assert!(
        parse("  ")
            .unwrap_err()
            .starts_with("Arguments are not valid JSON")
    );
}

#[test]
fn non_object_roots_are_refused() {
    for raw in ["[]", "1", "\"x\"", "null", "true"] {
        assert_eq!(
            parse(raw).unwrap_err(),
            "Arguments must be a JSON object.",
            "{raw}"
        );
    }
    let array = Value::Array(vec![]);
    assert!(matches!(
        parse_object(Arguments::Parsed(&array), 1024, 4),
        Err(ParseError::NotAnObject)
    ));
}

#[test]
fn the_fast_parse_takes_only_what_is_plainly_within_bounds() {
    let members = raw_members(r#"{"a": "x{", "b": [1, [2]], "c\\u0041": null}"#, 8);
    assert!(
        members.is_none(),
        "a brace in a string sends it to the full parse"
    );
    let members = raw_members(r#"{"a": "x", "b": [1, [2]], "c\u0041": null}"#, 8).unwrap();
    let names: Vec<&str> = members.iter().map(|(n, _)| n.as_ref()).collect();
    assert_eq!(names, ["a", "b", "cA"]);
    assert_eq!(members[1].1.get(), "[1, [2]]");
    for refused in [
        r#"{"a": 1, "a": 2}"#,
        r#"{"a": {"b": 1}}"#,
        r#"{"a": [[[1]]]}"#,
        r#"[1]"#,
        r#"{"a": 1} x"#,
        r#"{"a": 1"#,
        "",
    ] {
        assert!(raw_members(refused, 3).is_none(), "{refused}");
    }
    assert!(raw_members(r#"{"a": [[1]]}"#, 3).is_some());
}

#[test]
fn duplicate_members_are_refused_at_any_depth() {
    assert!(
        parse(r#"{"a": 1, "a": 2}"#)
            .unwrap_err()
            .contains("duplicate member `a`")
    );
    assert!(
        parse(r#"{"x": {"b": 1, "b": 1}}"#)
            .unwrap_err()
            .contains("duplicate member `b`")
    );
    assert!(parse(r#"{"a": 1, "b": {"a": 2}}"#).is_ok());
}

#[test]
fn depth_and_size_are_bounded() {
    assert!(parse(r#"{"a": [[[1]]]}"#).is_ok());
    assert!(
        parse(r#"{"a": [[[[1]]]]}"#)
            .unwrap_err()
            .contains("nested too deeply")
    );
    let big = format!(r#"{{"a": "{}"}}"#, "x".repeat(2000));
    assert!(parse(&big).unwrap_err().contains("over the limit of 1024"));
}

#[test]
fn parsed_arguments_are_held_to_the_same_depth_and_size() {
    let parsed = |value: Value| {
        parse_object(Arguments::Parsed(&value), 1024, 4)
            .map(Cow::into_owned)
            .map_err(|e| e.to_string())
    };
    // The same bounds as the text forms above.
    assert!(parsed(serde_json::json!({"a": [[[1]]]})).is_ok());
    assert!(
        parsed(serde_json::json!({"a": [[[[1]]]]}))
            .unwrap_err()
            .contains("nested more than 4 levels")
    );
    assert!(
        parsed(serde_json::json!({"a": [[[[]]]]}))
            .unwrap_err()
            .contains("nested more than 4 levels"),
        "an empty container counts, as in text"
    );
    assert!(parse(r#"{"a": [[[[]]]]}"#).is_err());
    let big = serde_json::json!({"a": "x".repeat(2000)});
    assert!(parsed(big).unwrap_err().contains("over the limit of 1024"));
    let exact = serde_json::json!({"a": "x".repeat(1024 - 8)});
    assert_eq!(exact.to_string().len(), 1024);
    assert!(parsed(exact).is_ok());
}

#[test]
fn a_long_duplicate_member_name_is_not_echoed_whole() {
    let name = "n".repeat(10_000);
    let raw = format!(r#"{{"{name}": 1, "{name}": 2}}"#);
    let error = parse_object(Arguments::Raw(&raw), 1 << 20, 4)
        .unwrap_err()
        .to_string();
    assert!(error.contains("duplicate member"), "{error}");
    assert!(error.len() < 400, "{} bytes", error.len());
}

/// serde_json's own double for `text` (one unit off without its
/// `float_roundtrip` feature) and the nearest one.
fn doubles(text: &str) -> (f64, f64) {
    (
        serde_json::from_str(text).unwrap(),
        text.parse::<f64>().unwrap(),
    )
}

const THIRD: &str = "333333333.33333329";

#[test]
fn the_full_parse_reads_every_double_from_its_text() {
    let text = format!(
        r#"{{"s": "1.5 \" {THIRD}", "a": [1, {THIRD}, {{"b": -0.0, "c": 2e-3}}], "d": {THIRD}, "n": 18446744073709551616, "t": true}}"#
    );
    let object = parse(&text).unwrap();
    let third = 333_333_333.333_333_3_f64;
    assert_eq!(object["a"][1].as_f64(), Some(third));
    assert_eq!(object["a"][2]["c"].as_f64(), Some(0.002));
    assert_eq!(object["d"].as_f64(), Some(third));
    assert_eq!(object["n"].as_f64(), Some(18446744073709551616.0));
    assert_eq!(object["a"][0].as_u64(), Some(1), "integers stay integers");
    assert_eq!(object["s"], "1.5 \" 333333333.33333329");
    // Read one member at a time, as the fast path's refusals are.
    let flat = format!(r#"{{"a": [1, {THIRD}], "d": {THIRD}, "s": "x"}}"#);
    let raw: RawMembers<'_> = {
        let mut deserializer = serde_json::Deserializer::from_str(&flat);
        deserializer
            .deserialize_map(CollectMembers {
                capacity: 4,
                duplicates: false,
            })
            .unwrap()
    };
    let values = member_values(&raw, 8).unwrap();
    let value = |i: usize| match &values[i].1 {
        MemberValue::Parsed(value) => value.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(value(0)[1].as_f64(), Some(third));
    assert_eq!(value(1).as_f64(), Some(third));
}

#[test]
fn the_fast_parse_takes_a_number_only_if_serde_json_reads_it_exactly() {
    let (theirs, nearest) = doubles(THIRD);
    assert_eq!(nearest, 333_333_333.333_333_3);
    let misread = theirs != nearest;
    for text in [
        format!(r#"{{"a": {THIRD}}}"#),
        format!(r#"{{"a": [0.5, {THIRD}]}}"#),
        format!(r#"{{"s": "x\"", "a":{THIRD}}}"#),
        format!(r#"{{"a":{THIRD}}}"#)
            .trim_end_matches('}')
            .to_owned()
            + " }",
    ] {
        assert_eq!(raw_members(&text, 8).is_none(), misread, "{text}");
    }
    // Usual numbers, and numbers inside strings, keep the fast path.
    for text in [
        r#"{"a": 2590, "b": -1, "c": 25.9, "d": 1e3, "e": [0.5, 2.5e-3], "f": 18446744073709551615}"#,
        r#"{"s": "333333333.33333329", "t": "1e400 \" 333333333.33333329", "u": true}"#,
    ] {
        assert!(raw_members(text, 8).is_some(), "{text}");
    }
    // A number serde_json refuses, and a 20-digit one past u64.
    assert!(raw_members(r#"{"a": 1e400}"#, 8).is_none());
    let (theirs, nearest) = doubles("18446744073709551616123");
    assert_eq!(
        raw_members(r#"{"a": 18446744073709551616123}"#, 8).is_none(),
        theirs != nearest
    );
}

proptest::proptest! {
    /// Whatever the fast path takes, serde_json reads as the nearest
    /// double; whatever the full parse reads is the nearest double.
    #[test]
    fn every_path_reads_the_nearest_double(
        texts in proptest::collection::vec("-?(0|[1-9][0-9]{0,20})(\\.[0-9]{1,20})?([eE][-+]?[0-9]{1,2})?", 1..5),
    ) {
        let list = texts.join(", ");
        let text = format!(r#"{{"s": "{list}", "a": [{list}], "b": {}}}"#, texts[0]);
        let nearest: Vec<f64> = texts.iter().map(|t| t.parse().unwrap()).collect();
        let object = parse(&text).unwrap();
        for (i, want) in nearest.iter().enumerate() {
            proptest::prop_assert_eq!(object["a"][i].as_f64(), Some(*want), "{}", texts[i]);
        }
        proptest::prop_assert_eq!(object["b"].as_f64(), Some(nearest[0]));
        if let Some(members) = raw_members(&text, 8) {
            for (i, want) in nearest.iter().enumerate() {
                let read: Vec<f64> = serde_json::from_str(members[1].1.get()).unwrap();
                proptest::prop_assert_eq!(read[i].to_bits(), want.to_bits(), "{}", texts[i]);
            }
        }
    }
}

#[test]
fn a_member_named_as_serde_jsons_private_number_token_is_a_member() {
    let object = parse(r#"{"a": {"$serde_json::private::Number": "1.5"}}"#).unwrap();
    // serde_json built with `arbitrary_precision` reads that member as the
    // number itself.
    let theirs: Value = serde_json::from_str(r#"{"$serde_json::private::Number": "1.5"}"#).unwrap();
    if theirs.is_number() {
        // With `arbitrary_precision`, serde_json itself reads it as 1.5.
        assert_eq!(object["a"].as_f64(), Some(1.5));
    } else {
        assert_eq!(object["a"]["$serde_json::private::Number"], "1.5");
    }
}

#[test]
fn trailing_text_is_refused() {
    assert!(parse(r#"{"a": 1} x"#).is_err());
    assert!(parse(r#"{"a": 1}{"b": 2}"#).is_err());
    assert!(parse("{\"a\": 1}\n").is_ok());
}
