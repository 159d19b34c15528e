//! The signing certificate: its path to a trusted CA *at the time the log
//! recorded the signature*, and the identity it carries.
//!
//! A Fulcio certificate lives ten minutes; what makes a signature good
//! later is that the transparency log recorded it (its signed
//! `integratedTime`), or a timestamp authority stamped it (an RFC 3161
//! timestamp, [`super::tsa`]), while the certificate was valid. So the
//! path is built with rustls-webpki at that time — at each such time —,
//! not now: a certificate expired today
//! verifies, one logged outside its validity does not. The path must end
//! at a CA of the trusted root whose `validFor` covers the same time, and
//! the leaf must carry the code-signing extended key usage.
//!
//! The identity is read from the leaf after webpki has parsed and accepted
//! it: the Subject Alternative Names (e-mail and URI) and the OIDC issuer
//! Fulcio writes into its own extension (`1.3.6.1.4.1.57264.1.8`, a DER
//! UTF8String; the older `…1.1` holds the raw string).

use der::asn1::AnyRef;
use der::{Reader as _, Tagged as _};
use rustls_pki_types::{CertificateDer, UnixTime};

use super::root::CertificateAuthority;

/// id-kp-codeSigning, 1.3.6.1.5.5.7.3.3 (the OID's DER value bytes).
const EKU_CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];
/// subjectAltName, 2.5.29.17.
const OID_SAN: &[u8] = &[0x55, 0x1d, 0x11];
/// Fulcio's OIDC issuer (v2, DER UTF8String), 1.3.6.1.4.1.57264.1.8.
const OID_FULCIO_ISSUER_V2: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xbf, 0x30, 0x01, 0x08];
/// Fulcio's OIDC issuer (v1, the raw string), 1.3.6.1.4.1.57264.1.1.
const OID_FULCIO_ISSUER_V1: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xbf, 0x30, 0x01, 0x01];

/// The signature algorithms a certificate of a path (a Fulcio or a TSA
/// certificate's) may be signed with.
static CHAIN_ALGORITHMS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P256_SHA384,
    webpki::ring::ECDSA_P384_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::ED25519,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256,
    webpki::ring::RSA_PKCS1_2048_8192_SHA384,
    webpki::ring::RSA_PKCS1_2048_8192_SHA512,
];

/// The algorithms an artifact's signature by the leaf is checked with: the
/// key's own (webpki refuses an algorithm of another key type).
static SIGNATURE_ALGORITHMS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::ED25519,
];

/// What the leaf says about who signed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertIdentity {
    /// The Subject Alternative Names: e-mail addresses and URIs.
    pub sans: Vec<String>,
    /// The OIDC issuer (Fulcio's extension), if there is one.
    pub issuer: Option<String>,
}

/// An extended key usage a certificate path must end in.
pub(super) struct Usage {
    /// The OID's DER value bytes.
    oid: &'static [u8],
    /// What it is for, and its OID dotted, for messages.
    name: &'static str,
    dotted: &'static str,
}

/// id-kp-codeSigning: a Fulcio certificate.
pub(super) const CODE_SIGNING: Usage = Usage {
    oid: EKU_CODE_SIGNING,
    name: "code signing",
    dotted: "1.3.6.1.5.5.7.3.3",
};

/// id-kp-timeStamping: a TSA's signing certificate.
pub(super) const TIME_STAMPING: Usage = Usage {
    oid: &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x08],
    name: "time stamping",
    dotted: "1.3.6.1.5.5.7.3.8",
};

/// Build the leaf's path to one of `cas` at `signed` (the log's or a
/// timestamp's time); the index of the CA it chains to, or why none.
pub fn verify_path(
    leaf: &[u8],
    cas: &[CertificateAuthority],
    signed: &super::SignedTime,
) -> Result<usize, String> {
    let at = signed.at;
    let leaf_der = CertificateDer::from(leaf);
    let ee = webpki::EndEntityCert::try_from(&leaf_der)
        .map_err(|e| format!("the signing certificate cannot be parsed: {e:?}"))?;
    let event = format!("the signature was {}", signed.how());
    let mut reasons = Vec::new();
    for (i, ca) in cas.iter().enumerate() {
        if !ca.valid.contains(at) {
            reasons.push(format!(
                "CA {} is not valid at {} ({})",
                ca.name,
                crate::clock::rfc3339(at),
                ca.valid
            ));
            continue;
        }
        match path_through(&ee, &ca.chain, at, &CODE_SIGNING, &event) {
            Ok(()) => return Ok(i),
            Err(why) => reasons.push(format!("CA {}: {why}", ca.name)),
        }
    }
    if cas.is_empty() {
        return Err("the trusted root names no certificate authority".into());
    }
    Err(format!(
        "the signing certificate does not chain to a trusted CA at the time it was {} ({}): {}",
        signed.how(),
        crate::clock::rfc3339(at),
        reasons.join("; ")
    ))
}

/// Build `ee`'s path through `chain` (the issuing side first, the root
/// last) at `at` (seconds since the epoch), ending in `usage`; why not,
/// said of `event`, what happened at `at` ("the signature was logged").
pub(super) fn path_through(
    ee: &webpki::EndEntityCert<'_>,
    chain: &[Vec<u8>],
    at: i64,
    usage: &Usage,
    event: &str,
) -> Result<(), String> {
    let Some((root, intermediates)) = chain.split_last() else {
        return Err("its chain is empty".into());
    };
    let root_der = CertificateDer::from(root.as_slice());
    let anchor = webpki::anchor_from_trusted_cert(&root_der)
        .map_err(|e| format!("its root cannot be parsed: {e:?}"))?;
    let intermediates: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|c| CertificateDer::from(c.as_slice()))
        .collect();
    let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(at).map_err(|_| format!("the time {at} is before 1970"))?,
    ));
    ee.verify_for_usage(
        CHAIN_ALGORITHMS,
        &[anchor],
        &intermediates,
        time,
        webpki::KeyUsage::required(usage.oid),
        None,
        None,
    )
    .map(|_| ())
    .map_err(|e| explain(&e, at, usage, event))
}

