//! What is emitted when the tool is misdeclared: the user's function as
//! written (minus our attributes), so call sites and IDEs keep working, and
//! the errors.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{FnArg, ItemFn, PathArguments, Type, parse_quote};

use crate::model::names_ctx_without_state;

pub(crate) fn emit(item: impl ToTokens, error: syn::Error) -> TokenStream {
    let mut tokens = item.into_token_stream();
    tokens.extend(error.to_compile_error());
    tokens
}

/// The function as written, with a context that names no state (`&Ctx`)
/// made generic over it: the macro's error says what to write, and rustc's
/// own "missing generics", which points into the library, does not follow.
pub(crate) fn with_state_generic(item: &ItemFn) -> ItemFn {
    let mut item = item.clone();
    let mut patched = false;
    for input in &mut item.sig.inputs {
        if let FnArg::Typed(typed) = input
            && let Type::Reference(reference) = &mut *typed.ty
            && names_ctx_without_state(&reference.elem)
            && let Type::Path(path) = &mut *reference.elem
            && let Some(last) = path.path.segments.last_mut()
        {
            last.arguments = PathArguments::AngleBracketed(parse_quote!(<__ToolcallState>));
            patched = true;
        }
    }
    if patched {
        item.sig
            .generics
            .params
            .push(parse_quote!(__ToolcallState: ?Sized));
    }
    item
}
