//! The trust policy: which keys may sign a plugin pulled from a registry,
//! and whether an unsigned one may load.
//!
//! ```toml
//! [trust]
//! keys = ["keys/publisher.pub"]      # PEM public keys, relative to this file
//! require_signature = true           # default: policies yes, tools no
//!
//! [trust.registries."ghcr.io/acme"]  # a registry/repository prefix
//! keys = ["keys/acme.pub"]           # replaces [trust] keys under it
//! require_signature = true
//!
//! [plugins.fs-tools]
//! source = "oci://ghcr.io/acme/fs-tools:1.2"
//! trust = { keys = ["keys/fs.pub"], require_signature = true }
//! ```
//!
//! The rule of a plugin is its own `trust`, else the longest
//! `[trust.registries]` prefix matching its `REGISTRY/REPOSITORY` (whole
//! path segments), else `[trust]`; each of `keys` and `require_signature`
//! falls back through the same order on its own. Once any of these exists,
//! `require_signature` defaults to true for a component with a policy role
//! (guard, hook, finalizer, observer…) and false for one that is only a
//! tool provider; set, it applies to both. The roles are known once the
//! component is compiled, so the check of the requirement runs there
//! (the host's plugin loader); a policy that fails it fails closed like
//! any policy that fails to load, and an update (a reload, a new tag) that
//! fails it is refused while the version serving keeps serving.
//!
//! Keyless signatures ([`super::keyless`]) are accepted when the rule
//! that applies names a `trusted_root` (a Sigstore `trusted_root.json`,
//! relative to the configuration file) and `identities`:
//!
//! ```toml
//! [trust]
//! trusted_root = "sigstore/trusted_root.json"
//! identities = [
//!   { issuer = "https://token.actions.githubusercontent.com",
//!     subject_glob = "https://github.com/acme/*/.github/workflows/release.yml@refs/tags/*" },
//! ]
//! ```
//!
//! `keys`, `identities` and `trusted_root` each fall back through the
//! levels on their own, like `require_signature`.
//!
//! Key-based Sigstore bundles (`cosign sign --key` since cosign 3) verify
//! with `keys`; when the rule also names a `trusted_root`, their
//! transparency log entry is checked against it (with or without
//! `identities`), else only the key's signature is, as for cosign's `.sig`
//! format.
//!
//! Signatures apply to OCI sources: a plugin file is pinned by its path
//! and `sha256`, and is not asked for one.

use std::collections::BTreeMap;
use std::path::Path;

use toolgate_schema::derive::Schema;

use super::OciRef;
use super::keyless::{Identity, TrustedRoot};
use super::signature::{self, KeylessPolicy, PublicKey, Signature, Signer};
use toolgate_config::path::TrustFile;

/// `[trust]`.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct TrustConfig {
    /// The keys of every OCI plugin no narrower rule names keys for.
    pub keys: Option<Vec<TrustFile>>,
    /// Whether an unsigned plugin may load (default: policies no, tools
    /// yes; set, it applies to both).
    pub require_signature: Option<bool>,
    /// Keyless signers accepted (issuer and subject).
    pub identities: Option<Vec<Identity>>,
    /// The Sigstore trusted root keyless signatures are verified against,
    /// relative to the configuration file.
    pub trusted_root: Option<TrustFile>,
    /// Rules by `REGISTRY/REPOSITORY` prefix.
    #[serde(default)]
    pub registries: BTreeMap<String, TrustRule>,
}

impl TrustConfig {
    /// The problems of `[trust]`, its files read relative to `base`.
    pub fn check(&self, base: &Path, problems: &mut Vec<String>) {
        check_rule("/trust", &self.rule(), base, problems);
        for (prefix, rule) in &self.registries {
            check_rule(&format!("/trust/registries/{prefix}"), rule, base, problems);
        }
    }

    /// Its top-level rule.
    pub fn rule(&self) -> TrustRule {
        TrustRule {
            keys: self.keys.clone(),
            require_signature: self.require_signature,
            identities: self.identities.clone(),
            trusted_root: self.trusted_root.clone(),
        }
    }
}

/// Keys and requirement, at one level (`[trust]`, a registry prefix, a
/// plugin).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct TrustRule {
    /// PEM public keys (P-256 or Ed25519), relative to the configuration
    /// file.
    pub keys: Option<Vec<TrustFile>>,
    /// Whether an unsigned plugin may load (default: policies no, tools
    /// yes; set, it applies to both).
    pub require_signature: Option<bool>,
    /// Keyless signers accepted (issuer and subject).
    pub identities: Option<Vec<Identity>>,
    /// The Sigstore trusted root keyless signatures are verified against,
    /// relative to the configuration file.
    pub trusted_root: Option<TrustFile>,
}

/// Which roles must be signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// A component with a policy role.
    pub policies: bool,
    /// A component that only provides tools.
    pub tools: bool,
}

