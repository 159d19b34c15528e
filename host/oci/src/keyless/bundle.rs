//! The two shapes a keyless signature arrives in, read into one
//! [`Bundle`]:
//!
//! * a **Sigstore bundle** (`application/vnd.dev.sigstore.bundle+json;
//!   version=0.1|0.2|0.3`, or `…bundle.v0.3+json`): what `cosign
//!   sign-blob --bundle`, `sigstore sign` and the other Sigstore clients
//!   write. Its `verificationMaterial` holds the leaf certificate
//!   (`certificate`, or the first of `x509CertificateChain`) — or, signed
//!   with a key, a `publicKey` hint ([`Material::PublicKey`]) — and one
//!   `tlogEntries` entry; either its `messageSignature` (the signature
//!   over the artifact's bytes) or its `dsseEnvelope` ([`Dsse`]: an in-toto
//!   statement naming the artifact's digest, signed over its DSSE
//!   pre-authentication encoding) — the latter is what `cosign sign` 3
//!   attaches to an image as an OCI referrer (see [`crate::referrers`]).
//! * **cosign's layer annotations** on a `sha256-HEX.sig` signature layer:
//!   `dev.sigstore.cosign/certificate` (PEM), `…/chain` (PEM) and
//!   `…/bundle` (`{"SignedEntryTimestamp", "Payload": {"body",
//!   "integratedTime", "logIndex", "logID"}}`), the signature itself in
//!   `dev.cosignproject.cosign/signature`; the signed artifact is the
//!   layer's simple-signing payload.
//!
//! Numbers the protobuf JSON writes as strings (`"logIndex": "27246492"`)
//! are read in either form; a negative one is refused.

use base64::Engine as _;

use crate::budgets::{
    KEYLESS_MAX_BUNDLE_BYTES, KEYLESS_MAX_CA_CHAIN, KEYLESS_MAX_PROOF_HASHES,
    KEYLESS_MAX_STATEMENT_BYTES, KEYLESS_MAX_STATEMENT_SUBJECTS, KEYLESS_MAX_TIMESTAMPS,
};

/// Why a bundle (or cosign's annotations) cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(
        "the bundle is {0} bytes; at most {KEYLESS_MAX_BUNDLE_BYTES} are read (a Sigstore bundle is 5 to 10 KB)"
    )]
    TooLarge(usize),
    #[error("the bundle is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the bundle's media type {0} is not a Sigstore bundle of version 0.1 to 0.3")]
    MediaType(String),
    #[error("{what} is not base64: {source}")]
    NotBase64 {
        what: String,
        source: base64::DecodeError,
    },
    #[error("{0} is missing")]
    Missing(String),
    #[error("{0} is missing or not an integer")]
    NotInteger(String),
    #[error("{what} is negative ({n})")]
    Negative { what: String, n: i64 },
    #[error("the bundle's rfc3161Timestamps is not a list")]
    TimestampsNotAList,
    #[error(
        "the bundle carries {0} RFC 3161 timestamps; at most {KEYLESS_MAX_TIMESTAMPS} are read"
    )]
    TooManyTimestamps(usize),
    #[error("RFC 3161 timestamp {0} is there twice")]
    DuplicateTimestamp(usize),
    #[error(
        "the bundle's certificate chain holds {0} certificates; at most {KEYLESS_MAX_CA_CHAIN} are read"
    )]
    ChainTooLong(usize),
    #[error("the bundle carries both a public key hint and a certificate")]
    KeyAndCertificate,
    #[error("the bundle carries no certificate (an empty certificate chain)")]
    NoCertificate,
    #[error("the bundle has no transparency log entry (`tlogEntries`)")]
    NoTlogEntry,
    #[error("the bundle has {0} transparency log entries; exactly one is expected")]
    TlogEntries(usize),
    #[error(
        "the inclusion proof has {0} hashes; at most {KEYLESS_MAX_PROOF_HASHES} are read (a tree of 2^64 entries needs 64)"
    )]
    TooManyProofHashes(usize),
    #[error("the bundle has neither a `messageSignature` nor a `dsseEnvelope`")]
    NoSignature,
    #[error("the bundle has both a `messageSignature` and a `dsseEnvelope`")]
    BothSignatures,
    #[error("the DSSE envelope has no `signatures`")]
    NoDsseSignatures,
    #[error("the DSSE envelope has {0} signatures; exactly one is expected")]
    DsseSignatures(usize),
    #[error("the message digest's algorithm {0} is not SHA2_256")]
    DigestAlgorithm(String),
    #[error("a keyless annotation is larger than {KEYLESS_MAX_BUNDLE_BYTES} bytes")]
    AnnotationTooLarge,
    #[error("the certificate annotation holds no PEM CERTIFICATE")]
    NoPemCertificate,
    #[error("the chain annotation holds {0} certificates; at most {KEYLESS_MAX_CA_CHAIN} are read")]
    ChainAnnotationTooLong(usize),
    #[error("the bundle annotation is not JSON: {0}")]
    AnnotationNotJson(serde_json::Error),
    #[error("the bundle annotation's logID is not hex")]
    LogIdNotHex,
    #[error("the log entry's body is not JSON: {0}")]
    BodyNotJson(serde_json::Error),
    #[error("a PEM {0} block has no END line")]
    PemNoEnd(String),
}

