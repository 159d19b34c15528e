//! Key-based signatures in cosign's format, signed and verified in-process.
//!
//! **The format** is the one `cosign sign --key` writes (cosign's
//! "signature specification"): for a manifest of digest `sha256:HEX` in
//! `REGISTRY/REPOSITORY`, a second manifest under the tag
//! `sha256-HEX.sig` whose layers are *simple-signing* payloads
//! ([`PAYLOAD_MEDIA_TYPE`]):
//!
//! ```json
//! {"critical":{"identity":{"docker-reference":"REGISTRY/REPOSITORY"},
//!   "image":{"docker-manifest-digest":"sha256:HEX"},
//!   "type":"cosign container image signature"},"optional":null}
//! ```
//!
//! each with its signature, base64, in the layer annotation
//! [`SIGNATURE_ANNOTATION`]. An ECDSA P-256 signature is ASN.1 DER over the
//! SHA-256 of the payload's bytes; an Ed25519 one is over the bytes
//! themselves. Public keys are PEM `PUBLIC KEY` (SubjectPublicKeyInfo),
//! private keys PEM `PRIVATE KEY` (PKCS#8, unencrypted) — what
//! `openssl genpkey` and Python's `cryptography` write.
//!
//! **Verification** accepts a signature when it verifies over the payload's
//! exact bytes with a trusted key *and* the payload names the digest being
//! loaded: a valid signature over another digest (an older release, say)
//! is refused, and the refusal says so.
//!
//! **Why not the `sigstore` crate**: measured here with `cargo tree`
//! (sigstore 0.15), its `rustls-tls` feature builds `aws-lc-sys` (C,
//! which this project keeps out: rustls runs on `ring`), and even without a
//! TLS feature its `cosign` feature adds 110 crates the host does not have
//! (openidconnect, oauth2, webbrowser, rsa, prost, a second generation of
//! the RustCrypto crates), while its cosign verification fetches signature
//! manifests through its own registry client — around the bounded manifest
//! GET of [`super::client`]. The cryptography here is `ring`'s (already in
//! the tree through rustls): `ECDSA_P256_SHA256_ASN1` and `ED25519`. A
//! SubjectPublicKeyInfo of either algorithm is a fixed DER prefix followed
//! by the key (DER is canonical), so the key is read by matching that
//! prefix exactly; anything else (RSA, P-384, a compressed point) is refused
//! naming the file.

use base64::Engine as _;
use ring::signature::{self as sig, KeyPair as _};

use super::keyless::{Bundle, Identity, KeylessSigner, TrustedRoot};
use super::sha256_digest;

/// The media type of a signature layer (the payload).
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The layer annotation of a keyless signature's certificate (PEM).
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation of its certificate chain (PEM).
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
/// The layer annotation of its Rekor entry (`{"SignedEntryTimestamp",
/// "Payload"}`).
pub const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the 32
/// key bytes follow.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];
/// The DER prefix of a P-256 SubjectPublicKeyInfo (RFC 5480: id-ecPublicKey,
/// prime256v1); the 65-byte uncompressed point follows.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The tag of the signatures of `digest` (`sha256-HEX.sig`).
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// The simple-signing payload for `digest` in `repository`
/// (`REGISTRY/REPOSITORY`), as cosign writes it.
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    let value = serde_json::json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    });
    serde_json::to_vec(&value).expect("a JSON value serializes")
}

/// Why a key or a signature was refused.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("{name}: {why}")]
    Key { name: String, why: String },
}

/// A signature algorithm cosign keys use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// ECDSA over P-256 with SHA-256 (cosign's default).
    P256,
    Ed25519,
}

impl Algorithm {
    /// `ecdsa-p256` or `ed25519`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::P256 => "ecdsa-p256",
            Algorithm::Ed25519 => "ed25519",
        }
    }
}

/// A trusted public key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicKey {
    /// Where it came from (the file's name), for messages and the record.
    pub name: String,
    pub algorithm: Algorithm,
    /// The SubjectPublicKeyInfo, DER.
    spki: Vec<u8>,
}

impl PublicKey {
    /// A PEM `PUBLIC KEY` (P-256 or Ed25519); `name` names it in errors.
    pub fn from_pem(name: &str, text: &str) -> Result<PublicKey, SignatureError> {
        let der = pem_body(text, "PUBLIC KEY").map_err(|why| SignatureError::Key {
            name: name.to_string(),
            why,
        })?;
        PublicKey::from_spki(name, der)
    }

