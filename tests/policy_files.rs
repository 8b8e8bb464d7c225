//! Policy files as operators write them, held to the standard of a model's
//! arguments: every number is one a comparison can use, every bound fits
//! the argument it bounds, and a rule approves nothing outside its bounds.
//! The files are TOML, read as the command line's `admin policy` reads them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use serde_json::{Value, json};
use toolcall::store::MemoryStore;
use toolcall::store::prelude::*;
use toolcall::{Call, Caller, Code, Ctx, Dispatcher, Policy, Rejection, ToolResult, tool, tools};
use toolcall_core::controls::{self, ApprovalRule, Bound, ChangeError, Controls};
use toolcall_testkit::count::counted;
use toolcall_testkit::run::one_thread as runtime;

#[derive(Default)]
struct Shop {
    refunds: AtomicU32,
}

/// The currency of an amount.
#[derive(Clone, Copy, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
enum Currency {
    Eur,
    Usd,
}

/// Refunds part of an order.
#[tool(side_effect, high_risk)]
async fn refund_order(
    ctx: &Ctx<Shop>,
    /// The order's id.
    order_id: String,
    /// The amount, in cents.
    #[arg(min = 1, limit = "max_refund_cents")]
    amount_cents: i64,
    /// The amount's currency.
    currency: Currency,
    /// A share of the order, from 0 to 1.
    #[arg(min = 0, max = 1)]
    share: Option<f64>,
) -> Result<Value, Rejection> {
    let _ = (currency, share);
    counted(
        &ctx.state.refunds,
        json!({"order_id": order_id, "refunded_cents": amount_cents}),
    )
}

/// Reads an order.
#[tool]
async fn get_order(
    /// The order's id.
    order_id: String,
) -> Result<Value, Rejection> {
    Ok(json!({"order_id": order_id}))
}

const CEILING: i64 = 50_000;

fn dispatcher(shop: &Arc<Shop>, store: Arc<MemoryStore>) -> Dispatcher<Shop, Arc<MemoryStore>> {
    Dispatcher::builder(tools![refund_order, get_order].unwrap(), Arc::clone(shop))
        .store(store)
        .caller(Caller::new(
            "support",
            Policy::new()
                .allow(["get_order", "refund_order"])
                .limit("max_refund_cents", CEILING),
        ))
        .callers([Caller::new("reader", Policy::new().allow(["get_order"]))])
        .build()
        .unwrap()
}

/// A refund of `amount_cents` by `caller`, in a conversation of its own.
async fn refund(
    d: &Dispatcher<Shop, Arc<MemoryStore>>,
    caller: &str,
    order: usize,
    amount_cents: i64,
) -> ToolResult {
    let args =
        json!({"order_id": format!("O-{order}"), "amount_cents": amount_cents, "currency": "Eur"})
            .to_string();
    let session = format!("s-{order}");
    d.execute(
        Call::new("refund_order", args.as_str())
            .session(&session)
            .caller(d.caller(caller).unwrap()),
    )
    .await
}

const NAN_RULE: &str = r#"
[[approval_rules]]
name = "r"
tool = "refund_order"
caller = "support"
arguments.amount_cents = { max = nan }
"#;

#[test]
fn a_bound_that_is_not_a_finite_number_is_refused_with_its_line() {
    for (written, said) in [
        ("max = nan", "nan is not a number"),
        ("min = nan", "nan is not a number"),
        ("max = +nan", "nan is not a number"),
        ("max = -nan", "nan is not a number"),
        ("max = inf", "infinite"),
        ("min = -inf", "infinite"),
        ("min = -0.0", "write 0"),
    ] {
        let text = NAN_RULE.replace("max = nan", written);
        let error = toml::from_str::<Controls>(&text).unwrap_err().to_string();
        assert!(error.contains(said), "{written}: {error}");
        // toml's error names the line of the bound (line 6 of the file).
        assert!(error.contains("line 6"), "{written}: {error}");
    }
}