/// Why a DSSE payload is not an in-toto statement this host reads.
#[derive(Debug, thiserror::Error)]
pub enum StatementError {
    #[error(
        "the DSSE envelope's payload type is {0:?}, not an in-toto statement ({IN_TOTO_PAYLOAD_TYPE})"
    )]
    PayloadType(String),
    #[error("the in-toto statement is {0} bytes; at most {KEYLESS_MAX_STATEMENT_BYTES} are read")]
    TooLarge(usize),
    #[error("the in-toto statement is not JSON: {0}")]
    NotJson(serde_json::Error),
    /// Its `_type`, as found.
    #[error("the DSSE payload is not an in-toto statement (its _type is {0})")]
    NotStatement(String),
    #[error("the in-toto statement has no `subject` list")]
    NoSubjects,
    #[error(
        "the in-toto statement names {0} subjects; at most {KEYLESS_MAX_STATEMENT_SUBJECTS} are read"
    )]
    TooManySubjects(usize),
}

/// The bundle versions read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// v0.1: the signed entry timestamp (SET) is required.
    V01,
    /// v0.2 and v0.3: the inclusion proof, with its checkpoint, is required.
    V02,
    V03,
    /// cosign's `.sig` layer annotations: a SET, no inclusion proof.
    CosignAnnotations,
}

/// An inclusion proof (RFC 6962) and its signed checkpoint.
#[derive(Clone, Debug)]
pub struct Proof {
    /// The entry's index in the tree the proof is for.
    pub index: u64,
    pub tree_size: u64,
    pub root_hash: Vec<u8>,
    pub hashes: Vec<Vec<u8>>,
    /// The checkpoint (a signed note), if present.
    pub checkpoint: Option<String>,
}

/// A transparency log entry.
#[derive(Clone, Debug)]
pub struct TlogEntry {
    pub log_index: u64,
    pub log_id: Vec<u8>,
    pub kind: String,
    pub version: String,
    /// Seconds since the epoch; `None` when the entry has none (Rekor v2).
    pub integrated_time: Option<i64>,
    /// The signed entry timestamp.
    pub set: Option<Vec<u8>>,
    pub proof: Option<Proof>,
    /// The canonicalized body, decoded from base64.
    pub body: Vec<u8>,
    /// The body as base64, as the SET signs it.
    pub body_b64: String,
}

/// A DSSE envelope (one signature): what the signature is over is
/// [`Dsse::pae`] of the payload, not the artifact.
#[derive(Clone, Debug)]
pub struct Dsse {
    pub payload_type: String,
    pub payload: Vec<u8>,
}

/// The DSSE payload type of an in-toto statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