/// What the trust policy found of one plugin's signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureCheck {
    /// Who signed it, or why no signature was accepted.
    pub signer: Result<Signer, String>,
    pub require: Requirement,
}

impl SignatureCheck {
    /// Why a component of these roles may not load, if it may not.
    pub fn refusal(&self, policy: bool, tool: bool) -> Option<String> {
        let why = self.signer.as_ref().err()?;
        let required = (policy && self.require.policies) || (tool && self.require.tools);
        required.then(|| {
            format!(
                "a signature is required{} and {why}",
                if policy && self.require.policies {
                    " (it is a policy: `require_signature` defaults to true for policies under `[trust]`)"
                } else {
                    ""
                }
            )
        })
    }
}

/// The problems of a trust rule at `at` (`/trust`, `/plugins/NAME/trust`),
/// its key files read relative to `base`.
pub fn check_rule(at: &str, rule: &TrustRule, base: &Path, problems: &mut Vec<String>) {
    for (i, identity) in rule.identities.iter().flatten().enumerate() {
        if let Some(why) = identity.problem() {
            problems.push(format!("{at}/identities/{i}: {why}"));
        }
    }
    if let Some(path) = &rule.trusted_root
        && let Err(e) = read_trusted_root(base, path)
    {
        problems.push(format!("{at}/trusted_root: {e}"));
    }
    for (i, path) in rule.keys.iter().flatten().enumerate() {
        if let Err(e) = read_key(base, path) {
            problems.push(format!("{at}/keys/{i}: {e}"));
        }
    }
}

/// Whether any trust policy is configured.
pub fn configured(trust: Option<&TrustConfig>, plugin: Option<&TrustRule>) -> bool {
    trust.is_some() || plugin.is_some()
}

/// Check `signatures` of the manifest `digest` of `reference` under the
/// rule that applies; `None` when no trust policy is configured at all.
pub fn check(
    trust: Option<&TrustConfig>,
    plugin: Option<&TrustRule>,
    base: &Path,
    reference: &OciRef,
    digest: &str,
    signatures: &[Signature],
) -> Option<SignatureCheck> {
    if !configured(trust, plugin) {
        return None;
    }
    let repository = format!("{}/{}", reference.registry(), reference.repository());
    let registry = trust.and_then(|t| {
        t.registries
            .iter()
            .filter(|(prefix, _)| {
                let prefix = prefix.trim_end_matches('/');
                repository == prefix || repository.starts_with(&format!("{prefix}/"))
            })
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, r)| r)
    });
    let top = trust.map(TrustConfig::rule);
    let levels = [plugin, registry, top.as_ref()];
    let keys = levels.iter().flatten().find_map(|r| r.keys.as_ref());
    let identities = levels.iter().flatten().find_map(|r| r.identities.as_ref());
    let trusted_root = levels
        .iter()
        .flatten()
        .find_map(|r| r.trusted_root.as_ref());
    let require = match levels.iter().flatten().find_map(|r| r.require_signature) {
        Some(r) => Requirement {
            policies: r,
            tools: r,
        },
        None => Requirement {
            policies: true,
            tools: false,
        },
    };
    let mut trusted = Vec::new();
    let mut unreadable = Vec::new();
    for path in keys.into_iter().flatten() {
        match read_key(base, path) {
            Ok(k) => trusted.push(k),
            Err(e) => unreadable.push(e),
        }
    }
    let keyless = match (trusted_root, identities) {
        // A root with no identities still checks the log entries of
        // key-based bundles; keyless signatures are then refused, saying
        // that no identity is accepted.
        (Some(path), identities) => match read_trusted_root(base, path) {
            Ok(root) => Some(KeylessPolicy {
                root,
                identities: identities.cloned().unwrap_or_default(),
            }),
            // Fail closed: without the root a key-based bundle's log entry
            // would go unchecked, not only keyless signatures unverified.
            Err(e) => {
                return Some(SignatureCheck {
                    signer: Err(format!(
                        "the trusted root cannot be read, so no signature is verified: {e}"
                    )),
                    require,
                });
            }
        },
        (None, Some(_)) => {
            unreadable.push("`identities` are set but no `trusted_root` is".into());
            None
        }
        (None, None) => None,
    };
    let signer =
        signature::verify_with(signatures, digest, &trusted, keyless.as_ref()).map_err(|e| {
            if unreadable.is_empty() {
                e.0
            } else {
                format!(
                    "{} (and the trust policy is incomplete: {})",
                    e.0,
                    unreadable.join("; ")
                )
            }
        });
    Some(SignatureCheck { signer, require })
}

/// Read and parse a trusted root file (`base` joined to a relative `path`).
pub fn read_trusted_root(base: &Path, path: &Path) -> Result<TrustedRoot, String> {
    let full = base.join(path);
    let bytes = read_bounded(&full, crate::budgets::KEYLESS_MAX_TRUSTED_ROOT_BYTES)?;
    TrustedRoot::from_json(&bytes).map_err(|e| format!("{}: {e}", full.display()))
}