    /// A DER SubjectPublicKeyInfo.
    pub fn from_spki(name: &str, der: Vec<u8>) -> Result<PublicKey, SignatureError> {
        let algorithm = if der.len() == ED25519_SPKI_PREFIX.len() + 32
            && der.starts_with(&ED25519_SPKI_PREFIX)
        {
            Algorithm::Ed25519
        } else if der.len() == P256_SPKI_PREFIX.len() + 65
            && der.starts_with(&P256_SPKI_PREFIX)
            && der[P256_SPKI_PREFIX.len()] == 0x04
        {
            Algorithm::P256
        } else {
            return Err(SignatureError::Key {
                name: name.to_string(),
                why: "is not an ECDSA P-256 (uncompressed) or Ed25519 public key; those are the key-based signatures supported".into(),
            });
        };
        Ok(PublicKey {
            name: name.to_string(),
            algorithm,
            spki: der,
        })
    }

    /// `sha256:HEX` of the SubjectPublicKeyInfo DER (what `toolgate
    /// plugins`, `toolgate verify` and the audit record name the signer
    /// by; `openssl pkey -pubin -outform DER | sha256sum` gives the same).
    pub fn fingerprint(&self) -> String {
        sha256_digest(&self.spki)
    }

    /// The key as PEM.
    pub fn to_pem(&self) -> String {
        to_pem("PUBLIC KEY", &self.spki)
    }

    fn raw(&self) -> &[u8] {
        match self.algorithm {
            Algorithm::Ed25519 => &self.spki[ED25519_SPKI_PREFIX.len()..],
            Algorithm::P256 => &self.spki[P256_SPKI_PREFIX.len()..],
        }
    }

    /// Whether `signature` is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        let alg: &dyn sig::VerificationAlgorithm = match self.algorithm {
            Algorithm::P256 => &sig::ECDSA_P256_SHA256_ASN1,
            Algorithm::Ed25519 => &sig::ED25519,
        };
        sig::UnparsedPublicKey::new(alg, self.raw())
            .verify(message, signature)
            .is_ok()
    }
}

impl super::keyless::TrustedKey for PublicKey {
    fn spki(&self) -> &[u8] {
        &self.spki
    }

    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        PublicKey::verifies(self, message, signature)
    }
}

/// A private key that signs (`toolgate push --sign-key`).
pub struct SigningKey {
    inner: KeyPair,
    public: PublicKey,
}

enum KeyPair {
    P256(sig::EcdsaKeyPair),
    Ed25519(sig::Ed25519KeyPair),
}

impl SigningKey {
    /// A PEM `PRIVATE KEY` (PKCS#8, unencrypted; P-256 or Ed25519).
    pub fn from_pem(name: &str, text: &str) -> Result<SigningKey, SignatureError> {
        let bad = |why: String| SignatureError::Key {
            name: name.to_string(),
            why,
        };
        let der = pem_body(text, "PRIVATE KEY").map_err(&bad)?;
        let rng = ring::rand::SystemRandom::new();
        let (inner, algorithm, raw) = if let Ok(k) =
            sig::EcdsaKeyPair::from_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, &der, &rng)
        {
            let raw = k.public_key().as_ref().to_vec();
            (KeyPair::P256(k), Algorithm::P256, raw)
        } else if let Ok(k) = sig::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der) {
            let raw = k.public_key().as_ref().to_vec();
            (KeyPair::Ed25519(k), Algorithm::Ed25519, raw)
        } else {
            return Err(bad(
                "is not an unencrypted PKCS#8 ECDSA P-256 or Ed25519 private key (`openssl genpkey -algorithm ed25519` or `toolgate keygen sign` writes one)".into(),
            ));
        };
        let prefix: &[u8] = match algorithm {
            Algorithm::P256 => &P256_SPKI_PREFIX,
            Algorithm::Ed25519 => &ED25519_SPKI_PREFIX,
        };
        let public = PublicKey::from_spki(name, [prefix, raw.as_slice()].concat())?;
        Ok(SigningKey { inner, public })
    }

    /// A new key of `algorithm`, as PKCS#8 PEM.
    pub fn generate_pem(algorithm: Algorithm) -> String {
        let rng = ring::rand::SystemRandom::new();
        let doc = match algorithm {
            Algorithm::P256 => {
                sig::EcdsaKeyPair::generate_pkcs8(&sig::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            }
            Algorithm::Ed25519 => sig::Ed25519KeyPair::generate_pkcs8(&rng),
        }
        .expect("the system's random source works");
        to_pem("PRIVATE KEY", doc.as_ref())
    }

    /// Its public key.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The signature over `message`, in cosign's encoding for the key's
    /// algorithm.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        match &self.inner {
            KeyPair::P256(k) => k
                .sign(&ring::rand::SystemRandom::new(), message)
                .expect("the system's random source works")
                .as_ref()
                .to_vec(),
            KeyPair::Ed25519(k) => k.sign(message).as_ref().to_vec(),
        }
    }
}

