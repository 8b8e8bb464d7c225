//! Numbers and keys: a long fraction is keyed as its nearest double, and one
//! hundred written any way is one key, in every tool that takes a number.

use super::*;

// ------------------------------------------ a number's key is its double's
//
// The tools of this crate as `#[tool]` writes them. This crate's tests build
// serde_json with `float_roundtrip` (`jsonschema`, a dev-dependency, turns
// it on), so serde_json's own doubles are right here; toolcall-core's
// `tests/canonical_rfc8785.rs` runs the same checks through the dispatcher
// in a build without it, where serde_json misreads some numbers.

/// The keys the number tools were called with, in order.
#[derive(Debug, Default)]
struct Keys(Mutex<Vec<String>>);

impl Keys {
    /// Keeps the key `ctx`'s call runs under.
    fn record(ctx: &Ctx<Keys>) {
        ctx.state
            .0
            .lock()
            .unwrap()
            .push(ctx.idempotency_key.to_string());
    }
}

/// Records a reading.
#[tool]
fn reading(
    ctx: &Ctx<Keys>,
    /// The reading.
    value: f64,
) -> Result<Value, ToolError> {
    Keys::record(ctx);
    Ok(json!({"value": value}))
}

/// Records a series of readings.
#[tool]
fn series(
    ctx: &Ctx<Keys>,
    /// The readings.
    values: Vec<f64>,
) -> Result<Value, ToolError> {
    Keys::record(ctx);
    Ok(json!({"count": values.len()}))
}

/// Counts something.
#[tool]
fn tally(
    ctx: &Ctx<Keys>,
    /// The count.
    count: i64,
) -> Result<Value, ToolError> {
    Keys::record(ctx);
    Ok(json!({"count": count}))
}

/// Keeps any JSON document.
#[tool]
fn document(
    ctx: &Ctx<Keys>,
    /// The document.
    body: Value,
) -> Result<Value, ToolError> {
    Keys::record(ctx);
    Ok(json!({"kept": body.is_object()}))
}

/// Calls the number tools, each call in a session of its own (no loop
/// guard between them), and says the key each call ran under.
struct NumberTools {
    runtime: tokio::runtime::Runtime,
    keys: Arc<Keys>,
    dispatcher: Dispatcher<Keys>,
    calls: AtomicU32,
}

impl NumberTools {
    fn new() -> Self {
        let keys = Arc::new(Keys::default());
        let dispatcher = Dispatcher::builder(
            tools![reading, series, tally, document].unwrap(),
            Arc::clone(&keys),
        )
        .max_steps(1_000_000)
        .build()
        .unwrap();
        NumberTools {
            runtime: runtime(),
            keys,
            dispatcher,
            calls: AtomicU32::new(0),
        }
    }

    /// The key `tool` ran under for `raw`, with the key the documented
    /// form gives `expected` in the same session; or the refusal.
    fn keys(
        &self,
        tool: &str,
        raw: &str,
        expected: &Value,
    ) -> Result<(String, String), Box<ToolResult>> {
        let session = format!("n{}", self.calls.fetch_add(1, Ordering::Relaxed));
        let result = self.runtime.block_on(
            self.dispatcher
                .execute(Call::new(tool, raw).session(&session)),
        );
        if !result.ok {
            return Err(Box::new(result));
        }
        let got = self
            .keys
            .0
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the tool ran");
        Ok((got, idempotency_key("default", &session, tool, expected)))
    }

    /// Asserts that `raw` ran `tool` under the key of `expected`.
    fn assert_key(&self, tool: &str, raw: &str, expected: &Value) {
        match self.keys(tool, raw, expected) {
            Ok((got, want)) => assert_eq!(got, want, "{tool} {raw}: not the key of {expected}"),
            Err(result) => panic!("{tool} {raw} refused: {result:?}"),
        }
    }
}

