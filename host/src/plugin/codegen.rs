//! How the host's engine compiles: the one definition of every setting that
//! shapes machine code, shared by the engine ([`super::runtime`]) and the
//! build script (`host/build.rs` includes this file), which compiles the
//! built-in plugins ahead of time with it.
//!
//! Whatever changes the code must be set here, never beside it in
//! `runtime.rs`: precompiled code is only used when the engine that loads
//! it hashes the same ([`wasmtime::Engine::precompile_compatibility_hash`]),
//! so a setting that differed would silently send every start back to
//! compiling (the test `builtin::tests::every_builtin_is_precompiled_for_this_engine`
//! catches that). The pooling allocator and the epoch ticker change how
//! instances run, not the code, and stay in `runtime.rs`.
//!
//! This file depends on nothing but `wasmtime`.

use wasmtime::{Config, OptLevel};

/// The compilation settings of the host's engine.
pub fn configure(config: &mut Config) -> &mut Config {
    config
        .wasm_component_model(true)
        .concurrency_support(false)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true)
}

/// What identifies compiled code: the hex SHA-256 of the engine's
/// compatibility hash and the component's bytes. The compile cache names
/// its entries with it; the build script records it beside each
/// precompiled built-in.
pub fn key(engine: &wasmtime::Engine, bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    use std::hash::{Hash, Hasher};
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    h.0.update(bytes);
    h.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The seal of a precompiled built-in: SHA-256 over a domain tag, its key
/// and its code, hex. It binds the code to the key (so to the component's
/// bytes and the engine), as the compile cache's MAC binds an entry.
pub fn seal(key: &str, code: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"toolgate-precompiled-1\0");
    h.update((key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    h.update(code);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
