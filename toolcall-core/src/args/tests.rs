use super::*;

static AMOUNT: FieldMeta = FieldMeta {
    name: "amount_cents",
    description: "Amount in cents.",
    constraints: &[Constraint::Minimum(Bound::Int(1))],
    sensitive: false,
    resource: None,
};

/// The reading of a scalar without the path-tracking deserializer (and
/// without serde_json's own, see [`read::Scalar`]) must read the same
/// value, or fail and say so in the same words, as serde_json's with paths
/// does: the model's text and the audit's problems come from it.
fn same_reading_as_with_paths<T>(value: &Value) -> Result<(), String>
where
    T: DeserializeOwned + PartialEq + fmt::Debug,
{
    let tracked = serde_path_to_error::deserialize::<_, T>(value).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." { String::new() } else { path };
        (path, plain_type_error(error.into_inner().to_string()))
    });
    let read = read_value::<T>(value);
    if tracked == read {
        Ok(())
    } else {
        Err(format!("{value}: {tracked:?} and {read:?}"))
    }
}

/// The reading of a scalar by [`read::Scalar`] must read the same value,
/// or fail in the same words, as serde_json's `&Value` does, whatever the
/// type: that is the reading it stands for.
fn same_reading_as_serde_json<T>(value: &Value) -> Result<(), String>
where
    T: DeserializeOwned + PartialEq + fmt::Debug,
{
    let direct = T::deserialize(value).map_err(|error| (String::new(), read::type_problem(&error)));
    let read = read_value::<T>(value);
    if direct == read {
        Ok(())
    } else {
        Err(format!("{value}: {direct:?} and {read:?}"))
    }
}

#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Currency {
    Brl,
    Usd,
}

/// Every shape of variant, named as the scalar strategy's strings are.
#[derive(Debug, PartialEq, serde::Deserialize)]
enum Shape {
    #[serde(rename = "x")]
    Newtype(u8),
    #[serde(rename = "usd")]
    Tuple(u8, u8),
    #[serde(rename = "brl")]
    Struct { side: f64 },
    #[serde(other)]
    Other,
}

#[derive(Debug, PartialEq, serde::Deserialize)]
struct Cents(u64);

#[derive(Debug, PartialEq, serde::Deserialize)]
struct Marker;

#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    sku: String,
    quantity: u32,
}

fn scalar() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-300i32..300).prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(Value::from),
        "(brl|usd|BRL|eur|x|ORD-[0-9]{4}|[a-z ]{0,6}|.{0,3})".prop_map(Value::from),
    ]
}

proptest::proptest! {
    #[test]
    fn a_scalar_is_read_as_the_path_tracking_reader_reads_it(value in scalar()) {
        for outcome in [
            same_reading_as_with_paths::<i64>(&value),
            same_reading_as_with_paths::<u8>(&value),
            same_reading_as_with_paths::<u32>(&value),
            same_reading_as_with_paths::<f64>(&value),
            same_reading_as_with_paths::<bool>(&value),
            same_reading_as_with_paths::<String>(&value),
            same_reading_as_with_paths::<char>(&value),
            same_reading_as_with_paths::<Option<i64>>(&value),
            same_reading_as_with_paths::<Option<String>>(&value),
            same_reading_as_with_paths::<Currency>(&value),
            same_reading_as_with_paths::<Vec<u32>>(&value),
            same_reading_as_with_paths::<Line>(&value),
        ] {
            proptest::prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
        }
    }

    #[test]
    fn a_scalar_is_read_as_serde_json_reads_it(value in scalar()) {
        for outcome in [
            same_reading_as_serde_json::<i64>(&value),
            same_reading_as_serde_json::<u8>(&value),
            same_reading_as_serde_json::<u32>(&value),
            same_reading_as_serde_json::<f64>(&value),
            same_reading_as_serde_json::<bool>(&value),
            same_reading_as_serde_json::<String>(&value),
            same_reading_as_serde_json::<char>(&value),
            same_reading_as_serde_json::<Option<i64>>(&value),
            same_reading_as_serde_json::<Currency>(&value),
            same_reading_as_serde_json::<Vec<u32>>(&value),
            same_reading_as_serde_json::<Line>(&value),
            same_reading_as_serde_json::<i8>(&value),
            same_reading_as_serde_json::<i128>(&value),
            same_reading_as_serde_json::<u128>(&value),
            same_reading_as_serde_json::<f32>(&value),
            same_reading_as_serde_json::<()>(&value),
            same_reading_as_serde_json::<Marker>(&value),
            same_reading_as_serde_json::<Cents>(&value),
            same_reading_as_serde_json::<Option<Cents>>(&value),
            same_reading_as_serde_json::<Shape>(&value),
            same_reading_as_serde_json::<Option<Currency>>(&value),
            same_reading_as_serde_json::<(u8, u8)>(&value),
            same_reading_as_serde_json::<Value>(&value),
            same_reading_as_serde_json::<Box<str>>(&value),
            same_reading_as_serde_json::<std::collections::BTreeMap<String, u8>>(&value),
            same_reading_as_serde_json::<std::net::Ipv4Addr>(&value),
        ] {
            proptest::prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
        }
    }
}

