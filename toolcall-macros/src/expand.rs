//! Writes the code a `#[tool]` generates next to the function.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemFn, Path};

use crate::attr::{Number, ToolAttr};
use crate::ctxt::Ctxt;
use crate::model::{Param, ToolFn};
use crate::{fallback, validate};

pub(crate) fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(error) => return fallback::emit(item, error),
    };
    let mut cx = Ctxt::default();
    let attr = ToolAttr::parse(args, &mut cx);
    let tool = ToolFn::from_item(attr, item, &mut cx);
    validate::check(&tool, &mut cx);
    match cx.finish() {
        Ok(()) => expand(&tool),
        Err(error) => fallback::emit(&tool.item, error),
    }
}

fn expand(tool: &ToolFn) -> TokenStream {
    let krate: Path = tool
        .attr
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::toolcall));
    let private = quote!(#krate::__private);
    let serde_path = format!("{}::__private::serde", path_text(&krate));
    let schemars_path = format!("{}::__private::schemars", path_text(&krate));

    let item = &tool.item;
    let vis = &item.vis;
    let fn_ident = &tool.ident;
    let args_ident = format_ident!(
        "{}Args",
        pascal_case(&tool.ident.to_string()),
        span = tool.ident.span()
    );
    let name = tool.tool_name();
    let description = &tool.description;
    let side_effect = tool.attr.side_effect.is_some();
    let high_risk = tool.attr.high_risk.is_some();
    let timeout_ms = match &tool.attr.timeout_ms {
        Some(ms) => {
            let ms: u64 = ms.base10_parse().unwrap_or(1);
            quote!(::core::option::Option::Some(#ms))
        }
        None => quote!(::core::option::Option::None),
    };
    let args_doc =
        format!(" The arguments of the [`{name}`](fn@{fn_ident}) tool, validated strictly.");

    let field_defs = tool.params.iter().map(|p| {
        let ident = &p.ident;
        let ty = &p.ty;
        let doc = (!p.description.is_empty()).then(|| {
            let text = format!(" {}", p.description);
            quote!(#[doc = #text])
        });
        let rename = p
            .arg
            .rename
            .as_ref()
            .map(|name| quote!(#[serde(rename = #name)]));
        quote!(#doc #rename #vis #ident: #ty)
    });

    let mut statics = Vec::new();
    let mut kind_asserts = Vec::new();
    let mut field_metas = Vec::new();
    for (i, p) in tool.params.iter().enumerate() {
        let (constraints, asserts) = constraints(&private, p, i, &mut statics);
        kind_asserts.extend(asserts);
        let json_name = p.json_name();
        let field_description = &p.description;
        let sensitive = p.arg.sensitive.is_some();
        let resource = match &p.arg.resource {
            Some((_, Some(kind))) => quote!(::core::option::Option::Some(#kind)),
            Some((_, None)) => {
                let kind = p.ident.to_string();
                let kind = kind.trim_start_matches("r#");
                quote!(::core::option::Option::Some(#kind))
            }
            None => quote!(::core::option::Option::None),
        };
        field_metas.push(quote! {
            #private::FieldMeta {
                name: #json_name,
                description: #field_description,
                constraints: &[#(#constraints),*],
                sensitive: #sensitive,
                resource: #resource,
            }
        });
    }
    let field_count = tool.params.len();

    let reads = tool.params.iter().enumerate().map(|(i, p)| {
        let local = format_ident!("__toolcall_{}", i);
        let ty = &p.ty;
        quote_spanned!(ty.span()=> let #local = __toolcall_errors.field::<#ty>(__toolcall_object, &__TOOLCALL_FIELDS[#i]);)
    });
    let builds = tool.params.iter().enumerate().map(|(i, p)| {
        let local = format_ident!("__toolcall_{}", i);
        let ident = &p.ident;
        quote!(#ident: #local?)
    });
    let bindings: Vec<_> = tool
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let local = format_ident!("__toolcall_{}", i);
            let ident = &p.ident;
            quote!(#ident: #local)
        })
        .collect();
    let locals: Vec<_> = (0..tool.params.len())
        .map(|i| format_ident!("__toolcall_{}", i))
        .collect();

    let state_fn = tool.context.as_ref().map(|ty| {
        quote_spanned! {ty.span()=>
            fn __toolcall_state() -> #private::StateType {
                #private::state_of::<#ty>()
            }
        }
    });
    let state = if tool.context.is_some() {
        quote!(::core::option::Option::Some(__toolcall_state))
    } else {
        quote!(::core::option::Option::None)
    };
    let typed_ctx = match &tool.context {
        Some(ty) => quote_spanned!(ty.span()=>
            #private::Ctx::<<#ty as #private::ContextParam>::State>::from_call(__toolcall_cx)?
        ),
        None => quote!(#private::Ctx::from_call(__toolcall_cx)?),
    };
    let ctx_arg = tool.context.as_ref().map(|_| quote!(&__toolcall_ctx,));
    let ctx_binding = tool
        .context
        .as_ref()
        .map(|_| quote!(let __toolcall_ctx = #typed_ctx;));
    let await_call = item.sig.asyncness.map(|_| quote!(.await));

    let check_body = match &tool.attr.check {
        Some(path) => {
            let span = path.span();
            let call = quote_spanned!(span=> #path(__toolcall_args, &__toolcall_ctx));
            quote! {
                let __toolcall_ctx = #typed_ctx;
                ::core::result::Result::map_err(#call, ::core::convert::Into::into)
            }
        }
        None => quote! {
            let _ = (__toolcall_args, __toolcall_cx);
            ::core::result::Result::Ok(())
        },
    };

    let reconciles = tool.attr.reconcile.is_some();
    let reconcile_fn = tool.attr.reconcile.as_ref().map(|path| {
        let span = path.span();
        let call = quote_spanned!(span=> #path(&__toolcall_ctx, &__toolcall_cx.idempotency_key));
        quote! {
            fn reconcile(
                __toolcall_cx: &#private::CallContext,
            ) -> #private::BoxFuture<'_, ::core::result::Result<::core::option::Option<#private::serde_json::Value>, #private::ToolError>> {
                ::std::boxed::Box::pin(async move {
                    let __toolcall_ctx = #typed_ctx;
                    #private::reconciled(#call).await
                })
            }
        }
    });

    let output_span = match &item.sig.output {
        syn::ReturnType::Type(_, ty) => ty.span(),
        syn::ReturnType::Default => Span::call_site(),
    };
    let call_user = quote_spanned! {output_span=>
        #private::into_output(#fn_ident(#ctx_arg #(#locals),*) #await_call)
    };

    quote! {
        #item

        #[doc = #args_doc]
        #[derive(#private::serde::Serialize, #private::schemars::JsonSchema)]
        #[serde(crate = #serde_path)]
        #[schemars(crate = #schemars_path)]
        #vis struct #args_ident {
            #(#field_defs,)*
        }

        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis struct #fn_ident {}

        const _: () = {
            #(#statics)*

            static __TOOLCALL_FIELDS: [#private::FieldMeta; #field_count] = [#(#field_metas),*];

            // Each constraint fits its parameter's type (`pattern` on a string, ...).
            fn __toolcall_constraint_kinds() {
                #(#kind_asserts)*
            }

            #state_fn

            #[automatically_derived]
            impl #private::ToolArgs for #args_ident {
                fn fields() -> &'static [#private::FieldMeta] {
                    &__TOOLCALL_FIELDS
                }

                fn from_object(
                    __toolcall_object: &#private::serde_json::Map<::std::string::String, #private::serde_json::Value>,
                    __toolcall_errors: &mut #private::FieldErrors,
                ) -> ::core::option::Option<Self> {
                    #(#reads)*
                    ::core::option::Option::Some(#args_ident { #(#builds),* })
                }
            }

            #[automatically_derived]
            impl #private::Tool for #fn_ident {
                type Args = #args_ident;

                fn spec() -> &'static #private::ToolSpec {
                    static SPEC: #private::ToolSpec = #private::ToolSpec::__new::<#fn_ident>(
                        #private::SpecParts {
                            name: #name,
                            description: #description,
                            side_effect: #side_effect,
                            high_risk: #high_risk,
                            timeout_ms: #timeout_ms,
                            state: #state,
                            reconcile: #reconciles,
                        },
                        &__TOOLCALL_FIELDS,
                    );
                    &SPEC
                }

                fn check(
                    __toolcall_args: &Self::Args,
                    __toolcall_cx: &#private::CallContext,
                ) -> ::core::result::Result<(), #private::ToolError> {
                    #check_body
                }

                fn call<'a>(
                    __toolcall_args: Self::Args,
                    __toolcall_cx: &'a #private::CallContext,
                ) -> #private::BoxFuture<'a, ::core::result::Result<#private::serde_json::Value, #private::ToolError>> {
                    ::std::boxed::Box::pin(async move {
                        let #args_ident { #(#bindings),* } = __toolcall_args;
                        #ctx_binding
                        #call_user
                    })
                }

                #reconcile_fn
            }

            #private::inventory::submit! {
                #private::ToolEntry(<#fn_ident as #private::Tool>::spec)
            }
        };
    }
}

/// The runtime constraints of one parameter, and the compile-time
/// assertions that each fits the parameter's type.
fn constraints(
    private: &TokenStream,
    p: &Param,
    index: usize,
    statics: &mut Vec<TokenStream>,
) -> (Vec<TokenStream>, Vec<TokenStream>) {
    let ty = &p.ty;
    let arg = &p.arg;
    let mut constraints = Vec::new();
    let mut asserts = Vec::new();
    let mut assert_kind = |span: Span, kind: &str| {
        let check = format_ident!("assert_{}", kind, span = span);
        asserts.push(quote_spanned!(span=> #private::#check::<#ty>();));
    };
    if let Some(pattern) = &arg.pattern {
        let pattern_static = format_ident!("__TOOLCALL_PATTERN_{}", index);
        statics.push(quote! {
            static #pattern_static: #private::Pattern = #private::Pattern::new(#pattern);
        });
        constraints.push(quote!(#private::Constraint::Pattern(&#pattern_static)));
        assert_kind(pattern.span(), "string");
    }
    let bounds = [
        (&arg.min, quote!(Minimum)),
        (&arg.max, quote!(Maximum)),
        (&arg.exclusive_min, quote!(ExclusiveMinimum)),
        (&arg.exclusive_max, quote!(ExclusiveMaximum)),
    ];
    for (bound, variant) in bounds {
        if let Some(bound) = bound {
            let value = bound_tokens(private, &bound.value);
            constraints.push(quote!(#private::Constraint::#variant(#value)));
            assert_kind(bound.key, "number");
        }
    }
    let counts = [
        (&arg.min_length, quote!(MinLength), "string"),
        (&arg.max_length, quote!(MaxLength), "string"),
        (&arg.min_items, quote!(MinItems), "list"),
        (&arg.max_items, quote!(MaxItems), "list"),
    ];
    for (count, variant, kind) in counts {
        if let Some(count) = count {
            let value = count.value as usize;
            constraints.push(quote!(#private::Constraint::#variant(#value)));
            assert_kind(count.key, kind);
        }
    }
    if let Some(format) = &arg.format {
        let variant = match format.value().as_str() {
            "email" => quote!(Email),
            "uuid" => quote!(Uuid),
            "date" => quote!(Date),
            "date-time" => quote!(DateTime),
            _ => quote!(Uri),
        };
        constraints.push(quote!(#private::Constraint::Format(#private::Format::#variant)));
        assert_kind(format.span(), "string");
    }
    if let Some(limit) = &arg.limit {
        constraints.push(quote!(#private::Constraint::Limit(#limit)));
        assert_kind(limit.span(), "number");
    }
    (constraints, asserts)
}

fn bound_tokens(private: &TokenStream, number: &Number) -> TokenStream {
    match number {
        Number::Int(n) => quote!(#private::Bound::Int(#n)),
        Number::Float(f) => quote!(#private::Bound::Float(#f)),
    }
}

fn path_text(path: &Path) -> String {
    let mut text = String::new();
    if path.leading_colon.is_some() {
        text.push_str("::");
    }
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    text.push_str(&segments.join("::"));
    text
}

fn pascal_case(snake: &str) -> String {
    snake
        .trim_start_matches("r#")
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use quote::quote;

    /// The expansion, pretty-printed, as a reviewer reads it.
    fn expand(args: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        let tokens = super::tool(args, item);
        let file: syn::File = syn::parse2(tokens).expect("the expansion parses as items");
        prettyplease::unparse(&file)
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
