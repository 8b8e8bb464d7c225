//! The hidden type named like the function, its `Tool` impl (the spec,
//! `check`, `call`, `reconcile`, `preview`) and its registry entry.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::LitInt;
use syn::spanned::Spanned;

use super::hooks::Hook;
use super::{Expander, respan};

impl Expander<'_> {
    /// The type named like the function, which `tools![...]` names.
    pub(super) fn tool_type(&self) -> TokenStream {
        let (vis, fn_ident) = (self.vis, self.fn_ident);
        quote! {
            #[doc(hidden)]
            #[allow(non_camel_case_types)]
            #vis struct #fn_ident {}
        }
    }

    /// `Tool` for the hidden type.
    pub(super) fn tool_impl(
        &self,
        check: &Hook,
        async_check: &Hook,
        reconcile: &Hook,
    ) -> TokenStream {
        let (private, fn_ident, args_ident) = (&self.private, self.fn_ident, &self.args_ident);
        // A tool has one check or the other (validated): its state is the
        // check's state.
        let check_state = if self.tool.attr.async_check.is_some() {
            &async_check.state
        } else {
            &check.state
        };
        let spec_fn = self.spec_fn(check_state, &reconcile.state);
        let async_check_fn = &async_check.code;
        let check_body = &check.code;
        let call_fn = self.call_fn();
        let reconcile_fn = &reconcile.code;
        let preview_fn = self.preview_fn();
        quote! {
            #[automatically_derived]
            impl #private::Tool for #fn_ident {
                type Args = #args_ident;

                #spec_fn

                fn check(
                    __toolcall_args: &Self::Args,
                    __toolcall_cx: &#private::CallContext<'_>,
                ) -> ::core::result::Result<(), #private::ToolError> {
                    #check_body
                }

                #async_check_fn

                #call_fn

                #reconcile_fn

                #preview_fn
            }
        }
    }

    /// `Tool::spec`: the tool's flags and limits, and the states its
    /// context and its hooks read.
    fn spec_fn(&self, check_state: &TokenStream, reconcile_state: &TokenStream) -> TokenStream {
        let (private, fn_ident, attr) = (&self.private, self.fn_ident, &self.tool.attr);
        let name = self.tool.tool_name();
        let description = &self.tool.description;
        let side_effect = attr.side_effect.is_some();
        let high_risk = attr.high_risk.is_some();
        let untrusted_output = attr.untrusted_output.is_some();
        let idempotent_backend = attr.idempotent_backend.is_some();
        let timeout_ms = optional_u64(attr.timeout_ms.as_ref(), 1);
        let max_output_bytes = optional_u64(attr.max_output_bytes.as_ref(), 256);
        let max_repeats = optional_u64(attr.max_repeats.as_ref(), 1);
        let approvals: u32 = attr
            .approvals
            .as_ref()
            .and_then(|n| n.base10_parse().ok())
            .unwrap_or(1);
        let state = self.state();
        let reconciles = attr.reconcile.is_some();
        // Only a tool that names its untrusted parts says so: the spec of
        // every other tool is written as before.
        let untrusted_parts = (!attr.untrusted_parts.is_empty()).then(|| {
            let parts = &attr.untrusted_parts;
            quote!(.__untrusted_parts(&[#(#parts),*]))
        });
        let limits = (!attr.limits.is_empty()).then(|| {
            let limits = &attr.limits;
            quote!(.__limits(&[#(#limits),*]))
        });
        quote! {
            fn spec() -> &'static #private::ToolSpec {
                static SPEC: #private::ToolSpec = #private::ToolSpec::__new::<#fn_ident>(
                    #private::SpecParts {
                        name: #name,
                        description: #description,
                        side_effect: #side_effect,
                        high_risk: #high_risk,
                        untrusted_output: #untrusted_output,
                        idempotent_backend: #idempotent_backend,
                        timeout_ms: #timeout_ms,
                        max_output_bytes: #max_output_bytes,
                        state: #state,
                        reconcile: #reconciles,
                        check_state: #check_state,
                        reconcile_state: #reconcile_state,
                    },
                    &__TOOLCALL_FIELDS,
                )
                .__max_repeats(#max_repeats)
                .__approvals(#approvals)
                #untrusted_parts
                #limits;
                &SPEC
            }
        }
    }

    /// `Tool::call`: the function called with the context and the fields,
    /// its output turned into JSON.
    fn call_fn(&self) -> TokenStream {
        let (private, fn_ident, args_ident) = (&self.private, self.fn_ident, &self.args_ident);
        let (locals, idents) = (&self.locals, self.param_idents());
        let item = &self.tool.item;
        let assert_context = self.assert_context();
        let ctx_arg = self
            .context_type()
            .zip(self.ctx_ref())
            .map(|(ty, ctx_ref)| quote!((&#private::Probe::<#ty>::new()).param(#ctx_ref),));
        let await_call = item.sig.asyncness.map(|_| quote!(.await));
        let output_span = match &item.sig.output {
            syn::ReturnType::Type(_, ty) => ty.span(),
            syn::ReturnType::Default => Span::call_site(),
        };
        // The library's `into_output` through a function of the expansion's
        // own with the same bounds, spanned on the return type: a tool that
        // returns the wrong type is then told so without a line of the
        // library ("required by a bound in `__toolcall_output`", here).
        // The library's `into_output` through a function of the expansion's
        // own with the same bounds, all on the return type: a tool that
        // returns the wrong type is then told so there, without a line of
        // the library ("required by a bound in `__toolcall_output`").
        let output_shim = respan(
            quote! {
                fn __toolcall_output<Of, R>(
                    returned: R,
                ) -> ::core::result::Result<#private::Data, #private::ToolError>
                where
                    R: #private::ToolOutput<Of>,
                    <R as #private::ToolOutput<Of>>::Output: #private::serde::Serialize,
                    <R as #private::ToolOutput<Of>>::Error: #private::ToolErrorOf<Of>,
                {
                    #private::into_output::<Of, R>(returned)
                }
            },
            output_span,
        );
        let returned = quote_spanned! {output_span=>
            #fn_ident(#ctx_arg #(#locals),*) #await_call
        };
        let convert = quote_spanned! {output_span=>
            __toolcall_output::<Self, _>(__toolcall_returned)
        };
        let call_user = quote! {
            {
                let __toolcall_returned = #returned;
                #output_shim
                #convert
            }
        };
        quote! {
            fn call<'a>(
                __toolcall_args: Self::Args,
                __toolcall_cx: &'a #private::CallContext<'_>,
            ) -> #private::BoxFuture<'a, ::core::result::Result<#private::Data, #private::ToolError>> {
                #assert_context
                ::std::boxed::Box::pin(async move {
                    let #args_ident { #(#idents: #locals),* } = __toolcall_args;
                    #call_user
                })
            }
        }
    }

    /// `Tool::preview`, for `preview = path`: `fn(&Args, &Ctx<S>) -> String`
    /// (or a `Value`), its context's state read from its signature.
    fn preview_fn(&self) -> Option<TokenStream> {
        let private = &self.private;
        self.tool.attr.preview.as_ref().map(|path| {
            let call = respan(
                quote! {
                    let __toolcall_ctx = #private::Ctx::from_call(__toolcall_cx);
                    ::core::option::Option::Some(__toolcall_ctx.and_then(|__toolcall_ctx| {
                        #private::preview_output(#path(__toolcall_args, &__toolcall_ctx))
                    }))
                },
                path.span(),
            );
            quote! {
                fn preview(
                    __toolcall_args: &Self::Args,
                    __toolcall_cx: &#private::CallContext<'_>,
                ) -> ::core::option::Option<::core::result::Result<#private::serde_json::Value, #private::ToolError>> {
                    #call
                }
            }
        })
    }

    /// The tool's entry among those `Registry::collect` finds.
    pub(super) fn registry_entry(&self) -> TokenStream {
        let (private, fn_ident) = (&self.private, self.fn_ident);
        quote! {
            #private::inventory::submit! {
                #private::ToolEntry(<#fn_ident as #private::Tool>::spec)
            }
        }
    }
}

/// `Some(n)` for a limit given, its value read with `fallback` for one
/// `validate` has refused; `None` otherwise.
fn optional_u64(limit: Option<&LitInt>, fallback: u64) -> TokenStream {
    match limit {
        Some(lit) => {
            let value: u64 = lit.base10_parse().unwrap_or(fallback);
            quote!(::core::option::Option::Some(#value))
        }
        None => quote!(::core::option::Option::None),
    }
}