#[test]
fn inside_a_nested_value_the_problem_says_where() {
    let lines = serde_json::json!([{"sku": "A", "quantity": 1}, {"sku": "B", "quantity": -2}]);
    let (path, error) = read_value::<Vec<Line>>(&lines).unwrap_err();
    assert_eq!(path, "[1].quantity");
    assert!(
        error.to_string().starts_with("invalid value: integer `-2`"),
        "{error}"
    );
    let (path, _) = read_value::<Vec<Line>>(&Value::from(3)).unwrap_err();
    assert_eq!(path, "");
}

#[test]
fn members_read_without_a_map_are_named_in_the_maps_order() {
    let names = ["zeta", "Amount", "amount", "", "émile", "b"];
    let kept = in_map_order(names.iter().copied(), true);
    assert_eq!(kept, names);
    let sorted: std::collections::BTreeMap<String, ()> =
        names.iter().map(|n| (n.to_string(), ())).collect();
    let sorted: Vec<&str> = sorted.keys().map(String::as_str).collect();
    assert_eq!(in_map_order(names.iter().copied(), false), sorted);
    // This build's map, whichever it is, agrees with the check.
    let mut object = Map::new();
    for name in names {
        object.insert(name.to_owned(), Value::Null);
    }
    let listed: Vec<&str> = object.keys().map(String::as_str).collect();
    assert_eq!(
        in_map_order(names.iter().copied(), map_keeps_order()),
        listed
    );
}

#[test]
fn each_problem_keeps_its_path_problem_and_description() {
    let mut object = Map::new();
    object.insert("amount_cents".into(), Value::from(0));
    object.insert("amount".into(), Value::from(5));
    let mut errors = FieldErrors::default();
    assert_eq!(
        errors.field::<i64>(&Members::Parsed(&object), &AMOUNT),
        None
    );
    errors.unknown_fields(&object, std::slice::from_ref(&AMOUNT));
    let parts: Vec<(&str, &str, &str)> = errors
        .problems()
        .iter()
        .map(|p| (p.path(), p.problem(), p.description()))
        .collect();
    assert_eq!(
        parts,
        [
            (
                "amount_cents",
                "0 is less than the minimum 1",
                "Amount in cents."
            ),
            ("amount", "unknown field, did you mean `amount_cents`?", ""),
        ]
    );
    assert_eq!(
        errors.to_string(),
        "amount_cents: 0 is less than the minimum 1 (Amount in cents.); \
         amount: unknown field, did you mean `amount_cents`?"
    );
}

#[test]
fn patterns_use_ascii_classes_like_json_schema() {
    static ID: Pattern = Pattern::new(r"^ORD-\d{4}$");
    assert!(ID.is_match("ORD-1001"));
    assert!(
        !ID.is_match("ORD-\u{0661}\u{0660}\u{0660}\u{0661}"),
        "Arabic-Indic digits are not \\d"
    );
    assert!(!ID.is_match("ORD-1001\n"));
    assert_eq!(
        ecma_meaning(r"[\w.]+\\d\D\W"),
        r"[[0-9A-Za-z_].]+\\d[^0-9][^0-9A-Za-z_]"
    );
}