/// One signature layer as fetched: the payload's bytes and the decoded
/// signature.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signature {
    /// The simple-signing payload, base64 (as kept in the store).
    pub payload: String,
    /// The signature, base64 (the annotation's value).
    pub signature: String,
    /// A keyless signature's certificate (PEM, the layer annotation
    /// [`CERTIFICATE_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// Its chain (PEM, [`CHAIN_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// Its transparency log entry (JSON, [`BUNDLE_ANNOTATION`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// A Sigstore bundle (JSON) attached as an OCI referrer
    /// ([`super::referrers`]); `payload` and `signature` are then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigstore_bundle: Option<String>,
    /// That referrer's manifest digest and the `subject` it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub referrer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl Signature {
    /// A key-based signature: `payload` and `signature`, base64.
    pub fn keyed(payload: String, signature: String) -> Signature {
        Signature {
            payload,
            signature,
            certificate: None,
            chain: None,
            bundle: None,
            sigstore_bundle: None,
            referrer: None,
            subject: None,
        }
    }

    /// A Sigstore bundle attached as the OCI referrer `referrer` to the
    /// manifest `subject`.
    pub fn referrer(bundle: String, referrer: String, subject: String) -> Signature {
        Signature {
            payload: String::new(),
            signature: String::new(),
            certificate: None,
            chain: None,
            bundle: None,
            sigstore_bundle: Some(bundle),
            referrer: Some(referrer),
            subject: Some(subject),
        }
    }
}

/// Who signed: the key that verified (or the keyless identity), and what
/// it signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signer {
    /// `sha256:HEX` of the key ([`PublicKey::fingerprint`]), or of a
    /// keyless signature's certificate.
    pub fingerprint: String,
    /// The key's file name, or a keyless signer's `ISSUER SUBJECT`.
    pub key: String,
    /// `ecdsa-p256`, `ed25519`, or `keyless`.
    pub algorithm: &'static str,
    /// The payload's `docker-reference` (empty for a Sigstore bundle
    /// referrer: its statement names the manifest by digest only).
    pub docker_reference: String,
    /// A keyless signer's identity and log entry.
    pub keyless: Option<KeylessSigner>,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.keyless {
            Some(k) => write!(f, "{k}"),
            None => write!(f, "{} ({}, {})", self.fingerprint, self.key, self.algorithm),
        }
    }
}

/// What keyless signatures are checked against: the trusted root and the
/// accepted identities (`[trust] trusted_root`, `[trust] identities`).
#[derive(Clone, Debug)]
pub struct KeylessPolicy {
    pub root: TrustedRoot,
    pub identities: Vec<Identity>,
}

/// Verify a Sigstore bundle attached as an OCI referrer to `digest`
/// ([`super::referrers`]): a DSSE statement of cosign's signature predicate
/// naming `digest`, signed keylessly (checked against `keyless`) or with
/// one of `keys` (its log entry checked against `keyless`'s trusted root
/// when there is one).
fn verify_referrer(
    s: &Signature,
    bundle: &str,
    digest: &str,
    keys: &[PublicKey],
    keyless: Option<&KeylessPolicy>,
) -> Result<Signer, String> {
    let subject = s.subject.as_deref().unwrap_or_default();
    if subject != digest {
        return Err(format!(
            "it is attached to another manifest ({subject}), not {digest}"
        ));
    }
    let bundle = Bundle::from_json(bundle.as_bytes()).map_err(|e| e.to_string())?;
    let Some(dsse) = &bundle.dsse else {
        return Err(
            "it holds a message signature, not the DSSE statement `cosign sign` writes".into(),
        );
    };
    let statement = dsse.statement().map_err(|e| e.to_string())?;
    if statement.predicate_type != super::referrers::COSIGN_SIGN_PREDICATE {
        return Err(format!(
            "it is an attestation of type {:?}, not a cosign signature ({})",
            statement.predicate_type,
            super::referrers::COSIGN_SIGN_PREDICATE
        ));
    }
    let raw: [u8; 32] = digest
        .strip_prefix("sha256:")
        .and_then(super::keyless::bundle::hex_decode)
        .and_then(|d| d.try_into().ok())
        .ok_or_else(|| format!("{digest} is not a sha256 digest"))?;
    if bundle.leaf().is_none() {
        let keyed = super::keyless::verify_keyed(
            &bundle,
            super::keyless::Artifact::Sha256(raw),
            keys,
            keyless.map(|p| &p.root),
            super::keyless::now(),
        )
        .map_err(|e| e.to_string())?;
        return Ok(Signer {
            fingerprint: keyed.key.fingerprint(),
            key: keyed.key.name.clone(),
            algorithm: keyed.key.algorithm.name(),
            docker_reference: String::new(),
            keyless: None,
        });
    }
    let Some(policy) = keyless else {
        return Err(
            "it is keyless (a certificate) and no `[trust] trusted_root` and `identities` are configured"
                .into(),
        );
    };
    let who = super::keyless::verify_artifact(
        &bundle,
        super::keyless::Artifact::Sha256(raw),
        &policy.root,
        &policy.identities,
        super::keyless::now(),
    )
    .map_err(|e| e.to_string())?;
    Ok(Signer {
        fingerprint: who.certificate.clone(),
        key: format!("{} {}", who.issuer, who.subject),
        algorithm: "keyless",
        docker_reference: String::new(),
        keyless: Some(who),
    })
}

