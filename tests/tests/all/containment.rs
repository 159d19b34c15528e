//! Issue 9, escapes through the `bash` tool and the file tools: nothing the
//! host trusts is within reach of what it runs. Each test is the escape as
//! a real call through the real pipeline (real components, real sandboxed
//! processes) and its legitimate twin, which must still work.
//!
//! 1. the compile cache (native code): verified entries, safe directories,
//!    never inside a grant;
//! 2. the host's configuration, plugin directories and cache stay read-only
//!    inside a read-write grant (and an absent configuration stays absent);
//! 3. no setuid/setgid files; 4. no TCP Fast Open past the port rules;
//! 5. a FIFO cannot hang the host; 6. `.git` is read-only;
//! 7. the secrets guard resolves symlinks and globs, and `grep` skips secrets.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::pipeline::approval::AllowAll;
use toolgate::plugin::RuntimeOptions;
use toolgate::plugin::cache::CompileCache;
use toolgate::{CallRecord, HostConfig, Toolgate};
use toolgate_tests::{PluginDir, Tree, fixtures, host, run, test_runtime};

/// The built-in plugins with their default grants on `workdir`, an
/// approver that allows (bash asks), and the configuration at `config` if
/// there is one there.
async fn builtin_host(workdir: &Path, config: Option<&Path>, options: RuntimeOptions) -> Toolgate {
    let config = match config {
        Some(p) => HostConfig::load(p).expect("config loads"),
        None => HostConfig::default(),
    };
    let h = Toolgate::builder()
        .runtime_options(options)
        .workdir(workdir)
        .config(config)
        .approver(Arc::new(AllowAll))
        .build()
        .await
        .expect("host builds");
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    h
}

async fn bash(h: &Toolgate, command: &str) -> String {
    let r = run(h, "bash", json!({ "command": command })).await;
    // A command that exits non-zero is a failure (`EXIT_STATUS`) whose
    // content still carries its output and status.
    assert!(
        !r.is_error || r.code() == Some("EXIT_STATUS"),
        "bash itself failed: {r:?}"
    );
    r.text()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode()
}

// ---- 1. the compile cache ------------------------------------------------

/// The `*.tgc` entries of a cache directory.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "tgc"));
    v.sort();
    v
}

fn with_cache(dir: &Path) -> RuntimeOptions {
    RuntimeOptions {
        cache_dir: Some(dir.to_path_buf()),
        ..toolgate_tests::test_runtime()
    }
}

async fn host_with(plugins: &[(&str, &str)], cache: &Path, config: &str) -> Toolgate {
    let dir = PluginDir::new();
    for (name, fixture) in plugins {
        dir.add(name, fixture);
    }
    Toolgate::builder()
        .runtime_options(with_cache(cache))
        .builtin_plugins(false)
        .plugin_dir(dir.path())
        .config(HostConfig::parse(config, "test config").unwrap())
        .build()
        .await
        .expect("host builds")
}

#[tokio::test]
async fn a_cache_entry_swapped_for_other_code_is_not_executed() {
    let t = Tree::new("cache-swap");
    let cache = t.join("cache");
    // Entry A (the `tools` fixture), then entry B (the `guard` fixture).
    let h = host_with(&[("tools", fixtures::TOOLS)], &cache, "").await;
    assert_eq!(h.compile_cache().unwrap().refusal(), None);
    let a = entries(&cache);
    assert_eq!(a.len(), 1, "{a:?}");
    drop(h);
    host_with(&[("guard", fixtures::GUARD)], &cache, "").await;
    let b: Vec<PathBuf> = entries(&cache).into_iter().filter(|p| *p != a[0]).collect();
    assert_eq!(b.len(), 1);
    // The attacker writes B's valid, MAC'd code under A's name: as if they
    // had rewritten A's machine code.
    let planted = std::fs::read(&b[0]).unwrap();
    std::fs::write(&a[0], &planted).unwrap();
    let h = host_with(&[("tools", fixtures::TOOLS)], &cache, "").await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let r = run(&h, "echo", json!({"text": "still the tools component"})).await;
    assert!(
        !r.is_error && r.text().contains("still the tools component"),
        "{r:?}"
    );
    // The entry was recompiled and replaced.
    assert_ne!(std::fs::read(&a[0]).unwrap(), planted);
    // Rewriting bytes in the middle of the code (the issue's attack).
    let mut bytes = std::fs::read(&a[0]).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0xff;
    }
    std::fs::write(&a[0], &bytes).unwrap();
    let h = host_with(&[("tools", fixtures::TOOLS)], &cache, "").await;
    let r = run(&h, "echo", json!({"text": "ok"})).await;
    assert!(!r.is_error, "{r:?}");
    assert_ne!(std::fs::read(&a[0]).unwrap(), bytes);
}

/// Captures what tracing writes on this thread.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn take(&self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut *self.0.lock().unwrap())).into_owned()
    }
}