impl Dsse {
    /// The DSSE v1 pre-authentication encoding, what is signed:
    /// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`.
    pub fn pae(&self) -> Vec<u8> {
        let mut out = format!(
            "DSSEv1 {} {} {} ",
            self.payload_type.len(),
            self.payload_type,
            self.payload.len()
        )
        .into_bytes();
        out.extend_from_slice(&self.payload);
        out
    }

    /// The in-toto statement the payload holds, bounded.
    pub fn statement(&self) -> Result<Statement, StatementError> {
        Statement::parse(&self.payload_type, &self.payload)
    }
}

/// An in-toto statement (v1, or v0.1 which has the same fields used here).
#[derive(Clone, Debug)]
pub struct Statement {
    pub predicate_type: String,
    /// Each subject's `sha256` digest (lowercase hex), or `None` for one
    /// without.
    pub subjects: Vec<Option<String>>,
}

impl Statement {
    fn parse(payload_type: &str, payload: &[u8]) -> Result<Statement, StatementError> {
        if payload_type != IN_TOTO_PAYLOAD_TYPE {
            return Err(StatementError::PayloadType(payload_type.to_string()));
        }
        if payload.len() > KEYLESS_MAX_STATEMENT_BYTES {
            return Err(StatementError::TooLarge(payload.len()));
        }
        let v: serde_json::Value =
            serde_json::from_slice(payload).map_err(StatementError::NotJson)?;
        match v["_type"].as_str() {
            Some("https://in-toto.io/Statement/v1" | "https://in-toto.io/Statement/v0.1") => {}
            t => return Err(StatementError::NotStatement(format!("{t:?}"))),
        }
        let subjects = v["subject"].as_array().ok_or(StatementError::NoSubjects)?;
        if subjects.len() > KEYLESS_MAX_STATEMENT_SUBJECTS {
            return Err(StatementError::TooManySubjects(subjects.len()));
        }
        Ok(Statement {
            predicate_type: v["predicateType"].as_str().unwrap_or_default().to_string(),
            subjects: subjects
                .iter()
                .map(|s| s["digest"]["sha256"].as_str().map(str::to_ascii_lowercase))
                .collect(),
        })
    }

    /// Whether a subject's SHA-256 is `digest`.
    pub fn names(&self, digest: &[u8]) -> bool {
        let want = hex(digest);
        self.subjects.iter().flatten().any(|d| *d == want)
    }

    /// The subjects' digests, for a refusal.
    pub fn named(&self) -> String {
        let list: Vec<String> = self
            .subjects
            .iter()
            .map(|d| match d {
                Some(d) => format!("sha256:{d}"),
                None => "(no sha256)".into(),
            })
            .collect();
        if list.is_empty() {
            "nothing".into()
        } else {
            list.join(", ")
        }
    }
}

/// What names the key that signed.
#[derive(Clone, Debug)]
pub enum Material {
    /// Keyless: a certificate the trusted root's CA issued.
    Certificate {
        /// The leaf certificate, DER.
        leaf: Vec<u8>,
        /// Further certificates the bundle carries (not used to build the
        /// path: the trusted root's chain is; one that is a root is refused).
        extra: Vec<Vec<u8>>,
    },
    /// Key-based (`cosign sign --key`, `cosign sign-blob --key`): a key the
    /// verifier holds, named by a hint it does not trust (cosign's is the
    /// base64 SHA-256 of the key's DER).
    PublicKey { hint: String },
}

/// A Sigstore signature: certificate or key hint, log entry, signature.
#[derive(Clone, Debug)]
pub struct Bundle {
    pub version: Version,
    pub material: Material,
    pub entry: TlogEntry,
    pub signature: Vec<u8>,
    /// `messageSignature.messageDigest` (SHA-256), when present.
    pub message_digest: Option<Vec<u8>>,
    /// The DSSE envelope, when the bundle has one instead of a
    /// `messageSignature` (`signature` is then the envelope's).
    pub dsse: Option<Dsse>,
    /// `timestampVerificationData.rfc3161Timestamps`: each a DER
    /// TimeStampResp over `signature` (see [`super::tsa`]); at most
    /// [`crate::budgets::KEYLESS_MAX_TIMESTAMPS`], none twice.
    pub timestamps: Vec<Vec<u8>>,
}

