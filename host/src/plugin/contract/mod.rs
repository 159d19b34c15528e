//! The WIT contract, version by version: which versions this host speaks,
//! what a component's type says about it, and each version's imports,
//! conversions and role adapters.
//!
//! * [`v0_2`] — `toolgate:plugin@0.2.x`, the current contract: the call and
//!   the result are resources; components that import nothing that can wait
//!   are called without a fiber.
//! * [`v0_1`] — `toolgate:plugin@0.1.x`, kept for the components third
//!   parties built against it; it behaves as it always did, as an adapter
//!   of 0.2: the types the two share are 0.2's, its imports call the 0.2
//!   ones, its answers convert to 0.2's (`From`) and are checked there.
//!
//! A component names one version throughout; mixing versions, or naming
//! one this host does not speak, is refused with both the version found and
//! the versions supported.

pub mod v0_1;
pub mod v0_2;

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::{Component, InstancePre, Linker};

use super::component::{CallPath, ComponentPlugin, ContractVersion, ExportLoader, InvokeError};
use super::store::StoreData;
use crate::call::{Annotations, CallSignal, Features};
use crate::grants::Grants;
use crate::policy::{
    ExecuteAroundHook, Finalizer, Guard, PostExecuteHook, PreExecuteHook, ResultObserver, Role,
};
use crate::tool::ToolBody;

/// The WIT package.
pub const PACKAGE: &str = "toolgate:plugin";
/// The version new components are built against.
pub const CURRENT: &str = "0.2.8";
/// The versions this host serves (any patch of each).
pub const SUPPORTED: &[&str] = &["0.1", "0.2"];

/// `toolgate:plugin/guard@0.1.0` → (`toolgate:plugin`, `guard`, `0.1.0`).
pub fn split_name(name: &str) -> Option<(&str, &str, Option<&str>)> {
    let (pkg, rest) = name.split_once('/')?;
    match rest.split_once('@') {
        Some((iface, version)) => Some((pkg, iface, Some(version))),
        None => Some((pkg, rest, None)),
    }
}

/// The contract version a version string belongs to, if this host speaks it.
pub fn version_of(v: &str) -> Option<ContractVersion> {
    let mut it = v.split(['.', '-', '+']);
    let (major, minor) = (
        it.next()?.parse::<u64>().ok()?,
        it.next()?.parse::<u64>().ok()?,
    );
    match (major, minor) {
        (0, 1) => Some(ContractVersion::V0_1),
        (0, 2) => Some(ContractVersion::V0_2),
        _ => None,
    }
}

/// What the type of a component says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub roles: Vec<Role>,
    pub version: ContractVersion,
    /// The exact version string the component names.
    pub wit_version: String,
    /// The exact export name of each role's interface.
    pub role_exports: BTreeMap<Role, String>,
    /// Every imported interface.
    pub imports: Vec<String>,
    /// The `toolgate:plugin` interfaces imported (without package and version).
    pub contract_imports: Vec<String>,
    /// The seams among them ([`crate::seams::all`]).
    pub seams: Vec<String>,
}

