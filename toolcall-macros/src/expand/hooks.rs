//! The `check` and `reconcile` functions a tool names.
//!
//! Their shape is checked by one generic function each, spanned with
//! everything around it on the path, so that a function of the wrong shape
//! fails once, there. A `reconcile` function's is checked against the
//! tool's return type, as written: it finds the tool's own output. For a
//! tool with a context, the function takes the same one; for a tool
//! without, its state is read from its signature and recorded in the spec,
//! for the dispatcher's builder to check.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::Ident;
use syn::spanned::Spanned;

use super::{Expander, respan};

/// What a `check` or a `reconcile` function adds to the generated code.
pub(super) struct Hook {
    /// `Tool::check`'s body, or the whole of `Tool::reconcile`.
    pub code: Option<TokenStream>,
    /// The spec's `check_state` or `reconcile_state`: the function that
    /// reads the state the hook's context has, if it has one.
    pub state: TokenStream,
    /// The items beside the tool's: the signature check the hook goes
    /// through ([`sig_call`]) and, for a tool without a context, that
    /// function (with one, it is the tool's own
    /// [`state_fn`](Expander::state_fn)).
    pub state_fn: Option<TokenStream>,
}

impl Hook {
    /// The hook of a tool without its function: `code` in its place, if
    /// the trait wants any, and no state.
    fn absent(code: Option<TokenStream>) -> Hook {
        Hook {
            code,
            state: quote!(::core::option::Option::None),
            state_fn: None,
        }
    }
}

