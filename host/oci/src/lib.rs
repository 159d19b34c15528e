//! Plugins from OCI registries — distribution and trust: `[plugins.NAME]
//! source = "oci://…"`, `toolgate pull` and `toolgate push`, and the
//! `[trust]` policy their signatures are verified against. A crate of its
//! own: what it parses comes from registries and bundles, and it needs
//! nothing of the runtime (the host re-exports it as `toolgate::oci`).
//!
//! A third party publishes a component to a registry; the operator names it
//! by reference and the host runs the bytes the registry served *at pull
//! time*, by digest:
//!
//! * **The layout** ([`layout`]) is the one the component ecosystem uses
//!   (`wkg oci push`, the CNCF TAG Runtime "Wasm OCI artifact"): an image
//!   manifest whose config has the media type
//!   `application/vnd.wasm.config.v0+json` and whose one layer is the
//!   component, `application/wasm`. A component pushed with `wkg` loads
//!   here; one pushed by `toolgate push` pulls with `wkg`.
//! * **The protocol** is the ORAS project's `oci-client` (authentication,
//!   blob streaming and digest checks, push). One request is ours
//!   ([`client`]): the manifest GET, because `oci-client` reads a manifest
//!   body whole into memory whatever its size; ours stops at
//!   [`crate::budgets::OCI_MAX_MANIFEST_BYTES`] and checks the bytes
//!   against the digest asked for (or, for a tag, the registry's
//!   `Docker-Content-Digest`).
//! * **The store** ([`store`]) keeps what was pulled under the state
//!   directory (outside every grant, owner-only), addressed by digest, and
//!   checks every blob against its digest each time it is read. A tag is
//!   resolved to a manifest digest when it is pulled; that digest is what
//!   runs, what `toolgate plugins` shows and what the audit record names.
//!   Starting needs no network once a reference was pulled: the store
//!   serves it, whether the registry is up or not. A later `toolgate pull`
//!   of the same tag moves it to the new digest; the next reload loads that
//!   version through the same checks as a changed file (its grant, the
//!   no-escalation check), and a refused update leaves the old one serving.
//! * **The bounds** (manifest size, layer count, layer size, redirects,
//!   total time) are in [`crate::budgets`]; each refusal names the
//!   reference and the limit.
//!
//! Plain HTTP is used only for a loopback registry (`localhost`,
//! `127.x.x.x`) or one listed in `[oci] insecure_registries`;
//! every other registry is HTTPS (rustls, the system's roots).
//!
//! Signatures ([`signature`], [`keyless`], [`referrers`], [`trust`]): a
//! pull fetches the cosign signatures of the manifest's digest with it
//! (bounded, into the store) — key-based ones, keyless ones with their
//! Fulcio certificate and Rekor entry under the `.sig` tag, and the
//! Sigstore bundles (DSSE) cosign 3 attaches as OCI referrers; every load verifies them, offline, against the
//! `[trust]` policy (keys; a Sigstore trusted root and accepted
//! identities), and the signer is what `toolgate plugins` and the audit
//! record name.

pub mod budgets;
pub mod client;
pub mod keyless;
pub mod layout;
pub mod referrers;
pub mod signature;
pub mod store;
pub mod time;
mod tls;
pub mod trust;

use std::path::PathBuf;

pub use client::Client;
pub use store::{Store, Stored};

/// `[oci]`: how OCI registries are reached (see the crate docs).
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    serde::Deserialize,
    serde::Serialize,
    toolgate_schema::derive::Schema,
)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct OciConfig {
    /// Registries (`host` or `host:port`) reached over plain HTTP; a
    /// loopback registry (`localhost`, `127.x.x.x`) always is.
    #[serde(default)]
    pub insecure_registries: Vec<String>,
    /// Time one pull or push may take in all, in milliseconds (default
    /// [`crate::budgets::OCI_TIMEOUT_MS`]).
    pub timeout_ms: Option<u64>,
}

impl OciConfig {
    /// The problems of `[oci]`.
    pub fn check(&self, problems: &mut Vec<String>) {
        toolgate_config::positive("/oci/timeout_ms", self.timeout_ms, problems);
    }
}

/// The scheme of an OCI source in the configuration.
pub const SCHEME: &str = "oci://";

/// Why an OCI reference, pull, push or stored artifact was refused.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(
        "{reference:?} is not an OCI reference: {why} (write oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:HEX)"
    )]
    Reference { reference: String, why: String },
    #[error("{reference}: {what}")]
    Registry {
        reference: String,
        what: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("{reference}: refused: {why}")]
    Refused { reference: String, why: String },
    #[error(
        "{reference}: the registry took longer than {ms} ms in all (a stalled or dripping registry; `[oci] timeout_ms` raises the limit)"
    )]
    Timeout { reference: String, ms: u64 },
    #[error(
        "{reference} is not in the local OCI store {}: run `toolgate pull {reference}` (or start with the registry reachable)", .store.display()
    )]
    NotPulled { reference: String, store: PathBuf },
    #[error("the local OCI store: {path}: {what}", path = .path.display())]
    Store {
        path: PathBuf,
        what: String,
        #[source]
        source: Option<std::io::Error>,
    },
}

