//! The `#[tool]` attribute of [toolcall](https://docs.rs/toolcall).
//!
//! Use it through the `toolcall` crate, which documents it. The phases live
//! one to a file: `attr` reads our keys, `model` builds the typed view of the
//! function, `validate` checks what spans several parts, `expand` writes the
//! code, `fallback` is what is emitted when something is wrong.

mod attr;
mod ctxt;
mod expand;
mod fallback;
mod internals;
mod model;
mod msg;
mod pattern;
mod validate;

use proc_macro::TokenStream;

/// Turns a plain function into a tool. See the `toolcall` crate for the guide.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::tool(args.into(), item.into()).into()
}

/// The second step of `#[tool]`: puts the items it generated in place of
/// the placeholder it is written on. Not a public API.
#[doc(hidden)]
#[proc_macro_attribute]
pub fn tool_items(items: TokenStream, _placeholder: TokenStream) -> TokenStream {
    items
}
