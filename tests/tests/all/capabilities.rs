//! Issue 6: grants and seams. A component reaches nothing it was not
//! granted — files (WASI preopens, and the known escape classes), the
//! environment, the network — and the shell/subprocess seams run under the
//! plugin's grant, in the sandbox.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate::CallRecord;
use toolgate_tests::{PluginDir, TempDir, fixtures, host, processes_with, run};

/// A small world on disk: a directory to grant, a secret outside it, and
/// symlinks planted inside the grant that point out of it.
struct World {
    _dir: TempDir,
    granted: PathBuf,
    outside: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = TempDir::new("world");
        let granted = dir.path().join("granted");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(granted.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(granted.join("hello.txt"), "hello").unwrap();
        std::fs::write(outside.join("secret.txt"), "the secret").unwrap();
        std::os::unix::fs::symlink("../outside", granted.join("link-out")).unwrap();
        std::os::unix::fs::symlink("../outside/secret.txt", granted.join("link-secret")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), granted.join("abs-link")).unwrap();
        World {
            granted: granted.canonicalize().unwrap(),
            outside: outside.canonicalize().unwrap(),
            _dir: dir,
        }
    }

    fn grant(&self, plugin: &str, access: &str, extra: &str) -> String {
        format!(
            "[plugins.{plugin}.grants]\nfs = [{{ path = {:?}, access = {access:?} }}]\n{extra}\n",
            self.granted.display().to_string()
        )
    }
}

async fn probe_host(config: &str) -> (toolgate::Toolgate, PluginDir) {
    let dir = PluginDir::new();
    dir.add("probe", fixtures::PROBE);
    let h = host(&dir, config).await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    (h, dir)
}

async fn fs(h: &toolgate::Toolgate, op: &str, path: &str, extra: Value) -> CallRecord {
    let mut args = json!({"op": op, "path": path});
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    run(h, "fs", args).await
}

fn denied(r: &CallRecord) -> bool {
    r.is_error && r.error.as_ref().unwrap().stage.to_string() == "body"
}

#[tokio::test]
async fn without_a_grant_a_component_reaches_no_host_file() {
    let w = World::new();
    let (h, _d) = probe_host("").await;
    for (op, path) in [
        ("read", "hello.txt"),
        ("read", "/etc/passwd"),
        ("read", w.outside.join("secret.txt").to_str().unwrap()),
        ("list", "."),
        ("list", "/"),
        ("metadata", "/etc/hostname"),
        ("write", "new.txt"),
        ("write", "/tmp/toolgate-should-not-exist"),
        ("create_dir", "d"),
    ] {
        let r = fs(&h, op, path, json!({"data": "x"})).await;
        assert!(denied(&r), "{op} {path} was allowed: {r:?}");
    }
    assert!(!Path::new("/tmp/toolgate-should-not-exist").exists());
}

#[tokio::test]
async fn a_read_only_grant_reads_and_never_writes() {
    let w = World::new();
    let (h, _d) = probe_host(&w.grant("probe", "read-only", "")).await;
    assert_eq!(fs(&h, "read", "hello.txt", json!({})).await.text(), "hello");
    assert_eq!(fs(&h, "list", "sub", json!({})).await.text(), "");
    for (op, path) in [
        ("write", "new.txt"),
        ("append", "hello.txt"),
        ("create_dir", "d"),
        ("remove", "hello.txt"),
        ("set_len", "hello.txt"),
        ("rename", "hello.txt"),
    ] {
        let r = fs(&h, op, path, json!({"data": "x", "target": "renamed.txt"})).await;
        assert!(
            denied(&r),
            "{op} {path} was allowed under a read-only grant: {r:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.granted.join("hello.txt")).unwrap(),
        "hello"
    );
    assert!(!w.granted.join("new.txt").exists());
}

/// The host answers `metadata-hash-at` (a stat, which no FIFO can block)
/// in place instead of on its blocking pool; the inode numbers a component
/// sees stay the ones wasmtime-wasi gives an open file, and the shortcut
/// refuses what wasmtime-wasi refuses.
#[tokio::test]
async fn stats_answered_in_place_agree_with_wasi_and_stay_inside() {
    let w = World::new();
    let (h, _d) = probe_host(&w.grant("probe", "read-only", "")).await;
    for path in ["hello.txt", "sub/../hello.txt"] {
        let r = fs(&h, "inodes", path, json!({})).await;
        assert!(!r.is_error, "{r:?}");
        let inos: Vec<u64> = r.text().split(' ').map(|n| n.parse().unwrap()).collect();
        assert!(inos[0] != 0, "{inos:?}");
        assert!(inos.iter().all(|i| *i == inos[0]), "{path}: {inos:?}");
    }
    // By path, out of the preopen: refused, as before.
    for path in [
        "link-secret",
        "../outside/secret.txt",
        "link-out/secret.txt",
    ] {
        let r = fs(&h, "metadata", path, json!({})).await;
        assert!(denied(&r), "{path} was reached: {r:?}");
    }
}

#[tokio::test]
async fn a_read_write_grant_writes_inside_only() {
    let w = World::new();
    let (h, _d) = probe_host(&w.grant("probe", "read-write", "")).await;
    let r = fs(&h, "write", "sub/new.txt", json!({"data": "made by wasm"})).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(w.granted.join("sub/new.txt")).unwrap(),
        "made by wasm"
    );
}