/// An OCI reference with an explicit registry and a tag or a digest:
/// `oci://ghcr.io/acme/fs-tools:1.2`, `oci://127.0.0.1:5000/x@sha256:…`.
///
/// The registry must be named (no implicit Docker Hub), the tag or digest
/// must be given (no implicit `latest`), and a digest must be `sha256`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciRef {
    inner: oci_client::Reference,
}

impl OciRef {
    /// Parse `oci://REGISTRY/REPOSITORY:TAG` or `…@sha256:HEX` (the
    /// `oci://` prefix may be left out on the command line).
    pub fn parse(text: &str) -> Result<OciRef, OciError> {
        let bad = |why: &str| OciError::Reference {
            reference: text.to_string(),
            why: why.to_string(),
        };
        let rest = text.strip_prefix(SCHEME).unwrap_or(text);
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(bad("it names no repository"));
        };
        let looks_like_host =
            registry.contains('.') || registry.contains(':') || registry == "localhost";
        if !looks_like_host {
            return Err(bad(&format!(
                "`{registry}` is not a registry host (name it, e.g. ghcr.io/{rest})"
            )));
        }
        let last = path.rsplit('/').next().unwrap_or_default();
        if !last.contains(':') && !last.contains('@') {
            return Err(bad(
                "it has neither a tag (`:TAG`) nor a digest (`@sha256:…`)",
            ));
        }
        let inner = oci_client::Reference::try_from(rest).map_err(|e| bad(&e.to_string()))?;
        if let Some(d) = inner.digest() {
            let hex = d.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad("its digest is not sha256:<64 hex digits>"));
            }
        }
        Ok(OciRef { inner })
    }

    /// The registry (`host` or `host:port`).
    pub fn registry(&self) -> &str {
        self.inner.resolve_registry()
    }

    /// The repository within the registry.
    pub fn repository(&self) -> &str {
        self.inner.repository()
    }

    /// The tag, if the reference has one.
    pub fn tag(&self) -> Option<&str> {
        self.inner.tag()
    }

    /// The digest (`sha256:…`), if the reference pins one.
    pub fn digest(&self) -> Option<&str> {
        self.inner.digest()
    }

    /// The same repository at `digest`.
    pub fn at_digest(&self, digest: &str) -> OciRef {
        OciRef {
            inner: oci_client::Reference::with_digest(
                self.inner.registry().to_string(),
                self.inner.repository().to_string(),
                digest.to_string(),
            ),
        }
    }

    /// Whether the registry is on this machine (plain HTTP is allowed).
    pub fn is_loopback(&self) -> bool {
        let host = self.registry();
        let host = match host.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    pub(crate) fn inner(&self) -> &oci_client::Reference {
        &self.inner
    }
}

impl std::fmt::Display for OciRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SCHEME}{}", self.inner.whole())
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut out = String::from("sha256:");
    for b in Sha256::digest(bytes) {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_registry_and_tag_or_digest() {
        let r = OciRef::parse("oci://127.0.0.1:5000/acme/guard:1.0").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "acme/guard");
        assert_eq!(r.tag(), Some("1.0"));
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/acme/guard:1.0");
        let d = format!("sha256:{}", "ab".repeat(32));
        let p = OciRef::parse(&format!("ghcr.io/acme/guard@{d}")).unwrap();
        assert_eq!(p.digest(), Some(d.as_str()));
        assert!(!p.is_loopback());
        // oci-spec's reference grammar has no IPv6 literals.
        assert!(OciRef::parse("oci://[::1]:5000/x:1").is_err());
        assert!(
            OciRef::parse("oci://127.0.0.2:5000/x:1")
                .unwrap()
                .is_loopback()
        );
        assert!(OciRef::parse("oci://localhost/x:1").unwrap().is_loopback());
        for (text, why) in [
            ("oci://acme/guard:1.0", "not a registry host"),
            ("oci://ghcr.io/acme/guard", "neither a tag"),
            ("oci://ghcr.io", "no repository"),
            (
                "oci://ghcr.io/acme/guard@sha256:abc",
                "not an OCI reference",
            ),
            (
                "oci://ghcr.io/acme/guard@sha512:abc",
                "not an OCI reference",
            ),
            ("oci://ghcr.io/Acme/guard:1", "not an OCI reference"),
        ] {
            let e = OciRef::parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
