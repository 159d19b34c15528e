//! Guests in other languages: Python (componentize-py), JavaScript
//! (componentize-js) and C (clang + `wit-bindgen c` + `wasm-tools`).
//!
//! Their toolchains live in project-local directories under
//! `<target>/toolchains` (installed by `scripts/toolchains.sh`, which this
//! module runs for the steps that need no root). Each guest directory has
//! a `build.sh OUT.wasm` recipe that finds its tools on `PATH`; the built
//! component is cached under `<target>/examples/` by a hash of everything
//! it is built from (its files, the WIT, the toolchain pins), because a
//! Python or JavaScript build takes seconds to tens of seconds and the
//! tests must not pay it on every run.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// A guest language other than Rust.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lang {
    Python,
    Js,
    C,
}

impl Lang {
    /// The step of `scripts/toolchains.sh` that installs it.
    pub fn step(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::C => "c",
        }
    }

    /// Which language a guest directory is in (by its sources).
    pub fn of(dir: &Path) -> Option<Lang> {
        let has = |ext: &str| {
            std::fs::read_dir(dir).ok().is_some_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == ext))
            })
        };
        if has("py") {
            Some(Lang::Python)
        } else if has("js") {
            Some(Lang::Js)
        } else if has("c") {
            Some(Lang::C)
        } else {
            None
        }
    }
}

/// The toolchains directory (`$TOOLGATE_TOOLCHAINS`, default
/// `<target>/toolchains`).
pub fn dir(target: &Path) -> PathBuf {
    std::env::var_os("TOOLGATE_TOOLCHAINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.join("toolchains"))
}

/// `PATH` with the project-local toolchains first.
pub fn path_with(toolchains: &Path) -> std::ffi::OsString {
    let mut parts = vec![
        toolchains.join("python/bin"),
        toolchains.join("js/node_modules/.bin"),
        toolchains.join("cargo/bin"),
    ];
    if let Some(path) = std::env::var_os("PATH") {
        parts.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(parts).unwrap_or_default()
}

/// Why `lang` cannot be built here, or `None` when its tools are present.
pub fn missing(toolchains: &Path, lang: Lang) -> Option<String> {
    let need = |p: PathBuf, what: &str| (!p.exists()).then(|| format!("{what} ({})", p.display()));
    let problems: Vec<String> = match lang {
        Lang::Python => vec![need(
            toolchains.join("python/bin/componentize-py"),
            "componentize-py",
        )],
        Lang::Js => vec![need(
            toolchains.join("js/node_modules/.bin/componentize-js"),
            "componentize-js",
        )],
        Lang::C => vec![
            need(toolchains.join("cargo/bin/wit-bindgen"), "wit-bindgen"),
            need(toolchains.join("python/bin/wasm-tools"), "wasm-tools"),
            need(PathBuf::from("/usr/bin/clang-19"), "clang-19"),
            need(PathBuf::from("/usr/bin/wasm-ld-19"), "lld-19"),
            need(PathBuf::from("/usr/lib/wasm32-wasi/libc.a"), "wasi-libc"),
        ],
    }
    .into_iter()
    .flatten()
    .collect();
    (!problems.is_empty()).then(|| {
        format!(
            "missing {}: run `scripts/toolchains.sh {}{}`",
            problems.join(", "),
            if lang == Lang::C { "apt " } else { "" },
            lang.step()
        )
    })
}

/// Install what `scripts/toolchains.sh` can install without root for
/// `langs` (PyPI, npm and crates.io packages; the C compiler is Debian's,
/// installed by `.ci/run` or by hand). Returns the script's complaint when
/// it fails.
pub fn install(workspace: &Path, toolchains: &Path, langs: &[Lang]) -> Result<(), String> {
    let mut steps: Vec<&str> = langs.iter().map(|l| l.step()).collect();
    steps.dedup();
    let output = Command::new("bash")
        .arg(workspace.join("scripts/toolchains.sh"))
        .args(&steps)
        .env("TOOLGATE_TOOLCHAINS", toolchains)
        // Nested cargo (for `cargo install`) must not see the outer build's
        // settings.
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .map_err(|e| format!("cannot run scripts/toolchains.sh: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
    }
}

/// A hash of every file under `dirs` (sorted by path, symlinks followed
/// into directories) and of `extra` files.
fn hash_inputs(dirs: &[&Path], extra: &[&Path]) -> String {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name.ends_with(".wasm") || name == "__pycache__" {
                continue;
            }
            if p.is_dir() {
                if depth < 6 && name != "node_modules" && name != "target" {
                    walk(&p, out, depth + 1);
                }
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for d in dirs {
        walk(d, &mut files, 0);
    }
    files.extend(extra.iter().map(|p| p.to_path_buf()));
    files.sort();
    let mut h = Sha256::new();
    for f in files {
        h.update(f.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(&f).unwrap_or_default());
        h.update([0]);
    }
    h.finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Build the guest in `dir` (its `build.sh`) into `cache`, unless a
/// component built from the same inputs is there. Returns its path, or the
/// build's error output.
pub fn build_cached(
    workspace: &Path,
    toolchains: &Path,
    cache: &Path,
    name: &str,
    dir: &Path,
) -> Result<PathBuf, String> {
    let key = hash_inputs(
        &[dir, &workspace.join("wit")],
        &[&workspace.join("scripts/toolchains.sh")],
    );
    let out = cache.join(format!("{name}-{key}.wasm"));
    if out.exists() {
        return Ok(out);
    }
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let partial = cache.join(format!(".{name}-{key}.{}.wasm", std::process::id()));
    let output = Command::new("bash")
        .arg(dir.join("build.sh"))
        .arg(&partial)
        .env("PATH", path_with(toolchains))
        .output()
        .map_err(|e| format!("cannot run {}/build.sh: {e}", dir.display()))?;
    if !output.status.success() || !partial.exists() {
        let _ = std::fs::remove_file(&partial);
        return Err(format!(
            "{}/build.sh failed ({}):\n{}{}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::rename(&partial, &out).map_err(|e| format!("cannot store {}: {e}", out.display()))?;
    // Builds of older inputs are never used again: keep the cache (and a
    // CI cache of the target directory) from growing by ~18 MB per change.
    if let Ok(entries) = std::fs::read_dir(cache) {
        let keep = out.file_name();
        for e in entries.flatten() {
            let file = e.file_name();
            let stale = file.to_str().is_some_and(|f| {
                f.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(|k| k.len() == key.len() + 5 && k.ends_with(".wasm"))
            });
            if stale && Some(file.as_os_str()) != keep {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(out)
}