#[tokio::test]
async fn the_known_wasi_escape_classes_are_closed() {
    let w = World::new();
    let (h, _d) = probe_host(&w.grant("probe", "read-write", "")).await;
    let secret = w.outside.join("secret.txt").display().to_string();
    for (op, path, target) in [
        // `..` out of the preopen, directly and after a detour.
        ("read", "../outside/secret.txt", None),
        ("read", "sub/../../outside/secret.txt", None),
        // An absolute host path.
        ("read", secret.as_str(), None),
        // Symlinks planted inside the grant, relative and absolute.
        ("read", "link-secret", None),
        ("read", "link-out/secret.txt", None),
        ("read", "abs-link", None),
        ("list", "link-out", None),
        // Trailing slashes.
        ("list", "link-out/", None),
        ("read", "hello.txt/", None),
        ("list", "../", None),
        // Writes through a planted symlink, links and renames out.
        ("write", "link-out/planted.txt", None),
        ("write", "link-secret", None),
        ("hard_link", "stolen.txt", Some("../outside/secret.txt")),
        ("rename", "hello.txt", Some("../outside/moved.txt")),
        ("rename", "hello.txt", Some("link-out/moved.txt")),
    ] {
        let r = fs(&h, op, path, json!({"data": "pwned", "target": target})).await;
        assert!(denied(&r), "{op} {path} {target:?} escaped: {r:?}");
        assert!(
            !r.text().contains("the secret"),
            "{op} {path} read the secret"
        );
    }
    // A hard link to a planted symlink links the symlink itself, which
    // still points out of the preopen: reading through it stays refused.
    let _ = fs(
        &h,
        "hard_link",
        "stolen2.txt",
        json!({"target": "link-secret"}),
    )
    .await;
    let r = fs(&h, "read", "stolen2.txt", json!({})).await;
    assert!(denied(&r) && !r.text().contains("the secret"), "{r:?}");
    assert_eq!(
        std::fs::read_to_string(w.outside.join("secret.txt")).unwrap(),
        "the secret"
    );
    assert!(!w.outside.join("planted.txt").exists());
    assert!(!w.outside.join("moved.txt").exists());
    assert!(!w.granted.join("stolen.txt").exists());
    assert!(w.granted.join("hello.txt").exists());
}

