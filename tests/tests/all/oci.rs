//! Plugins from OCI registries: push and pull through a real registry (the
//! CNCF distribution registry, Debian's `docker-registry`, started on a
//! local port), the local store serving when the registry is down, a new
//! tag through the no-escalation check, and hostile registries (a small
//! HTTP server in the test) bounded: a 2 GB manifest, one streamed without
//! end, 10,000 layers, a redirect loop, a slow drip, digests that lie, a
//! tampered layer.

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::oci::OciConfig;
use toolgate::oci::{Client, OciRef, Store};
use toolgate::registry::PluginState;
use toolgate::state::StateDir;
use toolgate::{HostConfig, Toolgate, TurnOptions};
use toolgate_tests::{
    TempDir, call, fixtures, json as record_json, needs, test_runtime, toolgate_bin,
};

/// A registry process on a free local port, with its own storage; killed
/// when dropped.
pub(crate) struct Registry {
    child: Child,
    pub(crate) port: u16,
    dir: TempDir,
}

impl Registry {
    pub(crate) fn start() -> Registry {
        needs::expect(
            "oci_registry",
            Command::new("docker-registry")
                .arg("--version")
                .output()
                .map_err(|e| format!("docker-registry: {e}; run `apt-get install docker-registry`"))
                .map(|_| ()),
        );
        let port = free_port();
        let dir = TempDir::new("oci-registry");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "docker-registry did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { child, port, dir }
    }

