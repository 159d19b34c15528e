//! Keyless signatures: a Sigstore bundle (or cosign's keyless signature
//! layer) verified offline against a trusted root the operator provides,
//! and the signer's identity matched against `[trust] identities`.
//!
//! A keyless signer has no long-lived key: an OIDC provider vouches for an
//! identity (an e-mail address, a CI workflow's URI), Fulcio issues a
//! ten-minute certificate for it, the signer signs and the signature is
//! recorded in a transparency log (Rekor). What is checked here, with no
//! network, in this order (each refusal says which step failed):
//!
//! 1. the bundle's shape ([`bundle`]): version 0.1–0.3, one log entry, a
//!    `messageSignature` or a DSSE envelope of one signature, a leaf
//!    certificate, no root certificate in the bundle, sizes within
//!    [`crate::budgets`];
//! 2. the log entry ([`tlog`]): it is from a log the trusted root names;
//!    its signed entry timestamp verifies with that log's key; its
//!    `integratedTime` is inside the key's `validFor` and not in the
//!    future; its inclusion proof and checkpoint verify (required for
//!    bundles 0.2 and 0.3, checked when a 0.1 bundle has one); its body
//!    names this certificate, this signature and this artifact's digest;
//! 3. the certificate ([`cert`]): a path to a CA of the trusted root,
//!    built at `integratedTime` (a certificate expired now but valid when
//!    it was logged verifies; one logged outside its validity does not),
//!    with the code-signing extended key usage;
//! 4. its certificate transparency ([`sct`]): one of the SCTs embedded in
//!    the leaf is signed by a CT log of the trusted root (`ctlogs`), over
//!    the precertificate this CA issued, at a time inside that log's
//!    `validFor` (a trusted root with no `ctlogs` verifies nothing, as in
//!    Sigstore's clients);
//! 5. the signature, with the certificate's key: over the artifact's
//!    bytes, or over the DSSE pre-authentication encoding (PAE) of the
//!    envelope's payload — then the payload must be an in-toto statement
//!    one of whose subjects has the artifact's SHA-256 (for an OCI plugin,
//!    the manifest's digest);
//! 6. the identity: one of `identities` whose `issuer` is the
//!    certificate's OIDC issuer and whose `subject` (exact) or
//!    `subject_glob` matches one of its e-mail or URI SANs.
//!
//! Not checked: RFC 3161
//! timestamps (so Rekor v2 entries, which carry no `integratedTime`, are
//! refused), revocation; nothing is looked up online. A DSSE envelope's
//! `dsse` entry also records an envelope hash; like sigstore-python and
//! sigstore-go, it is not compared (the envelope's JSON has no canonical
//! form), the payload hash and signature are.

pub mod bundle;
pub mod cert;
pub mod root;
pub mod sct;
pub mod tlog;

use sha2::{Digest, Sha256};

pub use bundle::Bundle;
pub use root::TrustedRoot;

/// One accepted identity: `{ issuer = "…", subject = "…" }` or
/// `{ issuer = "…", subject_glob = "…" }`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The OIDC issuer, exactly (`https://token.actions.githubusercontent.com`,
    /// `https://accounts.google.com`…).
    pub issuer: String,
    /// The certificate's SAN, exactly (an e-mail address or a URI).
    pub subject: Option<String>,
    /// A glob over the SAN: `*` and `?` do not cross a `/`, `**` does;
    /// `{a,b}` and `[…]` as in globset.
    pub subject_glob: Option<String>,
}

impl Identity {
    /// Why this identity rule is malformed, if it is.
    pub fn problem(&self) -> Option<String> {
        match (&self.subject, &self.subject_glob) {
            (Some(_), Some(_)) => Some("has both `subject` and `subject_glob`; name one".into()),
            (None, None) => Some("has neither `subject` nor `subject_glob`".into()),
            (None, Some(g)) => glob(g).err(),
            (Some(_), None) if self.issuer.is_empty() => Some("has an empty `issuer`".into()),
            _ => None,
        }
    }

    fn matches(&self, issuer: &str, san: &str) -> bool {
        if self.issuer != issuer {
            return false;
        }
        match (&self.subject, &self.subject_glob) {
            (Some(s), None) => s == san,
            (None, Some(g)) => glob(g).is_ok_and(|m| m.is_match(san)),
            _ => false,
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.subject, &self.subject_glob) {
            (Some(s), _) => write!(f, "{} {}", self.issuer, s),
            (_, Some(g)) => write!(f, "{} {} (glob)", self.issuer, g),
            _ => write!(f, "{} (no subject)", self.issuer),
        }
    }
}

fn glob(pattern: &str) -> Result<globset::GlobMatcher, String> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("`subject_glob` {pattern:?} is not a glob: {e}"))
}

/// Who signed, keylessly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeylessSigner {
    /// The OIDC issuer the certificate names.
    pub issuer: String,
    /// The SAN that matched an accepted identity.
    pub subject: String,
    /// `sha256:HEX` of the signing certificate's DER.
    pub certificate: String,
    /// The transparency log entry's index and time.
    pub log_index: u64,
    pub integrated_time: i64,
}

impl std::fmt::Display for KeylessSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} (keyless: certificate {}, log index {} at {})",
            self.issuer,
            self.subject,
            self.certificate,
            self.log_index,
            crate::clock::rfc3339(self.integrated_time)
        )
    }
}

