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
//! The identity is read from the leaf, decoded as an X.509 certificate by
//! `x509-cert` (strict DER): the Subject Alternative Names (e-mail and
//! URI) and the OIDC issuer Fulcio writes into its own extension
//! (`1.3.6.1.4.1.57264.1.8`, a DER UTF8String; the older `…1.1` holds the
//! raw string).

use der::Decode as _;
use der::asn1::{ObjectIdentifier, Utf8StringRef};
use rustls_pki_types::{CertificateDer, UnixTime};
use x509_cert::Certificate;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;

use super::root::{CertificateAuthority, TimeRange};

/// Fulcio's OIDC issuer (v2, DER UTF8String), 1.3.6.1.4.1.57264.1.8.
const OID_FULCIO_ISSUER_V2: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
/// Fulcio's OIDC issuer (v1, the raw string), 1.3.6.1.4.1.57264.1.1.
const OID_FULCIO_ISSUER_V1: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");

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

/// Why the signing certificate does not do.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("the signing certificate cannot be parsed: {0:?}")]
    Unparsable(webpki::Error),
    #[error("the trusted root names no certificate authority")]
    NoAuthority,
    #[error(
        "the signing certificate does not chain to a trusted CA at the time it was {how} ({}): {}",
        crate::time::rfc3339(*at),
        join(refusals)
    )]
    NoPath {
        how: &'static str,
        at: i64,
        refusals: Vec<CaRefusal>,
    },
    #[error("the signing certificate's extensions: {0}")]
    Extensions(der::Error),
}

/// Why one CA of the trusted root did not issue the signing certificate.
#[derive(Debug, thiserror::Error)]
pub enum CaRefusal {
    #[error("CA {name} is not valid at {} ({valid})", crate::time::rfc3339(*at))]
    NotValidAt {
        name: String,
        at: i64,
        valid: TimeRange,
    },
    #[error("CA {name}: {why}")]
    Path { name: String, why: PathError },
}

/// Why a certificate's path to a root could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("its chain is empty")]
    EmptyChain,
    #[error("its root cannot be parsed: {0:?}")]
    Root(webpki::Error),
    #[error("the time {0} is before 1970")]
    BeforeEpoch(i64),
    #[error(
        "a certificate of the path expired at {}, before {event} at {}",
        crate::time::rfc3339(*not_after),
        crate::time::rfc3339(*at)
    )]
    Expired {
        not_after: i64,
        event: String,
        at: i64,
    },
    #[error(
        "a certificate of the path was not valid until {}, after {event} at {}",
        crate::time::rfc3339(*not_before),
        crate::time::rfc3339(*at)
    )]
    NotYetValid {
        not_before: i64,
        event: String,
        at: i64,
    },
    #[error("it is not issued by this CA")]
    UnknownIssuer,
    #[error("the certificate is not for {} (no extended key usage {})", .0.name, .0.dotted)]
    Usage(&'static Usage),
    #[error("{0:?}")]
    Other(webpki::Error),
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the leaf says about who signed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertIdentity {
    /// The Subject Alternative Names: e-mail addresses and URIs.
    pub sans: Vec<String>,
    /// The OIDC issuer (Fulcio's extension), if there is one.
    pub issuer: Option<String>,
}

/// An extended key usage a certificate path must end in.
#[derive(Debug)]
pub struct Usage {
    /// The OID's DER value bytes, as webpki takes it (a `'static` slice,
    /// which `ObjectIdentifier::as_bytes` cannot give in a constant; the
    /// tests check it is the named OID's).
    oid: &'static [u8],
    /// What it is for, and its OID dotted, for messages.
    name: &'static str,
    dotted: &'static str,
}

/// id-kp-codeSigning: a Fulcio certificate.
pub(super) static CODE_SIGNING: Usage = Usage {
    oid: &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03],
    name: "code signing",
    dotted: "1.3.6.1.5.5.7.3.3",
};