    pub(crate) fn reference(&self, repo_tag: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo_tag}", self.port)
    }

    /// The registry's copy of a blob.
    fn blob(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `toolgate ARGS…` with its own state directory; stdout, or a panic with
/// stderr.
pub(crate) fn toolgate(state: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(toolgate_bin())
        .args(args)
        .env("TOOLGATE_STATE_DIR", state)
        .env_remove("TOOLGATE_OCI_USERNAME")
        .output()
        .expect("run toolgate");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The digest (`sha256:…`) a push or pull printed.
pub(crate) fn digest_in(out: &str) -> String {
    let at = out.find("sha256:").expect("a digest in the output");
    out[at..at + 71].to_string()
}

/// A host on `config` (a file, re-read at every reload) with `state` as
/// its state directory, and no built-ins.
pub(crate) async fn host(state: &Path, config: &Path) -> Toolgate {
    let mut options = test_runtime();
    options.state_dir = Some(state.to_path_buf());
    Toolgate::builder()
        .runtime_options(options)
        .builtin_plugins(false)
        .config_file(config, true)
        .build()
        .await
        .expect("host builds")
}

pub(crate) async fn version_now(host: &Toolgate) -> u64 {
    let r = host
        .call(
            call("c", "which_version", json!({"n": 1})),
            &TurnOptions::default(),
        )
        .await;
    assert!(!r.is_error, "{}", record_json(&r));
    r.structured_content.as_ref().unwrap()["version"]
        .as_u64()
        .unwrap()
}

pub(crate) fn status(host: &Toolgate, name: &str) -> toolgate::registry::PluginStatus {
    host.plugin_status()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no status for {name}"))
}

/// Pushed with `toolgate push`, pulled with `toolgate pull` (the tag
/// resolved to the digest the push printed), run by a host from the store:
/// the digest is what `toolgate plugins` shows. With the registry gone the
/// store serves; a blob changed in the store is refused, naming the file.
#[cfg_attr(
    not(has_oci_registry),
    ignore = "needs docker-registry: run `apt-get install docker-registry`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn pushed_pulled_and_run_by_digest_then_served_by_the_store_when_the_registry_is_down() {
    let registry = Registry::start();
    let work = TempDir::new("oci-run");
    let state = work.path().join("state");
    let reference = registry.reference("acme/versioned:1");
    let pushed = toolgate(&state, &["push", &reference, fixtures::VERSIONED_1]).unwrap();
    let digest = digest_in(&pushed);
    let pulled = toolgate(&state, &["pull", &reference]).unwrap();
    assert_eq!(digest_in(&pulled), digest, "{pulled}");

    let config = work.path().join("toolgate.toml");
    std::fs::write(&config, format!("[plugins.v]\nsource = \"{reference}\"\n")).unwrap();
    let h = host(&state, &config).await;
    assert_eq!(version_now(&h).await, 1);
    let s = status(&h, "v");
    assert_eq!(s.origin, format!("{reference}@{digest}"));
    let listed = toolgate(
        &state,
        &[
            "--no-default-plugins",
            "--config",
            config.to_str().unwrap(),
            "plugins",
        ],
    )
    .unwrap();
    assert!(
        listed.contains(&format!("{reference}@{digest}")),
        "{listed}"
    );
    drop(h);

    // The registry is gone: the store serves, nothing is fetched.
    drop(registry);
    let h = host(&state, &config).await;
    assert_eq!(version_now(&h).await, 1);
    drop(h);

    // A blob changed in the store is refused (the plugin may be a policy:
    // calls are refused too).
    let store = Store::open(StateDir::open(&state).unwrap().path()).unwrap();
    let blob = std::fs::read_dir(store.path().join("blobs/sha256"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&blob, &bytes).unwrap();
    let h = host(&state, &config).await;
    let s = status(&h, "v");
    assert_ne!(s.state, PluginState::Serving, "{s:?}");
    let why = s.refused.unwrap_or_default();
    assert!(
        why.contains("changed on disk") && why.contains(&blob.display().to_string()),
        "{why}"
    );
    let r = h
        .call(
            call("c", "which_version", json!({"n": 1})),
            &TurnOptions::default(),
        )
        .await;
    assert!(r.is_error, "{}", record_json(&r));
}

/// A first start pulls what the store lacks; a new tag pulled later is an
/// update like a changed file: an update that imports more than its grant
/// is refused at the reload (the old digest keeps serving) until the
/// operator grants it.
#[cfg_attr(
    not(has_oci_registry),
    ignore = "needs docker-registry: run `apt-get install docker-registry`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_first_start_pulls_and_a_new_tag_passes_the_no_escalation_check() {
    let registry = Registry::start();
    let work = TempDir::new("oci-update");
    let state = work.path().join("state");
    let reference = registry.reference("acme/v:stable");
    toolgate(&state, &["push", &reference, fixtures::VERSIONED_1]).unwrap();
    let config = work.path().join("toolgate.toml");
    std::fs::write(&config, format!("[plugins.v]\nsource = \"{reference}\"\n")).unwrap();
    // Nothing pulled: the start pulls.
    let h = host(&state, &config).await;
    assert_eq!(version_now(&h).await, 1);
    let first = status(&h, "v").origin;

    // Version 3 imports the kv seam; published under the same tag.
    let pushed = toolgate(&state, &["push", &reference, fixtures::VERSIONED_3]).unwrap();
    // Until it is pulled, a reload changes nothing (no network at reload).
    h.reload().await.unwrap();
    assert_eq!(status(&h, "v").origin, first);
    toolgate(&state, &["pull", &reference]).unwrap();
    h.reload().await.unwrap();
    let s = status(&h, "v");
    let why = s.refused.expect("the update is refused");
    assert!(why.contains("kv = true"), "{why}");
    assert_eq!(s.origin, first, "the old digest keeps serving");
    assert_eq!(version_now(&h).await, 1);

    std::fs::write(
        &config,
        format!("[plugins.v]\nsource = \"{reference}\"\n[plugins.v.grants]\nkv = true\n"),
    )
    .unwrap();
    h.reload().await.unwrap();
    assert_eq!(version_now(&h).await, 3);
    assert_eq!(
        status(&h, "v").origin,
        format!("{reference}@{}", digest_in(&pushed))
    );
}

/// A layer changed in the registry's storage is refused by the pull, and
/// nothing is stored.
#[cfg_attr(
    not(has_oci_registry),
    ignore = "needs docker-registry: run `apt-get install docker-registry`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_layer_tampered_with_in_the_registry_is_refused() {
    let registry = Registry::start();
    let work = TempDir::new("oci-tamper");
    let state = work.path().join("state");
    let reference = registry.reference("acme/t:1");
    toolgate(&state, &["push", &reference, fixtures::VERSIONED_1]).unwrap();
    let layer = toolgate::oci::sha256_digest(&std::fs::read(fixtures::VERSIONED_1).unwrap());
    let blob = registry.blob(&layer);
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    let e = toolgate(&state, &["pull", &reference]).unwrap_err();
    assert!(
        e.contains(&reference) && e.contains("does not match"),
        "{e}"
    );
    let store = Store::open(StateDir::open(&state).unwrap().path()).unwrap();
    assert!(
        store
            .load(&OciRef::parse(&reference).unwrap())
            .unwrap()
            .is_none()
    );
}