/// The `bulk-read` seam, called by a component written with plain
/// wit-bindgen exactly as a hostile one would: it reads what the preopen
/// gives and nothing else, never waits on a FIFO, and the host's caps hold
/// whatever limits the guest asks for.
#[tokio::test]
async fn the_bulk_read_seam_reads_only_what_the_preopen_gives() {
    let w = World::new();
    let made = std::process::Command::new("mkfifo")
        .arg(w.granted.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::write(w.granted.join("big"), vec![b'x'; 17 << 20]).unwrap();
    let dir = PluginDir::new();
    dir.add("reader", fixtures::BULK_READER);
    let h = host(&dir, &w.grant("reader", "read-only", "")).await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    // A limit of `None` is `u64::MAX` in the guest.
    let read = |paths: Vec<String>, max_file: Option<u64>, max_total: Option<u64>, repeat: u64| {
        let h = &h;
        async move {
            let mut args = json!({"paths": paths, "repeat": repeat});
            if let Some(n) = max_file {
                args["max_file"] = json!(n);
            }
            if let Some(n) = max_total {
                args["max_total"] = json!(n);
            }
            let r = run(h, "read", args).await;
            assert!(!r.is_error, "{r:?}");
            serde_json::from_str::<Value>(&r.text()).unwrap()
        }
    };
    let secret = w.outside.join("secret.txt").display().to_string();
    let paths: Vec<String> = [
        "hello.txt",
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        secret.as_str(),
        "link-secret",
        "link-out/secret.txt",
        "abs-link",
        "fifo",
        "sub",
        "hello.txt/",
        "big",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let started = Instant::now();
    let v = read(paths.clone(), None, None, 1).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a FIFO was waited on"
    );
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), paths.len(), "{v}");
    assert_eq!(results[0]["len"], 5, "{v}");
    for (i, path) in paths.iter().enumerate().skip(1) {
        assert!(results[i]["error"].is_string(), "`{path}` was read: {v}");
    }
    assert!(
        results[10]["error"].as_str().unwrap().contains("16777216"),
        "17 MiB is over the host's 16 MiB cap, whatever the guest asks: {v}"
    );
    // 100 000 paths: the host answers the first 4096.
    let v = read(vec!["hello.txt".into()], None, None, 100_000).await;
    assert_eq!(v["asked"], 100_000);
    assert_eq!(v["results"].as_array().unwrap().len(), 4096);
    // The guest's total limit stops the list, after at least one file.
    let v = read(vec!["hello.txt".into()], Some(100), Some(12), 10).await;
    assert_eq!(v["results"].as_array().unwrap().len(), 2, "{v}");
    // Batches: two may be pending at once; a third traps, and the host
    // goes on.
    let r = run(&h, "read", json!({"paths": ["hello.txt"], "batches": 2})).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(serde_json::from_str::<Value>(&r.text()).unwrap()["read"], 2);
    let r = run(&h, "read", json!({"paths": ["hello.txt"], "batches": 3})).await;
    assert!(
        r.is_error && r.text().contains("third `bulk-read` batch"),
        "{r:?}"
    );
    let r = run(&h, "read", json!({"paths": ["hello.txt"], "batches": 1})).await;
    assert!(!r.is_error, "{r:?}");
    // Without a preopened grant the component does not load, and the
    // problem names the grant to add.
    let h = host(&dir, "").await;
    let p = h
        .problems()
        .into_iter()
        .find(|p| p.plugin == "reader")
        .expect("refused without a grant");
    assert!(
        p.message.contains("`bulk-read` seam") && p.message.contains("access = \"read-only\""),
        "{p}"
    );
}

#[tokio::test]
async fn environment_variables_are_granted_by_name_only() {
    let home = std::env::var("HOME").expect("HOME is set");
    let (h, _d) = probe_host("").await;
    assert_eq!(run(&h, "env", json!({"name": "HOME"})).await.text(), "");
    assert_eq!(run(&h, "env", json!({"name": "PATH"})).await.text(), "");
    let (h, _d) = probe_host(
        "[plugins.probe]\nvars = { MODE = \"strict\" }\n[plugins.probe.grants]\nenv = [\"HOME\"]\n",
    )
    .await;
    assert_eq!(run(&h, "env", json!({"name": "HOME"})).await.text(), home);
    assert_eq!(
        run(&h, "env", json!({"name": "MODE"})).await.text(),
        "strict"
    );
    assert_eq!(run(&h, "env", json!({"name": "PATH"})).await.text(), "");
}

/// A loopback server answering `pong` to each connection.
fn pong_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut line = String::new();
            let _ = std::io::BufReader::new(&stream).read_line(&mut line);
            let _ = stream.write_all(b"pong");
        }
    });
    port
}

#[tokio::test]
async fn the_network_is_granted_by_destination() {
    let port = pong_server();
    let other = pong_server();
    let addr = format!("127.0.0.1:{port}");
    let (h, _d) = probe_host("").await;
    let r = run(&h, "connect", json!({"addr": addr})).await;
    assert!(denied(&r), "connected without a grant: {r:?}");
    let (h, _d) = probe_host(&format!(
        "[plugins.probe.grants]\nnetwork = [\"127.0.0.1:{port}\"]\n"
    ))
    .await;
    assert_eq!(
        run(&h, "connect", json!({"addr": addr})).await.text(),
        "pong"
    );
    let r = run(&h, "connect", json!({"addr": format!("127.0.0.1:{other}")})).await;
    assert!(denied(&r), "reached a port that was not granted: {r:?}");
}

