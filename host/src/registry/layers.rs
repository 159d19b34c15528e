//! Assembling a registry from what a reload decided: every layer's
//! generation (the global layer, each configured scope's own plugins),
//! every scope's view, every plugin's status.
//!
//! The lifecycle decides *what* serves (`lifecycle`); this module decides
//! *where*: each plugin's place in each chain — the operator's, else what
//! its manifest proposes, within limits for plugin files ([`floors`]) —
//! and how scopes compose ([`super::scopes`]). It reads the decisions
//! through [`Entry`], a borrowed view, so it depends on nothing of the
//! lifecycle.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::scopes::{self, Registry, ScopeRules};
use super::{Cost, Generation, NativePolicies, Placed, PluginState, PluginStatus};
use crate::plugin::PluginConfig;
use crate::plugin::manifest::DEFAULT_PRIORITY;
use crate::plugin::{ComponentPlugin, LoadError, Loaded, LoadedTool, Manifest, Origin};
use crate::policy::Role;

/// One plugin of one layer, as the reload decided it.
pub struct Entry<'a> {
    /// `""`: the global layer; else a configured scope.
    pub scope: &'a str,
    pub name: &'a str,
    /// Its `[plugins.NAME]` (or the scope's), if any.
    pub config: Option<&'a PluginConfig>,
    pub state: EntryState<'a>,
}

/// What serves for a plugin.
pub enum EntryState<'a> {
    /// A version serves.
    Serving(Serving<'a>),
    /// Nothing serves: why.
    Down(Refused<'a>),
    /// Still loading: left out of a start's first pass (why, and whether
    /// it may be a policy), or a new file still being written (`None`).
    Loading(Option<&'a LoadError>),
}

/// A version that serves.
pub struct Serving<'a> {
    pub plugin: &'a Arc<ComponentPlugin>,
    pub tools: &'a [LoadedTool],
    pub manifest: &'a Manifest,
    /// What loading it noted (tools not registered, …).
    pub notes: &'a [LoadError],
    /// The generation it was loaded in.
    pub generation: u64,
    pub sha256: &'a str,
    pub cost: Cost,
    /// An update refused while this version keeps serving.
    pub refused: Option<Refused<'a>>,
}

/// A refusal: why, and the digest of the file refused.
#[derive(Clone, Copy)]
pub struct Refused<'a> {
    pub error: &'a LoadError,
    pub sha256: Option<&'a str>,
}

/// One layer being assembled: what serves, its problems, and what blocks it.
#[derive(Default)]
struct Layer {
    placed: Vec<Placed>,
    problems: Vec<LoadError>,
    blocked: Vec<LoadError>,
}

