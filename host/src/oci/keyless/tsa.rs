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

use der::asn1::AnyRef;
use der::{Encode as _, Tag, Tagged as _};
use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm};
use sha2::Digest as _;

use super::cert::{self, items};
use super::root::CertificateAuthority;

/// id-signedData, 1.2.840.113549.1.7.2.
const OID_SIGNED_DATA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02];
/// id-ct-TSTInfo, 1.2.840.113549.1.9.16.1.4.
const OID_TST_INFO: &[u8] = &[
    0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x10, 0x01, 0x04,
];
/// id-contentType, 1.2.840.113549.1.9.3.
const OID_CONTENT_TYPE: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x03];
/// id-messageDigest, 1.2.840.113549.1.9.4.
const OID_MESSAGE_DIGEST: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x04];
/// extKeyUsage, 2.5.29.37.
const OID_EKU: &[u8] = &[0x55, 0x1d, 0x25];

/// A digest algorithm a timestamp may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

impl Hash {
    /// The algorithm an AlgorithmIdentifier's OID names.
    fn of(oid: &[u8]) -> Option<Hash> {
        const NIST: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02];
        match oid.strip_prefix(NIST)? {
            [1] => Some(Hash::Sha256),
            [2] => Some(Hash::Sha384),
            [3] => Some(Hash::Sha512),
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
) -> Result<Stamp, String> {
    let parsed = Token::parse(token).map_err(|e| format!("it cannot be read: {e}"))?;
    let tst = TstInfo::parse(parsed.content).map_err(|e| format!("its TSTInfo: {e}"))?;
    if tsas.is_empty() {
        return Err(
            "the trusted root names no timestamp authority (`timestampAuthorities`)".into(),
        );
    }
    let Some(tsa) = tsas
        .iter()
        .find(|t| t.chain.first().is_some_and(|c| parsed.names(c)))
    else {
        return Err(format!(
            "it is signed by a TSA the trusted root does not name (trusted: {})",
            tsas.iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    let leaf = &tsa.chain[0];
    if let Some(embedded) = parsed.embedded_signer()?
        && embedded != leaf.as_slice()
    {
        return Err(format!(
            "the certificate it embeds is not TSA {}'s, though it bears its issuer and serial number",
            tsa.name
        ));
    }
    let at = tst.gen_time_ms.div_euclid(1000);
    let when = crate::clock::rfc3339(at);
    if !tsa.valid.contains_ms(tst.gen_time_ms) {
        return Err(format!(
            "its time {when} is outside TSA {}'s validity in the trusted root ({})",
            tsa.name, tsa.valid
        ));
    }
    check_path(tsa, at)?;
    parsed.check_signed(leaf, &tsa.name)?;
    if tst.imprint != tst.hash.digest(signature) {
        return Err(
            "it is over another message than this bundle's signature (its message imprint differs)"
                .into(),
        );
    }
    if at > now + crate::budgets::KEYLESS_CLOCK_SKEW_SECS {
        return Err(format!("its time {when} is in the future"));
    }
    Ok(Stamp {
        at,
        authority: tsa.name.clone(),
    })
}

/// The TSA's signing certificate's path to its root at `at`, with a
/// critical time-stamping extended key usage.
fn check_path(tsa: &CertificateAuthority, at: i64) -> Result<(), String> {
    let (leaf, rest) = tsa.chain.split_first().expect("checked non-empty");
    if rest.is_empty() {
        return Err(format!(
            "TSA {}'s certChain in the trusted root holds only its signing certificate; its root must follow",
            tsa.name
        ));
    }
    if !eku_is_critical(leaf) {
        return Err(format!(
            "TSA {}'s certificate has no critical extended key usage (RFC 3161 §2.3 requires one, for time stamping only)",
            tsa.name
        ));
    }
    let leaf_der = CertificateDer::from(leaf.as_slice());
    let ee = webpki::EndEntityCert::try_from(&leaf_der)
        .map_err(|e| format!("TSA {}'s certificate cannot be parsed: {e:?}", tsa.name))?;
    cert::path_through(
        &ee,
        rest,
        at,
        &cert::TIME_STAMPING,
        "the timestamp was made",
    )
    .map_err(|why| {
        format!(
            "TSA {}'s certificate does not chain to its root: {why}",
            tsa.name
        )
    })
}

/// Whether a certificate's extended key usage extension is marked critical.
fn eku_is_critical(der: &[u8]) -> bool {
    cert::extensions(der).is_ok_and(|exts| exts.iter().any(|e| e.oid == OID_EKU && e.critical))
}

/// The parts of a `TimeStampResp` that are checked.
struct Token<'a> {
    /// The `TSTInfo`'s DER (the encapsulated content).
    content: &'a [u8],
    /// The certificates the `SignedData` embeds, each whole DER.
    certificates: Vec<AnyRef<'a>>,
    /// The `SignerInfo`'s `sid`: the signer's issuer Name (whole DER) and
    /// serial number (the INTEGER's content octets).
    issuer: Vec<u8>,
    serial: &'a [u8],
    digest: Hash,
    /// The signed attributes, re-encoded as the SET they are signed as.
    signed_attrs: Vec<u8>,
    /// Their `messageDigest` value.
    attr_digest: &'a [u8],
    signature_algorithm: &'a [u8],
    signature: &'a [u8],
}

fn bad(what: &str) -> String {
    format!("{what} is not as RFC 3161 and RFC 5652 say")
}

/// The constructed value `v`'s items, if `v` has tag `tag`.
fn fields<'a>(v: &AnyRef<'a>, tag: u8, what: &str) -> Result<Vec<AnyRef<'a>>, String> {
    if u8::from(v.tag()) != tag {
        return Err(bad(what));
    }
    items(v.value()).map_err(|e| format!("{what}: {e}"))
}

/// Whether `v` is the OBJECT IDENTIFIER `oid` (its tag, not only its bytes).
fn is_oid(v: &AnyRef<'_>, oid: &[u8]) -> bool {
    v.tag() == Tag::ObjectIdentifier && v.value() == oid
}

/// The algorithm OID of an AlgorithmIdentifier.
fn algorithm<'a>(v: &AnyRef<'a>, what: &str) -> Result<&'a [u8], String> {
    let parts = fields(v, 0x30, what)?;
    match parts.first() {
        Some(oid) if oid.tag() == Tag::ObjectIdentifier => Ok(oid.value()),
        _ => Err(bad(what)),
    }
}

