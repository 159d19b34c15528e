//! Signatures of plugins from OCI registries, against a real registry
//! (Debian's `docker-registry`, as in `oci.rs`): keys generated in the test
//! (`toolgate sign-keygen`, and the library's), components pushed and
//! signed with `toolgate push --sign-key`, loaded under `[trust]`; each bad
//! case refused — an unsigned policy, a signature over another digest, an
//! untrusted key, a tampered signature, hostile signature manifests, and a
//! new tag signed by an untrusted key at a hot reload (the old version
//! keeps serving).
//!
//! The independent signature: `tests/oci/cosign_sign.py` signs and pushes
//! with Python's `cryptography` and plain HTTP requests, following
//! cosign's signature specification — no toolgate code makes that key, that
//! payload, that signature or that manifest — and the host verifies it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use toolgate::Toolgate;
use toolgate::TurnOptions;
use toolgate::oci::OciConfig;
use toolgate::oci::signature::{Algorithm, SigningKey};
use toolgate::oci::{Client, OciRef};
use toolgate::registry::PluginState;
use toolgate_tests::{TempDir, call, fixtures, json as record_json, toolgate_bin};

use crate::oci::{Registry, digest_in, host, hostile_registry, status, toolgate, version_now};

/// `toolgate sign-keygen DIR/NAME.pem [--algorithm …]`: the public key's
/// path and fingerprint.
fn keygen(dir: &Path, name: &str, algorithm: &str) -> (PathBuf, String) {
    let private = dir.join(format!("{name}.pem"));
    let out = toolgate(
        dir,
        &[
            "sign-keygen",
            private.to_str().unwrap(),
            "--algorithm",
            algorithm,
        ],
    )
    .unwrap();
    let public = dir.join(format!("{name}.pub"));
    assert!(public.is_file(), "{out}");
    (public, digest_in(&out))
}

/// A call to `which_version` (the `versioned` tool): whether it ran, and
/// the record.
async fn try_version(h: &Toolgate) -> (bool, String) {
    let r = h
        .call(
            call("c", "which_version", json!({"n": 1})),
            &TurnOptions::default(),
        )
        .await;
    (!r.is_error, record_json(&r).to_string())
}

