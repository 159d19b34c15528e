//! Keyless signatures (`toolgate::oci::keyless`) against a real Sigstore
//! implementation's output.
//!
//! * **The conformance bundles** (`tests/sigstore/conformance/`, from the
//!   sigstore-conformance suite, Apache-2.0; see `tests/sigstore/README.md`):
//!   bundles made by Sigstore's production Fulcio and Rekor, verified
//!   against Sigstore's production trusted root (`roots/production.json`,
//!   as shipped in the `sigstore` PyPI package). Every case verifies or is
//!   refused as the suite says, each refusal for its own reason.
//! * **The same verdicts as sigstore-python** (PyPI `sigstore`), run
//!   offline on the same cases.
//! * **A test CA and log made in the test** (`tests/oci/cosign_keyless_sign.py`,
//!   Python's `cryptography`, no toolgate code): a certificate that expired
//!   before now but was logged while valid verifies; one logged after it
//!   expired is refused; a keyless cosign signature pushed to a real
//!   registry loads a policy, its signer (issuer and subject) on record.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use toolgate::oci::keyless::{self, Bundle, Identity, TrustedRoot};
use toolgate::oci::signature::PublicKey;
use toolgate::registry::PluginState;
use toolgate_tests::{TempDir, fixtures, toolgate_bin};

use crate::oci::{Registry, digest_in, host, status, toolgate};

const IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const ISSUER: &str = "https://token.actions.githubusercontent.com";

fn sigstore() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sigstore")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn exact(issuer: &str, subject: &str) -> Identity {
    Identity {
        issuer: issuer.into(),
        subject: Some(subject.into()),
        subject_glob: None,
    }
}

fn glob(issuer: &str, pattern: &str) -> Identity {
    Identity {
        issuer: issuer.into(),
        subject: None,
        subject_glob: Some(pattern.into()),
    }
}

/// One conformance case: its bundle, artifact, trusted root and identity
/// (keyless), or key (`key.pub`, key-based).
struct Case {
    bundle: Vec<u8>,
    artifact: Vec<u8>,
    root: Vec<u8>,
    identity: Identity,
    key: Option<String>,
}

/// Who a case's bundle was found signed by.
#[derive(Debug)]
enum Verdict {
    Keyless(keyless::KeylessSigner),
    /// The key's fingerprint, and the log entry (index, time) when checked.
    Key(String, Option<(u64, i64)>),
}

impl Case {
    fn load(name: &str) -> Case {
        let dir = sigstore().join("conformance").join(name);
        let or = |file: &str, default: PathBuf| {
            let p = dir.join(file);
            if p.exists() { p } else { default }
        };
        let text = |file: &str, default: &str| {
            std::fs::read_to_string(dir.join(file))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| default.to_string())
        };
        Case {
            bundle: read(&dir.join("bundle.sigstore.json")),
            artifact: read(&or("artifact", sigstore().join("conformance/a.txt"))),
            root: read(&or(
                "trusted_root.json",
                sigstore().join("roots/production.json"),
            )),
            identity: exact(&text("issuer", ISSUER), &text("identity", IDENTITY)),
            key: std::fs::read_to_string(dir.join("key.pub")).ok(),
        }
    }

    /// Keyless bundles as [`Case::verify`]; a key-based one with the
    /// case's key (none: no key is trusted) and its trusted root.
    fn verdict(&self) -> Result<Verdict, String> {
        let bundle = Bundle::from_json(&self.bundle).map_err(|e| e.to_string())?;
        if bundle.leaf().is_some() {
            return self.verify().map(Verdict::Keyless);
        }
        let keys = match &self.key {
            Some(pem) => vec![PublicKey::from_pem("key.pub", pem).map_err(|e| e.to_string())?],
            None => Vec::new(),
        };
        let root =
            TrustedRoot::from_json(&self.root).map_err(|e| format!("the trusted root {e}"))?;
        let keyed = keyless::verify_keyed(
            &bundle,
            keyless::Artifact::Bytes(&self.artifact),
            &keys,
            Some(&root),
            keyless::now(),
        )
        .map_err(|e| e.to_string())?;
        Ok(Verdict::Key(keyed.key.fingerprint(), keyed.logged))
    }

    fn verify(&self) -> Result<keyless::KeylessSigner, String> {
        self.verify_with(
            &self.bundle,
            &self.artifact,
            &self.root,
            std::slice::from_ref(&self.identity),
        )
    }

    /// Why the case's own bundle is refused under its trusted root as
    /// `edit` changes it (the case's identity accepted).
    fn refused_under_root(&self, edit: &dyn Fn(&mut serde_json::Value)) -> String {
        let mut root: serde_json::Value = serde_json::from_slice(&self.root).unwrap();
        edit(&mut root);
        self.verify_with(
            &self.bundle,
            &self.artifact,
            &serde_json::to_vec(&root).unwrap(),
            std::slice::from_ref(&self.identity),
        )
        .unwrap_err()
    }

    fn verify_with(
        &self,
        bundle: &[u8],
        artifact: &[u8],
        root: &[u8],
        identities: &[Identity],
    ) -> Result<keyless::KeylessSigner, String> {
        let root = TrustedRoot::from_json(root).map_err(|e| format!("the trusted root {e}"))?;
        let bundle = Bundle::from_json(bundle).map_err(|e| e.to_string())?;
        keyless::verify(&bundle, artifact, &root, identities, keyless::now())
            .map_err(|e| e.to_string())
    }
}

/// The leaf's path at a time the log signed.
fn path_at(
    leaf: &[u8],
    cas: &[keyless::root::CertificateAuthority],
    at: i64,
) -> Result<usize, String> {
    keyless::cert::verify_path(leaf, cas, &keyless::SignedTime::logged(at))
        .map_err(|e| e.to_string())
}