impl Bundle {
    /// The leaf certificate (DER) of a keyless bundle; `None` for a
    /// key-based one.
    pub fn leaf(&self) -> Option<&[u8]> {
        match &self.material {
            Material::Certificate { leaf, .. } => Some(leaf),
            Material::PublicKey { .. } => None,
        }
    }
}

/// Standard base64, as protobuf JSON writes bytes; line breaks are
/// skipped, as Go's decoder (sigstore-go, cosign) and Python's skip them.
fn b64(text: &str, what: &str) -> Result<Vec<u8>, BundleError> {
    let engine = base64::engine::general_purpose::STANDARD;
    let text = text.trim();
    let decoded = if text.contains(['\n', '\r']) {
        engine.decode(text.replace(['\n', '\r'], ""))
    } else {
        engine.decode(text)
    };
    decoded.map_err(|source| BundleError::NotBase64 {
        what: what.to_string(),
        source,
    })
}

fn int(v: &serde_json::Value, what: &str) -> Result<i64, BundleError> {
    match v {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| BundleError::NotInteger(what.to_string()))
}

fn uint(v: &serde_json::Value, what: &str) -> Result<u64, BundleError> {
    let n = int(v, what)?;
    u64::try_from(n).map_err(|_| BundleError::Negative {
        what: what.to_string(),
        n,
    })
}

/// The RFC 3161 timestamps of `timestampVerificationData`, decoded:
/// bounded in number, none twice (sigstore-go and sigstore-python refuse
/// a duplicate too).
fn timestamps(data: &serde_json::Value) -> Result<Vec<Vec<u8>>, BundleError> {
    let list = match &data["rfc3161Timestamps"] {
        serde_json::Value::Null => return Ok(Vec::new()),
        serde_json::Value::Array(list) => list,
        _ => return Err(BundleError::TimestampsNotAList),
    };
    if list.len() > KEYLESS_MAX_TIMESTAMPS {
        return Err(BundleError::TooManyTimestamps(list.len()));
    }
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let what = format!("RFC 3161 timestamp {i}");
        let der = b64(text(&t["signedTimestamp"], &what)?, &what)?;
        if out.contains(&der) {
            return Err(BundleError::DuplicateTimestamp(i));
        }
        out.push(der);
    }
    Ok(out)
}

fn text<'a>(v: &'a serde_json::Value, what: &str) -> Result<&'a str, BundleError> {
    v.as_str()
        .ok_or_else(|| BundleError::Missing(what.to_string()))
}

