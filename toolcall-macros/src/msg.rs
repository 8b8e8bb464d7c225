//! Every message the macro can print, in one place: lowercase, no trailing
//! period, the syntax quoted, the fix said.

pub(crate) const TOOL_KEYS: &str = "expected one of `side_effect`, `high_risk`, `check = path`, `reconcile = path`, `name = \"...\"`, `version = N`, `timeout_ms = N`, `crate = path`";
pub(crate) const ARG_KEYS: &str = "expected one of `pattern`, `min`, `max`, `exclusive_min`, `exclusive_max`, `min_length`, `max_length`, `min_items`, `max_items`, `format`, `rename`, `limit`, `sensitive`, `allow_float`, `resource`";
pub(crate) const RESOURCE_KIND: &str = "`resource` takes an optional kind: `#[arg(resource)]` (the kind is the parameter's name) or `#[arg(resource = \"order\")]`, so that tools naming the same kind of resource wait for each other";
pub(crate) const RECONCILE_WITHOUT_SIDE_EFFECT: &str = "`reconcile` requires `side_effect`: only a call that changes something can end with an unknown outcome; write #[tool(side_effect, reconcile = path)]";
pub(crate) const RESOURCE_WITHOUT_SIDE_EFFECT: &str = "`resource` requires `#[tool(side_effect)]`: it makes calls that change one resource wait for each other; a tool that changes nothing needs no lock";
pub(crate) const HIGH_RISK_WITHOUT_SIDE_EFFECT: &str = "`high_risk` requires `side_effect`: write #[tool(side_effect, high_risk)]; a tool that changes nothing needs no approval";
pub(crate) const MISSING_DOC: &str = "a tool needs a doc comment: it is the description the model reads; add `/// What this tool does, and when to call it.` above the function";
pub(crate) const RECEIVER: &str = "a tool cannot take `self`: write a free function and pass state through a first parameter `ctx: &Ctx<YourState>`";
pub(crate) const GENERICS: &str =
    "a tool cannot be generic: its arguments must have one JSON Schema; use concrete types";
pub(crate) const IMPL_TRAIT: &str = "a tool parameter cannot be `impl Trait`: its argument needs one JSON Schema; use a concrete type";
pub(crate) const PATTERN_PARAM: &str = "a tool parameter must be a plain name, it becomes the argument's field name; bind the whole value and destructure it in the body";
pub(crate) const RETURN_TYPE: &str = "a tool must return `Result<T, E>` where `T: Serialize` and `E: Into<ToolError>` (for example `Result<Refund, Rejection>`)";
pub(crate) const CTX_NOT_FIRST: &str = "only the first parameter may be the context `&Ctx<...>`; every other parameter is an argument the model sends, by value";
pub(crate) const VARIADIC: &str = "a tool cannot be variadic";
pub(crate) const CONST_UNSAFE: &str = "a tool cannot be `const`, `unsafe` or `extern`";

pub(crate) fn unknown_key(key: &str, expected: &str) -> String {
    format!("unknown key `{key}`: {expected}")
}

pub(crate) fn duplicate_key(key: &str) -> String {
    format!("`{key}` is given twice: keep one")
}

pub(crate) fn reserved_param(name: &str) -> String {
    format!(
        "a parameter cannot be named `{name}`: it comes from the host, never from the model; \
         read it from the context (`ctx: &Ctx<...>`) instead"
    )
}

pub(crate) fn invalid_pattern(error: &dyn std::fmt::Display) -> String {
    format!("invalid regular expression in `pattern`: {error}")
}

pub(crate) fn bad_tool_name(name: &str) -> String {
    format!(
        "tool name `{name}` is rejected by model providers: use 1 to 64 characters from \
         `a-z`, `A-Z`, `0-9`, `_` and `-`, the first a letter or `_`; set it with #[tool(name = \"...\")]"
    )
}

pub(crate) const NUMBER_BOUND: &str = "expected a number, for example `min = 1` or `max = 99.5`";
pub(crate) const LIMIT_NAME: &str =
    "expected the name of a policy limit, for example `limit = \"max_refund_cents\"`";

pub(crate) fn count_expected(key: &str) -> String {
    format!("expected a whole number, for example `{key} = 1`")
}

pub(crate) fn bounds_cross(low_key: &str, low: &str, high_key: &str, high: &str) -> String {
    format!(
        "`{low_key} = {low}` and `{high_key} = {high}` leave no value that passes; swap them or fix one"
    )
}

pub(crate) fn unknown_format(name: &str) -> String {
    format!(
        "unknown format `{name}`: expected one of `email`, `uuid`, `date`, `date-time`, `uri` (formats with a real check)"
    )
}

pub(crate) const EMPTY_RENAME: &str =
    "`rename` needs a name: the field's name in JSON, for example `rename = \"orderId\"`";

pub(crate) fn duplicate_field(name: &str) -> String {
    format!("two parameters are named `{name}` in JSON: rename one with #[arg(rename = \"...\")]")
}

pub(crate) fn money_float(name: &str) -> String {
    format!(
        "`{name}` looks like money, and a float cannot hold 25.90 exactly: take integer minor units \
         (for example `{name}_cents: i64`, where 25.90 is 2590), or write #[arg(allow_float)] if a float is really meant"
    )
}

pub(crate) const BAD_VERSION: &str = "`version` is a whole number from 1, for example `version = 2`: the model sees the name `<name>_v2`";

pub(crate) const BAD_TIMEOUT: &str =
    "`timeout_ms` is a whole number of milliseconds from 1, for example `timeout_ms = 5000`";