/// id-kp-timeStamping: a TSA's signing certificate.
pub(super) static TIME_STAMPING: Usage = Usage {
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
) -> Result<usize, CertError> {
    let at = signed.at;
    let leaf_der = CertificateDer::from(leaf);
    let ee = webpki::EndEntityCert::try_from(&leaf_der).map_err(CertError::Unparsable)?;
    let event = format!("the signature was {}", signed.how());
    let mut refusals = Vec::new();
    for (i, ca) in cas.iter().enumerate() {
        if !ca.valid.contains(at) {
            refusals.push(CaRefusal::NotValidAt {
                name: ca.name.clone(),
                at,
                valid: ca.valid,
            });
            continue;
        }
        match path_through(&ee, &ca.chain, at, &CODE_SIGNING, &event) {
            Ok(()) => return Ok(i),
            Err(why) => refusals.push(CaRefusal::Path {
                name: ca.name.clone(),
                why,
            }),
        }
    }
    if cas.is_empty() {
        return Err(CertError::NoAuthority);
    }
    Err(CertError::NoPath {
        how: signed.how(),
        at,
        refusals,
    })
}

/// Build `ee`'s path through `chain` (the issuing side first, the root
/// last) at `at` (seconds since the epoch), ending in `usage`; why not,
/// said of `event`, what happened at `at` ("the signature was logged").
pub(super) fn path_through(
    ee: &webpki::EndEntityCert<'_>,
    chain: &[Vec<u8>],
    at: i64,
    usage: &'static Usage,
    event: &str,
) -> Result<(), PathError> {
    let Some((root, intermediates)) = chain.split_last() else {
        return Err(PathError::EmptyChain);
    };
    let root_der = CertificateDer::from(root.as_slice());
    let anchor = webpki::anchor_from_trusted_cert(&root_der).map_err(PathError::Root)?;
    let intermediates: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|c| CertificateDer::from(c.as_slice()))
        .collect();
    let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(at).map_err(|_| PathError::BeforeEpoch(at))?,
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
    .map_err(|e| explain(e, at, usage, event))
}

fn explain(e: webpki::Error, at: i64, usage: &'static Usage, event: &str) -> PathError {
    match e {
        webpki::Error::CertExpired { not_after, .. } => PathError::Expired {
            not_after: not_after.as_secs() as i64,
            event: event.to_string(),
            at,
        },
        webpki::Error::CertNotValidYet { not_before, .. } => PathError::NotYetValid {
            not_before: not_before.as_secs() as i64,
            event: event.to_string(),
            at,
        },
        webpki::Error::UnknownIssuer => PathError::UnknownIssuer,
        webpki::Error::RequiredEkuNotFoundContext(_) => PathError::Usage(usage),
        other => PathError::Other(other),
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
pub fn identity(der: &[u8]) -> Result<CertIdentity, CertError> {
    identity_inner(der).map_err(CertError::Extensions)
}

fn identity_inner(der: &[u8]) -> Result<CertIdentity, der::Error> {
    let cert = Certificate::from_der(der)?;
    let mut out = CertIdentity::default();
    let mut legacy_issuer = None;
    for ext in cert.tbs_certificate.extensions.iter().flatten() {
        let value = ext.extn_value.as_bytes();
        if ext.extn_id == const_oid::db::rfc5280::ID_CE_SUBJECT_ALT_NAME {
            for name in SubjectAltName::from_der(value)?.0 {
                match name {
                    GeneralName::Rfc822Name(s) | GeneralName::UniformResourceIdentifier(s) => {
                        out.sans.push(s.to_string())
                    }
                    _ => {}
                }
            }
        } else if ext.extn_id == OID_FULCIO_ISSUER_V2 {
            out.issuer = Some(Utf8StringRef::from_der(value)?.to_string());
        } else if ext.extn_id == OID_FULCIO_ISSUER_V1 {
            legacy_issuer = std::str::from_utf8(value).ok().map(str::to_string);
        }
    }
    if out.issuer.is_none() {
        out.issuer = legacy_issuer;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The usages' bytes (what webpki takes) are the OIDs they name.
    #[test]
    fn usages_are_their_oids() {
        use const_oid::db::rfc5280::{ID_KP_CODE_SIGNING, ID_KP_TIME_STAMPING};
        assert_eq!(CODE_SIGNING.oid, ID_KP_CODE_SIGNING.as_bytes());
        assert_eq!(CODE_SIGNING.dotted, ID_KP_CODE_SIGNING.to_string());
        assert_eq!(TIME_STAMPING.oid, ID_KP_TIME_STAMPING.as_bytes());
        assert_eq!(TIME_STAMPING.dotted, ID_KP_TIME_STAMPING.to_string());
    }
}
