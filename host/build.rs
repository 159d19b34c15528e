//! Compiles the first-party plugins in `plugins/` to components and
//! generates the table that embeds them in the binary.

use std::fmt::Write;
use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    let guests = toolgate_guest_build::discover(&workspace.join("plugins"));
    // `run-code` is the Code Mode interpreter, not a plugin: built with the
    // others (it is Rust, like them), embedded apart (`codemode::interpreter`).
    let mut built = toolgate_guest_build::build(&workspace, &guests);
    let interpreter = built
        .iter()
        .position(|b| b.guest.name == RUN_CODE_DIR)
        .map(|i| built.remove(i))
        .unwrap_or_else(|| panic!("plugins/{RUN_CODE_DIR} (the Code Mode interpreter) is missing"));
    println!(
        "cargo:rustc-env=TOOLGATE_RUN_CODE_WASM={}",
        interpreter.wasm.display()
    );
    let mut table = String::from("pub static BUILTIN: &[(&str, &[u8], &str)] = &[\n");
    for b in &built {
        let manifest = b.guest.dir.join("plugin.toml");
        let manifest = if manifest.exists() {
            format!("include_str!({:?})", manifest.display().to_string())
        } else {
            "\"\"".to_string()
        };
        writeln!(
            table,
            "    ({:?}, include_bytes!({:?}), {manifest}),",
            b.guest.name,
            b.wasm.display().to_string()
        )
        .unwrap();
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("builtin_plugins.rs");
    std::fs::write(out, table).unwrap();
    toolchains();
}

/// Which guest toolchains are present, for the scaffolding tests
/// (`tests/scaffold.rs`): a `scaffold_<lang>` cfg each, and where they are.
/// The tests crate's build script installs them (`scripts/toolchains.sh`);
/// this one only looks. With `TOOLGATE_REQUIRE_TOOLCHAINS=1` (CI) a
/// missing one fails the build instead of ignoring its test.
fn toolchains() {
    use toolgate_guest_build::toolchains::{self, Lang};
    let target = toolgate_guest_build::host_target_dir();
    let dir = toolchains::dir(&target);
    let _ = std::fs::create_dir_all(&dir);
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rerun-if-env-changed=TOOLGATE_REQUIRE_TOOLCHAINS");
    println!("cargo:rerun-if-env-changed=TOOLGATE_TOOLCHAINS");
    println!(
        "cargo:rustc-env=TOOLGATE_TOOLCHAINS_PATH={}",
        toolchains::path_with(&dir).to_string_lossy()
    );
    println!(
        "cargo:rustc-env=TOOLGATE_SCAFFOLD_TARGET={}",
        target.join("scaffold").display()
    );
    let require = std::env::var_os("TOOLGATE_REQUIRE_TOOLCHAINS").is_some_and(|v| v != "0");
    for lang in [Lang::Python, Lang::Js, Lang::C] {
        println!("cargo::rustc-check-cfg=cfg(scaffold_{})", lang.step());
        match toolchains::missing(&dir, lang) {
            None => println!("cargo:rustc-cfg=scaffold_{}", lang.step()),
            Some(why) if require => panic!(
                "TOOLGATE_REQUIRE_TOOLCHAINS is set and the {} toolchain is not usable: {why}",
                lang.step()
            ),
            Some(_) => {}
        }
    }
}

/// The directory of the Code Mode interpreter under `plugins/`.
const RUN_CODE_DIR: &str = "run-code";