#[test]
fn patterns_read_space_dot_and_word_boundaries_as_ecma_does() {
    static SPACE: Pattern = Pattern::new(r"^\s$");
    assert!(SPACE.is_match("\u{FEFF}"), "U+FEFF is ECMA-262 white space");
    assert!(!SPACE.is_match("\u{85}"), "U+0085 is not");
    static DOT: Pattern = Pattern::new(r"^.$");
    assert!(
        !DOT.is_match("\r"),
        "ECMA-262's `.` takes no line terminator"
    );
    assert!(!DOT.is_match("\u{2028}"));
    assert!(DOT.is_match("\u{1F600}"));
    static WORD: Pattern = Pattern::new(r"\bx");
    assert!(WORD.is_match("\u{E9}x"), "é is no ASCII word character");
    static LITERAL_DOT: Pattern = Pattern::new(r"^[.]$");
    assert!(!LITERAL_DOT.is_match("a"), "a `.` in a class is a dot");
    static BRACKET: Pattern = Pattern::new(r"^[]a]$");
    assert!(
        BRACKET.is_match("]"),
        "as Rust reads it, for a hand-made pattern"
    );
}

#[test]
fn lengths_count_characters_not_bytes() {
    assert_eq!(
        Constraint::MaxLength(3).violation(&Value::from("été")),
        None
    );
    assert!(
        Constraint::MaxLength(2)
            .violation(&Value::from("été"))
            .is_some()
    );
    assert_eq!(
        Constraint::MinLength(1).violation(&Value::from(5)),
        None,
        "only strings have a length"
    );
}

#[test]
fn the_last_expected_splits_as_rsplit_once_does() {
    for message in [
        "",
        "expected ",
        "expected i64",
        "invalid type: string \"expected \", expected u32",
        "unknown variant `é`, expected `BRL` or `USD`",
        "no such word",
        "expecte",
        "çexpected ü",
    ] {
        assert_eq!(
            rsplit_expected(message),
            message.rsplit_once("expected "),
            "{message:?}"
        );
    }
}

#[test]
fn integer_type_errors_speak_json() {
    for (serde, plain) in [
        (
            "invalid type: floating point `25.9`, expected i64",
            "invalid type: floating point `25.9`, expected an integer that fits in i64",
        ),
        (
            "invalid type: string \"x\", expected u32",
            "invalid type: string \"x\", expected a non-negative integer that fits in u32",
        ),
        (
            "invalid type: string \"x\", expected f64",
            "invalid type: string \"x\", expected a number",
        ),
        (
            "invalid type: integer `1`, expected a boolean",
            "invalid type: integer `1`, expected true or false",
        ),
        // Only the last `expected` is read.
        (
            "expected i8 here, expected isize",
            "expected i8 here, expected an integer that fits in isize",
        ),
        // Types serde names in words stay as they are.
        (
            "invalid type: integer `1`, expected a string",
            "invalid type: integer `1`, expected a string",
        ),
        (
            "unknown variant `EUR`, expected `BRL` or `USD`",
            "unknown variant `EUR`, expected `BRL` or `USD`",
        ),
        ("expected i64x", "expected i64x"),
        ("no such word", "no such word"),
    ] {
        assert_eq!(plain_type_error(serde.to_owned()), plain, "{serde}");
    }
}

static ORDER_ID: Pattern = Pattern::new(r"^ORD-\d{4}$");
static ANY_A: Pattern = Pattern::new("a");

/// Every kind of constraint, as a field may declare it.
fn each_constraint() -> Vec<Constraint> {
    vec![
        Constraint::Pattern(&ORDER_ID),
        Constraint::Pattern(&ANY_A),
        Constraint::Minimum(Bound::Int(1)),
        Constraint::Maximum(Bound::Float(2.5)),
        Constraint::ExclusiveMinimum(Bound::Int(0)),
        Constraint::ExclusiveMaximum(Bound::Int(9)),
        Constraint::MinLength(3),
        Constraint::MaxLength(8),
        Constraint::MinItems(1),
        Constraint::MaxItems(2),
        Constraint::Format(StringFormat::Email),
        Constraint::Format(StringFormat::Date),
        Constraint::Limit("refund"),
    ]
}

