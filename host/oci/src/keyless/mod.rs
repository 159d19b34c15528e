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
//! 2. the log entry ([`tlog`]) and the time: the entry is from a log the
//!    trusted root names; a Rekor v1 entry's signed entry timestamp
//!    verifies with that log's key, making its `integratedTime` a signed
//!    time; each RFC 3161 timestamp the bundle carries ([`tsa`]) verifies
//!    with a timestamp authority of the trusted root over the signature,
//!    giving another — at least one signed time is required (a Rekor v2
//!    entry has no `integratedTime`: its bundle needs a timestamp); each
//!    is inside the log key's `validFor` and not in the future; the
//!    inclusion proof and checkpoint verify (required for bundles 0.2 and
//!    0.3 and for Rekor v2 entries, checked when a 0.1 bundle has one);
//!    the body (Rekor v1's, or v2's `hashedrekord` or `dsse` 0.0.2) names this
//!    certificate, this signature and this artifact's digest;
//! 3. the certificate ([`cert`]): a path to a CA of the trusted root,
//!    built at each signed time (a certificate expired now but valid when
//!    it was logged or timestamped verifies; one logged or timestamped
//!    outside its validity does not), with the code-signing extended key
//!    usage;
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
//! A **key-based** bundle (`cosign sign --key` since cosign 3, `cosign
//! sign-blob --key --bundle`) carries a public key hint instead of a
//! certificate: [`verify_keyed`] checks its signature (step 5) with the
//! operator's keys — the hint is not trusted, every key is tried — and,
//! with a trusted root, its log entry (step 2, the body naming that key);
//! steps 3, 4 and 6 have no certificate to apply to.
//!
//! **Parsers.** Every DER structure — the certificates, their extensions
//! and SCT lists, the RFC 3161 `TimeStampResp`, its CMS `SignedData`,
//! `SignerInfo` and `TSTInfo` — is decoded by RustCrypto's maintained
//! crates, strict DER, on the `der` 0.7 already in the tree: `x509-cert`
//! 0.2 (with its `sct` extension), `cms` 0.2, `x509-tsp` 0.1 (and `cmpv2`
//! for its status), `const-oid`'s named OIDs. Nothing here walks DER by
//! tag bytes. rustls-webpki keeps what it is for: building a certificate
//! path at a time, and verifying signatures with `ring`. What is still
//! put together by hand is what no crate offers: the bytes a CT log signs
//! (RFC 6962's `digitally-signed` struct, [`sct`]), the Merkle inclusion
//! proof and the signed-note checkpoint ([`tlog`]), and the JSON of the
//! bundle, the trusted root and Rekor's bodies ([`bundle`], [`root`],
//! [`tlog`]: serde_json values, every size bounded).
//!
//! `sigstore-verify` (sigstore-rust) was considered and not taken: its
//! signatures need `aws-lc-rs` (a C library built with cmake, which this
//! tree keeps out: TLS is rustls on `ring`) or a `CryptoProvider` written
//! here over `ring`, installed process-wide; it adds eight `sigstore-*`
//! crates, `jiff`, `tls_codec` and a JSON canonicalizer, at a 0.x version
//! that moves fast; and its verdicts are its own where this module's are
//! documented and tested (a timestamp that does not verify refuses the
//! bundle, key-based bundles with and without a root, the limits of
//! [`crate::budgets`]). It is built on the same RustCrypto crates used
//! here, which carry the parsing it would have brought.
//!
//! Errors are typed: [`Error`] here, one enum per step
//! ([`BundleError`], [`RootError`], [`TlogError`], [`TsaError`],
//! [`CertError`], [`SctError`]), each message saying which step failed.
//!
//! Not checked: revocation; nothing is looked up online. A DSSE envelope's
//! `dsse` entry also records an envelope hash; like sigstore-python and
//! sigstore-go, it is not compared (the envelope's JSON has no canonical
//! form), the payload hash and signature are.

