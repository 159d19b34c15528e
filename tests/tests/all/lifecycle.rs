//! The plugin lifecycle (`toolgate::lifecycle`): hot reload under load, a
//! bad update refused while the previous version keeps serving, no
//! escalation on update, digests, a slowly written file, scoped registries.
//!
//! Real components throughout: the `versioned-1/2/3` fixtures answer with
//! their own version, so each result says which version served it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate::lifecycle::watch::WatchOptions;
use toolgate::{PluginState, PluginStatus, Toolgate, TurnOptions};
use toolgate_tests::{PluginDir, TempDir, builder, call, eventually, fixtures, json, test_runtime};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).expect("read a fixture")
}

/// The status of global plugin `name`, if it has one.
fn status(host: &Toolgate, name: &str) -> Option<PluginStatus> {
    host.plugin_status()
        .into_iter()
        .find(|s| s.scope.is_empty() && s.name == name)
}

/// Replace `NAME.wasm` the way editors and deploy tools do: write a hidden
/// temporary file beside it, then rename it over the old one.
fn replace_by_rename(dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!(".{name}.wasm.tmp"));
    std::fs::write(&tmp, bytes).expect("write the temporary file");
    std::fs::rename(&tmp, dir.join(format!("{name}.wasm"))).expect("rename it into place");
}

/// The version a `which_version` result reports, and the `n` it echoes.
fn answer(record: &toolgate::CallRecord) -> (u64, u64) {
    assert!(!record.is_error, "the call failed: {}", json(record));
    let v = record
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {}", json(record)));
    (v["version"].as_u64().unwrap(), v["n"].as_u64().unwrap())
}

fn watching() -> WatchOptions {
    WatchOptions {
        debounce: Duration::from_millis(20),
        write_stall: Duration::from_secs(10),
    }
}

