//! No escalation on update: what a plugin version asks for, and whether an
//! update may ask for more than the version it replaces.
//!
//! A plugin's *footprint* is what it could do with the host's trust: the
//! capabilities its imports reach for (network, file system, environment,
//! and the `shell`, `subprocess`, `jobs`, `files`, `bulk-read` and `kv` seams), the policy roles it
//! exports (a tool that becomes a pre-execute hook sees, and may allow or
//! deny, every call), and the place its own manifest asks for in each
//! chain (an outer place can overrule inner listeners).
//!
//! An update whose footprint exceeds the one of the version it replaces is
//! refused — the previous version keeps serving — until the operator's
//! configuration says yes:
//!
//! | more than before | accepted when the configuration |
//! | --- | --- |
//! | a capability | grants it (`[plugins.NAME.grants]`: `network`, `fs`, `env`/`vars`, `shell`, `subprocess`, `kv`; `jobs` needs `shell`, `files` a read-write `fs`, `bulk-read` a preopened `fs`) |
//! | a policy role | places the plugin in that chain (`priority`, or `priorities.ROLE`), or pins the new file's `sha256` |
//! | an earlier place asked by its manifest | places it (`priority` / `priorities.ROLE`), or pins the new file's `sha256` |
//!
//! Grants come from the configuration only, never from a plugin file; a
//! digest pin says the operator vetted that exact file. The first version
//! a host loads of a plugin is its baseline (the operator installed it, as
//! at any start); the baseline outlives the plugin's removal, so deleting
//! a plugin and adding a bigger one under the same name is an update too.

use std::collections::{BTreeMap, BTreeSet};

pub use crate::grants::Capability;
use crate::grants::Grants;
use crate::plugin::PluginConfig;
use crate::plugin::contract::split_name;
use crate::plugin::manifest::DEFAULT_PRIORITY;
use crate::plugin::store::StoreData;
use crate::plugin::{ComponentPlugin, Manifest};
use crate::policy::Role;

impl Capability {
    /// The capability an imported interface reaches for, if any (clocks,
    /// random numbers, stdio, the contract's own types and log need none).
    pub fn of_import(name: &str) -> Option<Capability> {
        let (pkg, iface, _) = split_name(name)?;
        match (pkg, iface) {
            ("wasi:sockets" | "wasi:http", _) => Some(Capability::Network),
            ("wasi:filesystem", _) => Some(Capability::FileSystem),
            ("wasi:cli", "environment") => Some(Capability::Environment),
            // A seam: what its grant gives (`seams::all`).
            (crate::plugin::contract::PACKAGE, iface) => {
                crate::seams::find::<StoreData>(iface).map(|s| s.capability)
            }
            _ => None,
        }
    }
}

/// What one plugin version could do with the host's trust.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Each capability, with the first import that reaches for it.
    pub capabilities: BTreeMap<Capability, String>,
    /// Its policy roles (the tool role is not one).
    pub roles: BTreeSet<Role>,
    /// The priority its own manifest asks for in each of its policy roles.
    pub asked: BTreeMap<Role, i32>,
}

impl Footprint {
    /// The footprint of a loaded version and its manifest.
    pub fn of(plugin: &ComponentPlugin, manifest: &Manifest) -> Footprint {
        Footprint::from_parts(&plugin.imports, &plugin.roles, manifest)
    }

    /// From imports, roles and manifest.
    pub fn from_parts(imports: &[String], roles: &[Role], manifest: &Manifest) -> Footprint {
        let mut capabilities = BTreeMap::new();
        for import in imports {
            if let Some(c) = Capability::of_import(import) {
                capabilities.entry(c).or_insert_with(|| import.clone());
            }
        }
        let roles: BTreeSet<Role> = roles.iter().copied().filter(|r| *r != Role::Tool).collect();
        let asked = roles
            .iter()
            .map(|r| (*r, manifest.priority(*r).unwrap_or(DEFAULT_PRIORITY)))
            .collect();
        Footprint {
            capabilities,
            roles,
            asked,
        }
    }
}

/// What the operator's configuration says about an update.
pub struct Consent<'a> {
    /// The plugin's grant, as resolved for the update.
    pub grants: &'a Grants,
    /// Its `[plugins.NAME]` table, if any.
    pub config: Option<&'a PluginConfig>,
    /// The update's SHA-256 equals the configuration's `sha256` pin.
    pub pinned: bool,
    /// Where to write it (`[plugins.NAME]`, `[scopes."S".plugins.NAME]`).
    pub table: &'a str,
}

impl Consent<'_> {
    fn places(&self, role: Role) -> bool {
        self.config
            .is_some_and(|c| c.priority.is_some() || c.priorities.contains_key(role.as_str()))
    }
}

