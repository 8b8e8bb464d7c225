//! Checks that span several parts of a tool: flags that need each other,
//! names, constraints that contradict.

use proc_macro2::{Ident, TokenStream, TokenTree};
use quote::ToTokens as _;
use syn::{FnArg, GenericParam, Type};

use crate::attr::{Keyed, Number};
use crate::ctxt::Ctxt;
use crate::internals::pascal_case;
use crate::model::{Param, ToolFn, type_text};
use crate::msg;

/// Parameter names the host owns.
const RESERVED: [&str; 3] = ["confirmed", "idempotency_key", "session_id"];

const UNTRUSTED_HIGH_RISK: &str = "`untrusted_output` marks a tool that reads text strangers wrote (messages, reviews, web pages), not one that changes things: keep it on the reading tool; a `high_risk` tool is asked about anyway";

pub(crate) fn check(tool: &ToolFn, cx: &mut Ctxt) {
    check_flags(tool, cx);
    check_name(tool, cx);
    check_signature(tool, cx);
    check_args_name(tool, cx);
    check_types(tool, cx);
    check_limits(tool, cx);
    check_named_limits(tool, cx);
    check_params(tool, cx);
}

/// Flags that need each other, or exclude each other.
fn check_flags(tool: &ToolFn, cx: &mut Ctxt) {
    if let (Some(high_risk), None) = (tool.attr.high_risk, tool.attr.side_effect) {
        cx.push(syn::Error::new(
            high_risk,
            msg::HIGH_RISK_WITHOUT_SIDE_EFFECT,
        ));
    }
    if let (Some(untrusted), Some(_)) = (tool.attr.untrusted_output, tool.attr.high_risk) {
        // A tool whose output strangers wrote is where the model reads
        // them, not what they make it do: marking the sink is the mistake.
        cx.push(syn::Error::new(untrusted, UNTRUSTED_HIGH_RISK));
    }
    if let (Some(keyed), None) = (tool.attr.idempotent_backend, tool.attr.side_effect) {
        cx.push(syn::Error::new(
            keyed,
            msg::IDEMPOTENT_BACKEND_WITHOUT_SIDE_EFFECT,
        ));
    }
    if let (Some(approvals), None) = (&tool.attr.approvals, tool.attr.high_risk) {
        cx.error_spanned_by(approvals, msg::APPROVALS_WITHOUT_HIGH_RISK);
    }
    if let (Some(repeats), Some(_)) = (&tool.attr.max_repeats, tool.attr.side_effect) {
        cx.error_spanned_by(repeats, msg::MAX_REPEATS_ON_SIDE_EFFECT);
    }
    if let (Some(reconcile), None) = (&tool.attr.reconcile, tool.attr.side_effect) {
        cx.error_spanned_by(reconcile, msg::RECONCILE_WITHOUT_SIDE_EFFECT);
    }
    if let (Some(_), Some(async_check)) = (&tool.attr.check, &tool.attr.async_check) {
        cx.error_spanned_by(async_check, msg::TWO_CHECKS);
    }
    if tool.attr.side_effect.is_none() {
        for param in &tool.params {
            if let Some((span, _)) = &param.arg.resource {
                cx.push(syn::Error::new(*span, msg::RESOURCE_WITHOUT_SIDE_EFFECT));
            }
        }
    }
}

/// The tool's name, as every provider accepts it.
fn check_name(tool: &ToolFn, cx: &mut Ctxt) {
    let sig = &tool.item.sig;
    let name = tool.tool_name();
    // What every provider accepts: OpenAI and Anthropic take
    // `^[a-zA-Z0-9_-]{1,64}$`, Gemini also wants a letter or `_` first.
    let valid_name = (1..=64).contains(&name.len())
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid_name {
        match &tool.attr.name {
            Some(lit) => cx.error_spanned_by(lit, msg::bad_tool_name(&name)),
            None => cx.error_spanned_by(&sig.ident, msg::bad_tool_name(&name)),
        }
    }
}

