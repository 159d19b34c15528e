//! `export! { tools: [..], guard: .., ... }`: one component, any roles.
//!
//! The macro composes a world that includes exactly the role worlds asked
//! for, runs wit-bindgen on it in the caller's crate (with every shared
//! interface mapped to the SDK's own bindings, so types are the SDK's), and
//! implements each exported interface by dispatching to the author's types.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Ident, Path, Token, bracketed};

/// The version of `toolgate:plugin` the SDK builds against.
const WIT_VERSION: &str = "0.2.8";

#[derive(Default)]
pub struct Export {
    tools: Vec<Path>,
    guard: Option<Path>,
    pre_execute: Option<Path>,
    execute_around: Option<Path>,
    post_execute: Option<Path>,
    finalizer: Option<Path>,
    observer: Option<Path>,
}

impl Parse for Export {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut e = Export::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            input.parse::<Token![:]>()?;
            let slot = match key.to_string().as_str() {
                "tools" => {
                    let content;
                    bracketed!(content in input);
                    let list = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                    if !e.tools.is_empty() {
                        return Err(syn::Error::new(key.span(), "`tools` given twice"));
                    }
                    e.tools = list.into_iter().collect();
                    if e.tools.is_empty() {
                        return Err(syn::Error::new(key.span(), "`tools: []` lists no tool"));
                    }
                    None
                }
                "guard" => Some(&mut e.guard),
                "pre_execute" => Some(&mut e.pre_execute),
                "execute_around" => Some(&mut e.execute_around),
                "post_execute" => Some(&mut e.post_execute),
                "finalizer" => Some(&mut e.finalizer),
                "observer" => Some(&mut e.observer),
                other => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown role `{other}`; expected one of: tools, guard, pre_execute, execute_around, post_execute, finalizer, observer"
                        ),
                    ));
                }
            };
            if let Some(slot) = slot {
                if slot.is_some() {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("`{key}` given twice (a component exports each role once)"),
                    ));
                }
                *slot = Some(input.parse()?);
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(e)
    }
}

