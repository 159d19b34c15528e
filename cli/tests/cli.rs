//! The `toolgate` binary, as a user runs it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn toolgate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    // The workspace root: the built-in file tools are granted it.
    c.current_dir(workspace());
    // Outside the workspace: the built-in tools are granted the workspace,
    // and a compile cache inside a grant is refused (see plugin/cache.rs).
    c.env("TOOLGATE_CACHE_DIR", cli_cache());
    // Its state (audit record, store, the cache's key) beside the cache,
    // never in the real home.
    c.env(
        "TOOLGATE_STATE_DIR",
        cli_cache().with_file_name(state_name()),
    );
    c.env_remove("RUST_LOG");
    c
}

/// `toolgate-cli-test-state-UID`: the cache's sibling the tests' state
/// lives in (the host makes it, `0700`).
fn state_name() -> String {
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    format!("toolgate-cli-test-state-{}", uid.unwrap_or(0))
}

/// A compile cache for these tests, private to this user, outside every
/// grant.
fn cli_cache() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let dir = std::env::temp_dir().join(format!("toolgate-cli-test-cache-{}", uid.unwrap_or(0)));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    dir
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn with_stdin(mut c: Command, input: &str) -> Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("toolgate starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory for one test: unique per call (three tests copy the
/// `tools` fixture, in parallel; a shared directory let one remove or
/// overwrite another's files mid-run).
fn temp(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn run_prints_one_result_per_call_in_order() {
    let mut c = toolgate();
    c.args(["run", "-"]);
    let out = with_stdin(
        c,
        r#"[
            {"id": "a", "name": "read", "arguments": {"path": "Cargo.toml", "limit": 1}},
            {"id": "b", "name": "no_such_tool", "arguments": {}},
            {"id": "c", "name": "list_dir", "arguments": {"path": "wit"}}
        ]"#,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let ids: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(v[0]["isError"], false);
    assert!(
        v[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("     1\t[workspace]\n"),
        "{v}"
    );
    assert_eq!(v[1]["isError"], true);
    assert_eq!(v[1]["error"]["code"], "UNKNOWN_TOOL");
    assert!(
        v[2]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("types.wit")
    );
}

/// `run`: a terminal opened, typed into and read as a screen within one
/// batch (the id is predictable: the first terminal of replica `cli-term`),
/// and closed with the host at the batch's end.
#[test]
fn run_drives_a_terminal_within_a_batch() {
    let mut c = toolgate();
    c.args(["--approve", "allow", "--replica-id", "cli-term", "run", "-"]);
    let out = with_stdin(
        c,
        r#"[
            {"id": "o", "name": "terminal_open", "arguments": {"command": "sh", "yield_ms": 300}},
            {"id": "w", "name": "terminal_write", "arguments": {"id": "term-1@cli-term", "input": "echo sum-$((40+2))\n", "yield_ms": 2000}},
            {"id": "s", "name": "terminal_screen", "arguments": {"id": "term-1@cli-term"}}
        ]"#,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let shown = |i: usize| {
        v[i]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(shown(0).contains("Opened terminal term-1@cli-term"), "{v}");
    assert!(shown(1).contains("sum-42"), "{v}");
    assert!(shown(2).contains("sum-42"), "{v}");
}

#[test]
fn malformed_batches_are_host_errors_with_a_message() {
    for (input, expect) in [
        ("not json", "is not an acceptable batch"),
        (r#"{"id": "a"}"#, "expected a JSON array"),
    ] {
        let mut c = toolgate();
        c.args(["run", "-"]);
        let out = with_stdin(c, input);
        assert_eq!(out.status.code(), Some(1), "{input}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains(expect),
            "{input}: {}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
}

/// One malformed call is answered alone, at its place; `arguments` may be
/// a JSON string (as OpenAI's API sends it).
#[test]
fn a_bad_call_is_rejected_alone_and_string_arguments_are_accepted() {
    let mut c = toolgate();
    c.args(["run", "--compact", "-"]);
    let out = with_stdin(
        c,
        r#"[
            {"id": 1, "name": "x"},
            {"id": "b", "name": "read", "arguments": "{\"path\": \"Cargo.toml\", \"limit\": 1}"},
            {"name": "read"},
            {"id": "d", "name": "read", "args": {}},
            {"id": "e", "name": "read", "arguments": "{not json"},
            {"id": "f", "name": "read", "arguments": "[1, 2]"}
        ]"#,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let records: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 6, "{records:?}");
    assert_eq!(records[1]["isError"], false, "{}", records[1]);
    for (i, expect) in [
        (0, "/id: expected string"),
        (2, "/id: expected required property"),
        (3, "/args"),
        (4, "`arguments` string is not acceptable JSON"),
        (5, "does not hold a JSON object"),
    ] {
        let e = &records[i]["error"];
        assert_eq!(e["code"], "INVALID_ARGS", "{}", records[i]);
        let m = e["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("call {i} of")) && m.contains(expect),
            "{m}"
        );
    }
    assert_eq!(records[0]["id"], "#0");
    assert_eq!(records[3]["id"], "d");
}

/// `plugins --json` and `check --json` speak the same camelCase.
#[test]
fn plugins_and_check_json_use_the_same_key_style() {
    let out = toolgate().args(["plugins", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let plugins: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &plugins["plugins"][0];
    for key in ["witVersion", "callPath", "loadUs", "instances"] {
        assert!(
            first.get(key).is_some(),
            "plugins --json lacks {key}: {first}"
        );
    }
    let wasm = temp("check-json").join("timeout.wasm");
    // The built-in timeout plugin, as the host's build script built it.
    let built = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("../guests/wasm32-wasip2/guest/plugin_timeout.wasm");
    assert!(built.exists(), "{} was not built", built.display());
    std::fs::copy(&built, &wasm).unwrap();
    {
        let out = toolgate()
            .args(["check", "--json"])
            .arg(&wasm)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let check: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for key in [
            "witVersion",
            "callPath",
            "loadUs",
            "instances",
            "grantsNeeded",
        ] {
            assert!(
                check.get(key).is_some(),
                "check --json lacks {key}: {check}"
            );
        }
        let snake = |v: &serde_json::Value| {
            v.as_object()
                .map(|o| o.keys().any(|k| k.contains('_')))
                .unwrap_or(false)
        };
        assert!(
            !snake(&check) && !snake(first),
            "snake_case keys: {check} {first}"
        );
    }
}

#[test]
fn unreadable_input_and_unknown_flags_fail() {
    let out = toolgate()
        .args(["run", "/no/such/file.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("/no/such/file.json"),
        "{}",
        text(&out.stderr)
    );
    let out = toolgate()
        .args(["run", "--frobnicate", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--frobnicate"));
}

#[test]
fn a_corrupt_plugin_stops_the_host_unless_it_is_optional() {
    let dir = temp("corrupt");
    std::fs::write(dir.join("broken.wasm"), b"\0asm garbage").unwrap();
    let batch = r#"[{"id": "1", "name": "read", "arguments": {"path": "Cargo.toml", "limit": 1}}]"#;
    // It might be a guard: without the operator's word, no call runs.
    let mut c = toolgate();
    c.args(["--plugins", dir.to_str().unwrap(), "run", "-"]);
    let out = with_stdin(c, batch);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("broken.wasm"), "{stderr}");
    assert!(stderr.contains("optional = true"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    // Marked optional: named, and the built-ins keep working.
    let config = dir.join("toolgate.toml");
    std::fs::write(&config, "[plugins.broken]\noptional = true\n").unwrap();
    let mut c = toolgate();
    c.args([
        "--plugins",
        dir.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "run",
        "-",
    ]);
    let out = with_stdin(c, batch);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("broken.wasm"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["isError"], false, "{v}");
}

#[test]
fn tools_prints_only_the_projection() {
    for (format, params) in [("json", "parameters"), ("anthropic", "input_schema")] {
        let out = toolgate()
            .args(["tools", "--format", format])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let names: Vec<_> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        assert!(names.contains(&"read".to_string()), "{names:?}");
        for t in v.as_array().unwrap() {
            let mut keys: Vec<_> = t.as_object().unwrap().keys().cloned().collect();
            keys.sort();
            let mut want = vec![
                "description".to_string(),
                "name".to_string(),
                params.to_string(),
            ];
            want.sort();
            assert_eq!(keys, want);
        }
    }
    let out = toolgate()
        .args(["tools", "--format", "openai"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["type"], "function");
    assert!(v[0]["function"]["parameters"].is_object());
}

#[test]
fn no_default_plugins_means_no_tools() {
    let out = toolgate()
        .args(["--no-default-plugins", "tools"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, serde_json::json!([]));
}

#[test]
fn check_reports_a_bad_file_and_fails() {
    let dir = temp("check");
    let f = dir.join("bad.wasm");
    std::fs::write(&f, b"\0asm\x01\0\0\0").unwrap();
    let out = toolgate()
        .args(["check", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("loaded:       no"), "{stdout}");
    assert!(
        stdout.contains("core WebAssembly module, not a component"),
        "{stdout}"
    );
}

#[test]
fn demo_shows_each_stage() {
    let out = toolgate().arg("demo").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "materialize",
        "pre-execute",
        "guard",
        "secrets-guard → DENY",
        "INVALID_ARGS",
        "UNKNOWN_TOOL",
        "body",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
}

#[test]
fn every_command_has_help() {
    for cmd in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["tools", "--help"],
        vec!["check", "--help"],
        vec!["demo", "--help"],
        vec!["plugins", "--help"],
        vec!["pull", "--help"],
        vec!["push", "--help"],
    ] {
        let out = toolgate().args(&cmd).output().unwrap();
        assert!(out.status.success(), "{cmd:?}");
        assert!(text(&out.stdout).contains("Usage:"), "{cmd:?}");
    }
}

/// A command's help shows the global options it uses, not those it ignores;
/// an ignored option given anyway draws a warning that names it.
#[test]
fn help_shows_only_the_global_options_a_command_uses() {
    let help = |cmd: &[&str]| {
        let out = toolgate().args(cmd).arg("--help").output().unwrap();
        assert!(out.status.success(), "{cmd:?}");
        text(&out.stdout)
    };
    for cmd in [&["run"][..], &["serve"], &["tools"], &["replay"]] {
        let h = help(cmd);
        for flag in ["--plugins", "--config", "--approve", "--no-default-plugins"] {
            assert!(h.contains(flag), "{cmd:?} help lacks {flag}:\n{h}");
        }
    }
    for cmd in [
        &["new"][..],
        &["audit"],
        &["audit", "verify"],
        &["sandbox", "check"],
    ] {
        let h = help(cmd);
        // `sandbox check` tries the paths the configuration names.
        let uses_config = cmd == ["sandbox", "check"];
        for flag in [
            "--plugins",
            "--config",
            "--approve",
            "--no-default-plugins",
            "--code-mode",
        ] {
            if flag == "--config" && uses_config {
                assert!(h.contains(flag), "{cmd:?} help lacks {flag}:\n{h}");
                continue;
            }
            assert!(
                !h.contains(flag),
                "{cmd:?} help shows {flag}, which it ignores:\n{h}"
            );
        }
        assert!(h.contains("--log-format"), "{cmd:?}: {h}");
    }
    let h = help(&["check"]);
    assert!(
        h.contains("--config") && !h.contains("--no-default-plugins"),
        "{h}"
    );
    for cmd in [&["pull"][..], &["push"]] {
        let h = help(cmd);
        assert!(
            h.contains("--config") && !h.contains("--plugins") && !h.contains("--approve"),
            "{cmd:?}: {h}"
        );
    }
    // Given anyway: a warning, and the command still runs.
    let out = toolgate()
        .args([
            "audit",
            "verify",
            "--config",
            "x.toml",
            "/nonexistent/audit.jsonl",
        ])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains("--config does nothing for `toolgate audit`"),
        "{err}"
    );
}

/// `toolgate keygen audit FILE` and `toolgate keygen sign KEY.pem` make the
/// private key (mode 0600) and its public half (FILE.pub, KEY.pub); their
/// help says what the key is for and where the public half goes; the old
/// spellings (`audit keygen`, `sign-keygen`) still work, hidden from the help.
#[test]
fn keygen_makes_the_audit_and_the_signing_keys() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp("keygen");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let keygen = |args: &[&str], file: &Path| {
        let out = toolgate().args(args).arg(file).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        out
    };
    // The audit key: 64 hex digits, the public key printed and in FILE.pub.
    for (args, name) in [
        (&["keygen", "audit"][..], "audit.key"),
        (&["audit", "keygen"][..], "old-audit.key"),
    ] {
        let key = dir.join(name);
        let out = keygen(args, &key);
        assert_eq!(mode(&key), 0o600, "{args:?}");
        let secret = std::fs::read_to_string(&key).unwrap();
        assert_eq!(secret.trim().len(), 64, "{args:?}: {secret}");
        let public = dir.join(format!("{name}.pub"));
        let printed = text(&out.stdout).trim().to_string();
        assert_eq!(printed.len(), 64, "{args:?}: {printed}");
        assert_eq!(
            std::fs::read_to_string(&public).unwrap().trim(),
            printed,
            "{args:?}"
        );
        // An existing key is never overwritten.
        let again = toolgate().args(args).arg(&key).output().unwrap();
        assert!(!again.status.success(), "{args:?}");
        assert_eq!(std::fs::read_to_string(&key).unwrap(), secret, "{args:?}");
    }
    // The signing key: PEM PKCS#8, its public key in KEY.pub.
    for (args, name) in [
        (&["keygen", "sign"][..], "sign"),
        (&["keygen", "sign", "--algorithm", "ed25519"][..], "sign-ed"),
        (&["sign-keygen"][..], "old-sign"),
    ] {
        let key = dir.join(format!("{name}.pem"));
        let out = keygen(args, &key);
        assert_eq!(mode(&key), 0o600, "{args:?}");
        let private = std::fs::read_to_string(&key).unwrap();
        assert!(
            private.starts_with("-----BEGIN PRIVATE KEY-----"),
            "{args:?}"
        );
        let public = std::fs::read_to_string(dir.join(format!("{name}.pub"))).unwrap();
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
        assert!(text(&out.stdout).contains("[trust] keys"), "{args:?}");
        let again = toolgate().args(args).arg(&key).output().unwrap();
        assert!(!again.status.success(), "{args:?}");
    }
    // The help: what each key is for, where its public half goes; the old
    // spellings are not shown.
    let help = |cmd: &[&str]| {
        let out = toolgate().args(cmd).arg("--help").output().unwrap();
        assert!(out.status.success(), "{cmd:?}");
        text(&out.stdout)
    };
    let h = help(&["keygen", "audit"]);
    for needle in ["audit record", "signing_key", "audit verify --key FILE.pub"] {
        assert!(
            h.contains(needle),
            "keygen audit help lacks {needle:?}:\n{h}"
        );
    }
    let h = help(&["keygen", "sign"]);
    for needle in ["push --sign-key", "[trust] keys", "verify --key KEY.pub"] {
        assert!(
            h.contains(needle),
            "keygen sign help lacks {needle:?}:\n{h}"
        );
    }
    let h = help(&["keygen"]);
    assert!(h.contains("audit") && h.contains("sign"), "{h}");
    assert!(!h.contains("--config") && !h.contains("--plugins"), "{h}");
    let h = help(&[]);
    assert!(h.contains("keygen") && !h.contains("sign-keygen"), "{h}");
    let h = help(&["audit"]);
    assert!(!h.contains("  keygen"), "{h}");
}

#[test]
fn json_logs_carry_the_call_and_stage() {
    let mut c = toolgate();
    c.args(["--log-format", "json", "run", "-"])
        .env("RUST_LOG", "toolgate=info");
    let out = with_stdin(
        c,
        r#"[{"id": "x1", "name": "read", "arguments": {"path": ".env"}}]"#,
    );
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    let guard_line = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["fields"]["stage"] == "guard")
        .unwrap_or_else(|| panic!("no guard event in {stderr}"));
    assert_eq!(guard_line["fields"]["denied"], true);
    assert_eq!(guard_line["span"]["id"], "x1");
}

#[test]
fn a_hundred_thousand_levels_of_nesting_is_a_clear_error_not_a_crash() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let batch = format!(r#"[{{"id": "1", "name": "read", "arguments": {{"path": {deep}}}}}]"#);
    let mut c = toolgate();
    c.args(["run", "-"]);
    let out = with_stdin(c, &batch);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("nesting deeper than"), "{stderr}");
    assert!(stderr.contains("/0/arguments/path"), "{stderr}");
}

/// Starts `c`, feeds it `input`, and waits at most `patience` for it to
/// exit (then kills it and fails).
fn run_bounded(mut c: Command, input: &str, patience: std::time::Duration) -> Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("toolgate starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let started = std::time::Instant::now();
    while started.elapsed() < patience {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "toolgate was still running after {patience:?}; stderr: {}",
        text(&out.stderr)
    );
}

fn mkfifo(p: &Path) {
    let status = Command::new("mkfifo").arg(p).status().expect("mkfifo runs");
    assert!(status.success());
}

#[test]
fn a_fifo_in_the_tree_neither_hangs_a_call_nor_the_process() {
    let dir = temp("fifo-tree");
    std::fs::write(dir.join("hello.txt"), "hello\n").unwrap();
    mkfifo(&dir.join("notes.txt"));
    let mut c = toolgate();
    c.current_dir(&dir).args(["run", "-"]);
    let out = run_bounded(
        c,
        r#"[
            {"id": "a", "name": "read", "arguments": {"path": "notes.txt"}},
            {"id": "b", "name": "grep", "arguments": {"pattern": "hello", "output_mode": "content"}},
            {"id": "c", "name": "list_dir", "arguments": {}},
            {"id": "d", "name": "glob", "arguments": {"pattern": "*"}}
        ]"#,
        std::time::Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["isError"], true, "{v}");
    assert!(
        v[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{v}"
    );
    assert!(
        v[1]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("hello.txt:1:hello")
    );
    assert!(
        v[2]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("notes.txt  (not a regular file)")
    );
    assert_eq!(v[3]["content"][0]["text"], "hello.txt");
}

// A component that opens a FIFO itself (the `probe` fixture): the test is
// in tests/tests/all/containment.rs, where the fixture is always built.

#[test]
fn an_unsafe_cache_directory_is_named_refused_and_the_command_still_works() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("toolgate-cli-open-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = toolgate()
        .env("TOOLGATE_CACHE_DIR", &dir)
        .args(["tools"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("compile cache {} is not used", dir.display()))
            && stderr.contains("writable by every user"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("is not used").count(),
        1,
        "said once: {stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_background_job_dies_with_the_command() {
    let mut c = toolgate();
    c.args(["--approve", "allow", "run", "-"]);
    let out = with_stdin(
        c,
        r#"[{"id": "1", "name": "bash", "arguments": {"command": "sleep 44.44", "run_in_background": true}}]"#,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("in the background as job-"),
        "{}",
        text(&out.stdout)
    );
    // The command has exited: its job must be gone with it.
    let alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .any(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains("44.44"))
                    .unwrap_or(false)
            })
    };
    let mut left = alive();
    for _ in 0..50 {
        if !left {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        left = alive();
    }
    assert!(!left, "a background job outlived toolgate");
}

/// A built-in component, as the host's build script built it, copied as
/// `NAME.wasm` into a fresh directory.
fn built_plugin(file: &str, name: &str) -> PathBuf {
    let built = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("../guests/wasm32-wasip2/guest")
        .join(file);
    assert!(built.exists(), "{} was not built", built.display());
    let wasm = temp(&format!("built-{name}")).join(format!("{name}.wasm"));
    std::fs::copy(&built, &wasm).unwrap();
    wasm
}

/// `check --call`: one call through one guard, on a stand-in tool; the
/// decision names the guard and its reason. `--repeat` times it.
#[test]
fn check_call_shows_what_a_guard_decided() {
    let wasm = built_plugin("plugin_secrets_guard.wasm", "secrets-guard");
    let call = wasm.with_file_name("call.json");
    std::fs::write(
        &call,
        r#"{"name": "read_file", "arguments": "{\"path\": \"app/.env\"}"}"#,
    )
    .unwrap();
    let out = toolgate()
        .arg("check")
        .arg(&wasm)
        .arg("--call")
        .arg(&call)
        .args(["--repeat", "20"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("decision:  denied at guard by `secrets-guard`"),
        "{stdout}"
    );
    assert!(stdout.contains("stand-in tool `read_file`"), "{stdout}");
    assert!(
        stdout.contains("warm:") && stdout.contains("fresh:"),
        "{stdout}"
    );
    // Allowed calls reach the stand-in tool.
    std::fs::write(
        &call,
        r#"{"name": "read_file", "arguments": {"path": "README.md"}}"#,
    )
    .unwrap();
    let out = toolgate()
        .args(["check", "--json"])
        .arg(&wasm)
        .arg("--call")
        .arg(&call)
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["record"]["isError"], false, "{j}");
    assert_eq!(j["callPath"], "sync", "{j}");
    // A call file that is not a call says why.
    std::fs::write(&call, r#"{"arguments": {}}"#).unwrap();
    let out = toolgate()
        .arg("check")
        .arg(&wasm)
        .arg("--call")
        .arg(&call)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("/name: expected required property"),
        "{}",
        text(&out.stderr)
    );
}

/// `check --conformance` on sound components passes; its report lists the
/// checks and the time per call.
#[test]
fn check_conformance_passes_sound_components() {
    for (file, name, export) in [
        (
            "plugin_secrets_guard.wasm",
            "secrets-guard",
            "guard on 48 nested arrays",
        ),
        ("plugin_fs_tools.wasm", "fs-tools", "tool/read parameters"),
        (
            "plugin_audit_log.wasm",
            "audit-log",
            "observer on a failing tool",
        ),
    ] {
        let wasm = built_plugin(file, name);
        // Loaded from a file rather than built in, fs-tools has no default
        // grant: its `bulk-read` seam needs a preopened one.
        let config = wasm.with_file_name("toolgate.toml");
        std::fs::write(
            &config,
            format!("[plugins.{name}.grants]\nfs = [{{ path = \".\", access = \"read-only\" }}]\n"),
        )
        .unwrap();
        let out = toolgate()
            .arg("--config")
            .arg(&config)
            .arg("check")
            .arg(&wasm)
            .arg("--conformance")
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {stdout}\n{}",
            text(&out.stderr)
        );
        assert!(stdout.contains(export), "{stdout}");
        assert!(
            stdout.contains(" 0 violation(s); time per call: median"),
            "{stdout}"
        );
    }
}

/// `check --conformance` finds a guard that traps, and exits 1.
#[test]
fn check_conformance_reports_a_trapping_policy() {
    let wasm = built_plugin("fixture_hostile_sync.wasm", "hostile");
    let config = wasm.with_file_name("toolgate.toml");
    std::fs::write(
        &config,
        "[plugins.hostile]\nvars = { MODE = \"check:trap\" }\n",
    )
    .unwrap();
    let out = toolgate()
        .arg("--config")
        .arg(&config)
        .arg("check")
        .arg(&wasm)
        .arg("--conformance")
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("VIOLATION") && stdout.contains("hostile check trap"),
        "{stdout}"
    );
}

/// The names `tools` printed.
fn tool_names(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("tools prints JSON");
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every global flag (`GlobalArgs`) takes effect the same way whether a
/// configuration file exists or not: a file that does not mention a setting
/// leaves the flag's value alone (`--code-mode` used to be dropped by the
/// file's absent `code_mode`, and direct calls ran again).
#[test]
fn every_global_flag_combines_with_a_configuration_file_the_same_way() {
    let plugin = built_plugin("fixture_tools.wasm", "tools");
    let plugin_dir = plugin.parent().unwrap().to_path_buf();
    for with_file in [false, true] {
        let dir = temp(&format!("global-flags-{with_file}"));
        let ctx = if with_file {
            "with ./toolgate.toml"
        } else {
            "without a configuration file"
        };
        if with_file {
            // Mentions none of the flags' settings.
            std::fs::write(dir.join("toolgate.toml"), "policy_timeout_ms = 3000\n").unwrap();
        }
        std::fs::write(dir.join("hello.txt"), "hello\n").unwrap();
        let cmd = || {
            let mut c = toolgate();
            c.current_dir(&dir);
            c
        };
        let batch = |c: Command, calls: &str| -> serde_json::Value {
            let out = with_stdin(c, calls);
            assert!(out.status.success(), "{ctx}: {}", text(&out.stderr));
            serde_json::from_slice(&out.stdout).expect("run prints JSON")
        };

        // --code-mode: only run_code is seen, and a direct call is refused.
        let names = tool_names(&cmd().args(["--code-mode", "tools"]).output().unwrap());
        assert_eq!(names, ["run_code"], "{ctx}");
        let mut c = cmd();
        c.args(["--code-mode", "run", "-"]);
        let v = batch(
            c,
            r#"[{"id": "1", "name": "read", "arguments": {"path": "hello.txt"}}]"#,
        );
        assert_eq!(v[0]["error"]["code"], "DENIED", "{ctx}: {v}");
        assert!(
            v[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Code Mode"),
            "{ctx}: {v}"
        );
        // Without it, the same call runs.
        let mut c = cmd();
        c.args(["run", "-"]);
        let v = batch(
            c,
            r#"[{"id": "1", "name": "read", "arguments": {"path": "hello.txt"}}]"#,
        );
        assert_eq!(v[0]["isError"], false, "{ctx}: {v}");

        // --no-default-plugins: no tools; --plugins DIR: that directory's.
        let names = tool_names(
            &cmd()
                .args(["--no-default-plugins", "tools"])
                .output()
                .unwrap(),
        );
        assert!(names.is_empty(), "{ctx}: {names:?}");
        let names = tool_names(
            &cmd()
                .args(["--no-default-plugins", "--plugins"])
                .arg(&plugin_dir)
                .arg("tools")
                .output()
                .unwrap(),
        );
        assert!(names.contains(&"echo".to_string()), "{ctx}: {names:?}");

        // --approve: bash asks; deny refuses it, allow runs it.
        let bash = r#"[{"id": "1", "name": "bash", "arguments": {"command": "echo ran"}}]"#;
        let mut c = cmd();
        c.args(["--approve", "deny", "run", "-"]);
        let v = batch(c, bash);
        assert_eq!(v[0]["isError"], true, "{ctx}: {v}");
        let mut c = cmd();
        c.args(["--approve", "allow", "run", "-"]);
        let v = batch(c, bash);
        assert_eq!(v[0]["isError"], false, "{ctx}: {v}");
        assert!(
            v[0]["content"][0]["text"].as_str().unwrap().contains("ran"),
            "{ctx}: {v}"
        );

        // --log-format json: every line on stderr is a JSON object.
        let mut c = cmd();
        c.args(["--log-format", "json", "run", "-"])
            .env("RUST_LOG", "toolgate=info");
        let out = with_stdin(
            c,
            r#"[{"id": "1", "name": "read", "arguments": {"path": "hello.txt"}}]"#,
        );
        let stderr = text(&out.stderr);
        assert!(!stderr.trim().is_empty(), "{ctx}: no log lines");
        for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                serde_json::from_str::<serde_json::Value>(line).is_ok(),
                "{ctx}: not JSON: {line}"
            );
        }

        // --no-compile-cache: nothing written to the cache; without it,
        // the plugin's native code is.
        let cache = std::env::temp_dir().join(format!(
            "toolgate-cli-flags-cache-{with_file}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&cache);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&cache)
                .unwrap();
        }
        let entries = || std::fs::read_dir(&cache).unwrap().count();
        let mut c = cmd();
        c.env("TOOLGATE_CACHE_DIR", &cache)
            .args(["--no-default-plugins", "--no-compile-cache", "--plugins"])
            .arg(&plugin_dir)
            .arg("tools");
        assert!(
            tool_names(&c.output().unwrap()).contains(&"echo".to_string()),
            "{ctx}"
        );
        assert_eq!(entries(), 0, "{ctx}: --no-compile-cache wrote the cache");
        let mut c = cmd();
        c.env("TOOLGATE_CACHE_DIR", &cache)
            .args(["--no-default-plugins", "--plugins"])
            .arg(&plugin_dir)
            .arg("tools");
        assert!(
            tool_names(&c.output().unwrap()).contains(&"echo".to_string()),
            "{ctx}"
        );
        assert!(
            entries() > 0,
            "{ctx}: the cache was not written without the flag"
        );
        let _ = std::fs::remove_dir_all(&cache);

        // --config FILE: that file, not ./toolgate.toml (which here would
        // turn Code Mode on).
        let other = dir.join("other.toml");
        std::fs::write(&other, "policy_timeout_ms = 3000\n").unwrap();
        let on = dir.join("on.toml");
        std::fs::write(&on, "code_mode = true\n").unwrap();
        let names = tool_names(
            &cmd()
                .arg("--config")
                .arg(&on)
                .arg("tools")
                .output()
                .unwrap(),
        );
        assert_eq!(names, ["run_code"], "{ctx}");
        let names = tool_names(
            &cmd()
                .arg("--config")
                .arg(&other)
                .arg("tools")
                .output()
                .unwrap(),
        );
        assert!(names.contains(&"read".to_string()), "{ctx}: {names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Issue 33: `check --call` exits non-zero when the tool's result is one
/// the host cannot accept (INVALID_RESULT) or the component trapped, and
/// says why; a sound result, or the tool's own error, exits 0.
#[test]
fn check_call_fails_when_the_result_is_invalid() {
    let wasm = built_plugin("fixture_tools.wasm", "tools");
    let call = wasm.with_file_name("call-invalid.json");
    let try_call = |json: &str| {
        std::fs::write(&call, json).unwrap();
        let out = toolgate()
            .arg("check")
            .arg(&wasm)
            .arg("--call")
            .arg(&call)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout))
    };
    let (code, stdout) = try_call(r#"{"name": "value", "arguments": {"mode": "schema"}}"#);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("problem:   the call ended in INVALID_RESULT"),
        "{stdout}"
    );
    let (code, stdout) = try_call(r#"{"name": "crash", "arguments": {}}"#);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("TRAPPED"), "{stdout}");
    let (code, stdout) = try_call(r#"{"name": "value", "arguments": {"mode": "valid"}}"#);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(!stdout.contains("problem:"), "{stdout}");
    let (code, stdout) =
        try_call(r#"{"name": "fail", "arguments": {"code": "NOPE", "message": "no"}}"#);
    assert_eq!(code, Some(0), "a tool's own error is an answer: {stdout}");
    // --json carries the same verdict.
    std::fs::write(
        &call,
        r#"{"name": "value", "arguments": {"mode": "schema"}}"#,
    )
    .unwrap();
    let out = toolgate()
        .args(["check", "--json"])
        .arg(&wasm)
        .arg("--call")
        .arg(&call)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        j["problems"][0]
            .as_str()
            .unwrap()
            .contains("INVALID_RESULT"),
        "{j}"
    );
}

/// Issue 33: a component's "No such file" for a path outside every grant
/// says "not granted" and names the grant line to add (here a tool's own
/// error, as a C or Python author would write it); the same failure inside
/// a grant is left as it is.
#[test]
fn a_missing_file_outside_every_grant_is_called_not_granted() {
    let wasm = built_plugin("fixture_tools.wasm", "tools");
    let call = wasm.with_file_name("call-not-granted.json");
    std::fs::write(
        &call,
        r#"{"name": "fail", "arguments": {"code": "IO", "message": "cannot open /srv/toolgate-nowhere/notes.txt: No such file or directory (os error 44)"}}"#,
    )
    .unwrap();
    let check = |config: Option<&str>| {
        let mut c = toolgate();
        if let Some(config) = config {
            let path = wasm.with_file_name("toolgate.toml");
            std::fs::write(&path, config).unwrap();
            c.arg("--config").arg(path);
        }
        let out = c
            .arg("check")
            .arg(&wasm)
            .arg("--call")
            .arg(&call)
            .output()
            .unwrap();
        (text(&out.stdout), text(&out.stderr))
    };
    let (stdout, stderr) = check(None);
    assert!(
        stdout.contains("not granted: `tools` has no fs grant, so it sees no file at all (/srv/toolgate-nowhere/notes.txt included)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"add fs = [{ path = "/srv/toolgate-nowhere", guest = "/srv/toolgate-nowhere", access = "read-only" }] under [plugins.tools.grants] in toolgate.toml"#),
        "{stdout}"
    );
    // The host's log line says it too.
    assert!(
        stderr.contains("a file access failed: not granted"),
        "{stderr}"
    );
    // Granted elsewhere: outside every grant, and which grants there are.
    let dir = wasm.parent().unwrap().canonicalize().unwrap();
    let (stdout, _) = check(Some(&format!(
        "[plugins.tools.grants]\nfs = [{{ path = {:?}, guest = \"/data\", access = \"read-only\" }}]\n",
        dir.display().to_string()
    )));
    assert!(
        stdout.contains("/srv/toolgate-nowhere/notes.txt is outside every fs grant of `tools`"),
        "{stdout}"
    );
    assert!(stdout.contains("as `/data`"), "{stdout}");
    // Inside the grant: really absent, no hint.
    std::fs::write(
        &call,
        r#"{"name": "fail", "arguments": {"code": "IO", "message": "cannot open /data/absent.txt: No such file or directory (os error 44)"}}"#,
    )
    .unwrap();
    let (stdout, _) = check(Some(&format!(
        "[plugins.tools.grants]\nfs = [{{ path = {:?}, guest = \"/data\", access = \"read-only\" }}]\n",
        dir.display().to_string()
    )));
    assert!(stdout.contains("absent.txt"), "{stdout}");
    assert!(!stdout.contains("not granted"), "{stdout}");
}

/// Issue 33: `check` names the author's files, never its private copy.
#[test]
fn check_names_the_authors_manifest_not_a_temporary_copy() {
    let wasm = built_plugin("plugin_secrets_guard.wasm", "no-rm");
    std::fs::write(wasm.with_extension("toml"), "priority = \"high\"\n").unwrap();
    let out = toolgate().arg("check").arg(&wasm).output().unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{all}");
    assert!(
        all.contains(&wasm.with_extension("toml").display().to_string()),
        "{all}"
    );
    assert!(!all.contains("toolgate-check-"), "{all}");
}

/// Issue 33: a manifest named `plugin.toml` beside `my-guard.wasm` is not
/// read; `check` and the plugin directory's loader both say so and name
/// the file it must be.
#[test]
fn a_misnamed_manifest_is_named_with_the_name_it_needs() {
    let wasm = built_plugin("plugin_secrets_guard.wasm", "my-guard");
    let dir = wasm.parent().unwrap().to_path_buf();
    std::fs::write(dir.join("plugin.toml"), "priority = 5\n").unwrap();
    // Not manifests: never mentioned.
    std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    std::fs::write(dir.join("empty.toml"), "").unwrap();
    let out = toolgate().arg("check").arg(&wasm).output().unwrap();
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("empty.toml"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "{} is not read: no plugin is named `plugin`",
            dir.join("plugin.toml").display()
        )) && stdout.contains("rename it to my-guard.toml"),
        "{stdout}"
    );
    assert!(!stdout.contains("Cargo.toml"), "{stdout}");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    // The directory loader warns the same way.
    let out = toolgate()
        .arg("--plugins")
        .arg(&dir)
        .arg("tools")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("plugin.toml is not read") && stderr.contains("rename it to my-guard.toml"),
        "{stderr}"
    );
    // Renamed, it is read, and nothing is said.
    std::fs::rename(dir.join("plugin.toml"), dir.join("my-guard.toml")).unwrap();
    let out = toolgate().arg("check").arg(&wasm).output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("the manifest my-guard.toml: priority"),
        "{stdout}"
    );
}

/// The tests' language server, in Python (`tests/lsp/fake_server.py`;
/// mode `hover`: answers `initialize`, and a hover with the position it
/// was asked about).
const FAKE_LANGUAGE_SERVER: &str = include_str!("../../tests/lsp/fake_server.py");

/// `run` reaches the `lsp` seam (a language server named in `[lsp]`
/// answers a hover through the built-in `lsp` tool, the symbol found on
/// its line), and `toolgate tools` says which servers `lsp` asks and why
/// there is no `pwsh`.
#[test]
fn run_asks_a_language_server_and_tools_says_which() {
    let dir = temp("lsp");
    std::fs::write(dir.join("server.py"), FAKE_LANGUAGE_SERVER).unwrap();
    std::fs::write(dir.join("a.fake"), "say hello\n").unwrap();
    std::fs::write(
        dir.join("toolgate.toml"),
        "[lsp]\npresets = false\n[lsp.servers.fake]\ncommand = \"/usr/bin/python3\"\nargs = [\"server.py\", \"hover\"]\nextensions = [\"fake\"]\n",
    )
    .unwrap();
    let mut c = toolgate();
    c.current_dir(&dir).args(["run", "-"]);
    let out = with_stdin(
        c,
        r#"[{"id": "h", "name": "lsp", "arguments": {"operation": "hover", "file": "a.fake", "line": 1, "symbol": "hello"}}]"#,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(
        v[0]["content"][0]["text"], "hover from the fake server at 0:4",
        "{v}"
    );

    let out = toolgate().current_dir(&dir).arg("tools").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("note: `lsp` asks these language servers: fake (/usr/bin/python3)"),
        "{stderr}"
    );
    assert!(stderr.contains("no `pwsh` tool"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `toolgate plugins` lists the skills of `[skills]` with the digest of
/// each `SKILL.md`, and each one not loaded with why.
#[test]
fn plugins_lists_the_skills_with_their_digests_and_what_was_refused() {
    let dir = temp("plugins-skills");
    let skills = dir.join("skills");
    std::fs::create_dir_all(skills.join("deploy")).unwrap();
    std::fs::write(
        skills.join("deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship it.\n---\nSteps.\n",
    )
    .unwrap();
    std::fs::create_dir_all(skills.join("broken")).unwrap();
    std::fs::write(skills.join("broken/SKILL.md"), "no front matter\n").unwrap();
    let config = dir.join("toolgate.toml");
    std::fs::write(
        &config,
        format!("[skills]\ndirs = [{:?}]\n", skills.display().to_string()),
    )
    .unwrap();
    let out = toolgate()
        .arg("--config")
        .arg(&config)
        .arg("plugins")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("skills (digest of SKILL.md, directory):"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("deploy "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("sha256:"), "{line}");
    assert!(
        stdout.contains("broken/SKILL.md: not loaded: does not start with a front matter"),
        "{stdout}"
    );
    let out = toolgate()
        .arg("--config")
        .arg(&config)
        .args(["plugins", "--json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["skills"][0]["name"], "deploy", "{json}");
    assert!(
        json["skills"][0]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(json["skillProblems"].as_array().unwrap().len(), 1, "{json}");

    // `run` loads it through the `skill` tool.
    let mut c = toolgate();
    c.current_dir(&dir).args(["run", "-"]);
    let out = with_stdin(
        c,
        r#"[{"id": "s", "name": "skill", "arguments": {"name": "deploy"}}]"#,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let loaded = v[0]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        loaded.starts_with("<skill name=\"deploy\" digest=\"sha256:") && loaded.contains("Steps."),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `toolgate goals`: the user pauses, resumes and clears the goal the
/// model set (`create_goal` through `run`); while paused, the model's
/// `update_goal` is refused; what cannot be done is said, exit 1.
#[test]
fn goals_are_paused_resumed_and_cleared_by_the_user_not_the_model() {
    let dir = temp("goals");
    let state = dir.join("state");
    let tg = || {
        let mut c = toolgate();
        c.current_dir(&dir).env("TOOLGATE_STATE_DIR", &state);
        c
    };
    let call = |name: &str, args: &str| {
        let mut c = tg();
        c.args(["run", "-"]);
        let out = with_stdin(
            c,
            &format!(r#"[{{"id": "g", "name": "{name}", "arguments": {args}}}]"#),
        );
        assert!(out.status.success(), "stderr: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        v[0].clone()
    };
    let goals = |args: &[&str]| tg().arg("goals").args(args).output().unwrap();

    let r = call("create_goal", r#"{"objective": "Green build"}"#);
    assert_ne!(r["isError"], true, "{r}");
    let out = goals(&[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("the global scope: Green build (active, set 0 min ago)"),
        "{}",
        text(&out.stdout)
    );

    let out = goals(&["pause"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = goals(&["show", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["goal"]["status"], "paused", "{v}");
    assert_eq!(v["goal"]["pausedFrom"], "active", "{v}");
    let r = call("update_goal", r#"{"status": "complete", "note": "done"}"#);
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("paused"),
        "{r}"
    );
    let out = goals(&["pause"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("already paused"),
        "{}",
        text(&out.stderr)
    );

    assert!(goals(&["resume"]).status.success());
    let r = call("update_goal", r#"{"status": "complete", "note": "done"}"#);
    assert_ne!(r["isError"], true, "{r}");
    let out = goals(&["clear"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&goals(&[]).stdout).trim(),
        "no goal is set for the global scope"
    );
    let out = goals(&["clear"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no goal is set for the global scope"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ask_user_question` in `toolgate run` on a terminal (a pseudo-terminal
/// of util-linux's `script`): the options are numbered, a number answers,
/// numbers answer a multi-select, and the last number is the user's own
/// words.
#[test]
fn run_on_a_terminal_asks_the_user_questions() {
    let script = Path::new("/usr/bin/script");
    assert!(
        script.exists(),
        "needs util-linux's `script` (Debian: bsdutils) to give `run` a terminal"
    );
    let dir = temp("questions-tty");
    let batch = dir.join("batch.json");
    std::fs::write(
        &batch,
        r#"[{"id": "q", "name": "ask_user_question", "arguments": {"questions": [
            {"header": "Stack", "question": "Which language?", "options": [
                {"label": "Rust", "description": "compiled"}, {"label": "Python", "description": "quick"}]},
            {"header": "Extras", "question": "Which extras?", "multiSelect": true, "options": [
                {"label": "CI", "description": "a workflow"}, {"label": "Docs", "description": "a README"}]}
        ]}}]"#,
    )
    .unwrap();
    let inner = format!(
        "{} run --compact {}",
        env!("CARGO_BIN_EXE_toolgate"),
        batch.display()
    );
    // `script` runs the command on a pseudo-terminal; our env, not the host's.
    let mut c = Command::new(script);
    c.current_dir(&dir)
        .args(["-q", "-e", "-c", &inner, "/dev/null"])
        .env("TOOLGATE_CACHE_DIR", cli_cache())
        .env("TOOLGATE_STATE_DIR", dir.join("state"))
        .env_remove("RUST_LOG");
    let out = with_stdin(c, "1\n1,3\nand a license\n");
    let all = text(&out.stdout).replace('\r', "");
    assert!(out.status.success(), "{all}\n{}", text(&out.stderr));
    assert!(all.contains("Stack: Which language?\n  1. Rust — compiled\n  2. Python — quick\n  3. Other (type your answer)"), "{all}");
    // The result follows the last prompt (on stderr, no newline).
    let line = all
        .find("[{\"id\"")
        .and_then(|at| all[at..].lines().next())
        .unwrap_or_else(|| panic!("no result line in {all}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        v[0]["content"][0]["text"],
        "The user answered:\n- Stack: Rust\n- Extras: CI; in their words: and a license\n",
        "{v}"
    );
    assert_eq!(v[0]["structuredContent"]["answeredBy"], "terminal", "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--approve` given wins over `[approval] mode` (issue 44): a
/// configuration that says `queue` does not put a call asked with
/// `--approve allow` in a queue nobody reads — it runs; without the flag,
/// the configuration's mode holds (a `run` with a queue and nobody deciding
/// ends at the queue's timeout, here 300 ms, as denied).
#[test]
fn the_approve_flag_wins_over_the_configurations_mode() {
    let dir = temp("approve-flag-wins");
    let config = dir.join("toolgate.toml");
    // The queue's store is the default, in the tests' state directory
    // (one in the workspace would be within the built-in tools' grant).
    std::fs::write(&config, "[approval]\nmode = \"queue\"\ntimeout_ms = 300\n").unwrap();
    let calls = r#"[{"id": "1", "name": "bash", "arguments": {"command": "echo flag-wins"}}]"#;
    let mut c = toolgate();
    c.arg("--config").arg(&config);
    c.args(["--approve", "allow", "run", "-"]);
    let out = with_stdin(c, calls);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("flag-wins\\n[exit code 0]"),
        "ran: {stdout}"
    );

    let mut c = toolgate();
    c.arg("--config").arg(&config);
    c.args(["run", "-"]);
    let out = with_stdin(c, calls);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !stdout.contains("flag-wins") && stdout.contains("\"isError\": true"),
        "the queue's answer (nobody decided): {stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 41, the session's own history through `run`: each `run` is a
/// session of the operator's; the next one finds the earlier one's calls
/// (and says which session is its own once it has calls).
#[test]
fn a_later_run_reads_an_earlier_runs_calls_with_the_history_tools() {
    let dir = temp("history");
    let state = dir.join("state");
    std::fs::write(
        dir.join("toolgate.toml"),
        "[plugins.history]\nenabled = true\n",
    )
    .unwrap();
    let call = |name: &str, args: &str| {
        let mut c = toolgate();
        c.current_dir(&dir).env("TOOLGATE_STATE_DIR", &state).args([
            "--config",
            "toolgate.toml",
            "run",
            "-",
        ]);
        let out = with_stdin(
            c,
            &format!(r#"[{{"id": "h", "name": "{name}", "arguments": {args}}}]"#),
        );
        assert!(out.status.success(), "stderr: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        v[0].clone()
    };
    let r = call("glob", r#"{"pattern": "run-one-mark*"}"#);
    assert_ne!(r["isError"], true, "{r}");
    let r = call("session_search", r#"{"query": "run-one-mark"}"#);
    assert_ne!(r["isError"], true, "{r}");
    let shown = r["content"][0]["text"].as_str().unwrap();
    assert!(
        shown.contains("glob {\"pattern\":\"run-one-mark*\"} → ok"),
        "{shown}"
    );
    let r = call("session_list", "{}");
    let shown = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(shown.lines().count(), 2, "two earlier runs: {shown}");
    assert!(!shown.contains("(this session)"), "{shown}");
}
