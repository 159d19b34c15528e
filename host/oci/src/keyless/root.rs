//! The operator's trusted root: Sigstore's `TrustedRoot` JSON
//! (`application/vnd.dev.sigstore.trustedroot+json;version=0.1`, the file
//! `sigstore` clients and `cosign --trusted-root` read).
//!
//! Of it this host uses `certificateAuthorities` (each a `certChain`, leaf
//! side first and its root last, and a `validFor` time range) and `tlogs`
//! (each a transparency log's public key, `logId` and `validFor`) and
//! `ctlogs` (the certificate transparency logs whose SCTs a certificate
//! must carry; each found by the SHA-256 of its key's DER, the RFC 6962
//! log id, whatever its `logId` says) and `timestampAuthorities` (each
//! a TSA's `certChain`, its signing certificate first and its root last,
//! and a `validFor`: what RFC 3161 timestamps are checked against, see
//! [`super::tsa`]). A `validFor` without a `start` is refused (an
//! unbounded start would trust a key before it existed); an absent `end`
//! is open; both ends are inclusive.

use base64::Engine as _;
use sha2::Digest as _;

use crate::budgets::{
    KEYLESS_MAX_CA_CHAIN, KEYLESS_MAX_ROOT_ENTRIES, KEYLESS_MAX_TRUSTED_ROOT_BYTES,
};

/// The algorithms a transparency log's signature (SET, checkpoint) is
/// checked with: the key's own (webpki refuses one of another key type).
static LOG_ALGORITHMS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::ED25519,
];

/// Why a trusted root cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error(
        "is {0} bytes; at most {KEYLESS_MAX_TRUSTED_ROOT_BYTES} are read (Sigstore's is about 7 KB)"
    )]
    TooLarge(usize),
    #[error("is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error(
        "has the media type {found}; a Sigstore trusted root ({}) is expected",
        MEDIA_TYPES.join(" or ")
    )]
    MediaType { found: String },
    #[error("/{0} is not a list")]
    NotAList(String),
    #[error("/{key} lists {n} entries; at most {KEYLESS_MAX_ROOT_ENTRIES} are read")]
    TooManyEntries { key: String, n: usize },
    /// The JSON pointer of a field that is not base64.
    #[error("{0} is not base64")]
    NotBase64(String),
    #[error("{0}/certChain/certificates is not a list")]
    ChainNotAList(String),
    #[error("{at}/certChain holds {n} certificates; 1 to {KEYLESS_MAX_CA_CHAIN} are read")]
    ChainLength { at: String, n: usize },
    #[error("{at}: {why}")]
    Validity { at: String, why: TimeError },
    #[error(
        "names no certificate authority or no transparency log: keyless signatures cannot verify against it"
    )]
    Incomplete,
}

/// Why a `validFor` or an RFC 3339 time cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TimeError {
    #[error("has no `start` (a time range must say when it begins)")]
    NoStart,
    #[error("`end` is not a time")]
    EndNotText,
    #[error("{0:?} is not an RFC 3339 time (e.g. 2022-04-13T20:06:15Z)")]
    NotRfc3339(String),
}

/// Why a log's key, named in the trusted root, cannot be used (kept with
/// the log, not an error of the root: only an entry of that log fails).
#[derive(Clone, Debug, thiserror::Error)]
#[error("its key ({details}) cannot be read: not a SubjectPublicKeyInfo: {why:?}")]
pub struct UnusableKey {
    /// Its `keyDetails`, as the root says.
    pub details: String,
    pub why: webpki::Error,
}

/// A transparency log's public key (a DER SubjectPublicKeyInfo: ECDSA
/// P-256 or P-384, or Ed25519).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogKey {
    spki: Vec<u8>,
}

impl LogKey {
    /// The key of a DER SubjectPublicKeyInfo, checked to parse.
    pub fn from_spki(spki: Vec<u8>) -> Result<LogKey, webpki::Error> {
        let der = rustls_pki_types::SubjectPublicKeyInfoDer::from(spki.as_slice());
        webpki::RawPublicKeyEntity::try_from(&der)?;
        Ok(LogKey { spki })
    }

    /// Whether `signature` is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        self.verifies_with(LOG_ALGORITHMS, message, signature)
    }

    /// Whether `signature` is this key's over `message` by one of
    /// `algorithms` (webpki refuses one of another key type).
    pub fn verifies_with(
        &self,
        algorithms: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm],
        message: &[u8],
        signature: &[u8],
    ) -> bool {
        let der = rustls_pki_types::SubjectPublicKeyInfoDer::from(self.spki.as_slice());
        let Ok(key) = webpki::RawPublicKeyEntity::try_from(&der) else {
            return false;
        };
        algorithms
            .iter()
            .any(|alg| key.verify_signature(*alg, message, signature).is_ok())
    }
}

/// A time range, in milliseconds since the epoch, both ends included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    pub start_ms: i64,
    pub end_ms: Option<i64>,
}

impl TimeRange {
    /// Whether `at` (seconds since the epoch) is in the range.
    pub fn contains(&self, at: i64) -> bool {
        self.contains_ms(at.saturating_mul(1000))
    }

