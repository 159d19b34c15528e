//! Certificate transparency: the Signed Certificate Timestamps (SCTs)
//! Fulcio embeds in each certificate it issues.
//!
//! Fulcio logs a *precertificate* to a CT log before it issues, and the
//! log's signed promise to publish it (the SCT) goes into the final
//! certificate's extension `1.3.6.1.4.1.11129.2.4.2`. Checking it is what
//! makes a certificate Fulcio issued in secret (a compromised or coerced
//! CA) fail: without a log's promise, nobody could ever have audited its
//! issuance. Sigstore's clients require one SCT that verifies with a CT
//! log of the trusted root (`ctlogs`); so does this module.
//!
//! What an SCT signs (RFC 6962 §3.2, `digitally-signed struct`) is rebuilt
//! here from the leaf: version (v1 = 0), `signature_type`
//! (`certificate_timestamp` = 0), the timestamp (ms), `entry_type`
//! (`precert_entry` = 1), the SHA-256 of the issuer's SubjectPublicKeyInfo,
//! the precertificate's TBSCertificate (the leaf's, with the SCT list
//! extension removed and re-encoded as DER; a 24-bit length), and the SCT's
//! own `extensions` (a 16-bit length; Static CT logs put the entry's index
//! there, so they are signed and must be kept byte for byte).
//!
//! A CT log is found by its log id, the SHA-256 of its key's DER as the
//! trusted root gives it (`ctlogs[].publicKey.rawBytes`); its `validFor`
//! must cover the SCT's timestamp. Every size read from the certificate is
//! bounded ([`crate::budgets`]): the list's bytes, the number of SCTs, the
//! extensions of one.
//!
//! The certificate is decoded by `x509-cert` (strict DER), the SCT list by
//! its `ext::pkix::sct` (RFC 6962's TLS encoding, with `tls_codec`); the
//! precertificate's TBS is the decoded TBSCertificate re-encoded without
//! the list, which is the DER the CA signed (strict decoding means the
//! re-encoding is the same bytes). Only what the log signed is put
//! together here (`signed_struct`): no crate builds RFC 6962's
//! `digitally-signed` input.

use base64::Engine as _;
use der::asn1::OctetString;
use der::{Decode as _, Encode as _};
use sha2::{Digest, Sha256};
use x509_cert::Certificate;
use x509_cert::ext::pkix::sct::{
    HashAlgorithm, SignatureAlgorithm, SignedCertificateTimestamp, SignedCertificateTimestampList,
};

use super::root::{CertificateAuthority, TransparencyLog};
use crate::budgets::{
    KEYLESS_MAX_SCT_EXTENSIONS_BYTES, KEYLESS_MAX_SCT_LIST_BYTES, KEYLESS_MAX_SCTS,
};

/// One SCT, as the list encodes it (RFC 6962 §3.2), version 1 (the only
/// one x509-cert reads: another is a corrupt list).
#[derive(Debug, PartialEq)]
pub struct Sct {
    pub log_id: [u8; 32],
    /// Milliseconds since the epoch.
    pub timestamp_ms: u64,
    pub extensions: Vec<u8>,
    /// `SignatureAndHashAlgorithm` (RFC 5246 §7.4.1.4.1): hash, signature.
    pub hash_alg: HashAlgorithm,
    pub sig_alg: SignatureAlgorithm,
    pub signature: Vec<u8>,
}

/// Why the certificate's SCTs do not vouch for it.
#[derive(Debug, thiserror::Error)]
pub enum SctError {
    #[error("the signing certificate cannot be read for its SCTs: {0}")]
    Unreadable(der::Error),
    #[error("the signing certificate cannot be read for its SCTs: it carries two SCT lists")]
    TwoLists,
    #[error("the certificate's SCT list is corrupt: {0}")]
    Corrupt(Corruption),
    #[error(
        "the certificate's SCT list is {0} bytes; at most {KEYLESS_MAX_SCT_LIST_BYTES} are read (an SCT is about 120)"
    )]
    TooLarge(usize),
    #[error(
        "the certificate carries more than {KEYLESS_MAX_SCTS} SCTs; at most {KEYLESS_MAX_SCTS} are read (Fulcio embeds one)"
    )]
    TooMany,
    #[error(
        "the trusted root names no certificate transparency log (`ctlogs`), so the certificate's SCT cannot be checked; a certificate without a verified SCT is refused, as Sigstore clients refuse it"
    )]
    NoCtLogs,
    #[error(
        "the signing certificate carries no SCT (no embedded SCT list, extension 1.3.6.1.4.1.11129.2.4.2): its issuance was never logged to certificate transparency"
    )]
    NoSct,
    #[error(
        "no SCT of the signing certificate verifies with a CT log of the trusted root: {}",
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    NoneVerifies(Vec<Refused>),
    #[error("a certificate cannot be read for its SCT check: {0}")]
    CertificateUnreadable(der::Error),
    #[error(
        "the signing certificate's issuer is not a certificate of CA {0}, so its SCT cannot be checked"
    )]
    IssuerNotInCa(String),
    #[error("the precertificate is larger than 2^24 bytes")]
    PrecertificateTooLarge,
}

