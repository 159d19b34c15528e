//! On-disk cache of compiled components.
//!
//! Cranelift takes ~40 ms for a small Rust component and seconds for a
//! Python or JavaScript one; the cache makes every start after the first
//! cost a file map. Entries are keyed by the engine's compatibility hash and
//! the component's SHA-256, written to a temporary file and renamed into
//! place (never overwritten in place), so a concurrent reader sees either
//! nothing or a whole file.
//!
//! Loading a cached file is `unsafe` in wasmtime because the file is
//! trusted machine code: the cache directory is created private to the user
//! (0700) and must stay so.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The compile cache.
#[derive(Clone, Debug)]
pub struct CompileCache {
    dir: PathBuf,
}

impl CompileCache {
    pub fn new(dir: PathBuf) -> Self {
        CompileCache { dir }
    }

    /// `$TOOLGATE_CACHE_DIR`, else `$XDG_CACHE_HOME/toolgate`, else
    /// `~/.cache/toolgate`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("TOOLGATE_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
        Some(base.join("toolgate"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiled component for `bytes`, from the cache or freshly
    /// compiled (and then stored; a failure to store is only logged).
    pub fn load_or_compile(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        let path = self.dir.join(format!("{}.cwasm", key(engine, bytes)));
        if path.exists() {
            // SAFETY: the file was written by `store` below into a directory
            // private to this user, under a name that binds it to this
            // engine's configuration and to the component's exact bytes.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok(component),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "unusable cache entry; recompiling")
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Err(e) = self.store(&path, &component) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not write the compile cache");
        }
        Ok(component)
    }

    fn store(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        create_private_dir(&self.dir)?;
        let bytes = component.serialize()?;
        let tmp = self
            .dir
            .join(format!(".tmp-{}-{}", std::process::id(), rand_suffix()));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })?;
        Ok(())
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Hex SHA-256 over the engine's compatibility hash and the bytes.
fn key(engine: &Engine, bytes: &[u8]) -> String {
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
