//! The first-party plugins compiled into the binary (by `host/build.rs`
//! from `plugins/`), so `toolgate demo` works on a fresh clone with no
//! plugin directory, and their default grants.
//!
//! Their machine code is compiled with the binary too: see
//! [`super::precompiled`].

use std::path::Path;
use std::sync::Arc;

use super::component::Origin;
use super::loader::{LoadError, PluginSource};
use super::manifest::Manifest;
use crate::cause::Cause;
use crate::grants::{FsAccess, FsGrantConfig, GrantsConfig};

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
                signature: None,
            }),
            Err(e) => problems
                .push(LoadError::new(name, &Origin::Builtin, e.to_string()).because(Cause::new(e))),
        }
    }
    (sources, problems)
}

/// Built-ins that load only when the configuration says `enabled = true`
/// under `[plugins.NAME]`:
///
/// * `plan-mode`, whose guard runs on every call and reads the state store
///   for every tool that is not read-only — a cost in time, and while the
///   store is down a refusal of those calls (it fails closed), that a host
///   not using plan mode should not pay;
/// * `history`, which hands the model what its client did in earlier
///   sessions: whether a model should see that is the operator's call.
pub fn off_by_default(name: &str) -> bool {
    matches!(name, "plan-mode" | "history")
}

/// What a built-in plugin is granted when the operator says nothing about it.
///
/// * `fs-tools`: the working directory, read-only, as `.`; and every
///   skill's directory, read-only, at its own absolute path
///   (`skill_files`), so that `read` opens a skill's resources.
/// * `skills`: the `skills` seam (the skills of `[skills]`, read-only).
/// * `history`: the `history` seam (its caller's own calls, read-only).
/// * `lsp`: the same (the files it asks language servers about, and shows
///   the lines of).
/// * `bash`: the shell seam and the working directory read-write for the
///   processes it spawns only (`spawn_only`): the component itself needs no
///   file access, and a read-write preopen could not keep the host's
///   configuration or `.git` out of its reach, while the sandbox does.
/// * `secrets-guard`: the working directory, read-only, twice — as `.` and
///   under its own absolute path — so that it can resolve the symlinks and
///   globs that relative and absolute arguments name.
pub fn default_grants(name: &str, workdir: &Path) -> Option<GrantsConfig> {
    let grant = |access, guest: &str, spawn_only| FsGrantConfig {
        path: workdir.to_path_buf().into(),
        access,
        guest: Some(guest.into()),
        spawn_only,
    };
    match name {
        "fs-tools" => Some(GrantsConfig {
            fs: vec![grant(FsAccess::ReadOnly, ".", false)],
            skill_files: true,
            ..Default::default()
        }),
        "lsp" => Some(GrantsConfig {
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
        "todo" | "goals" => Some(GrantsConfig {
            kv: true,
            ..Default::default()
        }),
        "skills" => Some(GrantsConfig {
            skills: true,
            ..Default::default()
        }),
        "questions" => Some(GrantsConfig {
            questions: true,
            ..Default::default()
        }),
        "history" => Some(GrantsConfig {
            history: true,
            ..Default::default()
        }),
        // Its mode in the store, its plan put to the user.
        "plan-mode" => Some(GrantsConfig {
            kv: true,
            questions: true,
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
    use crate::plugin::{loader, precompiled};

    fn engine() -> std::sync::Arc<crate::plugin::Runtime> {
        crate::plugin::Runtime::new(crate::plugin::RuntimeOptions {
            cache_dir: None,
            max_instances: 4,
            ..Default::default()
        })
        .unwrap()
    }

    fn bytes(name: &str) -> Arc<[u8]> {
        sources()
            .0
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no built-in `{name}`"))
            .bytes
    }

    /// Every built-in has precompiled code that this host's engine takes:
    /// fails when the build script's engine and the host's differ in
    /// anything that shapes code (a setting made in `runtime.rs` rather
    /// than in `codegen.rs`, a wasmtime feature only one of them has),
    /// which would silently send every empty-cache start back to compiling.
    #[test]
    fn every_builtin_is_precompiled_for_this_engine() {
        let runtime = engine();
        let (sources, problems) = sources();
        assert!(problems.is_empty(), "{problems:?}");
        assert!(!sources.is_empty());
        for s in sources {
            assert!(
                precompiled::precompiled(&runtime.engine, &s.name, &s.bytes).is_some(),
                "built-in `{}` has no precompiled code this engine accepts",
                s.name
            );
        }
        // And the Code Mode interpreter.
        assert!(
            precompiled::precompiled(
                &runtime.engine,
                "run-code",
                crate::codemode::interpreter::COMPONENT
            )
            .is_some()
        );
    }

    /// Precompiled code is bound to its component: other bytes under the
    /// same name are not given it.
    #[test]
    fn precompiled_code_is_not_given_to_other_bytes() {
        let runtime = engine();
        let (name, wasm, _) = generated::BUILTIN[0];
        let mut other = wasm.to_vec();
        // A custom section appended: still a component, other bytes.
        other.extend_from_slice(&[0, 4, 1, b'x', 0, 0]);
        assert!(precompiled::precompiled(&runtime.engine, name, &other).is_none());
        assert!(precompiled::precompiled(&runtime.engine, "no-such-plugin", wasm).is_none());
    }

    /// Code that changed after it was sealed is not deserialised.
    #[test]
    fn a_broken_seal_is_refused() {
        let runtime = engine();
        let (name, key, seal, code) = precompiled::entries()[0];
        let wasm = bytes(name);
        assert!(precompiled::checked(&runtime.engine, name, &wasm, key, seal, code).is_some());
        let mut changed = code.to_vec();
        let middle = changed.len() / 2;
        changed[middle] ^= 0x40;
        assert!(precompiled::checked(&runtime.engine, name, &wasm, key, seal, &changed).is_none());
    }

    /// Read from export names alone: a tool provider is tool-only; a
    /// guard, a wrapper, an observer, a hook may be a policy; bytes that
    /// do not parse count as a policy (fail closed).
    #[test]
    fn tool_only_tells_tool_providers_from_policies_without_compiling() {
        assert!(loader::tool_only(&bytes("fs-tools")));
        assert!(loader::tool_only(&bytes("bash")));
        for policy in ["secrets-guard", "timeout", "audit-log", "ask-destructive"] {
            assert!(!loader::tool_only(&bytes(policy)), "{policy}");
        }
        assert!(!loader::tool_only(b"\0asm\x0d\x00\x01\x00garbage"));
        assert!(!loader::tool_only(b"not wasm at all"));
    }
}
