//! Every message the macro can print, in one place: lowercase, no trailing
//! period, the syntax quoted, the fix said.

pub(crate) const TWO_CHECKS: &str = "a tool has one business check: `check = path` names a function that answers at once, `async_check = path` one that awaits (`async fn`); keep one, and call the other from it";

pub(crate) const TOOL_KEYS: &str = "expected one of `side_effect`, `high_risk`, `check = path`, `async_check = path`, `reconcile = path`, `name = \"...\"`, `version = N`, `timeout_ms = N`, `max_output_bytes = N`, `max_repeats = N`, `approvals = N`, `untrusted_output`, `untrusted_output = [\"/part\", ...]`, `limits = [\"name\", ...]`, `idempotent_backend`, `preview = path`, `args = \"...\"`, `crate = path`";
pub(crate) const BAD_MAX_REPEATS: &str = "`max_repeats` is a whole number of calls from 1, for example `max_repeats = 20`: how many identical calls of this read-only tool a session may make before LOOP_DETECTED";
pub(crate) const BAD_APPROVALS: &str = "`approvals` is how many distinct people must approve each call, from 2 to 10, for example `approvals = 2` (one person is what `high_risk` asks already)";
pub(crate) const APPROVALS_WITHOUT_HIGH_RISK: &str = "`approvals = N` is for a tool a person approves: add `high_risk` (`#[tool(side_effect, high_risk, approvals = 2)]`)";
pub(crate) const MAX_REPEATS_ON_SIDE_EFFECT: &str = "`max_repeats` is for a read-only tool (a status polled until it changes): an identical call of a side effect is answered with its first result, never run again, so repeating it cannot poll anything; remove `max_repeats` here, or put the reading in its own tool without `side_effect`";
pub(crate) const BAD_OUTPUT_BUDGET: &str = "`max_output_bytes` is a whole number of bytes from 256, for example `max_output_bytes = 16384`: the most of a result's text the model gets";
pub(crate) const ARG_KEYS: &str = "expected one of `pattern`, `min`, `max`, `exclusive_min`, `exclusive_max`, `min_length`, `max_length`, `min_items`, `max_items`, `format`, `rename`, `limit`, `sensitive`, `allow_float`, `resource`";
pub(crate) const RESOURCE_KIND: &str = "`resource` takes an optional kind: `#[arg(resource)]` (the kind is the parameter's name) or `#[arg(resource = \"order\")]`, so that tools naming the same kind of resource wait for each other";
pub(crate) const RECONCILE_WITHOUT_SIDE_EFFECT: &str = "`reconcile` requires `side_effect`: only a call that changes something can end with an unknown outcome; write #[tool(side_effect, reconcile = path)]";
pub(crate) const RECONCILE_OPAQUE_OUTPUT: &str = "a tool with `reconcile` names its output type: its `reconcile` finds that same `T`, `async fn(&Ctx<S>, &str) -> Result<Option<T>, E>`, which `impl Trait` cannot name; write the type";
pub(crate) const RESOURCE_WITHOUT_SIDE_EFFECT: &str = "`resource` requires `#[tool(side_effect)]`: it makes calls that change one resource wait for each other; a tool that changes nothing needs no lock";
pub(crate) const HIGH_RISK_WITHOUT_SIDE_EFFECT: &str = "`high_risk` requires `side_effect`: write #[tool(side_effect, high_risk)]; a tool that changes nothing needs no approval";
pub(crate) const MISSING_DOC: &str = "a tool needs a doc comment: it is the description the model reads; add `/// What this tool does, and when to call it.` above the function";
pub(crate) const RECEIVER: &str = "a tool cannot take `self`: put #[tool] on a free function, outside the `impl`, and pass state through a first parameter `ctx: &Ctx<YourState>`";
pub(crate) const SELF_TYPE: &str = "a tool cannot name `Self`: put #[tool] on a free function, outside the `impl`, and pass state through a first parameter `ctx: &Ctx<YourState>`";
pub(crate) const NOT_A_FN: &str = "#[tool] goes on a free function: `/// What it does.` then `#[tool] fn name(...) -> Result<T, E> { ... }`";
pub(crate) const NO_BODY: &str = "#[tool] goes on a free function with a body, not on a declaration in a `trait`: write the function outside the trait";
pub(crate) const TOOL_TWICE: &str = "#[tool] is given twice: keep one";
pub(crate) const MISSING_PARAM_DOC: &str = "a tool parameter needs a doc comment: it is the field's description in the schema, and every error about the field repeats it to the model; add `/// What this is, with its unit.` above the parameter";
pub(crate) const ARG_ON_CONTEXT: &str =
    "#[arg] does not apply to the context: the model never sends it; remove the attribute";
