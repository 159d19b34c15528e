//! Which guest toolchains are present, for `toolgate new` (where it looks
//! for tools not on PATH) and the scaffolding tests (`tests/scaffold.rs`).

fn main() {
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
    // `toolgate new` looks there for tools not on PATH.
    println!("cargo:rustc-env=TOOLGATE_TOOLCHAINS_DIR={}", dir.display());
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
