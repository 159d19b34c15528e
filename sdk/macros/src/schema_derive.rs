//! `#[derive(Schema)]`: a JSON Schema that says exactly what serde's
//! `#[derive(Deserialize)]` accepts, within the subset toolgate's host
//! compiles.
//!
//! It reads the serde attributes that change the JSON shape (`rename`,
//! `rename_all`, `rename_all_fields`, `default`, `skip`,
//! `skip_deserializing`, `tag`, `content`, `transparent`, `from`,
//! `try_from`) and refuses, at compile time, shapes the subset cannot state
//! exactly (`untagged`, `flatten`, tuples of several fields, custom
//! `deserialize_with` without a `#[schema(with = "Type")]`). Where it must
//! choose, it chooses the stricter schema: derived objects refuse unknown
//! members, aliases are not advertised. See `sdk/SCHEMA.md`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    Attribute, Data, DataEnum, DeriveInput, Expr, ExprLit, Fields, GenericParam, Lit, LitStr, Meta,
    Type,
};

/// Expands the derive; errors become `compile_error!`.
pub fn expand(input: DeriveInput) -> TokenStream {
    match Derive::new(&input).and_then(|d| d.expand()) {
        Ok(tokens) => tokens,
        Err(e) => e.to_compile_error(),
    }
}

/// serde's `rename_all` rules, applied exactly as serde applies them
/// (variants are assumed PascalCase, fields snake_case).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Case {
    None,
    Lower,
    Upper,
    Pascal,
    Camel,
    Snake,
    ScreamingSnake,
    Kebab,
    ScreamingKebab,
}

impl Case {
    const RULES: [(&'static str, Case); 8] = [
        ("lowercase", Case::Lower),
        ("UPPERCASE", Case::Upper),
        ("PascalCase", Case::Pascal),
        ("camelCase", Case::Camel),
        ("snake_case", Case::Snake),
        ("SCREAMING_SNAKE_CASE", Case::ScreamingSnake),
        ("kebab-case", Case::Kebab),
        ("SCREAMING-KEBAB-CASE", Case::ScreamingKebab),
    ];

    fn parse(lit: &LitStr) -> syn::Result<Case> {
        let value = lit.value();
        Self::RULES
            .iter()
            .find(|(name, _)| *name == value)
            .map(|(_, case)| *case)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::RULES.iter().map(|(n, _)| *n).collect();
                syn::Error::new(
                    lit.span(),
                    format!(
                        "unknown rename rule {value:?}, expected one of {}",
                        names.join(", ")
                    ),
                )
            })
    }

    fn variant(self, variant: &str) -> String {
        match self {
            Case::None | Case::Pascal => variant.to_owned(),
            Case::Lower => variant.to_ascii_lowercase(),
            Case::Upper => variant.to_ascii_uppercase(),
            Case::Camel => {
                let mut chars = variant.chars();
                match chars.next() {
                    Some(first) => first.to_ascii_lowercase().to_string() + chars.as_str(),
                    None => String::new(),
                }
            }
            Case::Snake => {
                let mut snake = String::new();
                for (i, ch) in variant.char_indices() {
                    if i > 0 && ch.is_uppercase() {
                        snake.push('_');
                    }
                    snake.push(ch.to_ascii_lowercase());
                }
                snake
            }
            Case::ScreamingSnake => Case::Snake.variant(variant).to_ascii_uppercase(),
            Case::Kebab => Case::Snake.variant(variant).replace('_', "-"),
            Case::ScreamingKebab => Case::ScreamingSnake.variant(variant).replace('_', "-"),
        }
    }

    fn field(self, field: &str) -> String {
        match self {
            Case::None | Case::Lower | Case::Snake => field.to_owned(),
            Case::Upper | Case::ScreamingSnake => field.to_ascii_uppercase(),
            Case::Pascal => {
                let mut pascal = String::new();
                let mut capitalize = true;
                for ch in field.chars() {
                    if ch == '_' {
                        capitalize = true;
                    } else if capitalize {
                        pascal.push(ch.to_ascii_uppercase());
                        capitalize = false;
                    } else {
                        pascal.push(ch);
                    }
                }
                pascal
            }
            Case::Camel => {
                let pascal = Case::Pascal.field(field);
                let mut chars = pascal.chars();
                match chars.next() {
                    Some(first) => first.to_ascii_lowercase().to_string() + chars.as_str(),
                    None => String::new(),
                }
            }
            Case::Kebab => field.replace('_', "-"),
            Case::ScreamingKebab => Case::ScreamingSnake.field(field).replace('_', "-"),
        }
    }
}