/// A few thousand calls from several concurrent clients while the plugin
/// file is replaced 60 times (editor renames and in-place rewrites),
/// alternating two good versions and broken files. No call fails; every
/// call run against a generation it holds reports the version that
/// generation serves; every broken file is refused while the previous
/// version keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_under_load_fails_no_call_and_each_call_sees_its_generation() {
    let dir = PluginDir::new();
    dir.add("v", fixtures::VERSIONED_1);
    let good = [read(fixtures::VERSIONED_1), read(fixtures::VERSIONED_2)];
    let versions: Arc<BTreeMap<String, u64>> =
        Arc::new([(sha(&good[0]), 1), (sha(&good[1]), 2)].into());
    let truncated = good[1][..good[1].len() / 2].to_vec();
    let broken: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"\0asm not really a component".to_vec()),
        ("truncated", truncated),
        ("bad schema", read(fixtures::BAD_SCHEMA)),
        ("future contract", read(fixtures::FUTURE_VERSION)),
        ("empty", Vec::new()),
    ];
    let host = builder(&dir, "")
        .watch(true)
        .watch_options(watching())
        .build()
        .await
        .expect("host builds");
    assert!(host.is_watching());

    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for client in 0..6u64 {
        let host = host.clone();
        let stop = stop.clone();
        let calls = calls.clone();
        let versions = versions.clone();
        clients.push(tokio::spawn(async move {
            let mut seen = BTreeMap::<u64, u64>::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let n = client * 1_000_000 + i;
                let args = json!({"n": n});
                let id = format!("c{client}-{i}");
                if i.is_multiple_of(4) {
                    // The current generation, as `call` takes it.
                    let r = host
                        .call(call(&id, "which_version", args), &TurnOptions::default())
                        .await;
                    let (version, echoed) = answer(&r);
                    assert!(version == 1 || version == 2, "version {version}");
                    assert_eq!(echoed, n);
                    *seen.entry(version).or_default() += 1;
                } else {
                    // A generation the client holds while reloads go on.
                    let registry = host.registry();
                    let serving = registry
                        .plugins
                        .iter()
                        .find(|s| s.name == "v")
                        .and_then(|s| s.sha256.clone())
                        .expect("v serves in every generation");
                    let expected = versions[&serving];
                    let generation = registry.global.clone();
                    drop(registry);
                    let r = host
                        .call_on(
                            &generation,
                            call(&id, "which_version", args),
                            &TurnOptions::default(),
                        )
                        .await;
                    let (version, echoed) = answer(&r);
                    assert_eq!(
                        version, expected,
                        "call {id} started on generation {} (serving version {expected}) was answered by version {version}",
                        generation.number
                    );
                    assert_eq!(echoed, n);
                    *seen.entry(version).or_default() += 1;
                }
                calls.fetch_add(1, Ordering::Relaxed);
            }
            seen
        }));
    }

    let mut serving = 0usize; // index into `good`
    let mut refused = 0;
    let mut loaded = 0;
    for step in 0..60 {
        let in_place = step % 5 == 4;
        let write = |bytes: &[u8]| {
            if in_place {
                std::fs::write(dir.path().join("v.wasm"), bytes).expect("rewrite in place");
            } else {
                replace_by_rename(dir.path(), "v", bytes);
            }
        };
        if step % 2 == 0 {
            let (what, bytes) = &broken[(step / 2) % broken.len()];
            write(bytes);
            let digest = sha(bytes);
            let ok = eventually(Duration::from_secs(20), || {
                status(&host, "v").is_some_and(|s| s.refused_sha256.as_deref() == Some(&digest))
            })
            .await;
            let s = status(&host, "v").unwrap();
            assert!(ok, "step {step}: the {what} file was not refused: {s:?}");
            assert_eq!(s.state, PluginState::Serving, "step {step}: {s:?}");
            assert_eq!(
                s.sha256.as_deref(),
                Some(sha(&good[serving]).as_str()),
                "step {step}: the previous version must keep serving"
            );
            refused += 1;
        } else {
            serving = 1 - serving;
            write(&good[serving]);
            let digest = sha(&good[serving]);
            let ok = eventually(Duration::from_secs(20), || {
                status(&host, "v")
                    .is_some_and(|s| s.sha256.as_deref() == Some(&digest) && s.refused.is_none())
            })
            .await;
            assert!(
                ok,
                "step {step}: version {} did not load: {:?}",
                serving + 1,
                status(&host, "v")
            );
            loaded += 1;
        }
    }
    // A few thousand calls in all.
    assert!(
        eventually(Duration::from_secs(120), || calls.load(Ordering::Relaxed)
            >= 3000)
        .await,
        "only {} calls in two minutes",
        calls.load(Ordering::Relaxed)
    );
    stop.store(true, Ordering::Relaxed);
    let mut by_version = BTreeMap::<u64, u64>::new();
    for c in clients {
        for (v, n) in c.await.expect("no client panicked (no call failed)") {
            *by_version.entry(v).or_default() += n;
        }
    }
    assert_eq!((refused, loaded), (30, 30));
    assert!(
        by_version.get(&1).is_some_and(|n| *n > 0) && by_version.get(&2).is_some_and(|n| *n > 0),
        "both versions served: {by_version:?}"
    );
    eprintln!(
        "reload under load: {} calls, by version {by_version:?}, 60 replacements, final generation {}",
        calls.load(Ordering::Relaxed),
        host.generation().number
    );
}

/// A host whose configuration is a file, read again at every reload.
async fn file_host(dir: &PluginDir, config: &Path) -> Toolgate {
    Toolgate::builder()
        .runtime_options(test_runtime())
        .builtin_plugins(false)
        .plugin_dir(dir.path())
        .config_file(config, true)
        .build()
        .await
        .expect("host builds")
}