impl<'a> Token<'a> {
    fn parse(token: &'a [u8]) -> Result<Token<'a>, String> {
        let resp = AnyRef::try_from(token).map_err(|e| format!("the TimeStampResp: {e}"))?;
        let resp = fields(&resp, 0x30, "the TimeStampResp")?;
        let [status, content_info] = resp.as_slice() else {
            return Err("the TimeStampResp holds no timestamp token".into());
        };
        let status = fields(status, 0x30, "the status")?;
        match status.first() {
            Some(s) if s.tag() == Tag::Integer && s.value() == [0] => {}
            _ => return Err("its status is not \"granted\"".into()),
        }
        let content_info = fields(content_info, 0x30, "the timestamp token")?;
        let [kind, signed] = content_info.as_slice() else {
            return Err(bad("the timestamp token"));
        };
        if !is_oid(kind, OID_SIGNED_DATA) {
            return Err("the timestamp token is not CMS SignedData".into());
        }
        let signed = fields(signed, 0xa0, "the SignedData")?;
        let signed = match signed.as_slice() {
            [one] => fields(one, 0x30, "the SignedData")?,
            _ => return Err(bad("the SignedData")),
        };
        // version, digestAlgorithms, encapContentInfo, [0] certificates,
        // [1] crls, signerInfos.
        let [version, digests, encap, .., signer_infos] = signed.as_slice() else {
            return Err(bad("the SignedData"));
        };
        if version.tag() != Tag::Integer || digests.tag() != Tag::Set {
            return Err(bad("the SignedData"));
        }
        let encap = fields(encap, 0x30, "the encapsulated content")?;
        let [content_type, content] = encap.as_slice() else {
            return Err("the SignedData has no encapsulated TSTInfo".into());
        };
        if !is_oid(content_type, OID_TST_INFO) {
            return Err("the SignedData's content is not a TSTInfo".into());
        }
        let content = match fields(content, 0xa0, "the encapsulated content")?.as_slice() {
            [octets] if octets.tag() == Tag::OctetString => octets.value(),
            _ => return Err(bad("the encapsulated content")),
        };
        // Between the content and the SignerInfos: [0] certificates, [1]
        // CRLs, nothing else.
        let middle = &signed[3..signed.len() - 1];
        if middle
            .iter()
            .any(|f| !matches!(u8::from(f.tag()), 0xa0 | 0xa1))
        {
            return Err(bad("the SignedData"));
        }
        let certificates = match middle.iter().find(|f| u8::from(f.tag()) == 0xa0) {
            Some(set) => items(set.value()).map_err(|e| format!("the certificates: {e}"))?,
            None => Vec::new(),
        };
        if certificates.len() > crate::budgets::KEYLESS_MAX_CA_CHAIN {
            return Err(format!(
                "the timestamp token embeds {} certificates; at most {} are read",
                certificates.len(),
                crate::budgets::KEYLESS_MAX_CA_CHAIN
            ));
        }
        let signer_infos = fields(signer_infos, 0x31, "the SignerInfos")?;
        let [signer] = signer_infos.as_slice() else {
            return Err(format!(
                "the timestamp token has {} SignerInfos; exactly one is expected",
                signer_infos.len()
            ));
        };
        let signer = fields(signer, 0x30, "the SignerInfo")?;
        // version, sid, digestAlgorithm, [0] signedAttrs,
        // signatureAlgorithm, signature, [1] unsignedAttrs.
        let [
            version,
            sid,
            digest,
            attrs,
            signature_algorithm,
            signature,
            ..,
        ] = signer.as_slice()
        else {
            return Err("the SignerInfo has no signed attributes".into());
        };
        // Version 1: the signer is named by issuer and serial number.
        if version.tag() != Tag::Integer || version.value() != [1] {
            return Err(
                "the SignerInfo does not name its signer by issuer and serial number (version 1)"
                    .into(),
            );
        }
        let sid = fields(sid, 0x30, "the SignerInfo's issuer and serial number")?;
        let [issuer, serial] = sid.as_slice() else {
            return Err(bad("the SignerInfo's issuer and serial number"));
        };
        if serial.tag() != Tag::Integer {
            return Err(bad("the SignerInfo's serial number"));
        }
        let digest_oid = algorithm(digest, "the SignerInfo's digest algorithm")?;
        let digest = Hash::of(digest_oid)
            .ok_or("the SignerInfo's digest algorithm is not SHA-256, SHA-384 or SHA-512")?;
        let attr_list = fields(attrs, 0xa0, "the signed attributes")?;
        let mut content_type_ok = false;
        let mut attr_digest = None;
        for attr in &attr_list {
            let parts = fields(attr, 0x30, "a signed attribute")?;
            let [oid, values] = parts.as_slice() else {
                return Err(bad("a signed attribute"));
            };
            let values = fields(values, 0x31, "a signed attribute's values")?;
            let value = match values.as_slice() {
                [one] => one,
                _ => return Err(bad("a signed attribute's values")),
            };
            if oid.tag() != Tag::ObjectIdentifier {
                return Err(bad("a signed attribute's type"));
            }
            match oid.value() {
                OID_CONTENT_TYPE => {
                    if content_type_ok || !is_oid(value, OID_TST_INFO) {
                        return Err(
                            "the signed content-type attribute is not one id-ct-TSTInfo".into()
                        );
                    }
                    content_type_ok = true;
                }
                OID_MESSAGE_DIGEST => {
                    if attr_digest.is_some() || value.tag() != Tag::OctetString {
                        return Err("the signed message-digest attribute is malformed".into());
                    }
                    attr_digest = Some(value.value());
                }
                _ => {}
            }
        }
        if !content_type_ok {
            return Err("the signed attributes have no content type (id-ct-TSTInfo)".into());
        }
        let attr_digest = attr_digest.ok_or("the signed attributes have no message digest")?;
        let mut signed_attrs = attrs
            .to_der()
            .map_err(|e| format!("the signed attributes: {e}"))?;
        // Signed as `SET OF Attribute` (RFC 5652 §5.4), not as [0] IMPLICIT.
        signed_attrs[0] = 0x31;
        if signature.tag() != Tag::OctetString {
            return Err(bad("the SignerInfo's signature"));
        }
        Ok(Token {
            content,
            certificates,
            issuer: issuer
                .to_der()
                .map_err(|e| format!("the SignerInfo's issuer: {e}"))?,
            serial: serial.value(),
            digest,
            signed_attrs,
            attr_digest,
            signature_algorithm: algorithm(
                signature_algorithm,
                "the SignerInfo's signature algorithm",
            )?,
            signature: signature.value(),
        })
    }

    /// Whether the `SignerInfo` names `cert` (its issuer and serial).
    fn names(&self, cert: &[u8]) -> bool {
        issuer_and_serial(cert).is_some_and(|(i, s)| i == self.issuer && s == self.serial)
    }

    /// The embedded certificate the `SignerInfo` names, if the token
    /// embeds certificates; refused when it embeds some but not that one.
    fn embedded_signer(&self) -> Result<Option<Vec<u8>>, String> {
        if self.certificates.is_empty() {
            return Ok(None);
        }
        for c in &self.certificates {
            let der = c
                .to_der()
                .map_err(|e| format!("an embedded certificate: {e}"))?;
            if self.names(&der) {
                return Ok(Some(der));
            }
        }
        Err("it embeds certificates but not the one its SignerInfo names".into())
    }

    /// The CMS signature checks: the attributes' digest is the content's,
    /// and `leaf`'s key signed the attributes.
    fn check_signed(&self, leaf: &[u8], tsa: &str) -> Result<(), String> {
        if self.digest.digest(self.content) != self.attr_digest {
            return Err(
                "its signed message digest is not its TSTInfo's (the TSTInfo was altered)".into(),
            );
        }
        let algorithms = signature_algorithms(self.signature_algorithm, self.digest)?;
        let der = CertificateDer::from(leaf);
        let ee = webpki::EndEntityCert::try_from(&der)
            .map_err(|e| format!("TSA {tsa}'s certificate cannot be parsed: {e:?}"))?;
        if !algorithms.iter().any(|alg| {
            ee.verify_signature(*alg, &self.signed_attrs, self.signature)
                .is_ok()
        }) {
            return Err(format!(
                "its signature does not verify with TSA {tsa}'s key"
            ));
        }
        Ok(())
    }
}

/// The algorithms a `SignerInfo`'s `signatureAlgorithm` allows (a bare
/// key algorithm takes the `digestAlgorithm`'s hash).
fn signature_algorithms(
    oid: &[u8],
    digest: Hash,
) -> Result<&'static [&'static dyn SignatureVerificationAlgorithm], String> {
    use webpki::ring as w;
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    const EC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    const PKCS1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ED25519: &[u8] = &[0x2b, 0x65, 0x70];
    static EC256: &[&dyn SignatureVerificationAlgorithm] =
        &[w::ECDSA_P256_SHA256, w::ECDSA_P384_SHA256];
    static EC384: &[&dyn SignatureVerificationAlgorithm] =
        &[w::ECDSA_P256_SHA384, w::ECDSA_P384_SHA384];
    static RSA256: &[&dyn SignatureVerificationAlgorithm] = &[w::RSA_PKCS1_2048_8192_SHA256];
    static RSA384: &[&dyn SignatureVerificationAlgorithm] = &[w::RSA_PKCS1_2048_8192_SHA384];
    static RSA512: &[&dyn SignatureVerificationAlgorithm] = &[w::RSA_PKCS1_2048_8192_SHA512];
    static ED: &[&dyn SignatureVerificationAlgorithm] = &[w::ED25519];
    let unknown = || {
        "its signature algorithm is not ECDSA, RSA PKCS#1 v1.5 or Ed25519 with SHA-256, SHA-384 or SHA-512".to_string()
    };
    let (rsa, hash) = if oid == ED25519 {
        return Ok(ED);
    } else if oid == EC_KEY {
        (false, digest)
    } else if let Some(tail) = oid.strip_prefix(ECDSA) {
        let hash = match tail {
            [2] => Hash::Sha256,
            [3] => Hash::Sha384,
            [4] => Hash::Sha512,
            _ => return Err(unknown()),
        };
        (false, hash)
    } else if let Some(tail) = oid.strip_prefix(PKCS1) {
        let hash = match tail {
            [1] => digest, // rsaEncryption: the digest algorithm's hash
            [0x0b] => Hash::Sha256,
            [0x0c] => Hash::Sha384,
            [0x0d] => Hash::Sha512,
            _ => return Err(unknown()),
        };
        (true, hash)
    } else {
        return Err(unknown());
    };
    match (rsa, hash) {
        (false, Hash::Sha256) => Ok(EC256),
        (false, Hash::Sha384) => Ok(EC384),
        (false, Hash::Sha512) => {
            Err("its signature is ECDSA with SHA-512, which is not supported".into())
        }
        (true, Hash::Sha256) => Ok(RSA256),
        (true, Hash::Sha384) => Ok(RSA384),
        (true, Hash::Sha512) => Ok(RSA512),
    }
}