    /// Whether `ms` (milliseconds since the epoch) is in the range.
    pub fn contains_ms(&self, ms: i64) -> bool {
        ms >= self.start_ms && self.end_ms.is_none_or(|end| ms <= end)
    }
}

impl std::fmt::Display for TimeRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "valid from {}",
            crate::time::rfc3339(self.start_ms.div_euclid(1000))
        )?;
        match self.end_ms {
            Some(end) => write!(f, " to {}", crate::time::rfc3339(end.div_euclid(1000))),
            None => write!(f, " on"),
        }
    }
}

/// A certificate authority (Fulcio).
#[derive(Clone, Debug)]
pub struct CertificateAuthority {
    /// Its `uri` (or its subject's common name), for messages.
    pub name: String,
    /// DER certificates, issuing side first, the root last.
    pub chain: Vec<Vec<u8>>,
    pub valid: TimeRange,
}

/// A transparency log (Rekor), or a certificate transparency log.
#[derive(Clone, Debug)]
pub struct TransparencyLog {
    /// Its `baseUrl`, for messages.
    pub name: String,
    /// The `logId.keyId` bytes (the SHA-256 of its key's DER); for a CT
    /// log, that SHA-256 computed here.
    pub log_id: Vec<u8>,
    /// Its key, or why it cannot be used.
    pub key: Result<LogKey, UnusableKey>,
    pub valid: TimeRange,
}

/// A parsed trusted root.
#[derive(Clone, Debug)]
pub struct TrustedRoot {
    pub cas: Vec<CertificateAuthority>,
    pub tlogs: Vec<TransparencyLog>,
    /// Certificate transparency logs (may be empty: then no certificate
    /// verifies, see [`super::sct`]).
    pub ctlogs: Vec<TransparencyLog>,
    /// Timestamp authorities (may be empty: then a bundle carrying an RFC
    /// 3161 timestamp is refused, see [`super::tsa`]). Each
    /// [`CertificateAuthority`]'s chain starts with the TSA's signing
    /// certificate.
    pub tsas: Vec<CertificateAuthority>,
}

/// The media types of a trusted root this host reads.
const MEDIA_TYPES: &[&str] = &[
    "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
    "application/vnd.dev.sigstore.trustedroot.v0.2+json",
];

