//! The fields' metadata, which the argument struct's impls and the spec
//! share (each field's JSON name, description and runtime constraints),
//! and the compile-time assertions that each parameter's type can be an
//! argument and that each constraint fits it (`pattern` on a string, ...).

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use super::Expander;
use crate::attr::Number;
use crate::model::Param;

impl Expander<'_> {
    /// `__TOOLCALL_FIELDS`, the statics its constraints point to, and the
    /// function holding the assertions.
    pub(super) fn fields(&self) -> TokenStream {
        let private = &self.private;
        let mut statics = Vec::new();
        let mut assertions = Vec::new();
        let mut field_metas = Vec::new();
        for (i, p) in self.tool.params.iter().enumerate() {
            let ty = &p.ty;
            assertions.push(quote_spanned!(ty.span()=> let () = <#ty as #private::ArgType>::IS;));
            let (constraints, asserts) = constraints(private, p, i, &mut statics);
            assertions.extend(asserts);
            field_metas.push(self.field_meta(p, &constraints));
        }
        let field_count = self.tool.params.len();
        quote! {
            #(#statics)*

            static __TOOLCALL_FIELDS: [#private::FieldMeta; #field_count] = [#(#field_metas),*];

            // Each parameter's type can be an argument, and each constraint
            // fits its parameter's type (`pattern` on a string, ...).
            fn __toolcall_assertions() {
                #(#assertions)*
            }
        }
    }

    /// One field's `FieldMeta`.
    fn field_meta(&self, p: &Param, constraints: &[TokenStream]) -> TokenStream {
        let private = &self.private;
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
        quote! {
            #private::FieldMeta {
                name: #json_name,
                description: #field_description,
                constraints: &[#(#constraints),*],
                sensitive: #sensitive,
                resource: #resource,
            }
        }
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
    // A path to the kind's constant, not a call of a bounded function: the
    // error then names no line of the library.
    let mut assert_kind = |span: Span, kind: &str| {
        let kind = match kind {
            "string" => format_ident!("StringArg", span = span),
            "number" => format_ident!("NumberArg", span = span),
            _ => format_ident!("ListArg", span = span),
        };
        asserts.push(quote_spanned!(span=> let () = <#ty as #private::#kind>::IS;));
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
