//! Compiles every fixture crate in `tests/fixtures/` (and the first-party
//! plugins, and the examples) to components and generates a constant with
//! each path (the wasmtime test-programs pattern).
//!
//! Examples in Python, JavaScript and C are built with their own
//! toolchains (`scripts/toolchains.sh`), cached by a hash of their inputs.
//! A language whose toolchain is missing sets no `toolchain_<lang>` cfg:
//! its tests are *ignored* with the reason, never passed. With
//! `TOOLGATE_REQUIRE_TOOLCHAINS=1` (CI) a missing toolchain fails the build.

use std::fmt::Write;
use std::path::PathBuf;

use toolgate_guest_build::toolchains::{self, Lang};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    // The fixtures, and the first-party plugins (as PLUGIN_*): both are built
    // into the same guest target directory, so nothing is compiled twice.
    // A new fixture directory must be picked up too, not only changes to the
    // ones found last time.
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("fixtures").display()
    );
    let fixtures = toolgate_guest_build::discover(&manifest_dir.join("fixtures"));
    let mut plugins = toolgate_guest_build::discover(&workspace.join("plugins"));
    // The Code Mode interpreter is no plugin: the host builds and embeds it.
    plugins.retain(|g| g.name != "run-code");
    let rust_examples = toolgate_guest_build::discover(&workspace.join("examples"));
    let all: Vec<_> = fixtures
        .iter()
        .chain(plugins.iter())
        .chain(rust_examples.iter())
        .cloned()
        .collect();
    let built = toolgate_guest_build::build(&workspace, &all);
    let mut consts = String::new();
    for (i, b) in built.iter().enumerate() {
        let prefix = if i < fixtures.len() {
            ""
        } else if i < fixtures.len() + plugins.len() {
            "PLUGIN_"
        } else {
            "EXAMPLE_"
        };
        let name = format!("{prefix}{}", b.guest.name.to_uppercase().replace('-', "_"));
        writeln!(
            consts,
            "/// The `{}` component.\npub const {name}: &str = {:?};",
            b.guest.name,
            b.wasm.display().to_string()
        )
        .unwrap();
    }
    consts.push_str(&other_languages(&workspace));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("fixtures.rs"), consts).unwrap();
}

/// Build the examples in Python, JavaScript and C; emit their constants and
/// the `toolchain_*` cfgs.
fn other_languages(workspace: &std::path::Path) -> String {
    for lang in ["python", "js", "c"] {
        println!("cargo::rustc-check-cfg=cfg(toolchain_{lang})");
    }
    println!("cargo:rerun-if-env-changed=TOOLGATE_REQUIRE_TOOLCHAINS");
    println!("cargo:rerun-if-env-changed=TOOLGATE_NO_TOOLCHAIN_INSTALL");
    println!("cargo:rerun-if-env-changed=TOOLGATE_TOOLCHAINS");
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("scripts/toolchains.sh").display()
    );
    let require = std::env::var_os("TOOLGATE_REQUIRE_TOOLCHAINS").is_some_and(|v| v != "0");
    let target = toolgate_guest_build::host_target_dir();
    let tc = toolchains::dir(&target);
    let cache = target.join("examples");
    let examples_dir = workspace.join("examples");
    let mut examples: Vec<(String, PathBuf, Lang)> = std::fs::read_dir(&examples_dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.join("build.sh").exists() && !p.join("Cargo.toml").exists())
                .filter_map(|p| {
                    let lang = Lang::of(&p)?;
                    let name = p.file_name()?.to_string_lossy().into_owned();
                    Some((name, p, lang))
                })
                .collect()
        })
        .unwrap_or_default();
    examples.sort();
    let mut langs: Vec<Lang> = examples.iter().map(|(_, _, l)| *l).collect();
    langs.sort_by_key(|l| l.step());
    langs.dedup();
    // Install what needs no root, once (each step is skipped when present).
    if std::env::var_os("TOOLGATE_NO_TOOLCHAIN_INSTALL").is_none()
        && langs.iter().any(|l| toolchains::missing(&tc, *l).is_some())
        && let Err(e) = toolchains::install(workspace, &tc, &langs)
    {
        println!(
            "cargo:warning=installing the guest toolchains failed: {}",
            e.lines().last().unwrap_or_default()
        );
    }
    let mut out = String::new();
    writeln!(
        out,
        "/// The project-local guest toolchains.\npub const TOOLCHAINS: &str = {:?};",
        tc.display().to_string()
    )
    .unwrap();
    writeln!(
        out,
        "/// `PATH` with the guest toolchains first.\npub const TOOLCHAINS_PATH: &str = {:?};",
        toolchains::path_with(&tc).to_string_lossy()
    )
    .unwrap();
    for lang in &langs {
        if let Some(why) = toolchains::missing(&tc, *lang) {
            if require {
                panic!(
                    "TOOLGATE_REQUIRE_TOOLCHAINS is set and the {} toolchain is not usable: {why}",
                    lang.step()
                );
            }
            println!(
                "cargo:warning=the {} examples are not built and their tests are ignored: {why}",
                lang.step()
            );
            continue;
        }
        println!("cargo:rustc-cfg=toolchain_{}", lang.step());
    }
    for (name, dir, lang) in &examples {
        println!("cargo:rerun-if-changed={}", dir.display());
        let konst = name.to_uppercase().replace('-', "_");
        let path = if toolchains::missing(&tc, *lang).is_some() {
            String::new()
        } else {
            match toolchains::build_cached(workspace, &tc, &cache, name, dir) {
                Ok(p) => p.display().to_string(),
                Err(e) => panic!("building the example `{name}` failed: {e}"),
            }
        };
        writeln!(
            out,
            "/// The `{name}` example (empty when its toolchain is missing).\npub const EXAMPLE_{konst}: &str = {path:?};"
        )
        .unwrap();
    }
    out
}