fn supported() -> String {
    SUPPORTED
        .iter()
        .map(|v| format!("{PACKAGE}@{v}.x"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Read the shape of a component; `Err` explains what is wrong.
pub fn inspect(engine: &Engine, component: &Component) -> Result<Shape, String> {
    let ty = component.component_type();
    let mut roles = Vec::new();
    let mut role_exports = BTreeMap::new();
    let mut versions: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    let mut exports = Vec::new();
    let mut note_version = |name: &str, version: Option<&str>, problems: &mut Vec<String>| {
        let version = version.unwrap_or("(none)");
        match version_of(version) {
            Some(_) => {
                if !versions.iter().any(|v| v == version) {
                    versions.push(version.to_string());
                }
                true
            }
            None => {
                problems.push(format!(
                    "names `{name}`, built against {PACKAGE}@{version}, but this host speaks {}; rebuild the plugin against {PACKAGE}@{CURRENT}",
                    supported()
                ));
                false
            }
        }
    };
    for (name, _) in ty.exports(engine) {
        exports.push(name.to_string());
        let Some((pkg, iface, version)) = split_name(name) else {
            continue;
        };
        if pkg != PACKAGE || !note_version(name, version, &mut problems) {
            continue;
        }
        match Role::ALL.iter().find(|r| r.interface() == iface) {
            Some(role) => {
                roles.push(*role);
                role_exports.insert(*role, name.to_string());
            }
            None => problems.push(format!(
                "exports `{name}`, which is not a role of {PACKAGE} (roles: {})",
                Role::ALL
                    .iter()
                    .map(|r| r.interface())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    let mut imports = Vec::new();
    let mut contract_imports = Vec::new();
    let mut seams = Vec::new();
    for (name, _) in ty.imports(engine) {
        imports.push(name.to_string());
        if let Some((pkg, iface, version)) = split_name(name)
            && pkg == PACKAGE
            && note_version(name, version, &mut problems)
        {
            contract_imports.push(iface.to_string());
            if crate::seams::find::<StoreData>(iface).is_some() {
                seams.push(iface.to_string());
            }
        }
    }
    let majors: Vec<ContractVersion> = versions.iter().filter_map(|v| version_of(v)).collect();
    if majors.windows(2).any(|w| w[0] != w[1]) {
        problems.push(format!(
            "mixes versions of {PACKAGE} ({}); a component must be built against one",
            versions.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    if roles.is_empty() {
        return Err(format!(
            "exports no {PACKAGE} role (its exports: {}); a plugin must export at least one of: {}",
            if exports.is_empty() {
                "none".to_string()
            } else {
                exports.join(", ")
            },
            Role::ALL
                .iter()
                .map(|r| format!("{PACKAGE}/{}", r.interface()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    roles.sort();
    let wit_version = versions.first().cloned().unwrap_or_else(|| CURRENT.into());
    Ok(Shape {
        version: version_of(&wit_version).unwrap_or(ContractVersion::V0_2),
        wit_version,
        roles,
        role_exports,
        imports,
        contract_imports,
        seams,
    })
}

/// Which path calls into this component take: without a fiber only for a
/// 0.2 component with no tool role (a tool body may run long), importing
/// from the contract only what never waits, and granted no file system or
/// network (whose WASI calls can wait).
pub fn call_path(shape: &Shape, grants: &Grants) -> CallPath {
    let waits_for_nothing = shape
        .contract_imports
        .iter()
        .all(|i| v0_2::imports::is_sync(i));
    let wasi_only_basic = shape.imports.iter().all(|name| {
        split_name(name).is_some_and(|(pkg, _, _)| {
            pkg == PACKAGE
                || matches!(
                    pkg,
                    "wasi:cli"
                        | "wasi:clocks"
                        | "wasi:random"
                        | "wasi:io"
                        | "wasi:filesystem"
                        | "wasi:sockets"
                )
        })
    });
    if shape.version == ContractVersion::V0_2
        && !shape.roles.contains(&Role::Tool)
        && waits_for_nothing
        && wasi_only_basic
        && grants.fs.is_empty()
        && grants.network.is_empty()
        && grants.egress.is_none()
    {
        CallPath::Sync
    } else {
        CallPath::Async
    }
}

/// The two linkers: everything (the async path), and what never waits (the
/// synchronous path; per component, its other imports become traps).
pub struct Linkers {
    pub full: Linker<StoreData>,
    pub sync: Linker<StoreData>,
}

impl Linkers {
    pub fn new(engine: &Engine) -> wasmtime::Result<Linkers> {
        let mut full = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut full)?;
        super::inline_fs::add_to_linker(&mut full)?;
        super::ungranted::add_to_linker(&mut full)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut full)?;
        v0_1::imports::add_to_linker(&mut full)?;
        v0_2::imports::add_to_linker(&mut full)?;
        crate::seams::add_to_linker(&mut full, false)?;
        let mut sync = Linker::new(engine);
        super::sync_wasi::add_to_linker(&mut sync)?;
        v0_2::imports::add_sync_to_linker(&mut sync)?;
        v0_2::imports::add_sync_chains_to_linker(&mut sync)?;
        crate::seams::add_to_linker(&mut sync, true)?;
        Ok(Linkers { full, sync })
    }

    /// Pre-instantiate `component` for `path`. On the synchronous path the
    /// imports this linker does not provide (the file system and sockets,
    /// which such a component is granted none of) trap if called.
    pub fn instantiate_pre(
        &self,
        component: &Component,
        path: CallPath,
    ) -> wasmtime::Result<InstancePre<StoreData>> {
        match path {
            CallPath::Async => self.full.instantiate_pre(component),
            CallPath::Sync => {
                let mut linker = self.sync.clone();
                stub_unprovided(&mut linker, component)?;
                linker.instantiate_pre(component)
            }
        }
    }
}

/// The packages the synchronous linker provides, whatever their version.
const SYNC_PACKAGES: &[&str] = &["wasi:cli", "wasi:clocks", "wasi:random", "wasi:io"];

/// A stand-in for the resources of interfaces the synchronous path does not
/// provide (no value of it ever exists).
struct Unprovided;

/// Define every import of `component` that the synchronous linker does not
/// provide (the file system and sockets, which a component on this path is
/// granted none of) as functions that trap with a message saying so.
/// (`Linker::define_unknown_imports_as_traps` would also stub interfaces
/// the linker provides at another patch version, shadowing the real ones.)
fn stub_unprovided(linker: &mut Linker<StoreData>, component: &Component) -> wasmtime::Result<()> {
    use wasmtime::component::ResourceType;
    use wasmtime::component::types::ComponentItem;
    let engine = component.engine().clone();
    // The resources of `wasi:io` that other interfaces re-export (a file's
    // streams): a stub must name them with the host's own types, or the
    // component's `use wasi:io/streams.{…}` no longer matches.
    let mut known: Vec<(ResourceType, ResourceType)> = Vec::new();
    for (name, ext) in component.component_type().imports(&engine) {
        let Some(("wasi:io", iface, _)) = split_name(name) else {
            continue;
        };
        let ComponentItem::ComponentInstance(instance) = ext.ty else {
            continue;
        };
        for (item, ext) in instance.exports(&engine) {
            let ComponentItem::Resource(ty) = ext.ty else {
                continue;
            };
            let host = match (iface, item) {
                ("streams", "input-stream") => {
                    ResourceType::host::<wasmtime_wasi_io::streams::DynInputStream>()
                }
                ("streams", "output-stream") => {
                    ResourceType::host::<wasmtime_wasi_io::streams::DynOutputStream>()
                }
                ("poll", "pollable") => ResourceType::host::<wasmtime_wasi_io::poll::DynPollable>(),
                ("error", "error") => ResourceType::host::<wasmtime_wasi_io::streams::Error>(),
                _ => continue,
            };
            known.push((ty, host));
        }
    }
    for (name, ext) in component.component_type().imports(&engine) {
        let provided = split_name(name).is_some_and(|(pkg, iface, _)| {
            SYNC_PACKAGES.contains(&pkg) || (pkg == PACKAGE && v0_2::imports::is_sync(iface))
        });
        let ComponentItem::ComponentInstance(instance) = ext.ty else {
            continue;
        };
        if provided {
            continue;
        }
        let mut stubs = linker.instance(name)?;
        for (item, ext) in instance.exports(&engine) {
            match ext.ty {
                ComponentItem::Resource(ty) => {
                    let host = known
                        .iter()
                        .find(|(t, _)| *t == ty)
                        .map(|(_, h)| *h)
                        .unwrap_or_else(ResourceType::host::<Unprovided>);
                    stubs.resource(item, host, |_, _| Ok(()))?
                }
                // No directory is preopened on this path (it is granted
                // none): say so, as the async path would, instead of
                // trapping. Language runtimes (CPython) ask at start-up. A
                // plugin given the sentinel of `ungranted` sees it alone.
                ComponentItem::ComponentFunc(_)
                    if item == "get-directories"
                        && split_name(name).is_some_and(|(pkg, iface, _)| {
                            pkg == "wasi:filesystem" && iface == "preopens"
                        }) =>
                {
                    stubs.func_new(item, |mut store, _, _, results| {
                        use wasmtime::component::{Resource, Val};
                        let mut dirs = Vec::new();
                        if store.data().plugin.sentinel {
                            let fd = Resource::<Unprovided>::new_own(0)
                                .try_into_resource_any(&mut store)?;
                            dirs.push(Val::Tuple(vec![Val::Resource(fd), Val::String("/".into())]));
                        }
                        results[0] = Val::List(dirs);
                        Ok(())
                    })?
                }
                // The only descriptor on this path is the sentinel: every
                // operation on it that can fail with an `error-code` is
                // refused with `access`, its path recorded (`ungranted`).
                ComponentItem::ComponentFunc(ty)
                    if split_name(name).is_some_and(|(pkg, iface, _)| {
                        pkg == "wasi:filesystem" && iface == "types"
                    }) && refusable(&ty) =>
                {
                    stubs.func_new(item, |mut store, _, params, results| {
                        use wasmtime::component::Val;
                        let path = params.iter().find_map(|p| match p {
                            Val::String(s) => Some(s.as_str()),
                            _ => None,
                        });
                        if let Some(path) = path {
                            super::ungranted::refuse(store.data_mut(), path);
                        }
                        results[0] = Val::Result(Err(Some(Box::new(Val::Enum("access".into())))));
                        Ok(())
                    })?
                }
                ComponentItem::ComponentFunc(_) => {
                    let what = format!("{name}#{item}");
                    stubs.func_new(item, move |_, _, _, _| {
                        Err(wasmtime::format_err!(
                            "`{what}` is not available: this component runs on the synchronous path, with no file-system or network grant"
                        ))
                    })?
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Does a function of `wasi:filesystem/types` answer one
/// `result<_, error-code>` (so it can be refused with `access`)?
fn refusable(ty: &wasmtime::component::types::ComponentFunc) -> bool {
    use wasmtime::component::types::Type;
    let mut results = ty.results();
    match (results.next(), results.next()) {
        (Some(Type::Result(r)), None) => {
            matches!(r.err(), Some(Type::Enum(e)) if e.names().any(|n| n == "access"))
        }
        _ => false,
    }
}

/// Resolve the exports of `shape`'s roles once, for every instance to come.
pub fn export_loader(
    shape: &Shape,
    component: &Component,
    pre: &InstancePre<StoreData>,
) -> Result<ExportLoader, String> {
    Ok(match shape.version {
        ContractVersion::V0_2 => {
            let indices = v0_2::exports::Indices::new(component, &shape.roles, |role| {
                shape.role_exports[&role].clone()
            })?;
            Arc::new(move |store, instance| Ok(Box::new(indices.load(store, instance)?)))
        }
        ContractVersion::V0_1 => {
            let indices = v0_1::roles::Indices::new(pre, &shape.roles)?;
            Arc::new(move |store, instance| Ok(Box::new(indices.load(store, instance)?)))
        }
    })
}

/// A tool as its component lists it, whatever the version.
#[derive(Clone, Debug)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub parameters: String,
    pub output_schema: Option<String>,
    pub timeout_ms: Option<u32>,
    pub annotations: Annotations,
    pub features: Features,
}

/// Call `list-tools` under `signal` (a 0.1 `tool-spec` as a 0.2 one).
pub async fn list_tools(
    plugin: &ComponentPlugin,
    signal: CallSignal,
) -> Result<Vec<ListedTool>, InvokeError> {
    let specs = match plugin.contract {
        ContractVersion::V0_2 => v0_2::list_tools(plugin, signal).await?,
        ContractVersion::V0_1 => v0_1::roles::list_tools(plugin, signal)
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    };
    Ok(specs
        .into_iter()
        .map(|s| ListedTool {
            name: s.name,
            description: s.description,
            parameters: s.parameters,
            output_schema: s.output_schema,
            timeout_ms: s.timeout_ms,
            annotations: v0_2::convert::annotations_from_wit(s.annotations),
            features: v0_2::convert::features_from_wit(s.features),
        })
        .collect())
}

/// The plugin's role adapters, for the registry.
pub struct Adapters;

impl Adapters {
    pub fn pre_execute(p: &Arc<ComponentPlugin>) -> Arc<dyn PreExecuteHook> {
        match p.contract {
            ContractVersion::V0_2 => Arc::new(v0_2::roles::PreHook(p.clone())),
            ContractVersion::V0_1 => Arc::new(v0_1::roles::PreHook(p.clone())),
        }
    }
    pub fn execute_around(p: &Arc<ComponentPlugin>) -> Arc<dyn ExecuteAroundHook> {
        match p.contract {
            ContractVersion::V0_2 => Arc::new(v0_2::roles::AroundHook(p.clone())),
            ContractVersion::V0_1 => Arc::new(v0_1::roles::AroundHook(p.clone())),
        }
    }
    pub fn post_execute(p: &Arc<ComponentPlugin>) -> Arc<dyn PostExecuteHook> {
        match p.contract {
            ContractVersion::V0_2 => Arc::new(v0_2::roles::PostHook(p.clone())),
            ContractVersion::V0_1 => Arc::new(v0_1::roles::PostHook(p.clone())),
        }
    }
    pub fn guard(p: &Arc<ComponentPlugin>) -> Arc<dyn Guard> {
        match p.contract {
            ContractVersion::V0_2 => Arc::new(v0_2::roles::GuardPolicy(p.clone())),
            ContractVersion::V0_1 => Arc::new(v0_1::roles::GuardPolicy(p.clone())),
        }
    }
    pub fn finalizer(p: &Arc<ComponentPlugin>) -> Arc<dyn Finalizer> {
        match p.contract {
            ContractVersion::V0_2 => Arc::new(v0_2::roles::FinalizerPolicy(p.clone())),
            ContractVersion::V0_1 => Arc::new(v0_1::roles::FinalizerPolicy(p.clone())),
        }
    }
    pub fn observer(p: &Arc<ComponentPlugin>) -> Arc<dyn ResultObserver> {
        match p.contract {
            ContractVersion::V0_2 => Arc::new(v0_2::roles::Observer(p.clone())),
            ContractVersion::V0_1 => Arc::new(v0_1::roles::Observer(p.clone())),
        }
    }
    pub fn tool(p: &Arc<ComponentPlugin>) -> Arc<dyn ToolBody> {
        match p.contract {
            ContractVersion::V0_2 => Arc::new(v0_2::roles::Tool(p.clone())),
            ContractVersion::V0_1 => Arc::new(v0_1::roles::Tool(p.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(version_of("0.1.0"), Some(ContractVersion::V0_1));
        assert_eq!(version_of("0.1.7"), Some(ContractVersion::V0_1));
        assert_eq!(version_of("0.2.3"), Some(ContractVersion::V0_2));
        assert_eq!(version_of("0.2.4"), Some(ContractVersion::V0_2));
        assert_eq!(version_of("0.2.5"), Some(ContractVersion::V0_2));
        assert_eq!(version_of("0.2.6"), Some(ContractVersion::V0_2));
        assert_eq!(version_of("0.3.0"), None);
        assert_eq!(version_of("1.0.0"), None);
        assert_eq!(version_of("garbage"), None);
    }

    #[test]
    fn names() {
        assert_eq!(
            split_name("toolgate:plugin/guard@0.1.0"),
            Some(("toolgate:plugin", "guard", Some("0.1.0")))
        );
        assert_eq!(
            split_name("wasi:cli/stdout"),
            Some(("wasi:cli", "stdout", None))
        );
        assert_eq!(split_name("nonsense"), None);
    }
}