#[test]
fn a_nan_bound_made_in_code_approves_nothing_and_does_not_check() {
    let shop = Arc::new(Shop::default());
    let d = dispatcher(&shop, Arc::new(MemoryStore::default()));
    // A rule as a program (or a document edited in the store) could make it,
    // past the reader's refusal.
    let mut rule: ApprovalRule = serde_json::from_value(json!({
        "name": "r", "tool": "refund_order", "caller": "support",
        "arguments": {"amount_cents": {}}
    }))
    .unwrap();
    let mut bound = Bound::default();
    bound.max = Some(f64::NAN);
    rule.arguments.insert("amount_cents".into(), bound);
    let mut policy = Controls::default();
    policy.approval_rules.push(rule);
    for amount in [9999, 4400, 1] {
        let arguments = json!({"order_id": "O-1", "amount_cents": amount, "currency": "Eur"});
        assert!(
            policy
                .rule_for("refund_order", "support", &arguments)
                .is_none(),
            "{amount}"
        );
    }
    let errors = controls::check(&policy, d.registry(), &d.callers());
    assert!(
        errors
            .iter()
            .any(|e| e.at == "approval_rules[0].arguments.amount_cents.max"
                && e.problem.contains("nan")),
        "{errors:?}"
    );
}

#[test]
fn bounds_that_do_not_fit_their_argument_are_refused() {
    let shop = Arc::new(Shop::default());
    let d = dispatcher(&shop, Arc::new(MemoryStore::default()));
    for (bound, at, said) in [
        (
            "amount_cents = { max = 10.5 }",
            "amount_cents.max",
            "write 10",
        ),
        (
            "amount_cents = { min = 0.5 }",
            "amount_cents.min",
            "write 1",
        ),
        (
            "amount_cents = { min = 500, max = 100 }",
            "amount_cents.min",
            "admits no value",
        ),
        (
            "currency = { max = 3 }",
            "currency",
            "min and max compare numbers",
        ),
        (
            "order_id = { min = 1 }",
            "order_id",
            "min and max compare numbers",
        ),
        (
            r#"currency = { one_of = ["EUR"] }"#,
            "currency.one_of[0]",
            "the tool refuses \"EUR\"",
        ),
        (
            r#"amount_cents = { one_of = ["100"] }"#,
            "amount_cents.one_of[0]",
            "the tool refuses",
        ),
    ] {
        let text = format!(
            "[[approval_rules]]\nname = \"r\"\ntool = \"refund_order\"\narguments.{bound}\n"
        );
        let policy: Controls = toml::from_str(&text).unwrap();
        let errors = controls::check(&policy, d.registry(), &d.callers());
        let want = format!("approval_rules[0].arguments.{at}");
        assert!(
            errors
                .iter()
                .any(|e| e.at == want && e.problem.contains(said)),
            "{bound}: {errors:?}"
        );
    }
    // What fits passes: a fractional bound on a number, one_of of variants.
    let text = r#"
        [[approval_rules]]
        name = "r"
        tool = "refund_order"
        arguments.share = { max = 0.25 }
        arguments.currency = { one_of = ["Eur"] }
        arguments.amount_cents = { min = 1, max = 1000 }
    "#;
    let policy: Controls = toml::from_str(text).unwrap();
    assert_eq!(controls::check(&policy, d.registry(), &d.callers()), vec![]);
}

#[test]
fn a_nan_rule_loads_nowhere_and_refunds_ask_a_person() {
    let shop = Arc::new(Shop::default());
    let store = Arc::new(MemoryStore::default());
    let d = dispatcher(&shop, Arc::clone(&store));
    assert!(toml::from_str::<Controls>(NAN_RULE).is_err());
    runtime().block_on(async {
        for (order, amount) in [(1, 9999), (2, 4400)] {
            let answer = refund(&d, "support", order, amount).await;
            assert_eq!(answer.code, Code::ConfirmationRequired, "{answer:?}");
        }
    });
    assert_eq!(shop.refunds.load(Ordering::SeqCst), 0);
}

// ------------------------------------------------------- generated files

/// A number as a policy file may write it: its text, and its value in
/// halves (`k` for `k/2`) when it is one a bound can use.
fn number() -> impl Strategy<Value = (String, Option<i128>)> {
    prop_oneof![
        3 => (-4_000i128..24_000).prop_map(|halves| if halves % 2 == 0 {
            ((halves / 2).to_string(), Some(halves))
        } else {
            // An odd number of halves is exact as a float: `3.5`, `-0.5`.
            (format!("{}", halves as f64 / 2.0), Some(halves))
        }),
        1 => prop::sample::select(vec![
            "nan", "+nan", "-nan", "inf", "+inf", "-inf", "-0.0", "1e400", "\"100\"", "true",
        ])
        .prop_map(|text| (text.to_owned(), None)),
        // Past i64, still a finite number a bound may use: 2^63.
        1 => Just(("9223372036854775808".to_owned(), Some(1i128 << 64))),
    ]
}

