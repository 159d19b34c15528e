//! What the host reads as authority, gathered for each reload: no grant
//! may reach it (see [`crate::grants::Authority`]).
//!
//! Derived, not listed: every path the configuration names comes from the
//! walk of its typed paths ([`crate::authority::configured`], see
//! [`crate::config::path`]), each protected as its class says. What is
//! added here by hand is only what the configuration does not name: the
//! configuration file itself, the plugin directories given on the command
//! line, the places a compile cache or state directory could be, and the
//! host's executable.

use super::Lifecycle;
use crate::HostConfig;
use crate::grants::Authority;
use crate::plugin::cache::CompileCache;

impl Lifecycle {
    /// Everything the host reads as authority (see [`Authority`]).
    pub(crate) fn authority(&self, config: &HostConfig) -> Authority {
        let mut a = Authority::default();
        // The configuration holds credentials (MCP servers' `env`,
        // headers): secret, not only protected.
        if let Some(path) = &config.source {
            a.add_secret(path, "the host's configuration");
        }
        if let Some(file) = &self.sources.config_file {
            a.add_secret(&file.path, "the host's configuration");
        }
        for (path, what) in &self.sources.extra_authority {
            a.add(path, what.clone());
        }
        for (path, what) in &self.sources.extra_secrets {
            a.add_secret(path, what.clone());
        }
        for dir in &self.sources.plugin_dirs {
            a.add(dir, "a plugin directory (components and manifests)");
        }
        crate::authority::configured(config, &self.sources.workdir, &mut a);
        // A component or manifest in a directory read as authority (a
        // plugin directory) may be a symlink to a file elsewhere: that
        // file is read as a plugin too.
        let dirs: Vec<_> = a
            .paths()
            .iter()
            .filter(|p| p.path.is_dir())
            .map(|p| p.path.clone())
            .collect();
        for dir in &dirs {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let plugin_file = path.extension().is_some_and(|e| e == "wasm" || e == "toml");
                if plugin_file && entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    a.add(
                        &path,
                        format!("a plugin file linked from {}", dir.display()),
                    );
                }
            }
        }
        // Every place a cache or the state could be on *any* start, in use
        // now or not: a grant that reaches an unused one today could plant
        // something there for a start that uses it.
        for dir in self
            .runtime
            .options
            .cache_dir
            .clone()
            .into_iter()
            .chain(CompileCache::candidate_dirs())
        {
            a.add(dir, "a compile cache (native code the host runs)");
        }
        for dir in self
            .runtime
            .options
            .state_dir
            .clone()
            .into_iter()
            .chain(crate::state::candidate_dirs())
        {
            // Hidden, not only read-only: it holds the compile cache's key
            // (which signs native code), the server's token, the audit
            // record and the stores by default.
            a.add_secret(
                dir,
                "a state directory of the host (the compile cache's key, the serve token, the journal of protected paths)",
            );
        }
        a.set_journal(self.runtime.state.as_ref().map(|s| s.journal()));
        if let Ok(exe) = std::env::current_exe() {
            a.add(exe, "the host's executable");
        }
        a
    }
}