/// Each case, and what its verdict must say: `None` verifies, `Some(why)`
/// is refused with `why` in the reason.
const CASES: &[(&str, Option<&str>)] = &[
    ("happy-path-v0.1", None),
    ("happy-path-v0.2", None),
    ("happy-path-v0.3", None),
    ("happy-path-v0.3-new-mediaType", None),
    ("trust-root-tlog-validity-end-inclusive", None),
    (
        "bundle-empty-certificate-chain_fail",
        Some("carries no certificate"),
    ),
    (
        "bundle-from-wrong-instance_fail",
        Some("from a transparency log the trusted root does not name"),
    ),
    (
        "bundle-invalid-base64-signature_fail",
        Some("is not base64"),
    ),
    ("bundle-malformed-json_fail", Some("is not JSON")),
    ("bundle-negative-log-index_fail", Some("is negative")),
    (
        "bundle-unknown-version_fail",
        Some("is not a Sigstore bundle of version 0.1 to 0.3"),
    ),
    (
        "bundle-with-root-cert_fail",
        Some("carries a root certificate"),
    ),
    ("checkpoint-bad-keyhint_fail", Some("no key hint matches")),
    (
        "checkpoint-wrong-roothash_fail",
        Some("the checkpoint is for another tree"),
    ),
    (
        "inclusion-proof-corrupted-hash_fail",
        Some("does not lead to its rootHash"),
    ),
    (
        "incorrect-public-key_fail",
        Some("the signed entry timestamp is not the log's signature"),
    ),
    (
        "integrated-time-in-future_fail",
        Some("before the signature was logged"),
    ),
    (
        "invalid-checkpoint-signature_fail",
        Some("the checkpoint's signature by"),
    ),
    (
        "invalid-inclusion-proof_fail",
        Some("the inclusion proof has no checkpoint"),
    ),
    (
        "message-digest-mismatch_fail",
        Some("message digest is not the artifact's"),
    ),
    (
        "set-invalid-signature_fail",
        Some("the signed entry timestamp is not the log's signature"),
    ),
    ("signature-mismatch_fail", Some("records another signature")),
    (
        "trust-root-tlog-missing-validity-start_fail",
        Some("has no `start`"),
    ),
    (
        "wrong-hashedrekord-artifact_fail",
        Some("for another artifact"),
    ),
    (
        "wrong-hashedrekord-cert-and-sig_fail",
        Some("records another"),
    ),
    (
        "wrong-hashedrekord-entry_fail",
        Some("the log entry is for another artifact"),
    ),
    (
        "wrong-material_fail",
        Some("message digest is not the artifact's"),
    ),
    // DSSE envelopes (in-toto statements), as cosign 3 signs images.
    ("happy-path-intoto-in-dsse-v3", None),
    ("intoto-with-custom-trust-root", None),
    // The log entry is checked before the signature: the entry records
    // the good signature, the envelope carries a bad one.
    (
        "dsse-invalid-sig_fail",
        Some("records another DSSE signature"),
    ),
    (
        "dsse-mismatch-envelope_fail",
        Some("for another DSSE payload"),
    ),
    (
        "dsse-mismatch-sig_fail",
        Some("records another DSSE signature"),
    ),
    ("intoto-expired-certificate_fail", Some("not valid until")),
    (
        "intoto-log-entry-mismatch_fail",
        Some("records another DSSE signature"),
    ),
    (
        "intoto-missing-inclusion-proof_fail",
        Some("has no inclusion proof"),
    ),
    (
        "intoto-set-outside-signing-cert-validity_fail",
        Some("before the signature was logged"),
    ),
    // The trusted root names the staging CT logs, not the production one
    // whose SCT the certificate carries.
    (
        "invalid-ct-key_fail",
        Some("no SCT of the signing certificate verifies with a CT log of the trusted root"),
    ),
    // Key-based bundles (`cosign sign-blob --key --bundle`): the key is the
    // case's `key.pub`, the log entry checked against the trusted root.
    ("managed-key-happy-path", None),
    ("managed-key-and-trusted-root", None),
    ("managed-key-no-key_fail", Some("no key is trusted")),
    // Its `key.pub` is not a well-formed key (its base64 is altered): it
    // is refused when read. A well-formed other key is refused by
    // `a_cosign_3_key_based_bundle_referrer_loads_a_policy`.
    (
        "managed-key-wrong-key_fail",
        Some("its PEM body is not base64"),
    ),
    // Rekor v2 entries (`hashedrekord` 0.0.2, no integratedTime) timed by
    // an RFC 3161 timestamp of a TSA of the trusted root.
    ("bundle-with-sct-with-extensions", None),
    ("rekor2-happy-path", None),
    ("rekor2-dsse-happy-path", None),
    ("rekor2-checkpoint-cosigned", None),
    ("rekor2-checkpoint-multiple-cosigs", None),
    ("rekor2-checkpoint-origin-not-first", None),
    ("rekor2-checkpoint-two-sigs-cosigned", None),
    ("rekor2-checkpoint-two-sigs-from-origin", None),
    ("rekor2-timestamp-with-embedded-cert", None),
    ("rekor2-timestamp-without-embedded-cert", None),
    ("rekor2-timestamp-with-expired-cert-chain", None),
    ("trust-root-tsa-validity-end-inclusive", None),
    (
        "rekor2-checkpoint-missing-log-signature_fail",
        Some("the checkpoint carries no signature by"),
    ),
    (
        "rekor2-checkpoint-missing-origin_fail",
        Some("is its origin line missing?"),
    ),
    (
        "rekor2-checkpoint-missing-root-hash_fail",
        Some("the checkpoint has no root hash"),
    ),
    (
        "rekor2-checkpoint-missing-size_fail",
        Some("the checkpoint has no tree size"),
    ),
    (
        "rekor2-checkpoint-no-matching-signature_fail",
        Some(
            "the checkpoint's signature by https://log2025-alpha1.rekor.sigstage.dev does not verify",
        ),
    ),
    (
        "rekor2-dsse-invalid-sig_fail",
        Some("records another DSSE signature than the envelope's"),
    ),
    (
        "rekor2-dsse-mismatch-envelope_fail",
        Some("the log entry is for another DSSE envelope"),
    ),
    (
        "rekor2-dsse-mismatch-sig_fail",
        Some("records another DSSE signature than the envelope's"),
    ),
    (
        "rekor2-no-inclusion-proof_fail",
        Some("the Rekor v2 entry has no inclusion proof"),
    ),
    (
        "rekor2-no-timestamp_fail",
        Some("the bundle has no verified time"),
    ),
    (
        "rekor2-timestamp-outside-trust-root-tsa-validity_fail",
        Some(
            "is outside TSA https://timestamp.sigstage.dev/api/v1/timestamp's validity in the trusted root",
        ),
    ),
    (
        "rekor2-timestamp-outside-tsa-cert-validity_fail",
        Some(
            "a certificate of the path expired at 2025-08-07T15:37:08Z, before the timestamp was made at 2025-08-07T15:38:32Z",
        ),
    ),
    (
        "rekor2-timestamp-payload-mismatch_fail",
        Some("it is over another message than this bundle's signature"),
    ),
    (
        "rekor2-timestamp-untrusted-tsa-with-embedded-cert_fail",
        Some("it is signed by a TSA the trusted root does not name"),
    ),
    (
        "rekor2-timestamp-untrusted-tsa-without-embedded-cert_fail",
        Some("it is signed by a TSA the trusted root does not name"),
    ),
    (
        "rekor2-timestamp-with-incorrect-time_fail",
        Some("before the signature was timestamped at 2025-07-15T10:33:31Z"),
    ),
    (
        "intoto-tsa-timestamp-outside-cert-validity_fail",
        Some("before the signature was timestamped at 2023-02-02T00:00:00Z"),
    ),
];

/// The cases the suite (and toolgate) accept and sigstore-python refuses:
/// its 4.x verifies no `intoto` 0.0.2 log entry ("Integrated time only
/// supported for dsse/hashedrekord 0.0.1 types"); sigstore-go does.
/// Nor does it verify key-based bundles (it has no key verification).
/// And it reads a TSA's `validFor` end as exclusive (`gen_time < end`),
/// where the suite (and toolgate) include it.
const PYTHON_REFUSES: &[&str] = &[
    "intoto-with-custom-trust-root",
    "managed-key-happy-path",
    "managed-key-and-trusted-root",
    "trust-root-tsa-validity-end-inclusive",
];