#[tokio::test]
async fn a_component_importing_an_ungranted_seam_does_not_load() {
    let dir = PluginDir::new();
    dir.add("seams", fixtures::SEAMS);
    dir.add("tools", fixtures::TOOLS);
    let h = host(&dir, "").await;
    let p = h.problems();
    let seams = p
        .iter()
        .find(|p| p.plugin == "seams")
        .expect("seams is refused");
    // Every seam missing is named at once, with every line that grants it.
    assert!(
        seams
            .message
            .contains("`shell` and `subprocess` seams, which are not granted"),
        "{seams}"
    );
    assert!(
        seams
            .message
            .contains("`shell = true` and `subprocess = [\"<program>\", ...]`")
            && seams.message.contains("[plugins.seams.grants]"),
        "{seams}"
    );
    assert!(
        h.generation().tools.contains_key("echo"),
        "the other plugin still serves"
    );
    // Granting one seam is not enough: it imports both.
    let h = host(&dir, "[plugins.seams.grants]\nshell = true\n").await;
    let seams = h
        .problems()
        .into_iter()
        .find(|p| p.plugin == "seams")
        .expect("still refused");
    assert!(
        seams
            .message
            .contains("`subprocess` seam, which is not granted"),
        "{seams}"
    );
}

/// A host with the `seams` fixture (shell, `echo`/`sleep`, `HOME`) and the
/// timeout wrapper; `extra_grants` goes into its grant table, `extra_config`
/// after it.
async fn seams_host(
    w: &World,
    extra_grants: &str,
    extra_config: &str,
) -> (toolgate::Toolgate, PluginDir) {
    let dir = PluginDir::new();
    dir.add("seams", fixtures::SEAMS);
    dir.add("timeout", fixtures::PLUGIN_TIMEOUT);
    let config = w.grant(
        "seams",
        "read-write",
        &format!(
            "shell = true\nsubprocess = [\"echo\", \"sleep\"]\nenv = [\"HOME\"]\n{extra_grants}"
        ),
    ) + extra_config;
    let h = host(&dir, &config).await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    (h, dir)
}

fn ran(r: &CallRecord) -> Value {
    assert!(!r.is_error, "{r:?}");
    serde_json::from_str(&r.text()).expect("the fixture returns JSON")
}

#[tokio::test]
async fn the_shell_seam_runs_in_the_granted_directory_with_a_clean_environment() {
    let w = World::new();
    let (h, _d) = seams_host(&w, "", "").await;
    let v = ran(&run(
        &h,
        "sh",
        json!({"command": "echo hi; pwd; echo \"home=$HOME path=$PATH\"; env | wc -l"}),
    )
    .await);
    let out = v["stdout"].as_str().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "unexpected output: {v}");
    assert_eq!(lines[0], "hi");
    assert_eq!(lines[1], w.granted.display().to_string());
    assert!(
        lines[2].starts_with(&format!(
            "home={} path=/usr/local/bin",
            std::env::var("HOME").unwrap()
        )),
        "{out}"
    );
    assert!(
        lines[3].trim().parse::<u32>().unwrap() <= 6,
        "environment leaked: {out}"
    );
    assert_eq!(v["exit_code"], 0);
    let v = ran(&run(&h, "sh", json!({"command": "pwd", "workdir": "sub"})).await);
    assert_eq!(
        v["stdout"].as_str().unwrap().trim(),
        w.granted.join("sub").display().to_string()
    );
}

#[tokio::test]
async fn the_shell_seam_is_sandboxed() {
    let w = World::new();
    let (h, _d) = seams_host(&w, "", "").await;
    let secret = w.outside.join("secret.txt");
    let v = ran(&run(
        &h,
        "sh",
        json!({"command": format!("cat {}", secret.display())}),
    )
    .await);
    assert_ne!(v["exit_code"], 0);
    assert!(!v["stdout"].as_str().unwrap().contains("the secret"));
    let v = ran(&run(&h, "sh", json!({"command": format!("echo pwned > {}/planted; echo pwned > {}", w.outside.display(), secret.display())})).await);
    assert_ne!(v["exit_code"], 0);
    assert!(!w.outside.join("planted").exists());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "the secret");
    let v = ran(&run(
        &h,
        "sh",
        json!({"command": "echo made > inside.txt && cat inside.txt"}),
    )
    .await);
    assert_eq!(v["stdout"], "made\n");
    assert!(w.granted.join("inside.txt").exists());
}

