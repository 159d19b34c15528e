//! Compiles the first-party plugins in `plugins/` to components, and those
//! to machine code, and generates the tables that embed both in the binary.

use std::fmt::Write;
use std::path::PathBuf;

/// The engine settings that shape machine code, shared with the host.
#[path = "src/plugin/codegen.rs"]
mod codegen;

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
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("builtin_plugins.rs"), table).unwrap();
    // The interpreter too: Boa is a 6 MB component, seconds of Cranelift
    // at the first `run_code` otherwise.
    let mut native = built.clone();
    native.push(interpreter.clone());
    std::fs::write(out.join("precompiled_plugins.rs"), precompile(&native)).unwrap();
    toolchains();
}

/// Compiles every built-in to machine code, as the host's engine would
/// (`codegen::configure`), and returns the `PRECOMPILED` table: per
/// plugin its name, its key (`codegen::key`), its seal (`codegen::seal`)
/// and the code. See `plugin/precompiled.rs` for why and how it is checked.
///
/// The code is kept in `OUT_DIR` under its key: a build that changes no
/// built-in compiles nothing. When cross-compiling the table is empty (the
/// build machine's compiler would target the wrong machine) and the host
/// compiles the built-ins at start, through its compile cache.
fn precompile(built: &[toolgate_guest_build::Built]) -> String {
    let mut table = String::from("pub static PRECOMPILED: &[(&str, &str, &str, &[u8])] = &[\n");
    let host = std::env::var("HOST").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    if host != target {
        println!(
            "cargo:warning=cross-compiling ({host} -> {target}): the built-in plugins are compiled at the first start instead of at build time"
        );
        table.push_str("];\n");
        return table;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let mut config = wasmtime::Config::new();
    codegen::configure(&mut config);
    let engine = wasmtime::Engine::new(&config)
        .unwrap_or_else(|e| panic!("creating the engine to precompile the built-ins: {e:#}"));
    let mut current = Vec::new();
    for b in built {
        let wasm =
            std::fs::read(&b.wasm).unwrap_or_else(|e| panic!("reading {}: {e}", b.wasm.display()));
        let key = codegen::key(&engine, &wasm);
        let path = out.join(format!("{}-{key}.cwasm", b.guest.name));
        if !path.exists() {
            let code = engine
                .precompile_component(&wasm)
                .unwrap_or_else(|e| panic!("precompiling the built-in {}: {e:#}", b.guest.name));
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, &code).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        let code = std::fs::read(&path).unwrap();
        current.push(path.clone());
        writeln!(
            table,
            "    ({:?}, {key:?}, {:?}, include_bytes!({:?})),",
            b.guest.name,
            codegen::seal(&key, &code),
            path.display().to_string()
        )
        .unwrap();
    }
    // What earlier versions of the built-ins left.
    for entry in std::fs::read_dir(&out).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "cwasm") && !current.contains(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
    table.push_str("];\n");
    table
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