/// `toolgate verify ARGS…`: exit code and stdout+stderr.
fn verify(state: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(toolgate_bin())
        .arg("verify")
        .args(args)
        .env("TOOLGATE_STATE_DIR", state)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A guard signed with `toolgate push --sign-key` (a P-256 key from
/// `toolgate sign-keygen`) loads under `[trust] keys`; an unsigned tool
/// loads beside it (tools need no signature by default). The signer — the
/// key's fingerprint and file — is in `toolgate plugins`, the plugin's
/// status and the audit record's `plugins` entry; `toolgate verify` says
/// who signed (exit 0), or that no trusted key did (exit 1).
#[cfg_attr(
    not(has_oci_registry),
    ignore = "needs docker-registry: run `apt-get install docker-registry`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_policy_loads_under_trust_and_its_signer_is_on_record() {
    let registry = Registry::start();
    let work = TempDir::new("sig-signed");
    let state = work.path().join("state");
    let (public, fingerprint) = keygen(work.path(), "publisher", "p256");
    let (stranger, _) = keygen(work.path(), "stranger", "ed25519");
    let guard = registry.reference("acme/guard:1");
    let tool = registry.reference("acme/versioned:1");
    let key = work.path().join("publisher.pem");
    let pushed = toolgate(
        &state,
        &[
            "push",
            "--sign-key",
            key.to_str().unwrap(),
            &guard,
            fixtures::GUARD,
        ],
    )
    .unwrap();
    assert!(pushed.contains(&format!("with {fingerprint}")), "{pushed}");
    let digest = digest_in(&pushed);
    toolgate(&state, &["push", &tool, fixtures::VERSIONED_1]).unwrap();

    let config = work.path().join("toolgate.toml");
    let audit = work.path().join("audit.jsonl");
    std::fs::write(
        &config,
        format!(
            "[trust]\nkeys = [\"publisher.pub\"]\n\n[plugins.g]\nsource = \"{guard}\"\nvars = {{ BEHAVIOR = \"deny-tool:forbidden\" }}\n\n[plugins.v]\nsource = \"{tool}\"\n\n[audit]\npath = \"{}\"\n",
            audit.display()
        ),
    )
    .unwrap();
    let h = host(&state, &config).await;
    let g = status(&h, "g");
    assert_eq!(g.state, PluginState::Serving, "{g:?}");
    let signer = g.signer.clone().expect("a signer");
    assert!(
        signer.contains(&fingerprint) && signer.contains("publisher.pub"),
        "{signer}"
    );
    assert!(
        g.origin.contains(&format!("signed by {fingerprint}")),
        "{}",
        g.origin
    );
    assert_eq!(status(&h, "v").signer, None, "the tool is not signed");
    assert_eq!(version_now(&h).await, 1);
    drop(h);
    // The record is written by its own thread: wait for the line.
    let started = std::time::Instant::now();
    let plugins = loop {
        let record = std::fs::read_to_string(&audit).unwrap_or_default();
        if let Some(l) = record
            .lines()
            .find(|l| l.contains("\"plugins\"") && l.contains("signers"))
        {
            break l.to_string();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "no plugins record with signers: {record}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(plugins.contains(&fingerprint), "{plugins}");

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
        listed.contains(&format!("signed by {fingerprint}")),
        "{listed}"
    );

    let (code, out) = verify(&state, &[&guard, "--key", public.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("{digest} is signed by {fingerprint}")),
        "{out}"
    );
    // The configuration's [trust] keys, when no --key is given.
    let (code, out) = verify(&state, &["--config", config.to_str().unwrap(), &guard]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = verify(&state, &[&guard, "--key", stranger.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("NOT verified") && out.contains("by no trusted key"),
        "{out}"
    );
    let (code, out) = verify(&state, &[&tool, "--key", public.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not signed"), "{out}");
    let (code, out) = verify(&state, &[&guard]);
    assert_eq!(code, 2, "no key at all: {out}");
}

/// Under `[trust]`, a policy that is unsigned, signed by a key not
/// trusted, or whose signature was tampered with fails closed (the guard
/// is down: every call is refused, naming it); a signature over another
/// digest is refused even from the trusted key.
#[cfg_attr(
    not(has_oci_registry),
    ignore = "needs docker-registry: run `apt-get install docker-registry`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn unsigned_untrusted_tampered_and_misdirected_signatures_are_refused() {
    let registry = Registry::start();
    let work = TempDir::new("sig-refused");
    let state = work.path().join("state");
    let trusted =
        SigningKey::from_pem("trusted.pem", &SigningKey::generate_pem(Algorithm::Ed25519)).unwrap();
    let stranger =
        SigningKey::from_pem("stranger.pem", &SigningKey::generate_pem(Algorithm::P256)).unwrap();
    std::fs::write(work.path().join("trusted.pub"), trusted.public().to_pem()).unwrap();
    let client = Client::new(&OciConfig::default());
    let push = |r: &str, file: &str| digest_in(&toolgate(&state, &["push", r, file]).unwrap());

    let unsigned = registry.reference("acme/unsigned:1");
    push(&unsigned, fixtures::GUARD);
    let untrusted = registry.reference("acme/untrusted:1");
    let d = push(&untrusted, fixtures::GUARD);
    let r = OciRef::parse(&untrusted).unwrap();
    client.sign(&r, &d, &stranger).await.unwrap();
    // Signed by the trusted key, then its signature's last base64 group
    // changed in a copy of the signature manifest put back under the tag.
    let tampered = registry.reference("acme/tampered:1");
    let d = push(&tampered, fixtures::GUARD);
    let r = OciRef::parse(&tampered).unwrap();
    client.sign(&r, &d, &trusted).await.unwrap();
    let http = raw_http::Http::new(registry.port);
    let tag = format!("{}.sig", d.replacen(':', "-", 1));
    let mut m: serde_json::Value =
        serde_json::from_slice(&http.get_manifest("acme/tampered", &tag).await).unwrap();
    let sig = m["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"]
        .as_str()
        .unwrap()
        .to_string();
    let flipped = format!("{}AAAA{}", &sig[..8], &sig[12..]);
    m["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"] = json!(flipped);
    http.put_manifest("acme/tampered", &tag, &serde_json::to_vec(&m).unwrap())
        .await;
    // The trusted key's valid signature of digest A, put under digest B's
    // tag: the payload names A.
    let misdirected = registry.reference("acme/misdirected:2");
    let a = push(&registry.reference("acme/misdirected:1"), fixtures::GUARD);
    let b = push(&misdirected, fixtures::VERSIONED_1);
    let r = OciRef::parse(&misdirected).unwrap();
    client.sign(&r, &a, &trusted).await.unwrap();
    let signed_a = http
        .get_manifest(
            "acme/misdirected",
            &format!("{}.sig", a.replacen(':', "-", 1)),
        )
        .await;
    http.put_manifest(
        "acme/misdirected",
        &format!("{}.sig", b.replacen(':', "-", 1)),
        &signed_a,
    )
    .await;

    for (name, reference, why) in [
        ("unsigned", &unsigned, "it is not signed"),
        ("untrusted", &untrusted, "by no trusted key"),
        ("tampered", &tampered, "by no trusted key"),
    ] {
        let config = work.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!("[trust]\nkeys = [\"trusted.pub\"]\n\n[plugins.g]\nsource = \"{reference}\"\n"),
        )
        .unwrap();
        let h = host(&state, &config).await;
        let g = status(&h, "g");
        assert_ne!(g.state, PluginState::Serving, "{name}: {g:?}");
        let refused = g.refused.unwrap_or_default();
        assert!(
            refused.contains("a signature is required") && refused.contains(why),
            "{name}: {refused}"
        );
        let r = h
            .call(call("c", "anything", json!({})), &TurnOptions::default())
            .await;
        assert!(
            r.is_error,
            "{name}: a policy down fails closed: {}",
            record_json(&r)
        );
    }

    // A tool needs a signature only when asked: require_signature = true.
    let config = work.path().join("misdirected.toml");
    std::fs::write(
        &config,
        format!(
            "[trust]\nkeys = [\"trusted.pub\"]\nrequire_signature = true\n\n[plugins.v]\nsource = \"{misdirected}\"\n"
        ),
    )
    .unwrap();
    let h = host(&state, &config).await;
    let v = status(&h, "v");
    let refused = v.refused.unwrap_or_default();
    assert!(
        refused.contains(&format!("over another digest, \"{a}\", not {b}")),
        "{refused}"
    );
    assert!(!try_version(&h).await.0);
    drop(h);
    // Without require_signature, the unsigned-for-this-digest tool loads.
    std::fs::write(
        &config,
        format!("[trust]\nkeys = [\"trusted.pub\"]\n\n[plugins.v]\nsource = \"{misdirected}\"\n"),
    )
    .unwrap();
    let h = host(&state, &config).await;
    assert_eq!(version_now(&h).await, 1);
}

/// A new tag signed by a key the operator does not trust, pulled while the
/// host runs, is refused at the reload and the version serving keeps
/// serving; signed by the trusted key, it replaces it.
#[cfg_attr(
    not(has_oci_registry),
    ignore = "needs docker-registry: run `apt-get install docker-registry`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_hot_reload_to_a_tag_signed_by_an_untrusted_key_keeps_the_old_version() {
    let registry = Registry::start();
    let work = TempDir::new("sig-reload");
    let state = work.path().join("state");
    keygen(work.path(), "trusted", "p256");
    keygen(work.path(), "stranger", "ed25519");
    let trusted = work.path().join("trusted.pem");
    let stranger = work.path().join("stranger.pem");
    let reference = registry.reference("acme/v:stable");
    toolgate(
        &state,
        &[
            "push",
            "--sign-key",
            trusted.to_str().unwrap(),
            &reference,
            fixtures::VERSIONED_1,
        ],
    )
    .unwrap();
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[trust]\nkeys = [\"trusted.pub\"]\n\n[plugins.v]\nsource = \"{reference}\"\ntrust = {{ require_signature = true }}\n"
        ),
    )
    .unwrap();
    let h = host(&state, &config).await;
    assert_eq!(version_now(&h).await, 1);
    let first = status(&h, "v").origin;

    toolgate(
        &state,
        &[
            "push",
            "--sign-key",
            stranger.to_str().unwrap(),
            &reference,
            fixtures::VERSIONED_2,
        ],
    )
    .unwrap();
    toolgate(&state, &["pull", &reference]).unwrap();
    h.reload().await.unwrap();
    let s = status(&h, "v");
    let why = s.refused.expect("the update is refused");
    assert!(why.contains("by no trusted key"), "{why}");
    assert_eq!(s.origin, first, "the old digest keeps serving");
    assert_eq!(version_now(&h).await, 1);

    let pushed = toolgate(
        &state,
        &[
            "push",
            "--sign-key",
            trusted.to_str().unwrap(),
            &reference,
            fixtures::VERSIONED_2,
        ],
    )
    .unwrap();
    toolgate(&state, &["pull", &reference]).unwrap();
    h.reload().await.unwrap();
    assert_eq!(version_now(&h).await, 2);
    assert!(status(&h, "v").origin.contains(&digest_in(&pushed)));
}

/// Issue 40, case 1: refused bytes decide nothing. A signed guard from
/// `oci://…` under `[trust]` (policies need a signature by default) whose
/// tag is re-pointed at an *unsigned* component that says it only
/// provides tools: the update is refused and the guard keeps guarding —
/// at a hot reload (the verified version keeps serving) and after a
/// restart (nothing verified is left: every call fails closed, naming it),
/// though the refused bytes claim no policy role. The twin: the tag
/// re-pointed at a guard signed by the trusted key loads.
#[cfg_attr(
    not(has_oci_registry),
    ignore = "needs docker-registry: run `apt-get install docker-registry`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_whose_tag_moves_to_unsigned_tools_stays_a_guard() {
    let registry = Registry::start();
    let work = TempDir::new("sig-repoint");
    let state = work.path().join("state");
    keygen(work.path(), "publisher", "p256");
    let key = work.path().join("publisher.pem");
    let guard = registry.reference("acme/guard:stable");
    let tool = registry.reference("acme/versioned:1");
    let push_signed = |component: &str| {
        toolgate(
            &state,
            &[
                "push",
                "--sign-key",
                key.to_str().unwrap(),
                &guard,
                component,
            ],
        )
        .unwrap()
    };
    push_signed(fixtures::GUARD);
    toolgate(&state, &["push", &tool, fixtures::VERSIONED_1]).unwrap();
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[trust]\nkeys = [\"publisher.pub\"]\n\n[plugins.g]\nsource = \"{guard}\"\nvars = {{ BEHAVIOR = \"deny-tool:which_version\" }}\n\n[plugins.v]\nsource = \"{tool}\"\n"
        ),
    )
    .unwrap();
    let h = host(&state, &config).await;
    assert_eq!(status(&h, "g").state, PluginState::Serving);
    let (ran, record) = try_version(&h).await;
    assert!(!ran, "the guard denies which_version: {record}");
    let signed = status(&h, "g").origin;

    // The tag moves to an unsigned component with only tools.
    toolgate(&state, &["push", &guard, fixtures::TOOLS]).unwrap();
    toolgate(&state, &["pull", &guard]).unwrap();
    h.reload().await.unwrap();
    let g = status(&h, "g");
    let why = g.refused.clone().expect("the update is refused");
    assert!(
        why.contains("a signature is required") && why.contains("last verified version"),
        "{why}"
    );
    assert_eq!(g.origin, signed, "the verified guard keeps serving");
    let (ran, record) = try_version(&h).await;
    assert!(!ran, "still guarded after the reload: {record}");
    drop(h);

    // A restart: only the refused bytes are in the store for that tag.
    let h = host(&state, &config).await;
    let g = status(&h, "g");
    assert_eq!(g.state, PluginState::Refused, "{g:?}");
    let (ran, record) = try_version(&h).await;
    assert!(!ran, "after a restart the calls fail closed: {record}");
    assert!(
        record.contains("`g`"),
        "the refusal names the guard: {record}"
    );
    drop(h);

    // The twin: a guard signed by the trusted key loads again.
    push_signed(fixtures::GUARD);
    toolgate(&state, &["pull", &guard]).unwrap();
    let h = host(&state, &config).await;
    assert_eq!(status(&h, "g").state, PluginState::Serving);
    let (ran, record) = try_version(&h).await;
    assert!(!ran, "guarded by the new signed version: {record}");
}

