//! The exports of a `toolgate:plugin@0.2.x` component, looked up by hand.
//!
//! `bindgen!` can make export bindings either synchronous or asynchronous,
//! not both; a 0.2 component is called on whichever path its imports allow.
//! So each export is a [`TypedFunc`] looked up here — once per instance,
//! after its indices were resolved once per component — and called with
//! `call` or `call_async` by [`Lease::call`](crate::plugin::component::Lease).
//! Looking an export up checks its type against the contract: a component
//! whose `check` returns `bool` instead of `option<string>` is refused at
//! load with the function, the expected and the found type.

use wasmtime::Engine;
use wasmtime::component::types::{ComponentFunc, ComponentItem, Type};
use wasmtime::component::{Component, ComponentExportIndex, Instance, Resource, TypedFunc};

use crate::bindings::v0_2::wit;
use crate::bindings::{CallHandle, ResultHandle};
use crate::policy::Role;

type Call = Resource<CallHandle>;
type Res = Resource<ResultHandle>;
type Blocks = Vec<wit::ContentBlock>;
type Failing<T> = (Result<T, wit::ToolFailure>,);
/// A function of the call and a result.
type OnResult<R> = TypedFunc<(Call, Res), R>;

/// One instance's exports (only those of its roles are `Some`).
#[derive(Default)]
pub struct Exports {
    pub list_tools: Option<TypedFunc<(), (Vec<wit::ToolSpec>,)>>,
    pub is_concurrency_safe: Option<TypedFunc<(Call,), (bool,)>>,
    pub execute: Option<TypedFunc<(Call,), Failing<String>>>,
    pub render: Option<TypedFunc<(String, String), Failing<Blocks>>>,
    pub tool_finalize: Option<OnResult<(Option<Blocks>,)>>,
    pub present_call: Option<TypedFunc<(Call,), (Option<wit::CallView>,)>>,
    pub present_result: Option<OnResult<(Option<wit::ResultView>,)>>,
    pub pre_execute: Option<TypedFunc<(Call,), (wit::PreDecision,)>>,
    pub around_execute: Option<TypedFunc<(Call,), (Res,)>>,
    pub post_execute: Option<OnResult<(wit::PostDecision,)>>,
    pub check: Option<TypedFunc<(Call,), (Option<String>,)>>,
    pub finalize: Option<OnResult<(Option<Blocks>,)>>,
    pub on_result: Option<OnResult<()>>,
}

/// Every function of every role, with the signature the contract gives it.
pub const SIGNATURES: &[(Role, &str, &str)] = &[
    (Role::Tool, "list-tools", "func() -> list<tool-spec>"),
    (
        Role::Tool,
        "is-concurrency-safe",
        "func(call: borrow<call>) -> bool",
    ),
    (
        Role::Tool,
        "execute",
        "func(call: borrow<call>) -> result<json, tool-failure>",
    ),
    (
        Role::Tool,
        "render",
        "func(tool: string, value: json) -> result<list<content-block>, tool-failure>",
    ),
    (
        Role::Tool,
        "finalize-content",
        "func(call: borrow<call>, result: borrow<call-result>) -> option<list<content-block>>",
    ),
    (
        Role::Tool,
        "present-call",
        "func(call: borrow<call>) -> option<call-view>",
    ),
    (
        Role::Tool,
        "present-result",
        "func(call: borrow<call>, result: borrow<call-result>) -> option<result-view>",
    ),
    (
        Role::PreExecute,
        "pre-execute",
        "func(call: borrow<call>) -> pre-decision",
    ),
    (
        Role::ExecuteAround,
        "around-execute",
        "func(call: borrow<call>) -> call-result",
    ),
    (
        Role::PostExecute,
        "post-execute",
        "func(call: borrow<call>, result: borrow<call-result>) -> post-decision",
    ),
    (
        Role::Guard,
        "check",
        "func(call: borrow<call>) -> option<string>",
    ),
    (
        Role::Finalizer,
        "finalize-content",
        "func(call: borrow<call>, result: borrow<call-result>) -> option<list<content-block>>",
    ),
    (
        Role::Observer,
        "on-result",
        "func(call: borrow<call>, result: borrow<call-result>)",
    ),
];

/// One export function: its role, name, expected and found signatures.
struct Func {
    role: Role,
    name: &'static str,
    expected: &'static str,
    found: String,
    index: ComponentExportIndex,
}

/// Where each export of a component is.
pub struct Indices {
    funcs: Vec<Func>,
}

impl Indices {
    /// Resolve every function of `roles`; `iface(role)` is the exact name
    /// the component exports the role's interface under. `Err` names the
    /// missing function.
    pub fn new(
        component: &Component,
        roles: &[Role],
        iface: impl Fn(Role) -> String,
    ) -> Result<Indices, String> {
        let mut funcs = Vec::new();
        for role in roles {
            let name = iface(*role);
            let (_, instance) = component
                .get_export(None, &name)
                .ok_or_else(|| format!("does not export `{name}`"))?;
            for (r, func, sig) in SIGNATURES {
                if r != role {
                    continue;
                }
                let (item, index) = component
                    .get_export(Some(&instance), func)
                    .ok_or_else(|| {
                        format!("exports `{name}` without its function `{func}` (expected `{func}: {sig}`)")
                    })?;
                let found = match item {
                    ComponentItem::ComponentFunc(f) => describe_func(&f),
                    other => format!("{other:?}").chars().take(60).collect(),
                };
                funcs.push(Func {
                    role: *role,
                    name: func,
                    expected: sig,
                    found,
                    index,
                });
            }
        }
        Ok(Indices { funcs })
    }

