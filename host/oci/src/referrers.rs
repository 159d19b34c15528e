//! Signatures attached as OCI referrers: the format `cosign sign` writes
//! by default since cosign 3 (its "new bundle format"), read here.
//!
//! What cosign 3 writes, established from its source (sigstore/cosign at
//! d6d86c2, 2026-07-24; read, not copied):
//!
//! * **The statement** (`cmd/cosign/cli/sign/sign.go`,
//!   `signDigestBundle`): an in-toto Statement v1 whose one subject is
//!   `{"digest": {"sha256": HEX}}` of the signed image manifest (no
//!   name), `predicateType` `https://sigstore.dev/cosign/sign/v1`
//!   (`pkg/types/predicate.go`, `CosignSignPredicateType`) and an empty
//!   predicate, serialized with protojson.
//! * **The bundle** (`cmd/cosign/cli/signcommon/common.go`,
//!   `NewAttestationBundle`, through sigstore-go's `sign` package): a
//!   Sigstore bundle v0.3 whose content is a DSSE envelope of payload type
//!   `application/vnd.in-toto+json` holding that statement, one signature
//!   over the DSSE v1 pre-authentication encoding. Keyless, its
//!   verification material is the Fulcio leaf `certificate`; with `--key`
//!   it is a `publicKey` with a `hint` (see below). On
//!   Rekor v1 the log entry is of kind `dsse` 0.0.1 (sigstore-go makes a
//!   `dsse` entry for DSSE content), with an inclusion promise and proof.
//! * **The referrer** (`pkg/oci/remote/write.go`,
//!   `WriteAttestationNewBundleFormat` → `WriteReferrer`): an OCI image
//!   manifest (schema 2, `application/vnd.oci.image.manifest.v1+json`)
//!   with `artifactType` [`BUNDLE_MEDIA_TYPE`], a config of media type
//!   `application/vnd.oci.empty.v1+json` (the blob `{}`), one layer of
//!   media type [`BUNDLE_MEDIA_TYPE`] whose blob is the bundle's JSON, a
//!   `subject` that is the signed manifest's descriptor, and annotations
//!   `dev.sigstore.bundle.content: dsse-envelope`,
//!   `dev.sigstore.bundle.predicateType` and
//!   `org.opencontainers.image.created`. It is pushed by its digest;
//!   go-containerregistry's `remote.Put` updates the referrers tag schema
//!   index (`sha256-HEX`, an OCI image index) when the registry does not
//!   answer with `OCI-Subject` (no referrers API).
//! * **Discovery** (`pkg/oci/remote/referrers.go`): the referrers API,
//!   `GET /v2/NAME/referrers/DIGEST?artifactType=…`, falling back to the
//!   `sha256-HEX` tag.
//!
//! Found here the same way ([`crate::client`]): the referrers API
//! (filtered by [`BUNDLE_MEDIA_TYPE`], though the filter is re-applied:
//! a registry may ignore it), and on a 404 the tag `sha256-HEX`; then each
//! bundle referrer's manifest by digest and its bundle layer, all bounded
//! ([`crate::budgets::OCI_MAX_REFERRERS`] and the sizes beside it).
//! `oci-client` 0.18 has `pull_referrers` with the same fallback, but it
//! reads the index whole whatever its size, as it does manifests.
//!
//! Verified ([`crate::signature::verify_with`]) at every load: the
//! referrer's `subject` must be the manifest loaded; the bundle must hold
//! a DSSE envelope whose statement's predicate type is cosign's signature
//! predicate (another attestation of the image — an SBOM, provenance —
//! is not a signature) and whose subjects include the manifest's digest;
//! and the bundle verifies keylessly ([`crate::keyless`]) against
//! `[trust] trusted_root` and `identities`, or, key-based (`cosign sign
//! --key` in the new format), with `[trust] keys` — its log entry against
//! the trusted root when the rule names one
//! ([`crate::keyless::verify_keyed`]).

use crate::budgets::{KEYLESS_MAX_BUNDLE_BYTES, OCI_MAX_REFERRERS};