#[tokio::test]
async fn seam_requests_outside_the_grant_are_refused() {
    let w = World::new();
    let (h, _d) = seams_host(&w, "", "").await;
    let code = |r: &CallRecord| r.code().unwrap_or("OK").to_string();
    assert_eq!(
        code(&run(&h, "sh", json!({"command": "pwd", "workdir": "../outside"})).await),
        "INVALID_INPUT"
    );
    assert_eq!(
        code(&run(&h, "sh", json!({"command": "pwd", "workdir": "link-out"})).await),
        "INVALID_INPUT"
    );
    assert_eq!(
        code(&run(&h, "sh", json!({"command": "pwd", "workdir": "/etc"})).await),
        "INVALID_INPUT"
    );
    let r = run(
        &h,
        "sh",
        json!({"command": "true", "env": {"SECRET_TOKEN": "x"}}),
    )
    .await;
    assert_eq!(code(&r), "PERMISSION_DENIED");
    assert!(r.text().contains("SECRET_TOKEN"), "{r:?}");
    let v = ran(&run(
        &h,
        "sh",
        json!({"command": "echo $HOME", "env": {"HOME": "/custom"}}),
    )
    .await);
    assert_eq!(v["stdout"], "/custom\n");
    let v = ran(&run(&h, "exec", json!({"program": "echo", "args": ["a", "b c"]})).await);
    assert_eq!(v["stdout"], "a b c\n");
    let r = run(
        &h,
        "exec",
        json!({"program": "cat", "args": ["/etc/passwd"]}),
    )
    .await;
    assert_eq!(code(&r), "PERMISSION_DENIED");
    assert!(r.text().contains("`echo`, `sleep`"), "{r:?}");
}

#[tokio::test]
async fn seam_timeouts_and_output_caps_hold() {
    let w = World::new();
    let (h, _d) = seams_host(&w, "spawn_limits = { output_kb = 1 }\n", "").await;
    let started = Instant::now();
    let v = ran(&run(
        &h,
        "sh",
        json!({"command": "sleep 10 & sleep 10; echo never", "timeout_ms": 200}),
    )
    .await);
    assert_eq!(v["timed_out"], true);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!v["stdout"].as_str().unwrap().contains("never"));
    let v = ran(&run(
        &h,
        "sh",
        json!({"command": "head -c 100000 /dev/zero | tr '\\\\0' x"}),
    )
    .await);
    assert_eq!(v["stdout_truncated"], true);
    assert_eq!(v["stdout"].as_str().unwrap().len(), 1024);
}

#[tokio::test]
async fn a_call_deadline_kills_the_spawned_process_tree() {
    let w = World::new();
    let (h, _d) = seams_host(&w, "", "[tools.sh]\ntimeout_ms = 300\n").await;
    let started = Instant::now();
    let r = run(
        &h,
        "sh",
        json!({"command": "sleep 31.77 & sleep 31.78; echo never"}),
    )
    .await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The body was dropped at its deadline; the whole group died with it.
    let mut left = processes_with("31.7");
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = processes_with("31.7");
    }
    assert!(left.is_empty(), "processes survived the call: {left:?}");
}

#[tokio::test]
async fn the_bash_tool_runs_sandboxed_under_its_grant() {
    let w = World::new();
    let dir = PluginDir::new();
    dir.add("bash", fixtures::PLUGIN_BASH);
    let h = host(&dir, &w.grant("bash", "read-write", "shell = true")).await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let r = run(
        &h,
        "bash",
        json!({"command": "echo hello > out.txt && cat out.txt && pwd"}),
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    assert!(
        r.text()
            .starts_with(&format!("hello\n{}\n", w.granted.display())),
        "{}",
        r.text()
    );
    assert!(r.text().ends_with("[exit code 0]"));
    let r = run(
        &h,
        "bash",
        json!({"command": format!("cat {}/secret.txt", w.outside.display())}),
    )
    .await;
    assert!(!r.text().contains("the secret"), "{}", r.text());
    assert!(!r.text().ends_with("[exit code 0]"), "{}", r.text());
    assert_eq!(r.code(), Some("EXIT_STATUS"), "{r:?}");
    let r = run(&h, "bash", json!({"command": "sleep 5", "timeoutMs": 100})).await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(
        r.text().contains("[killed: timed out after 100 ms]"),
        "{}",
        r.text()
    );
    // Without the shell grant the plugin does not load at all.
    let h = host(&dir, &w.grant("bash", "read-write", "")).await;
    assert!(
        h.problems()
            .iter()
            .any(|p| p.plugin == "bash" && p.message.contains("shell"))
    );
    assert!(!h.generation().tools.contains_key("bash"));
}