pub(crate) const GENERICS: &str =
    "a tool cannot be generic: its arguments must have one JSON Schema; use concrete types";
pub(crate) const IMPL_TRAIT: &str = "a tool parameter cannot be `impl Trait`: its argument needs one JSON Schema; use a concrete type";
pub(crate) const SERDE_ON_PARAM: &str = "`#[serde(...)]` does not reach a tool's arguments: `#[tool]` writes the argument struct itself. To send the field under another name, write `#[arg(rename = \"...\")]`; for a default, make the parameter `Option<T>` (the model may leave it out) and use `.unwrap_or(...)` in the body; to keep a value from the model, take it from the context (`ctx: &Ctx<S>`)";
pub(crate) const SCHEMARS_ON_PARAM: &str = "`#[schemars(...)]` does not reach a tool's schema: `#[tool]` writes it from the parameter's type, its doc comment and `#[arg(...)]` (`pattern`, `min`, `max`, `min_length`, `format`, ...)";
pub(crate) const STATE_EXTRACTOR: &str = "a tool takes the application's state as its first parameter `ctx: &Ctx<S>` (then `ctx.state`), not as an extractor like axum's `State(x): State<S>`";
pub(crate) const PATTERN_PARAM: &str = "a tool parameter must be a plain name, it becomes the argument's field name; bind the whole value and destructure it in the body";
pub(crate) const RETURN_TYPE: &str = "a tool must return `Result<T, E>` where `T: Serialize` and `E: Into<ToolError>` (for example `Result<Refund, Rejection>`)";
pub(crate) const CTX_NOT_FIRST: &str = "only the first parameter may be the context `&Ctx<...>`; every other parameter is an argument the model sends, by value";
pub(crate) const VARIADIC: &str = "a tool cannot be variadic";
pub(crate) const CONST_UNSAFE: &str = "a tool cannot be `const`, `unsafe` or `extern`: remove the keyword; the dispatcher calls a tool as a plain Rust function (`async` or not)";

pub(crate) fn quoted_path(key: &str, path: &str) -> String {
    format!("`{key}` takes a path, not a string: write `{key} = {path}`, without quotes")
}

pub(crate) fn expected_path(key: &str) -> String {
    match key {
        "crate" => "`crate` takes the path of the toolcall crate, for example `crate = ::toolcall`"
            .to_owned(),
        "reconcile" => {
            "`reconcile` takes the path of a function, for example `reconcile = find_refund`"
                .to_owned()
        }
        _ => "`check` takes the path of a function, for example `check = check_refund`".to_owned(),
    }
}

pub(crate) fn unquoted_name(key: &str, written: &str) -> String {
    format!("`{key}` takes a string: write `{key} = \"{written}\"`, in quotes")
}

pub(crate) fn unknown_key(key: &str, expected: &str) -> String {
    format!("unknown key `{key}`: {expected}")
}

/// An `#[arg(...)]` key from clap or serde that asks for a default.
pub(crate) fn default_key(key: &str) -> String {
    format!(
        "a tool parameter has no default (`{key}`): make it `Option<T>`, so the model may leave it \
         out, and write the default in the body (`limit.unwrap_or(20)`), saying it in the doc \
         comment; {}",
        ARG_KEYS
    )
}

pub(crate) const LIMIT_NAMES: &str = "`limits = [...]` names the caller limits the tool's check compares in its own units, for example `limits = [\"max_credit_eur_cents\"]`, read with `ctx.within_limit(\"max_credit_eur_cents\", value)`";

pub(crate) fn limit_twice(name: &str) -> String {
    format!(
        "the limit `{name}` is both in `limits = [...]` and an argument's `limit`: an argument's limit compares the raw value, a named one is compared by the check in its own units; keep one"
    )
}

pub(crate) const UNTRUSTED_PARTS: &str = "`untrusted_output = [...]` lists the parts of the output that carry text strangers wrote, as JSON pointers into it, for example `untrusted_output = [\"/customer_note\"]`; write `untrusted_output` alone when the whole output is untrusted";