#[test]
fn a_tampered_entry_is_logged_recompiled_and_a_good_entry_hits() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let t = Tree::new("cache-log");
    let runtime = toolgate::plugin::Runtime::new(RuntimeOptions {
        cache_dir: None,
        ..toolgate_tests::test_runtime()
    })
    .unwrap();
    let engine = &runtime.engine;
    let wasm = std::fs::read(fixtures::TOOLS).unwrap();
    let cache = CompileCache::new(t.join("cache"), Some(t.join("state")));
    let started = Instant::now();
    let first = cache.load_or_compile(engine, &wasm).unwrap();
    let miss = started.elapsed();
    let started = Instant::now();
    let hit = cache.load_or_compile(engine, &wasm).unwrap();
    let hit_time = started.elapsed();
    println!("compile (miss): {miss:?}, verified cache hit: {hit_time:?}");
    assert!(
        hit_time * 4 < miss,
        "a verified hit must still save most of the compile: {hit_time:?} vs {miss:?}"
    );
    assert_eq!(
        first.serialize().unwrap(),
        hit.serialize().unwrap(),
        "the hit is the same code"
    );
    assert!(captured.take().is_empty(), "a good entry logs nothing");
    // What a start asks before it decides to load a file at once: only an
    // entry that verifies counts. The same entry under another state
    // directory's key does not (it would compile: it is deferred).
    assert!(cache.has_verified_entry(engine, &wasm));
    let stranger = CompileCache::new(t.join("cache"), Some(t.join("other-state")));
    assert_eq!(stranger.refusal(), None);
    assert!(!stranger.has_verified_entry(engine, &wasm));
    let entry = &entries(&t.join("cache"))[0];
    let mut bytes = std::fs::read(entry).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 1;
    std::fs::write(entry, &bytes).unwrap();
    assert!(!cache.has_verified_entry(engine, &wasm), "tampered");
    let again = cache.load_or_compile(engine, &wasm).unwrap();
    let log = captured.take();
    assert!(
        log.contains("failed verification") && log.contains(&entry.display().to_string()),
        "{log}"
    );
    assert_eq!(again.serialize().unwrap(), first.serialize().unwrap());
    // Replaced by a good entry: the next load is a quiet hit.
    cache.load_or_compile(engine, &wasm).unwrap();
    assert!(captured.take().is_empty());
}

#[tokio::test]
async fn unsafe_cache_directories_are_refused_and_the_host_runs_without() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new("cache-unsafe");
    std::fs::create_dir_all(t.join("open")).unwrap();
    std::fs::set_permissions(t.join("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir_all(t.join("real")).unwrap();
    std::os::unix::fs::symlink(t.join("real"), t.join("link")).unwrap();
    let mut cases = vec![
        (t.join("open"), "writable by every user"),
        (t.join("link"), "is a symlink"),
    ];
    std::fs::create_dir_all(t.join("theirs")).unwrap();
    let chown = std::process::Command::new("chown")
        .args(["65534:65534", t.join("theirs").to_str().unwrap()])
        .status();
    if chown.is_ok_and(|s| s.success()) {
        cases.push((t.join("theirs"), "owned by uid 65534"));
    } else {
        println!("not root: the foreign-owner case is checked by the unit tests only");
    }
    for (dir, why) in cases {
        let h = host_with(&[("tools", fixtures::TOOLS)], &dir, "").await;
        let refusal = h.compile_cache().unwrap().refusal().expect("refused");
        assert!(refusal.contains(why), "{}: {refusal}", dir.display());
        // It still serves, and wrote nothing there.
        assert!(!run(&h, "echo", json!({"text": "x"})).await.is_error);
        assert!(entries(&dir).is_empty(), "{}", dir.display());
    }
    assert!(entries(&t.join("real")).is_empty());
}

#[tokio::test]
async fn a_cache_inside_a_grant_is_refused_and_read_only_to_bash() {
    let t = Tree::new("cache-granted");
    let cache = t.join("cache");
    let h = builtin_host(&t.path, None, with_cache(&cache)).await;
    let refusal = h.compile_cache().unwrap().refusal().expect("refused");
    assert!(
        refusal.contains("plugin `")
            && refusal.contains(&t.path.display().to_string())
            && refusal.contains("TOOLGATE_CACHE_DIR"),
        "{refusal}"
    );
    assert!(entries(&cache).is_empty());
    // And what runs in the sandbox cannot plant anything there either.
    let out = bash(
        &h,
        "echo evil > cache/planted.tgc; echo ok > ours.txt; cat ours.txt",
    )
    .await;
    assert!(
        out.contains("Read-only file system") && out.contains("ok\n"),
        "{out}"
    );
    assert!(!cache.join("planted.tgc").exists());
}

// ---- 2. authority out of reach -------------------------------------------

#[tokio::test]
async fn the_configuration_and_plugin_directories_are_read_only_to_bash() {
    let t = Tree::new("authority");
    t.write("toolgate.toml", "[plugins.bash]\npriority = 50\n");
    let plugins = t.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(fixtures::TOOLS, plugins.join("tools.wasm")).unwrap();
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(&t.path)
        .plugin_dir(&plugins)
        .config(HostConfig::load(&t.join("toolgate.toml")).unwrap())
        .approver(Arc::new(AllowAll))
        .build()
        .await
        .unwrap();
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let out = bash(
        &h,
        "printf '[plugins.secrets-guard]\\nenabled = false\\n' >> toolgate.toml; \
         mv toolgate.toml old.toml; rm -f toolgate.toml; \
         cp /bin/true plugins/evil.wasm; echo '[x]' > plugins/tools.toml; \
         rm plugins/tools.wasm; mv plugins gone; \
         echo legit > notes.txt && cat notes.txt",
    )
    .await;
    assert!(out.contains("legit\n"), "the twin works: {out}");
    assert_eq!(t.read("toolgate.toml"), "[plugins.bash]\npriority = 50\n");
    let mut left: Vec<String> = std::fs::read_dir(&plugins)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["tools.wasm"], "{out}");
    assert!(!t.join("old.toml").exists() && !t.join("gone").exists());
}

#[tokio::test]
async fn an_absent_default_configuration_stays_absent() {
    let t = Tree::new("authority-absent");
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(&t.path)
        .authority_path(t.join("toolgate.toml"), "the host's default configuration")
        .approver(Arc::new(AllowAll))
        .build()
        .await
        .unwrap();
    let out = bash(
        &h,
        "printf '[plugins.secrets-guard]\\nenabled = false\\n' > toolgate.toml && echo planted; \
         echo legit > notes.txt",
    )
    .await;
    assert!(out.contains("planted"), "{out}");
    // The next start would have obeyed it: it is moved aside after the run.
    assert!(!t.join("toolgate.toml").exists());
    let aside: Vec<String> = std::fs::read_dir(&t.path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("toolgate.toml.quarantined-"))
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(t.read("notes.txt"), "legit\n");
}

