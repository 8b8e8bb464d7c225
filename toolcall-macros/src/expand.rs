//! Writes the code a `#[tool]` generates next to the function.
//!
//! `#[tool]` emits the function as written and, after it, a placeholder
//! struct carrying the generated items in a hidden attribute,
//! `#[__private::tool_items(...)]`, which puts them in its place. At module
//! level the items arrive one expansion later; misplaced in an `impl`
//! block, where a struct cannot be, the placeholder is refused before its
//! attribute runs, and the build fails with that one message instead of
//! one for each generated item.
//!
//! Every use of a parameter's type goes through `Probe` (see `toolcall_core`'s
//! `kinds`), and every use of the context, of the `check` and of the
//! `reconcile` function goes through one generic function each, spanned
//! alike: a type without the derives, a context that is not `&Ctx<S>` or a
//! check of the wrong shape each fails the build with one message that
//! says the fix.
//!
//! Each `?` of the function's body goes through two traits of the runtime
//! too (`question`), as `?` works, so that an error that does not convert
//! into the tool's error type is told which `ToolError` to map it to.
//!
//! One function writes each generated item, as serde_derive's `ser.rs`
//! does, all of them methods of [`Expander`], which holds what they share:
//! `args` writes the argument struct and its `Serialize`, `JsonSchema` and
//! `ToolArgs` impls, `fields` the fields' metadata and the assertions on
//! their types, `hooks` the `check` and `reconcile` functions, `tool_impl`
//! the hidden type named like the function, its `Tool` impl and its
//! registry entry. `misplaced` is the error for an item that is not a
//! function.

mod args;
mod fields;
mod hooks;
mod misplaced;
mod question;
mod tool_impl;

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{format_ident, quote};
use syn::{Ident, ItemFn, Path, Type, Visibility};

use crate::attr::ToolAttr;
use crate::ctxt::Ctxt;
use crate::model::ToolFn;
use crate::{fallback, validate};

pub(crate) fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(error) => {
            let error = misplaced::misplaced(item.clone(), error);
            return fallback::emit(misplaced::without_our_attributes(item), error);
        }
    };
    let mut cx = Ctxt::default();
    let attr = ToolAttr::parse(args, &mut cx);
    let mut tool = ToolFn::from_item(attr, item, &mut cx);
    validate::check(&tool, &mut cx);
    // Without a return type, `?` is rustc's to refuse.
    if tool.returns_something() {
        let private = private(&tool);
        question::write_out(&mut tool.item.block, &private);
    }
    match cx.finish() {
        Ok(()) => {
            let item = &tool.item;
            let private = private(&tool);
            let items = expand(&tool);
            quote! {
                #item

                #[#private::tool_items(#items)]
                struct __toolcall_tool_items;
            }
        }
        Err(error) => {
            let mut tokens = fallback::emit(fallback::with_state_generic(&tool.item), error);
            // A stand-in type named like a free function, which is a tool,
            // so that `tools![...]` naming it adds no second, false error.
            // Not for a method (`self`, `Self`): its errors say to move it,
            // and a type in an `impl` would be one more.
            if !in_an_impl(&tool.item.sig) {
                let (vis, ident, private) = (&tool.item.vis, &tool.item.sig.ident, private(&tool));
                tokens.extend(quote! {
                    #[allow(non_camel_case_types, dead_code)]
                    #[doc(hidden)]
                    #vis type #ident = #private::Misdeclared;
                });
            }
            tokens
        }
    }
}

/// Whether a signature is a method's: it takes `self` or names `Self`.
fn in_an_impl(sig: &syn::Signature) -> bool {
    fn names_self(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            TokenTree::Ident(ident) => ident == "Self" || ident == "self",
            TokenTree::Group(group) => names_self(group.stream()),
            _ => false,
        })
    }
    sig.receiver().is_some() || names_self(quote!(#sig))
}

/// Where the generated code reaches the runtime: `::toolcall::__private`, or
/// the same under `crate = path`.
fn private(tool: &ToolFn) -> TokenStream {
    let krate: Path = tool
        .attr
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::toolcall));
    quote!(#krate::__private)
}