/// How the SCT list is corrupt.
#[derive(Debug, thiserror::Error)]
pub enum Corruption {
    #[error("its extension does not hold a DER OCTET STRING")]
    NotOctetString,
    #[error("it is cut short in its length")]
    NoLength,
    #[error("it says {said} bytes but holds {holds}")]
    Length { said: usize, holds: usize },
    #[error("{0:?}")]
    List(x509_cert::ext::pkix::sct::Error),
    #[error("SCT {index}: {why:?}")]
    Sct {
        index: usize,
        why: x509_cert::ext::pkix::sct::Error,
    },
    #[error(
        "SCT {index}: its extensions are {len} bytes; at most {KEYLESS_MAX_SCT_EXTENSIONS_BYTES} are read"
    )]
    Extensions { index: usize, len: usize },
    #[error("it holds no SCT")]
    Empty,
}

/// Why one SCT does not verify.
#[derive(Debug, thiserror::Error)]
#[error("SCT {index}: {why}")]
pub struct Refused {
    pub index: usize,
    pub why: SctRefusal,
}

/// Why an SCT does not verify with a CT log of the trusted root.
#[derive(Debug, thiserror::Error)]
pub enum SctRefusal {
    #[error(
        "dated {} but the CT log's key ({log}) is {valid}",
        crate::time::rfc3339(at_ms.div_euclid(1000))
    )]
    OutsideValidity {
        at_ms: i64,
        log: String,
        valid: super::root::TimeRange,
    },
    #[error("CT log {log}: {why}")]
    Key {
        log: String,
        why: super::root::UnusableKey,
    },
    /// The algorithms, as the SCT names them.
    #[error("its signature algorithm ({0}) is not one read (ECDSA or RSA with SHA-256, Ed25519)")]
    Algorithm(String),
    #[error("its signature is not CT log {0}'s over this certificate's precertificate")]
    NotSigned(String),
    #[error("from a CT log the trusted root does not name (log id {0})")]
    UnknownLog(String),
}

/// The leaf's SCTs and its precertificate TBS (the TBSCertificate without
/// the SCT list extension, DER), or why they cannot be read. A leaf with no
/// SCT list extension gives an empty list.
pub fn embedded(leaf: &[u8]) -> Result<(Vec<Sct>, Vec<u8>), SctError> {
    let (list, tbs) = split_tbs(leaf)?;
    let scts = match list {
        None => Vec::new(),
        Some(value) => parse_list(value.as_bytes())?,
    };
    Ok((scts, tbs))
}

/// Require one SCT of `leaf` that a CT log of `ctlogs` signed, over the
/// precertificate `ca` issued, within that log's validity.
pub fn verify(
    leaf: &[u8],
    ca: &CertificateAuthority,
    ctlogs: &[TransparencyLog],
) -> Result<(), SctError> {
    if ctlogs.is_empty() {
        return Err(SctError::NoCtLogs);
    }
    let (scts, tbs) = embedded(leaf)?;
    if scts.is_empty() {
        return Err(SctError::NoSct);
    }
    let issuer_key_hash: [u8; 32] = Sha256::digest(issuer_spki(leaf, ca)?).into();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut refusals = Vec::new();
    for (index, sct) in scts.iter().enumerate() {
        let why = if let Some(log) = ctlogs.iter().find(|l| l.log_id == sct.log_id) {
            let at_ms = i64::try_from(sct.timestamp_ms).unwrap_or(i64::MAX);
            if !log.valid.contains_ms(at_ms) {
                SctRefusal::OutsideValidity {
                    at_ms,
                    log: log.name.clone(),
                    valid: log.valid,
                }
            } else {
                match &log.key {
                    Err(e) => SctRefusal::Key {
                        log: log.name.clone(),
                        why: e.clone(),
                    },
                    Ok(key) => {
                        let message = signed_struct(sct, &issuer_key_hash, &tbs)?;
                        let algorithms = algorithms(&sct.hash_alg, &sct.sig_alg);
                        if algorithms.is_empty() {
                            SctRefusal::Algorithm(format!(
                                "hash {:?}, signature {:?}",
                                sct.hash_alg, sct.sig_alg
                            ))
                        } else if key.verifies_with(algorithms, &message, &sct.signature) {
                            return Ok(());
                        } else {
                            SctRefusal::NotSigned(log.name.clone())
                        }
                    }
                }
            }
        } else {
            SctRefusal::UnknownLog(b64.encode(sct.log_id))
        };
        refusals.push(Refused { index, why });
    }
    Err(SctError::NoneVerifies(refusals))
}

