//! The typed view of a `#[tool]` function: what the later phases work from.

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, format_ident};
use syn::{Attribute, FnArg, GenericParam, Ident, ItemFn, Meta, Pat, ReturnType, Type};

use crate::attr::{ArgAttr, ToolAttr};
use crate::ctxt::Ctxt;
use crate::msg;

pub(crate) struct ToolFn {
    pub attr: ToolAttr,
    /// The function with our attributes and the parameters' docs removed:
    /// what is emitted again.
    pub item: ItemFn,
    pub ident: Ident,
    pub description: String,
    pub context: Option<Type>,
    pub params: Vec<Param>,
}

pub(crate) struct Param {
    pub ident: Ident,
    pub ty: Type,
    pub description: String,
    pub arg: ArgAttr,
}

impl ToolFn {
    pub(crate) fn from_item(attr: ToolAttr, mut item: ItemFn, cx: &mut Ctxt) -> ToolFn {
        let ident = item.sig.ident.clone();
        // A second `#[tool]` would expand the emitted function again.
        let before = item.attrs.len();
        item.attrs.retain(|a| !is_tool_attribute(a));
        if item.attrs.len() < before {
            cx.error_spanned_by(&item.sig.ident, msg::TOOL_TWICE);
        }
        let description = doc_text(&item.attrs);
        if description.is_empty() {
            cx.error_spanned_by(&item.sig.ident, msg::MISSING_DOC);
        }
        // Lifetime parameters are refused as a whole in `validate`; the
        // context's own lifetime is then not reported again.
        let has_lifetimes = item
            .sig
            .generics
            .params
            .iter()
            .any(|p| matches!(p, GenericParam::Lifetime(_)));
        let mut context = None;
        let mut params = Vec::new();
        for (index, input) in item.sig.inputs.iter_mut().enumerate() {
            let typed = match input {
                FnArg::Receiver(receiver) => {
                    cx.error_spanned_by(&*receiver, msg::RECEIVER);
                    continue;
                }
                FnArg::Typed(typed) => typed,
            };
            let mut arg = ArgAttr::default();
            let mut arg_attr = None;
            let docs = doc_text(&typed.attrs);
            typed.attrs.retain(|a| {
                if a.path().is_ident("arg") {
                    arg.parse_into(a, cx);
                    arg_attr.get_or_insert_with(|| a.clone());
                    false
                } else if a.path().is_ident("serde") {
                    cx.error_spanned_by(a, msg::SERDE_ON_PARAM);
                    false
                } else if a.path().is_ident("schemars") {
                    cx.error_spanned_by(a, msg::SCHEMARS_ON_PARAM);
                    false
                } else {
                    !a.path().is_ident("doc")
                }
            });
            let name = match &*typed.pat {
                Pat::Ident(pat) => pat.ident.to_string(),
                _ => "ctx".to_owned(),
            };
            let name = name.trim_start_matches("r#");
            if let Type::Reference(reference) = &*typed.ty {
                if let Some(owned) = owned_form(&reference.elem) {
                    cx.error_spanned_by(&typed.ty, msg::arg_by_ref(name, &owned));
                    continue;
                }
                if index > 0 {
                    cx.error_spanned_by(&typed.ty, msg::CTX_NOT_FIRST);
                    continue;
                }
                if let Some(attr) = &arg_attr {
                    cx.error_spanned_by(attr, msg::ARG_ON_CONTEXT);
                }
                let suggestion = format!("{name}: {}", type_text(&shared_ref(&reference.elem)));
                if reference.mutability.is_some() {
                    cx.error_spanned_by(&typed.ty, msg::ctx_mut(&suggestion));
                } else if let Some(lifetime) = &reference.lifetime
                    && lifetime.ident != "_"
                    && !has_lifetimes
                {
                    cx.error_spanned_by(lifetime, msg::ctx_lifetime(&suggestion));
                } else if names_ctx_without_state(&reference.elem) {
                    cx.error_spanned_by(&reference.elem, msg::ctx_without_state(name));
                }
                context = Some((*typed.ty).clone());
                continue;
            }
            if names_ctx(&typed.ty) {
                let suggestion = format!("{name}: {}", type_text(&shared_ref(&typed.ty)));
                cx.error_spanned_by(&typed.ty, msg::ctx_by_value(&suggestion, index == 0));
                continue;
            }
            let Pat::Ident(pat) = &*typed.pat else {
                let extractor = matches!(&*typed.pat, Pat::TupleStruct(tuple)
                    if tuple.path.segments.last().is_some_and(|s| s.ident == "State"));
                if extractor {
                    cx.error_spanned_by(&typed.pat, msg::STATE_EXTRACTOR);
                } else {
                    cx.error_spanned_by(&typed.pat, msg::PATTERN_PARAM);
                }
                continue;
            };
            if pat.by_ref.is_some() || pat.subpat.is_some() {
                cx.error_spanned_by(&typed.pat, msg::PATTERN_PARAM);
                continue;
            }
            if docs.is_empty() {
                cx.error_spanned_by(&pat.ident, msg::MISSING_PARAM_DOC);
            }
            params.push(Param {
                ident: pat.ident.clone(),
                ty: (*typed.ty).clone(),
                description: docs,
                arg,
            });
        }
        ToolFn {
            attr,
            ident,
            description,
            context,
            params,
            item,
        }
    }

