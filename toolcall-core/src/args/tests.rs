use super::*;

static AMOUNT: FieldMeta = FieldMeta {
    name: "amount_cents",
    description: "Amount in cents.",
    constraints: &[Constraint::Minimum(Bound::Int(1))],
    sensitive: false,
    resource: None,
};

/// The reading of a scalar without the path-tracking deserializer
/// must fail, and say so, exactly as with it: the model's text and the
/// audit's problems come from it.
fn same_reading_as_with_paths<T>(value: &Value) -> Result<(), String>
where
    T: DeserializeOwned + PartialEq + fmt::Debug,
{
    let tracked = serde_path_to_error::deserialize::<_, T>(value)
        .map_err(|error| (error.path().to_string(), error.into_inner().to_string()));
    let tracked =
        tracked.map_err(|(path, text)| (if path == "." { String::new() } else { path }, text));
    let read = read_value::<T>(value).map_err(|(path, error)| (path, error.to_string()));
    if tracked == read {
        Ok(())
    } else {
        Err(format!("{value}: {tracked:?} and {read:?}"))
    }
}

#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Currency {
    Brl,
    Usd,
}

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
fn suggests_near_misses_only() {
    let fields = ["order_id", "amount_cents", "currency", "reason"];
    let suggest = |name: &str| closest(name, fields.iter().copied());
    assert_eq!(suggest("orderId"), Some("order_id"));
    assert_eq!(suggest("amount"), Some("amount_cents"));
    assert_eq!(suggest("currncy"), Some("currency"));
    assert_eq!(suggest("Reason"), Some("reason"));
    assert_eq!(suggest("force"), None);
    assert_eq!(suggest("x"), None);
}

/// The suggestion as it was first written (a `String` per name and two
/// vectors per comparison): what the allocation-free one must agree with.
fn closest_as_written<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    fn normalize(name: &str) -> String {
        name.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    }
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut diagonal = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let above = row[j + 1];
                row[j + 1] = (diagonal + usize::from(ca != *cb))
                    .min(row[j] + 1)
                    .min(above + 1);
                diagonal = above;
            }
        }
        row[b.len()]
    }
    let wanted = normalize(name);
    let mut best: Option<(usize, &str)> = None;
    for &candidate in candidates {
        let have = normalize(candidate);
        let d = if have == wanted {
            0
        } else if wanted.len() >= 3 && (have.starts_with(&wanted) || wanted.starts_with(&have)) {
            1
        } else {
            distance(&wanted, &have)
        };
        let allowed = (wanted.len().max(have.len()) / 3).max(1);
        if d <= allowed && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

proptest::proptest! {
    #[test]
    fn suggestions_agree_with_the_first_version(
        name in proptest::prop_oneof![
            "[a-zA-Z_ÉéßİΣς0-9-]{0,14}",
            // Near misses of the fields: cut, doubled, misspelt, recased.
            "(ord|orde|orderid|order_i|oder_id|ORDER_ID|amount|amnt_cents|amountcent|cents|curr|curency|currencyy|Currency|reasn|reason_|rason|REASON)[a-z_]{0,2}",
        ],
        mut candidates in proptest::collection::vec("[a-zA-Z_ÉéßİΣς0-9]{0,14}", 0..6),
    ) {
        candidates.extend(["order_id", "amount_cents", "currency", "reason"].map(String::from));
        let candidates: Vec<&str> = candidates.iter().map(String::as_str).collect();
        proptest::prop_assert_eq!(
            closest(&name, candidates.iter().copied()),
            closest_as_written(&name, &candidates)
        );
    }
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
        ascii_classes(r"[\w.]+\\d\D\W\s"),
        r"[[0-9A-Za-z_].]+\\d[^0-9][^0-9A-Za-z_]\s"
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
    assert_eq!(
        plain_type_error("invalid type: floating point `25.9`, expected i64".to_owned()),
        "invalid type: floating point `25.9`, expected an integer that fits in i64"
    );
    assert_eq!(
        plain_type_error("invalid type: string \"x\", expected u32".to_owned()),
        "invalid type: string \"x\", expected a non-negative integer that fits in u32"
    );
}