pub mod bundle;
pub mod cert;
pub mod root;
pub mod sct;
pub mod tlog;
pub mod tsa;

use sha2::{Digest, Sha256};

pub use bundle::{Bundle, BundleError, StatementError};
pub use cert::CertError;
pub use root::{RootError, TrustedRoot};
pub use sct::SctError;
pub use tlog::TlogError;
pub use tsa::TsaError;

/// Why a bundle does not verify: a step's own error, or this module's.
/// Each message says which step failed (the docs and tests quote them).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error(transparent)]
    Statement(#[from] StatementError),
    #[error(transparent)]
    Log(#[from] TlogError),
    #[error(transparent)]
    Certificate(#[from] CertError),
    #[error(transparent)]
    Sct(#[from] SctError),
    #[error("RFC 3161 timestamp {index} of the bundle is refused: {why}")]
    Timestamp { index: usize, why: TsaError },
    #[error(
        "the bundle is signed with a key (a public key hint), not a certificate: it verifies with `[trust] keys`, not identities"
    )]
    KeyBased,
    #[error(
        "the bundle is keyless (it carries a certificate): it verifies with `[trust] trusted_root` and `identities`, not keys"
    )]
    Keyless,
    #[error("the bundle carries a root certificate; roots come from the trusted root only")]
    RootInBundle,
    #[error("the certificate names no OIDC issuer (no Fulcio issuer extension)")]
    NoIssuer,
    #[error("no identity is accepted (`[trust] identities` is empty)")]
    NoIdentities,
    #[error(
        "the signer {issuer} {} is not an accepted identity (accepted: {})",
        if sans.is_empty() { "(no SAN)".to_string() } else { sans.join(", ") },
        accepted.join("; ")
    )]
    NotAccepted {
        issuer: String,
        sans: Vec<String>,
        accepted: Vec<String>,
    },
    #[error("the bundle is signed with a key (hint {0:?}) and no key is trusted (`[trust] keys`)")]
    NoKeys(String),
    #[error(
        "the signature is by no trusted key (the bundle's key hint is {hint:?}; {tried} key(s) tried)"
    )]
    NoTrustedKey { hint: String, tried: usize },
    #[error("the entry's integratedTime {} is in the future", crate::time::rfc3339(*.0))]
    FutureEntry(i64),
    #[error(
        "the log entry has no signed entry timestamp (inclusion promise), so its integratedTime is not signed, and the bundle carries no RFC 3161 timestamp"
    )]
    UnsignedTime,
    #[error(
        "the bundle has no verified time: its log entry has no integratedTime (a Rekor v2 entry has none) and it carries no RFC 3161 timestamp"
    )]
    NoTime,
    #[error(
        "the entry was {how} at {} but the log's key ({log}) is {valid}",
        crate::time::rfc3339(*at)
    )]
    OutsideLogKey {
        how: &'static str,
        at: i64,
        log: String,
        valid: root::TimeRange,
    },
    #[error(
        "the Rekor v2 entry has no inclusion proof; one is required (it has no signed entry timestamp)"
    )]
    NoProofV2,
    #[error("the bundle (version 0.2 or later) has no inclusion proof; one is required")]
    NoProof,
    #[error("the bundle's message digest is not the artifact's (sha256 {0})")]
    MessageDigest(String),
    #[error("the signature does not verify over the artifact with {0}")]
    Signature(&'static str),
    #[error(
        "the bundle holds a message signature, which is over an artifact's bytes; what is verified here is a digest (an OCI manifest), which a DSSE in-toto statement names"
    )]
    DigestOnly,
    #[error(
        "the DSSE envelope's signature does not verify (over its pre-authentication encoding) with {0}"
    )]
    DsseSignature(&'static str),
    #[error("the in-toto statement is about {named}, not this artifact (sha256:{digest})")]
    OtherSubject { named: String, digest: String },
}