/// A signature made without any toolgate code (Python's `cryptography`,
/// pushed with plain HTTP requests by `tests/oci/cosign_sign.py`, after
/// cosign's specification) is verified by the host, naming that key.
#[cfg_attr(
    not(all(has_oci_registry, has_mcp_client)),
    ignore = "needs docker-registry and the MCP venv's Python (its `cryptography`): run `apt-get install docker-registry` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_signature_made_by_an_independent_implementation_verifies() {
    let python = crate::serve::python();
    let registry = Registry::start();
    let work = TempDir::new("sig-independent");
    let state = work.path().join("state");
    let reference = registry.reference("acme/guard:py");
    let digest = digest_in(&toolgate(&state, &["push", &reference, fixtures::GUARD]).unwrap());
    let public = work.path().join("python.pub");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("oci/cosign_sign.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(format!("127.0.0.1:{}", registry.port))
        .arg("acme/guard")
        .arg(&digest)
        .arg(&public)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cosign_sign.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fingerprint = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!("[trust]\nkeys = [\"python.pub\"]\n\n[plugins.g]\nsource = \"{reference}\"\n"),
    )
    .unwrap();
    let h = host(&state, &config).await;
    let g = status(&h, "g");
    assert_eq!(g.state, PluginState::Serving, "{g:?}");
    assert!(
        g.signer
            .as_deref()
            .unwrap_or_default()
            .contains(&fingerprint),
        "{g:?} vs {fingerprint}"
    );
    let (code, out) = verify(&state, &[&reference, "--key", public.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}

/// Hostile signature manifests are bounded before anything is verified:
/// one of 2 GB stops at 256 KiB, 100 signature layers are refused (at most
/// 16 are read), a payload claiming a gigabyte is refused before its fetch.
/// Malformed keyless trust settings are refused by the configuration.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_signature_manifests_are_bounded() {
    let port = hostile_registry().await;
    let client = Client::new(&OciConfig {
        timeout_ms: Some(2_000),
        ..OciConfig::default()
    });
    let digest = format!("sha256:{}", "d".repeat(64));
    for (repo, why) in [
        ("huge:1", "larger than 262144 bytes"),
        ("sigs-many:1", "lists 100 layers; at most 16"),
        ("sigs-big:1", "a payload of 1073741824 bytes; at most 16384"),
    ] {
        let reference = OciRef::parse(&format!("oci://127.0.0.1:{port}/{repo}")).unwrap();
        let e = client
            .fetch_signatures(&reference, &digest)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&reference.to_string()) && e.contains(why),
            "{repo}: {e}"
        );
    }
    for (key, why) in [
        (
            "identities = [{ issuer = \"i\" }]",
            "/trust/identities/0: has neither `subject` nor `subject_glob`",
        ),
        (
            "identities = [{ issuer = \"i\", subject_glob = \"[\" }]",
            "is not a glob",
        ),
        ("trusted_root = \"root.json\"", "/trust/trusted_root: "),
        ("identities = [{ subject = \"s\" }]", "issuer"),
    ] {
        let e = toolgate::HostConfig::parse(&format!("[trust]\n{key}\n"), "t.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{key}: {e}");
    }
    let e = toolgate::HostConfig::parse("[trust]\nkeys = [\"nowhere.pub\"]\n", "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/trust/keys/0") && e.contains("nowhere.pub"),
        "{e}"
    );
}

