//! The built-in plugins' machine code, compiled with the binary (by
//! `host/build.rs`), so that the first call needs no compiler.
//!
//! Cranelift takes seconds for the built-ins together: a debug `toolgate
//! serve` on an empty compile cache answered its first call after 4.9 s
//! (8.0 s under more load; 13.2 s in issue 25), now after ≈ 60–100 ms (see
//! BENCHMARKS.md, "First call on an empty compile cache"). So the build
//! script also compiles each built-in to machine code with the engine
//! settings of [`super::codegen`] and embeds that beside the component;
//! a start deserialises it instead (milliseconds), cache or no cache.
//!
//! Why this way rather than the others measured or weighed: listing tools
//! from manifests and compiling lazily per plugin still compiles every
//! policy (each is in the pipeline of every call: 0.9 s) and the called
//! plugin (fs-tools, for `read`: 2.3 s) before the first call — over both
//! goals of issue 25 — and a listing written by hand can drift from what
//! `list-tools` says; a baseline compiler first (Winch, not measured here)
//! still compiles at every empty-cache start, runs the tools slower until
//! a second, Cranelift, engine takes over, and doubles the engines and
//! pools.
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

use wasmtime::Engine;
use wasmtime::component::Component;

use super::codegen;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/precompiled_plugins.rs"));
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
pub(crate) fn checked(
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

/// The table: (plugin, key, seal, code).
#[cfg(test)]
pub(crate) fn entries() -> &'static [(&'static str, &'static str, &'static str, &'static [u8])] {
    generated::PRECOMPILED
}