/// One accepted identity: `{ issuer = "…", subject = "…" }` or
/// `{ issuer = "…", subject_glob = "…" }`.
#[derive(
    Clone,
    Debug,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    toolgate_schema::derive::Schema,
)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
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
            (None, Some(g)) => glob(g)
                .err()
                .map(|e| format!("`subject_glob` {g:?} is not a glob: {e}")),
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

fn glob(pattern: &str) -> Result<globset::GlobMatcher, globset::Error> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
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
    /// The transparency log entry's index.
    pub log_index: u64,
    /// When it was signed: the log's `integratedTime` (Rekor v1), or else
    /// an RFC 3161 timestamp's time (Rekor v2).
    pub signed: SignedTime,
}

impl std::fmt::Display for KeylessSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} (keyless: certificate {}, log index {} {})",
            self.issuer, self.subject, self.certificate, self.log_index, self.signed
        )
    }
}

impl std::fmt::Display for SignedTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = crate::time::rfc3339(self.at);
        match &self.timestamped_by {
            None => write!(f, "at {at}"),
            Some(tsa) => write!(f, "timestamped {at} by {tsa}"),
        }
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
) -> Result<KeylessSigner, Error> {
    verify_artifact(bundle, Artifact::Bytes(artifact), root, identities, now)
}

/// [`verify`], of an [`Artifact`] given by its bytes or its digest.
pub fn verify_artifact(
    bundle: &Bundle,
    artifact: Artifact<'_>,
    root: &TrustedRoot,
    identities: &[Identity],
    now: i64,
) -> Result<KeylessSigner, Error> {
    let bundle::Material::Certificate { leaf, extra } = &bundle.material else {
        return Err(Error::KeyBased);
    };
    // cosign's chain annotation names the root by design; a Sigstore
    // bundle must not (its client specification). Neither is used.
    if bundle.version != bundle::Version::CosignAnnotations
        && extra.iter().any(|c| cert::is_self_issued(c))
    {
        return Err(Error::RootInBundle);
    }
    let mut times = check_log(bundle, root, now)?;
    let digest = digest_of(artifact);
    check_message_digest(bundle, &digest)?;
    let signer = tlog::Signer::Certificate(leaf);
    match &bundle.dsse {
        None => tlog::check_body(&bundle.entry, signer, &bundle.signature, &digest)?,
        Some(dsse) => tlog::check_dsse_body(&bundle.entry, signer, &bundle.signature, dsse)?,
    }
    // The certificate must have been valid at every verified time.
    let mut ca = 0;
    for time in &times {
        ca = cert::verify_path(leaf, &root.cas, time)?;
    }
    sct::verify(leaf, &root.cas[ca], &root.ctlogs)?;
    check_signed(
        bundle,
        artifact,
        &digest,
        "the certificate's key",
        |m, s| cert::verifies(leaf, m, s),
    )?;
    let id = cert::identity(leaf)?;
    let issuer = id.issuer.ok_or(Error::NoIssuer)?;
    if identities.is_empty() {
        return Err(Error::NoIdentities);
    }
    for san in &id.sans {
        if identities.iter().any(|i| i.matches(&issuer, san)) {
            return Ok(KeylessSigner {
                issuer,
                subject: san.clone(),
                certificate: crate::sha256_digest(leaf),
                log_index: bundle.entry.log_index,
                signed: times.swap_remove(0),
            });
        }
    }
    Err(Error::NotAccepted {
        issuer,
        sans: id.sans,
        accepted: identities.iter().map(ToString::to_string).collect(),
    })
}

/// A key a key-based bundle may be signed with (`[trust] keys`).
pub trait TrustedKey {
    /// The SubjectPublicKeyInfo, DER: what the log entry must name.
    fn spki(&self) -> &[u8];
    /// Whether `signature` is this key's over `message`.
    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool;
}