/// A policy whose source cannot be pulled (nothing listens there, nothing
/// is stored) fails closed: calls are refused, naming it.
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_that_cannot_be_pulled_fails_closed() {
    let work = TempDir::new("oci-closed");
    let state = work.path().join("state");
    let config = work.path().join("toolgate.toml");
    let port = free_port();
    std::fs::write(
        &config,
        format!(
            "[plugins.g]\nsource = \"oci://127.0.0.1:{port}/acme/guard:1\"\n[plugins.t]\nsource = \"oci://127.0.0.1:{port}/acme/tools:1\"\noptional = true\n"
        ),
    )
    .unwrap();
    let h = host(&state, &config).await;
    let g = status(&h, "g");
    let why = g.refused.unwrap_or_default();
    assert!(why.contains("cannot be reached"), "{why}");
    let r = h
        .call(call("c", "anything", json!({})), &TurnOptions::default())
        .await;
    assert!(r.is_error, "{}", record_json(&r));
    let text = record_json(&r).to_string();
    assert!(text.contains("`g`") || text.contains("g "), "{text}");
}

/// One hostile registry: `/v2/NAME/manifests/REF` behaves as NAME says.
pub(crate) async fn hostile_registry() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if s.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let _ = answer(&mut s, &path).await;
            });
        }
    });
    port
}

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn manifest_with_layers(n: usize) -> String {
    let layer = json!({"mediaType": "application/wasm", "digest": format!("sha256:{}", "a".repeat(64)), "size": 10});
    json!({
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": format!("sha256:{}", "b".repeat(64)), "size": 2},
        "layers": vec![layer; n],
    })
    .to_string()
}

async fn answer(s: &mut tokio::net::TcpStream, path: &str) -> std::io::Result<()> {
    let ok = |len: usize, extra: &str| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {MANIFEST}\r\nContent-Length: {len}\r\n{extra}Connection: close\r\n\r\n"
        )
    };
    if path == "/v2/" {
        return s.write_all(format!("{}{{}}", ok(2, "")).as_bytes()).await;
    }
    let name = path.split('/').nth(2).unwrap_or_default();
    match name {
        // Says 2 GB, then sends what it has.
        "huge" => {
            s.write_all(ok(2 << 30, "").as_bytes()).await?;
            let chunk = vec![b' '; 1 << 16];
            loop {
                s.write_all(&chunk).await?;
            }
        }
        // No length: streams until the client hangs up.
        "endless" => {
            s.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Type: {MANIFEST}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await?;
            let chunk = vec![b' '; 1 << 16];
            loop {
                s.write_all(&chunk).await?;
            }
        }
        // Signature manifests (`…/manifests/sha256-HEX.sig`): many
        // signature layers (100: under the manifest bound, over the layer
        // bound), or one whose payload claims a gigabyte.
        "sigs-many" | "sigs-big" => {
            let n = if name == "sigs-many" { 100 } else { 1 };
            let size: u64 = if name == "sigs-many" { 250 } else { 1 << 30 };
            let layer = json!({
                "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                "digest": format!("sha256:{}", "e".repeat(64)), "size": size,
                "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQ=="},
            });
            let body = json!({
                "schemaVersion": 2, "mediaType": MANIFEST,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": format!("sha256:{}", "b".repeat(64)), "size": 2},
                "layers": vec![layer; n],
            })
            .to_string();
            s.write_all(format!("{}{body}", ok(body.len(), "")).as_bytes())
                .await
        }
        "layers" => {
            let body = manifest_with_layers(10_000);
            s.write_all(format!("{}{body}", ok(body.len(), "")).as_bytes())
                .await
        }
        "loop" => {
            s.write_all(
                format!("HTTP/1.1 302 Found\r\nLocation: {path}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
        }
        "drip" => {
            let body = manifest_with_layers(1);
            s.write_all(ok(body.len(), "").as_bytes()).await?;
            for b in body.bytes() {
                s.write_all(&[b]).await?;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(())
        }
        // A manifest whose Docker-Content-Digest is another's; and any
        // digest asked for gets this same body.
        "lie" => {
            let body = manifest_with_layers(1);
            let extra = format!("Docker-Content-Digest: sha256:{}\r\n", "c".repeat(64));
            s.write_all(format!("{}{body}", ok(body.len(), &extra)).as_bytes())
                .await
        }
        _ => {
            s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await
        }
    }
}

/// Each hostile answer is refused or cut off, with an error naming the
/// reference and the reason; nothing is stored; memory stays bounded (the
/// 2 GB and endless manifests stop at 4 MiB).
#[tokio::test(flavor = "multi_thread")]
async fn hostile_registries_are_refused_or_bounded() {
    let port = hostile_registry().await;
    let work = TempDir::new("oci-hostile");
    let state = StateDir::open(work.path().join("state")).unwrap();
    let store = Store::open(state.path()).unwrap();
    let client = Client::new(&OciConfig {
        timeout_ms: Some(2_000),
        ..OciConfig::default()
    });
    let other = format!("sha256:{}", "d".repeat(64));
    for (repo, why) in [
        ("huge:1", "larger than 4194304 bytes"),
        ("endless:1", "larger than 4194304 bytes"),
        ("layers:1", "10000 layers"),
        ("loop:1", "redirected more than 10 times"),
        ("drip:1", "took longer than 2000 ms"),
        ("lie:1", "the registry says sha256:cccc"),
        (&format!("lie@{other}") as &str, "not the sha256:dddd"),
    ] {
        let reference = OciRef::parse(&format!("oci://127.0.0.1:{port}/{repo}")).unwrap();
        let started = Instant::now();
        let e = client
            .pull(&reference, &store)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&reference.to_string()) && e.contains(why),
            "{repo}: {e}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{repo}");
        assert!(store.load(&reference).unwrap().is_none(), "{repo}");
    }
    // A configuration naming a bad reference is refused at load, with its path.
    let e = HostConfig::parse("[plugins.x]\nsource = \"oci://acme/x\"\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/plugins/x/source") && e.contains("not a registry host"),
        "{e}"
    );
}

