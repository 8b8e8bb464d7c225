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

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Item, ItemFn, Path, TraitItemFn};

use crate::attr::{Number, ToolAttr};
use crate::ctxt::Ctxt;
use crate::model::{Param, ToolFn};
use crate::{fallback, msg, validate};

pub(crate) fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: ItemFn = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(error) => {
            let error = misplaced(item.clone(), error);
            return fallback::emit(without_our_attributes(item), error);
        }
    };
    let mut cx = Ctxt::default();
    let attr = ToolAttr::parse(args, &mut cx);
    let tool = ToolFn::from_item(attr, item, &mut cx);
    validate::check(&tool, &mut cx);
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
        Err(error) => fallback::emit(&tool.item, error),
    }
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

/// The error for an item that is not a function with a body: ours when it
/// is another kind of item, syn's when it is a function that does not parse.
fn misplaced(item: TokenStream, error: syn::Error) -> syn::Error {
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
fn without_our_attributes(item: TokenStream) -> TokenStream {
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
        Item::Struct(s) => {
            let (token, ident) = (&s.struct_token, &s.ident);
            quote!(#token #ident)
        }
        Item::Enum(e) => {
            let (token, ident) = (&e.enum_token, &e.ident);
            quote!(#token #ident)
        }
        Item::Const(c) => {
            let (token, ident) = (&c.const_token, &c.ident);
            quote!(#token #ident)
        }
        Item::Static(s) => {
            let (token, ident) = (&s.static_token, &s.ident);
            quote!(#token #ident)
        }
        Item::Impl(i) => i.impl_token.into_token_stream(),
        Item::Mod(m) => {
            let (token, ident) = (&m.mod_token, &m.ident);
            quote!(#token #ident)
        }
        Item::Trait(t) => {
            let (token, ident) = (&t.trait_token, &t.ident);
            quote!(#token #ident)
        }
        other => other.into_token_stream(),
    };
    let mut spans = tokens.into_iter().map(|t| t.span());
    let first = spans.next().unwrap_or_else(Span::call_site);
    spans
        .last()
        .and_then(|last| first.join(last))
        .unwrap_or(first)
}

/// The items generated next to the function: the argument struct, the
/// hidden type named like the function, and their impls.
fn expand(tool: &ToolFn) -> TokenStream {
    let private = private(tool);
    let item = &tool.item;
    let vis = &item.vis;
    let fn_ident = &tool.ident;
    let args_ident = tool.args_ident();
    let args_name = args_ident.to_string();
    let name = tool.tool_name();
    let description = &tool.description;
    let side_effect = tool.attr.side_effect.is_some();
    let high_risk = tool.attr.high_risk.is_some();
    let untrusted_output = tool.attr.untrusted_output.is_some();
    // `preview = path`: `fn(&Args, &Ctx<S>) -> String` (or a `Value`), its
    // context's state read from its signature.
    let preview_fn = tool.attr.preview.as_ref().map(|path| {
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
                __toolcall_cx: &#private::CallContext,
            ) -> ::core::option::Option<::core::result::Result<#private::serde_json::Value, #private::ToolError>> {
                #call
            }
        }
    });
    let timeout_ms = match &tool.attr.timeout_ms {
        Some(ms) => {
            let ms: u64 = ms.base10_parse().unwrap_or(1);
            quote!(::core::option::Option::Some(#ms))
        }
        None => quote!(::core::option::Option::None),
    };
    let max_output_bytes = match &tool.attr.max_output_bytes {
        Some(bytes) => {
            let bytes: u64 = bytes.base10_parse().unwrap_or(256);
            quote!(::core::option::Option::Some(#bytes))
        }
        None => quote!(::core::option::Option::None),
    };
    let args_doc =
        format!(" The arguments of the [`{name}`](fn@{fn_ident}) tool, validated strictly.");
    let probes = quote! {
        #[allow(unused_imports)]
        use #private::{ArgFallback as _, ArgProbe as _};
    };

    let field_defs = tool.params.iter().map(|p| {
        let ident = &p.ident;
        let ty = &p.ty;
        let doc = (!p.description.is_empty()).then(|| {
            let text = format!(" {}", p.description);
            quote!(#[doc = #text])
        });
        quote!(#doc #vis #ident: #ty)
    });

    let mut statics = Vec::new();
    let mut assertions = Vec::new();
    let mut field_metas = Vec::new();
    for (i, p) in tool.params.iter().enumerate() {
        let ty = &p.ty;
        assertions.push(quote_spanned!(ty.span()=> #private::assert_arg::<#ty>();));
        let (constraints, asserts) = constraints(&private, p, i, &mut statics);
        assertions.extend(asserts);
        let json_name = p.json_name();
        let field_description = &p.description;
        let sensitive = p.arg.sensitive.is_some();
        let resource = match &p.arg.resource {
            Some((_, Some(kind))) => quote!(::core::option::Option::Some(#kind)),
            Some((_, None)) => {
                let kind = p.name();
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

    let serialize_fields = tool.params.iter().map(|p| {
        let (ident, ty, json_name) = (&p.ident, &p.ty, p.json_name());
        quote! {
            #private::serde::ser::SerializeStruct::serialize_field(
                &mut __toolcall_state,
                #json_name,
                &(&#private::Probe::<#ty>::new()).ser(&self.#ident),
            )?;
        }
    });
    let schema_properties = tool.params.iter().map(|p| {
        let (ty, json_name, doc) = (&p.ty, p.json_name(), &p.description);
        quote! {
            #private::insert_property(
                &mut __toolcall_schema,
                #json_name,
                #doc,
                (&#private::Probe::<#ty>::new()).property(__toolcall_generator),
            );
        }
    });
    let locals: Vec<Ident> = (0..tool.params.len())
        .map(|i| format_ident!("__toolcall_{}", i))
        .collect();
    let reads = tool
        .params
        .iter()
        .zip(&locals)
        .enumerate()
        .map(|(i, (p, local))| {
            let ty = &p.ty;
            quote! {
                let #local = (&#private::Probe::<#ty>::new()).read(
                    __toolcall_errors,
                    __toolcall_object,
                    &__TOOLCALL_FIELDS[#i],
                );
            }
        });
    let idents: Vec<&Ident> = tool.params.iter().map(|p| &p.ident).collect();

    // The context: asserted once in each function that uses it, then
    // reached through `Probe`, so that a parameter that is not `&Ctx<S>`
    // fails the build with that one message.
    let assert_context = tool.context.as_ref().map(|ty| {
        quote! {
            #[allow(unused_imports)]
            use #private::{CtxFallback as _, CtxProbe as _};
            #private::assert_context::<#ty>();
        }
    });
    let context = tool
        .context
        .as_ref()
        .map(|ty| quote!((&#private::Probe::<#ty>::new()).context()));
    let state_fn = context.as_ref().map(|context| {
        quote! {
            fn __toolcall_state() -> #private::StateType {
                #assert_context
                #context.state()
            }
        }
    });
    let state = match &context {
        Some(_) => quote!(::core::option::Option::Some(__toolcall_state)),
        None => quote!(::core::option::Option::None),
    };
    let ctx_ref = context
        .as_ref()
        .map(|context| quote!(&#context.from_call(__toolcall_cx)?));
    let ctx_arg = tool
        .context
        .as_ref()
        .zip(ctx_ref.as_ref())
        .map(|(ty, ctx_ref)| quote!((&#private::Probe::<#ty>::new()).param(#ctx_ref),));
    let await_call = item.sig.asyncness.map(|_| quote!(.await));

    // The `check` and `reconcile` functions: their shape is checked by one
    // generic function each, spanned with everything around it on the
    // path, so that a function of the wrong shape fails once, there. For a
    // tool with a context, the function takes the same one; for a tool
    // without, its state is read from its signature and recorded in the
    // spec, for the dispatcher's builder to check.
    let ctx_binding = ctx_ref
        .as_ref()
        .map(|ctx_ref| quote!(let __toolcall_ctx = #ctx_ref;));
    let mut state_fns = Vec::new();
    let (check_body, check_state) = match &tool.attr.check {
        None => (
            quote! {
                let _ = (__toolcall_args, __toolcall_cx);
                ::core::result::Result::Ok(())
            },
            quote!(::core::option::Option::None),
        ),
        Some(path) => {
            let span = path.span();
            match &context {
                Some(context) => {
                    let check = respan(
                        quote! {
                            #private::ContextOf::check_sig::<#args_ident, _, _, _>(&__toolcall_context, &#path)
                                .run(&#path, __toolcall_args, __toolcall_ctx)
                        },
                        span,
                    );
                    let body = quote! {
                        #assert_context
                        let __toolcall_context = #context;
                        #ctx_binding
                        #check
                    };
                    (body, quote!(::core::option::Option::Some(__toolcall_state)))
                }
                None => {
                    let sig = quote!(#private::check_sig::<#args_ident, _, _, _, _>(&#path));
                    state_fns.push(respan(
                        quote! {
                            fn __toolcall_check_state() -> #private::StateType {
                                #sig.state()
                            }
                        },
                        span,
                    ));
                    let body = respan(
                        quote! {
                            let __toolcall_check = #sig;
                            let __toolcall_ctx = __toolcall_check.context(__toolcall_cx)?;
                            __toolcall_check.run(&#path, __toolcall_args, &__toolcall_ctx)
                        },
                        span,
                    );
                    (
                        body,
                        quote!(::core::option::Option::Some(__toolcall_check_state)),
                    )
                }
            }
        }
    };

    let (reconcile_fn, reconcile_state) = match &tool.attr.reconcile {
        None => (None, quote!(::core::option::Option::None)),
        Some(path) => {
            let span = path.span();
            let (body, reconcile_state) = match &context {
                Some(context) => {
                    let reconcile = respan(
                        quote! {
                            #private::ContextOf::reconcile_sig::<_, _, _>(&__toolcall_context, &#path)
                                .run(&#path, __toolcall_ctx, &__toolcall_cx.idempotency_key)
                                .await
                        },
                        span,
                    );
                    let body = quote! {
                        #assert_context
                        let __toolcall_context = #context;
                        #ctx_binding
                        #reconcile
                    };
                    (body, quote!(::core::option::Option::Some(__toolcall_state)))
                }
                None => {
                    let sig = quote!(#private::reconcile_sig::<_, _, _, _>(&#path));
                    state_fns.push(respan(
                        quote! {
                            fn __toolcall_reconcile_state() -> #private::StateType {
                                #sig.state()
                            }
                        },
                        span,
                    ));
                    let body = respan(
                        quote! {
                            let __toolcall_reconcile = #sig;
                            let __toolcall_ctx = __toolcall_reconcile.context(__toolcall_cx)?;
                            __toolcall_reconcile
                                .run(&#path, &__toolcall_ctx, &__toolcall_cx.idempotency_key)
                                .await
                        },
                        span,
                    );
                    (
                        body,
                        quote!(::core::option::Option::Some(__toolcall_reconcile_state)),
                    )
                }
            };
            let reconcile_fn = quote! {
                fn reconcile(
                    __toolcall_cx: &#private::CallContext,
                ) -> #private::BoxFuture<'_, ::core::result::Result<::core::option::Option<#private::serde_json::Value>, #private::ToolError>> {
                    ::std::boxed::Box::pin(async move { #body })
                }
            };
            (Some(reconcile_fn), reconcile_state)
        }
    };
    let reconciles = tool.attr.reconcile.is_some();

    let output_span = match &item.sig.output {
        syn::ReturnType::Type(_, ty) => ty.span(),
        syn::ReturnType::Default => Span::call_site(),
    };
    let call_user = quote_spanned! {output_span=>
        #private::into_output(#fn_ident(#ctx_arg #(#locals),*) #await_call)
    };

    quote! {
        #[doc = #args_doc]
        #vis struct #args_ident {
            #(#field_defs,)*
        }

        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #vis struct #fn_ident {}

        const _: () = {
        #(#statics)*

        static __TOOLCALL_FIELDS: [#private::FieldMeta; #field_count] = [#(#field_metas),*];

        // Each parameter's type can be an argument, and each constraint
        // fits its parameter's type (`pattern` on a string, ...).
        fn __toolcall_assertions() {
            #(#assertions)*
        }

        #state_fn
        #(#state_fns)*

        #[automatically_derived]
        impl #private::serde::Serialize for #args_ident {
            fn serialize<__S: #private::serde::Serializer>(
                &self,
                __toolcall_serializer: __S,
            ) -> ::core::result::Result<__S::Ok, __S::Error> {
                #probes
                let mut __toolcall_state = #private::serde::Serializer::serialize_struct(
                    __toolcall_serializer,
                    #args_name,
                    #field_count,
                )?;
                #(#serialize_fields)*
                #private::serde::ser::SerializeStruct::end(__toolcall_state)
            }
        }

        #[automatically_derived]
        impl #private::schemars::JsonSchema for #args_ident {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(#args_name)
            }

            fn schema_id() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(::core::concat!(::core::module_path!(), "::", #args_name))
            }

            fn json_schema(
                __toolcall_generator: &mut #private::schemars::SchemaGenerator,
            ) -> #private::schemars::Schema {
                #probes
                let mut __toolcall_schema = #private::object_schema();
                #(#schema_properties)*
                __toolcall_schema
            }
        }

        #[automatically_derived]
        impl #private::ToolArgs for #args_ident {
            fn fields() -> &'static [#private::FieldMeta] {
                &__TOOLCALL_FIELDS
            }

            fn from_members(
                __toolcall_object: &#private::Members<'_>,
                __toolcall_errors: &mut #private::FieldErrors,
            ) -> ::core::option::Option<Self> {
                #probes
                #(#reads)*
                ::core::option::Option::Some(#args_ident { #(#idents: #locals?),* })
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
                        untrusted_output: #untrusted_output,
                        timeout_ms: #timeout_ms,
                        max_output_bytes: #max_output_bytes,
                        state: #state,
                        reconcile: #reconciles,
                        check_state: #check_state,
                        reconcile_state: #reconcile_state,
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
                #assert_context
                ::std::boxed::Box::pin(async move {
                    let #args_ident { #(#idents: #locals),* } = __toolcall_args;
                    #call_user
                })
            }

            #reconcile_fn

            #preview_fn
        }

        #private::inventory::submit! {
            #private::ToolEntry(<#fn_ident as #private::Tool>::spec)
        }
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
        constraints.push(quote!(#private::Constraint::Format(#private::StringFormat::#variant)));
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
        Number::Int(n) => {
            // `validate` has refused a bound beyond `i64`.
            let n = i64::try_from(*n).unwrap_or_default();
            quote!(#private::Bound::Int(#n))
        }
        Number::Float(f) => quote!(#private::Bound::Float(#f)),
    }
}

pub(crate) fn pascal_case(snake: &str) -> String {
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
