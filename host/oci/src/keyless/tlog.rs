//! The transparency log's word for an entry, checked offline with the
//! log's key from the trusted root:
//!
//! * the **signed entry timestamp** (SET, Rekor's "inclusion promise"):
//!   the log's signature over the canonical JSON
//!   `{"body":…,"integratedTime":…,"logID":…,"logIndex":…}` (keys sorted,
//!   no spaces; `logID` in hex). It is what makes `integratedTime` a time
//!   the certificate can be judged at.
//! * the **inclusion proof** (RFC 6962 / RFC 9162 §2.1.3.2): the entry's
//!   leaf hash `SHA-256(0x00 ‖ body)` and the proof's hashes give the
//!   tree's root, which must be the proof's `rootHash` and the root of the
//!   **checkpoint**, a signed note (`origin\nsize\nroot\n…\n\n— name
//!   base64(keyhint ‖ signature)`) signed by the same log's key (the key
//!   hint is the first 4 bytes of the `logId`; a Rekor v2 log's `logId` is
//!   its signed-note key id, so the same holds). Other signature lines —
//!   witnesses' cosignatures — are passed over.
//! * the **body** (`hashedrekord` 0.0.1, or Rekor v2's `hashedrekord`
//!   0.0.2) must name the bundle's certificate (or key), its signature and
//!   the artifact's SHA-256: a log entry of another signature proves
//!   nothing about this one. For a DSSE envelope,
//!   a `dsse` 0.0.1 body names the payload's SHA-256 and the signatures
//!   with their verifiers (the certificate, PEM); an `intoto` 0.0.2 body
//!   the payload's SHA-256 and the envelope's signatures (base64 of the
//!   base64) with their public keys (the certificate, PEM); a Rekor v2
//!   `dsse` 0.0.2 body the payload's SHA-256 and the signature with its
//!   verifier (DER), a Rekor v2 `hashedrekord` 0.0.2 body ("hashedrekord
//!   over DSSE") the SHA-256 of the envelope's PAE, its signature and its
//!   verifier. The
//!   envelope hash a v1 entry records is not compared (as sigstore-python and
//!   sigstore-go do not): the envelope's JSON has no canonical form.

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::bundle::{Proof, TlogEntry, hex};
use super::root::{TransparencyLog, UnusableKey};

