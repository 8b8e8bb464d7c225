//! The argument struct and its impls: `Serialize`, `JsonSchema` and
//! `ToolArgs`, each reaching a parameter's type through `Probe`.

use proc_macro2::TokenStream;
use quote::quote;
use syn::Ident;

use super::Expander;

impl Expander<'_> {
    /// The argument struct: a field per parameter but the context, as
    /// visible as the function, each with its parameter's doc.
    pub(super) fn args_struct(&self) -> TokenStream {
        let (vis, fn_ident, args_ident) = (self.vis, self.fn_ident, &self.args_ident);
        let name = self.tool.tool_name();
        let args_doc =
            format!(" The arguments of the [`{name}`](fn@{fn_ident}) tool, validated strictly.");
        let field_defs = self.tool.params.iter().map(|p| {
            let ident = &p.ident;
            let ty = &p.ty;
            let doc = (!p.description.is_empty()).then(|| {
                let text = format!(" {}", p.description);
                quote!(#[doc = #text])
            });
            quote!(#doc #vis #ident: #ty)
        });
        quote! {
            #[doc = #args_doc]
            #vis struct #args_ident {
                #(#field_defs,)*
            }
        }
    }

    /// `Serialize`: each field under its JSON name.
    pub(super) fn serialize_impl(&self) -> TokenStream {
        let (private, args_ident, args_name) = (&self.private, &self.args_ident, &self.args_name);
        let probes = self.probes();
        let field_count = self.tool.params.len();
        let serialize_fields = self.tool.params.iter().map(|p| {
            let (ident, ty, json_name) = (&p.ident, &p.ty, p.json_name());
            quote! {
                #private::serde::ser::SerializeStruct::serialize_field(
                    &mut __toolcall_state,
                    #json_name,
                    &(&#private::Probe::<#ty>::new()).ser(&self.#ident),
                )?;
            }
        });
        quote! {
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
        }
    }

    /// `JsonSchema`: a closed object with a property per field.
    pub(super) fn json_schema_impl(&self) -> TokenStream {
        let (private, args_ident, args_name) = (&self.private, &self.args_ident, &self.args_name);
        let probes = self.probes();
        let schema_properties = self.tool.params.iter().map(|p| {
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
        quote! {
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
        }
    }

    /// `ToolArgs`: the fields' metadata, and the struct read from a JSON
    /// object, every field's errors collected.
    pub(super) fn tool_args_impl(&self) -> TokenStream {
        let (private, args_ident, locals) = (&self.private, &self.args_ident, &self.locals);
        let probes = self.probes();
        let reads = self
            .tool
            .params
            .iter()
            .zip(locals)
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
        let idents = self.param_idents();
        let members = self.tool.params.iter().enumerate().map(|(i, p)| {
            let (ident, ty) = (&p.ident, &p.ty);
            quote! {
                #i => ::core::option::Option::Some(#private::serde_json::to_value(
                    (&#private::Probe::<#ty>::new()).ser(&self.#ident),
                )),
            }
        });
        quote! {
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

                fn member(
                    &self,
                    __toolcall_index: usize,
                ) -> ::core::option::Option<::core::result::Result<#private::serde_json::Value, #private::serde_json::Error>> {
                    #probes
                    match __toolcall_index {
                        #(#members)*
                        _ => ::core::option::Option::None,
                    }
                }
            }
        }
    }

    /// The parameters' names, which are the struct's fields'.
    pub(super) fn param_idents(&self) -> Vec<&Ident> {
        self.tool.params.iter().map(|p| &p.ident).collect()
    }

    /// The probes' traits, in scope in each function that reaches a
    /// parameter's type.
    fn probes(&self) -> TokenStream {
        let private = &self.private;
        quote! {
            #[allow(unused_imports)]
            use #private::{ArgFallback as _, ArgProbe as _};
        }
    }
}
