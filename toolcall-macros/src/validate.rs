//! Checks that span several parts of a tool: flags that need each other,
//! names, constraints that contradict.

use syn::{FnArg, GenericParam, Type};

use crate::ctxt::Ctxt;
use crate::model::{Param, ToolFn};
use crate::msg;

/// Parameter names the host owns.
const RESERVED: [&str; 3] = ["confirmed", "idempotency_key", "session_id"];

pub(crate) fn check(tool: &ToolFn, cx: &mut Ctxt) {
    let sig = &tool.item.sig;
    if let (Some(high_risk), None) = (tool.attr.high_risk, tool.attr.side_effect) {
        cx.push(syn::Error::new(
            high_risk,
            msg::HIGH_RISK_WITHOUT_SIDE_EFFECT,
        ));
    }
    if let (Some(reconcile), None) = (&tool.attr.reconcile, tool.attr.side_effect) {
        cx.error_spanned_by(reconcile, msg::RECONCILE_WITHOUT_SIDE_EFFECT);
    }
    if tool.attr.side_effect.is_none() {
        for param in &tool.params {
            if let Some((span, _)) = &param.arg.resource {
                cx.push(syn::Error::new(*span, msg::RESOURCE_WITHOUT_SIDE_EFFECT));
            }
        }
    }
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
    for param in &sig.generics.params {
        if !matches!(param, GenericParam::Lifetime(_)) {
            cx.error_spanned_by(param, msg::GENERICS);
        }
    }
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
    if let Some(version) = &tool.attr.version
        && !matches!(version.base10_parse::<u32>(), Ok(1..))
    {
        cx.error_spanned_by(version, msg::BAD_VERSION);
    }
    if let Some(timeout) = &tool.attr.timeout_ms
        && !matches!(timeout.base10_parse::<u64>(), Ok(1..))
    {
        cx.error_spanned_by(timeout, msg::BAD_TIMEOUT);
    }
    let mut json_names: Vec<String> = Vec::new();
    for param in &tool.params {
        let name = param.name();
        if RESERVED.contains(&name.as_str()) {
            cx.error_spanned_by(&param.ident, msg::reserved_param(&name));
        }
        let arg = &param.arg;
        if let Some(pattern) = &arg.pattern
            && let Err(error) = regex::Regex::new(&pattern.value())
        {
            cx.error_spanned_by(pattern, msg::invalid_pattern(&error));
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
        if arg.allow_float.is_none() && says_money(&name) && is_spelled_float(&param.ty) {
            cx.error_spanned_by(&param.ident, msg::money_float(&name));
        }
    }
}

/// The formats `Format::from_name` in the runtime knows.
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