/// Why no signature was accepted: a sentence naming what was found.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unverified(pub String);

/// The first of `signatures` that a key of `keys` made over a payload
/// naming `digest`; else why none was accepted (what each was).
pub fn verify(
    signatures: &[Signature],
    digest: &str,
    keys: &[PublicKey],
) -> Result<Signer, Unverified> {
    verify_with(signatures, digest, keys, None)
}

/// [`verify`], with keyless signatures (a layer with a certificate)
/// checked against `keyless` ([`super::keyless`]).
pub fn verify_with(
    signatures: &[Signature],
    digest: &str,
    keys: &[PublicKey],
    keyless: Option<&KeylessPolicy>,
) -> Result<Signer, Unverified> {
    if signatures.is_empty() {
        return Err(Unverified(format!(
            "it is not signed (no cosign signature under the tag {}, no Sigstore bundle attached as an OCI referrer)",
            signature_tag(digest)
        )));
    }
    if keys.is_empty() && keyless.is_none() {
        return Err(Unverified(
            "no trusted key is configured (`[trust] keys`; for keyless signatures `[trust] trusted_root` and `identities`)".into(),
        ));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut reasons = Vec::new();
    for (i, s) in signatures.iter().enumerate() {
        if let Some(bundle) = &s.sigstore_bundle {
            match verify_referrer(s, bundle, digest, keys, keyless) {
                Ok(signer) => return Ok(signer),
                Err(why) => {
                    reasons.push(format!(
                        "the Sigstore bundle of OCI referrer {} is refused: {why}",
                        s.referrer.as_deref().unwrap_or("?")
                    ));
                    continue;
                }
            }
        }
        let (Ok(payload), Ok(signature)) = (b64.decode(&s.payload), b64.decode(s.signature.trim()))
        else {
            reasons.push(format!("signature {i} is not base64"));
            continue;
        };
        let (name, fingerprint, algorithm, who) = if let Some(certificate) = &s.certificate {
            let Some(policy) = keyless else {
                reasons.push(format!(
                    "signature {i} is keyless (a certificate) and no `[trust] trusted_root` and `identities` are configured"
                ));
                continue;
            };
            let Some(rekor) = &s.bundle else {
                reasons.push(format!(
                    "signature {i} is keyless but has no transparency log entry ({BUNDLE_ANNOTATION})"
                ));
                continue;
            };
            let checked = Bundle::from_cosign(certificate, s.chain.as_deref(), rekor, &s.signature)
                .map_err(super::keyless::Error::from)
                .and_then(|b| {
                    super::keyless::verify(
                        &b,
                        &payload,
                        &policy.root,
                        &policy.identities,
                        super::keyless::now(),
                    )
                });
            match checked {
                Ok(who) => (
                    format!("{} {}", who.issuer, who.subject),
                    who.certificate.clone(),
                    "keyless",
                    Some(who),
                ),
                Err(why) => {
                    reasons.push(format!("signature {i} (keyless) is refused: {why}"));
                    continue;
                }
            }
        } else {
            let Some(key) = keys.iter().find(|k| k.verifies(&payload, &signature)) else {
                reasons.push(format!(
                    "signature {i} is by no trusted key (or its payload was altered)"
                ));
                continue;
            };
            (
                key.name.clone(),
                key.fingerprint(),
                key.algorithm.name(),
                None,
            )
        };
        let parsed: serde_json::Value = match serde_json::from_slice(&payload) {
            Ok(v) => v,
            Err(e) => {
                reasons.push(format!(
                    "signature {i} (by {name}) signs a payload that is not JSON: {e}"
                ));
                continue;
            }
        };
        let critical = &parsed["critical"];
        if critical["type"] != PAYLOAD_TYPE {
            reasons.push(format!(
                "signature {i} (by {name}) is not a cosign image signature (its type is {})",
                critical["type"]
            ));
            continue;
        }
        let signed = critical["image"]["docker-manifest-digest"]
            .as_str()
            .unwrap_or_default();
        if signed != digest {
            reasons.push(format!(
                "signature {i} (by {name}) is over another digest, {signed:?}, not {digest}"
            ));
            continue;
        }
        return Ok(Signer {
            fingerprint,
            key: name,
            algorithm,
            keyless: who,
            docker_reference: critical["identity"]["docker-reference"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        });
    }
    Err(Unverified(format!(
        "no signature is accepted: {}",
        reasons.join("; ")
    )))
}

/// The DER inside the one PEM block labelled `label`.
fn pem_body(text: &str, label: &str) -> Result<Vec<u8>, String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let Some(start) = text.find(&begin) else {
        let found = text
            .lines()
            .find(|l| l.starts_with("-----BEGIN "))
            .unwrap_or("no PEM block");
        return Err(format!(
            "holds no `{begin}` block (found: {found}); a PEM {label} is expected"
        ));
    };
    let rest = &text[start + begin.len()..];
    let Some(stop) = rest.find(&end) else {
        return Err(format!("its `{begin}` block has no `{end}`"));
    };
    let body: String = rest[..stop]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| format!("its PEM body is not base64: {e}"))
}

