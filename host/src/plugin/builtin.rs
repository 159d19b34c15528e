//! The first-party plugins compiled into the binary (by `host/build.rs`
//! from `plugins/`), so `toolgate demo` works on a fresh clone with no
//! plugin directory, and their default grants.
//!
//! # Precompiled, so the first call needs no compiler
//!
//! Cranelift takes seconds for the built-ins together (13.2 s before the
//! first answer of `toolgate serve` on an empty compile cache; see
//! BENCHMARKS.md, "First call on an empty compile cache"). So the build
//! script also compiles each built-in to machine code with the engine
//! settings of [`super::codegen`] and embeds that beside the component;
//! a start deserialises it instead (milliseconds), cache or no cache.
//!
//! Why this way rather than the others measured or weighed: a baseline
//! compiler first (Winch) still compiles at every empty-cache start, runs
//! the tools slower until a second, Cranelift, engine takes over, and
//! doubles the engines and pools; listing tools from manifests and
//! compiling lazily per plugin still compiles every policy (each is in the
//! pipeline of every call) and the called plugin before the first call,
//! and a listing written by hand can drift from what `list-tools` says.
//! Precompiled code costs build time (the build script compiles the
//! built-ins once per change of them) and binary size, and nothing at run
//! time.
//!
//! Precompiled code is checked as a compile cache entry is: it is used
//! only when its key — the SHA-256 of this engine's compatibility hash and
//! the component's bytes ([`super::codegen::key`]) — is this engine's key
//! for the embedded component, and when its seal (a SHA-256 binding the
//! key to the code, [`super::codegen::seal`]) holds; `deserialize` then
//! copies it into fresh executable memory and checks the engine's
//! compatibility again. Otherwise — a binary run on a CPU with other
//! features than the build machine's, a cross-compiled binary — the
//! built-in goes through the compile cache like any plugin. The seal needs
//! no secret (unlike the cache's MAC): the code is in the host's
//! executable, which is as trusted as the host itself and which no plugin
//! may be granted (it is an authority path).

use std::path::Path;
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::Component;

use super::codegen;
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

/// The precompiled code of built-in `name` whose component is `bytes`,
/// deserialised: `None` when there is none for this engine and these
/// bytes (see the module documentation), or when it fails a check (then
/// with a warning).
pub fn precompiled(engine: &Engine, name: &str, bytes: &[u8]) -> Option<Component> {
    let (_, key, seal, code) = generated::PRECOMPILED.iter().find(|p| p.0 == name)?;
    checked(engine, name, bytes, key, seal, code)
}

/// `code` deserialised, if `key` is this engine's for `bytes` and `seal`
/// holds.
fn checked(
    engine: &Engine,
    name: &str,
    bytes: &[u8],
    key: &str,
    seal: &str,
    code: &[u8],
) -> Option<Component> {
    if codegen::key(engine, bytes) != key {
        tracing::info!(
            plugin = name,
            "the built-in's precompiled code was made for another engine (other CPU features or \
             settings than the build machine's); compiling it (the compile cache keeps it)"
        );
        return None;
    }
    if codegen::seal(key, code) != seal {
        tracing::warn!(
            plugin = name,
            "the built-in's precompiled code fails its seal; not used, compiling instead"
        );
        return None;
    }
    // SAFETY: `code` lies in the host's own executable (as trusted as the
    // host: it is an authority path no plugin may be granted), its seal
    // binds it to `key`, and `key` binds these component bytes and this
    // engine's compatibility hash. `deserialize` copies it into fresh
    // executable memory and checks the engine's compatibility again.
    match unsafe { Component::deserialize(engine, code) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!(plugin = name, error = %e, "the built-in's precompiled code is not usable; compiling instead");
            None
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in has precompiled code that this host's engine takes:
    /// fails when the build script's engine and the host's differ in
    /// anything that shapes code (a setting made in `runtime.rs` rather
    /// than in `codegen.rs`, a wasmtime feature only one of them has),
    /// which would silently send every empty-cache start back to compiling.
    #[test]
    fn every_builtin_is_precompiled_for_this_engine() {
        let runtime = crate::plugin::Runtime::new(crate::plugin::RuntimeOptions {
            cache_dir: None,
            max_instances: 4,
            ..Default::default()
        })
        .unwrap();
        let (sources, problems) = sources();
        assert!(problems.is_empty(), "{problems:?}");
        assert!(!sources.is_empty());
        for s in sources {
            assert!(
                precompiled(&runtime.engine, &s.name, &s.bytes).is_some(),
                "built-in `{}` has no precompiled code this engine accepts",
                s.name
            );
        }
    }

    /// Precompiled code is bound to its component: other bytes under the
    /// same name are not given it.
    #[test]
    fn precompiled_code_is_not_given_to_other_bytes() {
        let runtime = crate::plugin::Runtime::new(crate::plugin::RuntimeOptions {
            cache_dir: None,
            max_instances: 4,
            ..Default::default()
        })
        .unwrap();
        let (name, wasm, _) = generated::BUILTIN[0];
        let mut other = wasm.to_vec();
        // A custom section appended: still a component, other bytes.
        other.extend_from_slice(&[0, 4, 1, b'x', 0, 0]);
        assert!(precompiled(&runtime.engine, name, &other).is_none());
        assert!(precompiled(&runtime.engine, "no-such-plugin", wasm).is_none());
    }

    /// Code that changed after it was sealed is not deserialised.
    #[test]
    fn a_broken_seal_is_refused() {
        let runtime = crate::plugin::Runtime::new(crate::plugin::RuntimeOptions {
            cache_dir: None,
            max_instances: 4,
            ..Default::default()
        })
        .unwrap();
        let (name, key, seal, code) = generated::PRECOMPILED[0];
        let (_, wasm, _) = generated::BUILTIN.iter().find(|b| b.0 == name).unwrap();
        assert!(checked(&runtime.engine, name, wasm, key, seal, code).is_some());
        let mut changed = code.to_vec();
        let middle = changed.len() / 2;
        changed[middle] ^= 0x40;
        assert!(checked(&runtime.engine, name, wasm, key, seal, &changed).is_none());
    }
}