impl Bundle {
    /// Parse a Sigstore bundle's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<Bundle, BundleError> {
        if bytes.len() > KEYLESS_MAX_BUNDLE_BYTES {
            return Err(BundleError::TooLarge(bytes.len()));
        }
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(BundleError::NotJson)?;
        let media = v["mediaType"].as_str().unwrap_or_default();
        let version = match media {
            "application/vnd.dev.sigstore.bundle+json;version=0.1" => Version::V01,
            "application/vnd.dev.sigstore.bundle+json;version=0.2" => Version::V02,
            "application/vnd.dev.sigstore.bundle+json;version=0.3"
            | "application/vnd.dev.sigstore.bundle.v0.3+json" => Version::V03,
            _ => return Err(BundleError::MediaType(format!("{:?}", v["mediaType"]))),
        };
        let material = &v["verificationMaterial"];
        // The hint only ever names the key in a message: bounded (cosign's
        // is 44 characters), never trusted.
        let key_hint = match &material["publicKey"] {
            serde_json::Value::Null => None,
            k => Some(
                k["hint"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(88)
                    .collect(),
            ),
        };
        let mut certs = Vec::new();
        if let Some(c) = material["certificate"]["rawBytes"].as_str() {
            certs.push(b64(c, "the certificate")?);
        } else if let Some(list) = material["x509CertificateChain"]["certificates"].as_array() {
            if list.len() > KEYLESS_MAX_CA_CHAIN {
                return Err(BundleError::ChainTooLong(list.len()));
            }
            for (i, c) in list.iter().enumerate() {
                certs.push(b64(
                    text(&c["rawBytes"], "a chain certificate")?,
                    &format!("certificate {i} of the chain"),
                )?);
            }
        }
        let signer = match key_hint {
            Some(_) if !certs.is_empty() => return Err(BundleError::KeyAndCertificate),
            Some(hint) => Material::PublicKey { hint },
            None if certs.is_empty() => return Err(BundleError::NoCertificate),
            None => Material::Certificate {
                leaf: certs.remove(0),
                extra: certs,
            },
        };
        let timestamps = timestamps(&material["timestampVerificationData"])?;
        let entries = material["tlogEntries"]
            .as_array()
            .ok_or(BundleError::NoTlogEntry)?;
        if entries.len() != 1 {
            return Err(BundleError::TlogEntries(entries.len()));
        }
        let e = &entries[0];
        let body_b64 =
            text(&e["canonicalizedBody"], "the log entry's canonicalizedBody")?.to_string();
        let proof = match &e["inclusionProof"] {
            serde_json::Value::Null => None,
            p => {
                let hashes = p["hashes"].as_array().cloned().unwrap_or_default();
                if hashes.len() > KEYLESS_MAX_PROOF_HASHES {
                    return Err(BundleError::TooManyProofHashes(hashes.len()));
                }
                let hashes = hashes
                    .iter()
                    .map(|h| b64(h.as_str().unwrap_or("?"), "an inclusion proof hash"))
                    .collect::<Result<Vec<_>, _>>()?;
                Some(Proof {
                    index: uint(&p["logIndex"], "the inclusion proof's logIndex")?,
                    tree_size: uint(&p["treeSize"], "the inclusion proof's treeSize")?,
                    root_hash: b64(
                        text(&p["rootHash"], "the inclusion proof's rootHash")?,
                        "the rootHash",
                    )?,
                    hashes,
                    checkpoint: p["checkpoint"]["envelope"].as_str().map(str::to_string),
                })
            }
        };
        let entry = TlogEntry {
            log_index: uint(&e["logIndex"], "the log entry's logIndex")?,
            log_id: b64(
                text(&e["logId"]["keyId"], "the log entry's logId")?,
                "the logId",
            )?,
            kind: text(&e["kindVersion"]["kind"], "the log entry's kind")?.to_string(),
            version: text(&e["kindVersion"]["version"], "the log entry's version")?.to_string(),
            integrated_time: match &e["integratedTime"] {
                serde_json::Value::Null => None,
                t => Some(int(t, "the log entry's integratedTime")?),
            },
            set: match e["inclusionPromise"]["signedEntryTimestamp"].as_str() {
                None => None,
                Some(s) => Some(b64(s, "the signed entry timestamp")?),
            },
            proof,
            body: b64(&body_b64, "the log entry's body")?,
            body_b64,
        };
        let (signature, message_digest, dsse) = match (&v["messageSignature"], &v["dsseEnvelope"]) {
            (serde_json::Value::Null, serde_json::Value::Null) => {
                return Err(BundleError::NoSignature);
            }
            (serde_json::Value::Null, env) => {
                let sigs = env["signatures"]
                    .as_array()
                    .ok_or(BundleError::NoDsseSignatures)?;
                if sigs.len() != 1 {
                    return Err(BundleError::DsseSignatures(sigs.len()));
                }
                let signature = b64(
                    text(&sigs[0]["sig"], "the DSSE envelope's signature")?,
                    "the DSSE envelope's signature",
                )?;
                let dsse = Dsse {
                    payload_type: text(&env["payloadType"], "the DSSE envelope's payloadType")?
                        .to_string(),
                    payload: b64(
                        text(&env["payload"], "the DSSE envelope's payload")?,
                        "the DSSE envelope's payload",
                    )?,
                };
                (signature, None, Some(dsse))
            }
            (sig, serde_json::Value::Null) => {
                let signature = b64(
                    text(&sig["signature"], "the bundle's signature")?,
                    "the bundle's signature",
                )?;
                let message_digest = match &sig["messageDigest"] {
                    serde_json::Value::Null => None,
                    d => {
                        if d["algorithm"] != "SHA2_256" {
                            return Err(BundleError::DigestAlgorithm(d["algorithm"].to_string()));
                        }
                        Some(b64(
                            text(&d["digest"], "the message digest")?,
                            "the message digest",
                        )?)
                    }
                };
                (signature, message_digest, None)
            }
            _ => return Err(BundleError::BothSignatures),
        };
        Ok(Bundle {
            version,
            material: signer,
            entry,
            signature,
            message_digest,
            dsse,
            timestamps,
        })
    }