#[derive(Clone, Debug)]
struct RuleText {
    tool: &'static str,
    caller: Option<&'static str>,
    argument: &'static str,
    min: Option<(String, Option<i128>)>,
    max: Option<(String, Option<i128>)>,
}

fn rule() -> impl Strategy<Value = RuleText> {
    (
        prop_oneof![8 => Just("refund_order"), 1 => Just("refnud_order"), 1 => Just("get_order")],
        prop_oneof![
            4 => Just(None),
            4 => Just(Some("support")),
            1 => Just(Some("reader")),
            1 => Just(Some("suport")),
        ],
        prop_oneof![
            12 => Just("amount_cents"),
            1 => Just("share"),
            1 => Just("order_id"),
            1 => Just("amount"),
        ],
        prop::option::of(number()),
        prop::option::of(number()),
    )
        .prop_map(|(tool, caller, argument, min, max)| RuleText {
            tool,
            caller,
            argument,
            min,
            max,
        })
}

#[derive(Clone, Debug)]
struct File {
    rules: Vec<RuleText>,
    /// The support caller's limit, as written.
    limit: Option<String>,
    /// Tools the file allows the support caller.
    allow: Option<Vec<&'static str>>,
}

fn file() -> impl Strategy<Value = File> {
    (
        prop::collection::vec(rule(), 0..3),
        prop_oneof![
            6 => Just(None),
            3 => (0i64..80_000).prop_map(|n| Some(n.to_string())),
            1 => prop::sample::select(vec!["nan", "100.5", "9223372036854775808"])
                .prop_map(|text| Some(text.to_owned())),
        ],
        prop_oneof![
            6 => Just(None),
            1 => prop::collection::vec(
                prop::sample::select(vec!["get_order", "refund_order", "delete_order"]),
                0..3,
            )
            .prop_map(Some),
        ],
    )
        .prop_map(|(rules, limit, allow)| File {
            rules,
            limit,
            allow,
        })
}

impl File {
    fn text(&self) -> String {
        let mut text = String::new();
        if self.limit.is_some() || self.allow.is_some() {
            text.push_str("[callers.support]\n");
            if let Some(allow) = &self.allow {
                let names: Vec<String> = allow.iter().map(|t| format!("\"{t}\"")).collect();
                text.push_str(&format!("allow = [{}]\n", names.join(", ")));
            }
            if let Some(limit) = &self.limit {
                text.push_str(&format!("limits = {{ max_refund_cents = {limit} }}\n"));
            }
        }
        for (at, rule) in self.rules.iter().enumerate() {
            text.push_str(&format!(
                "[[approval_rules]]\nname = \"r{at}\"\ntool = \"{}\"\n",
                rule.tool
            ));
            if let Some(caller) = rule.caller {
                text.push_str(&format!("caller = \"{caller}\"\n"));
            }
            let mut parts = Vec::new();
            if let Some((min, _)) = &rule.min {
                parts.push(format!("min = {min}"));
            }
            if let Some((max, _)) = &rule.max {
                parts.push(format!("max = {max}"));
            }
            text.push_str(&format!(
                "arguments.{} = {{ {} }}\n",
                rule.argument,
                parts.join(", ")
            ));
        }
        text
    }

