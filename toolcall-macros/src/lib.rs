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
///
/// A side effect may declare both `idempotent_backend` and `reconcile`,
/// for a backend that applies one idempotency key at most once and can
/// also be asked what became of it. Neither hides the other, each has its
/// turn: a call whose outcome is unknown is tried again under its key
/// while retries are left, the cheaper of the two safe ways; its
/// `reconcile` is asked when the retries are spent (found, that is the
/// answer; not found, nothing happened; no answer, the call is in doubt),
/// and first of all when an identical call finds the call in doubt (not
/// found, it runs again under its key).
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