/// Every conformance case verifies or is refused as the suite says, for
/// its own reason; a good bundle's signer is the beacon's identity.
#[test]
fn conformance_bundles_verify_or_are_refused_for_their_reason() {
    let dir = sigstore().join("conformance");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CASES.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed, "every fixture has an expected verdict");
    let mut wrong = Vec::new();
    for (name, expected) in CASES {
        let case = Case::load(name);
        let verdict = case.verdict();
        match (expected, &verdict) {
            (None, Ok(Verdict::Keyless(signer))) => {
                assert_eq!(signer.subject, IDENTITY, "{name}");
                assert_eq!(signer.issuer, ISSUER, "{name}");
            }
            (None, Ok(Verdict::Key(fingerprint, logged))) => {
                let key = PublicKey::from_pem("key.pub", case.key.as_ref().unwrap()).unwrap();
                assert_eq!(*fingerprint, key.fingerprint(), "{name}");
                assert!(logged.is_some(), "{name}: the log entry is checked");
            }
            (Some(why), Err(e)) if e.contains(why) => {}
            _ => wrong.push(format!("{name}: expected {expected:?}, got {verdict:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The identity policy: issuer exact, subject exact or a glob whose `*`
/// does not cross `/`; a wrong one is refused naming the signer.
#[test]
fn the_identity_must_match_issuer_and_subject() {
    let case = Case::load("happy-path-v0.3");
    let ok = |ids: &[Identity]| case.verify_with(&case.bundle, &case.artifact, &case.root, ids);
    let signer = ok(&[exact(ISSUER, IDENTITY)]).unwrap();
    assert!(signer.certificate.starts_with("sha256:"));
    assert_eq!(signer.signed, keyless::SignedTime::logged(1_710_869_186));
    let shown = signer.to_string();
    assert!(
        shown.starts_with(&format!("{ISSUER} {IDENTITY} (keyless")),
        "{shown}"
    );
    for ids in [
        vec![exact(
            ISSUER,
            "https://github.com/someone/else/.github/workflows/x.yml@refs/heads/main",
        )],
        vec![exact("https://accounts.google.com", IDENTITY)],
        vec![glob(ISSUER, "https://github.com/*")],
        vec![glob(
            ISSUER,
            "https://github.com/sigstore-conformance/*/.github/workflows/*.yml@refs/tags/*",
        )],
        vec![],
    ] {
        let e = ok(&ids).unwrap_err();
        assert!(
            e.contains("is not an accepted identity") || e.contains("no identity is accepted"),
            "{ids:?}: {e}"
        );
    }
    let e = ok(&[exact(ISSUER, "x")]).unwrap_err();
    assert!(
        e.contains(IDENTITY) && e.contains(ISSUER),
        "names the signer: {e}"
    );
    for pattern in [
        "https://github.com/sigstore-conformance/*/.github/workflows/*.yml@refs/heads/main",
        "https://github.com/**",
        "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/{extremely-dangerous-oidc-beacon,release}.yml@refs/heads/*",
    ] {
        assert!(ok(&[glob(ISSUER, pattern)]).is_ok(), "{pattern}");
    }
    // The second of two rules matches.
    assert!(ok(&[exact(ISSUER, "x"), exact(ISSUER, IDENTITY)]).is_ok());
    assert!(exact(ISSUER, IDENTITY).problem().is_none());
    assert!(glob(ISSUER, "[").problem().unwrap().contains("not a glob"));
}

/// Tampering after the fact: the artifact, the SET, the signature's log
/// entry time, the trusted root (another instance's, a CA or log key whose
/// validity does not cover the entry), and sizes past the limits.
#[test]
fn tampered_untrusted_and_oversized_inputs_are_refused() {
    let case = Case::load("happy-path-v0.3");
    let ids = [exact(ISSUER, IDENTITY)];
    let run = |bundle: &[u8], artifact: &[u8], root: &[u8]| {
        case.verify_with(bundle, artifact, root, &ids).unwrap_err()
    };
    // The good bundle under the production root as `edit` changes it.
    let under_root = |edit: &dyn Fn(&mut serde_json::Value)| case.refused_under_root(edit);
    let mut artifact = case.artifact.clone();
    artifact.push(b'!');
    let e = run(&case.bundle, &artifact, &case.root);
    assert!(e.contains("message digest is not the artifact's"), "{e}");

    let mut v: serde_json::Value = serde_json::from_slice(&case.bundle).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let set = &mut v["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]["signedEntryTimestamp"];
    let mut raw = b64.decode(set.as_str().unwrap()).unwrap();
    let n = raw.len();
    raw[n - 2] ^= 1;
    *set = b64.encode(raw).into();
    let e = run(&serde_json::to_vec(&v).unwrap(), &case.artifact, &case.root);
    assert!(
        e.contains("the signed entry timestamp is not the log's signature"),
        "{e}"
    );

    // A later integratedTime (as if logged after the certificate
    // expired) breaks the SET: the time cannot be moved.
    let mut v: serde_json::Value = serde_json::from_slice(&case.bundle).unwrap();
    v["verificationMaterial"]["tlogEntries"][0]["integratedTime"] = "1710869900".into();
    let e = run(&serde_json::to_vec(&v).unwrap(), &case.artifact, &case.root);
    assert!(e.contains("signed entry timestamp"), "{e}");

    // Another instance's root (staging) trusts neither this log nor CA.
    let staging = read(&sigstore().join("roots/staging.json"));
    let e = run(&case.bundle, &case.artifact, &staging);
    assert!(e.contains("the trusted root does not name"), "{e}");

    // The production root with its Fulcio CAs' validity ended before the
    // entry was logged (2024-03-19): the path is refused.
    let e = under_root(&|root| {
        for ca in root["certificateAuthorities"].as_array_mut().unwrap() {
            ca["validFor"]["end"] = "2023-01-01T00:00:00Z".into();
        }
    });
    assert!(
        e.contains("does not chain to a trusted CA")
            && e.contains("is not valid at 2024-03-19T17:26:26Z"),
        "{e}"
    );
    // Its log key valid only from after the entry.
    let e = under_root(&|root| {
        for log in root["tlogs"].as_array_mut().unwrap() {
            log["publicKey"]["validFor"]["start"] = "2025-01-01T00:00:00Z".into();
        }
    });
    assert!(
        e.contains(
            "but the log's key (https://rekor.sigstore.dev) is valid from 2025-01-01T00:00:00Z"
        ),
        "{e}"
    );
    // Only the CA chain of the other Fulcio generation: not this issuer.
    let e = under_root(&|root| {
        root["certificateAuthorities"]
            .as_array_mut()
            .unwrap()
            .remove(1);
    });
    assert!(e.contains("does not chain to a trusted CA"), "{e}");

    // Certificate transparency: no CT log at all, the CT log's key valid
    // only from after the SCT (2024-03-19), another instance's CT logs.
    let e = under_root(&|root| {
        root["ctlogs"] = serde_json::json!([]);
    });
    assert!(
        e.contains("the trusted root names no certificate transparency log"),
        "{e}"
    );
    let e = under_root(&|root| {
        for log in root["ctlogs"].as_array_mut().unwrap() {
            log["publicKey"]["validFor"]["start"] = "2025-01-01T00:00:00Z".into();
        }
    });
    assert!(
        e.contains("SCT 0: dated 2024-03-19T17:26:")
            && e.contains("but the CT log's key (https://ctfe.sigstore.dev/2022) is valid from 2025-01-01T00:00:00Z"),
        "{e}"
    );
    let e = under_root(&|root| {
        let staging_v: serde_json::Value = serde_json::from_slice(&staging).unwrap();
        root["ctlogs"] = staging_v["ctlogs"].clone();
    });
    assert!(
        e.contains("SCT 0: from a CT log the trusted root does not name (log id 3T0wasbHETJjGR4cmWc3AqJKXrjePK3/h4pygC8p7o4=)"),
        "{e}"
    );

    // Sizes.
    let mut big = case.bundle.clone();
    big.extend(std::iter::repeat_n(
        b' ',
        toolgate::budgets::KEYLESS_MAX_BUNDLE_BYTES,
    ));
    let e = run(&big, &case.artifact, &case.root);
    assert!(e.contains("at most 65536 are read"), "{e}");
    let mut v: serde_json::Value = serde_json::from_slice(&case.bundle).unwrap();
    let hashes = &mut v["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["hashes"];
    *hashes = serde_json::Value::Array(vec![hashes[0].clone(); 65]);
    let e = run(&serde_json::to_vec(&v).unwrap(), &case.artifact, &case.root);
    assert!(e.contains("has 65 hashes; at most 64"), "{e}");
    let e = under_root(&|root| {
        let chain = &mut root["certificateAuthorities"][1]["certChain"]["certificates"];
        *chain = serde_json::Value::Array(vec![chain[0].clone(); 9]);
    });
    assert!(e.contains("holds 9 certificates; 1 to 8"), "{e}");
}

/// The expired-certificate case with Sigstore's own certificate: it
/// expired ten minutes after issue (2024), so its path does not build at
/// any time now, but does at the log's integratedTime; one second past
/// its notAfter, it does not.
#[test]
fn a_certificate_is_judged_at_the_time_it_was_logged() {
    let case = Case::load("happy-path-v0.3");
    let bundle = Bundle::from_json(&case.bundle).unwrap();
    let root = TrustedRoot::from_json(&case.root).unwrap();
    let logged = bundle.entry.integrated_time.unwrap();
    assert!(path_at(bundle.leaf().unwrap(), &root.cas, logged).is_ok());
    let e = path_at(bundle.leaf().unwrap(), &root.cas, keyless::now()).unwrap_err();
    assert!(e.contains("expired at 2024-03-19T17:36:26Z"), "{e}");
    // notAfter is 17:36:26; webpki's bound is inclusive of that second.
    let e = path_at(bundle.leaf().unwrap(), &root.cas, 1_710_869_787).unwrap_err();
    assert!(e.contains("expired"), "{e}");
    let e = path_at(bundle.leaf().unwrap(), &root.cas, 1_710_869_185 - 600).unwrap_err();
    assert!(
        e.contains("was not valid until 2024-03-19T17:26:26Z"),
        "{e}"
    );
    let id = keyless::cert::identity(bundle.leaf().unwrap()).unwrap();
    assert_eq!(id.sans, vec![IDENTITY.to_string()]);
    assert_eq!(id.issuer.as_deref(), Some(ISSUER));
}

/// The SCT is the CT log's signature over the precertificate: the
/// production certificate's verifies; with one byte of its TBS changed
/// (as if the CA had issued another certificate than it logged), it does
/// not. The conformance bundle whose SCT carries extensions (a Static CT
/// log's leaf index, signed with it) verifies against its CT log, and not
/// with one extension byte changed.
#[test]
fn the_sct_signs_the_precertificate_and_its_extensions() {
    fn flip(leaf: &[u8], needle: &[u8]) -> Vec<u8> {
        let at = leaf
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("the bytes are in the certificate");
        let mut out = leaf.to_vec();
        out[at + needle.len() - 1] ^= 1;
        out
    }
    let case = Case::load("happy-path-v0.3");
    let bundle = Bundle::from_json(&case.bundle).unwrap();
    let root = TrustedRoot::from_json(&case.root).unwrap();
    let ca = path_at(bundle.leaf().unwrap(), &root.cas, 1_710_869_186).unwrap();
    let (scts, tbs) = keyless::sct::embedded(bundle.leaf().unwrap()).unwrap();
    assert_eq!(scts.len(), 1);
    assert!(scts[0].extensions.is_empty());
    assert!(tbs.len() < bundle.leaf().unwrap().len() - scts[0].signature.len());
    keyless::sct::verify(bundle.leaf().unwrap(), &root.cas[ca], &root.ctlogs).unwrap();
    let altered = flip(bundle.leaf().unwrap(), IDENTITY.as_bytes());
    let e = keyless::sct::verify(&altered, &root.cas[ca], &root.ctlogs)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("its signature is not CT log https://ctfe.sigstore.dev/2022's over this certificate's precertificate"),
        "{e}"
    );

    let case = Case::load("bundle-with-sct-with-extensions");
    let bundle = Bundle::from_json(&case.bundle).unwrap();
    let root = TrustedRoot::from_json(&case.root).unwrap();
    let (scts, _) = keyless::sct::embedded(bundle.leaf().unwrap()).unwrap();
    assert_eq!(scts.len(), 1);
    let ext = scts[0].extensions.clone();
    assert!(!ext.is_empty());
    let ca = path_at(bundle.leaf().unwrap(), &root.cas, 1_768_517_400).unwrap();
    keyless::sct::verify(bundle.leaf().unwrap(), &root.cas[ca], &root.ctlogs).unwrap();
    let altered = flip(bundle.leaf().unwrap(), &ext);
    let e = keyless::sct::verify(&altered, &root.cas[ca], &root.ctlogs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("its signature is not CT log"), "{e}");
    // The whole bundle (a Rekor v2 entry, timed by a TSA) verifies.
    let signer = case.verify().unwrap();
    assert!(signer.signed.timestamped_by.is_some(), "{signer}");
}

/// RFC 3161 timestamps (what times a Rekor v2 entry): the good one gives
/// the signer's time and its TSA; each altered part, a root without the
/// TSA, a TSA chain without its root, a TSA time the log key does not
/// cover, a time in the future, too many or duplicate timestamps, and a
/// timestamp over another signature added to a Rekor v1 bundle are each
/// refused, saying which.
#[test]
fn a_timestamp_is_the_tsas_over_this_signature() {
    let case = Case::load("rekor2-happy-path");
    let ids = [exact(ISSUER, IDENTITY)];
    let b64 = base64::engine::general_purpose::STANDARD;
    let signer = case.verify().unwrap();
    assert_eq!(
        signer.signed.timestamped_by.as_deref(),
        Some("https://timestamp.sigstage.dev/api/v1/timestamp")
    );
    assert!(
        signer.to_string().ends_with(
            "log index 735 timestamped 2025-06-12T12:02:20Z by https://timestamp.sigstage.dev/api/v1/timestamp)"
        ),
        "{signer}"
    );
    let bundle: serde_json::Value = serde_json::from_slice(&case.bundle).unwrap();
    let token =
        b64
            .decode(
                bundle["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"][0]
                    ["signedTimestamp"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
    let with_tokens = |tokens: Vec<Vec<u8>>| {
        let mut v = bundle.clone();
        v["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"] = tokens
            .iter()
            .map(|t| serde_json::json!({ "signedTimestamp": b64.encode(t) }))
            .collect();
        serde_json::to_vec(&v).unwrap()
    };
    let refused = |bundle: &[u8], root: &[u8]| {
        case.verify_with(bundle, &case.artifact, root, &ids)
            .unwrap_err()
    };
    let altered = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut t = token.clone();
        edit(&mut t);
        refused(&with_tokens(vec![t]), &case.root)
    };
    // The TSTInfo's genTime (its signed digest no longer matches).
    let e = altered(&|t| {
        let at = t.windows(15).position(|w| w == b"20250612120220Z").unwrap();
        t[at + 13] = b'1';
    });
    assert!(
        e.contains("RFC 3161 timestamp 0 of the bundle is refused: its signed message digest is not its TSTInfo's"),
        "{e}"
    );
    // The CMS signature (its last byte).
    let e = altered(&|t| *t.last_mut().unwrap() ^= 1);
    assert!(e.contains("its signature does not verify with TSA"), "{e}");
    // The status (granted = 0).
    let e = altered(&|t| {
        assert_eq!(&t[4..9], &[0x30, 0x03, 0x02, 0x01, 0x00]);
        t[8] = 2;
    });
    assert!(e.contains("its status is not \"granted\""), "{e}");
    let e = altered(&|t| t.truncate(100));
    assert!(e.contains("it cannot be read"), "{e}");
    let e = altered(&|t| t.push(0));
    assert!(e.contains("it cannot be read"), "{e}");

    let under_root = |edit: &dyn Fn(&mut serde_json::Value)| case.refused_under_root(edit);
    let e = under_root(&|root| root["timestampAuthorities"] = serde_json::json!([]));
    assert!(
        e.contains("the trusted root names no timestamp authority"),
        "{e}"
    );
    let e = under_root(&|root| {
        let chain = &mut root["timestampAuthorities"][0]["certChain"]["certificates"];
        chain.as_array_mut().unwrap().truncate(1);
    });
    assert!(e.contains("holds only its signing certificate"), "{e}");
    let e = under_root(&|root| {
        for log in root["tlogs"].as_array_mut().unwrap() {
            log["publicKey"]["validFor"]["start"] = "2025-07-01T00:00:00Z".into();
        }
    });
    assert!(
        e.contains("the entry was timestamped at 2025-06-12T12:02:20Z but the log's key"),
        "{e}"
    );
    // A timestamp of the future (this machine's clock before its time).
    let root = TrustedRoot::from_json(&case.root).unwrap();
    let parsed = Bundle::from_json(&case.bundle).unwrap();
    let e = keyless::verify(&parsed, &case.artifact, &root, &ids, 1_749_729_740 - 301)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("its time 2025-06-12T12:02:20Z is in the future"),
        "{e}"
    );

    let e = refused(&with_tokens(vec![token.clone(); 33]), &case.root);
    assert!(
        e.contains("carries 33 RFC 3161 timestamps; at most 32"),
        "{e}"
    );
    let e = refused(&with_tokens(vec![token.clone(); 2]), &case.root);
    assert!(e.contains("RFC 3161 timestamp 1 is there twice"), "{e}");

    // A Rekor v1 bundle (its integratedTime signed) given this timestamp,
    // of another signature, under a root that names its TSA: refused, not
    // passed over.
    let v1 = Case::load("happy-path-v0.3");
    let mut v: serde_json::Value = serde_json::from_slice(&v1.bundle).unwrap();
    v["verificationMaterial"]["timestampVerificationData"] =
        serde_json::json!({ "rfc3161Timestamps": [{ "signedTimestamp": b64.encode(&token) }] });
    let mut root: serde_json::Value = serde_json::from_slice(&v1.root).unwrap();
    let staging: serde_json::Value = serde_json::from_slice(&case.root).unwrap();
    root["timestampAuthorities"] = staging["timestampAuthorities"].clone();
    let e = v1
        .verify_with(
            &serde_json::to_vec(&v).unwrap(),
            &v1.artifact,
            &serde_json::to_vec(&root).unwrap(),
            &ids,
        )
        .unwrap_err();
    assert!(
        e.contains("RFC 3161 timestamp 0 of the bundle is refused: it is over another message than this bundle's signature"),
        "{e}"
    );
}

/// A timestamp altered anywhere, one bit at a time (every byte of it:
/// lengths, tags, OIDs, times, certificates, the signature), never makes
/// the parser panic, and never verifies to another time or TSA: each
/// variant is refused, or — where the bit is in a part no one signs and
/// nothing reads: the SignedData's version number and digest-algorithm
/// list, or the tag that turns the embedded certificates into CRLs (the
/// signer is the trusted root's certificate either way) — gives the same
/// verdict.
#[test]
fn a_timestamp_altered_bit_by_bit_is_refused_or_unchanged() {
    let case = Case::load("rekor2-timestamp-with-embedded-cert");
    let root = TrustedRoot::from_json(&case.root).unwrap();
    let bundle = Bundle::from_json(&case.bundle).unwrap();
    let token = &bundle.timestamps[0];
    let now = keyless::now();
    let good = keyless::tsa::verify(token, &bundle.signature, &root.tsas, now).unwrap();
    let (mut refused, mut same) = (0, 0);
    for i in 0..token.len() {
        for bit in [0x01u8, 0x80] {
            let mut t = token.clone();
            t[i] ^= bit;
            match keyless::tsa::verify(&t, &bundle.signature, &root.tsas, now) {
                Ok(stamp) => {
                    assert_eq!(stamp, good, "byte {i} bit {bit:#x}");
                    same += 1;
                }
                Err(_) => refused += 1,
            }
        }
    }
    assert!(
        refused > 50 * same,
        "{refused} refused, {same} unchanged of {} bytes",
        token.len()
    );
}

/// The Python interpreter of the venv that has `sigstore` (PyPI), if any.
fn sigstore_python() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/sigstore-venv/bin/python");
    p.exists().then_some(p)
}

/// sigstore-python, offline on the same cases, agrees with every verdict
/// (ok or refused) but those it refuses and the suite accepts.
#[test]
fn python_sigstore_agrees() {
    let Some(python) = sigstore_python() else {
        let how = "bash tests/sigstore/setup-venv.sh target/tmp/sigstore-venv";
        if std::env::var_os("CI").is_some() {
            panic!("sigstore-python is missing: {how}");
        }
        eprintln!("skipped: sigstore-python is missing; run `{how}`");
        return;
    };
    let out = Command::new(python)
        .arg(sigstore().join("python_verdicts.py"))
        .arg(sigstore())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut compared = 0;
    for (name, expected) in CASES {
        let line = text
            .lines()
            .find(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("{name}: no verdict from sigstore-python:\n{text}"));
        let python_ok = line == format!("{name} ok");
        let ours_ok = Case::load(name).verdict().is_ok();
        assert_eq!(ours_ok, expected.is_none(), "{name}");
        if PYTHON_REFUSES.contains(name) {
            assert!(!python_ok && ours_ok, "{line}");
            continue;
        }
        assert_eq!(ours_ok, python_ok, "{name}: sigstore-python says {line}");
        compared += 1;
    }
    assert_eq!(compared, CASES.len() - PYTHON_REFUSES.len());
}

/// `toolgate verify FILE --bundle B`: exit 0 naming the signer, 1 for
/// another identity or a tampered file, 2 with no trusted root.
#[test]
fn verify_a_local_file_with_a_bundle() {
    let dir = sigstore().join("conformance");
    let bundle = dir.join("happy-path-v0.3/bundle.sigstore.json");
    let root = sigstore().join("roots/production.json");
    let verify_with = |bundle: &Path, file: &Path, extra: &[&str]| {
        let out = Command::new(toolgate_bin())
            .arg("verify")
            .arg(file)
            .arg("--bundle")
            .arg(bundle)
            .args(extra)
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
    };
    let run = |file: &Path, extra: &[&str]| verify_with(&bundle, file, extra);
    let root_s = root.to_str().unwrap();
    let (code, out) = run(
        &dir.join("a.txt"),
        &[
            "--trusted-root",
            root_s,
            "--certificate-oidc-issuer",
            ISSUER,
            "--certificate-identity",
            IDENTITY,
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("is signed by {ISSUER} {IDENTITY} (keyless")),
        "{out}"
    );
    let (code, out) = run(
        &dir.join("a.txt"),
        &[
            "--trusted-root",
            root_s,
            "--certificate-oidc-issuer",
            ISSUER,
            "--certificate-identity-glob",
            "https://github.com/acme/**",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("NOT verified") && out.contains("is not an accepted identity"),
        "{out}"
    );
    let (code, out) = run(
        &dir.join("wrong-material_fail/artifact"),
        &[
            "--trusted-root",
            root_s,
            "--certificate-oidc-issuer",
            ISSUER,
            "--certificate-identity",
            IDENTITY,
        ],
    );
    assert_eq!(code, 1, "{out}");
    let (code, out) = run(&dir.join("a.txt"), &[]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("no trusted root"), "{out}");

    // A Rekor v2 bundle, timed by its RFC 3161 timestamp, under its root
    // (Sigstore's staging, which names the TSA); refused under the
    // production root, which names neither that log nor that TSA.
    let v2 = dir.join("rekor2-happy-path");
    let v2_args = |root: &Path| {
        let (code, out) = verify_with(
            &v2.join("bundle.sigstore.json"),
            &dir.join("a.txt"),
            &[
                "--trusted-root",
                root.to_str().unwrap(),
                "--certificate-oidc-issuer",
                ISSUER,
                "--certificate-identity",
                IDENTITY,
            ],
        );
        (code, out)
    };
    let (code, out) = v2_args(&v2.join("trusted_root.json"));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "timestamped 2025-06-12T12:02:20Z by https://timestamp.sigstage.dev/api/v1/timestamp"
        ),
        "{out}"
    );
    let (code, out) = v2_args(&root);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("from a transparency log the trusted root does not name"),
        "{out}"
    );

    // A key-based bundle (the suite's, made by Sigstore's production
    // Rekor): --key, with and without the trusted root its log entry is
    // checked against.
    let keyed = dir.join("managed-key-happy-path");
    let key = keyed.join("key.pub");
    let fingerprint =
        toolgate::oci::signature::PublicKey::from_pem("k", &std::fs::read_to_string(&key).unwrap())
            .unwrap()
            .fingerprint();
    let verify = |extra: &[&str]| {
        verify_with(
            &keyed.join("bundle.sigstore.json"),
            &dir.join("a.txt"),
            extra,
        )
    };
    let key_s = key.to_str().unwrap();
    let (code, out) = verify(&["--key", key_s, "--trusted-root", root_s]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "is signed by {fingerprint} ({key_s}, ecdsa-p256; log index "
        )),
        "{out}"
    );
    let (code, out) = verify(&["--key", key_s]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("its log entry not checked: no trusted root"),
        "{out}"
    );
    let other = dir.join("managed-key-wrong-key_fail/key.pub");
    let (code, out) = verify(&["--key", other.to_str().unwrap(), "--trusted-root", root_s]);
    assert_ne!(code, 0, "{out}");
    let (code, out) = verify(&["--trusted-root", root_s]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("the bundle is signed with a key: pass --key"),
        "{out}"
    );
    // The configuration's keys and root, no identities: the same verdict.
    let work = TempDir::new("keyed-file");
    let config = work.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!("[trust]\nkeys = [{key_s:?}]\ntrusted_root = {root_s:?}\n"),
    )
    .unwrap();
    let (code, out) = verify(&["--config", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "is signed by {fingerprint} ({key_s}, ecdsa-p256; log index "
        )),
        "{out}"
    );
}