proptest::proptest! {
    /// A raw string with no escapes is checked on its text between the
    /// quotes (no JSON string made): every constraint says of it what it
    /// says of the parsed string.
    #[test]
    fn a_plain_string_is_judged_as_its_parsed_value(
        text in proptest::prop_oneof![
            "ORD-[0-9]{3,5}",
            "[a-zA-Zé0-9@.\\-]{0,12}",
            "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        ]
    ) {
        let raw = serde_json::to_string(&text).unwrap();
        let plain = plain_string(&raw);
        proptest::prop_assert_eq!(plain, Some(text.as_str()));
        let value = Value::String(text.clone());
        for constraint in each_constraint() {
            proptest::prop_assert_eq!(
                constraint.accepts_str(&text),
                constraint.violation(&value).is_none(),
                "{:?} on {:?}", constraint, text
            );
        }
    }
}

#[test]
fn only_a_string_without_escapes_is_read_between_its_quotes() {
    assert_eq!(plain_string(r#""ORD-0001""#), Some("ORD-0001"));
    assert_eq!(plain_string(r#""""#), Some(""));
    for raw in [
        r#""a\"b""#,
        r#""\u0041""#,
        "12",
        "null",
        r#"["a"]"#,
        "\"",
        "true",
    ] {
        assert_eq!(plain_string(raw), None, "{raw}");
    }
}

#[test]
fn a_refused_raw_reading_is_never_empty_and_says_nothing() {
    assert!(!FieldErrors::unread().is_empty());
    assert!(FieldErrors::unread().problems().is_empty());
    let text = r#"{"amount_cents": 0}"#;
    let raw = crate::parse::raw_members(text, 32).expect("members");
    let mut errors = FieldErrors::default();
    assert_eq!(errors.field::<i64>(&Members::Raw(&raw), &AMOUNT), None);
    assert!(!errors.is_empty(), "refused: not to be taken as valid");
    assert!(
        errors.problems().is_empty(),
        "no message is made on this path"
    );
    // The fields after the first problem are not read this way.
    let fine = crate::parse::raw_members(r#"{"amount_cents": 5}"#, 32).expect("members");
    assert_eq!(errors.field::<i64>(&Members::Raw(&fine), &AMOUNT), None);
}

#[test]
fn unknown_members_are_reported_alike_however_the_members_were_read() {
    let text = r#"{"zeta": 1, "amount_cents": 3, "amount": 2, "b": null, "émile": [1]}"#;
    let object: Map<String, Value> = serde_json::from_str(text).unwrap();
    let raw = crate::parse::raw_members(text, 32).expect("members");
    let values = crate::parse::member_values(&raw, 32).expect("values");
    let report = |members: &Members<'_>| {
        let mut errors = FieldErrors::default();
        errors.unknown_members(members, std::slice::from_ref(&AMOUNT));
        errors
            .problems()
            .iter()
            .map(|p| format!("{p}"))
            .collect::<Vec<_>>()
    };
    let parsed = report(&Members::Parsed(&object));
    assert_eq!(parsed.len(), 4, "{parsed:?}");
    assert_eq!(report(&Members::Values(&values)), parsed);
    assert!(
        parsed[0..]
            .iter()
            .any(|p| p == "amount: unknown field, did you mean `amount_cents`?")
    );
    // With every member a field, nothing is reported, whatever the reading.
    let known = crate::parse::raw_members(r#"{"amount_cents": 3}"#, 32).expect("members");
    assert!(report(&Members::Raw(&known)).is_empty());
    assert!(
        report(&Members::Values(
            &crate::parse::member_values(&known, 32).unwrap()
        ))
        .is_empty()
    );
}

/// A test enum as a tool would declare one: unit variants, renamed, and a
/// variant with data.
#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reason {
    Damaged,
    NotDelivered,
    #[allow(dead_code)]
    Other(String),
}

/// A newtype, a struct and an untagged enum, as tools declare them.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct Id(String);

#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Sku {
    sku: String,
}

#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(untagged)]
enum Either {
    Number(i64),
    Text(Id),
}

/// Every problem `T` and `constraints` find in `text` read as a plain
/// string member, then as its parsed value: `(plain, parsed)`.
fn both_readings<T: DeserializeOwned + PartialEq + std::fmt::Debug>(
    text: &str,
    constraints: &'static [Constraint],
) -> ((Option<T>, String), (Option<T>, String)) {
    let meta = FieldMeta {
        name: "field",
        description: "A field.",
        constraints,
        sensitive: false,
        resource: None,
    };
    let raw = serde_json::to_string(text).unwrap();
    let plain = MemberValue::of(&raw, |_| None).expect("a plain string");
    assert!(matches!(plain, MemberValue::Plain(_)), "{raw}");
    let parsed = MemberValue::Parsed(plain.to_value());
    let read = |value: MemberValue<'_>| {
        let members = [(std::borrow::Cow::Borrowed("field"), value)];
        let mut errors = FieldErrors::default();
        let typed = errors.field::<T>(&Members::Values(&members), &meta);
        (typed, errors.to_string())
    };
    (read(plain), read(parsed))
}

static SHAPED: [Constraint; 3] = [
    Constraint::Pattern(&ORDER_ID),
    Constraint::MinLength(3),
    Constraint::MaxLength(8),
];

proptest::proptest! {
    /// A string member kept as its text reads exactly as the parsed string
    /// would: the same value, the same problems in the same words, for
    /// every type a field may have and with its constraints.
    #[test]
    fn a_plain_string_member_reads_as_its_parsed_value(
        text in proptest::prop_oneof![
            "ORD-[0-9]{3,5}",
            "[a-zA-Zé0-9@. \\-]{0,12}",
            "-?[0-9]{1,25}",
            "(true|false|null|damaged|not_delivered|other|Damaged|x)",
            "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        ]
    ) {
        let (plain, parsed) = both_readings::<String>(&text, &SHAPED);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<String>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<Option<String>>(&text, &SHAPED);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<i64>(&text, &[]);
        proptest::prop_assert_eq!(&plain, &parsed);
        proptest::prop_assert!(plain.0.is_none() && plain.1.starts_with("field: invalid type: string"), "{:?}", plain);
        let (plain, parsed) = both_readings::<u8>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<bool>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<char>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<Reason>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<Option<Reason>>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<Vec<String>>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<std::collections::BTreeMap<String, i64>>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<f64>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<Id>(&text, &SHAPED);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<Sku>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<Either>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<()>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<serde_json::Value>(&text, &[]);
        proptest::prop_assert_eq!(plain, parsed);
        let (plain, parsed) = both_readings::<serde::de::IgnoredAny>(&text, &[]);
        proptest::prop_assert_eq!(plain.1, parsed.1);
    }
}

#[test]
fn a_plain_string_member_names_its_problems_as_the_parsed_string_does() {
    let ((typed, plain), (_, parsed)) = both_readings::<Reason>("EUR", &[]);
    assert_eq!(typed, None);
    assert_eq!(plain, parsed);
    assert_eq!(
        plain,
        "field: unknown variant `EUR`, expected one of `damaged`, `not_delivered`, `other` (A field.)"
    );
    let ((typed, plain), _) = both_readings::<Reason>("other", &[]);
    assert_eq!(typed, None);
    assert!(!plain.contains(" at line "), "{plain}");
    let ((typed, plain), _) = both_readings::<String>("ORD-12", &SHAPED);
    assert_eq!(typed, None);
    assert!(plain.starts_with("field: "), "{plain}");
    let ((typed, plain), _) = both_readings::<String>("ORD-1234", &SHAPED);
    assert_eq!((typed.as_deref(), plain.as_str()), (Some("ORD-1234"), ""));
}

/// An unknown variant is worded as serde words it (its default, which
/// `serde::de::value::Error` keeps), for an enum of any size: the model
/// reads the same message whichever reader found the problem.
#[test]
fn an_unknown_variant_is_worded_as_serde_words_it() {
    use serde::de::Error as _;
    static LISTS: [&[&str]; 5] = [
        &[],
        &["BRL"],
        &["BRL", "USD"],
        &["BRL", "USD", "EUR"],
        &["a", "", "`c`", "d"],
    ];
    for expected in LISTS {
        for variant in ["EUR", "", "brl", "a `b`"] {
            let ours = read::Problem::unknown_variant(variant, expected).0;
            let serdes = serde::de::value::Error::unknown_variant(variant, expected).to_string();
            assert_eq!(ours, serdes, "{variant:?} against {expected:?}");
        }
    }
}
