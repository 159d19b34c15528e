//! RFC 3161 timestamps: a timestamp authority's (TSA's) signed word that
//! a signature existed at a time.
//!
//! A Rekor v2 entry carries no `integratedTime`; the time the signing
//! certificate is judged at comes from a timestamp the signer asked a TSA
//! for, over the signature's bytes, and put in the bundle
//! (`verificationMaterial.timestampVerificationData.rfc3161Timestamps`,
//! each a DER `TimeStampResp`). A Rekor v1 bundle may carry one too.
//!
//! What is checked of one, offline, against the trusted root's
//! `timestampAuthorities` (each refusal says which step):
//!
//! 1. its shape: a `TimeStampResp` whose status is *granted*, holding a
//!    CMS `SignedData` (RFC 5652) of one `SignerInfo`, whose content is a
//!    `TSTInfo` (RFC 3161 §2.4.2), with signed attributes;
//! 2. the TSA: the `SignerInfo` names (issuer and serial number) the
//!    signing certificate of a TSA of the trusted root — a certificate the
//!    token embeds is not trusted, it must be that one, byte for byte;
//! 3. that certificate's path to the TSA's root (the `certChain`, the
//!    root last), built at the timestamp's `genTime` (a TSA certificate
//!    expired since still vouches for a time inside its validity), with
//!    the time-stamping extended key usage `1.3.6.1.5.5.7.3.8`, which must
//!    be critical (RFC 3161 §2.3); the TSA's `validFor` must cover
//!    `genTime` (both ends included);
//! 4. the CMS signature: the signed attributes' `contentType` is
//!    `id-ct-TSTInfo`, their `messageDigest` is the digest of the
//!    `TSTInfo`, and the TSA's key signed them (ECDSA P-256/P-384 with
//!    SHA-256/384, RSA PKCS#1 v1.5 with SHA-256/384/512, Ed25519);
//! 5. the `TSTInfo`'s message imprint is the digest (SHA-256, -384 or
//!    -512, as it says) of the bundle's signature: the timestamp is about
//!    *this* signature;
//! 6. `genTime` is not more than `KEYLESS_CLOCK_SKEW_SECS` in the future.
//!
//! Not checked, as in Sigstore's clients: the TSA policy OID, the nonce
//! (the verifier did not ask), `accuracy`, the ESS signing-certificate
//! attribute (the signature by the trusted certificate's key is what
//! binds it). Every length is the DER's own, within the bundle's bound.
//!
//! The token is decoded by maintained parsers, strict DER throughout (a
//! trailing byte, a truncated value, an OID or a version under another
//! tag is refused): `x509-tsp`'s `TimeStampResp` (its status by `cmpv2`),
//! `cms`'s `SignedData` and `SignerInfo`, `x509-cert`'s `Certificate`.
//! The `TSTInfo` is `x509-tsp`'s but for its `genTime` ([`TstInfo`]):
//! der 0.7's `GeneralizedTime` is RFC 5280's, without the fraction of a
//! second RFC 3161 allows. The signed attributes are verified as their
//! DER re-encoding (RFC 5652 §5.4 signs "the DER encoding of the
//! SignedAttrs value"; a TSA that signed another encoding is refused).

use cmpv2::status::PkiStatus;
use cms::cert::CertificateChoices;
use cms::content_info::CmsVersion;
use cms::signed_data::{SignedData, SignerIdentifier};
use const_oid::db::{rfc5280, rfc5911, rfc5912, rfc8410};
use der::asn1::{Int, ObjectIdentifier, OctetString};
use der::{Decode as _, Encode as _, Tag};
use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm};
use sha2::Digest as _;
use x509_cert::Certificate;
use x509_cert::ext::Extensions;
use x509_cert::ext::pkix::name::GeneralName;
use x509_tsp::{Accuracy, MessageImprint, TimeStampResp, TsaPolicyId, TspVersion};

use super::cert::{self, PathError};
use super::root::{CertificateAuthority, TimeRange};

/// id-ct-TSTInfo, 1.2.840.113549.1.9.16.1.4 (not in const-oid's tables).
const ID_CT_TST_INFO: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.1.4");