/// Why a log entry does not vouch for this signature.
#[derive(Debug, thiserror::Error)]
pub enum TlogError {
    #[error("the log entry is from a transparency log the trusted root does not name (logId {0})")]
    UnknownLog(String),
    #[error("the log entry has no signed entry timestamp")]
    NoSet,
    #[error("the log entry has no integratedTime")]
    NoIntegratedTime,
    #[error("log {log}: {why}")]
    Key { log: String, why: UnusableKey },
    #[error(
        "the signed entry timestamp is not the log's signature ({0}) over this entry (its body, integratedTime, logID and logIndex)"
    )]
    BadSet(String),
    #[error("the inclusion proof has no checkpoint")]
    NoCheckpoint,
    #[error(
        "the inclusion proof does not lead to its rootHash (a proof hash or the entry was altered)"
    )]
    ProofMismatch,
    #[error(
        "the checkpoint is for another tree (size {size}) than the inclusion proof (size {proof_size}, or another root hash)"
    )]
    OtherTree { size: u64, proof_size: u64 },
    #[error(transparent)]
    Proof(#[from] ProofError),
    #[error("the checkpoint is not a signed note (no blank line before its signatures)")]
    NotSignedNote,
    #[error("the checkpoint has no origin")]
    NoOrigin,
    #[error("the checkpoint has no tree size on its second line (is its origin line missing?)")]
    NoTreeSize,
    #[error("the checkpoint has no root hash on its third line")]
    NoRootHash,
    #[error("a checkpoint signature line does not start with an em dash")]
    NoEmDash,
    #[error("the checkpoint's signature by {0} does not verify")]
    BadCheckpointSignature(String),
    #[error("the checkpoint carries no signature by {0} (no key hint matches)")]
    NoCheckpointSignature(String),
    #[error("the log entry's body is not JSON: {0}")]
    BodyNotJson(serde_json::Error),
    #[error(
        "the log entry says it is {entry_kind} {entry_version} but its body is {kind} {version}"
    )]
    KindMismatch {
        entry_kind: String,
        entry_version: String,
        kind: String,
        version: String,
    },
    #[error(
        "the log entry is a {kind:?} {version:?}; a message signature is verified against a hashedrekord 0.0.1 (Rekor v1) or 0.0.2 (Rekor v2) entry"
    )]
    NotMessageKind { kind: String, version: String },
    #[error(
        "the log entry is a {kind:?} {version:?}; a DSSE envelope is verified against a dsse 0.0.1 or intoto 0.0.2 entry (Rekor v1) or a dsse or hashedrekord 0.0.2 one (Rekor v2)"
    )]
    NotDsseKind { kind: String, version: String },
    /// `logged` is the algorithm and digest the entry records.
    #[error("the log entry is for another {what} ({logged}), not this one (sha256 {digest})")]
    OtherDigest {
        what: &'static str,
        logged: String,
        digest: String,
    },
    #[error(
        "the log entry is for another DSSE payload ({logged}), not this envelope's (sha256 {payload})"
    )]
    OtherPayload { logged: String, payload: String },
    #[error("the log entry records another signature than the bundle's")]
    OtherSignature,
    #[error("the log entry records another DSSE signature than the envelope's")]
    OtherDsseSignature,
    #[error("the log entry records another {0} than the bundle's")]
    OtherSigner(&'static str),
    #[error("the log entry records another verifier than the bundle's {0}")]
    OtherVerifier(&'static str),
    #[error("the log entry records no DSSE signatures")]
    NoDsseSignatures,
    #[error("the log entry records {0} DSSE signatures; the envelope has one")]
    DsseSignatureCount(usize),
}

/// Why an inclusion proof gives no root.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    #[error("the inclusion proof's index {index} is not below its tree size {size}")]
    IndexNotBelow { index: u64, size: u64 },
    #[error("an inclusion proof hash is not 32 bytes")]
    HashLength,
    #[error("the inclusion proof has more hashes than the tree is deep")]
    TooManyHashes,
    #[error("the inclusion proof has fewer hashes than the tree is deep")]
    TooFewHashes,
}

/// The log `entry` names, valid at `at` (seconds), if the trusted root has it.
pub fn log_for<'a>(
    logs: &'a [TransparencyLog],
    entry: &TlogEntry,
) -> Result<&'a TransparencyLog, TlogError> {
    logs.iter()
        .find(|l| l.log_id == entry.log_id)
        .ok_or_else(|| {
            let b64 = base64::engine::general_purpose::STANDARD;
            TlogError::UnknownLog(b64.encode(&entry.log_id))
        })
}

/// Check the SET of `entry` with `log`'s key.
pub fn verify_set(log: &TransparencyLog, entry: &TlogEntry) -> Result<(), TlogError> {
    let set = entry.set.as_ref().ok_or(TlogError::NoSet)?;
    let time = entry.integrated_time.ok_or(TlogError::NoIntegratedTime)?;
    let key = log_key(log)?;
    let canonical = format!(
        r#"{{"body":"{}","integratedTime":{},"logID":"{}","logIndex":{}}}"#,
        entry.body_b64,
        time,
        hex(&entry.log_id),
        entry.log_index
    );
    if !key.verifies(canonical.as_bytes(), set) {
        return Err(TlogError::BadSet(log.name.clone()));
    }
    Ok(())
}

/// The log's key, or why it cannot be used.
fn log_key(log: &TransparencyLog) -> Result<&super::root::LogKey, TlogError> {
    log.key.as_ref().map_err(|why| TlogError::Key {
        log: log.name.clone(),
        why: why.clone(),
    })
}