/// The venv Python with `cryptography` the keyless signer script needs.
fn signer_python() -> PathBuf {
    crate::serve::python()
}

/// A test CA and log (made by `cosign_keyless_sign.py`, not by toolgate):
/// a bundle whose certificate expired before now but was logged while
/// valid verifies (inclusion proof and checkpoint by the test log's key);
/// one logged after the certificate expired is refused, saying so.
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP venv's Python (its `cryptography`): run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
#[test]
fn a_test_ca_certificate_expired_now_verifies_if_logged_in_time() {
    let work = TempDir::new("keyless-ca");
    let artifact = work.path().join("guard.wasm");
    std::fs::copy(fixtures::GUARD, &artifact).unwrap();
    for (mode, expect) in [
        ("logged-while-valid", None),
        ("logged-after-expiry", Some("expired at")),
    ] {
        let bundle = work.path().join(format!("{mode}.json"));
        let root = work.path().join(format!("{mode}-root.json"));
        let (issuer, subject) = identity_of(&run_signer(&[
            "bundle",
            artifact.to_str().unwrap(),
            bundle.to_str().unwrap(),
            root.to_str().unwrap(),
            mode,
        ]));
        let root = TrustedRoot::from_json(&read(&root)).unwrap();
        let b = Bundle::from_json(&read(&bundle)).unwrap();
        assert!(b.entry.proof.is_some());
        let verdict = keyless::verify(
            &b,
            &read(&artifact),
            &root,
            &[exact(&issuer, &subject)],
            keyless::now(),
        );
        match expect {
            None => {
                let signer = verdict.unwrap();
                assert_eq!(signer.subject, subject);
                // …and its certificate does not verify now.
                assert!(path_at(b.leaf().unwrap(), &root.cas, keyless::now()).is_err());
            }
            Some(why) => {
                let e = verdict.unwrap_err().to_string();
                assert!(
                    e.contains(why) && e.contains("before the signature was logged"),
                    "{mode}: {e}"
                );
            }
        }
    }
}