/// A file's bytes, refused past `max` without reading it whole.
pub fn read_bounded(path: &Path, max: usize) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)
        .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
    if bytes.len() > max {
        return Err(format!(
            "{}: is larger than {max} bytes (the limit for this file)",
            path.display()
        ));
    }
    Ok(bytes)
}

/// Read and parse one key file (`base` joined to a relative `path`).
pub fn read_key(base: &Path, path: &Path) -> Result<PublicKey, String> {
    let full = base.join(path);
    let text = std::fs::read_to_string(&full)
        .map_err(|e| format!("{}: cannot be read: {e}", full.display()))?;
    PublicKey::from_pem(&path.display().to_string(), &text).map_err(|e| {
        let e = e.to_string();
        // Name the whole path, not only the configured one.
        format!(
            "{}{}",
            full.display(),
            e.strip_prefix(&path.display().to_string()).unwrap_or(&e)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{Algorithm, SigningKey};
    use base64::Engine as _;

    #[test]
    fn the_narrowest_rule_decides_and_policies_default_to_required() {
        let dir = std::env::temp_dir().join(format!("toolgate-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let acme = SigningKey::from_pem("a", &SigningKey::generate_pem(Algorithm::P256)).unwrap();
        let other =
            SigningKey::from_pem("o", &SigningKey::generate_pem(Algorithm::Ed25519)).unwrap();
        std::fs::write(dir.join("acme.pub"), acme.public().to_pem()).unwrap();
        std::fs::write(dir.join("other.pub"), other.public().to_pem()).unwrap();
        let digest = format!("sha256:{}", "ab".repeat(32));
        let b64 = base64::engine::general_purpose::STANDARD;
        let payload = signature::payload("127.0.0.1:5000/acme/guard", &digest);
        let sigs = vec![Signature::keyed(
            b64.encode(&payload),
            b64.encode(acme.sign(&payload)),
        )];
        let r = OciRef::parse("oci://127.0.0.1:5000/acme/guard:1").unwrap();
        let trust = TrustConfig {
            keys: Some(vec!["other.pub".into()]),
            registries: [(
                "127.0.0.1:5000/acme".to_string(),
                TrustRule {
                    keys: Some(vec!["acme.pub".into()]),
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        };
        let c = check(Some(&trust), None, &dir, &r, &digest, &sigs).unwrap();
        assert_eq!(c.signer.as_ref().unwrap().key, "acme.pub");
        assert_eq!(c.refusal(true, false), None);
        // Outside the prefix ("acme-evil" is not under "acme"): [trust] keys.
        let evil = OciRef::parse("oci://127.0.0.1:5000/acme-evil/guard:1").unwrap();
        let c = check(Some(&trust), None, &dir, &evil, &digest, &sigs).unwrap();
        let why = c.refusal(true, false).unwrap();
        assert!(why.contains("by no trusted key"), "{why}");
        assert_eq!(
            c.refusal(false, true),
            None,
            "tools default to not required"
        );
        // The plugin's own rule wins.
        let own = TrustRule {
            require_signature: Some(true),
            ..Default::default()
        };
        let c = check(Some(&trust), Some(&own), &dir, &evil, &digest, &[]).unwrap();
        assert!(c.refusal(false, true).unwrap().contains("not signed"));
        assert!(check(None, None, &dir, &r, &digest, &sigs).is_none());
        // A trusted root that cannot be read (gone since the configuration
        // was checked) fails closed: even a good key signature is refused,
        // since what the root would check of a key-based bundle cannot be.
        let gone = TrustRule {
            keys: Some(vec!["acme.pub".into()]),
            trusted_root: Some("gone.json".into()),
            ..Default::default()
        };
        let c = check(None, Some(&gone), &dir, &r, &digest, &sigs).unwrap();
        let why = c.refusal(true, false).unwrap();
        assert!(
            why.contains("the trusted root cannot be read") && why.contains("gone.json"),
            "{why}"
        );
        let mut problems = Vec::new();
        check_rule(
            "/trust",
            &TrustRule {
                keys: Some(vec!["missing.pub".into()]),
                identities: Some(vec![Identity {
                    issuer: "https://accounts.google.com".into(),
                    subject: Some("a@example.com".into()),
                    subject_glob: Some("*@example.com".into()),
                }]),
                trusted_root: Some("missing.json".into()),
                ..Default::default()
            },
            &dir,
            &mut problems,
        );
        assert!(
            problems[0].starts_with("/trust/identities/0: has both"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("/trust/trusted_root: ")
                && problems[1].contains("missing.json")
        );
        assert!(problems[2].starts_with("/trust/keys/0: ") && problems[2].contains("missing.pub"));
    }
}