fn explain(e: &webpki::Error, at: i64, usage: &Usage, event: &str) -> String {
    let when = crate::clock::rfc3339(at);
    match e {
        webpki::Error::CertExpired { not_after, .. } => format!(
            "a certificate of the path expired at {}, before {event} at {when}",
            crate::clock::rfc3339(not_after.as_secs() as i64)
        ),
        webpki::Error::CertNotValidYet { not_before, .. } => format!(
            "a certificate of the path was not valid until {}, after {event} at {when}",
            crate::clock::rfc3339(not_before.as_secs() as i64)
        ),
        webpki::Error::UnknownIssuer => "it is not issued by this CA".into(),
        webpki::Error::RequiredEkuNotFoundContext(_) => format!(
            "the certificate is not for {} (no extended key usage {})",
            usage.name, usage.dotted
        ),
        other => format!("{other:?}"),
    }
}

/// Whether `signature` is the leaf's signature over `message`.
pub fn verifies(leaf: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let der = CertificateDer::from(leaf);
    let Ok(ee) = webpki::EndEntityCert::try_from(&der) else {
        return false;
    };
    SIGNATURE_ALGORITHMS
        .iter()
        .any(|alg| ee.verify_signature(*alg, message, signature).is_ok())
}

/// Whether a certificate is self-signed (its issuer is its subject): a
/// root, which a bundle must not carry.
pub fn is_self_issued(der: &[u8]) -> bool {
    let der = CertificateDer::from(der);
    webpki::EndEntityCert::try_from(&der).is_ok_and(|c| c.issuer() == c.subject())
}

/// The SANs and the Fulcio issuer of a certificate.
pub fn identity(der: &[u8]) -> Result<CertIdentity, String> {
    identity_inner(der).map_err(|e| format!("the signing certificate's extensions: {e}"))
}

fn identity_inner(der: &[u8]) -> Result<CertIdentity, der::Error> {
    let mut out = CertIdentity::default();
    let mut legacy_issuer = None;
    for ext in extensions(der)? {
        match ext.oid {
            OID_SAN => {
                for name in items(first(ext.value)?.value())? {
                    // [1] rfc822Name, [6] uniformResourceIdentifier
                    if matches!(u8::from(name.tag()), 0x81 | 0x86)
                        && let Ok(s) = std::str::from_utf8(name.value())
                    {
                        out.sans.push(s.to_string());
                    }
                }
            }
            OID_FULCIO_ISSUER_V2 => {
                let s = first(ext.value)?;
                if s.tag() == der::Tag::Utf8String {
                    out.issuer = std::str::from_utf8(s.value()).ok().map(str::to_string);
                }
            }
            OID_FULCIO_ISSUER_V1 => {
                legacy_issuer = std::str::from_utf8(ext.value).ok().map(str::to_string);
            }
            _ => {}
        }
    }
    if out.issuer.is_none() {
        out.issuer = legacy_issuer;
    }
    Ok(out)
}

/// One extension of a certificate.
pub(super) struct Extension<'a> {
    /// The OID's DER value bytes.
    pub oid: &'a [u8],
    pub critical: bool,
    /// The `extnValue` OCTET STRING's contents.
    pub value: &'a [u8],
}

/// A certificate's extensions (those of its TBSCertificate's `[3]`), in
/// order; one whose OID or value is not of its type is passed over.
pub(super) fn extensions(der: &[u8]) -> Result<Vec<Extension<'_>>, der::Error> {
    let cert = AnyRef::try_from(der)?;
    // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }
    let Some(tbs) = items(cert.value())?.into_iter().next() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for field in items(tbs.value())? {
        // [3] EXPLICIT Extensions
        if u8::from(field.tag()) != 0xa3 {
            continue;
        }
        for ext in items(first(field.value())?.value())? {
            // Extension ::= SEQUENCE { extnID, critical BOOLEAN DEFAULT FALSE, extnValue }
            let parts = items(ext.value())?;
            let (Some(oid), Some(value)) = (parts.first(), parts.last()) else {
                continue;
            };
            if oid.tag() != der::Tag::ObjectIdentifier || value.tag() != der::Tag::OctetString {
                continue;
            }
            let critical = parts.len() == 3
                && parts[1].tag() == der::Tag::Boolean
                && parts[1].value() == [0xff];
            out.push(Extension {
                oid: oid.value(),
                critical,
                value: value.value(),
            });
        }
    }
    Ok(out)
}

/// The one DER value `bytes` hold.
fn first(bytes: &[u8]) -> Result<AnyRef<'_>, der::Error> {
    AnyRef::try_from(bytes)
}

/// The DER values of a constructed value's contents, in order.
pub(super) fn items(bytes: &[u8]) -> Result<Vec<AnyRef<'_>>, der::Error> {
    let mut reader = der::SliceReader::new(bytes)?;
    let mut out = Vec::new();
    while !reader.is_finished() {
        out.push(reader.decode::<AnyRef<'_>>()?);
    }
    Ok(out)
}