/// The test CA's certificates carry an SCT from the test CT log (made by
/// the script with Python's `cryptography`, which also checks its own
/// precertificate TBS is what the SCT signed): a good one verifies, with
/// or without SCT extensions; a hostile one is refused, saying why.
#[cfg_attr(
    not(has_mcp_client),
    ignore = "needs the MCP venv's Python (its `cryptography`): run `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
#[test]
fn a_test_ca_certificate_needs_a_good_sct() {
    let work = TempDir::new("keyless-sct");
    let artifact = work.path().join("guard.wasm");
    std::fs::copy(fixtures::GUARD, &artifact).unwrap();
    let max = toolgate::budgets::KEYLESS_MAX_SCT_LIST_BYTES;
    let too_big = "the certificate's SCT list is ";
    let at_most = format!("bytes; at most {max} are read");
    for (sct, expect) in [
        ("good", vec![]),
        ("extensions", vec![]),
        (
            "unknown-log",
            vec!["SCT 0: from a CT log the trusted root does not name"],
        ),
        (
            "outside-validity",
            vec![
                "SCT 0: dated",
                "but the CT log's key (https://ctfe.test) is valid from",
            ],
        ),
        (
            "wrong-signature",
            vec![
                "SCT 0: its signature is not CT log https://ctfe.test's over this certificate's precertificate",
            ],
        ),
        (
            "corrupt",
            vec!["the certificate's SCT list is corrupt: it says 5 bytes but holds"],
        ),
        ("huge", vec![too_big, at_most.as_str()]),
        ("none", vec!["the signing certificate carries no SCT"]),
        (
            "no-ctlogs",
            vec!["the trusted root names no certificate transparency log (`ctlogs`)"],
        ),
    ] {
        let bundle = work.path().join(format!("{sct}.json"));
        let root = work.path().join(format!("{sct}-root.json"));
        let (issuer, subject) = identity_of(&run_signer(&[
            "bundle",
            artifact.to_str().unwrap(),
            bundle.to_str().unwrap(),
            root.to_str().unwrap(),
            "logged-while-valid",
            sct,
        ]));
        let root = TrustedRoot::from_json(&read(&root)).unwrap();
        let b = Bundle::from_json(&read(&bundle)).unwrap();
        let verdict = keyless::verify(
            &b,
            &read(&artifact),
            &root,
            &[exact(&issuer, &subject)],
            keyless::now(),
        );
        if expect.is_empty() {
            assert_eq!(verdict.unwrap().subject, subject, "{sct}");
        } else {
            let e = verdict.unwrap_err().to_string();
            for why in expect {
                assert!(e.contains(why), "{sct}: {e}");
            }
        }
    }
}