impl TrustedRoot {
    /// Parse a trusted root's JSON; errors say which field.
    pub fn from_json(bytes: &[u8]) -> Result<TrustedRoot, RootError> {
        if bytes.len() > KEYLESS_MAX_TRUSTED_ROOT_BYTES {
            return Err(RootError::TooLarge(bytes.len()));
        }
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(RootError::NotJson)?;
        let media = v["mediaType"].as_str().unwrap_or_default();
        if !MEDIA_TYPES.contains(&media) {
            return Err(RootError::MediaType {
                found: format!("{:?}", v["mediaType"]),
            });
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let list = |key: &str| -> Result<Vec<serde_json::Value>, RootError> {
            let items = match &v[key] {
                serde_json::Value::Null => Vec::new(),
                serde_json::Value::Array(a) => a.clone(),
                _ => return Err(RootError::NotAList(key.to_string())),
            };
            if items.len() > KEYLESS_MAX_ROOT_ENTRIES {
                return Err(RootError::TooManyEntries {
                    key: key.to_string(),
                    n: items.len(),
                });
            }
            Ok(items)
        };
        let cas = list("certificateAuthorities")?
            .iter()
            .enumerate()
            .map(|(i, ca)| read_ca(ca, &format!("/certificateAuthorities/{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let tsas = list("timestampAuthorities")?
            .iter()
            .enumerate()
            .map(|(i, ca)| read_ca(ca, &format!("/timestampAuthorities/{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        // A transparency log names its id; a CT log's is its key's SHA-256.
        let mut tlogs = Vec::new();
        for (i, log) in list("tlogs")?.iter().enumerate() {
            let at = format!("/tlogs/{i}");
            let log_id = log["logId"]["keyId"]
                .as_str()
                .and_then(|s| b64.decode(s).ok())
                .ok_or_else(|| RootError::NotBase64(format!("{at}/logId/keyId")))?;
            tlogs.push(read_log(log, &at, Some(log_id))?);
        }
        let mut ctlogs = Vec::new();
        for (i, log) in list("ctlogs")?.iter().enumerate() {
            ctlogs.push(read_log(log, &format!("/ctlogs/{i}"), None)?);
        }
        if cas.is_empty() || tlogs.is_empty() {
            return Err(RootError::Incomplete);
        }
        Ok(TrustedRoot {
            cas,
            tlogs,
            ctlogs,
            tsas,
        })
    }
}

/// One entry of `certificateAuthorities` or `timestampAuthorities` at JSON
/// pointer `at`: its chain (1 to [`KEYLESS_MAX_CA_CHAIN`] certificates),
/// name and validity.
fn read_ca(ca: &serde_json::Value, at: &str) -> Result<CertificateAuthority, RootError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let certs = ca["certChain"]["certificates"]
        .as_array()
        .ok_or_else(|| RootError::ChainNotAList(at.to_string()))?;
    if certs.is_empty() || certs.len() > KEYLESS_MAX_CA_CHAIN {
        return Err(RootError::ChainLength {
            at: at.to_string(),
            n: certs.len(),
        });
    }
    let mut chain = Vec::new();
    for (j, c) in certs.iter().enumerate() {
        let der = c["rawBytes"]
            .as_str()
            .and_then(|s| b64.decode(s).ok())
            .ok_or_else(|| {
                RootError::NotBase64(format!("{at}/certChain/certificates/{j}/rawBytes"))
            })?;
        chain.push(der);
    }
    let name = ca["uri"]
        .as_str()
        .or(ca["subject"]["commonName"].as_str())
        .unwrap_or("(unnamed)")
        .to_string();
    Ok(CertificateAuthority {
        name,
        chain,
        valid: time_range(&ca["validFor"]).map_err(|why| RootError::Validity {
            at: format!("{at}/validFor"),
            why,
        })?,
    })
}

fn time_range(v: &serde_json::Value) -> Result<TimeRange, TimeError> {
    let start = v["start"].as_str().ok_or(TimeError::NoStart)?;
    let start_ms = parse_time(start)?;
    let end_ms = match &v["end"] {
        serde_json::Value::Null => None,
        e => Some(parse_time(e.as_str().ok_or(TimeError::EndNotText)?)?),
    };
    Ok(TimeRange { start_ms, end_ms })
}

/// Milliseconds since the epoch of an RFC 3339 time (`Z` or `±HH:MM`; a
/// fraction of a second is kept to the millisecond).
pub fn parse_time(text: &str) -> Result<i64, TimeError> {
    let bad = || TimeError::NotRfc3339(text.to_string());
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, TimeError> {
        let s = text.get(r).ok_or_else(bad)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let local = crate::time::seconds_from_civil((year, month, day), (hour, minute, second))
        .ok_or_else(bad)?;
    let mut i = 19;
    let mut millis = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(bad());
        }
        let frac = &text[i..i + digits.min(3)];
        millis = frac.parse::<i64>().map_err(|_| bad())? * 10_i64.pow(3 - frac.len() as u32);
        i += digits;
    }
    let offset = match &text[i..] {
        "Z" | "z" => 0,
        tz if tz.len() == 6
            && matches!(tz.as_bytes()[0], b'+' | b'-')
            && tz.as_bytes()[3] == b':' =>
        {
            let h = num(i + 1..i + 3)?;
            let m = num(i + 4..i + 6)?;
            let sign = if tz.starts_with('-') { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
        _ => return Err(bad()),
    };
    Ok((local - offset) * 1000 + millis)
}

/// One entry of `tlogs` or `ctlogs` at JSON pointer `at`: its validity, name
/// and key (a key that cannot be read is kept as why, not an error of the
/// root); `log_id` as the root states it, or the SHA-256 of the key's DER.
fn read_log(
    log: &serde_json::Value,
    at: &str,
    log_id: Option<Vec<u8>>,
) -> Result<TransparencyLog, RootError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = &log["publicKey"];
    let valid = time_range(&key["validFor"]).map_err(|why| RootError::Validity {
        at: format!("{at}/publicKey/validFor"),
        why,
    })?;
    let name = log["baseUrl"].as_str().unwrap_or("(unnamed)").to_string();
    let der = key["rawBytes"]
        .as_str()
        .and_then(|s| b64.decode(s).ok())
        .ok_or_else(|| RootError::NotBase64(format!("{at}/publicKey/rawBytes")))?;
    let log_id = log_id.unwrap_or_else(|| sha2::Sha256::digest(&der).to_vec());
    let details = key["keyDetails"].as_str().unwrap_or("of unknown kind");
    let key = LogKey::from_spki(der).map_err(|why| UnusableKey {
        details: details.to_string(),
        why,
    });
    Ok(TransparencyLog {
        name,
        log_id,
        key,
        valid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_and_print() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_time("2022-04-13T20:06:15Z").unwrap(),
            1_649_880_375_000
        );
        assert_eq!(
            parse_time("2022-12-31T23:59:59.999Z").unwrap(),
            1_672_531_199_999
        );
        assert_eq!(
            parse_time("2022-12-31T23:59:59.5Z").unwrap(),
            1_672_531_199_500
        );
        assert_eq!(
            parse_time("2022-04-13T22:06:15+02:00").unwrap(),
            1_649_880_375_000
        );
        assert_eq!(crate::time::rfc3339(1_689_177_396), "2023-07-12T15:56:36Z");
        for bad in [
            "2022-04-13",
            "2022-04-13T20:06:15",
            "2022-13-01T00:00:00Z",
            "x022-04-13T20:06:15Z",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        let r = TimeRange {
            start_ms: 1000,
            end_ms: Some(2000),
        };
        assert!(r.contains(1) && r.contains(2) && !r.contains(0) && !r.contains(3));
    }
}
