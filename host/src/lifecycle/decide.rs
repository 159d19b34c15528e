//! The decide phase of a reload: for one plugin, what serves in the next
//! generation — the version serving, a new one, or nothing — loading what
//! must be loaded and refusing an update that is bad, escalates or clashes
//! (see the module documentation of [`super`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::footprint::{self, Consent, Footprint};
use super::scan::Stamp;
use super::{Candidate, Key, Lifecycle, Refusal, Serving, State, plugin_config};
use crate::HostConfig;
use crate::grants::{Authority, resolve_grants};
use crate::plugin::PluginConfig;
use crate::plugin::{
    InstanceMode, LoadError, LoadErrorKind, LoadSettings, Loaded, Origin, PluginSource, builtin,
    loader,
};

/// One plugin to decide, with everything the decision reads.
pub(super) struct Plan {
    pub key: Key,
    pub candidate: Candidate,
    /// Its settings under the configuration in force, or why they cannot
    /// be resolved.
    pub settings: Result<LoadSettings, LoadError>,
    pub plugin_config: Option<PluginConfig>,
    /// The version serving now.
    pub prev: Option<Arc<Serving>>,
    /// The update refused last (not tried again unchanged).
    pub refusal: Option<Refusal>,
    /// The footprint of the last version accepted.
    pub baseline: Option<Footprint>,
}

/// What serves for a plugin in the next generation.
pub(super) enum Decision {
    Serve {
        serving: Arc<Serving>,
        /// Loaded by this reload (not kept from an earlier generation).
        fresh: bool,
        /// The update refused while this version keeps serving.
        refused: Option<Refusal>,
    },
    /// Nothing serves.
    Down(Refusal),
    /// A new file still being written: nothing serves yet.
    Pending,
    /// Left out of a start's first pass (it must compile); why, and
    /// whether it may be a policy.
    Deferred(LoadError),
}

impl Lifecycle {
    /// Decide what serves for one plugin.
    pub(super) async fn decide(&self, plan: Plan, number: u64) -> Decision {
        let Plan {
            key,
            candidate,
            settings,
            plugin_config,
            prev,
            refusal,
            baseline,
        } = plan;
        let key = &key;
        let settings = match settings {
            Ok(s) => s,
            Err(error) => {
                let r = Refusal {
                    stamp: None,
                    settings_config: plugin_config,
                    error,
                    sha256: None,
                };
                return match prev {
                    Some(p) => Decision::Serve {
                        serving: p,
                        fresh: false,
                        refused: Some(r),
                    },
                    None => Decision::Down(r),
                };
            }
        };
        match candidate {
            Candidate::Unchanged => {
                let p = prev.expect("unchanged means serving");
                if same_settings(&p.settings, &settings) {
                    return Decision::Serve {
                        serving: p,
                        fresh: false,
                        refused: None,
                    };
                }
                match self
                    .load(key, p.source.clone(), p.stamp, &settings, number)
                    .await
                {
                    Ok(s) => Decision::Serve {
                        serving: Arc::new(s),
                        fresh: true,
                        refused: None,
                    },
                    Err(error) => Decision::Down(Refusal {
                        stamp: Some(p.stamp),
                        settings_config: plugin_config,
                        sha256: Some(p.sha256.clone()),
                        error,
                    }),
                }
            }
            Candidate::Keep => match prev {
                Some(p) => Decision::Serve {
                    serving: p,
                    fresh: false,
                    refused: refusal,
                },
                None => Decision::Pending,
            },
            Candidate::Failed(error) => {
                let r = Refusal {
                    stamp: None,
                    settings_config: plugin_config,
                    error,
                    sha256: None,
                };
                self.fall_back(key, prev, &settings, r, number).await
            }
            Candidate::Source(source, stamp) => {
                // The same refused file under the same configuration: not
                // tried (nor reported) again.
                if let Some(r) = refusal
                    && r.stamp == Some(stamp)
                    && r.settings_config == plugin_config
                    && prev
                        .as_ref()
                        .is_none_or(|p| same_settings(&p.settings, &settings))
                {
                    return match prev {
                        Some(p) => Decision::Serve {
                            serving: p,
                            fresh: false,
                            refused: Some(r),
                        },
                        None => Decision::Down(r),
                    };
                }
                let sha256 = source.sha256();
                let origin = source.origin.clone();
                let refuse = |error: LoadError| Refusal {
                    stamp: Some(stamp),
                    settings_config: plugin_config.clone(),
                    sha256: Some(sha256.clone()),
                    error,
                };
                let loaded = match self.load(key, source, stamp, &settings, number).await {
                    Ok(s) => s,
                    Err(e) => {
                        return self
                            .fall_back(key, prev, &settings, refuse(e), number)
                            .await;
                    }
                };
                // Built-ins ship with the binary: only files are updates.
                let is_update = (prev.is_some() || baseline.is_some()) && origin != Origin::Builtin;
                if is_update {
                    if let Some(rejected) = rejected_tools(&loaded.notes) {
                        let e = LoadError::new(&key.qualified(), &origin, rejected);
                        return self
                            .fall_back(key, prev, &settings, refuse(e), number)
                            .await;
                    }
                    if let Some(before) = &baseline {
                        let consent = Consent {
                            grants: &settings.grants,
                            config: plugin_config.as_ref(),
                            pinned: plugin_config
                                .as_ref()
                                .and_then(|c| c.sha256.as_deref())
                                .is_some_and(|pin| pin.eq_ignore_ascii_case(&sha256)),
                            table: &key.table(),
                        };
                        let now = Footprint::of(&loaded.plugin, &loaded.source.manifest);
                        if let Some(why) = footprint::escalation(before, &now, &consent) {
                            let e = LoadError::new(
                                &key.qualified(),
                                &origin,
                                format!(
                                    "its update asks for more than the version it replaces: {why}"
                                ),
                            );
                            return self
                                .fall_back(key, prev, &settings, refuse(e), number)
                                .await;
                        }
                    }
                }
                Decision::Serve {
                    serving: Arc::new(loaded),
                    fresh: true,
                    refused: None,
                }
            }
        }
    }