/// The attributes we read, from `#[serde(...)]`, `#[schema(...)]` and doc
/// comments, on a container, variant or field.
#[derive(Default)]
struct Attrs {
    rename: Option<String>,
    rename_all: Option<Case>,
    rename_all_fields: Option<Case>,
    default: bool,
    skip: bool,
    tag: Option<String>,
    content: Option<String>,
    transparent: bool,
    /// `from`/`try_from`: serde reads this type and converts.
    from: Option<Type>,
    /// `#[schema(with = "Type")]`: describe as this type instead.
    with: Option<Type>,
    /// `#[schema(crate = "path")]` on the type: the module holding the
    /// `Schema` trait and its `__private` helpers (default
    /// `::toolgate_sdk::schema`; the host names `::toolgate_schema::derive`).
    krate: Option<syn::Path>,
    /// `with`/`deserialize_with`: serde reads something we cannot see.
    custom_deserialize: Option<Span>,
    description: Option<String>,
    /// An attribute the subset cannot express: (span, message).
    unsupported: Option<(Span, String)>,
}

impl Attrs {
    fn parse(attrs: &[Attribute]) -> syn::Result<Attrs> {
        let mut out = Attrs::default();
        let mut doc_lines = Vec::new();
        for attr in attrs {
            if attr.path().is_ident("doc") {
                if let Meta::NameValue(nv) = &attr.meta
                    && let Expr::Lit(ExprLit {
                        lit: Lit::Str(s), ..
                    }) = &nv.value
                {
                    doc_lines.push(s.value());
                }
            } else if attr.path().is_ident("serde") {
                out.serde(attr)?;
            } else if attr.path().is_ident("schema") {
                out.schema(attr)?;
            }
        }
        if out.description.is_none() {
            out.description = doc_text(&doc_lines);
        }
        Ok(out)
    }

    fn serde(&mut self, attr: &Attribute) -> syn::Result<()> {
        attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            match key.as_str() {
                "rename" => {
                    if let Some(name) = deserialize_side(&meta)? {
                        self.rename = Some(name.value());
                    }
                }
                "rename_all" => {
                    if let Some(rule) = deserialize_side(&meta)? {
                        self.rename_all = Some(Case::parse(&rule)?);
                    }
                }
                "rename_all_fields" => {
                    if let Some(rule) = deserialize_side(&meta)? {
                        self.rename_all_fields = Some(Case::parse(&rule)?);
                    }
                }
                "default" => {
                    self.default = true;
                    skip_value(&meta)?;
                }
                "skip" | "skip_deserializing" => self.skip = true,
                "tag" => self.tag = Some(meta.value()?.parse::<LitStr>()?.value()),
                "content" => self.content = Some(meta.value()?.parse::<LitStr>()?.value()),
                "transparent" => self.transparent = true,
                "from" | "try_from" => {
                    self.from = Some(meta.value()?.parse::<LitStr>()?.parse::<Type>()?);
                }
                "with" | "deserialize_with" => {
                    self.custom_deserialize = Some(meta.path.span());
                    skip_value(&meta)?;
                }
                "untagged" => {
                    self.unsupported = Some((
                        meta.path.span(),
                        "#[derive(Schema)] does not support #[serde(untagged)]: serde takes the \
                         first variant that fits, while `oneOf` needs exactly one to match, so \
                         the schema could refuse calls serde accepts. Use a tagged enum \
                         (the default, or #[serde(tag = \"...\")])."
                            .to_owned(),
                    ));
                }
                "flatten" => {
                    self.unsupported = Some((
                        meta.path.span(),
                        "#[derive(Schema)] does not support #[serde(flatten)]: write the \
                         members out, or nest the struct as a field."
                            .to_owned(),
                    ));
                }
                "other" => self.skip = true,
                // Shapes that do not change what is read, or only change
                // serialization: `alias` (not advertised), `deny_unknown_fields`
                // (derived objects are closed anyway), `skip_serializing*`,
                // `serialize_with`, `bound`, `borrow`, `crate`, `expecting`, ….
                _ => skip_value(&meta)?,
            }
            Ok(())
        })
    }

    fn schema(&mut self, attr: &Attribute) -> syn::Result<()> {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("with") {
                let value = meta.value()?;
                self.with = Some(if value.peek(LitStr) {
                    value.parse::<LitStr>()?.parse::<Type>()?
                } else {
                    value.parse::<Type>()?
                });
                Ok(())
            } else if meta.path.is_ident("crate") {
                self.krate = Some(meta.value()?.parse::<LitStr>()?.parse::<syn::Path>()?);
                Ok(())
            } else if meta.path.is_ident("description") {
                self.description = Some(meta.value()?.parse::<LitStr>()?.value());
                Ok(())
            } else {
                Err(meta.error(
                    "unknown #[schema] attribute; expected `with`, `description` or `crate`",
                ))
            }
        })
    }
}