/// Why `update` asks for more than `before` without the configuration's
/// consent, if it does: one sentence per excess, each with the remedy.
pub fn escalation(before: &Footprint, update: &Footprint, consent: &Consent) -> Option<String> {
    let mut why = Vec::new();
    let table = consent.table;
    for (cap, import) in &update.capabilities {
        if !before.capabilities.contains_key(cap) && !cap.granted(consent.grants) {
            why.push(format!(
                "it imports `{import}` ({}), which the version it replaces did not, and the configuration grants no {} (to accept it: `{}` under {table}.grants)",
                cap.as_str(),
                cap.as_str(),
                cap.grant_line()
            ));
        }
    }
    if consent.pinned {
        return (!why.is_empty()).then(|| why.join("; "));
    }
    for role in &update.roles {
        if !before.roles.contains(role) && !consent.places(*role) {
            why.push(format!(
                "it adds the {role} role, which the version it replaces did not have (to accept it: place it with `priorities = {{ {role} = N }}` under {table}, or pin the new file's `sha256`)"
            ));
        }
    }
    for (role, asked) in &update.asked {
        if let Some(was) = before.asked.get(role)
            && asked < was
            && !consent.places(*role)
        {
            why.push(format!(
                "its manifest asks for priority {asked} in the {role} chain, earlier than the {was} of the version it replaces (to accept it: `priorities = {{ {role} = N }}` under {table}, or pin the new file's `sha256`)"
            ));
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(imports: &[&str], roles: &[Role], manifest: &str) -> Footprint {
        Footprint::from_parts(
            &imports.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            roles,
            &Manifest::parse(manifest, "m.toml").unwrap(),
        )
    }

    fn consent<'a>(grants: &'a Grants, config: Option<&'a PluginConfig>) -> Consent<'a> {
        Consent {
            grants,
            config,
            pinned: false,
            table: "[plugins.p]",
        }
    }

    #[test]
    fn imports_map_to_capabilities() {
        use Capability::*;
        let c = |s| Capability::of_import(s);
        assert_eq!(c("wasi:sockets/tcp@0.2.0"), Some(Network));
        assert_eq!(c("wasi:http/outgoing-handler@0.2.3"), Some(Network));
        assert_eq!(c("wasi:filesystem/preopens@0.2.0"), Some(FileSystem));
        assert_eq!(c("wasi:cli/environment@0.2.0"), Some(Environment));
        assert_eq!(c("toolgate:plugin/kv@0.2.0"), Some(Kv));
        assert_eq!(c("toolgate:plugin/shell@0.1.0"), Some(Shell));
        assert_eq!(c("toolgate:plugin/files@0.2.1"), Some(Files));
        assert_eq!(c("toolgate:plugin/bulk-read@0.2.2"), Some(FileSystem));
        assert_eq!(c("wasi:clocks/monotonic-clock@0.2.0"), None);
        assert_eq!(c("toolgate:plugin/log@0.2.0"), None);
    }

    #[test]
    fn more_is_refused_unless_the_configuration_consents() {
        let grants = Grants::default();
        let v1 = fp(&["wasi:clocks/wall-clock@0.2.0"], &[Role::Tool], "");
        // Same or less: fine.
        assert!(escalation(&v1, &v1, &consent(&grants, None)).is_none());
        // A new capability, not granted: refused, naming the import and the remedy.
        let v2 = fp(&["toolgate:plugin/kv@0.2.0"], &[Role::Tool], "");
        let why = escalation(&v1, &v2, &consent(&grants, None)).unwrap();
        assert!(
            why.contains("toolgate:plugin/kv@0.2.0") && why.contains("kv = true"),
            "{why}"
        );
        // Granted: accepted.
        let kv = Grants {
            kv: true,
            ..Grants::default()
        };
        assert!(escalation(&v1, &v2, &consent(&kv, None)).is_none());
        // A pin does not grant.
        let pinned = Consent {
            pinned: true,
            ..consent(&grants, None)
        };
        assert!(escalation(&v1, &v2, &pinned).is_some());
    }

    #[test]
    fn new_roles_and_earlier_places_need_a_placement_or_a_pin() {
        let grants = Grants::default();
        let tool = fp(&[], &[Role::Tool], "");
        let hook = fp(&[], &[Role::Tool, Role::PreExecute], "");
        assert!(escalation(&tool, &hook, &consent(&grants, None)).is_some());
        let placed = PluginConfig {
            priorities: [("pre-execute".to_string(), 50)].into(),
            ..PluginConfig::default()
        };
        assert!(escalation(&tool, &hook, &consent(&grants, Some(&placed))).is_none());
        let pinned = Consent {
            pinned: true,
            ..consent(&grants, None)
        };
        assert!(escalation(&tool, &hook, &pinned).is_none());
        // Its manifest asks for an earlier place.
        let late = fp(&[], &[Role::Guard], "priority = 100");
        let early = fp(&[], &[Role::Guard], "priority = 5");
        let why = escalation(&late, &early, &consent(&grants, None)).unwrap();
        assert!(why.contains("priority 5") && why.contains("100"), "{why}");
        assert!(escalation(&early, &late, &consent(&grants, None)).is_none());
    }
}
