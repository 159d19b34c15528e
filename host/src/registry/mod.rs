//! Generations: an immutable snapshot of every tool and policy chain.
//!
//! Loading plugins produces a new [`Registry`] — the global layer and one
//! layer per configured agent scope, each resolved into a [`Generation`]
//! (the tools and chains a call from that scope sees; see [`scopes`]) —,
//! which replaces the old one atomically. A call holds the generation it
//! started with (an `Arc`) until it ends, so a reload never changes the
//! tools, chains or finalizers of a call in flight.

pub mod layers;
pub mod scopes;
pub mod status;

pub use scopes::{Registry, ScopeRules};
pub use status::{Cost, PluginState, PluginStatus};

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::grants::Grants;
use crate::plugin::contract::Adapters;
use crate::plugin::manifest::DEFAULT_PRIORITY;
use crate::plugin::{CallPath, ComponentPlugin, ContractVersion, InstanceMode, LoadError, Loaded};
use crate::policy::{
    Chain, ExecuteAroundHook, Finalizer, Guard, Listener, PolicySource, PostExecuteHook,
    PreExecuteHook, ResultObserver, Role, order,
};
use crate::tool::{ModelTool, ToolEntry};

/// The ordered policy chains of a generation.
pub struct Policies {
    pub pre_execute: Chain<dyn PreExecuteHook>,
    pub execute_around: Chain<dyn ExecuteAroundHook>,
    pub post_execute: Chain<dyn PostExecuteHook>,
    pub guards: Chain<dyn Guard>,
    pub finalizers: Chain<dyn Finalizer>,
    pub observers: Chain<dyn ResultObserver>,
}

/// A native policy registered by an embedder.
pub struct Native<P: ?Sized> {
    pub name: String,
    pub priority: i32,
    pub policy: Arc<P>,
}

impl<P: ?Sized> Clone for Native<P> {
    fn clone(&self) -> Self {
        Native {
            name: self.name.clone(),
            priority: self.priority,
            policy: self.policy.clone(),
        }
    }
}

/// Every native policy registered by the embedder.
#[derive(Clone, Default)]
pub struct NativePolicies {
    pub pre_execute: Vec<Native<dyn PreExecuteHook>>,
    pub execute_around: Vec<Native<dyn ExecuteAroundHook>>,
    pub post_execute: Vec<Native<dyn PostExecuteHook>>,
    pub guards: Vec<Native<dyn Guard>>,
    pub finalizers: Vec<Native<dyn Finalizer>>,
    pub observers: Vec<Native<dyn ResultObserver>>,
    /// Tools implemented in Rust by the embedder (registered after the
    /// plugins' tools, so they win a name clash).
    pub tools: Vec<Arc<ToolEntry>>,
}

/// What a listing shows about a plugin (camelCase keys, as every JSON the
/// CLI prints: `plugins --json`, `check --json`, results).
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    pub name: String,
    pub origin: String,
    pub roles: Vec<Role>,
    pub wit_version: String,
    /// The contract version (`0.1` or `0.2`).
    pub contract: ContractVersion,
    /// How calls into it are made (`sync`: no fiber; `async`).
    #[serde(rename = "callPath")]
    pub path: CallPath,
    /// How long it took to load, in microseconds.
    pub load_us: u64,
    pub tools: Vec<String>,
    /// The priority of each policy role this plugin has.
    pub priorities: BTreeMap<Role, i32>,
    pub instances: InstanceMode,
    pub imports: Vec<String>,
    #[serde(skip)]
    pub grants: Arc<Grants>,
    #[serde(skip)]
    pub plugin: Arc<ComponentPlugin>,
}