/// What verified a key-based bundle.
#[derive(Debug)]
pub struct Keyed<'k, K> {
    /// The trusted key that made the signature.
    pub key: &'k K,
    /// The transparency log entry's index and its first signed time (the
    /// log's `integratedTime`, or a timestamp's), when a trusted root was
    /// given to check it against.
    pub logged: Option<(u64, i64)>,
}

/// Verify a key-based bundle (`cosign sign --key` since cosign 3, `cosign
/// sign-blob --key --bundle`): its signature (over the artifact, or over
/// the DSSE envelope whose statement names the artifact) is made by one of
/// `keys` — the bundle's key hint is not trusted, every key is tried; and
/// with a trusted `root`, its log entry verifies as a keyless one's does
/// (the log's key, its time, the inclusion proof) and names that key, this
/// signature and this artifact. Without a root the log entry is not
/// checked, as for cosign's `.sig` format: the key is the trust.
pub fn verify_keyed<'k, K: TrustedKey>(
    bundle: &Bundle,
    artifact: Artifact<'_>,
    keys: &'k [K],
    root: Option<&TrustedRoot>,
    now: i64,
) -> Result<Keyed<'k, K>, Error> {
    let bundle::Material::PublicKey { hint } = &bundle.material else {
        return Err(Error::Keyless);
    };
    if keys.is_empty() {
        return Err(Error::NoKeys(hint.clone()));
    }
    let digest = digest_of(artifact);
    check_message_digest(bundle, &digest)?;
    let mut found = None;
    for key in keys {
        if check_signed(bundle, artifact, &digest, "a trusted key", |m, s| {
            key.verifies(m, s)
        })
        .is_ok()
        {
            found = Some(key);
            break;
        }
    }
    let Some(key) = found else {
        // Say why with the first key: a wrong statement, a message
        // signature over a digest, or a signature no trusted key made.
        let why = check_signed(bundle, artifact, &digest, "any trusted key", |_, _| true)
            .err()
            .unwrap_or_else(|| Error::NoTrustedKey {
                hint: hint.clone(),
                tried: keys.len(),
            });
        return Err(why);
    };
    let logged = match root {
        None => None,
        Some(root) => {
            let times = check_log(bundle, root, now)?;
            let signer = tlog::Signer::PublicKey(key.spki());
            match &bundle.dsse {
                None => tlog::check_body(&bundle.entry, signer, &bundle.signature, &digest)?,
                Some(dsse) => {
                    tlog::check_dsse_body(&bundle.entry, signer, &bundle.signature, dsse)?
                }
            }
            Some((bundle.entry.log_index, times[0].at))
        }
    };
    Ok(Keyed { key, logged })
}

/// A time the signature is known to have existed at, and who says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedTime {
    /// Seconds since the epoch.
    pub at: i64,
    /// `None`: the log's signed `integratedTime`; `Some(tsa)`: an RFC
    /// 3161 timestamp by that TSA.
    pub timestamped_by: Option<String>,
}

impl SignedTime {
    /// A time the log signed (a Rekor v1 entry's `integratedTime`).
    pub fn logged(at: i64) -> SignedTime {
        SignedTime {
            at,
            timestamped_by: None,
        }
    }

    /// How the time came to be, for messages: "logged" or "timestamped".
    pub fn how(&self) -> &'static str {
        match self.timestamped_by {
            None => "logged",
            Some(_) => "timestamped",
        }
    }
}