    /// The argument struct's name: `args = "..."` or `<Name>Args`.
    pub(crate) fn args_ident(&self) -> Ident {
        match &self.attr.args {
            Some(name) => Ident::new(&name.value(), name.span()),
            // Spanned on the attribute: a type of the user's with this name
            // is then reported as "redefined here", under `#[tool(...)]`,
            // where `args = "..."` renames it.
            None => format_ident!(
                "{}Args",
                crate::internals::pascal_case(&self.ident.to_string()),
                span = proc_macro2::Span::call_site()
            ),
        }
    }

    /// The name the model sees: `name = "..."` or the function's, with
    /// `_v<N>` after it when the tool has a `version`.
    pub(crate) fn tool_name(&self) -> String {
        let base = match &self.attr.name {
            Some(name) => name.value(),
            None => self.ident.to_string().trim_start_matches("r#").to_owned(),
        };
        match &self.attr.version {
            Some(version) => format!("{base}_v{}", version.base10_digits()),
            None => base,
        }
    }

    pub(crate) fn returns_something(&self) -> bool {
        matches!(self.item.sig.output, ReturnType::Type(..))
    }
}

impl Param {
    /// The parameter's name in Rust.
    pub(crate) fn name(&self) -> String {
        self.ident.to_string().trim_start_matches("r#").to_owned()
    }

    /// The field's name in JSON: its `rename`, or its name.
    pub(crate) fn json_name(&self) -> String {
        match &self.arg.rename {
            Some(rename) => rename.value(),
            None => self.name(),
        }
    }
}

/// The text of the doc comments: lines trimmed, the lines of a paragraph
/// joined by spaces, paragraphs by a blank line.
pub(crate) fn doc_text(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if let Meta::NameValue(nv) = &attr.meta
            && nv.path.is_ident("doc")
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            let text = s.value();
            if text.trim().is_empty() {
                lines.push(String::new());
            }
            lines.extend(text.lines().map(|l| l.trim().to_owned()));
        }
    }
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in lines {
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
        } else {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(&line);
        }
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    paragraphs.join("\n\n")
}

/// Whether `ty` is a path whose last segment is `Ctx`: the context, by value.
fn names_ctx(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => {
            path.qself.is_none() && path.path.segments.last().is_some_and(|s| s.ident == "Ctx")
        }
        Type::Paren(paren) => names_ctx(&paren.elem),
        Type::Group(group) => names_ctx(&group.elem),
        _ => false,
    }
}

/// Whether `ty` is `Ctx` with no state named (`&Ctx`): rustc's own error
/// for it points at `Ctx`'s definition, a line of the library.
pub(crate) fn names_ctx_without_state(ty: &Type) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Ctx" && s.arguments.is_none()),
        Type::Paren(paren) => names_ctx_without_state(&paren.elem),
        Type::Group(group) => names_ctx_without_state(&group.elem),
        _ => false,
    }
}

/// `&T`, without a lifetime or `mut`, for a suggestion.
fn shared_ref(elem: &Type) -> Type {
    let elem = match elem {
        Type::Reference(reference) => &reference.elem,
        other => other,
    };
    syn::parse_quote!(&#elem)
}

/// The owned type to take instead of a borrowed argument: `String` for
/// `&str`, `Vec<T>` for `&[T]`. `None` when `ty` is not one of those (the
/// context, say).
fn owned_form(ty: &Type) -> Option<String> {
    match ty {
        Type::Slice(slice) => Some(format!("Vec<{}>", type_text(&slice.elem))),
        Type::Path(path) if path.qself.is_none() => {
            let last = path.path.segments.last()?;
            match last.ident.to_string().as_str() {
                "str" | "String" if last.arguments.is_none() => Some("String".to_owned()),
                "Vec" => Some(type_text(ty)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A type as the user would write it: `&Ctx<Cal>`, not `& Ctx < Cal >`.
pub(crate) fn type_text(ty: &Type) -> String {
    let mut text = String::new();
    write_tokens(ty.to_token_stream(), &mut text);
    text
}

fn write_tokens(tokens: TokenStream, text: &mut String) {
    let mut word_before = false;
    for token in tokens {
        match token {
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    proc_macro2::Delimiter::Parenthesis => ("(", ")"),
                    proc_macro2::Delimiter::Bracket => ("[", "]"),
                    proc_macro2::Delimiter::Brace => ("{ ", " }"),
                    proc_macro2::Delimiter::None => ("", ""),
                };
                text.push_str(open);
                write_tokens(group.stream(), text);
                text.push_str(close);
                word_before = false;
            }
            TokenTree::Ident(ident) => {
                if word_before {
                    text.push(' ');
                }
                text.push_str(&ident.to_string());
                word_before = true;
            }
            TokenTree::Literal(literal) => {
                if word_before {
                    text.push(' ');
                }
                text.push_str(&literal.to_string());
                word_before = true;
            }
            TokenTree::Punct(punct) => {
                match punct.as_char() {
                    ',' | ';' => {
                        text.push(punct.as_char());
                        text.push(' ');
                    }
                    '\'' => {
                        if word_before {
                            text.push(' ');
                        }
                        text.push('\'');
                    }
                    '=' | '-' | '+' if punct.spacing() == proc_macro2::Spacing::Alone => {
                        text.push(' ');
                        text.push(punct.as_char());
                        text.push(' ');
                    }
                    '-' => {
                        text.push(' ');
                        text.push('-');
                    }
                    other => text.push(other),
                }
                word_before = false;
            }
        }
    }
}

/// `#[tool]` or `#[toolcall::tool]`.
fn is_tool_attribute(attr: &Attribute) -> bool {
    let names: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    names == ["tool"] || names == ["toolcall", "tool"]
}