/// One immutable snapshot of the registry.
pub struct Generation {
    pub number: u64,
    pub tools: BTreeMap<String, Arc<ToolEntry>>,
    pub policies: Policies,
    pub plugins: Vec<PluginInfo>,
    /// Plugins (or tools) that did not load, and why.
    pub problems: Vec<LoadError>,
    /// Plugins that did not load and might be policies (not marked
    /// `optional`): while any is listed, the generation refuses every call.
    pub blocked: Vec<LoadError>,
    /// A digest of what the model sees of the tools ([`Generation::model_tools`]
    /// and the MCP projection's fields): equal digests, equal lists. A
    /// server compares it to tell its client the list changed.
    pub tools_digest: u64,
}

impl Generation {
    /// The model-facing projection of every tool, sorted by name.
    pub fn model_tools(&self) -> Vec<ModelTool> {
        self.tools.values().map(|t| t.def.projection()).collect()
    }

    /// Digest of the model-facing projection of `tools` (see `tools_digest`).
    pub fn digest_tools(tools: &BTreeMap<String, Arc<ToolEntry>>) -> u64 {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for t in tools.values() {
            let d = &t.def;
            let a = &d.meta.annotations;
            let text = serde_json::json!([
                d.name,
                d.description,
                d.parameters,
                d.output_schema,
                format!("{a:?}"),
            ]);
            h.update(text.to_string().as_bytes());
            h.update([0]);
        }
        let out = h.finalize();
        u64::from_le_bytes(out[..8].try_into().expect("32 bytes"))
    }

    /// A listener of any chain, by name and role, for inspection.
    pub fn listener_calls(&self, role: Role, name: &str) -> Option<u64> {
        fn find<P: ?Sized>(chain: &Chain<P>, name: &str) -> Option<u64> {
            chain.iter().find(|l| l.name == name).map(Listener::calls)
        }
        let p = &self.policies;
        match role {
            Role::Tool => None,
            Role::PreExecute => find(&p.pre_execute, name),
            Role::ExecuteAround => find(&p.execute_around, name),
            Role::PostExecute => find(&p.post_execute, name),
            Role::Guard => find(&p.guards, name),
            Role::Finalizer => find(&p.finalizers, name),
            Role::Observer => find(&p.observers, name),
        }
    }

    /// Every policy in chain order: (role, name, priority, source).
    pub fn chain_order(&self) -> Vec<(Role, String, i32, PolicySource)> {
        fn list<P: ?Sized>(
            role: Role,
            chain: &Chain<P>,
            out: &mut Vec<(Role, String, i32, PolicySource)>,
        ) {
            out.extend(
                chain
                    .iter()
                    .map(|l| (role, l.name.clone(), l.priority, l.source.clone())),
            );
        }
        let p = &self.policies;
        let mut out = Vec::new();
        list(Role::PreExecute, &p.pre_execute, &mut out);
        list(Role::Guard, &p.guards, &mut out);
        list(Role::ExecuteAround, &p.execute_around, &mut out);
        list(Role::PostExecute, &p.post_execute, &mut out);
        list(Role::Finalizer, &p.finalizers, &mut out);
        list(Role::Observer, &p.observers, &mut out);
        out
    }
}

/// A loaded plugin with the priorities the host resolved for it.
pub struct Placed {
    pub loaded: Loaded,
    pub priorities: BTreeMap<Role, i32>,
}

