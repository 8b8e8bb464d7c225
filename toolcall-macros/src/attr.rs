//! Reads our own keys: `#[tool(...)]` on the function, `#[arg(...)]` on its
//! parameters. Anything else is passed through untouched.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens as _;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::spanned::Spanned as _;
use syn::{Expr, ExprLit, ExprUnary, Lit, LitStr, Path, UnOp};

use crate::ctxt::Ctxt;
use crate::msg;

/// `#[tool(side_effect, high_risk, untrusted_output, idempotent_backend, check = path, async_check = path, preview = path, name = "...", args = "...", max_repeats = N, approvals = N, crate = path)]`.
#[derive(Default)]
pub(crate) struct ToolAttr {
    pub side_effect: Option<Span>,
    pub high_risk: Option<Span>,
    /// What the tool returns was written by strangers: it taints the session.
    pub untrusted_output: Option<Span>,
    /// `untrusted_output = ["/pointer", ...]`: only these parts of the
    /// output (JSON pointers into it) carry untrusted text.
    pub untrusted_parts: Vec<LitStr>,
    /// `limits = ["name", ...]`: caller limits the check reads by name.
    pub limits: Vec<LitStr>,
    /// The backend applies one idempotency key at most once: a call whose
    /// outcome is unknown may run again under its key. Beside `reconcile`,
    /// it is tried first (see `tool`'s doc).
    pub idempotent_backend: Option<Span>,
    pub check: Option<Path>,
    /// `async fn(&Args, &Ctx<S>) -> Result<(), E>`: the business check that
    /// awaits (a database, a service), run where `check` is.
    pub async_check: Option<Path>,
    /// What a dry run of the call says it would do.
    pub preview: Option<Path>,
    /// `async fn(&Ctx<S>, &str) -> Result<Option<T>, E>`, `T` the tool's
    /// output: what became of a call whose outcome is unknown, asked of the
    /// backend by the call's idempotency key.
    pub reconcile: Option<Path>,
    pub name: Option<LitStr>,
    pub version: Option<syn::LitInt>,
    pub timeout_ms: Option<syn::LitInt>,
    pub max_output_bytes: Option<syn::LitInt>,
    /// How many identical calls of a read-only tool a session may make
    /// before `LOOP_DETECTED`, instead of the dispatcher's setting.
    pub max_repeats: Option<syn::LitInt>,
    /// How many distinct people must approve a call of this high-risk tool
    /// (2 to 10).
    pub approvals: Option<syn::LitInt>,
    /// The name of the generated argument struct, instead of `<Name>Args`.
    pub args: Option<LitStr>,
    pub krate: Option<Path>,
}

impl ToolAttr {
    pub(crate) fn parse(args: TokenStream, cx: &mut Ctxt) -> ToolAttr {
        let mut attr = ToolAttr::default();
        let parser = syn::meta::parser(|meta| {
            let key = meta.path.clone();
            let key_name = path_name(&key);
            match key_name.as_str() {
                "side_effect" => set(cx, &mut attr.side_effect, &key, key.span()),
                "high_risk" => set(cx, &mut attr.high_risk, &key, key.span()),
                "untrusted_output" => {
                    set(cx, &mut attr.untrusted_output, &key, key.span());
                    if meta.input.peek(syn::Token![=]) {
                        attr.untrusted_parts = untrusted_parts(meta.value()?.parse()?, cx);
                    }
                }
                "idempotent_backend" => set(cx, &mut attr.idempotent_backend, &key, key.span()),
                "limits" => {
                    if !attr.limits.is_empty() {
                        cx.error_spanned_by(&key, msg::duplicate_key("limits"));
                    }
                    attr.limits = limit_names(meta.value()?.parse()?, cx);
                }
                "check" | "async_check" | "reconcile" | "preview" | "crate" => {
                    let expr: Expr = meta.value()?.parse()?;
                    let slot = match key_name.as_str() {
                        "check" => &mut attr.check,
                        "async_check" => &mut attr.async_check,
                        "reconcile" => &mut attr.reconcile,
                        "preview" => &mut attr.preview,
                        _ => &mut attr.krate,
                    };
                    match expr {
                        Expr::Path(path) if path.qself.is_none() => set(cx, slot, &key, path.path),
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(text),
                            ..
                        }) => {
                            cx.error_spanned_by(&text, msg::quoted_path(&key_name, &text.value()))
                        }
                        other if key_name == "preview" => cx.error_spanned_by(other, PREVIEW_PATH),
                        other => cx.error_spanned_by(other, msg::expected_path(&key_name)),
                    }
                }
                "name" | "args" => {
                    let expr: Expr = meta.value()?.parse()?;
                    let slot = match key_name.as_str() {
                        "name" => &mut attr.name,
                        _ => &mut attr.args,
                    };
                    match expr {
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(text),
                            ..
                        }) => set(cx, slot, &key, text),
                        other => {
                            let written = other.to_token_stream().to_string().replace(' ', "");
                            cx.error_spanned_by(other, msg::unquoted_name(&key_name, &written));
                        }
                    }
                }
                "version" | "timeout_ms" | "max_output_bytes" | "max_repeats" | "approvals" => {
                    let expr: Expr = meta.value()?.parse()?;
                    let slot = match key_name.as_str() {
                        "version" => &mut attr.version,
                        "max_output_bytes" => &mut attr.max_output_bytes,
                        "max_repeats" => &mut attr.max_repeats,
                        "approvals" => &mut attr.approvals,
                        _ => &mut attr.timeout_ms,
                    };
                    match expr {
                        Expr::Lit(ExprLit {
                            lit: Lit::Int(number),
                            ..
                        }) => set(cx, slot, &key, number),
                        other => cx.error_spanned_by(
                            other,
                            match key_name.as_str() {
                                "version" => msg::BAD_VERSION,
                                "max_output_bytes" => msg::BAD_OUTPUT_BUDGET,
                                "max_repeats" => msg::BAD_MAX_REPEATS,
                                "approvals" => msg::BAD_APPROVALS,
                                _ => msg::BAD_TIMEOUT,
                            },
                        ),
                    }
                }
                _ => {
                    cx.error_spanned_by(&key, msg::unknown_key(&key_name, msg::TOOL_KEYS));
                    skip_value(&meta)?;
                }
            }
            Ok(())
        });
        if let Err(error) = parser.parse2(args) {
            cx.push(error);
        }
        attr
    }
}

