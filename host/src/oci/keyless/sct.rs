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

use base64::Engine as _;
use der::asn1::AnyRef;
use der::{Encode as _, Tagged as _};
use sha2::{Digest, Sha256};

use super::cert::items;
use super::root::{CertificateAuthority, TransparencyLog};
use crate::budgets::{
    KEYLESS_MAX_SCT_EXTENSIONS_BYTES, KEYLESS_MAX_SCT_LIST_BYTES, KEYLESS_MAX_SCTS,
};

/// The embedded SCT list extension, 1.3.6.1.4.1.11129.2.4.2 (the OID's DER
/// value bytes).
const OID_SCT_LIST: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0xd6, 0x79, 0x02, 0x04, 0x02];

/// One SCT, as the list encodes it (RFC 6962 §3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sct {
    pub version: u8,
    pub log_id: [u8; 32],
    /// Milliseconds since the epoch.
    pub timestamp_ms: u64,
    pub extensions: Vec<u8>,
    /// `SignatureAndHashAlgorithm` (RFC 5246 §7.4.1.4.1): hash, signature.
    pub hash_alg: u8,
    pub sig_alg: u8,
    pub signature: Vec<u8>,
}

/// The leaf's SCTs and its precertificate TBS (the TBSCertificate without
/// the SCT list extension, DER), or why they cannot be read. A leaf with no
/// SCT list extension gives an empty list.
pub fn embedded(leaf: &[u8]) -> Result<(Vec<Sct>, Vec<u8>), String> {
    let (list, tbs) = split_tbs(leaf)
        .map_err(|e| format!("the signing certificate cannot be read for its SCTs: {e}"))?;
    let scts = match list {
        None => Vec::new(),
        Some(bytes) => parse_list(&bytes)?,
    };
    Ok((scts, tbs))
}

/// Require one SCT of `leaf` that a CT log of `ctlogs` signed, over the
/// precertificate `ca` issued, within that log's validity.
pub fn verify(
    leaf: &[u8],
    ca: &CertificateAuthority,
    ctlogs: &[TransparencyLog],
) -> Result<(), String> {
    if ctlogs.is_empty() {
        return Err(
            "the trusted root names no certificate transparency log (`ctlogs`), so the certificate's SCT cannot be checked; a certificate without a verified SCT is refused, as Sigstore clients refuse it"
                .into(),
        );
    }
    let (scts, tbs) = embedded(leaf)?;
    if scts.is_empty() {
        return Err(
            "the signing certificate carries no SCT (no embedded SCT list, extension 1.3.6.1.4.1.11129.2.4.2): its issuance was never logged to certificate transparency"
                .into(),
        );
    }
    let issuer_key_hash: [u8; 32] = Sha256::digest(issuer_spki(leaf, ca)?).into();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut reasons = Vec::new();
    for (i, sct) in scts.iter().enumerate() {
        let why = if sct.version != 0 {
            format!("version {} (only v1 is read)", u16::from(sct.version) + 1)
        } else if let Some(log) = ctlogs.iter().find(|l| l.log_id == sct.log_id) {
            let at_ms = i64::try_from(sct.timestamp_ms).unwrap_or(i64::MAX);
            if !log.valid.contains_ms(at_ms) {
                format!(
                    "dated {} but the CT log's key ({}) is {}",
                    crate::clock::rfc3339(at_ms.div_euclid(1000)),
                    log.name,
                    log.valid
                )
            } else {
                match &log.key {
                    Err(e) => format!("CT log {}: {e}", log.name),
                    Ok(key) => {
                        let message = signed_struct(sct, &issuer_key_hash, &tbs)?;
                        let algorithms = algorithms(sct.hash_alg, sct.sig_alg);
                        if algorithms.is_empty() {
                            format!(
                                "its signature algorithm (hash {}, signature {}) is not one read (ECDSA or RSA with SHA-256, Ed25519)",
                                sct.hash_alg, sct.sig_alg
                            )
                        } else if key.verifies_with(algorithms, &message, &sct.signature) {
                            return Ok(());
                        } else {
                            format!(
                                "its signature is not CT log {}'s over this certificate's precertificate",
                                log.name
                            )
                        }
                    }
                }
            }
        } else {
            format!(
                "from a CT log the trusted root does not name (log id {})",
                b64.encode(sct.log_id)
            )
        };
        reasons.push(format!("SCT {i}: {why}"));
    }
    Err(format!(
        "no SCT of the signing certificate verifies with a CT log of the trusted root: {}",
        reasons.join("; ")
    ))
}