#[tokio::test]
async fn a_read_write_preopen_over_the_configuration_does_not_load() {
    let t = Tree::new("authority-preopen");
    let grant = |extra: &str| {
        format!(
            "[plugins.probe.grants]\nfs = [{{ path = {:?}, access = \"read-write\"{extra} }}]\n",
            t.path.display().to_string()
        )
    };
    t.write("toolgate.toml", &grant(""));
    let dir = PluginDir::new();
    dir.add("probe", fixtures::PROBE);
    let load = |config: &Path| {
        toolgate_tests::builder(&dir, "")
            .config(HostConfig::load(config).unwrap())
            .build()
    };
    let h = load(&t.join("toolgate.toml")).await.unwrap();
    let p = h.problems();
    let probe = p.iter().find(|p| p.plugin == "probe").expect("refused");
    assert!(
        probe.message.contains("toolgate.toml")
            && probe.message.contains("the host's configuration")
            && probe.message.contains("spawn_only = true"),
        "{probe}"
    );
    // The twin: a read-only grant of the same directory loads and reads.
    t.write(
        "toolgate.toml",
        &grant("").replace("read-write", "read-only"),
    );
    t.write("hello.txt", "hello");
    let h = load(&t.join("toolgate.toml")).await.unwrap();
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let r = run(&h, "fs", json!({"op": "read", "path": "hello.txt"})).await;
    assert_eq!(r.text(), "hello");
}

// ---- 3. setuid -----------------------------------------------------------

#[tokio::test]
async fn bash_cannot_leave_a_setuid_program_behind() {
    let t = Tree::new("setuid");
    let h = builtin_host(&t.path, None, test_runtime()).await;
    let out = bash(
        &h,
        "cp /bin/true x && chmod 4755 x; echo suid=$?; chmod 2755 x; echo sgid=$?; \
         python3 -c 'import os; os.close(os.open(\"y\", os.O_CREAT | os.O_WRONLY, 0o4755))'; \
         echo create=$?; chmod 755 x && echo plain=$?",
    )
    .await;
    assert!(
        out.contains("suid=1") && out.contains("sgid=1") && out.contains("plain=0"),
        "{out}"
    );
    assert!(!out.contains("create=0"), "{out}");
    assert_eq!(mode(&t.join("x")) & 0o7777, 0o755);
    assert!(!t.join("y").exists() || mode(&t.join("y")) & 0o6000 == 0);
}

// ---- 4. TCP Fast Open ------------------------------------------------------

#[tokio::test]
async fn tcp_fast_open_does_not_pass_the_port_rules() {
    let granted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (gp, op) = (
        granted.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let t = Tree::new("tfo");
    let dir = PluginDir::new();
    dir.add("bash", fixtures::PLUGIN_BASH);
    let h = host(
        &dir,
        &format!(
            "[plugins.bash.grants]\nshell = true\nspawn_tcp_ports = [{gp}]\n\
             fs = [{{ path = {:?}, access = \"read-write\", spawn_only = true }}]\n",
            t.path.display().to_string()
        ),
    )
    .await;
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let script = |port: u16, fast_open: bool| {
        format!(
            "python3 -c 'import socket; s = socket.socket(); {}; print(\"reached\", {port})'",
            if fast_open {
                format!("s.sendto(b\"x\", 0x20000000, (\"127.0.0.1\", {port}))")
            } else {
                format!("s.connect((\"127.0.0.1\", {port}))")
            }
        )
    };
    let out = bash(&h, &script(op, true)).await;
    assert!(
        !out.contains("reached") && out.contains("Permission denied"),
        "TFO reached an ungranted port: {out}"
    );
    let out = bash(&h, &script(gp, false)).await;
    assert!(out.contains(&format!("reached {gp}")), "{out}");
    // Outside the sandbox the same Fast Open send does reach it: the test
    // is real (the kernel's tcp_fastopen client bit is on here).
    let fastopen = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen").unwrap_or_default();
    if fastopen.trim().parse::<u32>().is_ok_and(|v| v & 1 == 1) {
        let s = std::process::Command::new("python3")
            .args([
                "-c",
                &format!(
                    "import socket; s = socket.socket(); s.sendto(b'x', 0x20000000, ('127.0.0.1', {op}))"
                ),
            ])
            .status()
            .unwrap();
        assert!(s.success());
    }
}

// ---- 5. FIFOs --------------------------------------------------------------

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o644) }, 0);
}

unsafe extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