async fn version_now(host: &Toolgate) -> u64 {
    let r = host
        .call(
            call("c", "which_version", json!({"n": 7})),
            &TurnOptions::default(),
        )
        .await;
    answer(&r).0
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_that_imports_more_is_refused_until_the_operator_grants_it() {
    let work = TempDir::new("lifecycle-escalation");
    let config = work.path().join("toolgate.toml");
    std::fs::write(&config, "").unwrap();
    let dir = PluginDir::new();
    dir.add("v", fixtures::VERSIONED_1);
    let host = file_host(&dir, &config).await;
    assert_eq!(version_now(&host).await, 1);

    // Version 3 imports the kv seam, which version 1 did not.
    replace_by_rename(dir.path(), "v", &read(fixtures::VERSIONED_3));
    let mut events = host.subscribe();
    host.reload().await.expect("reload");
    let s = status(&host, "v").unwrap();
    assert_eq!(s.state, PluginState::Serving);
    assert_eq!(s.sha256, Some(sha(&read(fixtures::VERSIONED_1))));
    let why = s.refused.expect("the update is refused");
    // Refused before it runs: its grant does not cover the import (the
    // loader's check; the footprint's would say the same of an import the
    // linker always provides). The remedy is named.
    assert!(why.contains("kv") && why.contains("kv = true"), "{why}");
    assert_eq!(s.refused_sha256, Some(sha(&read(fixtures::VERSIONED_3))));
    let event = events.try_recv().expect("a reload event");
    assert_eq!(event.refused.len(), 1, "{event:?}");
    assert_eq!(version_now(&host).await, 1, "the old version keeps serving");
    // Reloading again does not try (or report) the same file again.
    host.reload().await.unwrap();
    assert!(events.try_recv().unwrap().refused.is_empty());
    assert_eq!(version_now(&host).await, 1);

    // A plugin file cannot grant itself anything: a manifest beside it
    // changes nothing.
    dir.manifest("v", "priority = 1\n");
    host.reload().await.unwrap();
    assert_eq!(version_now(&host).await, 1);
    std::fs::remove_file(dir.path().join("v.toml")).unwrap();

    // The operator grants it: the update serves.
    std::fs::write(&config, "[plugins.v.grants]\nkv = true\n").unwrap();
    host.reload().await.unwrap();
    assert_eq!(version_now(&host).await, 3);
    assert!(status(&host, "v").unwrap().refused.is_none());

    // The operator revokes it: the configuration is the authority, so the
    // version that needs it stops serving (it does not load without kv).
    std::fs::write(&config, "[plugins.v]\noptional = true\n").unwrap();
    host.reload().await.unwrap();
    let s = status(&host, "v").unwrap();
    assert_eq!(s.state, PluginState::Refused, "{s:?}");
    assert!(host.tools().iter().all(|t| t.name != "which_version"));
}

/// A tool plugin whose update becomes a policy (a pre-execute hook sees,
/// and may allow or deny, every call): refused until the operator places
/// it in that chain; a manifest beside the file cannot place it.
#[tokio::test(flavor = "multi_thread")]
async fn an_update_that_adds_a_policy_role_is_refused_until_the_operator_places_it() {
    let work = TempDir::new("lifecycle-role");
    let config = work.path().join("toolgate.toml");
    std::fs::write(&config, "").unwrap();
    let dir = PluginDir::new();
    dir.add("v", fixtures::VERSIONED_1);
    let host = file_host(&dir, &config).await;
    replace_by_rename(dir.path(), "v", &read(fixtures::PRE_HOOK));
    dir.manifest("v", "priority = 1\n");
    host.reload().await.unwrap();
    let s = status(&host, "v").unwrap();
    assert_eq!(s.state, PluginState::Serving);
    assert_eq!(s.sha256, Some(sha(&read(fixtures::VERSIONED_1))));
    let why = s.refused.expect("refused");
    assert!(
        why.contains("asks for more than the version it replaces")
            && why.contains("pre-execute")
            && why.contains("priorities"),
        "{why}"
    );
    assert_eq!(version_now(&host).await, 1, "the old version keeps serving");
    assert!(host.generation().policies.pre_execute.is_empty());
    // The operator places it: accepted.
    std::fs::write(&config, "[plugins.v]\npriorities = { pre-execute = 60 }\n").unwrap();
    host.reload().await.unwrap();
    let s = status(&host, "v").unwrap();
    assert!(s.refused.is_none(), "{s:?}");
    assert_eq!(s.sha256, Some(sha(&read(fixtures::PRE_HOOK))));
    assert!(!host.generation().policies.pre_execute.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_digest_mismatch_is_refused_and_a_removed_plugin_is_gone() {
    let v1 = read(fixtures::VERSIONED_1);
    let v2 = read(fixtures::VERSIONED_2);
    let work = TempDir::new("lifecycle-digest");
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!("[plugins.v]\noptional = true\nsha256 = \"{}\"\n", sha(&v1)),
    )
    .unwrap();
    let dir = PluginDir::new();
    dir.add("v", fixtures::VERSIONED_1);
    let host = file_host(&dir, &config).await;
    assert_eq!(version_now(&host).await, 1);

    // Another file under the pinned name: refused, version 1 serves on.
    replace_by_rename(dir.path(), "v", &v2);
    host.reload().await.unwrap();
    let s = status(&host, "v").unwrap();
    assert_eq!(s.state, PluginState::Serving);
    assert_eq!(s.sha256, Some(sha(&v1)));
    let why = s.refused.expect("refused");
    assert!(
        why.contains("sha256") || why.contains("SHA-256") || why.contains("digest"),
        "{why}"
    );
    assert_eq!(version_now(&host).await, 1);

    // At start, a file whose digest differs is not loaded at all.
    let fresh = file_host(&dir, &config).await;
    let s = status(&fresh, "v").unwrap();
    assert_eq!(s.state, PluginState::Refused, "{s:?}");
    assert!(fresh.tools().iter().all(|t| t.name != "which_version"));

    // The operator pins the new file: it serves.
    std::fs::write(
        &config,
        format!("[plugins.v]\noptional = true\nsha256 = \"{}\"\n", sha(&v2)),
    )
    .unwrap();
    host.reload().await.unwrap();
    assert_eq!(version_now(&host).await, 2);

    // Removed: gone from the next generation.
    std::fs::write(&config, "").unwrap();
    std::fs::remove_file(dir.path().join("v.wasm")).unwrap();
    let before = host.generation().number;
    host.reload().await.unwrap();
    assert!(host.generation().number > before);
    assert!(status(&host, "v").is_none());
    let r = host
        .call(
            call("c", "which_version", json!({"n": 1})),
            &TurnOptions::default(),
        )
        .await;
    assert_eq!(json(&r)["error"]["code"], "UNKNOWN_TOOL", "{}", json(&r));
}

/// A file copied slowly, in place, into a watched directory is not loaded
/// (nor refused) half-written: the previous version serves until the
/// writer closes it, then the complete file loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slowly_written_file_is_not_loaded_half_written() {
    let dir = PluginDir::new();
    dir.add("v", fixtures::VERSIONED_1);
    let v1 = read(fixtures::VERSIONED_1);
    let v2 = read(fixtures::VERSIONED_2);
    let host = builder(&dir, "")
        .watch(true)
        .watch_options(watching())
        .build()
        .await
        .expect("host builds");
    let mut events = host.subscribe();
    let path = dir.path().join("v.wasm");
    let bytes = v2.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut f = std::fs::File::create(&path).expect("open for writing");
        let chunk = bytes.len().div_ceil(40);
        for part in bytes.chunks(chunk) {
            f.write_all(part).unwrap();
            f.flush().unwrap();
            // Far longer than the watcher's quiet period.
            std::thread::sleep(Duration::from_millis(40));
        }
    });
    let mut polls = 0;
    while !writer.is_finished() {
        let s = status(&host, "v").unwrap();
        assert_eq!(s.sha256, Some(sha(&v1)), "{s:?}");
        assert!(s.refused.is_none(), "a half-written file was tried: {s:?}");
        assert_eq!(version_now(&host).await, 1);
        polls += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    writer.join().unwrap();
    assert!(
        polls > 20,
        "the write was not slow enough to test anything ({polls} polls)"
    );
    assert!(
        eventually(Duration::from_secs(20), || status(&host, "v")
            .is_some_and(|s| s.sha256 == Some(sha(&v2))))
        .await,
        "{:?}",
        status(&host, "v")
    );
    assert_eq!(version_now(&host).await, 2);
    while let Ok(e) = events.try_recv() {
        assert!(
            e.refused.is_empty(),
            "a reload refused a half-written file: {e:?}"
        );
    }
}