/// `wkg` (crates.io, installed by `.ci/run` into target/toolchains/wkg).
fn wkg() -> PathBuf {
    let bin = PathBuf::from(env!("TOOLGATE_WKG"));
    needs::expect(
        "wkg",
        if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!(
                "{} is missing; run `cargo install wkg --locked --debug --root target/toolchains/wkg`",
                bin.display()
            ))
        },
    )
}

/// Interop with the component ecosystem's own tool: a component pushed by
/// `wkg oci push` is pulled and run here; one pushed by `toolgate push` is
/// pulled by `wkg oci pull`, byte for byte.
#[cfg_attr(
    not(all(has_oci_registry, has_wkg)),
    ignore = "needs docker-registry and wkg: run `apt-get install docker-registry` and `cargo install wkg --locked --debug --root target/toolchains/wkg`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn components_cross_between_wkg_and_toolgate() {
    let wkg = wkg();
    let registry = Registry::start();
    let work = TempDir::new("oci-wkg");
    let state = work.path().join("state");
    let bare = |r: &str| r.trim_start_matches("oci://").to_string();
    let insecure = format!("127.0.0.1:{}", registry.port);

    // wkg → toolgate.
    let by_wkg = registry.reference("acme/from-wkg:1");
    let out = Command::new(&wkg)
        .args([
            "oci",
            "push",
            "--insecure",
            &insecure,
            &bare(&by_wkg),
            fixtures::VERSIONED_1,
        ])
        .env("HOME", work.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wkg push: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pulled = toolgate(&state, &["pull", &by_wkg]).unwrap();
    let config = work.path().join("toolgate.toml");
    std::fs::write(&config, format!("[plugins.v]\nsource = \"{by_wkg}\"\n")).unwrap();
    let h = host(&state, &config).await;
    assert_eq!(version_now(&h).await, 1, "{pulled}");

    // toolgate → wkg.
    let by_toolgate = registry.reference("acme/from-toolgate:1");
    toolgate(&state, &["push", &by_toolgate, fixtures::VERSIONED_3]).unwrap();
    let file = work.path().join("pulled.wasm");
    let out = Command::new(&wkg)
        .args([
            "oci",
            "pull",
            "--insecure",
            &insecure,
            &bare(&by_toolgate),
            "-o",
        ])
        .arg(&file)
        .env("HOME", work.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "wkg pull: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(fixtures::VERSIONED_3).unwrap()
    );
}
