//! Checks that span several parts of a tool: flags that need each other,
//! names, constraints that contradict.

use syn::{FnArg, GenericParam, Type};

use crate::ctxt::Ctxt;
use crate::model::ToolFn;
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
    let name = tool.tool_name();
    let valid_name = (1..=64).contains(&name.len())
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
    for param in &tool.params {
        let name = param.name();
        if RESERVED.contains(&name.as_str()) {
            cx.error_spanned_by(&param.ident, msg::reserved_param(&name));
        }
        if let Some(pattern) = &param.arg.pattern
            && let Err(error) = regex::Regex::new(&pattern.value())
        {
            cx.error_spanned_by(pattern, msg::invalid_pattern(&error));
        }
        if let (Some((min, _)), Some((max, max_span))) = (&param.arg.min, &param.arg.max)
            && min.as_f64() > max.as_f64()
        {
            cx.push(syn::Error::new(
                *max_span,
                msg::min_above_max(&min.text(), &max.text()),
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