    /// An update was refused: the previous version keeps serving, under
    /// the settings in force (instantiated again if they changed).
    async fn fall_back(
        &self,
        key: &Key,
        prev: Option<Arc<Serving>>,
        settings: &LoadSettings,
        mut refusal: Refusal,
        number: u64,
    ) -> Decision {
        let Some(p) = prev else {
            return Decision::Down(refusal);
        };
        if same_settings(&p.settings, settings) {
            refusal.error.may_be_policy = false;
            return Decision::Serve {
                serving: p,
                fresh: false,
                refused: Some(refusal),
            };
        }
        match self
            .load(key, p.source.clone(), p.stamp, settings, number)
            .await
        {
            Ok(s) => {
                refusal.error.may_be_policy = false;
                Decision::Serve {
                    serving: Arc::new(s),
                    fresh: true,
                    refused: Some(refusal),
                }
            }
            Err(e) => {
                refusal.error.message = format!(
                    "{}; and the version that served does not load under the new configuration either: {}",
                    refusal.error.message, e.message
                );
                refusal.error.may_be_policy |= e.may_be_policy;
                Decision::Down(refusal)
            }
        }
    }

    /// Load one version.
    async fn load(
        &self,
        key: &Key,
        source: PluginSource,
        stamp: Stamp,
        settings: &LoadSettings,
        number: u64,
    ) -> Result<Serving, LoadError> {
        let sha256 = source.sha256();
        let qualified = key.qualified();
        let fix = |mut e: LoadError| {
            if !key.scope.is_empty() {
                e.message = e.message.replace(
                    &format!("[plugins.{qualified}"),
                    &format!("[{}", key.path()),
                );
            }
            e
        };
        let loaded: Loaded = loader::load(&self.runtime, source.clone(), settings)
            .await
            .map_err(fix)?;
        Ok(Serving {
            stamp,
            sha256,
            settings: settings.clone(),
            plugin: loaded.plugin,
            tools: loaded.tools,
            notes: loaded.problems.into_iter().map(fix).collect(),
            generation: number,
            load_us: loaded.load_time.as_micros() as u64,
            source,
        })
    }

    /// On a reload, a new version that claims a tool name another plugin
    /// of its layer serves is refused (the name stays with the plugin that
    /// had it); at start, a later plugin overrides an earlier one.
    pub(super) async fn refuse_clashes(
        &self,
        decisions: &mut [(Key, Decision)],
        state: &State,
        number: u64,
    ) {
        let mut providers: BTreeMap<(String, String), Vec<Key>> = BTreeMap::new();
        for (key, d) in decisions.iter() {
            if let Decision::Serve { serving, .. } = d {
                for t in &serving.tools {
                    providers
                        .entry((key.scope.clone(), t.def.name.clone()))
                        .or_default()
                        .push(key.clone());
                }
            }
        }
        for (key, d) in decisions.iter_mut() {
            let Decision::Serve {
                serving,
                fresh: true,
                ..
            } = d
            else {
                continue;
            };
            let prev = state.serving.get(key);
            let had = |name: &str| prev.is_some_and(|p| p.tools.iter().any(|t| t.def.name == name));
            let clash: Vec<String> = serving
                .tools
                .iter()
                .map(|t| t.def.name.clone())
                .filter(|name| !had(name))
                .filter(|name| {
                    providers
                        .get(&(key.scope.clone(), name.clone()))
                        .is_some_and(|p| p.len() > 1)
                })
                .collect();
            if clash.is_empty() {
                continue;
            }
            let others: Vec<String> = clash
                .iter()
                .flat_map(|name| {
                    providers[&(key.scope.clone(), name.clone())]
                        .iter()
                        .filter(|k| *k != key)
                        .map(move |k| format!("`{name}` of `{}`", k.qualified()))
                })
                .collect();
            let error = LoadError::new(
                &key.qualified(),
                &serving.source.origin,
                format!(
                    "its update adds tools whose names another plugin serves ({}); rename them, or remove the other plugin first",
                    others.join(", ")
                ),
            );
            let refusal = Refusal {
                stamp: Some(serving.stamp),
                settings_config: None,
                sha256: Some(serving.sha256.clone()),
                error,
            };
            let settings = serving.settings.clone();
            *d = self
                .fall_back(
                    key,
                    state.serving.get(key).cloned(),
                    &settings,
                    refusal,
                    number,
                )
                .await;
        }
    }

