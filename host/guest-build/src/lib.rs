//! Compile guest crates of this workspace to WebAssembly components, from a
//! build script.
//!
//! This is the pattern of wasmtime's `test-programs/artifacts`: the build
//! script runs a nested `cargo build --target wasm32-wasip2` with its own
//! target directory (`<target>/guests`, shared by debug and release host
//! builds), and the host embeds or references the resulting `.wasm` files.
//! The `rust-toolchain.toml` at the workspace root lists the target, so
//! rustup installs it on first use.
//!
//! [`needs`] is the other half of what the test crates' build scripts do:
//! probing what a test needs from outside cargo, so that a test that cannot
//! run is ignored with the reason (and fails under CI) instead of passing.

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod needs;
pub mod toolchains;

/// The target every guest is built for.
pub const TARGET: &str = "wasm32-wasip2";
/// The cargo profile guests are built with (see the workspace Cargo.toml).
pub const PROFILE: &str = "guest";

/// One guest crate to build.
#[derive(Clone, Debug)]
pub struct Guest {
    /// The directory name (e.g. `fs-tools`), used as the plugin name.
    pub name: String,
    /// The cargo package name (from its Cargo.toml).
    pub package: String,
    /// The crate directory.
    pub dir: PathBuf,
}

/// A built guest.
#[derive(Clone, Debug)]
pub struct Built {
    pub guest: Guest,
    /// The component.
    pub wasm: PathBuf,
}

/// The first-party plugins (every guest under `plugins/`, the Code Mode
/// interpreter included), as both build scripts build them: always this
/// set in one invocation, so that feature unification gives the same
/// bytes and the second build is a no-op.
pub fn plugins(workspace: &Path) -> Vec<Guest> {
    discover(&workspace.join("plugins"))
}

/// Every directory under `parent` that holds a Cargo.toml, sorted.
pub fn discover(parent: &Path) -> Vec<Guest> {
    // A new guest directory changes the parent: build again.
    println!("cargo:rerun-if-changed={}", parent.display());
    let mut guests = Vec::new();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return guests;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let manifest = dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let Some(package) = package_name(&text) else {
            continue;
        };
        guests.push(Guest {
            name: entry.file_name().to_string_lossy().into_owned(),
            package,
            dir,
        });
    }
    guests.sort_by(|a, b| a.name.cmp(&b.name));
    guests
}

/// `name = "..."` of the `[package]` table (enough TOML for our manifests).
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
            continue;
        }
        if in_package
            && let Some(rest) = line.strip_prefix("name")
            && let Some(value) = rest.trim_start().strip_prefix('=')
        {
            return Some(value.trim().trim_matches('"').to_string());
        }
    }
    None
}

/// The target directory of the running build (`OUT_DIR` is
/// `<target>/<profile>/build/<pkg>-<hash>/out`, possibly with a target
/// triple in between).
pub fn host_target_dir() -> PathBuf {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    out.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent())
        .and_then(|profile| profile.parent())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out.join("target"))
}

/// Build `guests` (all in one cargo invocation) and return their components.
/// Panics with a clear message if the build fails: a build script has no
/// better way to report.
pub fn build(workspace: &Path, guests: &[Guest]) -> Vec<Built> {
    println!("cargo:rerun-if-changed={}", workspace.join("wit").display());
    println!("cargo:rerun-if-changed={}", workspace.join("sdk").display());
    println!("cargo:rerun-if-env-changed=TOOLGATE_GUEST_CARGO_ARGS");
    for g in guests {
        println!("cargo:rerun-if-changed={}", g.dir.display());
    }
    if guests.is_empty() {
        return Vec::new();
    }
    ensure_target();
    let target_dir = host_target_dir().join("guests");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target")
        .arg(TARGET)
        .arg("--profile")
        .arg(PROFILE)
        .arg("--target-dir")
        .arg(&target_dir);
    for g in guests {
        cmd.arg("-p").arg(&g.package);
    }
    if let Ok(extra) = std::env::var("TOOLGATE_GUEST_CARGO_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    // The outer build's flags are for the host, not for wasm.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MANIFEST_PATH",
    ] {
        cmd.env_remove(var);
    }
    // 128-bit SIMD (every engine toolgate runs on has it): `memchr`, and
    // so the regex and search crates, use it to scan bytes several times
    // faster than their portable fallback.
    cmd.env(
        "CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS",
        "-Ctarget-feature=+simd128",
    );
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the guest components: {e}"));
    if !status.success() {
        panic!(
            "building the guest components for {TARGET} failed (see the cargo output above). \
             If the target is missing, run `rustup target add {TARGET}`."
        );
    }
    let out = target_dir.join(TARGET).join(PROFILE);
    guests
        .iter()
        .map(|g| {
            let wasm = out.join(format!("{}.wasm", g.package.replace('-', "_")));
            assert!(
                wasm.exists(),
                "guest `{}` did not produce {}",
                g.package,
                wasm.display()
            );
            Built {
                guest: g.clone(),
                wasm,
            }
        })
        .collect()
}

/// Make sure the toolchain can build for [`TARGET`]. `rust-toolchain.toml`
/// lists it, but rustup does not always install it on its own (e.g. with
/// `RUSTUP_AUTO_INSTALL=0`), so a fresh clone would fail here; ask rustup
/// once, and explain if that is not possible.
fn ensure_target() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_string()));
    let Some(sysroot) = sysroot else { return };
    if sysroot.join("lib/rustlib").join(TARGET).exists() {
        return;
    }
    println!(
        "cargo:warning=installing the {TARGET} target with rustup (the plugins and test fixtures are built for it)"
    );
    let mut cmd = Command::new("rustup");
    cmd.args(["target", "add", TARGET]);
    if let Some(toolchain) = std::env::var_os("RUSTUP_TOOLCHAIN") {
        cmd.arg("--toolchain").arg(toolchain);
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        _ => panic!(
            "the {TARGET} target is not installed and `rustup target add {TARGET}` failed; \
             install it by hand (`rustup target add {TARGET}`) and build again"
        ),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_package_name() {
        let m = "[workspace]\nx = 1\n[package]\nname = \"plugin-fs-tools\"\nversion = \"0.1.0\"\n";
        assert_eq!(super::package_name(m).as_deref(), Some("plugin-fs-tools"));
    }
}
