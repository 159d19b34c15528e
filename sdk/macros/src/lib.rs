//! Procedural macros of `toolgate-sdk`: the schema derive and the
//! component export. Use them through `toolgate_sdk`.

mod export;
mod schema_derive;

/// Derives `toolgate_sdk::Schema`: the JSON Schema of what serde's
/// `Deserialize` accepts for this type. See `sdk/SCHEMA.md`.
#[proc_macro_derive(Schema, attributes(schema))]
pub fn derive_schema(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    schema_derive::expand(syn::parse_macro_input!(input)).into()
}

/// Export a component's roles:
///
/// ```ignore
/// toolgate_sdk::export! {
///     tools: [ReadFile, ListDir],   // types implementing `Tool`
///     guard: NoSecrets,             // implements `Guard`
///     pre_execute: AskFirst,        // `PreExecuteHook`
///     execute_around: Timeout,      // `ExecuteAroundHook`
///     post_execute: Redact,         // `PostExecuteHook`
///     finalizer: Footer,            // `Finalizer`
///     observer: Audit,              // `ResultObserver`
/// }
/// ```
///
/// Every key is optional; give at least one. Call it once per component.
#[proc_macro]
pub fn export(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let parsed = syn::parse_macro_input!(input as export::Export);
    match export::expand(parsed) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}