/// What the function's signature cannot have: `const`, `unsafe`, an ABI,
/// variadics, generics, `Self`.
fn check_signature(tool: &ToolFn, cx: &mut Ctxt) {
    let sig = &tool.item.sig;
    if let Some(token) = sig.constness.as_ref() {
        cx.error_spanned_by(token, msg::CONST_UNSAFE);
    }
    if let Some(token) = sig.unsafety.as_ref() {
        cx.error_spanned_by(token, msg::CONST_UNSAFE);
    }
    if let Some(abi) = sig.abi.as_ref() {
        cx.error_spanned_by(abi, msg::CONST_UNSAFE);
    }
    if let Some(variadic) = sig.variadic.as_ref() {
        cx.error_spanned_by(variadic, msg::VARIADIC);
    }
    check_lifetimes(tool, cx);
    for param in &sig.generics.params {
        if !matches!(param, GenericParam::Lifetime(_)) {
            cx.error_spanned_by(param, msg::GENERICS);
        }
    }
    if sig.receiver().is_none()
        && let Some(token) = find_self_type(&sig.to_token_stream())
    {
        cx.push(syn::Error::new(token.span(), msg::SELF_TYPE));
    }
}

/// Lifetime parameters: the error names the context's type without them.
fn check_lifetimes(tool: &ToolFn, cx: &mut Ctxt) {
    let sig = &tool.item.sig;
    let lifetimes: Vec<&GenericParam> = sig
        .generics
        .params
        .iter()
        .filter(|p| matches!(p, GenericParam::Lifetime(_)))
        .collect();
    if !lifetimes.is_empty() {
        let ctx = tool.context.as_ref().map(|ty| {
            let name = sig
                .inputs
                .first()
                .and_then(|input| match input {
                    FnArg::Typed(typed) => match &*typed.pat {
                        syn::Pat::Ident(pat) => Some(pat.ident.to_string()),
                        _ => None,
                    },
                    FnArg::Receiver(_) => None,
                })
                .unwrap_or_else(|| "ctx".to_owned());
            format!("{name}: {}", type_text(&without_lifetime(ty)))
        });
        let mut generics = quote::quote!();
        for lifetime in &lifetimes {
            quote::ToTokens::to_tokens(lifetime, &mut generics);
        }
        cx.error_spanned_by(generics, msg::lifetime_param(ctx.as_deref()));
    }
}

/// `args = "..."`: an identifier, other than the function's name.
fn check_args_name(tool: &ToolFn, cx: &mut Ctxt) {
    if let Some(args) = &tool.attr.args {
        let name = args.value();
        match syn::parse_str::<Ident>(&name) {
            Ok(_) if name == tool.ident.to_string().trim_start_matches("r#") => cx
                .error_spanned_by(
                    args,
                    msg::args_name_is_fn(&name, &format!("{}Input", pascal_case(&name))),
                ),
            Ok(_) => {}
            Err(_) => cx.error_spanned_by(args, msg::bad_args_name(&name)),
        }
    }
}

/// A return type, and no `impl Trait` among the parameters, nor in the
/// output of a tool with `reconcile`.
fn check_types(tool: &ToolFn, cx: &mut Ctxt) {
    let sig = &tool.item.sig;
    if !tool.returns_something() {
        cx.error_spanned_by(&sig.ident, msg::RETURN_TYPE);
    }
    for input in &sig.inputs {
        if let FnArg::Typed(typed) = input
            && contains_impl_trait(&typed.ty)
        {
            cx.error_spanned_by(&typed.ty, msg::IMPL_TRAIT);
        }
    }
    // Its `reconcile` finds the same output: the type must have a name.
    if let (Some(_), syn::ReturnType::Type(_, output)) = (&tool.attr.reconcile, &sig.output)
        && contains_impl_trait(output)
    {
        cx.error_spanned_by(output, msg::RECONCILE_OPAQUE_OUTPUT);
    }
}

