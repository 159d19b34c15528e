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
    let guests = toolgate_guest_build::plugins(&workspace);
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // What is embedded is a copy in OUT_DIR, read once: the key of its
    // precompiled code is computed from these very bytes. The components
    // under `target/guests` are shared with the tests' build script, which
    // builds the plugins again with the fixtures (other feature
    // unification, other bytes) and may overwrite them while this crate
    // compiles: embedding from there let the precompiled code's key and
    // the embedded bytes disagree (CI failed `every_builtin_is_precompiled_
    // for_this_engine` on a clean clone).
    let mut snapshots = snapshot(&out, toolgate_guest_build::build(&workspace, &guests));
    // `run-code` is the Code Mode interpreter, not a plugin: built with the
    // others (it is Rust, like them), embedded apart (`codemode::interpreter`).
    let interpreter = snapshots
        .iter()
        .position(|s| s.name == RUN_CODE_DIR)
        .map(|i| snapshots.remove(i))
        .unwrap_or_else(|| panic!("plugins/{RUN_CODE_DIR} (the Code Mode interpreter) is missing"));
    println!(
        "cargo:rustc-env=TOOLGATE_RUN_CODE_WASM={}",
        interpreter.path.display()
    );
    let mut table = String::from("pub static BUILTIN: &[(&str, &[u8], &str)] = &[\n");
    for s in &snapshots {
        let manifest = s.dir.join("plugin.toml");
        let manifest = if manifest.exists() {
            format!("include_str!({:?})", manifest.display().to_string())
        } else {
            "\"\"".to_string()
        };
        writeln!(
            table,
            "    ({:?}, include_bytes!({:?}), {manifest}),",
            s.name,
            s.path.display().to_string()
        )
        .unwrap();
    }
    table.push_str("];\n");
    std::fs::write(out.join("builtin_plugins.rs"), table).unwrap();
    // The interpreter too: Boa is a 6 MB component, seconds of Cranelift
    // at the first `run_code` otherwise.
    snapshots.push(interpreter);
    let (table, code) = precompile(&out, &snapshots);
    std::fs::write(out.join("precompiled_plugins.rs"), table).unwrap();
    let mut kept: Vec<PathBuf> = snapshots.into_iter().map(|s| s.path).collect();
    kept.extend(code);
    remove_stale(&out, &kept);
}

/// A built component as embedded: its bytes, read once, kept in `OUT_DIR`
/// under their digest.
struct Snapshot {
    name: String,
    /// The guest's source directory (its `plugin.toml`).
    dir: PathBuf,
    /// The copy in `OUT_DIR` that `include_bytes!` reads.
    path: PathBuf,
    bytes: Vec<u8>,
}

/// Copies each built component into `out`, named by its SHA-256, unless
/// that copy exists: bytes and name cannot disagree, and a copy is never
/// changed after it is written (a new build of other bytes is another
/// file).
fn snapshot(out: &std::path::Path, built: Vec<toolgate_guest_build::Built>) -> Vec<Snapshot> {
    use sha2::{Digest, Sha256};
    built
        .into_iter()
        .map(|b| {
            let bytes = std::fs::read(&b.wasm)
                .unwrap_or_else(|e| panic!("reading {}: {e}", b.wasm.display()));
            let digest: String = Sha256::digest(&bytes)[..12]
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            let path = out.join(format!("{}-{digest}.wasm", b.guest.name));
            if !path.exists() {
                let tmp = path.with_extension("tmp");
                std::fs::write(&tmp, &bytes)
                    .unwrap_or_else(|e| panic!("writing {}: {e}", tmp.display()));
                std::fs::rename(&tmp, &path)
                    .unwrap_or_else(|e| panic!("renaming to {}: {e}", path.display()));
            }
            Snapshot {
                name: b.guest.name,
                dir: b.guest.dir,
                path,
                bytes,
            }
        })
        .collect()
}

/// Compiles every built-in to machine code, as the host's engine would
/// (`codegen::configure`), and returns the `PRECOMPILED` table: per
/// plugin its name, its key (`codegen::key`), its seal (`codegen::seal`)
/// and the code — and the files of the code. See `plugin/precompiled.rs`
/// for why and how it is checked.
///
/// The code is kept in `out` under its key: a build that changes no
/// built-in compiles nothing. When cross-compiling the table is empty (the
/// build machine's compiler would target the wrong machine) and the host
/// compiles the built-ins at start, through its compile cache.
fn precompile(out: &std::path::Path, built: &[Snapshot]) -> (String, Vec<PathBuf>) {
    let mut table = String::from("pub static PRECOMPILED: &[(&str, &str, &str, &[u8])] = &[\n");
    let host = std::env::var("HOST").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    if host != target {
        println!(
            "cargo:warning=cross-compiling ({host} -> {target}): the built-in plugins are compiled at the first start instead of at build time"
        );
        table.push_str("];\n");
        return (table, Vec::new());
    }
    let mut config = wasmtime::Config::new();
    codegen::configure(&mut config);
    let engine = wasmtime::Engine::new(&config)
        .unwrap_or_else(|e| panic!("creating the engine to precompile the built-ins: {e:#}"));
    let mut files = Vec::new();
    for b in built {
        let key = codegen::key(&engine, &b.bytes);
        let path = out.join(format!("{}-{key}.cwasm", b.name));
        if !path.exists() {
            let code = engine
                .precompile_component(&b.bytes)
                .unwrap_or_else(|e| panic!("precompiling the built-in {}: {e:#}", b.name));
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, &code).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        let code = std::fs::read(&path).unwrap();
        writeln!(
            table,
            "    ({:?}, {key:?}, {:?}, include_bytes!({:?})),",
            b.name,
            codegen::seal(&key, &code),
            path.display().to_string()
        )
        .unwrap();
        files.push(path);
    }
    table.push_str("];\n");
    (table, files)
}

/// Removes what earlier versions of the built-ins left in `out`:
/// components and code that are not `kept`.
fn remove_stale(out: &std::path::Path, kept: &[PathBuf]) {
    for entry in std::fs::read_dir(out).into_iter().flatten().flatten() {
        let path = entry.path();
        let ours = path
            .extension()
            .is_some_and(|e| e == "wasm" || e == "cwasm");
        if ours && !kept.contains(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The directory of the Code Mode interpreter under `plugins/`.
const RUN_CODE_DIR: &str = "run-code";