/// What a bundle is checked to be about.
#[derive(Clone, Copy, Debug)]
pub enum Artifact<'a> {
    /// The artifact's bytes (a message signature is over them).
    Bytes(&'a [u8]),
    /// Only its SHA-256 (an OCI manifest's digest): a DSSE statement can
    /// name it; a message signature cannot be checked against it.
    Sha256([u8; 32]),
}

/// Verify `bundle` over `artifact` against `root` and `identities`, at
/// `now` (seconds since the epoch: an entry logged later is refused).
pub fn verify(
    bundle: &Bundle,
    artifact: &[u8],
    root: &TrustedRoot,
    identities: &[Identity],
    now: i64,
) -> Result<KeylessSigner, String> {
    verify_artifact(bundle, Artifact::Bytes(artifact), root, identities, now)
}

/// [`verify`], of an [`Artifact`] given by its bytes or its digest.
pub fn verify_artifact(
    bundle: &Bundle,
    artifact: Artifact<'_>,
    root: &TrustedRoot,
    identities: &[Identity],
    now: i64,
) -> Result<KeylessSigner, String> {
    let entry = &bundle.entry;
    // cosign's chain annotation names the root by design; a Sigstore
    // bundle must not (its client specification). Neither is used.
    if bundle.version != bundle::Version::CosignAnnotations
        && bundle.extra.iter().any(|c| cert::is_self_issued(c))
    {
        return Err(
            "the bundle carries a root certificate; roots come from the trusted root only".into(),
        );
    }
    let log = tlog::log_for(&root.tlogs, entry)?;
    let Some(time) = entry.integrated_time.filter(|t| *t > 0) else {
        return Err(
            "the log entry has no integratedTime (a Rekor v2 entry, timed by an RFC 3161 timestamp: not supported)"
                .into(),
        );
    };
    if entry.set.is_none() {
        return Err(
            "the log entry has no signed entry timestamp (inclusion promise), so its time is not signed (RFC 3161 timestamps are not supported)"
                .into(),
        );
    }
    tlog::verify_set(log, entry)?;
    if !log.valid.contains(time) {
        return Err(format!(
            "the entry was logged at {} but the log's key ({}) is {}",
            crate::clock::rfc3339(time),
            log.name,
            log.valid
        ));
    }
    if time > now + crate::budgets::KEYLESS_CLOCK_SKEW_SECS {
        return Err(format!(
            "the entry's integratedTime {} is in the future",
            crate::clock::rfc3339(time)
        ));
    }
    match (&entry.proof, bundle.version) {
        (Some(p), bundle::Version::V01) if p.checkpoint.is_none() => {}
        (Some(p), _) => tlog::verify_inclusion(log, p, &entry.body)?,
        (None, bundle::Version::V01 | bundle::Version::CosignAnnotations) => {}
        (None, _) => {
            return Err(
                "the bundle (version 0.2 or later) has no inclusion proof; one is required".into(),
            );
        }
    }
    let digest: [u8; 32] = match artifact {
        Artifact::Bytes(bytes) => Sha256::digest(bytes).into(),
        Artifact::Sha256(d) => d,
    };
    if let Some(d) = &bundle.message_digest
        && d.as_slice() != digest
    {
        return Err(format!(
            "the bundle's message digest is not the artifact's (sha256 {})",
            bundle::hex(&digest)
        ));
    }
    match &bundle.dsse {
        None => tlog::check_body(entry, &bundle.leaf, &bundle.signature, &digest)?,
        Some(dsse) => tlog::check_dsse_body(entry, &bundle.leaf, &bundle.signature, dsse)?,
    }
    let ca = cert::verify_path(&bundle.leaf, &root.cas, time)?;
    sct::verify(&bundle.leaf, &root.cas[ca], &root.ctlogs)?;
    match (&bundle.dsse, artifact) {
        (None, Artifact::Bytes(bytes)) => {
            if !cert::verifies(&bundle.leaf, bytes, &bundle.signature) {
                return Err(
                    "the signature does not verify over the artifact with the certificate's key"
                        .into(),
                );
            }
        }
        (None, Artifact::Sha256(_)) => {
            return Err(
                "the bundle holds a message signature, which is over an artifact's bytes; what is verified here is a digest (an OCI manifest), which a DSSE in-toto statement names"
                    .into(),
            );
        }
        (Some(dsse), _) => {
            if !cert::verifies(&bundle.leaf, &dsse.pae(), &bundle.signature) {
                return Err(
                    "the DSSE envelope's signature does not verify (over its pre-authentication encoding) with the certificate's key"
                        .into(),
                );
            }
            let statement = dsse.statement()?;
            if !statement.names(&digest) {
                return Err(format!(
                    "the in-toto statement is about {}, not this artifact (sha256:{})",
                    statement.named(),
                    bundle::hex(&digest)
                ));
            }
        }
    }
    let id = cert::identity(&bundle.leaf)?;
    let issuer = id
        .issuer
        .ok_or("the certificate names no OIDC issuer (no Fulcio issuer extension)")?;
    if identities.is_empty() {
        return Err("no identity is accepted (`[trust] identities` is empty)".into());
    }
    for san in &id.sans {
        if identities.iter().any(|i| i.matches(&issuer, san)) {
            return Ok(KeylessSigner {
                issuer,
                subject: san.clone(),
                certificate: crate::oci::sha256_digest(&bundle.leaf),
                log_index: entry.log_index,
                integrated_time: time,
            });
        }
    }
    Err(format!(
        "the signer {issuer} {} is not an accepted identity (accepted: {})",
        if id.sans.is_empty() {
            "(no SAN)".to_string()
        } else {
            id.sans.join(", ")
        },
        identities
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// Seconds since the epoch, now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