/// `version`, `timeout_ms`, `max_output_bytes` and `max_repeats` in their
/// ranges.
fn check_limits(tool: &ToolFn, cx: &mut Ctxt) {
    let attr = &tool.attr;
    for (number, allowed, message) in [
        (&attr.version, 1..=u64::from(u32::MAX), msg::BAD_VERSION),
        (&attr.timeout_ms, 1..=u64::MAX, msg::BAD_TIMEOUT),
        (
            &attr.max_output_bytes,
            256..=u64::MAX,
            msg::BAD_OUTPUT_BUDGET,
        ),
        (&attr.max_repeats, 1..=u64::MAX, msg::BAD_MAX_REPEATS),
        (&attr.approvals, 2..=10, msg::BAD_APPROVALS),
    ] {
        if let Some(number) = number
            && !number
                .base10_parse::<u64>()
                .is_ok_and(|n| allowed.contains(&n))
        {
            cx.error_spanned_by(number, message);
        }
    }
}

/// A limit named in `limits = [...]` is not also an argument's `limit`: the
/// argument's would compare the raw value on top of the check's own units.
fn check_named_limits(tool: &ToolFn, cx: &mut Ctxt) {
    for name in &tool.attr.limits {
        if tool.params.iter().any(|param| {
            param
                .arg
                .limit
                .as_ref()
                .is_some_and(|limit| limit.value() == name.value())
        }) {
            cx.error_spanned_by(name, msg::limit_twice(&name.value()));
        }
    }
}

/// Each parameter: its name, its constraints, its JSON name unique.
fn check_params(tool: &ToolFn, cx: &mut Ctxt) {
    let mut json_names: Vec<String> = Vec::new();
    for param in &tool.params {
        let name = param.name();
        let arg = &param.arg;
        if RESERVED.contains(&name.as_str()) {
            cx.error_spanned_by(&param.ident, msg::reserved_param(&name));
        } else if let Some(rename) = &arg.rename
            && RESERVED.contains(&rename.value().as_str())
        {
            cx.error_spanned_by(rename, msg::reserved_json_name(&rename.value()));
        }
        if let Some(pattern) = &arg.pattern {
            let source = pattern.value();
            if let Err(message) = crate::pattern::check(&source) {
                cx.error_spanned_by(pattern, message);
            } else if let Err(error) = regex::Regex::new(&source) {
                cx.error_spanned_by(pattern, msg::invalid_pattern(&error));
            }
        }
        if let Some(format) = &arg.format
            && !FORMATS.contains(&format.value().as_str())
        {
            cx.error_spanned_by(format, msg::unknown_format(&format.value()));
        }
        if let Some(rename) = &arg.rename
            && rename.value().is_empty()
        {
            cx.error_spanned_by(rename, msg::EMPTY_RENAME);
        }
        let json_name = param.json_name();
        if json_names.contains(&json_name) {
            cx.error_spanned_by(&param.ident, msg::duplicate_field(&json_name));
        }
        json_names.push(json_name);
        check_bounds(param, cx);
        check_bound_types(param, cx);
        let money_float = says_money(&name) && is_spelled_float(&param.ty);
        match arg.allow_float {
            None if money_float => cx.error_spanned_by(&param.ident, msg::money_float(&name)),
            Some(span) if !money_float => {
                cx.push(syn::Error::new(span, msg::allow_float_unneeded(&name)));
            }
            _ => {}
        }
    }
}

/// The formats `StringFormat::from_name` in the runtime knows.
const FORMATS: [&str; 5] = ["email", "uuid", "date", "date-time", "uri"];

/// Words that make a parameter name mean an amount of money.
const MONEY_WORDS: [&str; 13] = [
    "amount", "price", "cost", "total", "cents", "balance", "fee", "fees", "payment", "salary",
    "tax", "refund", "subtotal",
];

fn says_money(name: &str) -> bool {
    name.to_ascii_lowercase()
        .split('_')
        .any(|word| MONEY_WORDS.contains(&word))
}

/// A float written as such (`f32`, `f64`, `Option<f64>`). This lint reads the
/// spelling on purpose: it is advice about a name and a type the reader sees.
fn is_spelled_float(ty: &Type) -> bool {
    let Type::Path(path) = ty else { return false };
    let Some(last) = path.path.segments.last() else {
        return false;
    };
    if last.ident == "f32" || last.ident == "f64" {
        return true;
    }
    match &last.arguments {
        syn::PathArguments::AngleBracketed(args) if last.ident == "Option" => {
            args.args.iter().any(|arg| match arg {
                syn::GenericArgument::Type(inner) => is_spelled_float(inner),
                _ => false,
            })
        }
        _ => false,
    }
}