pub fn expand(e: Export) -> syn::Result<TokenStream> {
    let wit_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
    let wit_dir = wit_dir.canonicalize().map_err(|err| {
        syn::Error::new(
            proc_macro2::Span::call_site(),
            format!(
                "cannot find the toolgate WIT package at {}: {err}",
                wit_dir.display()
            ),
        )
    })?;
    let wit_dir = wit_dir.display().to_string();

    let v = WIT_VERSION;
    let mut worlds = Vec::new();
    let mut imports = vec!["types", "log", "cancellation", "kv"];
    let mut impls = Vec::new();

    if !e.tools.is_empty() {
        worlds.push("tool-plugin");
        imports.extend([
            "deferred-context",
            "shell",
            "subprocess",
            "process",
            "jobs",
            "terminals",
            "web-search",
            "lsp",
            "skills",
            "questions",
            "history",
            "model",
            "files",
            "bulk-read",
        ]);
        let tools = &e.tools;
        impls.push(quote! {
            impl exports::toolgate::plugin::tool::Guest for __Component {
                fn list_tools() -> ::std::vec::Vec<__types::ToolSpec> {
                    ::std::vec![#( __p::tool_spec::<#tools>() ),*]
                }
                fn is_concurrency_safe(call: &__types::Call) -> bool {
                    let tool = __p::tool_name(call);
                    #( if tool == <#tools as ::toolgate_sdk::Tool>::NAME { return __p::is_concurrency_safe::<#tools>(call); } )*
                    false
                }
                fn execute(call: &__types::Call) -> ::std::result::Result<::std::string::String, __types::ToolFailure> {
                    let tool = __p::tool_name(call);
                    #( if tool == <#tools as ::toolgate_sdk::Tool>::NAME { return __p::execute::<#tools>(call); } )*
                    Err(__p::unknown_tool(&tool))
                }
                fn render(tool: ::std::string::String, value: ::std::string::String) -> ::std::result::Result<::std::vec::Vec<__types::ContentBlock>, __types::ToolFailure> {
                    #( if tool == <#tools as ::toolgate_sdk::Tool>::NAME { return __p::render::<#tools>(&value); } )*
                    Err(__p::unknown_tool(&tool))
                }
                fn finalize_content(call: &__types::Call, result: &__types::CallResult) -> ::std::option::Option<::std::vec::Vec<__types::ContentBlock>> {
                    let tool = __p::tool_name(call);
                    #( if tool == <#tools as ::toolgate_sdk::Tool>::NAME { return __p::finalize_content::<#tools>(call, result); } )*
                    None
                }
                fn present_call(call: &__types::Call) -> ::std::option::Option<__types::CallView> {
                    let tool = __p::tool_name(call);
                    #( if tool == <#tools as ::toolgate_sdk::Tool>::NAME { return __p::present_call::<#tools>(call); } )*
                    None
                }
                fn present_result(call: &__types::Call, result: &__types::CallResult) -> ::std::option::Option<__types::ResultView> {
                    let tool = __p::tool_name(call);
                    #( if tool == <#tools as ::toolgate_sdk::Tool>::NAME { return __p::present_result::<#tools>(call, result); } )*
                    None
                }
            }
        });
    }
    if let Some(g) = &e.guard {
        worlds.push("guard-plugin");
        impls.push(quote! {
            impl exports::toolgate::plugin::guard::Guest for __Component {
                fn check(call: &__types::Call) -> ::std::option::Option<::std::string::String> {
                    __p::guard::<#g>(call)
                }
            }
        });
    }
    if let Some(h) = &e.pre_execute {
        worlds.push("pre-execute-plugin");
        imports.push("pre-execute-chain");
        impls.push(quote! {
            impl exports::toolgate::plugin::pre_execute_hook::Guest for __Component {
                fn pre_execute(call: &__types::Call) -> __types::PreDecision {
                    __p::pre_execute::<#h>(call)
                }
            }
        });
    }
    if let Some(h) = &e.execute_around {
        worlds.push("execute-around-plugin");
        imports.push("execute-chain");
        impls.push(quote! {
            impl exports::toolgate::plugin::execute_around_hook::Guest for __Component {
                fn around_execute(call: &__types::Call) -> __types::CallResult {
                    __p::around_execute::<#h>(call)
                }
            }
        });
    }
    if let Some(h) = &e.post_execute {
        worlds.push("post-execute-plugin");
        imports.push("post-execute-chain");
        impls.push(quote! {
            impl exports::toolgate::plugin::post_execute_hook::Guest for __Component {
                fn post_execute(call: &__types::Call, result: &__types::CallResult) -> __types::PostDecision {
                    __p::post_execute::<#h>(call, result)
                }
            }
        });
    }
    if let Some(f) = &e.finalizer {
        worlds.push("finalizer-plugin");
        impls.push(quote! {
            impl exports::toolgate::plugin::finalizer::Guest for __Component {
                fn finalize_content(call: &__types::Call, result: &__types::CallResult) -> ::std::option::Option<::std::vec::Vec<__types::ContentBlock>> {
                    __p::finalizer::<#f>(call, result)
                }
            }
        });
    }
    if let Some(o) = &e.observer {
        worlds.push("observer-plugin");
        impls.push(quote! {
            impl exports::toolgate::plugin::result_observer::Guest for __Component {
                fn on_result(call: &__types::Call, result: &__types::CallResult) {
                    __p::observer::<#o>(call, result)
                }
            }
        });
    }
    if worlds.is_empty() {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "export! needs at least one role, e.g. `export! { tools: [MyTool] }`",
        ));
    }
    // The role worlds import no seam (a seam needs a grant); the Rust
    // linker keeps only the imports the code calls, so importing every
    // interface here costs nothing and lets the SDK's wrappers link.
    let inline = format!(
        "package toolgate:component;\nworld component {{\n{}{}}}\n",
        worlds
            .iter()
            .map(|w| format!("  include toolgate:plugin/{w}@{v};\n"))
            .collect::<String>(),
        imports
            .iter()
            .map(|i| format!("  import toolgate:plugin/{i}@{v};\n"))
            .collect::<String>()
    );
    let with = imports.iter().map(|i| {
        let key = format!("toolgate:plugin/{i}@{v}");
        let module = Ident::new(&i.replace('-', "_"), proc_macro2::Span::call_site());
        quote! { #key: ::toolgate_sdk::bindings::toolgate::plugin::#module, }
    });
    Ok(quote! {
        #[doc(hidden)]
        #[allow(warnings, clippy::all)]
        mod __toolgate_export {
            use super::*;
            use ::toolgate_sdk::__private as __p;
            use ::toolgate_sdk::bindings::toolgate::plugin::types as __types;

            ::toolgate_sdk::__private::wit_bindgen::generate!({
                inline: #inline,
                path: #wit_dir,
                world: "toolgate:component/component",
                runtime_path: "::toolgate_sdk::__private::wit_bindgen::rt",
                with: { #( #with )* },
            });

            pub struct __Component;
            #( #impls )*
            export!(__Component);
        }
    })
}