/// The OCI path end to end: a guard pushed to a real registry, signed
/// keylessly the way cosign stores it (the `.sig` layer's certificate,
/// chain and bundle annotations; made by the Python script), loads under
/// `[trust] trusted_root` + `identities`; its signer (issuer and subject)
/// is in its status and in `toolgate verify`; another identity, or a
/// signature logged after its certificate expired, fails closed.
#[cfg_attr(
    not(all(has_oci_registry, has_mcp_client)),
    ignore = "needs docker-registry and the MCP venv's Python (its `cryptography`): run `apt-get install docker-registry` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_keyless_cosign_signature_from_a_registry_loads_a_policy() {
    let registry = Registry::start();
    let work = TempDir::new("keyless-oci");
    let state = work.path().join("state");
    for (tag, mode) in [
        ("good", "logged-while-valid"),
        ("late", "logged-after-expiry"),
    ] {
        let reference = registry.reference(&format!("acme/guard:{tag}"));
        let digest = digest_in(&toolgate(&state, &["push", &reference, fixtures::GUARD]).unwrap());
        let root = work.path().join(format!("{tag}-root.json"));
        let (issuer, subject) = identity_of(&run_signer(&[
            "oci",
            &format!("127.0.0.1:{}", registry.port),
            "acme/guard",
            &digest,
            root.to_str().unwrap(),
            mode,
        ]));
        let config = work.path().join(format!("{tag}.toml"));
        let write = |subject: &str| {
            std::fs::write(
                &config,
                format!(
                    "[trust]\ntrusted_root = \"{tag}-root.json\"\nidentities = [{{ issuer = \"{issuer}\", subject = \"{subject}\" }}]\n\n[plugins.g]\nsource = \"{reference}\"\nvars = {{ BEHAVIOR = \"deny-tool:forbidden\" }}\n"
                ),
            )
            .unwrap();
        };
        write(&subject);
        let h = host(&state, &config).await;
        let g = status(&h, "g");
        if tag == "good" {
            assert_eq!(g.state, PluginState::Serving, "{g:?}");
            let signer = g.signer.clone().expect("a signer");
            assert!(
                signer.starts_with(&format!("{issuer} {subject} (keyless")),
                "{signer}"
            );
            let out = Command::new(toolgate_bin())
                .args(["verify", "--config", config.to_str().unwrap(), &reference])
                .env("TOOLGATE_STATE_DIR", &state)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                text.contains(&format!("is signed by {issuer} {subject} (keyless")),
                "{text}"
            );
            drop(h);
            // Another accepted identity: the same signature is refused.
            write("https://github.com/acme/other/.github/workflows/release.yml@refs/tags/v1.0");
            let h = host(&state, &config).await;
            let g = status(&h, "g");
            assert_ne!(g.state, PluginState::Serving, "{g:?}");
            let why = format!("{g:?}");
            assert!(why.contains("is not an accepted identity"), "{why}");
        } else {
            assert_ne!(g.state, PluginState::Serving, "{g:?}");
            let why = format!("{g:?}");
            assert!(why.contains("before the signature was logged"), "{why}");
        }
    }
}