/// Bounds that leave no value passing: `min = 10, max = 5`, `exclusive_min = 1, max = 1`, ...
fn check_bounds(param: &Param, cx: &mut Ctxt) {
    let arg = &param.arg;
    let lows = [
        ("min", &arg.min, false),
        ("exclusive_min", &arg.exclusive_min, true),
    ];
    let highs = [
        ("max", &arg.max, false),
        ("exclusive_max", &arg.exclusive_max, true),
    ];
    for (low_key, low, low_exclusive) in &lows {
        for (high_key, high, high_exclusive) in &highs {
            let (Some(low), Some(high)) = (low, high) else {
                continue;
            };
            let (l, h) = (low.value.as_f64(), high.value.as_f64());
            if l > h || (l == h && (*low_exclusive || *high_exclusive)) {
                cx.push(syn::Error::new(
                    high.span,
                    msg::bounds_cross(low_key, &low.value.text(), high_key, &high.value.text()),
                ));
            }
        }
    }
    for (low_key, low, high_key, high) in [
        ("min_length", &arg.min_length, "max_length", &arg.max_length),
        ("min_items", &arg.min_items, "max_items", &arg.max_items),
    ] {
        if let (Some(low), Some(high)) = (low, high)
            && low.value > high.value
        {
            cx.push(syn::Error::new(
                high.span,
                msg::bounds_cross(
                    low_key,
                    &low.value.to_string(),
                    high_key,
                    &high.value.to_string(),
                ),
            ));
        }
    }
}

fn contains_impl_trait(ty: &Type) -> bool {
    match ty {
        Type::ImplTrait(_) => true,
        Type::Reference(r) => contains_impl_trait(&r.elem),
        Type::Paren(p) => contains_impl_trait(&p.elem),
        Type::Group(g) => contains_impl_trait(&g.elem),
        Type::Slice(s) => contains_impl_trait(&s.elem),
        Type::Array(a) => contains_impl_trait(&a.elem),
        Type::Tuple(t) => t.elems.iter().any(contains_impl_trait),
        Type::Path(p) => p
            .path
            .segments
            .iter()
            .any(|segment| match &segment.arguments {
                syn::PathArguments::AngleBracketed(args) => args.args.iter().any(|arg| match arg {
                    syn::GenericArgument::Type(ty) => contains_impl_trait(ty),
                    _ => false,
                }),
                _ => false,
            }),
        _ => false,
    }
}

