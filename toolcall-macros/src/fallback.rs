//! What is emitted when the tool is misdeclared: the user's function as
//! written (minus our attributes), so call sites and IDEs keep working, and
//! the errors.

use proc_macro2::TokenStream;
use quote::ToTokens;

pub(crate) fn emit(item: impl ToTokens, error: syn::Error) -> TokenStream {
    let mut tokens = item.into_token_stream();
    tokens.extend(error.to_compile_error());
    tokens
}