/// cosign 3's default signature format: a Sigstore bundle (a DSSE
/// envelope of an in-toto statement naming the manifest's digest, logged
/// as a `dsse` entry) attached to the manifest as an OCI referrer, written
/// by the Python script the way cosign does (not by toolgate). Debian's
/// docker-registry has no referrers API (it answers 404), so the referrer
/// is found by the referrers tag schema (`sha256-HEX`), as cosign's own
/// client falls back to. A guard so signed loads under `[trust]
/// trusted_root` + `identities`, its signer on record and in `toolgate
/// verify`; a statement naming another digest, a DSSE signature that does
/// not verify, and a referrer whose subject is another manifest are each
/// refused, naming the plugin and the reason. Logged in a Rekor v2 log
/// (timed by a test TSA's RFC 3161 timestamp), as a `hashedrekord` or a
/// `dsse` 0.0.2 entry, it loads with the TSA on record; timestamped after
/// the certificate expired, by a TSA the trusted root does not name, or
/// with a `dsse` entry of another payload, it is refused.
#[cfg_attr(
    not(all(has_oci_registry, has_mcp_client)),
    ignore = "needs docker-registry and the MCP venv's Python (its `cryptography`): run `apt-get install docker-registry` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_cosign_3_bundle_referrer_from_a_registry_loads_a_policy() {
    let registry = Registry::start();
    let work = TempDir::new("keyless-referrer");
    let state = work.path().join("state");
    for (repo, mode, refusal) in [
        ("acme/good", "logged-while-valid", None),
        (
            "acme/other-digest",
            "other-digest",
            Some("the in-toto statement is about sha256:"),
        ),
        (
            "acme/bad-signature",
            "bad-signature",
            Some("the DSSE envelope's signature does not verify"),
        ),
        (
            "acme/other-subject",
            "other-subject",
            Some("it is attached to another manifest"),
        ),
        // Logged in a Rekor v2 log, timed by a TSA's RFC 3161 timestamp.
        ("acme/rekor2", "rekor2", None),
        (
            "acme/rekor2-after-expiry",
            "rekor2-after-expiry",
            Some("a certificate of the path expired at"),
        ),
        (
            "acme/rekor2-untrusted-tsa",
            "rekor2-untrusted-tsa",
            Some("it is signed by a TSA the trusted root does not name"),
        ),
        // A `dsse` 0.0.2 entry (Rekor v2's DSSE kind).
        ("acme/rekor2-dsse", "rekor2-dsse", None),
        (
            "acme/rekor2-dsse-other-payload",
            "rekor2-dsse-other-payload",
            Some("the log entry is for another DSSE payload (SHA2_256 "),
        ),
    ] {
        let reference = registry.reference(&format!("{repo}:1"));
        let digest = digest_in(&toolgate(&state, &["push", &reference, fixtures::GUARD]).unwrap());
        let root = work.path().join(format!("{mode}-root.json"));
        let text = sign_referrer(registry.port, repo, &digest, &root, mode);
        let (issuer, subject) = identity_of(&text);
        assert_eq!(
            text.lines().nth(1),
            Some("tag"),
            "Debian's docker-registry has no referrers API: the tag schema is what is read"
        );
        let trust = format!(
            "trusted_root = \"{mode}-root.json\"\nidentities = [{{ issuer = \"{issuer}\", subject = \"{subject}\" }}]"
        );
        let signer = load_signed_guard(
            work.path(),
            &state,
            mode,
            &trust,
            (&reference, &digest),
            refusal,
        )
        .await;
        if let Some(signer) = signer {
            assert!(
                signer.starts_with(&format!("{issuer} {subject} (keyless")),
                "{signer}"
            );
            assert_eq!(
                signer.ends_with(" by https://tsa.test)"),
                mode.starts_with("rekor2"),
                "{signer}"
            );
        }
    }
}