/// A certificate's issuer Name (whole DER) and serial number (content
/// octets).
fn issuer_and_serial(cert: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let cert = AnyRef::try_from(cert).ok()?;
    let tbs = items(cert.value()).ok()?.into_iter().next()?;
    let mut fields = items(tbs.value()).ok()?.into_iter();
    let mut serial = fields.next()?;
    if u8::from(serial.tag()) == 0xa0 {
        serial = fields.next()?; // [0] EXPLICIT version
    }
    let _signature = fields.next()?;
    let issuer = fields.next()?;
    Some((issuer.to_der().ok()?, serial.value()))
}

/// The `TSTInfo` fields that are checked.
struct TstInfo<'a> {
    hash: Hash,
    imprint: &'a [u8],
    gen_time_ms: i64,
}

impl<'a> TstInfo<'a> {
    fn parse(der: &'a [u8]) -> Result<TstInfo<'a>, String> {
        let info = AnyRef::try_from(der).map_err(|e| e.to_string())?;
        let info = fields(&info, 0x30, "the TSTInfo")?;
        // version, policy, messageImprint, serialNumber, genTime, …
        let [version, _policy, imprint, _serial, gen_time, ..] = info.as_slice() else {
            return Err(bad("the TSTInfo"));
        };
        if version.tag() != Tag::Integer || version.value() != [1] {
            return Err("its version is not 1".into());
        }
        let imprint = fields(imprint, 0x30, "the message imprint")?;
        let [alg, hashed] = imprint.as_slice() else {
            return Err(bad("the message imprint"));
        };
        let hash = Hash::of(algorithm(alg, "the message imprint's algorithm")?)
            .ok_or("the message imprint's algorithm is not SHA-256, SHA-384 or SHA-512")?;
        if hashed.tag() != Tag::OctetString {
            return Err(bad("the message imprint"));
        }
        if gen_time.tag() != Tag::GeneralizedTime {
            return Err("its genTime is not a GeneralizedTime".into());
        }
        Ok(TstInfo {
            hash,
            imprint: hashed.value(),
            gen_time_ms: generalized_time(gen_time.value())?,
        })
    }
}

/// Milliseconds since the epoch of a DER GeneralizedTime
/// (`YYYYMMDDHHMMSS[.f…]Z`, RFC 3161 §2.4.2).
fn generalized_time(bytes: &[u8]) -> Result<i64, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "its genTime is not text".to_string())?;
    let bad = || format!("its genTime {text:?} is not YYYYMMDDHHMMSS[.fff]Z");
    let body = text.strip_suffix('Z').ok_or_else(bad)?;
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    if whole.len() != 14
        || !whole.bytes().all(|c| c.is_ascii_digit())
        || !fraction.bytes().all(|c| c.is_ascii_digit())
        || (body.contains('.') && fraction.is_empty())
    {
        return Err(bad());
    }
    let n = |r: std::ops::Range<usize>| whole[r].parse::<i64>().map_err(|_| bad());
    let secs = crate::clock::seconds_from_civil(
        (n(0..4)?, n(4..6)?, n(6..8)?),
        (n(8..10)?, n(10..12)?, n(12..14)?),
    )
    .ok_or_else(bad)?;
    let millis = format!("{:0<3}", &fraction[..fraction.len().min(3)])
        .parse::<i64>()
        .map_err(|_| bad())?;
    Ok(secs * 1000 + millis)
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
            assert!(generalized_time(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn signature_algorithms_follow_the_oid() {
        let ecdsa_sha256 = [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
        assert_eq!(
            signature_algorithms(&ecdsa_sha256, Hash::Sha384)
                .unwrap()
                .len(),
            2
        );
        let ecdsa_sha512 = [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04];
        assert!(signature_algorithms(&ecdsa_sha512, Hash::Sha256).is_err());
        assert!(signature_algorithms(&[0x2a, 0x03], Hash::Sha256).is_err());
    }
}