    /// The bundle of a cosign keyless signature layer: the PEM certificate
    /// (and chain) and the `dev.sigstore.cosign/bundle` annotation, with the
    /// layer's base64 signature.
    pub fn from_cosign(
        certificate: &str,
        chain: Option<&str>,
        rekor_bundle: &str,
        signature_b64: &str,
    ) -> Result<Bundle, BundleError> {
        if rekor_bundle.len() > KEYLESS_MAX_BUNDLE_BYTES
            || certificate.len() > KEYLESS_MAX_BUNDLE_BYTES
            || chain.is_some_and(|c| c.len() > KEYLESS_MAX_BUNDLE_BYTES)
        {
            return Err(BundleError::AnnotationTooLarge);
        }
        let leaf = pem_certificates(certificate)?
            .into_iter()
            .next()
            .ok_or(BundleError::NoPemCertificate)?;
        let extra = match chain {
            Some(c) => pem_certificates(c)?,
            None => Vec::new(),
        };
        if extra.len() > KEYLESS_MAX_CA_CHAIN {
            return Err(BundleError::ChainAnnotationTooLong(extra.len()));
        }
        let v: serde_json::Value =
            serde_json::from_str(rekor_bundle).map_err(BundleError::AnnotationNotJson)?;
        let p = &v["Payload"];
        let body_b64 = text(&p["body"], "the bundle annotation's Payload.body")?.to_string();
        let log_id_hex = text(&p["logID"], "the bundle annotation's Payload.logID")?;
        let log_id = hex_decode(log_id_hex).ok_or(BundleError::LogIdNotHex)?;
        let body = b64(&body_b64, "the bundle annotation's body")?;
        let parsed: serde_json::Value =
            serde_json::from_slice(&body).map_err(BundleError::BodyNotJson)?;
        Ok(Bundle {
            version: Version::CosignAnnotations,
            material: Material::Certificate { leaf, extra },
            entry: TlogEntry {
                log_index: uint(&p["logIndex"], "the bundle annotation's logIndex")?,
                log_id,
                kind: parsed["kind"].as_str().unwrap_or_default().to_string(),
                version: parsed["apiVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                integrated_time: Some(int(
                    &p["integratedTime"],
                    "the bundle annotation's integratedTime",
                )?),
                set: Some(b64(
                    text(
                        &v["SignedEntryTimestamp"],
                        "the bundle annotation's SignedEntryTimestamp",
                    )?,
                    "the SignedEntryTimestamp",
                )?),
                proof: None,
                body,
                body_b64,
            },
            signature: b64(signature_b64, "the signature")?,
            message_digest: None,
            dsse: None,
            timestamps: Vec::new(),
        })
    }
}

/// The DER of each `CERTIFICATE` block of a PEM text.
pub fn pem_certificates(text: &str) -> Result<Vec<Vec<u8>>, BundleError> {
    pem_blocks(text, "CERTIFICATE")
}

/// The DER of each PEM block labelled `label` in `text`, in order.
pub fn pem_blocks(text: &str, label: &str) -> Result<Vec<Vec<u8>>, BundleError> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&begin) {
        let after = &rest[start + begin.len()..];
        let stop = after
            .find(&end)
            .ok_or_else(|| BundleError::PemNoEnd(label.to_string()))?;
        let body: String = after[..stop]
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        out.push(b64(&body, &format!("a PEM {label} block"))?);
        rest = &after[stop + end.len()..];
    }
    Ok(out)
}

pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