/// The first `Self` in the signature: a function written in an `impl`.
fn find_self_type(tokens: &TokenStream) -> Option<Ident> {
    for token in tokens.clone() {
        match token {
            TokenTree::Ident(ident) if ident == "Self" => return Some(ident),
            TokenTree::Group(group) => {
                if let Some(found) = find_self_type(&group.stream()) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

/// `ty` without the lifetime of its outer reference.
fn without_lifetime(ty: &Type) -> Type {
    let mut ty = ty.clone();
    if let Type::Reference(reference) = &mut ty {
        reference.lifetime = None;
    }
    ty
}

/// A numeric type named by its spelling, through `Option`.
enum Numeric {
    Int {
        name: String,
        min: i128,
        max: i128,
        range: String,
    },
    Float {
        name: String,
        max: f64,
        range: String,
    },
}

fn numeric_type(ty: &Type) -> Option<Numeric> {
    let Type::Path(path) = ty else { return None };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    if last.ident == "Option" {
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        return match args.args.first()? {
            syn::GenericArgument::Type(inner) if args.args.len() == 1 => numeric_type(inner),
            _ => None,
        };
    }
    // `u32`, or `std::primitive::u32`; a type of the user's named like a
    // primitive in some module is not one.
    let plain = path.path.segments.len() == 1
        || (path.path.segments.len() == 3
            && ["std", "core"]
                .iter()
                .any(|c| path.path.segments[0].ident == c)
            && path.path.segments[1].ident == "primitive");
    if !plain || !last.arguments.is_none() {
        return None;
    }
    let name = last.ident.to_string();
    let int = |min: i128, max: i128, range: String| {
        Some(Numeric::Int {
            name: name.clone(),
            min,
            max,
            range,
        })
    };
    macro_rules! int {
        ($t:ty) => {
            int(
                <$t>::MIN as i128,
                <$t>::MAX as i128,
                format!("from {} to {}", <$t>::MIN, <$t>::MAX),
            )
        };
    }
    match name.as_str() {
        "i8" => int!(i8),
        "i16" => int!(i16),
        "i32" => int!(i32),
        "i64" => int!(i64),
        "isize" => int!(i64),
        "i128" => int!(i128),
        "u8" => int!(u8),
        "u16" => int!(u16),
        "u32" => int!(u32),
        "u64" => int!(u64),
        "usize" => int!(u64),
        "u128" => int(0, i128::MAX, format!("from 0 to {}", u128::MAX)),
        "f32" => Some(Numeric::Float {
            name,
            max: f32::MAX as f64,
            range: format!("from {:e} to {:e}", f32::MIN, f32::MAX),
        }),
        "f64" => Some(Numeric::Float {
            name,
            max: f64::MAX,
            range: format!("from {:e} to {:e}", f64::MIN, f64::MAX),
        }),
        _ => None,
    }
}

/// Each bound fits the parameter's type, and a bound's own range (`i64`).
fn check_bound_types(param: &Param, cx: &mut Ctxt) {
    let arg = &param.arg;
    let numeric = numeric_type(&param.ty);
    let bounds = [
        ("min", &arg.min),
        ("max", &arg.max),
        ("exclusive_min", &arg.exclusive_min),
        ("exclusive_max", &arg.exclusive_max),
    ];
    for (key, bound) in bounds {
        let Some(bound) = bound else { continue };
        if let Some(message) = bound_problem(key, bound, numeric.as_ref()) {
            cx.push(syn::Error::new(bound.span, message));
        }
    }
}

fn bound_problem(key: &str, bound: &Keyed<Number>, numeric: Option<&Numeric>) -> Option<String> {
    let text = &bound.text;
    match (numeric, &bound.value) {
        (Some(Numeric::Int { name, .. }), Number::Float(f)) => {
            let whole = f.fract() == 0.0;
            let fixed = match (whole, key) {
                (true, _) => format!("{key} = {}", *f as i128),
                (false, "min" | "exclusive_min") => format!("min = {}", f.ceil() as i128),
                (false, _) => format!("max = {}", f.floor() as i128),
            };
            Some(msg::bound_not_whole(key, text, name, &fixed))
        }
        (
            Some(Numeric::Int {
                name,
                min,
                max,
                range,
            }),
            Number::Int(n),
        ) => {
            if n < min || n > max {
                Some(msg::bound_out_of_range(key, text, name, range))
            } else if (key == "exclusive_min" && n == max) || (key == "exclusive_max" && n == min) {
                Some(msg::bound_leaves_nothing(key, text, name, range))
            } else if i64::try_from(*n).is_err() {
                Some(msg::bound_too_wide(key, text))
            } else {
                None
            }
        }
        (Some(Numeric::Float { name, max, range }), Number::Float(f)) => (!f.is_finite()
            || f.abs() > *max)
            .then(|| msg::bound_out_of_range(key, text, name, range)),
        (Some(Numeric::Float { name, .. }), Number::Int(n)) => {
            // A float holds every integer up to its mantissa exactly, and
            // some beyond; the validator compares the bound as that float.
            let exact = match name.as_str() {
                "f32" => (*n as f32) as i128 == *n,
                _ => (*n as f64) as i128 == *n,
            };
            if i64::try_from(*n).is_err() {
                Some(msg::bound_too_wide(key, text))
            } else if !exact {
                Some(msg::bound_not_exact(key, text, name))
            } else {
                None
            }
        }
        (None, Number::Int(n)) => i64::try_from(*n)
            .is_err()
            .then(|| msg::bound_too_wide(key, text)),
        (None, Number::Float(f)) => {
            (!f.is_finite()).then(|| msg::bound_out_of_range(key, text, "f64", "a finite number"))
        }
    }
}
