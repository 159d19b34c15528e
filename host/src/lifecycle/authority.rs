//! What the host reads as authority, gathered for each reload: no grant
//! may reach it (see [`crate::grants::Authority`]).

use super::{Lifecycle, scope_dir};
use crate::config::HostConfig;
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
        for (name, server) in &config.mcp.servers {
            if let Some(file) = &server.bearer_token_file {
                a.add_secret(
                    file,
                    format!("the bearer token file of MCP server `{name}`"),
                );
            }
        }
        let mut dirs = self.sources.plugin_dirs.clone();
        for scope in config.scopes.values() {
            dirs.extend(scope.plugin_dirs.iter().map(|d| scope_dir(config, d)));
        }
        for dir in &dirs {
            a.add(dir, "a plugin directory (components and manifests)");
            // A component or manifest may be a symlink to a file elsewhere:
            // that file is read as a plugin too.
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
            // (which signs native code) and the server's token.
            a.add_secret(
                dir,
                "a state directory of the host (the compile cache's key, the serve token, the journal of protected paths)",
            );
        }
        // The audit record and its key, wherever configured: a grant that
        // could write them could rewrite the record (or sign a forged one).
        for (path, what) in [
            (&config.audit.path, "the audit record"),
            (&config.audit.signing_key, "the audit record's signing key"),
        ] {
            if let Some(path) = path {
                a.add_secret(path, what);
            }
        }
        // The console's token: whoever reads it can approve calls.
        if let Some(path) = &config.console.token_file {
            a.add_secret(path, "the approval console's token");
        }
        // The approval queue's store, wherever configured: whoever writes
        // it approves calls. (Its default place is the state directory.)
        if let Some(path) = &config.approval.store {
            a.add_secret(path, "the approval queue's store");
            for p in crate::approval::sqlite::companion_files(path) {
                a.add_secret(p, "the approval queue's store");
            }
        }
        // The embedded state store, wherever configured: a grant that
        // could write it could reset a rate limiter's counters. (Its
        // default place is the state directory.)
        if let Some(path) = &config.state.path {
            a.add_secret(path, "the host's state store");
            for p in crate::approval::sqlite::companion_files(path) {
                a.add_secret(p, "the host's state store");
            }
        }
        a.set_journal(self.runtime.state.as_ref().map(|s| s.journal()));
        if let Ok(exe) = std::env::current_exe() {
            a.add(exe, "the host's executable");
        }
        a
    }
}