fn names(tools: Vec<toolgate::ModelTool>) -> Vec<String> {
    tools.into_iter().map(|t| t.name).collect()
}

async fn call_from(host: &Toolgate, scope: &str, tool: &str, args: Value) -> Value {
    let turn = TurnOptions {
        agent_scope: scope.into(),
        ..TurnOptions::default()
    };
    json(&host.call(call("s", tool, args), &turn).await)
}

#[tokio::test(flavor = "multi_thread")]
async fn scopes_keep_their_own_tools_and_restrict_only_downwards() {
    let global = PluginDir::new();
    global.add("tools", fixtures::TOOLS);
    let child = PluginDir::new();
    child.add("report", fixtures::VERSIONED_1);
    let config = format!(
        r#"
[scopes.child]
plugin_dirs = ["{}"]
deny = ["*"]

[scopes.sibling]

[scopes.parent]
deny = ["echo"]

[scopes."parent/kid"]
deny = ["fail"]

[scopes."parent/kid/grand"]
allow = ["*"]
"#,
        child.path().display()
    );
    let host = toolgate_tests::host(&global, &config).await;
    let global_tools = names(host.tools());
    assert!(global_tools.contains(&"echo".to_string()));
    assert!(!global_tools.contains(&"which_version".to_string()));

    // The child's own tool survives its deny-all restriction.
    assert_eq!(names(host.tools_for("child")), ["which_version"]);
    let v = call_from(&host, "child", "which_version", json!({"n": 1})).await;
    assert_eq!(v["isError"], false, "{v}");
    let v = call_from(&host, "child", "echo", json!({"text": "x"})).await;
    assert_eq!(v["error"]["code"], "UNKNOWN_TOOL", "{v}");
    // ... and its descendants', unconfigured.
    assert_eq!(names(host.tools_for("child/helper")), ["which_version"]);

    // A restriction does not leak to a sibling (nor the sibling's tool to it).
    let sibling = names(host.tools_for("sibling"));
    assert!(
        sibling.contains(&"echo".to_string()) && !sibling.contains(&"which_version".to_string())
    );
    let v = call_from(&host, "sibling", "echo", json!({"text": "x"})).await;
    assert_eq!(v["isError"], false, "{v}");

    // Restrictions accumulate downwards: a grandchild inherits both its
    // ancestors' denials, and its own `allow = ["*"]` cannot undo them.
    let parent = names(host.tools_for("parent"));
    assert!(!parent.contains(&"echo".to_string()) && parent.contains(&"fail".to_string()));
    for scope in [
        "parent/kid",
        "parent/kid/grand",
        "parent/kid/grand/deeper",
        "parent//kid/",
    ] {
        let seen = names(host.tools_for(scope));
        assert!(
            !seen.contains(&"echo".to_string()) && !seen.contains(&"fail".to_string()),
            "{scope}: {seen:?}"
        );
        assert!(seen.contains(&"spin".to_string()), "{scope}: {seen:?}");
        let v = call_from(&host, scope, "echo", json!({"text": "x"})).await;
        assert_eq!(v["error"]["code"], "UNKNOWN_TOOL", "{scope}: {v}");
    }
    // A name that only starts like a scope is not in it.
    assert!(names(host.tools_for("parentx")).contains(&"echo".to_string()));
    // The child's plugin is listed in its layer.
    let report = host
        .plugin_status()
        .into_iter()
        .find(|s| s.scope == "child" && s.name == "report")
        .expect("the child's plugin has a status");
    assert_eq!(report.state, PluginState::Serving);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scope_configuration_that_cannot_work_is_an_error_naming_it() {
    let dir = PluginDir::new();
    for (config, expect) in [
        ("[scopes.\"a//b\"]\n", "/scopes/a//b"),
        ("[scopes.a]\ndeny = [\"[\"]\n", "/scopes/a/deny/0"),
        ("[scopes.a]\nplugins_dir = []\n", "plugins_dir"),
    ] {
        let e = toolgate::HostConfig::parse(config, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(expect), "{config}: {e}");
    }
    // A scope's plugin directory that does not exist: an error at start.
    let e = builder(
        &dir,
        "[scopes.a]\nplugin_dirs = [\"/nonexistent/toolgate-scope\"]\n",
    )
    .build()
    .await
    .err()
    .expect("refused")
    .to_string();
    assert!(
        e.contains("/nonexistent/toolgate-scope") && e.contains("scopes"),
        "{e}"
    );
}

/// Background loading at start (what `toolgate serve` uses): plugin files
/// not in the compile cache load after the host is built, and a call made
/// at once — to a tool of one of them, past a guard that is one of them —
/// waits for them and meets the guard: never run without a policy, never
/// refused for want of one still loading.
#[tokio::test(flavor = "multi_thread")]
async fn background_loading_runs_no_call_before_the_policies_it_is_loading() {
    let dir = PluginDir::new();
    dir.add("tools", fixtures::TOOLS)
        .add("guard", fixtures::GUARD);
    let cache = TempDir::new("background-cache");
    let host = builder(
        &dir,
        "[plugins.guard]\nvars = { BEHAVIOR = \"deny-tool:echo\", NAME = \"guard\" }\n",
    )
    .runtime_options(toolgate::plugin::RuntimeOptions {
        cache_dir: Some(cache.path().join("c")),
        ..test_runtime()
    })
    .background_loading(true)
    .build()
    .await
    .expect("host builds");
    let r = host
        .call(
            call("c1", "echo", json!({"text": "hi"})),
            &TurnOptions::default(),
        )
        .await;
    let v = json(&r);
    assert_eq!(v["error"]["code"], "DENIED", "{v}");
    assert_eq!(v["error"]["stage"], "guard", "{v}");
    assert_eq!(v["error"]["decidedBy"], "guard", "{v}");
    // Both serve now.
    assert_eq!(status(&host, "guard").unwrap().state, PluginState::Serving);
    assert_eq!(status(&host, "tools").unwrap().state, PluginState::Serving);
}