/// The artifact type of a Sigstore bundle referrer, and its layer's media
/// type.
pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The OCI image index media type (the referrers API's answer and the
/// fallback tag's manifest).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The predicate type of `cosign sign`'s statement.
pub const COSIGN_SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";

/// The referrers tag schema's tag for `digest` (`sha256-HEX`).
pub fn fallback_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

/// The digests of the bundle referrers an index lists (its `manifests`
/// whose `artifactType` is [`BUNDLE_MEDIA_TYPE`]); more than
/// [`OCI_MAX_REFERRERS`] is refused.
pub fn bundle_referrers(index: &[u8]) -> Result<Vec<String>, String> {
    let v: serde_json::Value = serde_json::from_slice(index)
        .map_err(|e| format!("the referrers index is not JSON: {e}"))?;
    let manifests = v["manifests"]
        .as_array()
        .ok_or("the referrers index has no `manifests` list")?;
    let out: Vec<String> = manifests
        .iter()
        .filter(|m| m["artifactType"] == BUNDLE_MEDIA_TYPE)
        .filter_map(|m| m["digest"].as_str().map(str::to_string))
        .collect();
    if out.len() > OCI_MAX_REFERRERS {
        return Err(format!(
            "the referrers index lists {} Sigstore bundles; at most {OCI_MAX_REFERRERS} are read",
            out.len()
        ));
    }
    Ok(out)
}

/// A bundle referrer's manifest, read: what it names as its subject and
/// its bundle layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Referrer {
    /// The `subject` descriptor's digest.
    pub subject: String,
    /// The bundle layer's digest and size.
    pub layer_digest: String,
    pub layer_size: u64,
}

/// Read a referrer manifest: an artifact of type [`BUNDLE_MEDIA_TYPE`]
/// with a `subject` and one bundle layer no larger than
/// [`KEYLESS_MAX_BUNDLE_BYTES`].
pub fn referrer(manifest: &[u8]) -> Result<Referrer, String> {
    let v: serde_json::Value = serde_json::from_slice(manifest)
        .map_err(|e| format!("the referrer manifest is not JSON: {e}"))?;
    let artifact_type = v["artifactType"]
        .as_str()
        .or(v["config"]["mediaType"].as_str())
        .unwrap_or_default();
    if artifact_type != BUNDLE_MEDIA_TYPE {
        return Err(format!(
            "the referrer is of artifact type {artifact_type:?}, not a Sigstore bundle ({BUNDLE_MEDIA_TYPE})"
        ));
    }
    let subject = v["subject"]["digest"]
        .as_str()
        .ok_or("the referrer manifest has no `subject`")?
        .to_string();
    let layers = v["layers"]
        .as_array()
        .ok_or("the referrer manifest has no `layers`")?;
    let bundles: Vec<&serde_json::Value> = layers
        .iter()
        .filter(|l| l["mediaType"] == BUNDLE_MEDIA_TYPE)
        .collect();
    let [layer] = bundles.as_slice() else {
        return Err(format!(
            "the referrer manifest has {} bundle layers; exactly one is expected",
            bundles.len()
        ));
    };
    let layer_size = layer["size"]
        .as_u64()
        .ok_or("the bundle layer has no size")?;
    if layer_size > KEYLESS_MAX_BUNDLE_BYTES as u64 {
        return Err(format!(
            "the bundle layer is {layer_size} bytes; at most {KEYLESS_MAX_BUNDLE_BYTES} are read (a Sigstore bundle is 5 to 10 KB)"
        ));
    }
    Ok(Referrer {
        subject,
        layer_digest: layer["digest"]
            .as_str()
            .ok_or("the bundle layer has no digest")?
            .to_string(),
        layer_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referrer_manifests_and_indexes_are_read_bounded() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let m = serde_json::json!({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": BUNDLE_MEDIA_TYPE,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": d, "size": 2},
            "layers": [{"mediaType": BUNDLE_MEDIA_TYPE, "digest": d, "size": 5000}],
            "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": 400},
        });
        let r = referrer(&serde_json::to_vec(&m).unwrap()).unwrap();
        assert_eq!(r.subject, d);
        assert_eq!(r.layer_size, 5000);
        let mut big = m.clone();
        big["layers"][0]["size"] = serde_json::json!(KEYLESS_MAX_BUNDLE_BYTES + 1);
        let e = referrer(&serde_json::to_vec(&big).unwrap()).unwrap_err();
        assert!(e.contains("at most 65536"), "{e}");
        let mut other = m.clone();
        other["artifactType"] = serde_json::json!("application/spdx+json");
        assert!(
            referrer(&serde_json::to_vec(&other).unwrap())
                .unwrap_err()
                .contains("not a Sigstore bundle")
        );
        let entry = serde_json::json!({"artifactType": BUNDLE_MEDIA_TYPE, "digest": d});
        let sbom = serde_json::json!({"artifactType": "application/spdx+json", "digest": d});
        let index = serde_json::json!({"manifests": [entry, sbom]});
        assert_eq!(
            bundle_referrers(&serde_json::to_vec(&index).unwrap()).unwrap(),
            vec![d.clone()]
        );
        let many = serde_json::json!({"manifests": vec![entry; OCI_MAX_REFERRERS + 1]});
        assert!(bundle_referrers(&serde_json::to_vec(&many).unwrap()).is_err());
        assert_eq!(fallback_tag(&d), format!("sha256-{}", "ab".repeat(32)));
    }
}