    /// Look the exports up in a new instance, checking each one's type.
    pub fn load(
        &self,
        store: &mut wasmtime::Store<crate::plugin::store::StoreData>,
        instance: &Instance,
    ) -> wasmtime::Result<Exports> {
        let mut e = Exports::default();
        for f in &self.funcs {
            let index = &f.index;
            let mismatch = |err: wasmtime::Error| {
                wasmtime::format_err!(
                    "its `{}` function `{}` has the wrong type: expected `{}`, found `{}` ({err})",
                    f.role.interface(),
                    f.name,
                    f.expected,
                    f.found
                )
            };
            macro_rules! get {
                ($field:ident) => {
                    e.$field = Some(
                        instance
                            .get_typed_func(&mut *store, index)
                            .map_err(mismatch)?,
                    )
                };
            }
            match (f.role, f.name) {
                (Role::Tool, "list-tools") => get!(list_tools),
                (Role::Tool, "is-concurrency-safe") => get!(is_concurrency_safe),
                (Role::Tool, "execute") => get!(execute),
                (Role::Tool, "render") => get!(render),
                (Role::Tool, "finalize-content") => get!(tool_finalize),
                (Role::Tool, "present-call") => get!(present_call),
                (Role::Tool, "present-result") => get!(present_result),
                (Role::PreExecute, _) => get!(pre_execute),
                (Role::ExecuteAround, _) => get!(around_execute),
                (Role::PostExecute, _) => get!(post_execute),
                (Role::Guard, _) => get!(check),
                (Role::Finalizer, _) => get!(finalize),
                (Role::Observer, _) => get!(on_result),
                _ => unreachable!("SIGNATURES lists only these"),
            }
        }
        Ok(e)
    }
}

/// The signature of every exported function of `component`, by interface,
/// as WIT-like text (for `toolgate check` and load errors).
pub fn describe_exports(engine: &Engine, component: &Component) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (iface, ext) in component.component_type().exports(engine) {
        let ComponentItem::ComponentInstance(inst) = ext.ty else {
            continue;
        };
        for (name, ext) in inst.exports(engine) {
            if let ComponentItem::ComponentFunc(f) = ext.ty {
                out.push((iface.to_string(), name.to_string(), describe_func(&f)));
            }
        }
    }
    out
}

/// `func(a: T, …) -> R` for a component function type.
pub fn describe_func(f: &ComponentFunc) -> String {
    let params: Vec<String> = f
        .params()
        .map(|(name, ty)| format!("{name}: {}", describe(&ty, 0)))
        .collect();
    let results: Vec<String> = f.results().map(|t| describe(&t, 0)).collect();
    match results.len() {
        0 => format!("func({})", params.join(", ")),
        1 => format!("func({}) -> {}", params.join(", "), results[0]),
        _ => format!("func({}) -> ({})", params.join(", "), results.join(", ")),
    }
}

/// A type as WIT-like text, nested at most a few levels (a hostile type can
/// be deep; the text is for people).
pub fn describe(ty: &Type, depth: usize) -> String {
    if depth > 4 {
        return "…".into();
    }
    let d = |t: &Type| describe(t, depth + 1);
    match ty {
        Type::Bool => "bool".into(),
        Type::S8 => "s8".into(),
        Type::U8 => "u8".into(),
        Type::S16 => "s16".into(),
        Type::U16 => "u16".into(),
        Type::S32 => "s32".into(),
        Type::U32 => "u32".into(),
        Type::S64 => "s64".into(),
        Type::U64 => "u64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(l) => format!("list<{}>", d(&l.ty())),
        Type::Record(r) => format!(
            "record {{ {} }}",
            r.fields()
                .take(12)
                .map(|f| format!("{}: {}", f.name, d(&f.ty)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::Tuple(t) => format!(
            "tuple<{}>",
            t.types().map(|t| d(&t)).collect::<Vec<_>>().join(", ")
        ),
        Type::Variant(v) => format!(
            "variant {{ {} }}",
            v.cases()
                .take(12)
                .map(|c| match c.ty {
                    Some(t) => format!("{}({})", c.name, d(&t)),
                    None => c.name.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::Enum(e) => format!(
            "enum {{ {} }}",
            e.names().take(12).collect::<Vec<_>>().join(", ")
        ),
        Type::Option(o) => format!("option<{}>", d(&o.ty())),
        Type::Result(r) => format!(
            "result<{}, {}>",
            r.ok().map(|t| d(&t)).unwrap_or_else(|| "_".into()),
            r.err().map(|t| d(&t)).unwrap_or_else(|| "_".into())
        ),
        Type::Flags(f) => format!(
            "flags {{ {} }}",
            f.names().take(12).collect::<Vec<_>>().join(", ")
        ),
        Type::Own(_) => "own<resource>".into(),
        Type::Borrow(_) => "borrow<resource>".into(),
        other => format!("{other:?}").chars().take(40).collect(),
    }
}