/// The registry's manifest API over plain HTTP/1.1 (no client crate in
/// the tests), for the test to read and rewrite signature manifests as an
/// attacker with push access would.
mod raw_http {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    pub struct Http {
        port: u16,
    }

    impl Http {
        pub fn new(port: u16) -> Http {
            Http { port }
        }

        async fn request(&self, head: String, body: &[u8]) -> Vec<u8> {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .unwrap();
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(body).await.unwrap();
            let mut out = Vec::new();
            s.read_to_end(&mut out).await.unwrap();
            let split = out
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .expect("an HTTP answer");
            let status = String::from_utf8_lossy(&out[..split]).to_string();
            assert!(status.starts_with("HTTP/1.1 2"), "{head}: {status}");
            out[split + 4..].to_vec()
        }

        pub async fn get_manifest(&self, repo: &str, tag: &str) -> Vec<u8> {
            self.request(
                format!(
                    "GET /v2/{repo}/manifests/{tag} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/vnd.oci.image.manifest.v1+json\r\nConnection: close\r\n\r\n"
                ),
                b"",
            )
            .await
        }

        pub async fn put_manifest(&self, repo: &str, tag: &str, body: &[u8]) {
            self.request(
                format!(
                    "PUT /v2/{repo}/manifests/{tag} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                ),
                body,
            )
            .await;
        }
    }
}