/// `tests/oci/cosign_keyless_sign.py ARGS…` (the independent signer: see
/// the script for its commands), which must succeed; what it printed.
fn run_signer(args: &[&str]) -> String {
    let out = Command::new(signer_python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("oci/cosign_keyless_sign.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cosign_keyless_sign.py referrer`: signs `digest` of `repo` at the
/// registry on `port` as cosign 3 does (`mode`: see the script), its
/// trusted root written to `root`; what it printed.
fn sign_referrer(port: u16, repo: &str, digest: &str, root: &Path, mode: &str) -> String {
    run_signer(&[
        "referrer",
        &format!("127.0.0.1:{port}"),
        repo,
        digest,
        root.to_str().unwrap(),
        mode,
    ])
}

/// The signer's first line: `ISSUER SUBJECT`.
fn identity_of(printed: &str) -> (String, String) {
    let line = printed.lines().next().unwrap_or_default();
    let (issuer, subject) = line.split_once(' ').expect("ISSUER SUBJECT");
    (issuer.to_string(), subject.to_string())
}

/// The guard at `reference` (signed over `digest`) as plugin `g` under the
/// trust rule `trust` (the `[trust]` table's body, paths relative to
/// `work`): loaded by a host, then `toolgate verify` under the same
/// configuration. With `refusal` `None` both accept it and the signer on
/// record is returned; with `Some(why)` both refuse it saying `why` of the
/// OCI referrer. `name` names the case in failures.
async fn load_signed_guard(
    work: &Path,
    state: &Path,
    name: &str,
    trust: &str,
    (reference, digest): (&str, &str),
    refusal: Option<&str>,
) -> Option<String> {
    let config = work.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "[trust]\n{trust}\n\n[plugins.g]\nsource = \"{reference}\"\nvars = {{ BEHAVIOR = \"deny-tool:forbidden\" }}\n"
        ),
    )
    .unwrap();
    let h = host(state, &config).await;
    let g = status(&h, "g");
    drop(h);
    let verify = Command::new(toolgate_bin())
        .args(["verify", "--config", config.to_str().unwrap(), reference])
        .env("TOOLGATE_STATE_DIR", state)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stdout);
    match refusal {
        None => {
            assert_eq!(g.state, PluginState::Serving, "{name}: {g:?}");
            let signer = g.signer.clone().expect("a signer");
            assert_eq!(verify.status.code(), Some(0), "{name}: {said}");
            assert!(
                said.contains(&format!("{digest} is signed by {signer}"))
                    && said.contains("in a Sigstore bundle attached as an OCI referrer"),
                "{name}: {said}"
            );
            Some(signer)
        }
        Some(why) => {
            assert_ne!(g.state, PluginState::Serving, "{name}: {g:?}");
            let said_status = format!("{g:?}");
            assert!(
                said_status.contains(why) && said_status.contains("OCI referrer"),
                "{name}: {said_status}"
            );
            assert_eq!(verify.status.code(), Some(1), "{name}: {said}");
            assert!(
                said.contains("NOT verified") && said.contains(why),
                "{name}: {said}"
            );
            None
        }
    }
}

/// `cosign sign --key` as cosign 3 signs by default: a Sigstore bundle
/// whose material is a public key hint, attached as a referrer. Loaded
/// under `[trust] keys` alone (the key is the trust, as for the `.sig`
/// format), and with a `trusted_root` too (the log entry checked, naming
/// that key); refused for another key, and for a log the root does not
/// name — each naming the reason.
#[cfg_attr(
    not(all(has_oci_registry, has_mcp_client)),
    ignore = "needs docker-registry and the MCP venv's Python (its `cryptography`): run `apt-get install docker-registry` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_cosign_3_key_based_bundle_referrer_loads_a_policy() {
    let registry = Registry::start();
    let work = TempDir::new("keyed-referrer");
    let state = work.path().join("state");
    // Two signings, each with its own key and its own log (root).
    let mut signed = Vec::new();
    // The third is logged in a Rekor v2 log, timed by a TSA.
    for (repo, mode) in [
        ("acme/keyed", "key"),
        ("acme/other", "key"),
        ("acme/keyed-v2", "rekor2-key"),
    ] {
        let reference = registry.reference(&format!("{repo}:1"));
        let digest = digest_in(&toolgate(&state, &["push", &reference, fixtures::GUARD]).unwrap());
        let root = work.path().join(format!("{}.json", repo.replace('/', "-")));
        sign_referrer(registry.port, repo, &digest, &root, mode);
        signed.push((reference, digest));
    }
    let key_of = |name: &str| {
        PublicKey::from_pem(
            "k",
            &std::fs::read_to_string(work.path().join(name)).unwrap(),
        )
        .unwrap()
    };
    let key = key_of("acme-keyed.json.pub");
    let (reference, digest) = &signed[2];
    let signer = load_signed_guard(
        work.path(),
        &state,
        "key-and-root-v2",
        "keys = [\"acme-keyed-v2.json.pub\"]\ntrusted_root = \"acme-keyed-v2.json\"",
        (reference.as_str(), digest.as_str()),
        None,
    )
    .await;
    assert_eq!(
        signer.as_deref(),
        Some(
            format!(
                "{} (acme-keyed-v2.json.pub, ecdsa-p256)",
                key_of("acme-keyed-v2.json.pub").fingerprint()
            )
            .as_str()
        )
    );
    let (reference, digest) = &signed[0];
    for (name, trust, refusal) in [
        ("key-only", "keys = [\"acme-keyed.json.pub\"]", None),
        (
            "key-and-root",
            "keys = [\"acme-keyed.json.pub\"]\ntrusted_root = \"acme-keyed.json\"",
            None,
        ),
        (
            "other-key",
            "keys = [\"acme-other.json.pub\"]",
            Some("the signature is by no trusted key (the bundle's key hint is"),
        ),
        (
            "other-log",
            "keys = [\"acme-keyed.json.pub\"]\ntrusted_root = \"acme-other.json\"",
            Some("a transparency log the trusted root does not name"),
        ),
    ] {
        let signer = load_signed_guard(
            work.path(),
            &state,
            name,
            trust,
            (reference.as_str(), digest.as_str()),
            refusal,
        )
        .await;
        if let Some(signer) = signer {
            assert_eq!(
                signer,
                format!("{} (acme-keyed.json.pub, ecdsa-p256)", key.fingerprint()),
                "{name}"
            );
        }
    }
}

/// `tests/oci/referrers_front.py` in front of the real registry: the OCI
/// referrers API (which Debian's docker-registry 2.8 lacks) answered from
/// the registry's own referrers tag, and that tag hidden from clients.
struct ReferrersFront {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl ReferrersFront {
    fn start(registry: &Registry, dir: &Path) -> ReferrersFront {
        use std::io::BufRead;
        let log = dir.join("front.log");
        let mut child = Command::new(signer_python())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("oci/referrers_front.py"))
            .arg(registry.port.to_string())
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the referrers front");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the front's port");
        ReferrersFront { child, port, log }
    }
}

impl Drop for ReferrersFront {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A registry with the referrers API: the cosign 3 bundle is found through
/// `GET /v2/NAME/referrers/DIGEST` (the fallback tag is hidden, so nothing
/// else could find it), verified and on record.
#[cfg_attr(
    not(all(has_oci_registry, has_mcp_client)),
    ignore = "needs docker-registry and the MCP venv's Python (its `cryptography`): run `apt-get install docker-registry` and `bash tests/mcp/setup-venv.sh target/tmp/mcp-venv`"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_referrer_is_found_through_the_referrers_api() {
    let registry = Registry::start();
    let work = TempDir::new("referrers-api");
    let front = ReferrersFront::start(&registry, work.path());
    let state = work.path().join("state");
    let reference = format!("oci://127.0.0.1:{}/acme/api:1", front.port);
    let digest = digest_in(&toolgate(&state, &["push", &reference, fixtures::GUARD]).unwrap());
    let root = work.path().join("root.json");
    sign_referrer(front.port, "acme/api", &digest, &root, "key");
    load_signed_guard(
        work.path(),
        &state,
        "api",
        "keys = [\"root.json.pub\"]\ntrusted_root = \"root.json\"",
        (&reference, &digest),
        None,
    )
    .await
    .expect("a signer");
    let asked = std::fs::read_to_string(&front.log).unwrap_or_default();
    assert!(
        asked.contains(&format!("referrers acme/api {digest}")),
        "the referrers API was asked for {digest}: {asked:?}"
    );
}