/// The signature algorithms an SCT's `(hash, signature)` names; the key's
/// own type must match too (webpki refuses one of another key type).
fn algorithms(
    hash: &HashAlgorithm,
    sig: &SignatureAlgorithm,
) -> &'static [&'static dyn rustls_pki_types::SignatureVerificationAlgorithm] {
    match (hash, sig) {
        (HashAlgorithm::Sha256, SignatureAlgorithm::Ecdsa) => ECDSA_SHA256,
        (HashAlgorithm::Sha256, SignatureAlgorithm::Rsa) => RSA_SHA256,
        // intrinsic(8), ed25519(7) (RFC 8422 §5.1.3)
        (HashAlgorithm::Intrinsic, SignatureAlgorithm::Ed25519) => ED25519,
        _ => &[],
    }
}

static ECDSA_SHA256: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P384_SHA256,
];
static RSA_SHA256: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] =
    &[webpki::ring::RSA_PKCS1_2048_8192_SHA256];
static ED25519: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[webpki::ring::ED25519];

/// RFC 6962 §3.2: what the log signed for a precertificate entry.
fn signed_struct(sct: &Sct, issuer_key_hash: &[u8; 32], tbs: &[u8]) -> Result<Vec<u8>, SctError> {
    let tbs_len = u32::try_from(tbs.len())
        .ok()
        .filter(|n| *n < 1 << 24)
        .ok_or(SctError::PrecertificateTooLarge)?;
    let mut m = Vec::with_capacity(tbs.len() + sct.extensions.len() + 64);
    m.push(0); // version: v1 (the only one x509-cert reads)
    m.push(0); // signature_type: certificate_timestamp
    m.extend_from_slice(&sct.timestamp_ms.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes()); // entry_type: precert_entry
    m.extend_from_slice(issuer_key_hash);
    m.extend_from_slice(&tbs_len.to_be_bytes()[1..]);
    m.extend_from_slice(tbs);
    // Bounded by KEYLESS_MAX_SCT_EXTENSIONS_BYTES at parse.
    m.extend_from_slice(&(sct.extensions.len() as u16).to_be_bytes());
    m.extend_from_slice(&sct.extensions);
    Ok(m)
}

/// Parse the SCT list extension's value (a DER OCTET STRING holding the
/// TLS-encoded `SignedCertificateTimestampList`, RFC 6962 §3.3).
pub fn parse_list(ext_value: &[u8]) -> Result<Vec<Sct>, SctError> {
    let corrupt = SctError::Corrupt;
    let list = SignedCertificateTimestampList::from_der(ext_value)
        .map_err(|_| corrupt(Corruption::NotOctetString))?;
    let bytes = AsRef::<OctetString>::as_ref(&list).as_bytes();
    if bytes.len() > KEYLESS_MAX_SCT_LIST_BYTES {
        return Err(SctError::TooLarge(bytes.len()));
    }
    // The list's own length, said apart for the refusal (x509-cert calls
    // both a short and a long list "trailing data" or "end of stream").
    let [hi, lo, rest @ ..] = bytes else {
        return Err(corrupt(Corruption::NoLength));
    };
    let said = usize::from(u16::from_be_bytes([*hi, *lo]));
    if said != rest.len() {
        return Err(corrupt(Corruption::Length {
            said,
            holds: rest.len(),
        }));
    }
    let serialized = list
        .parse_timestamps()
        .map_err(|e| corrupt(Corruption::List(e)))?;
    if serialized.len() > KEYLESS_MAX_SCTS {
        return Err(SctError::TooMany);
    }
    if serialized.is_empty() {
        return Err(corrupt(Corruption::Empty));
    }
    let mut out = Vec::with_capacity(serialized.len());
    for (index, one) in serialized.iter().enumerate() {
        let sct: SignedCertificateTimestamp = one
            .parse_timestamp()
            .map_err(|why| corrupt(Corruption::Sct { index, why }))?;
        let extensions = sct.extensions.as_slice();
        if extensions.len() > KEYLESS_MAX_SCT_EXTENSIONS_BYTES {
            return Err(corrupt(Corruption::Extensions {
                index,
                len: extensions.len(),
            }));
        }
        out.push(Sct {
            log_id: sct.log_id.key_id,
            timestamp_ms: sct.timestamp,
            extensions: extensions.to_vec(),
            hash_alg: sct.signature.algorithm.hash,
            sig_alg: sct.signature.algorithm.signature,
            signature: sct.signature.signature.as_slice().to_vec(),
        });
    }
    Ok(out)
}

