//! The policy ledger: which plugin names held a policy role in the last
//! version that verified and served — remembered across reloads and,
//! with a state directory, across restarts.
//!
//! Why: whether a plugin that fails to load stops the host (it may be a
//! policy) or not (it only provides tools) used to be read from the very
//! bytes that failed. A guard pulled from `oci://…:tag`, whose tag was then
//! re-pointed at an unsigned component that says it only provides tools,
//! was refused — and, believed about its own role, let calls run unguarded.
//! Refused bytes decide nothing: a name in the ledger is a policy until
//! the operator removes it (from the configuration, or its file from the
//! plugin directory), whatever a refused or not-yet-verified version
//! claims. So an update that fails verification (digest, signature,
//! escalation) keeps the last verified version serving, or, if none is
//! left, every call fails closed naming it; and a signature that
//! `[trust]` requires of policies is required of a name the ledger holds,
//! whatever roles the new bytes claim.
//!
//! The file (`policy-roles.json` in the state directory, owner-only, in
//! the hidden state directory like every file of the host's) is written
//! whole and renamed into place when it changes; one that cannot be read
//! is reported and treated as empty only if it is absent — a file that is
//! there but unreadable keeps every name that could be a policy blocked
//! (see [`Ledger::load`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::Key;
use crate::policy::Role;

/// The ledger's file in the state directory.
pub const FILE: &str = "policy-roles.json";

/// Plugin names and the policy roles their last verified version had.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Where it is kept; `None`: in memory only (no state directory).
    path: Option<PathBuf>,
    roles: BTreeMap<Key, BTreeSet<Role>>,
    /// The file was there but could not be read: every name not yet
    /// verified in this run is treated as a possible policy.
    unreadable: bool,
}

/// The file's form.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    v: u32,
    /// `name` or `name@scope` → role names.
    policies: BTreeMap<String, Vec<String>>,
}

impl Ledger {
    /// The ledger kept in `state` (a state directory), or one in memory.
    pub fn load(state: Option<&Path>) -> Ledger {
        let Some(dir) = state else {
            return Ledger::default();
        };
        let path = dir.join(FILE);
        let mut ledger = Ledger {
            path: Some(path.clone()),
            ..Ledger::default()
        };
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<Stored>(&bytes) {
                Ok(stored) if stored.v == 1 => {
                    for (name, roles) in stored.policies {
                        let key = match name.split_once('@') {
                            Some((n, scope)) => Key {
                                scope: scope.to_string(),
                                name: n.to_string(),
                            },
                            None => Key {
                                scope: String::new(),
                                name,
                            },
                        };
                        let roles: BTreeSet<Role> = roles
                            .iter()
                            .filter_map(|r| Role::ALL.into_iter().find(|x| x.as_str() == r))
                            .collect();
                        ledger.roles.insert(key, roles);
                    }
                }
                _ => {
                    tracing::error!(
                        file = %path.display(),
                        "the policy ledger cannot be read; until each plugin has loaded and verified, every plugin that fails to load is treated as a policy"
                    );
                    ledger.unreadable = true;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::error!(
                    file = %path.display(),
                    error = %e,
                    "the policy ledger cannot be read; until each plugin has loaded and verified, every plugin that fails to load is treated as a policy"
                );
                ledger.unreadable = true;
            }
        }
        ledger
    }

    /// Whether `key` held a policy role in its last verified version (or
    /// the ledger could not be read, so it might have).
    pub fn was_policy(&self, key: &Key) -> bool {
        self.roles.get(key).is_some_and(|r| !r.is_empty())
            || (self.unreadable && !self.roles.contains_key(key))
    }

    /// After a generation: `verified` are the versions that serve (their
    /// roles, read from bytes that passed every check); `present` every
    /// name the configuration and the plugin directories still hold. A
    /// name no longer present was removed by the operator and leaves the
    /// ledger; a present one that did not serve keeps what it had.
    pub fn update<'a>(
        &mut self,
        verified: impl Iterator<Item = (&'a Key, BTreeSet<Role>)>,
        present: &BTreeSet<Key>,
    ) {
        let before = self.roles.clone();
        for (key, roles) in verified {
            let policy: BTreeSet<Role> = roles.into_iter().filter(|r| *r != Role::Tool).collect();
            self.roles.insert(key.clone(), policy);
        }
        self.roles.retain(|k, _| present.contains(k));
        if self.roles != before {
            self.save();
        }
    }

    /// Writes the file (whole, then renamed into place); a failure is
    /// logged — the ledger in memory still holds for this run.
    fn save(&self) {
        let Some(path) = &self.path else {
            return;
        };
        let stored = Stored {
            v: 1,
            policies: self
                .roles
                .iter()
                .filter(|(_, r)| !r.is_empty())
                .map(|(k, r)| {
                    (
                        k.qualified(),
                        r.iter().map(|r| r.as_str().to_string()).collect(),
                    )
                })
                .collect(),
        };
        let result = (|| -> std::io::Result<()> {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(&stored).unwrap_or_default())?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if let Err(e) = result {
            tracing::error!(
                file = %path.display(),
                error = %e,
                "cannot write the policy ledger; a restart will not remember which plugins were policies"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key {
            scope: String::new(),
            name: name.into(),
        }
    }

    #[test]
    fn a_policy_name_is_remembered_across_loads_until_removed() {
        let dir = std::env::temp_dir().join(format!("toolgate-ledger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut l = Ledger::load(Some(&dir));
        let present: BTreeSet<Key> = [key("g"), key("t"), key("s")].into();
        let scoped = Key {
            scope: "agents/a".into(),
            name: "s".into(),
        };
        let present_scoped: BTreeSet<Key> =
            present.iter().cloned().chain([scoped.clone()]).collect();
        let verified: Vec<(Key, BTreeSet<Role>)> = vec![
            (key("g"), [Role::Guard, Role::Tool].into()),
            (key("t"), [Role::Tool].into()),
            (scoped.clone(), [Role::PreExecute].into()),
        ];
        l.update(
            verified.iter().map(|(k, r)| (k, r.clone())),
            &present_scoped,
        );
        let l2 = Ledger::load(Some(&dir));
        assert!(l2.was_policy(&key("g")));
        assert!(!l2.was_policy(&key("t")));
        assert!(l2.was_policy(&scoped));
        // Not serving this generation (refused) but present: kept.
        let mut l3 = Ledger::load(Some(&dir));
        l3.update(std::iter::empty(), &present_scoped);
        assert!(Ledger::load(Some(&dir)).was_policy(&key("g")));
        // Removed by the operator: gone.
        l3.update(std::iter::empty(), &[key("t")].into());
        assert!(!Ledger::load(Some(&dir)).was_policy(&key("g")));
        // A file that cannot be read blocks every unknown name.
        std::fs::write(dir.join(FILE), b"{not json").unwrap();
        let broken = Ledger::load(Some(&dir));
        assert!(broken.was_policy(&key("anything")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
