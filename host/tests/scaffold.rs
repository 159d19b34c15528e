//! `toolgate new`: a scaffolded project of each language builds on the
//! first try, outside the toolgate tree, and passes `toolgate check
//! --conformance` (its `test.sh`: build, `--call`, `--conformance`).
//!
//! A language whose toolchain is missing here is *ignored* with the reason
//! (`scripts/toolchains.sh` installs them), never passed. The Rust project
//! depends on this checkout's SDK by path (the git default names a
//! repository this test cannot reach) and builds into a shared, cached
//! target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

fn toolgate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    c.env(
        "TOOLGATE_CACHE_DIR",
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-cache"),
    );
    c.env_remove("RUST_LOG");
    c
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fresh directory outside the toolgate tree.
fn outside() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-scaffold-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `toolgate new KIND NAME --lang LANG`, then the project's `test.sh`.
fn scaffold_and_test(kind: &str, lang: &str) {
    let parent = outside();
    let name = format!("my-{lang}-{kind}");
    let mut new = toolgate();
    new.args(["new", kind, &name, "--lang", lang, "--dir"])
        .arg(&parent);
    if lang == "rust" {
        new.arg("--sdk-path").arg(workspace().join("sdk"));
    }
    let out = new.output().unwrap();
    assert!(
        out.status.success(),
        "toolgate new failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let project = parent.join(&name);
    assert!(project.join("README.md").exists() && project.join("build.sh").exists());
    let mut test = Command::new("bash");
    test.arg(project.join("test.sh"))
        .env("PATH", env!("TOOLGATE_TOOLCHAINS_PATH"))
        .env("TOOLGATE", env!("CARGO_BIN_EXE_toolgate"))
        .env(
            "TOOLGATE_CACHE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-cache"),
        )
        .env("CARGO_TARGET_DIR", env!("TOOLGATE_SCAFFOLD_TARGET"));
    // The outer cargo's settings are for the host, not for the project.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "CARGO_MANIFEST_DIR",
        "CARGO_PKG_NAME",
    ] {
        test.env_remove(var);
    }
    let out = test.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}: test.sh failed\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(project.join(format!("{name}.wasm")).exists());
    assert!(stdout.contains("0 violation(s)"), "{stdout}");
    // What each kind does, seen through `--call`.
    let expected = match kind {
        "tool" => "decision:  succeeded",
        "guard" => "the arguments mention `forbidden`",
        "post-hook" => "the result mentions `forbidden`",
        _ => "decision:",
    };
    assert!(stdout.contains(expected), "{stdout}");
    let _ = std::fs::remove_dir_all(&parent);
}

#[test]
fn rust_guard_and_tool() {
    scaffold_and_test("guard", "rust");
    scaffold_and_test("tool", "rust");
}

#[test]
#[cfg_attr(
    not(scaffold_python),
    ignore = "componentize-py is missing: run scripts/toolchains.sh python"
)]
fn python_guard_and_tool() {
    scaffold_and_test("guard", "python");
    scaffold_and_test("tool", "python");
}

#[test]
#[cfg_attr(
    not(scaffold_js),
    ignore = "componentize-js is missing: run scripts/toolchains.sh js"
)]
fn js_guard_and_post_hook() {
    scaffold_and_test("guard", "js");
    scaffold_and_test("post-hook", "js");
}

#[test]
#[cfg_attr(
    not(scaffold_c),
    ignore = "the C toolchain is missing: run scripts/toolchains.sh apt c"
)]
fn c_every_kind() {
    for kind in [
        "tool",
        "guard",
        "pre-hook",
        "post-hook",
        "finalizer",
        "observer",
    ] {
        scaffold_and_test(kind, "c");
    }
}

#[test]
fn refuses_a_bad_name_and_an_existing_directory() {
    let parent = outside();
    let out = toolgate()
        .args(["new", "guard", "no/slashes", "--dir"])
        .arg(&parent)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid plugin name"));
    std::fs::create_dir_all(parent.join("taken")).unwrap();
    let out = toolgate()
        .args(["new", "guard", "taken", "--dir"])
        .arg(&parent)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let _ = std::fs::remove_dir_all(&parent);
}