/// Assemble a generation. Plugins are registered in order; a later tool of
/// the same name replaces an earlier one (a `--plugins` directory overrides
/// the built-ins), and the replacement is noted in `problems`.
pub fn assemble(
    number: u64,
    placed: Vec<Placed>,
    natives: &NativePolicies,
    mut problems: Vec<LoadError>,
) -> Generation {
    let mut tools: BTreeMap<String, Arc<ToolEntry>> = BTreeMap::new();
    let mut pre = Vec::new();
    let mut around = Vec::new();
    let mut post = Vec::new();
    let mut guards = Vec::new();
    let mut finalizers = Vec::new();
    let mut observers = Vec::new();
    let mut plugins = Vec::new();
    for Placed { loaded, priorities } in placed {
        let plugin = loaded.plugin;
        let source = || PolicySource::Component {
            plugin: plugin.name.clone(),
        };
        let prio = |role| priorities.get(&role).copied().unwrap_or(DEFAULT_PRIORITY);
        let name = plugin.name.clone();
        let bounded = plugin.path == CallPath::Sync;
        for role in &plugin.roles {
            match role {
                Role::Tool => {}
                Role::PreExecute => pre.push(
                    Listener::new(&name, prio(*role), source(), Adapters::pre_execute(&plugin))
                        .self_bounded(bounded),
                ),
                Role::ExecuteAround => around.push(
                    Listener::new(
                        &name,
                        prio(*role),
                        source(),
                        Adapters::execute_around(&plugin),
                    )
                    .self_bounded(bounded),
                ),
                Role::PostExecute => post.push(
                    Listener::new(
                        &name,
                        prio(*role),
                        source(),
                        Adapters::post_execute(&plugin),
                    )
                    .self_bounded(bounded),
                ),
                Role::Guard => guards.push(
                    Listener::new(&name, prio(*role), source(), Adapters::guard(&plugin))
                        .self_bounded(bounded),
                ),
                Role::Finalizer => finalizers.push(
                    Listener::new(&name, prio(*role), source(), Adapters::finalizer(&plugin))
                        .self_bounded(bounded),
                ),
                Role::Observer => observers.push(
                    Listener::new(&name, prio(*role), source(), Adapters::observer(&plugin))
                        .self_bounded(bounded),
                ),
            }
        }
        let body = Adapters::tool(&plugin);
        let mut names = Vec::new();
        for t in loaded.tools {
            names.push(t.def.name.clone());
            if let Some(old) = tools.get(&t.def.name) {
                problems.push(LoadError::note(
                    &name,
                    &plugin.origin,
                    format!(
                        "its tool `{}` replaces the one from `{}`",
                        t.def.name, old.def.meta.provider
                    ),
                ));
            }
            tools.insert(
                t.def.name.clone(),
                Arc::new(ToolEntry {
                    def: t.def,
                    parameters: t.parameters,
                    output: t.output,
                    body: body.clone(),
                }),
            );
        }
        problems.extend(loaded.problems);
        plugins.push(PluginInfo {
            name: name.clone(),
            origin: plugin.origin.to_string(),
            roles: plugin.roles.clone(),
            wit_version: plugin.wit_version.clone(),
            contract: plugin.contract,
            path: plugin.path,
            load_us: loaded.load_time.as_micros() as u64,
            tools: names,
            priorities: plugin
                .roles
                .iter()
                .filter(|r| **r != Role::Tool)
                .map(|r| (*r, prio(*r)))
                .collect(),
            instances: plugin.mode,
            imports: plugin.imports.clone(),
            grants: plugin.context.grants.clone(),
            plugin: plugin.clone(),
        });
    }
    fn natives_into<P: ?Sized>(list: &[Native<P>], into: &mut Vec<Listener<P>>) {
        into.extend(
            list.iter().map(|n| {
                Listener::new(&n.name, n.priority, PolicySource::Native, n.policy.clone())
            }),
        );
    }
    natives_into(&natives.pre_execute, &mut pre);
    natives_into(&natives.execute_around, &mut around);
    natives_into(&natives.post_execute, &mut post);
    natives_into(&natives.guards, &mut guards);
    natives_into(&natives.finalizers, &mut finalizers);
    natives_into(&natives.observers, &mut observers);
    for t in &natives.tools {
        tools.insert(t.def.name.clone(), t.clone());
    }
    let tools_digest = Generation::digest_tools(&tools);
    Generation {
        number,
        tools,
        tools_digest,
        policies: Policies {
            pre_execute: order(pre),
            execute_around: order(around),
            post_execute: order(post),
            guards: order(guards),
            finalizers: order(finalizers),
            observers: order(observers),
        },
        plugins,
        problems,
        blocked: Vec::new(),
    }
}