/// The parts of `untrusted_output = [...]`: JSON pointers into the output,
/// each written once.
fn untrusted_parts(expr: Expr, cx: &mut Ctxt) -> Vec<LitStr> {
    literal_list(expr, cx, msg::UNTRUSTED_PARTS, |pointer| {
        (!pointer.starts_with('/')).then(|| msg::untrusted_pointer(pointer))
    })
}

/// The names of `limits = [...]`, each non-empty and written once.
fn limit_names(expr: Expr, cx: &mut Ctxt) -> Vec<LitStr> {
    literal_list(expr, cx, msg::LIMIT_NAMES, |name| {
        name.is_empty().then(|| msg::LIMIT_NAMES.to_owned())
    })
}

/// A non-empty list of distinct string literals, each as `refuse` allows
/// (`Some(message)` refuses one); `usage` says how the list is written.
fn literal_list(
    expr: Expr,
    cx: &mut Ctxt,
    usage: &str,
    refuse: impl Fn(&str) -> Option<String>,
) -> Vec<LitStr> {
    let Expr::Array(array) = expr else {
        cx.error_spanned_by(expr, usage);
        return Vec::new();
    };
    if array.elems.is_empty() {
        cx.error_spanned_by(&array, usage);
    }
    let mut items: Vec<LitStr> = Vec::new();
    for element in array.elems {
        let Expr::Lit(ExprLit {
            lit: Lit::Str(text),
            ..
        }) = element
        else {
            cx.error_spanned_by(element, usage);
            continue;
        };
        let value = text.value();
        if let Some(why) = refuse(&value) {
            cx.error_spanned_by(&text, why);
        } else if items.iter().any(|item| item.value() == value) {
            cx.error_spanned_by(&text, msg::duplicate_key(&value));
        } else {
            items.push(text);
        }
    }
    items
}

const PREVIEW_PATH: &str = "`preview` takes the path of a function, for example `preview = preview_refund`: `fn(&Args, &Ctx<S>) -> String`, what a dry run of the call says it would do";

/// A number written in `min = ...` / `max = ...`. Integers are read wider
/// than a bound can be, so that one out of range is an error that says so.
#[derive(Clone)]
pub(crate) enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    pub(crate) fn as_f64(&self) -> f64 {
        match self {
            Number::Int(n) => *n as f64,
            Number::Float(f) => *f,
        }
    }

    pub(crate) fn text(&self) -> String {
        match self {
            Number::Int(n) => n.to_string(),
            Number::Float(f) => f.to_string(),
        }
    }
}

/// `#[arg(...)]` on one parameter, merged over every `#[arg]` it has.
#[derive(Default)]
pub(crate) struct ArgAttr {
    pub pattern: Option<LitStr>,
    pub min: Option<Keyed<Number>>,
    pub max: Option<Keyed<Number>>,
    pub exclusive_min: Option<Keyed<Number>>,
    pub exclusive_max: Option<Keyed<Number>>,
    pub min_length: Option<Keyed<u64>>,
    pub max_length: Option<Keyed<u64>>,
    pub min_items: Option<Keyed<u64>>,
    pub max_items: Option<Keyed<u64>>,
    pub format: Option<LitStr>,
    pub rename: Option<LitStr>,
    pub limit: Option<LitStr>,
    pub sensitive: Option<Span>,
    pub allow_float: Option<Span>,
    /// `resource` (the kind is the parameter's name) or `resource = "kind"`.
    pub resource: Option<(Span, Option<LitStr>)>,
}

/// A value and the span of the key that set it.
pub(crate) struct Keyed<T> {
    pub value: T,
    pub key: Span,
    pub span: Span,
    /// The value as written, for messages: `1e39`, `-5`.
    pub text: String,
}

