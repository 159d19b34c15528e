//! Compiles the first-party plugins in `plugins/` to components and
//! generates the table that embeds them in the binary.

use std::fmt::Write;
use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    let mut guests = toolgate_guest_build::discover(&workspace.join("plugins"));
    // `run-code` is the Code Mode interpreter, not a plugin: built on its
    // own (it cross-compiles C), embedded apart (`codemode::interpreter`).
    let interpreter: Vec<_> = guests
        .iter()
        .filter(|g| g.name == RUN_CODE_DIR)
        .cloned()
        .collect();
    guests.retain(|g| g.name != RUN_CODE_DIR);
    let built = toolgate_guest_build::build(&workspace, &guests);
    build_interpreter(&workspace, &interpreter);
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

/// The directory of the Code Mode interpreter under `plugins/`.
const RUN_CODE_DIR: &str = "run-code";

/// Build the QuickJS interpreter (C, through `rquickjs`) for wasm32-wasip2
/// and hand its path to the crate as `TOOLGATE_RUN_CODE_WASM`.
///
/// QuickJS is C. `rquickjs-sys` compiles it with the WASI SDK found at
/// `WASI_SDK` (`bin/clang`, `bin/ar`, `share/wasi-sysroot`), and would
/// download one otherwise — which a build here must never do. So unless
/// `WASI_SDK` is set, this lays out an SDK of links to Debian's packages
/// (`apt-get install clang-19 lld-19 llvm-19 libclang1-19 wasi-libc
/// libclang-rt-19-dev-wasm32`, what `.ci/run` installs) under the target
/// directory, and points `WASI_SDK` at it. Only headers are needed from the
/// sysroot: what gets linked is Rust's own WASI libc.
fn build_interpreter(workspace: &std::path::Path, interpreter: &[toolgate_guest_build::Guest]) {
    println!("cargo:rerun-if-env-changed=WASI_SDK");
    assert_eq!(
        interpreter.len(),
        1,
        "plugins/{RUN_CODE_DIR} (the Code Mode interpreter) is missing"
    );
    if std::env::var_os("WASI_SDK").is_none() {
        let sdk = debian_wasi_sdk();
        // SAFETY: a build script is single-threaded; the nested cargo
        // inherits it.
        unsafe { std::env::set_var("WASI_SDK", &sdk) };
    }
    let built = toolgate_guest_build::build(workspace, interpreter);
    println!(
        "cargo:rustc-env=TOOLGATE_RUN_CODE_WASM={}",
        built[0].wasm.display()
    );
}

/// A WASI SDK layout of links to Debian's clang, llvm-ar and wasi-libc
/// headers, at `<target>/wasi-sdk-debian`.
fn debian_wasi_sdk() -> PathBuf {
    use std::path::Path;
    let missing = |what: &str| -> ! {
        panic!(
            "building the Code Mode interpreter (QuickJS, C) needs {what}: \
             `apt-get install clang-19 lld-19 llvm-19 libclang1-19 wasi-libc libclang-rt-19-dev-wasm32` (Debian), \
             or set WASI_SDK to a WASI SDK"
        )
    };
    let first = |candidates: &[&str]| {
        candidates
            .iter()
            .map(Path::new)
            .find(|p| p.exists())
            .map(Path::to_path_buf)
    };
    let clang = first(&["/usr/bin/clang-19", "/usr/lib/llvm-19/bin/clang"])
        .unwrap_or_else(|| missing("clang-19"));
    let ar = first(&["/usr/bin/llvm-ar-19", "/usr/lib/llvm-19/bin/llvm-ar"])
        .unwrap_or_else(|| missing("llvm-ar-19 (package llvm-19)"));
    let headers = first(&["/usr/include/wasm32-wasi"])
        .filter(|d| d.join("stdlib.h").exists())
        .unwrap_or_else(|| missing("the WASI libc headers (package wasi-libc)"));
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let target = out
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|b| b.parent())
        .and_then(|p| p.parent())
        .map(Path::to_path_buf)
        .unwrap_or(out);
    let sdk = target.join("wasi-sdk-debian");
    let include = sdk.join("share/wasi-sysroot/include");
    std::fs::create_dir_all(sdk.join("bin")).unwrap();
    std::fs::create_dir_all(&include).unwrap();
    let link = |from: &Path, to: &Path| {
        if std::fs::read_link(to).ok().as_deref() != Some(from) {
            let _ = std::fs::remove_file(to);
            std::os::unix::fs::symlink(from, to).unwrap_or_else(|e| {
                panic!("cannot link {} to {}: {e}", to.display(), from.display())
            });
        }
    };
    link(&clang, &sdk.join("bin/clang"));
    link(&ar, &sdk.join("bin/ar"));
    // What the SDK check looks for (never run: nothing is linked with it).
    link(&clang, &sdk.join("bin/wasm-ld"));
    for triple in ["wasm32-wasip2", "wasm32-wasip1", "wasm32-wasi"] {
        link(&headers, &include.join(triple));
    }
    sdk
}