/// The checks of the log entry and of the bundle's timestamps: the entry
/// is from a log of `root`; each RFC 3161 timestamp verifies with a TSA of
/// `root` over the bundle's signature (one that does not is a refusal,
/// not passed over); a Rekor v1 entry's signed entry timestamp verifies;
/// every time is inside the log key's validity and not in the future; the
/// inclusion proof. Returns the verified times — the log's
/// `integratedTime` first when signed, then each timestamp's — of which
/// there is at least one: a Rekor v2 entry has no `integratedTime`, so it
/// needs a timestamp.
fn check_log(bundle: &Bundle, root: &TrustedRoot, now: i64) -> Result<Vec<SignedTime>, Error> {
    let entry = &bundle.entry;
    let log = tlog::log_for(&root.tlogs, entry)?;
    let mut times = Vec::new();
    match (entry.integrated_time.filter(|t| *t > 0), &entry.set) {
        (Some(time), Some(_)) => {
            tlog::verify_set(log, entry)?;
            if time > now + crate::budgets::KEYLESS_CLOCK_SKEW_SECS {
                return Err(Error::FutureEntry(time));
            }
            times.push(SignedTime::logged(time));
        }
        (Some(_), None) if bundle.timestamps.is_empty() => return Err(Error::UnsignedTime),
        // An integratedTime no SET signs is not a time: not used.
        _ => {}
    }
    for (index, token) in bundle.timestamps.iter().enumerate() {
        let stamp = tsa::verify(token, &bundle.signature, &root.tsas, now)
            .map_err(|why| Error::Timestamp { index, why })?;
        times.push(SignedTime {
            at: stamp.at,
            timestamped_by: Some(stamp.authority),
        });
    }
    if times.is_empty() {
        return Err(Error::NoTime);
    }
    for t in &times {
        if !log.valid.contains(t.at) {
            return Err(Error::OutsideLogKey {
                how: t.how(),
                at: t.at,
                log: log.name.clone(),
                valid: log.valid,
            });
        }
    }
    // (`intoto` 0.0.2 is a Rekor v1 kind.)
    let rekor_v2 =
        entry.version == "0.0.2" && matches!(entry.kind.as_str(), "hashedrekord" | "dsse");
    match (&entry.proof, bundle.version) {
        (Some(p), bundle::Version::V01) if p.checkpoint.is_none() && !rekor_v2 => {}
        (Some(p), _) => tlog::verify_inclusion(log, p, &entry.body)?,
        (None, _) if rekor_v2 => return Err(Error::NoProofV2),
        (None, bundle::Version::V01 | bundle::Version::CosignAnnotations) => {}
        (None, _) => return Err(Error::NoProof),
    }
    Ok(times)
}

fn digest_of(artifact: Artifact<'_>) -> [u8; 32] {
    match artifact {
        Artifact::Bytes(bytes) => Sha256::digest(bytes).into(),
        Artifact::Sha256(d) => d,
    }
}

fn check_message_digest(bundle: &Bundle, digest: &[u8; 32]) -> Result<(), Error> {
    match &bundle.message_digest {
        Some(d) if d.as_slice() != digest => Err(Error::MessageDigest(bundle::hex(digest))),
        _ => Ok(()),
    }
}

/// The signature, checked with `verifies` (`whose` key, for the refusal):
/// over the artifact's bytes, or over the DSSE envelope's PAE, whose
/// in-toto statement must then name the artifact's `digest`.
fn check_signed(
    bundle: &Bundle,
    artifact: Artifact<'_>,
    digest: &[u8; 32],
    whose: &'static str,
    verifies: impl Fn(&[u8], &[u8]) -> bool,
) -> Result<(), Error> {
    match (&bundle.dsse, artifact) {
        (None, Artifact::Bytes(bytes)) => {
            if !verifies(bytes, &bundle.signature) {
                return Err(Error::Signature(whose));
            }
        }
        (None, Artifact::Sha256(_)) => return Err(Error::DigestOnly),
        (Some(dsse), _) => {
            if !verifies(&dsse.pae(), &bundle.signature) {
                return Err(Error::DsseSignature(whose));
            }
            let statement = dsse.statement()?;
            if !statement.names(digest) {
                return Err(Error::OtherSubject {
                    named: statement.named(),
                    digest: bundle::hex(digest),
                });
            }
        }
    }
    Ok(())
}

/// Seconds since the epoch, now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