    /// Whether a rule of this file admits `amount` cents by `caller`, by
    /// the halves the numbers were written as: a reference that owes
    /// nothing to the comparison under test.
    fn admits(&self, caller: &str, amount: i64) -> bool {
        self.rules.iter().any(|rule| {
            rule.tool == "refund_order"
                && rule.caller.is_none_or(|c| c == caller)
                && rule.argument == "amount_cents"
                && (rule.min.is_some() || rule.max.is_some())
                && rule
                    .min
                    .as_ref()
                    .is_none_or(|(_, halves)| halves.is_some_and(|h| 2 * i128::from(amount) >= h))
                && rule
                    .max
                    .as_ref()
                    .is_none_or(|(_, halves)| halves.is_some_and(|h| 2 * i128::from(amount) <= h))
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A file that loads never has a rule approve a call outside its
    /// bounds and never widens the code's policy; a file that does not
    /// read or check changes nothing.
    #[test]
    fn a_policy_file_is_read_and_obeyed_exactly(file in file(), amounts in prop::collection::vec(-10i64..60_000, 1..6)) {
        let shop = Arc::new(Shop::default());
        let store = Arc::new(MemoryStore::default());
        let d = dispatcher(&shop, Arc::clone(&store));
        let text = file.text();
        let loaded = runtime().block_on(async {
            let policy: Controls = match toml::from_str(&text) {
                Ok(policy) => policy,
                Err(_) => return false,
            };
            match controls::load_policy(&*store, d.registry(), &d.callers(), &policy, "ops", "p.toml").await {
                Ok(_) => true,
                Err(ChangeError::Invalid(errors)) => {
                    assert!(!errors.is_empty());
                    false
                }
                Err(other) => panic!("{other}"),
            }
        });
        let version = runtime().block_on(store.controls(0)).unwrap().map(|c| c.version);
        if !loaded {
            prop_assert_eq!(version, None, "a file that does not check wrote controls:\n{}", text);
        }
        let limit = if loaded {
            file.limit.as_ref().map_or(CEILING, |l| l.parse::<i64>().unwrap().min(CEILING))
        } else {
            CEILING
        };
        let refund_allowed = !loaded || file.allow.as_ref().is_none_or(|a| a.contains(&"refund_order"));
        runtime().block_on(async {
            for (order, amount) in amounts.iter().copied().enumerate() {
                let before = shop.refunds.load(Ordering::SeqCst);
                let answer = refund(&d, "support", order, amount).await;
                let ran = shop.refunds.load(Ordering::SeqCst) - before;
                let ruled = loaded && file.admits("support", amount);
                let want = if !refund_allowed {
                    Code::ToolNotAllowed
                } else if amount < 1 {
                    Code::InvalidArguments
                } else if amount > limit {
                    Code::PolicyLimit
                } else if ruled {
                    Code::Ok
                } else {
                    Code::ConfirmationRequired
                };
                assert_eq!(answer.code, want, "{amount} under\n{text}\n{answer:?}");
                assert_eq!(ran, u32::from(want == Code::Ok), "{amount} under\n{text}");
                // The reader's caller never gains the refund, whatever the file.
                let other = refund(&d, "reader", 1000 + order, amount).await;
                assert!(matches!(other.code, Code::ToolNotAllowed), "{other:?}");
            }
        });
    }
}

/// Tokens a mutated file is made of: TOML's own, the file's keys, and
/// numbers and names at the edges.
const TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    ",",
    "\"",
    "'",
    "\n",
    " ",
    "#",
    ".",
    "nan",
    "inf",
    "-0.0",
    "1e400",
    "-1",
    "0",
    "9223372036854775808",
    "true",
    "\"\\u0000\"",
    "approval_rules",
    "callers",
    "rate_limits",
    "approvals",
    "stops",
    "name",
    "tool",
    "caller",
    "arguments",
    "min",
    "max",
    "one_of",
    "calls",
    "per",
    "\"1m\"",
    "\"0s\"",
    "limits",
    "allow",
    "taint",
    "\"session\"",
    "refund_order",
    "amount_cents",
    "support",
    "\u{202e}",
    "\u{0}",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A file mutated token by token from a valid one is read, checked and
    /// loaded without a panic, and either loads or writes nothing.
    #[test]
    fn a_mangled_policy_file_is_refused_or_loaded_never_a_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(TOKENS), any::<bool>()), 0..12)
    ) {
        let mut text = File {
            rules: vec![RuleText {
                tool: "refund_order",
                caller: Some("support"),
                argument: "amount_cents",
                min: Some(("1".to_owned(), Some(2))),
                max: Some(("1000".to_owned(), Some(2000))),
            }],
            limit: Some("20000".to_owned()),
            allow: Some(vec!["get_order", "refund_order"]),
        }
        .text();
        for (at, token, replace) in edits {
            let boundaries: Vec<usize> = (0..=text.len()).filter(|i| text.is_char_boundary(*i)).collect();
            let start = boundaries[at.index(boundaries.len())];
            let end = if replace {
                boundaries.iter().copied().find(|i| *i > start).unwrap_or(start)
            } else {
                start
            };
            text.replace_range(start..end, token);
        }
        let shop = Arc::new(Shop::default());
        let store = Arc::new(MemoryStore::default());
        let d = dispatcher(&shop, Arc::clone(&store));
        let loaded = runtime().block_on(async {
            let Ok(policy) = toml::from_str::<Controls>(&text) else {
                return false;
            };
            controls::load_policy(&*store, d.registry(), &d.callers(), &policy, "ops", "p.toml")
                .await
                .is_ok()
        });
        let version = runtime().block_on(store.controls(0)).unwrap().map(|c| c.version);
        prop_assert_eq!(version.is_some(), loaded);
    }
}
