//! Compiles every fixture crate in `tests/fixtures/` (and the first-party
//! plugins) to components and generates a constant with each path (the
//! wasmtime test-programs pattern).

use std::fmt::Write;
use std::path::PathBuf;

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
    let all: Vec<_> = fixtures.iter().chain(plugins.iter()).cloned().collect();
    let built = toolgate_guest_build::build(&workspace, &all);
    let mut consts = String::new();
    for (i, b) in built.iter().enumerate() {
        let prefix = if i < fixtures.len() { "" } else { "PLUGIN_" };
        let name = format!("{prefix}{}", b.guest.name.to_uppercase().replace('-', "_"));
        writeln!(
            consts,
            "/// The `{}` fixture component.\npub const {name}: &str = {:?};",
            b.guest.name,
            b.wasm.display().to_string()
        )
        .unwrap();
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("fixtures.rs"), consts).unwrap();
}