/// The registry of generation `number`: the global layer (with the
/// embedder's `natives`, then `finish_global` — the bridged tools — applied
/// to it) and each of the configured `scopes` composed over its parent.
pub fn assemble(
    number: u64,
    scopes: &BTreeMap<String, super::scopes::ScopeConfig>,
    entries: &[Entry<'_>],
    natives: &NativePolicies,
    mut problems: Vec<LoadError>,
    finish_global: impl FnOnce(&mut Generation),
) -> Registry {
    let floors = floors(entries);
    let mut statuses = Vec::new();
    let mut layers: BTreeMap<String, Layer> = BTreeMap::new();
    layers.entry(String::new()).or_default();
    for name in scopes.keys() {
        layers.entry(name.clone()).or_default();
    }
    for e in entries {
        let layer = layers.entry(e.scope.to_string()).or_default();
        let status = |state, origin: String| PluginStatus {
            scope: e.scope.to_string(),
            name: e.name.to_string(),
            origin,
            state,
            generation: None,
            sha256: None,
            signer: None,
            refused: None,
            refused_sha256: None,
            cost: Cost::default(),
            plugin: None,
        };
        match &e.state {
            EntryState::Serving(s) => {
                let (priorities, notes) = priorities(s.plugin, s.manifest, e.config, &floors);
                layer.problems.extend(notes);
                layer.problems.extend(s.notes.iter().cloned());
                if let Some(r) = &s.refused {
                    let mut err = r.error.clone();
                    err.may_be_policy = false;
                    err.message = format!(
                        "{} — the update was refused; the version loaded in generation {} keeps serving",
                        err.message, s.generation
                    );
                    layer.problems.push(err);
                }
                layer.placed.push(Placed {
                    loaded: Loaded {
                        plugin: s.plugin.clone(),
                        tools: s.tools.to_vec(),
                        problems: Vec::new(),
                        load_time: Duration::from_micros(s.cost.load_us),
                    },
                    priorities,
                });
                statuses.push(PluginStatus {
                    generation: Some(s.generation),
                    sha256: Some(s.sha256.to_string()),
                    signer: match &s.plugin.origin {
                        crate::plugin::Origin::Oci { signer, .. } => signer.clone(),
                        _ => None,
                    },
                    refused: s.refused.map(|r| r.error.message.clone()),
                    refused_sha256: s.refused.and_then(|r| r.sha256.map(str::to_string)),
                    cost: s.cost.clone(),
                    plugin: Some(s.plugin.clone()),
                    ..status(PluginState::Serving, s.plugin.origin.to_string())
                });
            }
            EntryState::Down(r) => {
                layer.problems.push(r.error.clone());
                if r.error.may_be_policy && !e.config.is_some_and(|c| c.optional) {
                    layer.blocked.push(r.error.clone());
                }
                statuses.push(PluginStatus {
                    refused: Some(r.error.message.clone()),
                    refused_sha256: r.sha256.map(str::to_string),
                    ..status(PluginState::Refused, r.error.origin.clone())
                });
            }
            EntryState::Loading(deferred) => {
                // Even when `optional` (which means: serve without it if
                // it does not load): while it loads, it may still be a
                // policy that will serve.
                if let Some(d) = deferred.filter(|d| d.may_be_policy) {
                    layer.blocked.push(d.clone());
                }
                let origin = deferred.map(|d| d.origin.clone()).unwrap_or_default();
                statuses.push(status(PluginState::Loading, origin));
            }
        }
    }
    let global_layer = layers.remove("").unwrap_or_default();
    problems.extend(global_layer.problems);
    let mut global = super::assemble(number, global_layer.placed, natives, problems);
    global.blocked = global_layer.blocked;
    finish_global(&mut global);
    let mut registry = Registry::global_only(global, statuses);
    for (name, scope) in scopes {
        let layer = layers.remove(name).unwrap_or_default();
        let mut own = super::assemble(
            number,
            layer.placed,
            &NativePolicies::default(),
            layer.problems,
        );
        own.blocked = layer.blocked;
        let rules = ScopeRules::new(scope.allow.as_deref(), &scope.deny)
            .expect("checked when the configuration was read");
        let parent = match name.rsplit_once('/') {
            Some((parent, _)) => registry.view(parent).clone(),
            None => registry.global.clone(),
        };
        let view = scopes::compose(&parent, own, &rules);
        registry.add_scope(name, view);
    }
    registry
}

/// For each policy role, the lowest priority a plugin *file's own manifest*
/// may propose: just after the built-in policies of that role. A third
/// party's manifest may say where it would like to go, but a place outside
/// the built-in wrappers and guards (before the timeout wrapper, say) is
/// the operator's to give, in `[plugins.NAME]`.
fn floors(entries: &[Entry<'_>]) -> BTreeMap<Role, i32> {
    let mut floors = BTreeMap::new();
    for e in entries {
        let EntryState::Serving(s) = &e.state else {
            continue;
        };
        if s.plugin.origin != Origin::Builtin {
            continue;
        }
        for role in &s.plugin.roles {
            let p = s.manifest.priority(*role).unwrap_or(DEFAULT_PRIORITY);
            let floor = floors.entry(*role).or_insert(p + 1);
            *floor = (*floor).max(p + 1);
        }
    }
    floors
}

/// The priority of each role of `plugin`: the operator's, else its
/// manifest's (raised to the floor for plugin files, with a note).
fn priorities(
    plugin: &ComponentPlugin,
    manifest: &Manifest,
    config: Option<&PluginConfig>,
    floors: &BTreeMap<Role, i32>,
) -> (BTreeMap<Role, i32>, Vec<LoadError>) {
    let mut out = BTreeMap::new();
    let mut notes = Vec::new();
    for role in Role::ALL {
        let from_config =
            config.and_then(|c| c.priorities.get(role.as_str()).copied().or(c.priority));
        if let Some(p) = from_config {
            out.insert(role, p);
            continue;
        }
        let Some(mut p) = manifest.priority(role) else {
            continue;
        };
        if plugin.origin != Origin::Builtin
            && plugin.roles.contains(&role)
            && let Some(floor) = floors.get(&role)
            && p < *floor
        {
            notes.push(LoadError::note(
                &plugin.name,
                &plugin.origin,
                format!(
                    "its manifest asks for priority {p} in the {role} chain, before the built-in policies; placed at {floor} instead (only the operator can place it earlier: `priority` under [plugins.{}])",
                    plugin.name
                ),
            ));
            p = *floor;
        }
        out.insert(role, p);
    }
    (out, notes)
}