#[tokio::test]
async fn the_file_tools_never_open_a_fifo() {
    let t = Tree::new("fifo");
    t.write("hello.txt", "hello world\n");
    t.write("sub/more.txt", "hello again\n");
    mkfifo(&t.join("notes.txt"));
    mkfifo(&t.join("sub/pipe"));
    let dir = PluginDir::new();
    dir.add("fs-tools", fixtures::PLUGIN_FS_TOOLS);
    let h = host(
        &dir,
        &format!(
            "[plugins.fs-tools.grants]\nfs = [{{ path = {:?}, access = \"read-only\" }}]\n",
            t.path.display().to_string()
        ),
    )
    .await;
    let started = Instant::now();
    let r = run(&h, "read", json!({"path": "notes.txt"})).await;
    assert!(r.is_error, "{r:?}");
    assert_eq!(r.code(), Some("INVALID_INPUT"));
    assert!(r.text().contains("not a regular file"), "{}", r.text());
    let r = run(
        &h,
        "grep",
        json!({"pattern": "hello", "output_mode": "content"}),
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    assert!(
        r.text().contains("hello.txt:1:hello world") && r.text().contains("sub/more.txt:1"),
        "{}",
        r.text()
    );
    let r = run(&h, "grep", json!({"pattern": "x", "path": "sub/pipe"})).await;
    assert!(
        r.is_error && r.text().contains("not a regular file"),
        "{r:?}"
    );
    let r = run(&h, "list_dir", json!({})).await;
    assert!(
        r.text().contains("notes.txt  (not a regular file)"),
        "{}",
        r.text()
    );
    let r = run(&h, "glob", json!({"pattern": "**/*"})).await;
    assert!(
        !r.text().contains("pipe") && !r.text().contains("notes"),
        "{}",
        r.text()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// A component that opens a FIFO itself blocks a host thread in `open`;
/// the call still ends at its deadline.
#[tokio::test]
async fn a_call_stuck_on_a_fifo_ends_at_its_deadline() {
    let t = Tree::new("fifo-probe");
    mkfifo(&t.join("pipe"));
    let dir = PluginDir::new();
    dir.add("probe", fixtures::PROBE);
    dir.add("timeout", fixtures::PLUGIN_TIMEOUT);
    let h = host(
        &dir,
        &format!(
            "[plugins.probe.grants]\nfs = [{{ path = {:?}, access = \"read-only\" }}]\n\
             [tools.fs]\ntimeout_ms = 300\n",
            t.path.display().to_string()
        ),
    )
    .await;
    let started = Instant::now();
    let r = run(&h, "fs", json!({"op": "read", "path": "pipe"})).await;
    assert_eq!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Unblock the host's thread (a writer opens and closes the FIFO), or
    // this test's runtime could not shut down: that is what the CLI's
    // bounded shutdown is for.
    use std::os::unix::fs::OpenOptionsExt;
    for _ in 0..50 {
        let writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(0o4000) // O_NONBLOCK: ENXIO until the reader is there
            .open(t.join("pipe"));
        if writer.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The host answers a directory open in place (no hand-off to the pool):
/// one of a FIFO is refused by the kernel before anything opens it, so a
/// component listing a FIFO gets its error at once — this test's runtime
/// has one thread, which a blocking open would stop for good — and the
/// same host then serves ordinary reads.
#[tokio::test]
async fn a_fifo_listed_as_a_directory_is_refused_at_once() {
    let t = Tree::new("fifo-list");
    mkfifo(&t.join("pipe"));
    t.write("plain.txt", "plain\n");
    let dir = PluginDir::new();
    dir.add("probe", fixtures::PROBE);
    dir.add("timeout", fixtures::PLUGIN_TIMEOUT);
    let h = host(
        &dir,
        &format!(
            "[plugins.probe.grants]\nfs = [{{ path = {:?}, access = \"read-only\" }}]\n\
             [tools.fs]\ntimeout_ms = 5000\n",
            t.path.display().to_string()
        ),
    )
    .await;
    let started = Instant::now();
    let r = run(&h, "fs", json!({"op": "list", "path": "pipe"})).await;
    assert!(r.is_error, "{r:?}");
    assert_ne!(r.code(), Some("TIMEOUT"), "{r:?}");
    assert!(
        r.text().to_lowercase().contains("directory"),
        "{}",
        r.text()
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let r = run(&h, "fs", json!({"op": "read", "path": "plain.txt"})).await;
    assert_eq!(r.text(), "plain\n", "{r:?}");
    let r = run(&h, "fs", json!({"op": "list", "path": "."})).await;
    assert_eq!(r.text(), "pipe,plain.txt", "{r:?}");
}

/// A component that opens a FIFO itself leaves a host thread blocked in
/// `open` for good; the call ends at its deadline and the `toolgate`
/// process still exits (the runtime's shutdown is bounded).
#[test]
fn a_thread_stuck_on_a_fifo_does_not_keep_the_process_alive() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let t = Tree::new("fifo-stuck");
    let plugins = PluginDir::new();
    plugins.add("probe", fixtures::PROBE);
    mkfifo(&t.join("pipe"));
    t.write(
        "toolgate.toml",
        "[plugins.probe.grants]\nfs = [{ path = \".\", access = \"read-only\" }]\n\
         [tools.fs]\ntimeout_ms = 300\n",
    );
    let mut child = Command::new(toolgate_tests::toolgate_bin())
        .current_dir(&t.path)
        .env(
            "TOOLGATE_CACHE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-compile-cache"),
        )
        // Its state (and the cache's key) beside the cache, not the home's.
        .env(
            "TOOLGATE_STATE_DIR",
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-compile-cache-state"),
        )
        .env_remove("RUST_LOG")
        .args(["--plugins", plugins.path().to_str().unwrap(), "run", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolgate starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"[{"id": "a", "name": "fs", "arguments": {"op": "read", "path": "pipe"}}]"#)
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "toolgate was still running after 60 s; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = started.elapsed();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["error"]["code"], "TIMEOUT", "{v}");
    println!("exited {took:?} after start, with a thread still blocked on the FIFO");
}

// ---- 6. .git ---------------------------------------------------------------

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn git_metadata_is_read_only_to_bash_by_default() {
    let t = Tree::new("git");
    git(&t.path, &["init", "-q"]);
    t.write("a.txt", "a\n");
    git(&t.path, &["add", "a.txt"]);
    git(&t.path, &["commit", "-qm", "first"]);
    let config_before = t.read(".git/config");
    let h = builtin_host(&t.path, None, test_runtime()).await;
    let out = bash(
        &h,
        "git config core.fsmonitor 'touch /tmp/pwned'; echo config=$?; \
         echo 'touch /tmp/pwned' > .git/hooks/pre-commit; echo hook=$?; \
         git log --oneline; git status --short; echo b > b.txt; git status --short",
    )
    .await;
    assert!(
        !out.contains("config=0") && out.contains("config="),
        "{out}"
    );
    assert!(!out.contains("hook=0") && out.contains("hook="), "{out}");
    assert!(out.contains("first"), "git log works: {out}");
    assert!(out.contains("?? b.txt"), "git status works: {out}");
    assert_eq!(t.read(".git/config"), config_before);
    assert!(!t.join(".git/hooks/pre-commit").exists());
    // The operator can opt out per plugin.
    let dir = PluginDir::new();
    dir.add("bash", fixtures::PLUGIN_BASH);
    let h = host(
        &dir,
        &format!(
            "[plugins.bash.grants]\nshell = true\nprotect_git = false\n\
             fs = [{{ path = {:?}, access = \"read-write\", spawn_only = true }}]\n",
            t.path.display().to_string()
        ),
    )
    .await;
    let out = bash(&h, "git config toolgate.test yes && echo set").await;
    assert!(out.contains("set"), "{out}");
    assert!(t.read(".git/config").contains("[toolgate]"));
}

// ---- 7. the secrets guard ------------------------------------------------

fn guarded(r: &CallRecord) -> bool {
    r.is_error
        && r.error
            .as_ref()
            .is_some_and(|e| e.stage.to_string() == "guard")
        && r.text().contains("secrets")
}

#[tokio::test]
async fn the_secrets_guard_follows_symlinks_and_globs_and_grep_skips_secrets() {
    let t = Tree::new("secrets");
    t.write(".env", "API_TOKEN=hunter2\n");
    t.write("deploy/keys/server.pem", "-----BEGIN hunter2\n");
    t.write("notes.txt", "API_TOKEN is documented in the wiki\n");
    std::os::unix::fs::symlink(".env", t.join("settings.txt")).unwrap();
    std::os::unix::fs::symlink("deploy/keys", t.join("material")).unwrap();
    std::os::unix::fs::symlink("settings.txt", t.join("chain.txt")).unwrap();
    let h = builtin_host(&t.path, None, test_runtime()).await;
    let abs = |p: &str| t.join(p).display().to_string();
    for (tool, args) in [
        ("read", json!({"path": "settings.txt"})),
        ("read", json!({"path": "chain.txt"})),
        ("read", json!({"path": abs("settings.txt")})),
        ("read", json!({"path": "material/server.pem"})),
        (
            "grep",
            json!({"pattern": "hunter2", "path": "settings.txt"}),
        ),
        ("bash", json!({"command": "cat .e?v"})),
        ("bash", json!({"command": "cat sett*.txt"})),
        ("bash", json!({"command": "base64 < .env"})),
        ("bash", json!({"command": "cat .e\"\"nv"})),
        ("bash", json!({"command": "cat material/*"})),
    ] {
        let r = run(&h, tool, args.clone()).await;
        assert!(guarded(&r), "{tool} {args} was not stopped: {r:?}");
        assert!(!r.text().contains("hunter2"), "{tool} {args} leaked");
    }
    // grep over the whole tree finds the harmless line, not the secrets.
    let r = run(
        &h,
        "grep",
        json!({"pattern": "API_TOKEN", "output_mode": "content"}),
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    assert!(r.text().contains("notes.txt:1"), "{}", r.text());
    assert!(!r.text().contains("hunter2"), "{}", r.text());
    let r = run(&h, "grep", json!({"pattern": "hunter2"})).await;
    assert_eq!(r.text(), "no matches");
    // The twins: ordinary files, names and commands pass.
    assert!(!run(&h, "read", json!({"path": "notes.txt"})).await.is_error);
    let out = bash(&h, "cat note?.txt; ls").await;
    assert!(out.contains("documented in the wiki"), "{out}");
}

// ---- 8. secrets unreadable (issue 24, class 4) ----------------------------

/// The configuration (which holds MCP servers' `env` credentials) and the
/// files the embedder names secret are unreadable to everything the host
/// runs — `bash` in its sandbox, the file tools through their preopens and
/// `bulk-read` — however the path leads there; the files beside them read
/// as before.
#[tokio::test]
async fn the_configuration_and_secret_files_are_unreadable_to_bash_and_the_file_tools() {
    let t = Tree::new("secrets-hidden");
    // The secrets guard must not be what stops these: nothing here looks
    // like a secret by name.
    t.write(
        "toolgate.toml",
        "# [mcp.servers.db] env = { TOKEN = \"sk-live-1234\" }\npolicy_timeout_ms = 3000\n",
    );
    t.write("vault/token.txt", "vault-sk-5678\n");
    t.write("auth.dat", "auth-sk-9012\n");
    t.write("notes.txt", "legit sk-free\n");
    std::os::unix::fs::symlink("toolgate.toml", t.join("link.toml")).unwrap();
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(&t.path)
        .config(HostConfig::load(&t.join("toolgate.toml")).unwrap())
        .secret_path(t.join("vault"), "a key directory")
        .secret_path(t.join("auth.dat"), "a token file")
        .approver(Arc::new(AllowAll))
        .build()
        .await
        .unwrap();
    assert!(h.problems().is_empty(), "{:?}", h.problems());
    let leaked = |s: &str| {
        ["sk-live", "vault-sk", "auth-sk"]
            .iter()
            .any(|k| s.contains(k))
    };

    // bash: every way to the file is refused; the twin reads.
    let out = bash(
        &h,
        "cat toolgate.toml; cat link.toml; cat ./vault/../toolgate.toml; cat auth.dat; \
         ls vault; cat vault/token.txt; cp toolgate.toml copy.toml; ln toolgate.toml hard; \
         grep -r sk- . ; echo ---; cat notes.txt",
    )
    .await;
    assert!(!leaked(&out), "bash read a secret: {out}");
    assert!(out.contains("toolgate.toml: Permission denied"), "{out}");
    assert!(out.contains("auth.dat: Permission denied"), "{out}");
    assert!(out.contains("vault: Permission denied"), "{out}");
    assert!(out.contains("---\nlegit sk-free"), "the twin works: {out}");
    assert!(!t.join("copy.toml").exists() && !t.join("hard").exists());
    // The host still reads its own configuration (and the files are intact).
    assert!(t.read("toolgate.toml").contains("sk-live-1234"));
    assert_eq!(t.read("auth.dat"), "auth-sk-9012\n");

    // The file tools: refused by name, through a symlink, and absent from
    // a search of the tree.
    for path in ["toolgate.toml", "link.toml", "auth.dat", "vault/token.txt"] {
        let r = run(&h, "read", json!({ "path": path })).await;
        assert!(r.is_error, "read {path}: {r:?}");
        assert!(!leaked(&r.text()), "read {path} leaked: {}", r.text());
    }
    let r = run(
        &h,
        "grep",
        json!({"pattern": "sk-", "output_mode": "content"}),
    )
    .await;
    assert!(!leaked(&r.text()), "grep leaked: {}", r.text());
    assert!(
        r.text().contains("notes.txt:1:legit sk-free"),
        "{}",
        r.text()
    );
    let r = run(&h, "read", json!({"path": "notes.txt"})).await;
    assert!(r.text().contains("legit sk-free"), "{r:?}");
}

// ---- 8. what the configuration names (issue 40) ---------------------------

/// A public key file (PEM) the trust policy reads.
fn public_key_pem() -> String {
    use toolgate::oci::signature::{Algorithm, SigningKey};
    SigningKey::from_pem("k.pem", &SigningKey::generate_pem(Algorithm::P256))
        .unwrap()
        .public()
        .to_pem()
}

/// Case 2: `[trust] keys` and `trusted_root`, relative to `./toolgate.toml`
/// as the docs show, lie inside `bash`'s read-write grant: `bash` cannot
/// replace, move or append to them (an attacker's key would make its
/// policy "signed by" a trusted key). The twin: a file beside them writes.
#[tokio::test]
async fn trust_keys_and_roots_are_read_only_to_bash() {
    let t = Tree::new("trust-anchor");
    let key = public_key_pem();
    t.write("keys/publisher.pub", &key);
    let root = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("sigstore/roots/production.json"),
    )
    .unwrap();
    t.write("sigstore/root.json", &root);
    t.write(
        "toolgate.toml",
        "[trust]\nkeys = [\"keys/publisher.pub\"]\ntrusted_root = \"sigstore/root.json\"\n",
    );
    let h = builtin_host(&t.path, Some(&t.join("toolgate.toml")), test_runtime()).await;
    let out = bash(
        &h,
        "echo evil > keys/publisher.pub; echo evil >> keys/publisher.pub; \
         mv keys/publisher.pub keys/old.pub; rm -f keys/publisher.pub; \
         printf '{}' > sigstore/root.json; mv sigstore moved; \
         echo legit > keys/notes.txt && cat keys/notes.txt",
    )
    .await;
    assert!(out.contains("legit\n"), "the twin works: {out}");
    assert_eq!(t.read("keys/publisher.pub"), key, "{out}");
    assert_eq!(t.read("sigstore/root.json"), root, "{out}");
    assert!(!t.join("keys/old.pub").exists() && !t.join("moved").exists());
}

/// Case 6: `[approval] webhook_key_file` in the working directory is a
/// secret: `bash` cannot read it (whoever holds it forges signed approval
/// posts). The twin: the file beside it reads.
#[tokio::test]
async fn the_webhook_key_is_unreadable_to_bash() {
    let t = Tree::new("webhook-key");
    // Named so that the secrets guard does not take it for a key: what
    // hides it must be the class of `webhook_key_file`.
    t.write("hook-material.dat", "0123456789abcdef-webhook-secret\n");
    t.write("notes.txt", "legit\n");
    t.write(
        "toolgate.toml",
        "[approval]\nwebhook_key_file = \"hook-material.dat\"\n",
    );
    let h = builtin_host(&t.path, Some(&t.join("toolgate.toml")), test_runtime()).await;
    let out = bash(
        &h,
        "cat hook-material.dat; cp hook-material.dat copy; echo ---; cat notes.txt",
    )
    .await;
    assert!(!out.contains("webhook-secret"), "bash read the key: {out}");
    assert!(
        out.contains("hook-material.dat: Permission denied"),
        "{out}"
    );
    assert!(out.contains("---\nlegit"), "the twin works: {out}");
    assert!(!t.join("copy").exists());
}

/// Case 3 (containment half): `[audit] path` inside `bash`'s grant. The
/// host writes files beside the record (its rotations) that no mask made
/// at a process's start can hide, so the grant that reaches them is
/// refused — `bash` does not load, and its calls fail naming the key —
/// instead of leaving `audit.jsonl.000000000009` (earlier calls'
/// arguments) readable and deletable. The twin: the record outside the
/// grant, and `bash` runs.
#[tokio::test]
async fn host_written_data_inside_a_grant_is_refused() {
    let t = Tree::new("audit-in-grant");
    std::fs::create_dir_all(t.join("work")).unwrap();
    t.write("work/toolgate.toml", "[audit]\npath = \"audit.jsonl\"\n");
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(t.join("work"))
        .config(HostConfig::load(&t.join("work/toolgate.toml")).unwrap())
        .approver(Arc::new(AllowAll))
        .build()
        .await
        .unwrap();
    let problems = format!("{:?}", h.problems());
    assert!(
        problems.contains("[audit] path") && problems.contains("no grant may reach"),
        "{problems}"
    );
    let r = run(&h, "bash", json!({ "command": "ls audit.jsonl*" })).await;
    assert!(r.is_error, "bash ran beside the record: {r:?}");
    drop(h);

    // The twin: the record outside every grant.
    let records = t.join("records");
    std::fs::create_dir_all(&records).unwrap();
    t.write(
        "work/toolgate.toml",
        &format!(
            "[audit]\npath = \"{}\"\n",
            records.join("audit.jsonl").display()
        ),
    );
    let h = builtin_host(
        &t.join("work"),
        Some(&t.join("work/toolgate.toml")),
        test_runtime(),
    )
    .await;
    assert!(bash(&h, "echo legit").await.contains("legit"));
}

/// Every free-text string key of the configuration's schema that is not a
/// path, and why (`*`: any map key or array item; `**/`: at any depth): a
/// new string key must be typed as a path (`config::path`) or listed here
/// — the test below fails otherwise. Keys with a fixed set of values
/// (`enum`) are no paths and need no entry.
const NOT_PATHS: &[(&str, &str)] = &[
    ("/auth/issuer", "an OAuth issuer URL"),
    ("/auth/resource", "this server's URL"),
    ("/auth/jwks_uri", "a key set's URL"),
    ("/auth/required_scopes/*", "an OAuth scope"),
    ("/auth/scopes_supported/*", "an OAuth scope"),
    ("/auth/claims/*", "a token claim's name"),
    ("/auth/introspection/url", "an introspection endpoint's URL"),
    ("/auth/introspection/client_id", "an OAuth client id"),
    ("/access/*/tools/*", "a tool name or glob"),
    ("/access/*/subjects/*", "a token subject"),
    ("/access/*/scopes/*", "an OAuth scope"),
    ("/access/*/claims/*", "a claim value"),
    ("/sandbox_waive/*", "a protection's name"),
    ("**/plugins/*/sha256", "a digest"),
    ("**/plugins/*/source", "an oci:// reference"),
    ("**/plugins/*/vars/*", "a value the plugin reads"),
    ("**/identities/*/issuer", "an OIDC issuer URL"),
    ("**/identities/*/subject", "a certificate SAN"),
    ("**/identities/*/subject_glob", "a glob over a SAN"),
    (
        "**/plugins/*/grants/env/*",
        "an environment variable's name",
    ),
    ("**/plugins/*/grants/network/*", "host:port"),
    (
        "**/plugins/*/grants/kv_read",
        "a plugin's name: whose kv namespace it reads",
    ),
    (
        "/serve/accept_harness_arguments/*",
        "an agent harness's name",
    ),
    (
        "**/plugins/*/grants/subprocess/*",
        "a program name the subprocess seam allows",
    ),
    ("**/plugins/*/grants/egress/*", "an egress rule"),
    (
        "**/plugins/*/grants/models/*",
        "a model's name in [models]: which the model seam may ask",
    ),
    (
        "**/plugins/*/grants/fs/*/guest",
        "a path inside the component, not the host's",
    ),
    ("/scopes/*/allow/*", "a tool name or glob"),
    ("/scopes/*/deny/*", "a tool name or glob"),
    (
        "/mcp/servers/*/args/*",
        "an argument (a file it names is the operator's to protect)",
    ),
    ("/mcp/servers/*/env/*", "a value set for the server"),
    ("/mcp/servers/*/url", "an http:// URL"),
    ("/mcp/servers/*/headers/*", "a header value"),
    (
        "/mcp/servers/*/pins/*",
        "a SHA-256 of a tool's definition (64 hex digits, checked at load)",
    ),
    (
        "/mcp/servers/*/bearer_token_env",
        "an environment variable's name",
    ),
    ("/mcp/servers/*/tools_allow/*", "a tool name"),
    ("/mcp/servers/*/tools_deny/*", "a tool name"),
    (
        "/mcp/servers/*/grants/env/*",
        "an environment variable's name",
    ),
    ("/mcp/servers/*/grants/egress/*", "an egress rule"),
    ("/oci/insecure_registries/*", "a registry host"),
    ("/egress/deny/*", "an egress rule"),
    ("/egress/allow_private/*", "a CIDR block"),
    ("/approval/webhook", "an http(s) URL"),
    ("/audit/sensitive/*/*", "a JSON pointer"),
    ("/state/url", "a redis:// URL"),
    ("/state/prefix", "a key prefix"),
    ("/state/replica_id", "a replica's name"),
    ("/web_search/url", "an http(s) URL"),
    ("/models/*/base_url", "an http(s) URL"),
    ("/models/*/model", "the provider's name for a model"),
    ("/delegation/model", "a name of [models]"),
    ("/delegation/system_prompt", "text the sub-agents are told"),
    ("/lsp/servers/*/preset", "a preset's name"),
    (
        "/lsp/servers/*/args/*",
        "an argument (a file it names is the operator's to protect)",
    ),
    ("/lsp/servers/*/extensions/*", "a file extension"),
    (
        "/lsp/servers/*/root_markers/*",
        "a file name looked for above a file",
    ),
    ("/lsp/servers/*/env/*", "a value set for the server"),
];

/// Every leaf of `schema` below `at`: (pointer with `*` for map keys and
/// array items, its `title`, whether it is a string).
fn leaves(schema: &serde_json::Value, at: String, out: &mut Vec<(String, Option<String>, bool)>) {
    use serde_json::Value;
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let title = schema
        .get("title")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (k, s) in props {
            leaves(s, format!("{at}/{k}"), out);
        }
    } else if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        leaves(s, format!("{at}/*"), out);
    } else if let Some(s) = schema.get("items") {
        leaves(s, format!("{at}/*"), out);
    } else {
        let free_text = types.contains(&"string") && schema.get("enum").is_none();
        out.push((at, title, free_text));
    }
}

/// The schema-generated half of "authority derived, not listed": every
/// string key of `toolgate.toml`'s schema is either typed as a path of a
/// class or listed in `NOT_PATHS` with why; every typed path is found by
/// the walk the protected set is computed from (a configuration generated
/// from the schema, every path set, walked: each key found with its
/// class). A raw path key added tomorrow fails here, naming itself.
#[test]
fn every_string_key_of_the_configuration_is_a_typed_path_or_listed() {
    use toolgate::config::path::Class;
    let mut all = Vec::new();
    leaves(&HostConfig::schema(), String::new(), &mut all);
    let matches = |pattern: &str, pointer: &str| {
        let (pattern, anywhere) = match pattern.strip_prefix("**/") {
            Some(rest) => (rest, true),
            None => (pattern, false),
        };
        let p: Vec<&str> = pattern.split('/').collect();
        let q: Vec<&str> = pointer.split('/').collect();
        let tail = match q.len().checked_sub(p.len()) {
            Some(0) => &q[..],
            Some(n) if anywhere => &q[n..],
            _ => return false,
        };
        p.iter().zip(tail).all(|(a, b)| *a == "*" || a == b)
    };
    let mut unclassified = Vec::new();
    let mut classified = Vec::new();
    for (pointer, title, string) in &all {
        match title.as_deref().and_then(Class::from_title) {
            Some(class) => classified.push((pointer.clone(), class)),
            None if *string && !NOT_PATHS.iter().any(|(p, _)| matches(p, pointer)) => {
                unclassified.push(pointer.clone())
            }
            None => {}
        }
    }
    assert!(
        unclassified.is_empty(),
        "string keys of toolgate.toml neither typed as a path (host/src/config/path.rs) nor listed in NOT_PATHS with why: {unclassified:?}"
    );
    for (p, _) in NOT_PATHS {
        assert!(
            all.iter().any(|(pointer, _, _)| matches(p, pointer)),
            "NOT_PATHS lists {p}, which the schema no longer has"
        );
    }
    // The walk finds each one, with its class.
    let t = Tree::new("schema-paths");
    let config = toolgate::authority::sample_config(&t.path).unwrap();
    let walked: Vec<(String, Class)> = config
        .paths(&t.path)
        .into_iter()
        .map(|p| (p.pointer, p.class))
        .collect();
    let generic = |pointer: &str| {
        pointer
            .split('/')
            .map(|s| if s == "x" || s == "0" { "*" } else { s })
            .collect::<Vec<_>>()
            .join("/")
    };
    let mut walked_generic: Vec<(String, Class)> =
        walked.iter().map(|(p, c)| (generic(p), *c)).collect();
    walked_generic.sort_by(|a, b| a.0.cmp(&b.0));
    classified.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        walked_generic, classified,
        "the walk and the schema disagree"
    );
    // The keys the issue found reachable are among them.
    for key in [
        "/trust/keys/*",
        "/trust/trusted_root",
        "/approval/webhook_key_file",
        "/audit/path",
        "/mcp/servers/*/bearer_token_file",
    ] {
        assert!(
            classified.iter().any(|(p, _)| p == key),
            "{key}: {classified:?}"
        );
    }
}

/// The other half: the configuration generated from the schema, every
/// path inside `bash`'s default grant (the working directory, read-write),
/// tried from inside a real sandbox — no authority path can be written,
/// renamed or appended to, no secret read, and each host-written file
/// makes the grant refused; each attempt's twin (a file beside it) works.
/// This is `toolgate sandbox check`'s authority table, on every key the
/// schema has today.
#[tokio::test]
async fn the_sandbox_cannot_reach_any_path_the_schema_names() {
    let t = Tree::new("schema-sandbox");
    let work = t.path.canonicalize().unwrap();
    let config = toolgate::authority::sample_config(&work).unwrap();
    let cases = toolgate::authority::try_from_sandbox(&config, &work)
        .await
        .unwrap();
    let escaped: Vec<String> = cases
        .iter()
        .filter(|c| !c.held() || matches!(c.verdict, toolgate::authority::Verdict::OutOfReach))
        .map(|c| format!("{} {} {:?}", c.key, c.attempt, c.verdict))
        .collect();
    assert!(escaped.is_empty(), "{escaped:#?}");
    use toolgate::config::path::Class;
    let count = |class: Class| cases.iter().filter(|c| c.class == class).count();
    assert!(count(Class::Authority) >= 2 * 5, "{cases:#?}");
    assert!(count(Class::Secret) >= 3 * 4, "{cases:#?}");
    assert!(
        cases
            .iter()
            .filter(|c| c.class == Class::HostData)
            .all(|c| matches!(c.verdict, toolgate::authority::Verdict::Refused(_)))
            && count(Class::HostData) >= 3,
        "{cases:#?}"
    );
}

/// `extend = true` adds to a built-in plugin's default grant (issue 44's
/// operator journey: one egress name for `bash` took three lines to
/// know): the shell seam and the working directory stay, the egress
/// proxy comes. The twin: the same table without `extend` replaces the
/// default, and `bash` (no shell granted) does not load, naming the line.
#[tokio::test]
async fn an_extended_grant_keeps_the_built_in_default() {
    let t = Tree::new("grant-extend");
    t.write(
        "toolgate.toml",
        "[plugins.bash.grants]\nextend = true\negress = [\"example.org\"]\n",
    );
    let h = builtin_host(&t.path, Some(&t.join("toolgate.toml")), test_runtime()).await;
    let out = bash(
        &h,
        "echo legit > notes.txt && cat notes.txt; env | grep -c '^HTTPS_PROXY='",
    )
    .await;
    assert!(out.contains("legit\n1"), "{out}");
    let listed = h
        .plugin_status()
        .into_iter()
        .find(|s| s.name == "bash")
        .unwrap();
    assert!(listed.plugin.is_some(), "{listed:?}");
    drop(h);

    t.write(
        "toolgate.toml",
        "[plugins.bash.grants]\negress = [\"example.org\"]\n",
    );
    let h = Toolgate::builder()
        .runtime_options(test_runtime())
        .workdir(&t.path)
        .config(HostConfig::load(&t.join("toolgate.toml")).unwrap())
        .approver(Arc::new(AllowAll))
        .build()
        .await
        .unwrap();
    let problems = format!("{:?}", h.problems());
    assert!(problems.contains("shell = true"), "{problems}");
}