/// Check an inclusion proof and its checkpoint for `body`.
pub fn verify_inclusion(
    log: &TransparencyLog,
    proof: &Proof,
    body: &[u8],
) -> Result<(), TlogError> {
    let checkpoint = proof.checkpoint.as_deref().ok_or(TlogError::NoCheckpoint)?;
    let leaf = hash_leaf(body);
    let root = root_from_proof(proof.index, proof.tree_size, leaf, &proof.hashes)?;
    if root.as_slice() != proof.root_hash.as_slice() {
        return Err(TlogError::ProofMismatch);
    }
    let (size, root_hash) = verify_checkpoint(log, checkpoint)?;
    if size != proof.tree_size || root_hash != proof.root_hash {
        return Err(TlogError::OtherTree {
            size,
            proof_size: proof.tree_size,
        });
    }
    Ok(())
}

fn hash_leaf(body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(body);
    h.finalize().into()
}

fn hash_children(left: &[u8], right: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// RFC 9162 §2.1.3.2: the root an inclusion proof gives.
pub fn root_from_proof(
    index: u64,
    size: u64,
    leaf: [u8; 32],
    proof: &[Vec<u8>],
) -> Result<[u8; 32], ProofError> {
    if index >= size {
        return Err(ProofError::IndexNotBelow { index, size });
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = leaf;
    for p in proof {
        if p.len() != 32 {
            return Err(ProofError::HashLength);
        }
        if s == 0 {
            return Err(ProofError::TooManyHashes);
        }
        if f & 1 == 1 || f == s {
            r = hash_children(p, &r);
            if f & 1 == 0 {
                while f & 1 == 0 && f != 0 {
                    f >>= 1;
                    s >>= 1;
                }
            }
        } else {
            r = hash_children(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(ProofError::TooFewHashes);
    }
    Ok(r)
}

/// Verify a checkpoint's signature by `log`; its tree size and root hash.
fn verify_checkpoint(log: &TransparencyLog, note: &str) -> Result<(u64, Vec<u8>), TlogError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (text, signatures) = note.split_once("\n\n").ok_or(TlogError::NotSignedNote)?;
    let text = format!("{text}\n");
    let mut lines = text.lines();
    let _origin = lines
        .next()
        .filter(|o| !o.is_empty())
        .ok_or(TlogError::NoOrigin)?;
    let size: u64 = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or(TlogError::NoTreeSize)?;
    let root = lines
        .next()
        .and_then(|l| b64.decode(l).ok())
        .filter(|r| r.len() == 32)
        .ok_or(TlogError::NoRootHash)?;
    let key = log_key(log)?;
    let hint = log.log_id.get(..4).unwrap_or_default();
    let mut found = false;
    for line in signatures
        .lines()
        .filter(|l| !l.is_empty())
        .take(crate::budgets::KEYLESS_MAX_CHECKPOINT_SIGNATURES)
    {
        let Some(rest) = line.strip_prefix("\u{2014} ") else {
            return Err(TlogError::NoEmDash);
        };
        let Some((_name, sig)) = rest.rsplit_once(' ') else {
            continue;
        };
        let Ok(sig) = b64.decode(sig) else {
            continue;
        };
        if sig.len() < 5 || &sig[..4] != hint {
            continue;
        }
        found = true;
        if key.verifies(text.as_bytes(), &sig[4..]) {
            return Ok((size, root));
        }
    }
    Err(if found {
        TlogError::BadCheckpointSignature(log.name.clone())
    } else {
        TlogError::NoCheckpointSignature(log.name.clone())
    })
}

/// Check that a `hashedrekord` body names `signer`, `signature` and the
/// artifact's `digest` (SHA-256): a Rekor v1 `hashedrekord` 0.0.1 body, or
/// a Rekor v2 `hashedrekord` 0.0.2 one.
pub fn check_body(
    entry: &TlogEntry,
    signer: Signer<'_>,
    signature: &[u8],
    digest: &[u8],
) -> Result<(), TlogError> {
    let v = parsed_body(entry)?;
    let (kind, version) = kind_version(&v);
    same_kind(entry, kind, version)?;
    match (kind, version) {
        ("hashedrekord", "0.0.1") => check_hashedrekord_v1(&v["spec"], signer, signature, digest),
        ("hashedrekord", "0.0.2") => {
            check_hashedrekord_v2(&v, signer, signature, digest, "artifact")
        }
        _ => Err(TlogError::NotMessageKind {
            kind: kind.to_string(),
            version: version.to_string(),
        }),
    }
}

/// The entry's `kindVersion` must be what its body says it is.
fn same_kind(entry: &TlogEntry, kind: &str, version: &str) -> Result<(), TlogError> {
    if entry.kind != kind || entry.version != version {
        return Err(TlogError::KindMismatch {
            entry_kind: entry.kind.clone(),
            entry_version: entry.version.clone(),
            kind: kind.to_string(),
            version: version.to_string(),
        });
    }
    Ok(())
}

fn check_hashedrekord_v1(
    spec: &serde_json::Value,
    signer: Signer<'_>,
    signature: &[u8],
    digest: &[u8],
) -> Result<(), TlogError> {
    if spec["data"]["hash"]["algorithm"] != "sha256"
        || spec["data"]["hash"]["value"].as_str() != Some(hex(digest).as_str())
    {
        return Err(TlogError::OtherDigest {
            what: "artifact",
            logged: format!(
                "sha256 {}",
                spec["data"]["hash"]["value"].as_str().unwrap_or("?")
            ),
            digest: hex(digest),
        });
    }
    let logged_sig = decoded(&spec["signature"]["content"]).unwrap_or_default();
    if logged_sig != signature {
        return Err(TlogError::OtherSignature);
    }
    if !signer.is_in(&spec["signature"]["publicKey"]["content"]) {
        return Err(TlogError::OtherSigner(signer.what()));
    }
    Ok(())
}

/// A Rekor v2 `hashedrekord` 0.0.2 body (`spec.hashedRekordV002`): its
/// `data` digest (SHA2_256, base64) is `digest` — the artifact's, or for a
/// DSSE envelope its PAE's (`what`) —, its `signature.content` is
/// `signature` and its `verifier` (an `x509Certificate` or a `publicKey`,
/// DER) is `signer`.
fn check_hashedrekord_v2(
    body: &serde_json::Value,
    signer: Signer<'_>,
    signature: &[u8],
    digest: &[u8],
    what: &'static str,
) -> Result<(), TlogError> {
    let spec = &body["spec"]["hashedRekordV002"];
    let data = &spec["data"];
    let logged = decoded(&data["digest"]);
    if data["algorithm"] != "SHA2_256" || logged.as_deref() != Some(digest) {
        return Err(TlogError::OtherDigest {
            what,
            logged: format!(
                "{} {}",
                data["algorithm"].as_str().unwrap_or("?"),
                logged.map(|d| hex(&d)).unwrap_or_else(|| "?".into())
            ),
            digest: hex(digest),
        });
    }
    let logged_sig = decoded(&spec["signature"]["content"]).unwrap_or_default();
    if logged_sig != signature {
        return Err(if what == "artifact" {
            TlogError::OtherSignature
        } else {
            TlogError::OtherDsseSignature
        });
    }
    if !signer.is_verifier(&spec["signature"]["verifier"]) {
        return Err(TlogError::OtherSigner(signer.what()));
    }
    Ok(())
}

/// The bytes of a base64 field of a log body, if it is one.
fn decoded(field: &serde_json::Value) -> Option<Vec<u8>> {
    field
        .as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
}

/// The entry's canonicalized body, parsed.
fn parsed_body(entry: &TlogEntry) -> Result<serde_json::Value, TlogError> {
    serde_json::from_slice(&entry.body).map_err(TlogError::BodyNotJson)
}

/// A parsed body's `kind` and `apiVersion` (empty when absent).
fn kind_version(v: &serde_json::Value) -> (&str, &str) {
    (
        v["kind"].as_str().unwrap_or_default(),
        v["apiVersion"].as_str().unwrap_or_default(),
    )
}

/// Who a log entry must name as the signer: the bundle's certificate, or
/// the verifier's public key.
#[derive(Clone, Copy, Debug)]
pub enum Signer<'a> {
    /// The leaf certificate, DER.
    Certificate(&'a [u8]),
    /// The SubjectPublicKeyInfo, DER.
    PublicKey(&'a [u8]),
}

impl Signer<'_> {
    fn what(self) -> &'static str {
        match self {
            Signer::Certificate(_) => "certificate",
            Signer::PublicKey(_) => "public key",
        }
    }

    /// Whether a Rekor v2 `verifier` holds this signer: its
    /// `x509Certificate` or `publicKey` `rawBytes` (base64 DER) are these
    /// bytes.
    fn is_verifier(self, verifier: &serde_json::Value) -> bool {
        let (field, der) = match self {
            Signer::Certificate(d) => ("x509Certificate", d),
            Signer::PublicKey(d) => ("publicKey", d),
        };
        decoded(&verifier[field]["rawBytes"]).is_some_and(|logged| logged == der)
    }

    /// Whether a log body's base64 PEM field holds this signer: its first
    /// PEM block, of the signer's kind, is these bytes.
    fn is_in(self, field: &serde_json::Value) -> bool {
        let (label, der) = match self {
            Signer::Certificate(d) => ("CERTIFICATE", d),
            Signer::PublicKey(d) => ("PUBLIC KEY", d),
        };
        let Some(pem) = field
            .as_str()
            .and_then(|f| base64::engine::general_purpose::STANDARD.decode(f).ok())
            .and_then(|p| String::from_utf8(p).ok())
        else {
            return false;
        };
        super::bundle::pem_blocks(&pem, label)
            .ok()
            .and_then(|blocks| blocks.into_iter().next())
            .is_some_and(|first| first == der)
    }
}

/// Check that a `dsse` 0.0.1 or `intoto` 0.0.2 body names the envelope's
/// payload, its one `signature` and `signer` as the verifier; or that a
/// Rekor v2 `dsse` 0.0.2 body names the payload, that signature and that
/// verifier, or a `hashedrekord` 0.0.2 one (rekor-v2 "hashedrekord over
/// DSSE") the SHA-256 of the envelope's PAE, that signature and that
/// verifier.
pub fn check_dsse_body(
    entry: &TlogEntry,
    signer: Signer<'_>,
    signature: &[u8],
    dsse: &super::bundle::Dsse,
) -> Result<(), TlogError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let v = parsed_body(entry)?;
    let (kind, version) = kind_version(&v);
    same_kind(entry, kind, version)?;
    match (kind, version) {
        ("hashedrekord", "0.0.2") => {
            let pae = Sha256::digest(dsse.pae());
            return check_hashedrekord_v2(&v, signer, signature, &pae, "DSSE envelope");
        }
        ("dsse", "0.0.2") => return check_dsse_v2(&v, signer, signature, dsse),
        _ => {}
    }
    let spec = &v["spec"];
    let (hash, signatures, sig_field, key_field, double) = match (kind, version) {
        ("dsse", "0.0.1") => (
            &spec["payloadHash"],
            &spec["signatures"],
            "signature",
            "verifier",
            false,
        ),
        ("intoto", "0.0.2") => (
            &spec["content"]["payloadHash"],
            &spec["content"]["envelope"]["signatures"],
            "sig",
            "publicKey",
            true,
        ),
        _ => {
            return Err(TlogError::NotDsseKind {
                kind: kind.to_string(),
                version: version.to_string(),
            });
        }
    };
    let payload_hash = hex(&Sha256::digest(&dsse.payload));
    if hash["algorithm"] != "sha256" || hash["value"].as_str() != Some(payload_hash.as_str()) {
        return Err(TlogError::OtherPayload {
            logged: format!("sha256 {}", hash["value"].as_str().unwrap_or("?")),
            payload: payload_hash,
        });
    }
    let signatures = signatures.as_array().ok_or(TlogError::NoDsseSignatures)?;
    if signatures.len() != 1 {
        return Err(TlogError::DsseSignatureCount(signatures.len()));
    }
    let logged_sig = signatures[0][sig_field]
        .as_str()
        .and_then(|s| b64.decode(s).ok())
        .and_then(|s| if double { b64.decode(s).ok() } else { Some(s) })
        .unwrap_or_default();
    if logged_sig != signature {
        return Err(TlogError::OtherDsseSignature);
    }
    if !signer.is_in(&signatures[0][key_field]) {
        return Err(TlogError::OtherVerifier(signer.what()));
    }
    Ok(())
}

/// A Rekor v2 `dsse` 0.0.2 body (`spec.dsseV002`): its `payloadHash`
/// (SHA2_256, base64) is the envelope's payload's, and its one signature's
/// `content` and `verifier` are the envelope's signature and `signer`.
fn check_dsse_v2(
    body: &serde_json::Value,
    signer: Signer<'_>,
    signature: &[u8],
    dsse: &super::bundle::Dsse,
) -> Result<(), TlogError> {
    let spec = &body["spec"]["dsseV002"];
    let hash = &spec["payloadHash"];
    let payload_hash = Sha256::digest(&dsse.payload);
    let logged = decoded(&hash["digest"]);
    if hash["algorithm"] != "SHA2_256" || logged.as_deref() != Some(payload_hash.as_slice()) {
        return Err(TlogError::OtherPayload {
            logged: format!(
                "{} {}",
                hash["algorithm"].as_str().unwrap_or("?"),
                logged.map(|d| hex(&d)).unwrap_or_else(|| "?".into())
            ),
            payload: hex(&payload_hash),
        });
    }
    let signatures = spec["signatures"]
        .as_array()
        .ok_or(TlogError::NoDsseSignatures)?;
    let [logged] = signatures.as_slice() else {
        return Err(TlogError::DsseSignatureCount(signatures.len()));
    };
    let logged_sig = decoded(&logged["content"]).unwrap_or_default();
    if logged_sig != signature {
        return Err(TlogError::OtherDsseSignature);
    }
    if !signer.is_verifier(&logged["verifier"]) {
        return Err(TlogError::OtherVerifier(signer.what()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6962 trees of every size up to 9: every leaf's proof (built
    /// here by the definition) gives the root, and a wrong index does not.
    #[test]
    fn inclusion_proofs_of_small_trees() {
        fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
            if leaves.len() == 1 {
                return leaves[0];
            }
            let k = leaves.len().next_power_of_two() / 2;
            hash_children(&mth(&leaves[..k]), &mth(&leaves[k..]))
        }
        fn path(m: usize, leaves: &[[u8; 32]]) -> Vec<Vec<u8>> {
            if leaves.len() == 1 {
                return Vec::new();
            }
            let k = leaves.len().next_power_of_two() / 2;
            if m < k {
                let mut p = path(m, &leaves[..k]);
                p.push(mth(&leaves[k..]).to_vec());
                p
            } else {
                let mut p = path(m - k, &leaves[k..]);
                p.push(mth(&leaves[..k]).to_vec());
                p
            }
        }
        for n in 1..=9usize {
            let leaves: Vec<[u8; 32]> = (0..n).map(|i| hash_leaf(&[i as u8])).collect();
            let root = mth(&leaves);
            for m in 0..n {
                let p = path(m, &leaves);
                assert_eq!(
                    root_from_proof(m as u64, n as u64, leaves[m], &p).unwrap(),
                    root,
                    "{n} {m}"
                );
                if n > 1 {
                    let other = (m + 1) % n;
                    assert_ne!(
                        root_from_proof(other as u64, n as u64, leaves[m], &p).ok(),
                        Some(root)
                    );
                }
            }
        }
        assert!(root_from_proof(3, 3, [0; 32], &[]).is_err());
    }
}