/// What the generated items share: the tool, where the runtime is, the
/// names, and how the context is reached.
struct Expander<'a> {
    tool: &'a ToolFn,
    /// `::toolcall::__private`, or the same under `crate = path`.
    private: TokenStream,
    /// The function's visibility, which the argument struct and the hidden
    /// type take.
    vis: &'a Visibility,
    /// The function's name, which the hidden type implementing `Tool` takes.
    fn_ident: &'a Ident,
    /// The argument struct's name, and its text.
    args_ident: Ident,
    args_name: String,
    /// A local per parameter, `__toolcall_<index>`: its value once read.
    locals: Vec<Ident>,
}

impl<'a> Expander<'a> {
    fn new(tool: &'a ToolFn) -> Self {
        let args_ident = tool.args_ident();
        Expander {
            tool,
            private: private(tool),
            vis: &tool.item.vis,
            fn_ident: &tool.ident,
            args_name: args_ident.to_string(),
            args_ident,
            locals: (0..tool.params.len())
                .map(|i| format_ident!("__toolcall_{}", i))
                .collect(),
        }
    }

    fn context_type(&self) -> Option<&'a Type> {
        self.tool.context.as_ref()
    }

    /// The assertion that the context is a `&Ctx<S>`: made once in each
    /// function that uses the context, which then reaches it through
    /// `Probe`, so that a parameter that is not `&Ctx<S>` fails the build
    /// with that one message.
    fn assert_context(&self) -> Option<TokenStream> {
        let private = &self.private;
        self.context_type().map(|ty| {
            quote! {
                #[allow(unused_imports)]
                use #private::{CtxFallback as _, CtxProbe as _};
                let () = <#ty as #private::ContextParam>::IS;
            }
        })
    }

    /// The context's probe, for a tool with a context.
    fn context(&self) -> Option<TokenStream> {
        let private = &self.private;
        self.context_type()
            .map(|ty| quote!((&#private::Probe::<#ty>::new()).context()))
    }

    /// The context, built from the call's.
    fn ctx_ref(&self) -> Option<TokenStream> {
        self.context()
            .map(|context| quote!(&#context.from_call(__toolcall_cx)?))
    }

    /// The function that reads the context's state type, for the
    /// dispatcher's builder to check.
    fn state_fn(&self) -> Option<TokenStream> {
        let private = &self.private;
        let assert_context = self.assert_context();
        self.context().map(|context| {
            quote! {
                fn __toolcall_state() -> #private::StateType {
                    #assert_context
                    #context.state()
                }
            }
        })
    }

    /// [`state_fn`](Self::state_fn), as the spec names it.
    fn state(&self) -> TokenStream {
        match self.context_type() {
            Some(_) => quote!(::core::option::Option::Some(__toolcall_state)),
            None => quote!(::core::option::Option::None),
        }
    }
}

/// The items generated next to the function: the argument struct, the
/// hidden type named like the function, and their impls.
fn expand(tool: &ToolFn) -> TokenStream {
    let cx = Expander::new(tool);
    let args_struct = cx.args_struct();
    let tool_type = cx.tool_type();
    let fields = cx.fields();
    let state_fn = cx.state_fn();
    let check = cx.check_hook();
    let async_check = cx.async_check_hook();
    let reconcile = cx.reconcile_hook();
    let (check_state_fn, reconcile_state_fn) = (&check.state_fn, &reconcile.state_fn);
    let async_check_state_fn = &async_check.state_fn;
    let serialize = cx.serialize_impl();
    let json_schema = cx.json_schema_impl();
    let tool_args = cx.tool_args_impl();
    let tool_impl = cx.tool_impl(&check, &async_check, &reconcile);
    let entry = cx.registry_entry();
    quote! {
        #args_struct

        #tool_type

        const _: () = {
        #fields

        #state_fn
        #check_state_fn
        #async_check_state_fn
        #reconcile_state_fn

        #serialize

        #json_schema

        #tool_args

        #tool_impl

        #entry
        };
    }
}

/// `tokens` with every span set to `span`: an expression the compiler
/// then reports on once, there, whatever its parts.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(group) => {
                let mut respanned = Group::new(group.delimiter(), respan(group.stream(), span));
                respanned.set_span(span);
                TokenTree::Group(respanned)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use quote::quote;

    /// The expansion, pretty-printed, as a reviewer reads it: the
    /// placeholder's `tool_items` attribute replaced by the items it holds,
    /// as its second step does.
    fn expand(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        let tokens = super::tool(args, item);
        let file: syn::File = syn::parse2(tokens).expect("the expansion parses as items");
        let mut items = Vec::new();
        for item in file.items {
            match &item {
                syn::Item::Struct(placeholder) if placeholder.ident == "__toolcall_tool_items" => {
                    let [attr] = &placeholder.attrs[..] else {
                        panic!("the placeholder has one attribute")
                    };
                    assert!(attr.path().segments.last().unwrap().ident == "tool_items");
                    let inner: syn::File = attr.parse_args().expect("the items parse");
                    items.extend(inner.items);
                }
                _ => items.push(item),
            }
        }
        prettyplease::unparse(&syn::File {
            shebang: None,
            attrs: Vec::new(),
            items,
        })
    }

    /// The first step's own output: the function, then the placeholder.
    #[test]
    fn the_items_come_after_the_function_on_a_placeholder() {
        let tokens = super::tool(
            quote!(),
            quote! {
                /// Says hello.
                fn hello(
                    /// Who to greet.
                    name: String,
                ) -> Result<String, Rejection> {
                    Ok(name)
                }
            },
        );
        let file: syn::File = syn::parse2(tokens).unwrap();
        assert_eq!(file.items.len(), 2);
        let syn::Item::Struct(placeholder) = &file.items[1] else {
            panic!("a placeholder struct")
        };
        let path = placeholder.attrs[0].path();
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        assert_eq!(segments, ["toolcall", "__private", "tool_items"]);
    }

    #[test]
    fn a_read_only_tool_without_context() {
        insta::assert_snapshot!(expand(
            quote!(),
            quote! {
                /// Says hello.
                pub fn hello(
                    /// Who to greet.
                    #[arg(min_length = 1)]
                    name: String,
                ) -> Result<String, Rejection> {
                    Ok(format!("hello {name}"))
                }
            }
        ));
    }

    #[test]
    fn a_high_risk_async_tool_with_context_check_and_constraints() {
        insta::assert_snapshot!(expand(
            quote!(side_effect, high_risk, check = check_refund),
            quote! {
                /// Refund part or all of an order.
                async fn refund_order(
                    ctx: &Ctx<Shop>,
                    /// Order id, for example ORD-1001.
                    #[arg(pattern = "^ORD-[0-9]{4}$")]
                    order_id: String,
                    /// Refund amount in minor units (cents).
                    #[arg(min = 1, limit = "max_refund_cents")]
                    amount_cents: i64,
                    /// Card holder's email.
                    #[arg(format = "email", sensitive, rename = "email")]
                    holder_email: Option<String>,
                ) -> Result<Refund, ToolError> {
                    todo()
                }
            }
        ));
    }

    #[test]
    fn a_tool_without_context_whose_check_and_reconcile_take_one() {
        insta::assert_snapshot!(expand(
            quote!(
                side_effect,
                check = check_cancel,
                reconcile = find_cancel,
                args = "CancelInput"
            ),
            quote! {
                /// Cancels a booking.
                pub(crate) fn cancel(
                    /// The booking id.
                    #[arg(resource = "booking")]
                    booking_id: String,
                ) -> Result<Cancelled, Rejection> {
                    todo()
                }
            }
        ));
    }

    #[test]
    fn a_misdeclared_tool_emits_the_function_and_every_error() {
        insta::assert_snapshot!(expand(
            quote!(high_risk, retries = 3),
            quote! {
                fn pay(session_id: String) -> Result<i64, Rejection> {
                    Ok(1)
                }
            }
        ));
    }
}
