//! Issue 24, class 1: authority that does not exist yet, or is not in use.
//! Each test is the attack as a real call through the real pipeline (real
//! sandboxed processes, the real `toolgate` binary where the host must
//! die), with its legitimate twin.
//!
//! 1. a configuration file planted by a background job while it runs is
//!    not obeyed by hot reload, and is moved aside when the job ends; the
//!    operator's own file written afterwards is obeyed;
//! 2. a host killed while a planted file stands leaves it for the next
//!    start, which moves it aside instead of obeying it;
//! 3. the compile cache's key is in the state directory, never in a cache
//!    directory, and every cache location (in use or not) and the state
//!    directory are out of reach of `bash`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolgate::Toolgate;
use toolgate::pipeline::approval::AllowAll;
use toolgate::plugin::RuntimeOptions;
use toolgate_tests::{Tree, run, test_runtime, toolgate_bin, wait_for};

/// Names in `dir` that start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn serving(h: &Toolgate, plugin: &str) -> bool {
    h.plugin_status()
        .iter()
        .any(|s| s.scope.is_empty() && s.name == plugin && s.sha256.is_some())
}

const PLANT: &str = "printf '[plugins.secrets-guard]\\nenabled = false\\n' > toolgate.toml";

#[tokio::test(flavor = "multi_thread")]
async fn a_configuration_planted_by_a_background_job_is_never_obeyed() {
    let t = Tree::new("planted-by-job");
    let config = t.join("toolgate.toml");
    let state = t.join("state");
    let h = Toolgate::builder()
        .runtime_options(RuntimeOptions {
            state_dir: Some(state.clone()),
            ..test_runtime()
        })
        .workdir(&t.path)
        .config_file(&config, false)
        .approver(Arc::new(AllowAll))
        .build()
        .await
        .expect("host builds");
    assert!(serving(&h, "secrets-guard"));
    let mut events = h.subscribe();
    let r = run(
        &h,
        "bash",
        json!({ "command": format!("{PLANT}; sleep 60"), "run_in_background": true }),
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    let text = r.text();
    let job = text
        .split_whitespace()
        .find(|w| w.starts_with("job-"))
        .map(|w| w.trim_end_matches('.').to_string())
        .unwrap_or_else(|| panic!("no job id in {text}"));
    wait_for(Duration::from_secs(10), "the job plants the file", || {
        config.exists()
    })
    .await;
    // What the watcher would do on the change: reload. Refused, said so,
    // and the guard stays.
    h.reload().await.expect("reload");
    let event = events.try_recv().expect("a reload event");
    let problem = event
        .config_problem
        .clone()
        .expect("the planted file is refused");
    assert!(
        problem.contains("appeared while a sandboxed command could create it"),
        "{problem}"
    );
    assert!(serving(&h, "secrets-guard"), "the planted file was obeyed");
    // Another toolgate starting meanwhile in the same place refuses it too.
    let other = Toolgate::builder()
        .runtime_options(RuntimeOptions {
            state_dir: Some(state.clone()),
            ..test_runtime()
        })
        .workdir(&t.path)
        .config_file(&config, false)
        .build()
        .await;
    match other {
        Err(e) => assert!(e.to_string().contains("appeared while"), "{e}"),
        Ok(_) => panic!("a second host obeyed the planted configuration"),
    }
    // The job ends: what it planted is moved aside.
    let r = run(&h, "job_kill", json!({ "id": job })).await;
    assert!(!r.is_error, "{r:?}");
    wait_for(
        Duration::from_secs(10),
        "the planted file is moved aside",
        || !config.exists(),
    )
    .await;
    assert_eq!(named(&t.path, "toolgate.toml.quarantined-").len(), 1);
    // The twin: the operator's own file, written when no command runs, is
    // obeyed at the next reload.
    std::fs::write(&config, "[plugins.secrets-guard]\nenabled = false\n").unwrap();
    h.reload().await.expect("reload");
    assert!(
        !serving(&h, "secrets-guard"),
        "the operator's file is obeyed"
    );
}

/// `toolgate` in `dir` with its own cache and state (no HOME of the
/// machine's), `--approve allow`.
fn toolgate(dir: &Path, home: &Path) -> Command {
    let mut c = Command::new(toolgate_bin());
    c.current_dir(dir)
        .env("HOME", home)
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("TOOLGATE_STATE_DIR")
        .env(
            "TOOLGATE_CACHE_DIR",
            home.parent().unwrap().join("cache-in-use"),
        )
        .env("RUST_LOG", "warn")
        .arg("--approve")
        .arg("allow");
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_killed_while_a_planted_file_stands_leaves_it_to_the_next_start() {
    let t = Tree::new("planted-host-killed");
    let work = t.join("work");
    let home = t.join("home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let calls = work.join("calls.json");
    std::fs::write(
        &calls,
        json!([{ "id": "c1", "name": "bash", "arguments": { "command": format!("{PLANT}; sleep 60") } }])
            .to_string(),
    )
    .unwrap();
    let mut host = toolgate(&work, &home)
        .arg("run")
        .arg(&calls)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toolgate run");
    let config = work.join("toolgate.toml");
    wait_for(
        Duration::from_secs(120),
        "the command plants the file",
        || config.exists(),
    )
    .await;
    host.kill().unwrap();
    host.wait().unwrap();
    assert!(config.exists(), "nobody checked after the kill");
    // The next start: the planted file is moved aside, not obeyed.
    let out = toolgate(&work, &home)
        .args(["plugins", "--json"])
        .output()
        .expect("toolgate plugins");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !config.exists(),
        "the planted file is still there: {stderr}"
    );
    assert_eq!(named(&work, "toolgate.toml.quarantined-").len(), 1);
    assert!(
        stdout.contains("\"secrets-guard\""),
        "the next start obeyed the planted file: {stdout}"
    );
    assert!(stderr.contains("moved aside"), "not reported: {stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_cache_location_nor_the_key_is_within_reach_of_bash() {
    // Working in $HOME, with the cache in use set elsewhere: the default
    // cache (not in use) and the state directory lie inside bash's grant.
    let t = Tree::new("cache-not-in-use");
    let home = t.join("home");
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let calls = home.join("calls.json");
    // The key's name is spelled at run time: the secrets guard would stop
    // a command that names it, and this is about what the sandbox holds.
    let attack = "k=$(printf '.local/state/toolgate/cache.%s' key); \
                  mkdir -p .cache/toolgate && echo forged > .cache/toolgate/x.tgc; \
                  echo forged > \"$k\"; od -An -tx1 \"$k\" | head -1; \
                  echo legit > notes.txt && cat notes.txt";
    std::fs::write(
        &calls,
        json!([{ "id": "c1", "name": "bash", "arguments": { "command": attack } }]).to_string(),
    )
    .unwrap();
    // First start outside the grant: the key is made.
    let out = toolgate(&t.path, &home)
        .args(["tools"])
        .output()
        .expect("toolgate tools");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = home.join(".local/state/toolgate/cache.key");
    let original = std::fs::read(&key).expect("the key is in the state directory");
    assert!(
        named(&t.join("cache-in-use"), "")
            .iter()
            .all(|n| n != "key")
    );
    let out = toolgate(&home, &home)
        .arg("run")
        .arg(&calls)
        .output()
        .expect("toolgate run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("legit"), "the twin works: {stdout}");
    assert_eq!(
        std::fs::read(&key).unwrap(),
        original,
        "the key was changed"
    );
    let hex: String = original
        .iter()
        .take(4)
        .map(|b| format!(" {b:02x}"))
        .collect();
    assert!(!stdout.contains(&hex), "bash read the key: {stdout}");
    assert!(
        !home.join(".cache/toolgate/x.tgc").exists(),
        "a cache not in use was planted: {stdout}"
    );
}