/// Why a timestamp is refused.
#[derive(Debug, thiserror::Error)]
pub enum TsaError {
    #[error("it cannot be read: {what}: {source}")]
    Unreadable {
        what: &'static str,
        source: der::Error,
    },
    #[error("its TSTInfo: {0}")]
    TstInfo(der::Error),
    #[error("its status is not \"granted\"")]
    NotGranted,
    #[error("it cannot be read: the TimeStampResp holds no timestamp token")]
    NoToken,
    #[error("it cannot be read: the timestamp token is not CMS SignedData")]
    NotSignedData,
    #[error("it cannot be read: the SignedData has no encapsulated TSTInfo")]
    NoContent,
    #[error("it cannot be read: the SignedData's content is not a TSTInfo")]
    NotTstInfo,
    #[error("it cannot be read: the encapsulated content is not an OCTET STRING")]
    ContentNotOctets,
    #[error(
        "it cannot be read: the timestamp token embeds {0} certificates; at most {max} are read",
        max = crate::budgets::KEYLESS_MAX_CA_CHAIN
    )]
    TooManyCertificates(usize),
    #[error("it cannot be read: the timestamp token has {0} SignerInfos; exactly one is expected")]
    SignerInfos(usize),
    #[error(
        "it cannot be read: the SignerInfo does not name its signer by issuer and serial number (version 1)"
    )]
    NotIssuerAndSerial,
    #[error(
        "it cannot be read: the SignerInfo's digest algorithm is not SHA-256, SHA-384 or SHA-512"
    )]
    DigestAlgorithm,
    #[error("it cannot be read: the SignerInfo has no signed attributes")]
    NoSignedAttributes,
    #[error("it cannot be read: a signed attribute does not have exactly one value")]
    AttributeValues,
    #[error("it cannot be read: the signed content-type attribute is not one id-ct-TSTInfo")]
    ContentTypeAttribute,
    #[error("it cannot be read: the signed message-digest attribute is malformed")]
    DigestAttribute,
    #[error("it cannot be read: the signed attributes have no content type (id-ct-TSTInfo)")]
    NoContentType,
    #[error("it cannot be read: the signed attributes have no message digest")]
    NoMessageDigest,
    #[error("its TSTInfo: the message imprint's algorithm is not SHA-256, SHA-384 or SHA-512")]
    ImprintAlgorithm,
    #[error("the trusted root names no timestamp authority (`timestampAuthorities`)")]
    NoAuthority,
    #[error("it is signed by a TSA the trusted root does not name (trusted: {trusted})")]
    Untrusted { trusted: String },
    #[error(
        "the certificate it embeds is not TSA {0}'s, though it bears its issuer and serial number"
    )]
    ForeignEmbedded(String),
    #[error("it embeds certificates but not the one its SignerInfo names")]
    SignerNotEmbedded,
    #[error(
        "its time {} is outside TSA {tsa}'s validity in the trusted root ({valid})",
        crate::time::rfc3339(*at)
    )]
    OutsideValidity {
        at: i64,
        tsa: String,
        valid: TimeRange,
    },
    #[error(
        "TSA {0}'s certChain in the trusted root holds only its signing certificate; its root must follow"
    )]
    OnlyLeaf(String),
    #[error(
        "TSA {0}'s certificate has no critical extended key usage (RFC 3161 §2.3 requires one, for time stamping only)"
    )]
    UsageNotCritical(String),
    #[error("TSA {tsa}'s certificate cannot be parsed: {why:?}")]
    Unparsable { tsa: String, why: webpki::Error },
    #[error("TSA {tsa}'s certificate does not chain to its root: {why}")]
    NoPath { tsa: String, why: PathError },
    #[error("its signed message digest is not its TSTInfo's (the TSTInfo was altered)")]
    DigestMismatch,
    #[error("its signature does not verify with TSA {0}'s key")]
    BadSignature(String),
    #[error(
        "its signature algorithm is not ECDSA, RSA PKCS#1 v1.5 or Ed25519 with SHA-256, SHA-384 or SHA-512"
    )]
    SignatureAlgorithm,
    #[error("its signature is ECDSA with SHA-512, which is not supported")]
    EcdsaSha512,
    #[error(
        "it is over another message than this bundle's signature (its message imprint differs)"
    )]
    OtherMessage,
    #[error("its time {} is in the future", crate::time::rfc3339(*.0))]
    Future(i64),
}

