//! Writes the code a `#[tool]` generates next to the function.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemFn, Path};

use crate::attr::{Number, ToolAttr};
use crate::ctxt::Ctxt;
use crate::model::ToolFn;
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
    let args_doc =
        format!("The arguments of the [`{name}`](fn@{fn_ident}) tool, validated strictly.");

    let field_defs = tool.params.iter().map(|p| {
        let ident = &p.ident;
        let ty = &p.ty;
        let doc = (!p.description.is_empty()).then(|| {
            let text = &p.description;
            quote!(#[doc = #text])
        });
        quote!(#doc #vis #ident: #ty)
    });

    let mut statics = Vec::new();
    let field_metas = tool.params.iter().enumerate().map(|(i, p)| {
        let field_name = p.name();
        let field_description = &p.description;
        let mut constraints = Vec::new();
        if let Some(pattern) = &p.arg.pattern {
            let pattern_static = format_ident!("__TOOLCALL_PATTERN_{}", i);
            statics.push(quote! {
                static #pattern_static: #private::Pattern = #private::Pattern::new(#pattern);
            });
            constraints.push(quote!(#private::Constraint::Pattern(&#pattern_static)));
        }
        if let Some((min, _)) = &p.arg.min {
            let bound = bound_tokens(&private, min);
            constraints.push(quote!(#private::Constraint::Minimum(#bound)));
        }
        if let Some((max, _)) = &p.arg.max {
            let bound = bound_tokens(&private, max);
            constraints.push(quote!(#private::Constraint::Maximum(#bound)));
        }
        if let Some(limit) = &p.arg.limit {
            constraints.push(quote!(#private::Constraint::Limit(#limit)));
        }
        quote! {
            #private::FieldMeta {
                name: #field_name,
                description: #field_description,
                constraints: &[#(#constraints),*],
            }
        }
    });
    let field_metas: Vec<TokenStream> = field_metas.collect();
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
                            state: #state,
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
            }

            #private::inventory::submit! {
                #private::ToolEntry(<#fn_ident as #private::Tool>::spec)
            }
        };
    }
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