/// The leaf's SCT list extension value (if any) and its TBSCertificate
/// without that extension, re-encoded (the precertificate's TBS).
fn split_tbs(leaf: &[u8]) -> Result<(Option<OctetString>, Vec<u8>), SctError> {
    use const_oid::AssociatedOid as _;
    let cert = Certificate::from_der(leaf).map_err(SctError::Unreadable)?;
    let mut tbs = cert.tbs_certificate;
    let mut list = None;
    if let Some(extensions) = tbs.extensions.take() {
        let mut kept = Vec::with_capacity(extensions.len());
        for ext in extensions {
            if ext.extn_id != SignedCertificateTimestampList::OID {
                kept.push(ext);
            } else if list.replace(ext.extn_value).is_some() {
                // Two SCT lists: ambiguous, refuse.
                return Err(SctError::TwoLists);
            }
        }
        tbs.extensions = (!kept.is_empty()).then_some(kept);
    }
    let tbs = tbs.to_der().map_err(SctError::Unreadable)?;
    Ok((list, tbs))
}

/// The SubjectPublicKeyInfo (DER) of the certificate of `ca` that issued
/// `leaf`: the one whose subject is the leaf's issuer.
fn issuer_spki(leaf: &[u8], ca: &CertificateAuthority) -> Result<Vec<u8>, SctError> {
    let read = |der: &[u8]| Certificate::from_der(der).map_err(SctError::CertificateUnreadable);
    let leaf = read(leaf)?;
    for cert in &ca.chain {
        let cert = read(cert)?.tbs_certificate;
        if cert.subject == leaf.tbs_certificate.issuer {
            return cert
                .subject_public_key_info
                .to_der()
                .map_err(SctError::CertificateUnreadable);
        }
    }
    Err(SctError::IssuerNotInCa(ca.name.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DER value of `tag` holding `content` (a test's fixture).
    fn tlv(tag: der::Tag, content: &[u8]) -> Vec<u8> {
        der::asn1::AnyRef::new(tag, content)
            .and_then(|v| v.to_der())
            .unwrap()
    }

    fn sct_bytes(ext_len: usize, sig_len: usize) -> Vec<u8> {
        let mut s = vec![0u8];
        s.extend([7u8; 32]);
        s.extend(1_700_000_000_000u64.to_be_bytes());
        s.extend((ext_len as u16).to_be_bytes());
        s.extend(vec![1u8; ext_len]);
        s.extend([4, 3]);
        s.extend((sig_len as u16).to_be_bytes());
        s.extend(vec![2u8; sig_len]);
        s
    }

    fn list(scts: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        for s in scts {
            body.extend((s.len() as u16).to_be_bytes());
            body.extend(s);
        }
        let mut tls = (body.len() as u16).to_be_bytes().to_vec();
        tls.extend(body);
        tlv(der::Tag::OctetString, &tls)
    }

    #[test]
    fn an_sct_list_parses_within_its_bounds() {
        let scts = parse_list(&list(&[sct_bytes(5, 70), sct_bytes(0, 71)])).unwrap();
        assert_eq!(scts.len(), 2);
        assert_eq!(scts[0].extensions, vec![1u8; 5]);
        assert_eq!(scts[0].timestamp_ms, 1_700_000_000_000);
        assert_eq!(scts[1].hash_alg, HashAlgorithm::Sha256);
        assert_eq!(scts[1].sig_alg, SignatureAlgorithm::Ecdsa);
        assert_eq!(scts[1].signature.len(), 71);

        let many = vec![sct_bytes(0, 70); KEYLESS_MAX_SCTS + 1];
        let e = parse_list(&list(&many)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("more than {KEYLESS_MAX_SCTS} SCTs")),
            "{e}"
        );
        assert!(parse_list(&list(&many[1..])).is_ok());

        let e = parse_list(&list(&[sct_bytes(
            KEYLESS_MAX_SCT_EXTENSIONS_BYTES + 1,
            70,
        )]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("its extensions are"), "{e}");

        let e = parse_list(&list(&vec![sct_bytes(200, 70); 16]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("at most {KEYLESS_MAX_SCT_LIST_BYTES} are read")),
            "{e}"
        );

        // Cut short, a wrong total, trailing bytes, not an OCTET STRING,
        // an empty list.
        let good = list(&[sct_bytes(0, 70)]);
        let mut short = good.clone();
        short.truncate(good.len() - 1);
        short[1] -= 1;
        for bad in [
            short,
            {
                let mut b = good.clone();
                b[3] ^= 1;
                b
            },
            tlv(der::Tag::Sequence, &good[2..]),
            list(&[]),
            list(&[{
                let mut s = sct_bytes(0, 70);
                s.push(0);
                s
            }]),
        ] {
            let e = parse_list(&bad).unwrap_err().to_string();
            assert!(e.contains("SCT list is corrupt"), "{e}");
        }
    }
}