/// The deserialize side of `rename = "x"` or `rename(deserialize = "x")`
/// (`None` for `rename(serialize = "x")` alone).
fn deserialize_side(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<Option<LitStr>> {
    if meta.input.peek(syn::Token![=]) {
        return meta.value()?.parse().map(Some);
    }
    let mut found = None;
    meta.parse_nested_meta(|inner| {
        let value: LitStr = inner.value()?.parse()?;
        if inner.path.is_ident("deserialize") {
            found = Some(value);
        }
        Ok(())
    })?;
    Ok(found)
}

/// Consumes `= value` or `(...)` after an attribute we do not interpret.
fn skip_value(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _content;
        syn::parenthesized!(_content in meta.input);
    }
    Ok(())
}

/// A doc comment as a description: one leading space per line removed,
/// surrounding blank lines dropped, and lines of one paragraph joined with
/// a space (a doc comment wraps at ~80 columns; a model reads prose). Blank
/// lines stay paragraph breaks; list items, tables and code fences keep
/// their own lines.
fn doc_text(lines: &[String]) -> Option<String> {
    let lines: Vec<&str> = lines
        .iter()
        .flat_map(|l| l.split('\n'))
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
        .collect();
    let mut text = String::new();
    let mut in_fence = false;
    for line in lines {
        let starts_block = line.starts_with("- ")
            || line.starts_with("* ")
            || line.starts_with('|')
            || line.starts_with("```")
            || line.starts_with("    ")
            || line
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if line.is_empty() {
            text.push_str("\n\n");
        } else if text.is_empty() || text.ends_with('\n') {
            text.push_str(line);
        } else if in_fence || starts_block {
            text.push('\n');
            text.push_str(line);
        } else {
            text.push(' ');
            text.push_str(line);
        }
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
    }
    // Collapse runs of blank lines left by consecutive empty doc lines.
    while text.contains("\n\n\n") {
        text = text.replace("\n\n\n", "\n\n");
    }
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn opt_str(s: &Option<String>) -> TokenStream {
    match s {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    }
}

fn unsupported(attrs: &Attrs) -> syn::Result<()> {
    match &attrs.unsupported {
        Some((span, message)) => Err(syn::Error::new(*span, message)),
        None => Ok(()),
    }
}

struct Derive<'a> {
    input: &'a DeriveInput,
    attrs: Attrs,
    /// The path of the module with the `Schema` trait.
    base: TokenStream,
}