/// The signature algorithms an SCT's `(hash, signature)` names; the key's
/// own type must match too (webpki refuses one of another key type).
fn algorithms(
    hash: u8,
    sig: u8,
) -> &'static [&'static dyn rustls_pki_types::SignatureVerificationAlgorithm] {
    match (hash, sig) {
        // sha256(4), ecdsa(3)
        (4, 3) => ECDSA_SHA256,
        // sha256(4), rsa(1)
        (4, 1) => RSA_SHA256,
        // intrinsic(8), ed25519(7) (RFC 8422 §5.1.3)
        (8, 7) => ED25519,
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
fn signed_struct(sct: &Sct, issuer_key_hash: &[u8; 32], tbs: &[u8]) -> Result<Vec<u8>, String> {
    let tbs_len = u32::try_from(tbs.len())
        .ok()
        .filter(|n| *n < 1 << 24)
        .ok_or("the precertificate is larger than 2^24 bytes")?;
    let mut m = Vec::with_capacity(tbs.len() + sct.extensions.len() + 64);
    m.push(sct.version);
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

/// A TLS-encoding reader over an SCT list (big-endian, length-prefixed).
struct Tls<'a> {
    bytes: &'a [u8],
}

impl<'a> Tls<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.bytes.len() < n {
            return Err(format!("the SCT list is cut short in {what}"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u16(&mut self, what: &str) -> Result<usize, String> {
        let b = self.take(2, what)?;
        Ok(usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }
}

/// Parse the SCT list extension's value (a DER OCTET STRING holding the
/// TLS-encoded `SignedCertificateTimestampList`, RFC 6962 §3.3).
pub fn parse_list(ext_value: &[u8]) -> Result<Vec<Sct>, String> {
    let corrupt = |why: String| format!("the certificate's SCT list is corrupt: {why}");
    let inner = AnyRef::try_from(ext_value)
        .ok()
        .filter(|v| v.tag() == der::Tag::OctetString)
        .ok_or_else(|| corrupt("its extension does not hold a DER OCTET STRING".into()))?;
    let bytes = inner.value();
    if bytes.len() > KEYLESS_MAX_SCT_LIST_BYTES {
        return Err(format!(
            "the certificate's SCT list is {} bytes; at most {KEYLESS_MAX_SCT_LIST_BYTES} are read (an SCT is about 120)",
            bytes.len()
        ));
    }
    let mut r = Tls { bytes };
    let total = r.u16("its length").map_err(corrupt)?;
    if total != r.bytes.len() {
        return Err(corrupt(format!(
            "it says {total} bytes but holds {}",
            r.bytes.len()
        )));
    }
    let mut out = Vec::new();
    while !r.bytes.is_empty() {
        if out.len() == KEYLESS_MAX_SCTS {
            return Err(format!(
                "the certificate carries more than {KEYLESS_MAX_SCTS} SCTs; at most {KEYLESS_MAX_SCTS} are read (Fulcio embeds one)"
            ));
        }
        let n = r.u16("an SCT's length").map_err(corrupt)?;
        let one = r.take(n, "an SCT").map_err(corrupt)?;
        out.push(parse_sct(one).map_err(|e| corrupt(format!("SCT {}: {e}", out.len())))?);
    }
    if out.is_empty() {
        return Err(corrupt("it holds no SCT".into()));
    }
    Ok(out)
}

fn parse_sct(bytes: &[u8]) -> Result<Sct, String> {
    let mut r = Tls { bytes };
    let version = r.u8("the version")?;
    let log_id: [u8; 32] = r.take(32, "the log id")?.try_into().expect("32 bytes");
    let t = r.take(8, "the timestamp")?;
    let timestamp_ms = u64::from_be_bytes(t.try_into().expect("8 bytes"));
    let n = r.u16("the extensions' length")?;
    if n > KEYLESS_MAX_SCT_EXTENSIONS_BYTES {
        return Err(format!(
            "its extensions are {n} bytes; at most {KEYLESS_MAX_SCT_EXTENSIONS_BYTES} are read"
        ));
    }
    let extensions = r.take(n, "the extensions")?.to_vec();
    let hash_alg = r.u8("the hash algorithm")?;
    let sig_alg = r.u8("the signature algorithm")?;
    let n = r.u16("the signature's length")?;
    let signature = r.take(n, "the signature")?.to_vec();
    if !r.bytes.is_empty() {
        return Err(format!("{} bytes follow its signature", r.bytes.len()));
    }
    Ok(Sct {
        version,
        log_id,
        timestamp_ms,
        extensions,
        hash_alg,
        sig_alg,
        signature,
    })
}

/// The leaf's SCT list extension value (if any) and its TBSCertificate
/// without that extension, re-encoded (the precertificate's TBS).
fn split_tbs(leaf: &[u8]) -> Result<(Option<Vec<u8>>, Vec<u8>), der::Error> {
    let cert = AnyRef::try_from(leaf)?;
    let tbs = items(cert.value())?
        .into_iter()
        .next()
        .ok_or(der::ErrorKind::Incomplete {
            expected_len: 1u8.into(),
            actual_len: 0u8.into(),
        })?;
    let mut list = None;
    let mut fields = Vec::new();
    for field in items(tbs.value())? {
        // [3] EXPLICIT Extensions
        if u8::from(field.tag()) != 0xa3 {
            fields.extend(field.to_der()?);
            continue;
        }
        let extensions = AnyRef::try_from(field.value())?;
        let mut kept = Vec::new();
        for ext in items(extensions.value())? {
            let parts = items(ext.value())?;
            let is_sct = parts.first().is_some_and(|oid| {
                oid.tag() == der::Tag::ObjectIdentifier && oid.value() == OID_SCT_LIST
            });
            match parts.last() {
                Some(value) if is_sct && value.tag() == der::Tag::OctetString => {
                    if list.is_some() {
                        // Two SCT lists: ambiguous, refuse.
                        return Err(der::ErrorKind::Value {
                            tag: der::Tag::OctetString,
                        }
                        .into());
                    }
                    list = Some(value.value().to_vec());
                }
                _ => kept.extend(ext.to_der()?),
            }
        }
        if !kept.is_empty() {
            fields.extend(tlv(0xa3, &tlv(0x30, &kept)));
        }
    }
    Ok((list, tlv(0x30, &fields)))
}

/// The SubjectPublicKeyInfo (DER) of the certificate of `ca` that issued
/// `leaf`: the one whose subject is the leaf's issuer.
fn issuer_spki(leaf: &[u8], ca: &CertificateAuthority) -> Result<Vec<u8>, String> {
    let bad = |e: der::Error| format!("a certificate cannot be read for its SCT check: {e}");
    let issuer = tbs_field(leaf, 3).map_err(bad)?;
    for cert in &ca.chain {
        if tbs_field(cert, 5).map_err(bad)? == issuer {
            return tbs_field(cert, 6).map_err(bad);
        }
    }
    Err(format!(
        "the signing certificate's issuer is not a certificate of CA {}, so its SCT cannot be checked",
        ca.name
    ))
}

/// The DER of a TBSCertificate field by its index after the optional
/// `[0] version`: 1 serial, 2 signature, 3 issuer, 4 validity, 5 subject,
/// 6 subjectPublicKeyInfo.
fn tbs_field(cert: &[u8], index: usize) -> Result<Vec<u8>, der::Error> {
    let cert = AnyRef::try_from(cert)?;
    let missing = || -> der::Error {
        der::ErrorKind::Incomplete {
            expected_len: 1u8.into(),
            actual_len: 0u8.into(),
        }
        .into()
    };
    let tbs = items(cert.value())?
        .into_iter()
        .next()
        .ok_or_else(missing)?;
    let fields = items(tbs.value())?;
    let skip = usize::from(fields.first().is_some_and(|f| u8::from(f.tag()) == 0xa0));
    fields.get(skip + index - 1).ok_or_else(missing)?.to_der()
}

/// A DER TLV: `tag`, the definite length, `content`.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        tlv(0x04, &tls)
    }

    #[test]
    fn an_sct_list_parses_within_its_bounds() {
        let scts = parse_list(&list(&[sct_bytes(5, 70), sct_bytes(0, 71)])).unwrap();
        assert_eq!(scts.len(), 2);
        assert_eq!(scts[0].extensions, vec![1u8; 5]);
        assert_eq!(scts[0].timestamp_ms, 1_700_000_000_000);
        assert_eq!((scts[1].hash_alg, scts[1].sig_alg), (4, 3));
        assert_eq!(scts[1].signature.len(), 71);

        let many = vec![sct_bytes(0, 70); KEYLESS_MAX_SCTS + 1];
        let e = parse_list(&list(&many)).unwrap_err();
        assert!(
            e.contains(&format!("more than {KEYLESS_MAX_SCTS} SCTs")),
            "{e}"
        );
        assert!(parse_list(&list(&many[1..])).is_ok());

        let e = parse_list(&list(&[sct_bytes(
            KEYLESS_MAX_SCT_EXTENSIONS_BYTES + 1,
            70,
        )]))
        .unwrap_err();
        assert!(e.contains("its extensions are"), "{e}");

        let e = parse_list(&list(&vec![sct_bytes(200, 70); 16])).unwrap_err();
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
            tlv(0x30, &good[2..]),
            list(&[]),
            list(&[{
                let mut s = sct_bytes(0, 70);
                s.push(0);
                s
            }]),
        ] {
            let e = parse_list(&bad).unwrap_err();
            assert!(e.contains("SCT list is corrupt"), "{e}");
        }
    }

    #[test]
    fn der_lengths() {
        assert_eq!(tlv(0x04, &[]), vec![0x04, 0]);
        assert_eq!(&tlv(0x04, &[0; 0x80])[..3], &[0x04, 0x81, 0x80]);
        assert_eq!(&tlv(0x04, &[0; 0x1234])[..4], &[0x04, 0x82, 0x12, 0x34]);
    }
}