/// RFC 8785's `values.json` numbers: `333333333.33333329` is the double
/// `333333333.3333333`, which serde_json without `float_roundtrip` reads one
/// unit in the last place lower (`333333333.33333325`).
#[test]
fn a_long_fraction_is_keyed_as_its_nearest_double() {
    let tools = NumberTools::new();
    let third = 333_333_333.333_333_3_f64;
    for text in [
        "333333333.33333329",
        "333333333.33333333",
        "333333333.3333333",
    ] {
        assert_eq!(text.parse::<f64>().unwrap(), third);
        // Alone: the one-pass reading of raw members.
        tools.assert_key(
            "reading",
            &format!(r#"{{"value": {text}}}"#),
            &json!({"value": third}),
        );
        // In a list, beside other floats.
        tools.assert_key(
            "series",
            &format!("{{\"values\": [4.50, {text}, 2e-3, 1E30]}}"),
            &json!({"values": [4.5, third, 0.002, 1e30]}),
        );
        // In a nested document: the full parse.
        tools.assert_key(
            "document",
            &format!(r#"{{"body": {{"numbers": [{text}, 1E30], "n": {{"x": {text}}}}}}}"#),
            &json!({"body": {"numbers": [third, 1e30], "n": {"x": third}}}),
        );
    }
    // The whole of RFC 8785's values.json, as a document: its key is the
    // key of the RFC's own output.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../toolcall-core/tests/data/rfc8785");
    let input = std::fs::read_to_string(data.join("input/values.json")).unwrap();
    let output: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("output/values.json")).unwrap())
            .unwrap();
    assert_eq!(output["numbers"][0], json!(third), "the RFC's output, read");
    tools.assert_key(
        "document",
        &format!(r#"{{"body": {input}}}"#),
        &json!({"body": output}),
    );
}

/// `100` written every way JSON allows is one key, the double 100's, in
/// an `f64` field; in an `i64` field the integer forms are its key and a
/// fraction or an exponent is refused.
#[test]
fn one_hundred_written_any_way_is_one_key() {
    let tools = NumberTools::new();
    let forms = ONE_HUNDRED;
    for form in forms {
        tools.assert_key(
            "reading",
            &format!(r#"{{"value": {form}}}"#),
            &json!({"value": 100.0}),
        );
        tools.assert_key(
            "series",
            &format!(r#"{{"values": [{form}, -{form}]}}"#),
            &json!({"values": [100.0, -100.0]}),
        );
        tools.assert_key(
            "document",
            &format!(r#"{{"body": {{"a": [{form}]}}}}"#),
            &json!({"body": {"a": [100.0]}}),
        );
    }
    tools.assert_key("tally", r#"{"count": 100}"#, &json!({"count": 100}));
    for form in &forms[1..] {
        let refused = tools
            .keys(
                "tally",
                &format!(r#"{{"count": {form}}}"#),
                &json!({"count": 100}),
            )
            .expect_err("a fraction or an exponent is not an integer");
        assert_eq!(refused.code, Code::InvalidArguments, "{form}: {refused:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A double written any of many ways is keyed as the double itself,
    /// alone, in a list and in a nested document.
    #[test]
    fn a_double_written_any_way_is_keyed_as_its_double(
        f in any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ) {
        let tools = NumberTools::new();
        for form in forms_of(f) {
            prop_assert_eq!(form.parse::<f64>().unwrap(), f, "{}", form);
            let (got, want) = tools.keys("reading", &format!(r#"{{"value": {form}}}"#), &json!({"value": f})).unwrap();
            prop_assert_eq!(got, want, "reading {}", form);
            let (got, want) = tools.keys("series", &format!(r#"{{"values": [{form}, 0.5]}}"#), &json!({"values": [f, 0.5]})).unwrap();
            prop_assert_eq!(got, want, "series {}", form);
            let (got, want) = tools.keys("document", &format!(r#"{{"body": {{"x": {form}}}}}"#), &json!({"body": {"x": f}})).unwrap();
            prop_assert_eq!(got, want, "document {}", form);
        }
    }

    /// Any number's text is keyed as the double nearest to it (Rust's
    /// `f64::from_str`, which rounds correctly), as RFC 8785 reads it.
    #[test]
    fn any_number_text_is_keyed_as_its_nearest_double(
        texts in prop::collection::vec(number_text(250), 1..4),
    ) {
        let tools = NumberTools::new();
        let doubles: Vec<f64> = texts.iter().map(|t| t.parse().unwrap()).collect();
        prop_assume!(doubles.iter().all(|f| f.is_finite()));
        // In a document (a `Value`), an integer in the 64-bit range stays
        // that integer, exactly; any other number is its nearest double.
        let exact: Vec<Value> = texts
            .iter()
            .zip(&doubles)
            .map(|(text, double)| {
                let integer = !text.contains(['.', 'e', 'E']) && text != "-0";
                match (text.parse::<i64>(), text.parse::<u64>()) {
                    (Ok(n), _) if integer => json!(n),
                    (_, Ok(n)) if integer => json!(n),
                    _ => json!(double),
                }
            })
            .collect();
        let (got, want) = tools
            .keys("reading", &format!(r#"{{"value": {}}}"#, texts[0]), &json!({"value": doubles[0]}))
            .unwrap();
        prop_assert_eq!(got, want, "reading {}", texts[0]);
        let list = texts.join(", ");
        let (got, want) = tools
            .keys("series", &format!(r#"{{"values": [{list}]}}"#), &json!({"values": doubles}))
            .unwrap();
        prop_assert_eq!(got, want, "series {}", list);
        let (got, want) = tools
            .keys("document", &format!(r#"{{"body": {{"a": [{list}], "b": {{}}}}}}"#), &json!({"body": {"a": exact, "b": {}}}))
            .unwrap();
        prop_assert_eq!(got, want, "document {}", list);
    }
}