pub(crate) fn untrusted_pointer(pointer: &str) -> String {
    format!(
        "`{pointer}` is not a JSON pointer into the output: write `/{}` (a part is named from the output's root, each step after a `/`)",
        pointer.trim_start_matches('/')
    )
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

pub(crate) fn lifetime_param(ctx: Option<&str>) -> String {
    match ctx {
        Some(ctx) => format!(
            "a tool takes no lifetime parameters: remove them and write `{ctx}`; the context is borrowed for the call, its lifetime goes without saying"
        ),
        None => "a tool takes no lifetime parameters: remove them; its arguments are owned values"
            .to_owned(),
    }
}

pub(crate) fn ctx_mut(ctx: &str) -> String {
    format!(
        "take the context by shared reference: `{ctx}`; for state that changes, put a `Mutex` or an atomic inside the state"
    )
}

pub(crate) fn ctx_lifetime(ctx: &str) -> String {
    format!("the context's lifetime goes without saying: write `{ctx}`")
}

pub(crate) fn ctx_without_state(name: &str) -> String {
    format!(
        "the context names the application's state: `{name}: &Ctx<YourState>`, the state the dispatcher is built with"
    )
}

pub(crate) fn ctx_by_value(ctx: &str, first: bool) -> String {
    if first {
        format!("take the context by reference: `{ctx}`")
    } else {
        format!("take the context by reference, as the first parameter: `{ctx}`")
    }
}

pub(crate) fn arg_by_ref(name: &str, owned: &str) -> String {
    format!(
        "a tool's arguments are owned values, read from the model's JSON: write `{name}: {owned}`; only the context `&Ctx<...>` is borrowed"
    )
}

pub(crate) fn reserved_json_name(name: &str) -> String {
    format!(
        "`rename = \"{name}\"` names the field like a value the host sets, never the model; pick another name"
    )
}

pub(crate) fn bound_out_of_range(key: &str, value: &str, ty: &str, range: &str) -> String {
    format!(
        "`{key} = {value}` is outside the range of `{ty}`, {range}: the parameter cannot hold it; write a bound in that range, or widen the type"
    )
}

pub(crate) fn bound_leaves_nothing(key: &str, value: &str, ty: &str, range: &str) -> String {
    format!(
        "`{key} = {value}` leaves no value of `{ty}` ({range}) that passes; fix the bound or widen the type"
    )
}

pub(crate) fn bound_not_whole(key: &str, value: &str, ty: &str, fix: &str) -> String {
    format!("`{key} = {value}` on an integer parameter (`{ty}`): write a whole number, `{fix}`")
}

pub(crate) fn bound_not_exact(key: &str, value: &str, ty: &str) -> String {
    let exact = if ty == "f32" {
        "2^24 = 16777216"
    } else {
        "2^53 = 9007199254740992"
    };
    format!(
        "`{key} = {value}` is not exactly representable as `{ty}`, so the validator would compare with another number; write a bound `{ty}` holds exactly (every integer up to {exact} is one)"
    )
}

pub(crate) fn bound_too_wide(key: &str, value: &str) -> String {
    format!(
        "`{key} = {value}` is beyond what a bound can hold, an `i64` from {} to {}: write a bound in that range",
        i64::MIN,
        i64::MAX
    )
}

pub(crate) fn allow_float_unneeded(name: &str) -> String {
    format!(
        "`allow_float` is not needed here: it allows a float whose name says money, and `{name}` is not one; remove it"
    )
}

pub(crate) fn bad_args_name(name: &str) -> String {
    format!(
        "`args = \"{name}\"` must be a type name, for example `args = \"CreateEventInput\"`: it names the generated argument struct"
    )
}

pub(crate) fn args_name_is_fn(name: &str, suggestion: &str) -> String {
    format!(
        "`args = \"{name}\"` is the function's own name, which the tool's hidden type already has; pick another, for example `args = \"{suggestion}\"`"
    )
}

pub(crate) const BAD_TIMEOUT: &str =
    "`timeout_ms` is a whole number of milliseconds from 1, for example `timeout_ms = 5000`";

pub(crate) const IDEMPOTENT_BACKEND_WITHOUT_SIDE_EFFECT: &str = "`idempotent_backend` requires `side_effect`: write #[tool(side_effect, idempotent_backend)]; a tool that changes nothing is never in doubt";