    /// Resolve what one plugin is granted and how it runs.
    pub(super) fn load_settings(
        &self,
        key: &Key,
        config: &HostConfig,
        authority: &Authority,
        skills: &Arc<crate::skills::Catalog>,
        candidate: &Candidate,
        state: &State,
    ) -> Result<LoadSettings, LoadError> {
        let plugin_config = plugin_config(config, key);
        let origin_path = match candidate {
            Candidate::Source(s, _) => s.origin.clone(),
            Candidate::Failed(_) => Origin::Builtin,
            _ => state
                .serving
                .get(key)
                .map(|s| s.source.origin.clone())
                .unwrap_or(Origin::Builtin),
        };
        let manifest_instances = match candidate {
            Candidate::Source(s, _) => s.manifest.instances,
            _ => state
                .serving
                .get(key)
                .and_then(|s| s.source.manifest.instances),
        };
        let default = match origin_path {
            Origin::Builtin if key.scope.is_empty() => {
                builtin::default_grants(&key.name, &self.sources.workdir)
            }
            _ => None,
        };
        let table = format!("{}: [{}.grants]", config.origin(), key.path());
        let (grants_config, grant_source) = match plugin_config.and_then(|c| c.grants.clone()) {
            Some(g) if g.extend => match default {
                Some(base) => (
                    Some(g.extending(base)),
                    format!("the built-in default, extended by {table}"),
                ),
                None => {
                    return Err(LoadError::new(
                        &key.qualified(),
                        &origin_path,
                        format!(
                            "`extend = true` in {table} adds to a built-in plugin's default grant, and `{}` has none: write its whole grant (without `extend`)",
                            key.qualified()
                        ),
                    ));
                }
            },
            Some(g) => (Some(g), table),
            None => match default {
                Some(base) => (Some(base), "built-in default".to_string()),
                None => (
                    None,
                    format!("none (no [{}.grants] in the configuration)", key.path()),
                ),
            },
        };
        let mut grants = resolve_grants(
            grants_config,
            grant_source,
            &self.sources.workdir,
            &self.enforcement,
            authority,
        )
        .map_err(|message| LoadError::new(&key.qualified(), &origin_path, message))?;
        let global = config
            .egress_global()
            .map_err(|e| LoadError::new(&key.qualified(), &origin_path, e.to_string()))?;
        grants.set_egress_global(&Arc::new(global));
        if grants.skills.is_some() {
            grants.skills = Some(skills.clone());
        }
        if grants.skill_files {
            grants.add_skill_dirs(skills, authority);
        }
        if let Some(c) = plugin_config {
            grants
                .env
                .extend(c.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let mode = plugin_config
            .and_then(|c| c.instances)
            .or(manifest_instances)
            .unwrap_or_default();
        Ok(LoadSettings {
            grants: Arc::new(grants),
            mode,
            limits: self.settings.limits,
            budgets: self.settings.budgets,
            seams: self.seams.clone(),
            sha256: plugin_config.and_then(|c| c.sha256.clone()),
            known_policy: state.ledger.was_policy(key),
            max_idle: if mode == InstanceMode::Fresh { 0 } else { 16 },
            tool_timeouts: config
                .tools
                .iter()
                .filter_map(|(name, t)| t.timeout_ms.map(|ms| (name.clone(), ms)))
                .collect(),
        })
    }
}

/// Two load settings that load the same plugin the same way.
fn same_settings(a: &LoadSettings, b: &LoadSettings) -> bool {
    *a.grants == *b.grants
        && a.mode == b.mode
        && a.sha256 == b.sha256
        && a.tool_timeouts == b.tool_timeouts
        && a.max_idle == b.max_idle
}

/// Tools of an update that the host did not register (a schema the
/// compiler rejects, a bad name): on an update, that refuses it.
fn rejected_tools(notes: &[LoadError]) -> Option<String> {
    let rejected: Vec<&str> = notes
        .iter()
        .filter(|n| n.kind == LoadErrorKind::ToolNotRegistered)
        .map(|n| n.message.as_str())
        .collect();
    (!rejected.is_empty()).then(|| {
        format!(
            "its update has tools the host does not accept: {}",
            rejected.join("; ")
        )
    })
}