impl ArgAttr {
    pub(crate) fn parse_into(&mut self, attr: &syn::Attribute, cx: &mut Ctxt) {
        let result = attr.parse_nested_meta(|meta| {
            let key = meta.path.clone();
            let key_name = path_name(&key);
            match key_name.as_str() {
                "pattern" => {
                    let pattern: LitStr = meta.value()?.parse()?;
                    set(cx, &mut self.pattern, &key, pattern);
                }
                "format" => {
                    let format: LitStr = meta.value()?.parse()?;
                    set(cx, &mut self.format, &key, format);
                }
                "rename" => {
                    let rename: LitStr = meta.value()?.parse()?;
                    set(cx, &mut self.rename, &key, rename);
                }
                "min" | "max" | "exclusive_min" | "exclusive_max" => {
                    let expr: Expr = meta.value()?.parse()?;
                    let slot = match key_name.as_str() {
                        "min" => &mut self.min,
                        "max" => &mut self.max,
                        "exclusive_min" => &mut self.exclusive_min,
                        _ => &mut self.exclusive_max,
                    };
                    set_keyed(cx, slot, &key, &expr, number(&expr), msg::NUMBER_BOUND);
                }
                "min_length" | "max_length" | "min_items" | "max_items" => {
                    let expr: Expr = meta.value()?.parse()?;
                    let slot = match key_name.as_str() {
                        "min_length" => &mut self.min_length,
                        "max_length" => &mut self.max_length,
                        "min_items" => &mut self.min_items,
                        _ => &mut self.max_items,
                    };
                    set_keyed(
                        cx,
                        slot,
                        &key,
                        &expr,
                        count(&expr),
                        msg::count_expected(&key_name),
                    );
                }
                "limit" => match meta.value()?.parse::<LitStr>() {
                    Ok(name) if !name.value().is_empty() => set(cx, &mut self.limit, &key, name),
                    Ok(name) => cx.error_spanned_by(name, msg::LIMIT_NAME),
                    Err(error) => cx.push(syn::Error::new(error.span(), msg::LIMIT_NAME)),
                },
                "sensitive" => set(cx, &mut self.sensitive, &key, key.span()),
                "resource" => {
                    let kind = if meta.input.peek(syn::Token![=]) {
                        match meta.value()?.parse::<LitStr>() {
                            Ok(kind) if !kind.value().trim().is_empty() => Some(kind),
                            Ok(kind) => {
                                cx.error_spanned_by(&kind, msg::RESOURCE_KIND);
                                None
                            }
                            Err(error) => {
                                cx.push(syn::Error::new(error.span(), msg::RESOURCE_KIND));
                                None
                            }
                        }
                    } else {
                        None
                    };
                    set(cx, &mut self.resource, &key, (key.span(), kind));
                }
                "allow_float" => set(cx, &mut self.allow_float, &key, key.span()),
                "default" | "default_value" | "default_value_t" | "default_values_t" => {
                    cx.error_spanned_by(&key, msg::default_key(&key_name));
                    skip_value(&meta)?;
                }
                _ => {
                    cx.error_spanned_by(&key, msg::unknown_key(&key_name, msg::ARG_KEYS));
                    skip_value(&meta)?;
                }
            }
            Ok(())
        });
        if let Err(error) = result {
            cx.push(error);
        }
    }
}

/// Sets a value read from `expr`, or reports `error` on it when it could not be read.
fn set_keyed<T>(
    cx: &mut Ctxt,
    slot: &mut Option<Keyed<T>>,
    key: &Path,
    expr: &Expr,
    value: Option<T>,
    error: impl std::fmt::Display,
) {
    match value {
        Some(value) => set(
            cx,
            slot,
            key,
            Keyed {
                value,
                key: key.span(),
                span: expr.span(),
                text: expr.to_token_stream().to_string().replace(' ', ""),
            },
        ),
        None => cx.error_spanned_by(expr, error),
    }
}

fn set<T>(cx: &mut Ctxt, slot: &mut Option<T>, key: &Path, value: T) {
    if slot.is_some() {
        cx.error_spanned_by(key, msg::duplicate_key(&path_name(key)));
    } else {
        *slot = Some(value);
    }
}

fn skip_value(meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        let _: Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.parse_nested_meta(|_| Ok(()))?;
    }
    Ok(())
}

fn path_name(path: &Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn number(expr: &Expr) -> Option<Number> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => int.base10_parse().ok().map(Number::Int),
        Expr::Lit(ExprLit {
            lit: Lit::Float(float),
            ..
        }) => float.base10_parse().ok().map(Number::Float),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match number(expr)? {
            Number::Int(n) => n.checked_neg().map(Number::Int),
            Number::Float(f) => Some(Number::Float(-f)),
        },
        Expr::Group(group) => number(&group.expr),
        _ => None,
    }
}

fn count(expr: &Expr) -> Option<u64> {
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(int), ..
        }) => int.base10_parse().ok(),
        Expr::Group(group) => count(&group.expr),
        _ => None,
    }
}
