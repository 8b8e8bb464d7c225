//! The typed view of a `#[tool]` function: what the later phases work from.

use syn::{Attribute, FnArg, Ident, ItemFn, Meta, Pat, ReturnType, Type};

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
        let description = doc_text(&item.attrs);
        if description.is_empty() {
            cx.error_spanned_by(&item.sig.ident, msg::MISSING_DOC);
        }
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
            let docs = doc_text(&typed.attrs);
            typed.attrs.retain(|a| {
                if a.path().is_ident("arg") {
                    arg.parse_into(a, cx);
                    false
                } else {
                    !a.path().is_ident("doc")
                }
            });
            if let Type::Reference(_) = &*typed.ty {
                if index == 0 {
                    context = Some((*typed.ty).clone());
                } else {
                    cx.error_spanned_by(&typed.ty, msg::CTX_NOT_FIRST);
                }
                continue;
            }
            let Pat::Ident(pat) = &*typed.pat else {
                cx.error_spanned_by(&typed.pat, msg::PATTERN_PARAM);
                continue;
            };
            if pat.by_ref.is_some() || pat.subpat.is_some() {
                cx.error_spanned_by(&typed.pat, msg::PATTERN_PARAM);
                continue;
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