fn to_pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(key: &SigningKey, digest: &str) -> Signature {
        let b64 = base64::engine::general_purpose::STANDARD;
        let p = payload("127.0.0.1:5000/acme/guard", digest);
        Signature::keyed(b64.encode(p.clone()), b64.encode(key.sign(&p)))
    }

    #[test]
    fn both_algorithms_sign_and_verify_over_the_right_digest_only() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let other = format!("sha256:{}", "cd".repeat(32));
        for alg in [Algorithm::P256, Algorithm::Ed25519] {
            let key = SigningKey::from_pem("k.pem", &SigningKey::generate_pem(alg)).unwrap();
            let public =
                PublicKey::from_pem("k.pub", &key.public().to_pem()).expect("own PEM reads");
            assert_eq!(public.algorithm, alg);
            let s = signed(&key, &d);
            let who = verify(std::slice::from_ref(&s), &d, std::slice::from_ref(&public)).unwrap();
            assert_eq!(who.fingerprint, public.fingerprint());
            assert_eq!(who.key, "k.pub");
            let e = verify(
                std::slice::from_ref(&s),
                &other,
                std::slice::from_ref(&public),
            )
            .unwrap_err();
            assert!(e.0.contains("over another digest"), "{e}");
            let stranger = SigningKey::from_pem("s.pem", &SigningKey::generate_pem(alg)).unwrap();
            let e = verify(
                std::slice::from_ref(&s),
                &d,
                std::slice::from_ref(stranger.public()),
            )
            .unwrap_err();
            assert!(e.0.contains("by no trusted key"), "{e}");
            // One flipped bit in the signature.
            let b64 = base64::engine::general_purpose::STANDARD;
            let mut raw = b64.decode(&s.signature).unwrap();
            let last = raw.len() - 1;
            raw[last] ^= 1;
            let tampered = Signature {
                signature: b64.encode(raw),
                ..s
            };
            assert!(verify(&[tampered], &d, &[public]).is_err());
        }
        assert!(verify(&[], &d, &[]).unwrap_err().0.contains("not signed"));
    }

    #[test]
    fn keys_of_other_kinds_are_refused_naming_the_file() {
        let e = PublicKey::from_pem(
            "rsa.pub",
            "-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("rsa.pub: is not an ECDSA P-256"), "{e}");
        let e = PublicKey::from_pem("x.pub", "hello")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no `-----BEGIN PUBLIC KEY-----` block"), "{e}");
        assert_eq!(signature_tag("sha256:abc"), "sha256-abc.sig");
    }
}