impl<'a> Derive<'a> {
    fn new(input: &'a DeriveInput) -> syn::Result<Self> {
        let attrs = Attrs::parse(&input.attrs)?;
        unsupported(&attrs)?;
        let base = match &attrs.krate {
            Some(path) => quote!(#path),
            None => quote!(::toolgate_sdk::schema),
        };
        Ok(Derive { input, attrs, base })
    }

    fn expand(&self) -> syn::Result<TokenStream> {
        let base = &self.base;
        let private = quote!(#base::__private);
        let description = opt_str(&self.attrs.description);
        let (body, object_shaped, required) = if let Some(from) = &self.attrs.from {
            (
                quote! {
                    let mut schema = <#from as #base::Schema>::schema();
                    #private::describe(&mut schema, <Self as #base::Schema>::description());
                    schema
                },
                quote!(<#from as #base::Schema>::OBJECT_SHAPED),
                None,
            )
        } else {
            match &self.input.data {
                Data::Struct(data) => self.structure(&data.fields)?,
                Data::Enum(data) => (self.enumeration(data)?, quote!(false), None),
                Data::Union(u) => {
                    return Err(syn::Error::new(
                        u.union_token.span,
                        "#[derive(Schema)] does not support unions",
                    ));
                }
            }
        };
        let required = required.map(|r| quote!(fn required() -> bool { #r }));

        let name = &self.input.ident;
        let mut generics = self.input.generics.clone();
        for param in &mut generics.params {
            if let GenericParam::Type(t) = param {
                t.bounds.push(syn::parse_quote!(#base::Schema));
            }
        }
        let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
        Ok(quote! {
            #[automatically_derived]
            impl #impl_generics #base::Schema for #name #ty_generics #where_clause {
                fn schema() -> #private::Value {
                    let _building = #private::building::<Self>();
                    #body
                }
                fn description() -> ::core::option::Option<&'static str> {
                    #description
                }
                #required
                const OBJECT_SHAPED: bool = #object_shaped;
            }
        })
    }

    /// A struct: (schema body, OBJECT_SHAPED, required()).
    fn structure(
        &self,
        fields: &Fields,
    ) -> syn::Result<(TokenStream, TokenStream, Option<TokenStream>)> {
        let base = &self.base;
        let private = quote!(#base::__private);
        let description = quote!(<Self as #base::Schema>::description());
        let single = |field: &syn::Field| -> syn::Result<_> {
            let attrs = Attrs::parse(&field.attrs)?;
            unsupported(&attrs)?;
            let ty = field_type(field, &attrs)?;
            Ok((
                quote! {
                    let mut schema = <#ty as #base::Schema>::schema();
                    #private::describe(&mut schema, #description);
                    schema
                },
                quote!(<#ty as #base::Schema>::OBJECT_SHAPED),
                Some(quote!(<#ty as #base::Schema>::required())),
            ))
        };
        match fields {
            Fields::Named(named) if self.attrs.transparent => {
                let live: Vec<&syn::Field> = named
                    .named
                    .iter()
                    .filter(|f| Attrs::parse(&f.attrs).map(|a| !a.skip).unwrap_or(true))
                    .collect();
                match live.as_slice() {
                    [field] => single(field),
                    _ => Err(syn::Error::new(
                        self.input.ident.span(),
                        "#[serde(transparent)] needs exactly one field",
                    )),
                }
            }
            Fields::Named(named) => {
                let fields = self.named_fields(named, self.attrs.rename_all, self.attrs.default)?;
                Ok((
                    quote!(#private::object(::core::option::Option::None, #description, #fields)),
                    quote!(true),
                    None,
                ))
            }
            Fields::Unnamed(unnamed) if unnamed.unnamed.len() == 1 => single(&unnamed.unnamed[0]),
            Fields::Unnamed(unnamed) => Err(syn::Error::new(
                unnamed.span(),
                "#[derive(Schema)] does not support tuple structs with several fields: their \
                 JSON form is an array of mixed types, which the schema subset cannot state. \
                 Use named fields.",
            )),
            Fields::Unit => Ok((
                quote! {
                    let mut schema = #private::json!({ "type": "null" });
                    #private::describe(&mut schema, #description);
                    schema
                },
                quote!(false),
                None,
            )),
        }
    }

    /// `vec![Field { .. }, ..]` for named fields.
    fn named_fields(
        &self,
        named: &syn::FieldsNamed,
        rename_all: Option<Case>,
        all_default: bool,
    ) -> syn::Result<TokenStream> {
        let base = &self.base;
        let private = quote!(#base::__private);
        let mut items = Vec::new();
        for field in &named.named {
            let attrs = Attrs::parse(&field.attrs)?;
            unsupported(&attrs)?;
            if attrs.skip {
                continue;
            }
            let ident = field
                .ident
                .as_ref()
                .ok_or_else(|| syn::Error::new(field.span(), "expected a named field"))?;
            let name = attrs.rename.clone().unwrap_or_else(|| {
                rename_all
                    .unwrap_or(Case::None)
                    .field(&ident.unraw().to_string())
            });
            let ty = field_type(field, &attrs)?;
            let has_default = all_default || attrs.default;
            let description = opt_str(&attrs.description);
            items.push(quote_spanned! {field.span()=>
                #private::Field {
                    name: #name,
                    schema: <#ty as #base::Schema>::schema(),
                    required: !#has_default && <#ty as #base::Schema>::required(),
                    description: #description,
                }
            });
        }
        Ok(quote!(::std::vec![#(#items),*]))
    }

    fn enumeration(&self, data: &DataEnum) -> syn::Result<TokenStream> {
        let base = &self.base;
        let private = quote!(#base::__private);
        let description = quote!(<Self as #base::Schema>::description());
        let attrs = &self.attrs;
        if attrs.content.is_some() && attrs.tag.is_none() {
            return Err(syn::Error::new(
                self.input.ident.span(),
                "#[serde(content = \"...\")] needs #[serde(tag = \"...\")]",
            ));
        }

        struct Variant<'v> {
            name: String,
            attrs: Attrs,
            fields: &'v Fields,
            span: Span,
        }
        let mut variants = Vec::new();
        for variant in &data.variants {
            let vattrs = Attrs::parse(&variant.attrs)?;
            unsupported(&vattrs)?;
            if vattrs.skip {
                continue;
            }
            if let Some(span) = vattrs.custom_deserialize {
                return Err(syn::Error::new(
                    span,
                    "#[derive(Schema)] cannot see what a custom deserializer accepts on a variant",
                ));
            }
            let name = vattrs.rename.clone().unwrap_or_else(|| {
                attrs
                    .rename_all
                    .unwrap_or(Case::None)
                    .variant(&variant.ident.unraw().to_string())
            });
            variants.push(Variant {
                name,
                attrs: vattrs,
                fields: &variant.fields,
                span: variant.span(),
            });
        }
        if variants.is_empty() {
            return Err(syn::Error::new(
                self.input.ident.span(),
                "#[derive(Schema)] needs at least one variant that can be deserialized",
            ));
        }

        let too_many = |span: Span| {
            syn::Error::new(
                span,
                "#[derive(Schema)] does not support tuple variants with several fields: their \
                 JSON form is an array of mixed types, which the schema subset cannot state. \
                 Use a struct variant.",
            )
        };
        // Payload of a newtype or struct variant, as a schema expression.
        let payload = |v: &Variant<'_>| -> syn::Result<Option<TokenStream>> {
            match v.fields {
                Fields::Unit => Ok(None),
                Fields::Unnamed(f) if f.unnamed.len() == 1 => {
                    let field = &f.unnamed[0];
                    let fattrs = Attrs::parse(&field.attrs)?;
                    unsupported(&fattrs)?;
                    let ty = field_type(field, &fattrs)?;
                    Ok(Some(quote!(<#ty as #base::Schema>::schema())))
                }
                Fields::Unnamed(_) => Err(too_many(v.span)),
                Fields::Named(named) => {
                    let case = v.attrs.rename_all.or(attrs.rename_all_fields);
                    let fields = self.named_fields(named, case, false)?;
                    Ok(Some(quote!(
                        #private::object(::core::option::Option::None, ::core::option::Option::None, #fields)
                    )))
                }
            }
        };

        let all_unit = variants.iter().all(|v| matches!(v.fields, Fields::Unit));
        // Unit variants' docs, as "- `name`: doc" lines.
        let unit_docs = |only_unit: bool| -> Option<String> {
            let lines: Vec<String> = variants
                .iter()
                .filter(|v| !only_unit || matches!(v.fields, Fields::Unit))
                .filter_map(|v| {
                    v.attrs
                        .description
                        .as_ref()
                        .map(|d| format!("- `{}`: {}", v.name, d.replace('\n', " ")))
                })
                .collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        };

        match (&attrs.tag, &attrs.content) {
            // Externally tagged (serde's default).
            (None, _) => {
                let unit_names: Vec<&str> = variants
                    .iter()
                    .filter(|v| matches!(v.fields, Fields::Unit))
                    .map(|v| v.name.as_str())
                    .collect();
                let docs = opt_str(&unit_docs(true));
                if all_unit {
                    return Ok(quote! {
                        let mut schema = #private::string_enum(&[#(#unit_names),*], #description);
                        #private::describe_more(&mut schema, #docs);
                        schema
                    });
                }
                let mut branches = Vec::new();
                if !unit_names.is_empty() {
                    branches.push(quote!(#private::string_enum(&[#(#unit_names),*], #docs)));
                }
                for v in variants
                    .iter()
                    .filter(|v| !matches!(v.fields, Fields::Unit))
                {
                    let name = &v.name;
                    let vdoc = opt_str(&v.attrs.description);
                    let Some(payload) = payload(v)? else { continue };
                    branches.push(quote! {
                        #private::object(
                            ::core::option::Option::Some(#name),
                            #vdoc,
                            ::std::vec![#private::Field {
                                name: #name,
                                schema: #payload,
                                required: true,
                                description: ::core::option::Option::None,
                            }],
                        )
                    });
                }
                Ok(quote!(#private::one_of(::std::vec![#(#branches),*], #description)))
            }
            // Internally tagged.
            (Some(tag), None) => {
                if all_unit {
                    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
                    let docs = opt_str(&unit_docs(true));
                    return Ok(quote! {
                        let mut tag = #private::string_enum(&[#(#names),*], ::core::option::Option::None);
                        #private::describe_more(&mut tag, #docs);
                        #private::object(
                            ::core::option::Option::None,
                            #description,
                            ::std::vec![#private::Field {
                                name: #tag,
                                schema: tag,
                                required: true,
                                description: ::core::option::Option::None,
                            }],
                        )
                    });
                }
                let mut branches = Vec::new();
                for v in &variants {
                    let name = &v.name;
                    let vdoc = opt_str(&v.attrs.description);
                    let branch = match v.fields {
                        Fields::Unit => quote! {
                            #private::with_tag(
                                #private::object(::core::option::Option::None, ::core::option::Option::None, ::std::vec![]),
                                #tag, #name, #vdoc,
                            )
                        },
                        Fields::Unnamed(f) if f.unnamed.len() == 1 => {
                            let field = &f.unnamed[0];
                            let fattrs = Attrs::parse(&field.attrs)?;
                            let ty = field_type(field, &fattrs)?;
                            let message = format!(
                                "#[derive(Schema)]: the payload of internally tagged variant `{name}` \
                                 must be a struct or a map (serde writes the tag among its members)"
                            );
                            quote_spanned! {field.span()=>
                                {
                                    const {
                                        ::core::assert!(<#ty as #base::Schema>::OBJECT_SHAPED, #message)
                                    };
                                    #private::with_tag(<#ty as #base::Schema>::schema(), #tag, #name, #vdoc)
                                }
                            }
                        }
                        Fields::Unnamed(_) => return Err(too_many(v.span)),
                        Fields::Named(_) => {
                            let Some(payload) = payload(v)? else { continue };
                            quote!(#private::with_tag(#payload, #tag, #name, #vdoc))
                        }
                    };
                    branches.push(branch);
                }
                Ok(quote!(#private::one_of(::std::vec![#(#branches),*], #description)))
            }
            // Adjacently tagged.
            (Some(tag), Some(content)) => {
                let mut branches = Vec::new();
                for v in &variants {
                    let name = &v.name;
                    let vdoc = opt_str(&v.attrs.description);
                    let mut fields = vec![quote! {
                        #private::Field {
                            name: #tag,
                            schema: #private::tag(#name),
                            required: true,
                            description: ::core::option::Option::None,
                        }
                    }];
                    if let Some(payload) = payload(v)? {
                        fields.push(quote! {
                            #private::Field {
                                name: #content,
                                schema: #payload,
                                required: true,
                                description: ::core::option::Option::None,
                            }
                        });
                    }
                    branches.push(quote! {
                        #private::object(::core::option::Option::Some(#name), #vdoc, ::std::vec![#(#fields),*])
                    });
                }
                Ok(quote!(#private::one_of(::std::vec![#(#branches),*], #description)))
            }
        }
    }
}

/// The type whose schema describes a field: its own, or `#[schema(with)]`.
fn field_type(field: &syn::Field, attrs: &Attrs) -> syn::Result<Type> {
    if let Some(with) = &attrs.with {
        return Ok(with.clone());
    }
    if let Some(span) = attrs.custom_deserialize {
        return Err(syn::Error::new(
            span,
            "#[derive(Schema)] cannot see what a custom deserializer accepts: add \
             #[schema(with = \"Type\")] naming a type whose JSON form is the same",
        ));
    }
    Ok(field.ty.clone())
}

#[cfg(test)]
mod tests {
    use super::doc_text;

    fn doc(lines: &[&str]) -> Option<String> {
        doc_text(&lines.iter().map(|l| l.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn wrapped_lines_become_one_paragraph() {
        assert_eq!(
            doc(&[
                " Find files whose path matches a glob pattern (`*`, `?`, `**` for any",
                " number of directories)."
            ])
            .unwrap(),
            "Find files whose path matches a glob pattern (`*`, `?`, `**` for any number of directories)."
        );
    }

    #[test]
    fn paragraphs_lists_and_code_keep_their_breaks() {
        assert_eq!(
            doc(&[
                " First.",
                "",
                "",
                " Second",
                " part.",
                " - one",
                " - two",
                " 1. first",
                " ```",
                " a",
                " b",
                " ```"
            ])
            .unwrap(),
            "First.\n\nSecond part.\n- one\n- two\n1. first\n```\na\nb\n```"
        );
        assert_eq!(doc(&["", " "]), None);
    }
}
