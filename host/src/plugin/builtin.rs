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
pub fn default_grants(name: &str, workdir: &Path) -> Option<GrantsConfig> {
    let dir = |access| FsGrantConfig {
        path: workdir.display().to_string(),
        access,
        guest: Some(".".into()),
    };
    match name {
        "fs-tools" => Some(GrantsConfig {
            fs: vec![dir(FsAccess::ReadOnly)],
            ..Default::default()
        }),
        "fs-write" => Some(GrantsConfig {
            fs: vec![dir(FsAccess::ReadWrite)],
            ..Default::default()
        }),
        "bash" => Some(GrantsConfig {
            fs: vec![dir(FsAccess::ReadWrite)],
            shell: true,
            ..Default::default()
        }),
        "todo" => Some(GrantsConfig {
            kv: true,
            ..Default::default()
        }),
        _ => None,
    }
}