/// A digest algorithm a timestamp may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    /// The algorithm an AlgorithmIdentifier's OID names.
    fn of(oid: &ObjectIdentifier) -> Option<Hash> {
        match *oid {
            rfc5912::ID_SHA_256 => Some(Hash::Sha256),
            rfc5912::ID_SHA_384 => Some(Hash::Sha384),
            rfc5912::ID_SHA_512 => Some(Hash::Sha512),
            _ => None,
        }
    }

    fn digest(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => sha2::Sha256::digest(bytes).to_vec(),
            Hash::Sha384 => sha2::Sha384::digest(bytes).to_vec(),
            Hash::Sha512 => sha2::Sha512::digest(bytes).to_vec(),
        }
    }
}

/// A verified timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// `genTime`, seconds since the epoch (a fraction is dropped).
    pub at: i64,
    /// The TSA that signed it (its `uri`, or its subject's common name).
    pub authority: String,
}

/// Verify `token` (a DER `TimeStampResp`) as a timestamp over `signature`
/// by one of `tsas`, at `now` (seconds since the epoch).
pub fn verify(
    token: &[u8],
    signature: &[u8],
    tsas: &[CertificateAuthority],
    now: i64,
) -> Result<Stamp, TsaError> {
    let parsed = Token::parse(token)?;
    let tst = TstInfo::from_der(&parsed.content).map_err(TsaError::TstInfo)?;
    let imprint_hash =
        Hash::of(&tst.message_imprint.hash_algorithm.oid).ok_or(TsaError::ImprintAlgorithm)?;
    if tsas.is_empty() {
        return Err(TsaError::NoAuthority);
    }
    let Some(tsa) = tsas
        .iter()
        .find(|t| t.chain.first().is_some_and(|c| parsed.names_der(c)))
    else {
        return Err(TsaError::Untrusted {
            trusted: tsas
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let leaf = &tsa.chain[0];
    if let Some(embedded) = parsed.embedded_signer()?
        && embedded != leaf.as_slice()
    {
        return Err(TsaError::ForeignEmbedded(tsa.name.clone()));
    }
    let gen_time_ms = tst.gen_time.ms;
    let at = gen_time_ms.div_euclid(1000);
    if !tsa.valid.contains_ms(gen_time_ms) {
        return Err(TsaError::OutsideValidity {
            at,
            tsa: tsa.name.clone(),
            valid: tsa.valid,
        });
    }
    check_path(tsa, at)?;
    parsed.check_signed(leaf, &tsa.name)?;
    if tst.message_imprint.hashed_message.as_bytes() != imprint_hash.digest(signature) {
        return Err(TsaError::OtherMessage);
    }
    if at > now + crate::budgets::KEYLESS_CLOCK_SKEW_SECS {
        return Err(TsaError::Future(at));
    }
    Ok(Stamp {
        at,
        authority: tsa.name.clone(),
    })
}

/// The TSA's signing certificate's path to its root at `at`, with a
/// critical time-stamping extended key usage.
fn check_path(tsa: &CertificateAuthority, at: i64) -> Result<(), TsaError> {
    let Some((leaf, rest)) = tsa.chain.split_first() else {
        // The root's reader refuses an empty chain; said here all the same.
        return Err(TsaError::OnlyLeaf(tsa.name.clone()));
    };
    if rest.is_empty() {
        return Err(TsaError::OnlyLeaf(tsa.name.clone()));
    }
    if !eku_is_critical(leaf) {
        return Err(TsaError::UsageNotCritical(tsa.name.clone()));
    }
    let leaf_der = CertificateDer::from(leaf.as_slice());
    let ee = webpki::EndEntityCert::try_from(&leaf_der).map_err(|why| TsaError::Unparsable {
        tsa: tsa.name.clone(),
        why,
    })?;
    cert::path_through(
        &ee,
        rest,
        at,
        &cert::TIME_STAMPING,
        "the timestamp was made",
    )
    .map_err(|why| TsaError::NoPath {
        tsa: tsa.name.clone(),
        why,
    })
}

/// Whether a certificate's extended key usage extension is marked critical.
fn eku_is_critical(der: &[u8]) -> bool {
    Certificate::from_der(der).is_ok_and(|c| {
        c.tbs_certificate
            .extensions
            .iter()
            .flatten()
            .any(|e| e.extn_id == rfc5280::ID_CE_EXT_KEY_USAGE && e.critical)
    })
}

/// The parts of a `TimeStampResp` that are checked.
struct Token {
    /// The `TSTInfo`'s DER (the encapsulated content).
    content: Vec<u8>,
    /// The certificates the `SignedData` embeds.
    certificates: Vec<Certificate>,
    /// The `SignerInfo`'s `sid`: the signer's issuer and serial number.
    sid: cms::cert::IssuerAndSerialNumber,
    digest: Hash,
    /// The signed attributes, DER-encoded as the SET they are signed as.
    signed_attrs: Vec<u8>,
    /// Their `messageDigest` value.
    attr_digest: Vec<u8>,
    signature_algorithm: ObjectIdentifier,
    signature: Vec<u8>,
}

impl Token {
    fn parse(token: &[u8]) -> Result<Token, TsaError> {
        let unreadable = |what| move |source| TsaError::Unreadable { what, source };
        let resp = TimeStampResp::from_der(token).map_err(unreadable("the TimeStampResp"))?;
        if resp.status.status != PkiStatus::Accepted {
            return Err(TsaError::NotGranted);
        }
        let info = resp.time_stamp_token.ok_or(TsaError::NoToken)?;
        if info.content_type != rfc5911::ID_SIGNED_DATA {
            return Err(TsaError::NotSignedData);
        }
        let signed: SignedData = info
            .content
            .decode_as()
            .map_err(unreadable("the SignedData"))?;
        let encap = signed.encap_content_info;
        if encap.econtent_type != ID_CT_TST_INFO {
            return Err(TsaError::NotTstInfo);
        }
        let content = encap.econtent.ok_or(TsaError::NoContent)?;
        if der::Tagged::tag(&content) != Tag::OctetString {
            return Err(TsaError::ContentNotOctets);
        }
        let content = content.value().to_vec();
        let mut certificates = Vec::new();
        for choice in signed.certificates.iter().flat_map(|set| set.0.iter()) {
            if let CertificateChoices::Certificate(c) = choice {
                certificates.push(c.clone());
            }
        }
        if certificates.len() > crate::budgets::KEYLESS_MAX_CA_CHAIN {
            return Err(TsaError::TooManyCertificates(certificates.len()));
        }
        let signers = signed.signer_infos.0.into_vec();
        let [signer] = <[_; 1]>::try_from(signers).map_err(|v| TsaError::SignerInfos(v.len()))?;
        // Version 1: the signer is named by issuer and serial number.
        let sid = match (signer.version, signer.sid) {
            (CmsVersion::V1, SignerIdentifier::IssuerAndSerialNumber(sid)) => sid,
            _ => return Err(TsaError::NotIssuerAndSerial),
        };
        let digest = Hash::of(&signer.digest_alg.oid).ok_or(TsaError::DigestAlgorithm)?;
        let attrs = signer.signed_attrs.ok_or(TsaError::NoSignedAttributes)?;
        let mut content_type_ok = false;
        let mut attr_digest = None;
        for attr in attrs.iter() {
            let [value] = attr.values.as_slice() else {
                return Err(TsaError::AttributeValues);
            };
            if attr.oid == rfc5911::ID_CONTENT_TYPE {
                if content_type_ok
                    || value.decode_as::<ObjectIdentifier>().ok() != Some(ID_CT_TST_INFO)
                {
                    return Err(TsaError::ContentTypeAttribute);
                }
                content_type_ok = true;
            } else if attr.oid == rfc5911::ID_MESSAGE_DIGEST {
                let digest = value
                    .decode_as::<OctetString>()
                    .map_err(|_| TsaError::DigestAttribute)?;
                if attr_digest.replace(digest.into_bytes()).is_some() {
                    return Err(TsaError::DigestAttribute);
                }
            }
        }
        if !content_type_ok {
            return Err(TsaError::NoContentType);
        }
        let attr_digest = attr_digest.ok_or(TsaError::NoMessageDigest)?;
        // Signed as `SET OF Attribute` (RFC 5652 §5.4), not as [0] IMPLICIT:
        // the SetOfVec encodes with the SET tag.
        let signed_attrs = attrs
            .to_der()
            .map_err(unreadable("the signed attributes"))?;
        Ok(Token {
            content,
            certificates,
            sid,
            digest,
            signed_attrs,
            attr_digest,
            signature_algorithm: signer.signature_algorithm.oid,
            signature: signer.signature.into_bytes(),
        })
    }

    /// Whether the `SignerInfo` names `cert` (its issuer and serial).
    fn names(&self, cert: &Certificate) -> bool {
        let tbs = &cert.tbs_certificate;
        tbs.issuer == self.sid.issuer && tbs.serial_number == self.sid.serial_number
    }

    /// [`Token::names`] of a DER certificate (one that cannot be read is
    /// not named).
    fn names_der(&self, cert: &[u8]) -> bool {
        Certificate::from_der(cert).is_ok_and(|c| self.names(&c))
    }

    /// The embedded certificate the `SignerInfo` names (DER), if the token
    /// embeds certificates; refused when it embeds some but not that one.
    fn embedded_signer(&self) -> Result<Option<Vec<u8>>, TsaError> {
        if self.certificates.is_empty() {
            return Ok(None);
        }
        match self.certificates.iter().find(|c| self.names(c)) {
            Some(c) => c.to_der().map(Some).map_err(|source| TsaError::Unreadable {
                what: "an embedded certificate",
                source,
            }),
            None => Err(TsaError::SignerNotEmbedded),
        }
    }

    /// The CMS signature checks: the attributes' digest is the content's,
    /// and `leaf`'s key signed the attributes.
    fn check_signed(&self, leaf: &[u8], tsa: &str) -> Result<(), TsaError> {
        if self.digest.digest(&self.content) != self.attr_digest {
            return Err(TsaError::DigestMismatch);
        }
        let algorithms = signature_algorithms(&self.signature_algorithm, self.digest)?;
        let der = CertificateDer::from(leaf);
        let ee = webpki::EndEntityCert::try_from(&der).map_err(|why| TsaError::Unparsable {
            tsa: tsa.to_string(),
            why,
        })?;
        if !algorithms.iter().any(|alg| {
            ee.verify_signature(*alg, &self.signed_attrs, &self.signature)
                .is_ok()
        }) {
            return Err(TsaError::BadSignature(tsa.to_string()));
        }
        Ok(())
    }
}

/// The algorithms a `SignerInfo`'s `signatureAlgorithm` allows (a bare
/// key algorithm takes the `digestAlgorithm`'s hash).
fn signature_algorithms(
    oid: &ObjectIdentifier,
    digest: Hash,
) -> Result<&'static [&'static dyn SignatureVerificationAlgorithm], TsaError> {
    use webpki::ring as w;
    static EC256: &[&dyn SignatureVerificationAlgorithm] =
        &[w::ECDSA_P256_SHA256, w::ECDSA_P384_SHA256];
    static EC384: &[&dyn SignatureVerificationAlgorithm] =
        &[w::ECDSA_P256_SHA384, w::ECDSA_P384_SHA384];
    static RSA256: &[&dyn SignatureVerificationAlgorithm] = &[w::RSA_PKCS1_2048_8192_SHA256];
    static RSA384: &[&dyn SignatureVerificationAlgorithm] = &[w::RSA_PKCS1_2048_8192_SHA384];
    static RSA512: &[&dyn SignatureVerificationAlgorithm] = &[w::RSA_PKCS1_2048_8192_SHA512];
    static ED: &[&dyn SignatureVerificationAlgorithm] = &[w::ED25519];
    let (rsa, hash) = match *oid {
        rfc8410::ID_ED_25519 => return Ok(ED),
        rfc5912::ID_EC_PUBLIC_KEY => (false, digest),
        rfc5912::ECDSA_WITH_SHA_256 => (false, Hash::Sha256),
        rfc5912::ECDSA_WITH_SHA_384 => (false, Hash::Sha384),
        rfc5912::ECDSA_WITH_SHA_512 => (false, Hash::Sha512),
        // rsaEncryption: the digest algorithm's hash
        rfc5912::RSA_ENCRYPTION => (true, digest),
        rfc5912::SHA_256_WITH_RSA_ENCRYPTION => (true, Hash::Sha256),
        rfc5912::SHA_384_WITH_RSA_ENCRYPTION => (true, Hash::Sha384),
        rfc5912::SHA_512_WITH_RSA_ENCRYPTION => (true, Hash::Sha512),
        _ => return Err(TsaError::SignatureAlgorithm),
    };
    match (rsa, hash) {
        (false, Hash::Sha256) => Ok(EC256),
        (false, Hash::Sha384) => Ok(EC384),
        (false, Hash::Sha512) => Err(TsaError::EcdsaSha512),
        (true, Hash::Sha256) => Ok(RSA256),
        (true, Hash::Sha384) => Ok(RSA384),
        (true, Hash::Sha512) => Ok(RSA512),
    }
}

/// RFC 3161 §2.4.2's `TSTInfo`: `x509-tsp`'s [`x509_tsp::TstInfo`], field
/// for field, but for `genTime` ([`GenTime`]), which may carry a fraction
/// of a second there.
#[derive(Clone, Debug, Eq, PartialEq, der::Sequence)]
struct TstInfo {
    version: TspVersion,
    policy: TsaPolicyId,
    message_imprint: MessageImprint,
    serial_number: Int,
    gen_time: GenTime,
    #[asn1(optional = "true")]
    accuracy: Option<Accuracy>,
    #[asn1(default = "Default::default")]
    ordering: bool,
    #[asn1(optional = "true")]
    nonce: Option<Int>,
    #[asn1(context_specific = "0", tag_mode = "EXPLICIT", optional = "true")]
    tsa: Option<GeneralName>,
    #[asn1(context_specific = "1", tag_mode = "IMPLICIT", optional = "true")]
    extensions: Option<Extensions>,
}

/// A `GeneralizedTime` as RFC 3161 writes `genTime`:
/// `YYYYMMDDHHMMSS[.f…]Z`.
#[derive(Clone, Debug, Eq, PartialEq)]
struct GenTime {
    /// Milliseconds since the epoch (finer fractions dropped).
    ms: i64,
    /// The value's bytes, as read (what it encodes back to).
    text: Vec<u8>,
}

impl der::FixedTag for GenTime {
    const TAG: Tag = Tag::GeneralizedTime;
}

impl<'a> der::DecodeValue<'a> for GenTime {
    fn decode_value<R: der::Reader<'a>>(reader: &mut R, header: der::Header) -> der::Result<Self> {
        let text = reader.read_vec(header.length)?;
        let ms = generalized_time(&text).ok_or_else(|| Tag::GeneralizedTime.value_error())?;
        Ok(GenTime { ms, text })
    }
}

impl der::EncodeValue for GenTime {
    fn value_len(&self) -> der::Result<der::Length> {
        der::Length::try_from(self.text.len())
    }

    fn encode_value(&self, writer: &mut impl der::Writer) -> der::Result<()> {
        writer.write(&self.text)
    }
}

/// Milliseconds since the epoch of a DER GeneralizedTime's value
/// (`YYYYMMDDHHMMSS[.f…]Z`, RFC 3161 §2.4.2), if it is one.
fn generalized_time(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let body = text.strip_suffix('Z')?;
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    if whole.len() != 14
        || !whole.bytes().all(|c| c.is_ascii_digit())
        || !fraction.bytes().all(|c| c.is_ascii_digit())
        || (body.contains('.') && fraction.is_empty())
    {
        return None;
    }
    let n = |r: std::ops::Range<usize>| whole[r].parse::<i64>().ok();
    let secs = crate::time::seconds_from_civil(
        (n(0..4)?, n(4..6)?, n(6..8)?),
        (n(8..10)?, n(10..12)?, n(12..14)?),
    )?;
    let millis = format!("{:0<3}", &fraction[..fraction.len().min(3)])
        .parse::<i64>()
        .ok()?;
    Some(secs * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generalized_times_parse() {
        assert_eq!(generalized_time(b"19700101000000Z").unwrap(), 0);
        assert_eq!(
            generalized_time(b"20250612120220Z").unwrap(),
            1_749_729_740_000
        );
        assert_eq!(
            generalized_time(b"20250612120220.5Z").unwrap(),
            1_749_729_740_500
        );
        assert_eq!(
            generalized_time(b"20250612120220.123456Z").unwrap(),
            1_749_729_740_123
        );
        for bad in [
            &b"20250612120220"[..],
            b"2025061212022Z",
            b"20251312120220Z",
            b"20250612120220.Z",
            b"20250612120220+0100",
            b"2025061212022xZ",
        ] {
            assert!(generalized_time(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn signature_algorithms_follow_the_oid() {
        assert_eq!(
            signature_algorithms(&rfc5912::ECDSA_WITH_SHA_256, Hash::Sha384)
                .unwrap()
                .len(),
            2
        );
        assert!(signature_algorithms(&rfc5912::ECDSA_WITH_SHA_512, Hash::Sha256).is_err());
        let other = ObjectIdentifier::new_unwrap("1.2.3");
        assert!(signature_algorithms(&other, Hash::Sha256).is_err());
    }
}