impl Expander<'_> {
    /// `Tool::check`'s body: the `check` function's call, or `Ok(())`.
    pub(super) fn check_hook(&self) -> Hook {
        let Some(path) = &self.tool.attr.check else {
            return Hook::absent(Some(quote! {
                let _ = (__toolcall_args, __toolcall_cx);
                ::core::result::Result::Ok(())
            }));
        };
        let (code, state, state_fn) = self.args_hook_call(HookKind::Check, path);
        Hook {
            code: Some(code),
            state,
            state_fn,
        }
    }

    /// `Tool::async_check`, for a tool with an `async_check` function: its
    /// call, awaited with the context built inside the future.
    pub(super) fn async_check_hook(&self) -> Hook {
        let private = &self.private;
        let Some(path) = &self.tool.attr.async_check else {
            return Hook::absent(None);
        };
        let (body, state, state_fn) = self.args_hook_call(HookKind::AsyncCheck, path);
        let code = quote! {
            fn async_check<'a>(
                __toolcall_args: &'a Self::Args,
                __toolcall_cx: &'a #private::CallContext<'_>,
            ) -> ::core::option::Option<#private::BoxFuture<'a, ::core::result::Result<(), #private::ToolError>>> {
                ::core::option::Option::Some(::std::boxed::Box::pin(async move { #body }))
            }
        };
        Hook {
            code: Some(code),
            state,
            state_fn,
        }
    }

    /// `Tool::reconcile`, for a tool with a `reconcile` function.
    pub(super) fn reconcile_hook(&self) -> Hook {
        let private = &self.private;
        let Some(path) = &self.tool.attr.reconcile else {
            return Hook::absent(None);
        };
        // What the tool's function returns, `Result<T, E>`: the function
        // must find a `T`.
        let returns = match &self.tool.item.sig.output {
            syn::ReturnType::Type(_, ty) => quote!(#ty),
            syn::ReturnType::Default => quote!(()),
        };
        let (body, state, state_fn) = self.hook_call(
            HookKind::Reconcile,
            quote!(_, _, _, _, #returns),
            path,
            |ctx| quote!(#ctx, &__toolcall_cx.idempotency_key),
        );
        let code = quote! {
            fn reconcile<'a>(
                __toolcall_cx: &'a #private::CallContext<'_>,
            ) -> #private::BoxFuture<'a, ::core::result::Result<::core::option::Option<#private::Data>, #private::ToolError>> {
                ::std::boxed::Box::pin(async move { #body })
            }
        };
        Hook {
            code: Some(code),
            state,
            state_fn,
        }
    }

    /// The call of a hook that takes the tool's arguments and its context
    /// (`check`, `async_check`), as [`hook_call`](Self::hook_call) writes it.
    fn args_hook_call(
        &self,
        kind: HookKind,
        path: &syn::Path,
    ) -> (TokenStream, TokenStream, Option<TokenStream>) {
        let args_ident = &self.args_ident;
        self.hook_call(
            kind,
            quote!(#args_ident, _, _, _, _),
            path,
            |ctx| quote!(__toolcall_args, #ctx),
        )
    }

    /// A hook's call: the body that runs `path` through its signature check
    /// (with `turbofish`), the spec's state and the items beside the tool's.
    /// `args` writes the arguments after the function around the context,
    /// which is a reference already for a tool with a context and a local
    /// value for a tool without.
    fn hook_call(
        &self,
        kind: HookKind,
        turbofish: TokenStream,
        path: &syn::Path,
        args: impl Fn(TokenStream) -> TokenStream,
    ) -> (TokenStream, TokenStream, Option<TokenStream>) {
        let span = path.span();
        let awaited = kind.is_async().then(|| quote!(.await));
        match self.context() {
            Some(context) => {
                let (sig_item, sig) = sig_call(&self.private, kind, true, turbofish, path);
                let run_args = args(quote!(__toolcall_ctx));
                let call = respan(quote!(#sig.run(&#path, #run_args) #awaited), span);
                (
                    self.in_context(&context, call),
                    self.state(),
                    Some(sig_item),
                )
            }
            None => {
                let (sig_item, sig) = sig_call(&self.private, kind, false, turbofish, path);
                let binding = kind.binding();
                let run_args = args(quote!(&__toolcall_ctx));
                let body = respan(
                    quote! {
                        let #binding = #sig;
                        let __toolcall_ctx = #binding.context(__toolcall_cx)?;
                        #binding.run(&#path, #run_args) #awaited
                    },
                    span,
                );
                let (state, state_fn) = self.own_state(kind.state_fn_name(), &sig, span);
                (body, state, Some(quote!(#sig_item #state_fn)))
            }
        }
    }

    /// `call`, a hook's call, after the tool's context is asserted and
    /// built from the call's.
    fn in_context(&self, context: &TokenStream, call: TokenStream) -> TokenStream {
        let assert_context = self.assert_context();
        let ctx_binding = self
            .ctx_ref()
            .map(|ctx_ref| quote!(let __toolcall_ctx = #ctx_ref;));
        quote! {
            #assert_context
            let __toolcall_context = #context;
            #ctx_binding
            #call
        }
    }

    /// For a hook of a tool without a context: the function `name` that
    /// reads the state from the hook's signature `sig`, and the spec's
    /// reference to it.
    fn own_state(&self, name: Ident, sig: &TokenStream, span: Span) -> (TokenStream, TokenStream) {
        let private = &self.private;
        let state_fn = respan(
            quote! {
                fn #name() -> #private::StateType {
                    #sig.state()
                }
            },
            span,
        );
        (quote!(::core::option::Option::Some(#name)), state_fn)
    }
}

/// The hook whose shape a signature check checks.
#[derive(Clone, Copy)]
enum HookKind {
    Check,
    AsyncCheck,
    Reconcile,
}

impl HookKind {
    fn is_async(self) -> bool {
        !matches!(self, HookKind::Check)
    }

    /// The local the checked signature is bound to in a tool without a
    /// context.
    fn binding(self) -> Ident {
        match self {
            HookKind::Check | HookKind::AsyncCheck => format_ident!("__toolcall_check"),
            HookKind::Reconcile => format_ident!("__toolcall_reconcile"),
        }
    }

    /// The function that reads the state from the hook's signature, in a
    /// tool without a context.
    fn state_fn_name(self) -> Ident {
        match self {
            HookKind::Check => format_ident!("__toolcall_check_state"),
            HookKind::AsyncCheck => format_ident!("__toolcall_async_check_state"),
            HookKind::Reconcile => format_ident!("__toolcall_reconcile_state"),
        }
    }
}

/// The library's signature check of a hook (`check_sig`, `async_check_sig`,
/// `reconcile_sig`), called through a function of the expansion's own with
/// the same bounds, spanned on the hook's path. A misdeclared hook's error
/// then ends "required by a bound in `__toolcall_check_sig`" (or the
/// like) on the user's line,
/// not on a line of the library, which moves with every release and would
/// break an application's expected compile errors.
fn sig_call(
    private: &TokenStream,
    hook: HookKind,
    with_context: bool,
    turbofish: TokenStream,
    path: &syn::Path,
) -> (TokenStream, TokenStream) {
    let (generics, sig, bounds, call) = match hook {
        HookKind::Check | HookKind::AsyncCheck => {
            let (sig, output, call) = match hook {
                HookKind::Check => (
                    quote!(CheckSig<'a, F, A, S>),
                    quote!(#private::CheckOutput),
                    quote!(check_sig),
                ),
                _ => (
                    quote!(AsyncCheckSig<'a, F, A, S>),
                    quote!(#private::AsyncCheckOutput + 'a),
                    quote!(async_check_sig),
                ),
            };
            let bounds = quote! {
                F: #private::CheckFn<A, P1, P2>,
                (P1, P2): #private::CheckParams<'a, A, S>,
                <F as #private::CheckFn<A, P1, P2>>::Output: #output,
            };
            let call = if with_context {
                quote!(__toolcall_context.#call::<A, F, P1, P2>(f))
            } else {
                quote!(#private::#call::<A, S, F, P1, P2>(f))
            };
            (quote!('a, A, S, F, P1, P2), sig, bounds, call)
        }
        HookKind::Reconcile => {
            let bounds = quote! {
                F: #private::ReconcileFn<P1, P2>,
                (P1, P2): #private::ReconcileParams<'a, S>,
                <F as #private::ReconcileFn<P1, P2>>::Output: #private::ReconcileOutput + 'a,
                <<F as #private::ReconcileFn<P1, P2>>::Output as #private::ReconcileOutput>::Found:
                    #private::ReconciledOutput<R>,
            };
            let call = if with_context {
                quote!(__toolcall_context.reconcile_sig::<F, P1, P2, R>(f))
            } else {
                quote!(#private::reconcile_sig::<S, F, P1, P2, R>(f))
            };
            (
                quote!('a, S, F, P1, P2, R),
                quote!(ReconcileSig<'a, F, S>),
                bounds,
                call,
            )
        }
    };
    let (context_param, context_bound, context_arg) = if with_context {
        (
            quote!(__toolcall_context: &#private::ContextOf<S>,),
            quote!(S: ::core::any::Any + ::core::marker::Send + ::core::marker::Sync,),
            quote!(&__toolcall_context,),
        )
    } else {
        (quote!(), quote!(), quote!())
    };
    let name = match hook {
        HookKind::Check => quote!(__toolcall_check_sig),
        HookKind::AsyncCheck => quote!(__toolcall_async_check_sig),
        HookKind::Reconcile => quote!(__toolcall_reconcile_sig),
    };
    // One item beside the tool's others, not one per use: the state
    // function and the hook both call it, and rustc reports a misdeclared
    // hook once.
    let item = respan(
        quote! {
            fn #name<#generics>(#context_param f: &F) -> #private::#sig
            where
                #context_bound
                #bounds
            {
                #call
            }
        },
        path.span(),
    );
    let call = respan(
        quote!(#name::<#turbofish>(#context_arg &#path)),
        path.span(),
    );
    (item, call)
}
