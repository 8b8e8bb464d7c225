//! The error for an item `#[tool]` is written on that is not a function
//! with a body.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{Ident, Item, TraitItemFn};

use crate::msg;

/// The error for an item that is not a function with a body: ours when it
/// is another kind of item, syn's when it is a function that does not parse.
pub(super) fn misplaced(item: TokenStream, error: syn::Error) -> syn::Error {
    if let Ok(declaration) = syn::parse2::<TraitItemFn>(item.clone())
        && declaration.default.is_none()
    {
        return syn::Error::new_spanned(&declaration.sig.ident, msg::NO_BODY);
    }
    match syn::parse2::<Item>(item) {
        Ok(Item::Fn(_)) | Ok(Item::Verbatim(_)) | Err(_) => error,
        Ok(other) => syn::Error::new(item_span(&other), msg::NOT_A_FN),
    }
}

/// A declaration in a trait, as written but for our attributes and the
/// parameters' doc comments (which only `#[tool]` accepts), so that the
/// error above is the only one.
pub(super) fn without_our_attributes(item: TokenStream) -> TokenStream {
    match syn::parse2::<TraitItemFn>(item.clone()) {
        Ok(mut declaration) => {
            for input in &mut declaration.sig.inputs {
                if let syn::FnArg::Typed(typed) = input {
                    typed
                        .attrs
                        .retain(|a| !a.path().is_ident("arg") && !a.path().is_ident("doc"));
                }
            }
            declaration.into_token_stream()
        }
        Err(_) => item,
    }
}

/// The span of an item's keyword and name, where "this is not a function" reads best.
fn item_span(item: &Item) -> Span {
    let tokens = match item {
        Item::Struct(s) => keyword_and_name(&s.struct_token, &s.ident),
        Item::Enum(e) => keyword_and_name(&e.enum_token, &e.ident),
        Item::Const(c) => keyword_and_name(&c.const_token, &c.ident),
        Item::Static(s) => keyword_and_name(&s.static_token, &s.ident),
        Item::Impl(i) => i.impl_token.into_token_stream(),
        Item::Mod(m) => keyword_and_name(&m.mod_token, &m.ident),
        Item::Trait(t) => keyword_and_name(&t.trait_token, &t.ident),
        other => other.into_token_stream(),
    };
    let mut spans = tokens.into_iter().map(|t| t.span());
    let first = spans.next().unwrap_or_else(Span::call_site);
    spans
        .last()
        .and_then(|last| first.join(last))
        .unwrap_or(first)
}

fn keyword_and_name(keyword: &impl ToTokens, ident: &Ident) -> TokenStream {
    quote!(#keyword #ident)
}
