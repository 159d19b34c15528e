//! The first-party plugins compiled into the binary (by `host/build.rs`
//! from `plugins/`), so `toolgate demo` works on a fresh clone with no
//! plugin directory, and their default grants.

use std::path::Path;
use std::sync::Arc;

use super::component::Origin;
use super::loader::{LoadError, PluginSource};
use super::manifest::Manifest;
use crate::config::{FsAccess, FsGrantConfig, GrantsConfig};

mod generated {
    include!(concat!(env!("OUT_DIR"), "/builtin_plugins.rs"));
}

/// Names of the built-in plugins.
pub fn names() -> Vec<&'static str> {
    generated::BUILTIN
        .iter()
        .map(|(name, _, _)| *name)
        .collect()
}

/// The built-in plugins as sources.
pub fn sources() -> (Vec<PluginSource>, Vec<LoadError>) {
    let mut sources = Vec::new();
    let mut problems = Vec::new();
    for (name, wasm, manifest) in generated::BUILTIN {
        match Manifest::parse(manifest, &format!("built-in {name}.toml")) {
            Ok(manifest) => sources.push(PluginSource {
                name: name.to_string(),
                origin: Origin::Builtin,
                bytes: Arc::from(*wasm),
                manifest,
                manifest_error: None,
            }),
            Err(e) => problems.push(LoadError::new(name, &Origin::Builtin, e.to_string())),
        }
    }
    (sources, problems)
}

/// What a built-in plugin is granted when the operator says nothing about it.
///
/// * `fs-tools`: the working directory, read-only, as `.`.
/// * `bash`: the shell seam and the working directory read-write for the
///   processes it spawns only (`spawn_only`): the component itself needs no
///   file access, and a read-write preopen could not keep the host's
///   configuration or `.git` out of its reach, while the sandbox does.
/// * `secrets-guard`: the working directory, read-only, twice — as `.` and
///   under its own absolute path — so that it can resolve the symlinks and
///   globs that relative and absolute arguments name.
pub fn default_grants(name: &str, workdir: &Path) -> Option<GrantsConfig> {
    let grant = |access, guest: &str, spawn_only| FsGrantConfig {
        path: workdir.display().to_string(),
        access,
        guest: Some(guest.into()),
        spawn_only,
    };
    match name {
        "fs-tools" => Some(GrantsConfig {
            fs: vec![grant(FsAccess::ReadOnly, ".", false)],
            ..Default::default()
        }),
        "fs-write" => Some(GrantsConfig {
            // Reads through a read-only preopen; writes through the `files`
            // seam, which the host checks against the protected paths (a
            // read-write preopen could not leave them out).
            fs: vec![
                grant(FsAccess::ReadOnly, ".", false),
                grant(FsAccess::ReadWrite, ".", true),
            ],
            ..Default::default()
        }),
        "bash" => Some(GrantsConfig {
            fs: vec![grant(FsAccess::ReadWrite, ".", true)],
            shell: true,
            ..Default::default()
        }),
        "todo" => Some(GrantsConfig {
            kv: true,
            ..Default::default()
        }),
        "secrets-guard" => {
            let absolute = workdir
                .canonicalize()
                .unwrap_or_else(|_| workdir.to_path_buf());
            let mut fs = vec![grant(FsAccess::ReadOnly, ".", false)];
            if let Some(abs) = absolute.to_str() {
                fs.push(grant(FsAccess::ReadOnly, abs, false));
            }
            Some(GrantsConfig {
                fs,
                ..Default::default()
            })
        }
        _ => None,
    }
}
