//! Pull and push, bounded.
//!
//! `oci-client` authenticates, streams blobs (checking their digests) and
//! pushes. The manifest GET is ours: `oci-client` reads a manifest body
//! whole whatever its size (`Client::pull_manifest_raw` → `bytes()`), and a
//! registry answering gigabytes would have the host hold them. Ours reads
//! it in pieces up to [`OCI_MAX_MANIFEST_BYTES`], follows at most
//! [`OCI_MAX_REDIRECTS`] redirects, and checks the bytes' digest against
//! the one asked for (or, for a tag, the registry's own
//! `Docker-Content-Digest`). Every pull and push runs under one total
//! deadline (`[oci] timeout_ms`, default [`OCI_TIMEOUT_MS`]) and a read
//! timeout ([`OCI_READ_TIMEOUT_MS`]): a registry that drips a byte at a
//! time is cut off.
//!
//! Credentials: anonymous, or `TOOLGATE_OCI_USERNAME` and
//! `TOOLGATE_OCI_PASSWORD` from the environment (HTTP basic, exchanged for
//! a bearer token where the registry asks for one).

use std::time::Duration;

use futures::StreamExt;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;

use super::signature::{self, Signature, SigningKey};
use super::{OciConfig, OciError, OciRef, Store, Stored, layout, referrers, sha256_digest};
use crate::budgets::{
    KEYLESS_MAX_BUNDLE_BYTES, OCI_MAX_MANIFEST_BYTES, OCI_MAX_REDIRECTS,
    OCI_MAX_REFERRER_MANIFEST_BYTES, OCI_MAX_REFERRERS_INDEX_BYTES, OCI_MAX_SIGNATURE_LAYERS,
    OCI_MAX_SIGNATURE_MANIFEST_BYTES, OCI_MAX_SIGNATURE_PAYLOAD_BYTES, OCI_READ_TIMEOUT_MS,
    OCI_TIMEOUT_MS,
};

/// Docker's image manifest media type (cosign 1.x signature manifests).
const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Environment variables holding registry credentials.
pub const USERNAME_ENV: &str = "TOOLGATE_OCI_USERNAME";
/// See [`USERNAME_ENV`].
pub const PASSWORD_ENV: &str = "TOOLGATE_OCI_PASSWORD";

/// A registry client under the operator's `[oci]` settings.
#[derive(Clone, Debug)]
pub struct Client {
    insecure: Vec<String>,
    timeout: Duration,
}

impl Client {
    /// A client under `config`.
    pub fn new(config: &OciConfig) -> Client {
        crate::tls::ensure();
        Client {
            insecure: config.insecure_registries.clone(),
            timeout: Duration::from_millis(config.timeout_ms.unwrap_or(OCI_TIMEOUT_MS)),
        }
    }

    /// The total time one pull or push may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Fetch `reference` into `store` (resolving a tag to its digest) and
    /// return it as stored. Nothing is stored unless every check passed.
    pub async fn pull(&self, reference: &OciRef, store: &Store) -> Result<Stored, OciError> {
        self.bounded(reference, self.pull_unbounded(reference, store))
            .await
    }

    /// Push `component` to `reference` (a tag) in the Wasm OCI layout;
    /// returns the manifest's digest.
    pub async fn push(&self, reference: &OciRef, component: &[u8]) -> Result<String, OciError> {
        if reference.tag().is_none() || reference.digest().is_some() {
            return Err(OciError::Reference {
                reference: reference.to_string(),
                why: "a push names a tag (the digest is what the push makes)".into(),
            });
        }
        self.bounded(reference, self.push_unbounded(reference, component))
            .await
    }

    /// Sign the manifest `digest` of `reference`'s repository with `key`
    /// and push the signature as cosign does (a simple-signing layer added
    /// to the manifest under the tag `sha256-HEX.sig`, keeping the
    /// signatures already there). Returns the signature manifest's digest.
    pub async fn sign(
        &self,
        reference: &OciRef,
        digest: &str,
        key: &SigningKey,
    ) -> Result<String, OciError> {
        self.bounded(reference, self.sign_unbounded(reference, digest, key))
            .await
    }

    /// The signatures of the manifest `digest` of `reference`'s repository,
    /// fetched and checked against their digests (not verified: see
    /// [`signature::verify`]).
    pub async fn fetch_signatures(
        &self,
        reference: &OciRef,
        digest: &str,
    ) -> Result<Vec<Signature>, OciError> {
        self.bounded(reference, async {
            let oci = self.oci(reference)?;
            let auth = credentials();
            let token = oci
                .auth(reference.inner(), &auth, RegistryOperation::Pull)
                .await
                .map_err(|e| registry_error(reference, "the registry cannot be reached", e))?;
            self.signatures(reference, &oci, digest, &token, &auth)
                .await
        })
        .await
    }

    async fn bounded<T>(
        &self,
        reference: &OciRef,
        work: impl Future<Output = Result<T, OciError>>,
    ) -> Result<T, OciError> {
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| OciError::Timeout {
                reference: reference.to_string(),
                ms: self.timeout.as_millis() as u64,
            })?
    }

    /// Plain HTTP for a loopback registry or one the operator listed.
    fn plain_http(&self, reference: &OciRef) -> bool {
        reference.is_loopback() || self.insecure.iter().any(|r| r == reference.registry())
    }

    fn oci(&self, reference: &OciRef) -> Result<oci_client::Client, OciError> {
        let protocol = if self.plain_http(reference) {
            ClientProtocol::HttpsExcept(vec![reference.registry().to_string()])
        } else {
            ClientProtocol::Https
        };
        let config = ClientConfig {
            protocol,
            read_timeout: Some(Duration::from_millis(OCI_READ_TIMEOUT_MS)),
            connect_timeout: Some(Duration::from_millis(OCI_READ_TIMEOUT_MS)),
            user_agent: concat!("toolgate/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        oci_client::Client::try_from(config)
            .map_err(|e| registry_error(reference, "cannot set up the registry client", e))
    }

    async fn pull_unbounded(&self, reference: &OciRef, store: &Store) -> Result<Stored, OciError> {
        let oci = self.oci(reference)?;
        let auth = credentials();
        let token = oci
            .auth(reference.inner(), &auth, RegistryOperation::Pull)
            .await
            .map_err(|e| registry_error(reference, "the registry cannot be reached", e))?;
        let target = reference.digest().or(reference.tag()).unwrap_or("latest");
        let (manifest_bytes, digest) = self
            .manifest(reference, target, &token, &auth, OCI_MAX_MANIFEST_BYTES)
            .await?
            .ok_or_else(|| OciError::Registry {
                reference: reference.to_string(),
                what: "the registry has no such manifest (404)".into(),
                source: None,
            })?;
        let refused = |why: String| OciError::Refused {
            reference: reference.to_string(),
            why,
        };
        let manifest: OciImageManifest = serde_json::from_slice(&manifest_bytes)
            .map_err(|e| refused(format!("the manifest is not an OCI image manifest: {e}")))?;
        let (layer_digest, size) = layout::component_layer(&manifest).map_err(refused)?;
        let descriptor = OciDescriptor {
            media_type: layout::LAYER_MEDIA_TYPE.to_string(),
            digest: layer_digest.clone(),
            size: size as i64,
            ..OciDescriptor::default()
        };
        let mut stream = oci
            .pull_blob_stream(reference.inner(), &descriptor)
            .await
            .map_err(|e| registry_error(reference, "the component layer cannot be fetched", e))?
            .stream;
        let mut layer = Vec::with_capacity(size.min(1 << 20) as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                // oci-client's own digest check at the end of the stream.
                Err(e) if e.to_string().contains("igest") => {
                    return Err(refused(format!(
                        "the component layer does not match its digest {layer_digest} (tampered with, or corrupted): {e}"
                    )));
                }
                Err(e) => {
                    return Err(registry_error(
                        reference,
                        "the component layer download failed",
                        e,
                    ));
                }
            };
            if layer.len() as u64 + chunk.len() as u64 > size {
                return Err(refused(format!(
                    "the registry sent more than the component layer's declared {size} bytes"
                )));
            }
            layer.extend_from_slice(&chunk);
        }
        let actual = sha256_digest(&layer);
        if actual != layer_digest || layer.len() as u64 != size {
            return Err(refused(format!(
                "the component layer is {actual} ({} bytes), the manifest says {layer_digest} ({size} bytes): tampered with, or corrupted",
                layer.len()
            )));
        }
        let signatures = self
            .signatures(reference, &oci, &digest, &token, &auth)
            .await?;
        store.put(reference, &digest, &manifest_bytes, &layer_digest, &layer)?;
        store.put_signatures(&digest, &signatures)?;
        Ok(Stored {
            reference: reference.clone(),
            digest,
            layer_digest,
            bytes: layer.into(),
            signatures,
        })
    }

    /// GET the manifest `target` (a tag or digest) of `reference`'s
    /// repository, at most `max` bytes; returns its bytes and digest, or
    /// `None` when the registry has none (404).
    async fn manifest(
        &self,
        reference: &OciRef,
        target: &str,
        token: &Option<String>,
        auth: &RegistryAuth,
        max: usize,
    ) -> Result<Option<(Vec<u8>, String)>, OciError> {
        let url = format!("{}/manifests/{target}", self.repository_url(reference));
        // cosign before 2.x writes its signature manifests in Docker's.
        let accept = [layout::MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE];
        let Some((body, claimed)) = self
            .get_bounded(
                reference,
                &url,
                &accept,
                token,
                auth,
                max,
                &format!("the manifest {target}"),
            )
            .await?
        else {
            return Ok(None);
        };
        let refused = |why: String| OciError::Refused {
            reference: reference.to_string(),
            why,
        };
        let digest = sha256_digest(&body);
        if target.starts_with("sha256:") {
            if target != digest {
                return Err(refused(format!(
                    "the manifest's digest is {digest}, not the {target} asked for"
                )));
            }
        } else if let Some(claimed) = claimed
            && claimed != digest
        {
            return Err(refused(format!(
                "the manifest's digest is {digest}, the registry says {claimed}"
            )));
        }
        Ok(Some((body, digest)))
    }

    /// `SCHEME://REGISTRY/v2/REPOSITORY`.
    fn repository_url(&self, reference: &OciRef) -> String {
        let scheme = if self.plain_http(reference) {
            "http"
        } else {
            "https"
        };
        format!(
            "{scheme}://{}/v2/{}",
            reference.registry(),
            reference.repository()
        )
    }

    /// GET `url` accepting `accept`, at most `max` bytes; its body and the
    /// registry's `Docker-Content-Digest`, or `None` on a 404.
    #[allow(clippy::too_many_arguments)]
    async fn get_bounded(
        &self,
        reference: &OciRef,
        url: &str,
        accept: &[&str],
        token: &Option<String>,
        auth: &RegistryAuth,
        max: usize,
        what: &str,
    ) -> Result<Option<(Vec<u8>, Option<String>)>, OciError> {
        let refused = |why: String| OciError::Refused {
            reference: reference.to_string(),
            why,
        };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(OCI_MAX_REDIRECTS))
            .read_timeout(Duration::from_millis(OCI_READ_TIMEOUT_MS))
            .connect_timeout(Duration::from_millis(OCI_READ_TIMEOUT_MS))
            .build()
            .map_err(|e| registry_error(reference, "cannot set up the HTTP client", e))?;
        let mut request = http.get(url);
        for a in accept {
            request = request.header(reqwest::header::ACCEPT, *a);
        }
        request = match (token, auth) {
            (Some(t), _) => request.bearer_auth(t),
            (None, RegistryAuth::Basic(u, p)) => request.basic_auth(u, Some(p)),
            (None, _) => request,
        };
        let mut response = request.send().await.map_err(|e| {
            let why = if e.is_redirect() {
                format!("the request for {what} was redirected more than {OCI_MAX_REDIRECTS} times (a redirect loop?)")
            } else {
                format!("{what} cannot be fetched")
            };
            registry_error(reference, &why, e)
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(OciError::Registry {
                reference: reference.to_string(),
                what: format!("the registry answered {status} for {what} ({url})"),
                source: None,
            });
        }
        let too_big = || {
            refused(format!(
                "{what} is larger than {max} bytes (a component's manifest, or its signatures', is a few hundred)"
            ))
        };
        if response.content_length().is_some_and(|n| n > max as u64) {
            return Err(too_big());
        }
        let claimed = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| registry_error(reference, &format!("the download of {what} failed"), e))?
        {
            if body.len() + chunk.len() > max {
                return Err(too_big());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Some((body, claimed)))
    }

    /// The Sigstore bundles attached to `digest` as OCI referrers
    /// ([`referrers`]): the referrers API, or on a 404 the `sha256-HEX`
    /// tag's index; each bundle referrer's manifest (by digest,
    /// [`OCI_MAX_REFERRER_MANIFEST_BYTES`]) and bundle layer
    /// ([`crate::budgets::KEYLESS_MAX_BUNDLE_BYTES`]). A referrer that is
    /// not a bundle is passed over; none is no error.
    async fn referrer_bundles(
        &self,
        reference: &OciRef,
        oci: &oci_client::Client,
        digest: &str,
        token: &Option<String>,
        auth: &RegistryAuth,
    ) -> Result<Vec<Signature>, OciError> {
        let refused = |why: String| OciError::Refused {
            reference: reference.to_string(),
            why: format!("its Sigstore bundle referrers: {why}"),
        };
        let base = self.repository_url(reference);
        let api = format!(
            "{base}/referrers/{digest}?artifactType={}",
            referrers::BUNDLE_MEDIA_TYPE.replace('+', "%2B")
        );
        let accept = [referrers::INDEX_MEDIA_TYPE];
        let index = match self
            .get_bounded(
                reference,
                &api,
                &accept,
                token,
                auth,
                OCI_MAX_REFERRERS_INDEX_BYTES,
                "the referrers index",
            )
            .await
        {
            Ok(Some((body, _))) => body,
            // A 404 is the spec's "no referrers API"; some registries
            // answer 400 or 405 instead: the tag schema is tried for both.
            Ok(None) | Err(OciError::Registry { .. }) => {
                let tag = referrers::fallback_tag(digest);
                let url = format!("{base}/manifests/{tag}");
                match self
                    .get_bounded(
                        reference,
                        &url,
                        &accept,
                        token,
                        auth,
                        OCI_MAX_REFERRERS_INDEX_BYTES,
                        &format!("the referrers tag {tag}"),
                    )
                    .await?
                {
                    Some((body, _)) => body,
                    None => return Ok(Vec::new()),
                }
            }
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for referrer in referrers::bundle_referrers(&index).map_err(refused)? {
            if !is_sha256(&referrer) {
                return Err(refused(format!("{referrer:?} is not a sha256 digest")));
            }
            let Some((manifest, _)) = self
                .manifest(
                    reference,
                    &referrer,
                    token,
                    auth,
                    OCI_MAX_REFERRER_MANIFEST_BYTES,
                )
                .await?
            else {
                continue;
            };
            let r = match referrers::referrer(&manifest) {
                Ok(r) => r,
                Err(why) => return Err(refused(format!("{referrer}: {why}"))),
            };
            let layer = OciDescriptor {
                media_type: referrers::BUNDLE_MEDIA_TYPE.to_string(),
                digest: r.layer_digest.clone(),
                size: r.layer_size as i64,
                ..OciDescriptor::default()
            };
            let bundle = self
                .small_blob(reference, oci, &layer, r.layer_size)
                .await?;
            let bundle = String::from_utf8(bundle)
                .map_err(|_| refused(format!("{referrer}: the bundle is not UTF-8")))?;
            out.push(Signature::referrer(bundle, referrer, r.subject));
        }
        Ok(out)
    }

    /// The Sigstore bundles attached as OCI referrers (see
    /// [`Self::referrer_bundles`]), then the signature layers under
    /// `sha256-HEX.sig`, bounded: the manifest
    /// by [`OCI_MAX_SIGNATURE_MANIFEST_BYTES`], the layers by
    /// [`OCI_MAX_SIGNATURE_LAYERS`], each payload by
    /// [`OCI_MAX_SIGNATURE_PAYLOAD_BYTES`]. None is no error: whether an
    /// unsigned component may load is the trust policy's business.
    async fn signatures(
        &self,
        reference: &OciRef,
        oci: &oci_client::Client,
        digest: &str,
        token: &Option<String>,
        auth: &RegistryAuth,
    ) -> Result<Vec<Signature>, OciError> {
        let tag = signature::signature_tag(digest);
        let refused = |why: String| OciError::Refused {
            reference: reference.to_string(),
            why: format!("its signatures ({tag}): {why}"),
        };
        // The `.sig` tag first, then cosign 3's referrers: a registry that
        // answers both badly is refused for the older, simpler one.
        let mut out = Vec::new();
        let Some((bytes, _)) = self
            .manifest(
                reference,
                &tag,
                token,
                auth,
                OCI_MAX_SIGNATURE_MANIFEST_BYTES,
            )
            .await?
        else {
            return self
                .referrer_bundles(reference, oci, digest, token, auth)
                .await;
        };
        let manifest: OciImageManifest = serde_json::from_slice(&bytes)
            .map_err(|e| refused(format!("the manifest is not an image manifest: {e}")))?;
        if manifest.layers.len() > OCI_MAX_SIGNATURE_LAYERS {
            return Err(refused(format!(
                "the manifest lists {} layers; at most {OCI_MAX_SIGNATURE_LAYERS} signatures are read",
                manifest.layers.len()
            )));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        for layer in &manifest.layers {
            if layer.media_type != signature::PAYLOAD_MEDIA_TYPE {
                continue;
            }
            let Some(sig) = layer
                .annotations
                .as_ref()
                .and_then(|a| a.get(signature::SIGNATURE_ANNOTATION))
            else {
                continue;
            };
            let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
            if size > OCI_MAX_SIGNATURE_PAYLOAD_BYTES as u64 {
                return Err(refused(format!(
                    "a payload of {} bytes; at most {OCI_MAX_SIGNATURE_PAYLOAD_BYTES} are read (a cosign payload is a few hundred)",
                    layer.size
                )));
            }
            let payload = self.small_blob(reference, oci, layer, size).await?;
            // A keyless signature (cosign without --key) carries its
            // certificate and transparency log entry beside it; each is
            // bounded like a bundle.
            let annotation = |key: &str| -> Result<Option<String>, OciError> {
                let value = layer.annotations.as_ref().and_then(|a| a.get(key));
                match value {
                    Some(v) if v.len() > KEYLESS_MAX_BUNDLE_BYTES => Err(refused(format!(
                        "the annotation {key} is {} bytes; at most {KEYLESS_MAX_BUNDLE_BYTES} are read",
                        v.len()
                    ))),
                    v => Ok(v.cloned()),
                }
            };
            out.push(Signature {
                payload: base64::Engine::encode(&b64, payload),
                signature: sig.clone(),
                certificate: annotation(signature::CERTIFICATE_ANNOTATION)?,
                chain: annotation(signature::CHAIN_ANNOTATION)?,
                bundle: annotation(signature::BUNDLE_ANNOTATION)?,
                sigstore_bundle: None,
                referrer: None,
                subject: None,
            });
        }
        out.extend(
            self.referrer_bundles(reference, oci, digest, token, auth)
                .await?,
        );
        Ok(out)
    }

    /// A blob of at most `size` bytes, checked against its digest.
    async fn small_blob(
        &self,
        reference: &OciRef,
        oci: &oci_client::Client,
        layer: &OciDescriptor,
        size: u64,
    ) -> Result<Vec<u8>, OciError> {
        let mut stream = oci
            .pull_blob_stream(reference.inner(), layer)
            .await
            .map_err(|e| registry_error(reference, "a signature blob cannot be fetched", e))?
            .stream;
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|e| registry_error(reference, "a signature blob download failed", e))?;
            if bytes.len() as u64 + chunk.len() as u64 > size {
                return Err(OciError::Refused {
                    reference: reference.to_string(),
                    why: format!(
                        "the registry sent more than a signature blob's declared {size} bytes"
                    ),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        if sha256_digest(&bytes) != layer.digest {
            return Err(OciError::Refused {
                reference: reference.to_string(),
                why: format!(
                    "a signature blob does not match its digest {}",
                    layer.digest
                ),
            });
        }
        Ok(bytes)
    }

    async fn sign_unbounded(
        &self,
        reference: &OciRef,
        digest: &str,
        key: &SigningKey,
    ) -> Result<String, OciError> {
        let oci = self.oci(reference)?;
        let auth = credentials();
        let failed = |what: &str, e: oci_client::errors::OciDistributionError| {
            registry_error(reference, what, e)
        };
        let token = oci
            .auth(reference.inner(), &auth, RegistryOperation::Push)
            .await
            .map_err(|e| failed("the registry cannot be reached", e))?;
        let tag = signature::signature_tag(digest);
        let target = oci_client::Reference::with_tag(
            reference.inner().registry().to_string(),
            reference.repository().to_string(),
            tag.clone(),
        );
        // The signatures already there stay (cosign appends).
        let mut layers: Vec<serde_json::Value> = Vec::new();
        if let Some((bytes, _)) = self
            .manifest(
                reference,
                &tag,
                &token,
                &auth,
                OCI_MAX_SIGNATURE_MANIFEST_BYTES,
            )
            .await?
            && let Ok(old) = serde_json::from_slice::<serde_json::Value>(&bytes)
            && let Some(old) = old["layers"].as_array()
        {
            layers.extend(old.iter().take(OCI_MAX_SIGNATURE_LAYERS - 1).cloned());
        }
        let payload = signature::payload(
            &format!("{}/{}", reference.registry(), reference.repository()),
            digest,
        );
        let b64 = base64::engine::general_purpose::STANDARD;
        let sig = base64::Engine::encode(&b64, key.sign(&payload));
        let payload_digest = sha256_digest(&payload);
        layers.push(serde_json::json!({
            "mediaType": signature::PAYLOAD_MEDIA_TYPE,
            "size": payload.len(),
            "digest": payload_digest,
            "annotations": {signature::SIGNATURE_ANNOTATION: sig},
        }));
        // cosign's config: an OCI image config whose one diff ID is each
        // payload.
        let diff_ids: Vec<&serde_json::Value> = layers.iter().map(|l| &l["digest"]).collect();
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "", "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}], "os": "",
            "rootfs": {"type": "layers", "diff_ids": diff_ids}, "config": {},
        }))
        .expect("a JSON value serializes");
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": layout::MANIFEST_MEDIA_TYPE,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "size": config.len(),
                "digest": sha256_digest(&config),
            },
            "layers": layers,
        }))
        .expect("a JSON value serializes");
        oci.push_blob(&target, payload, &payload_digest)
            .await
            .map_err(|e| failed("the signature payload cannot be pushed", e))?;
        let config_digest = sha256_digest(&config);
        oci.push_blob(&target, config, &config_digest)
            .await
            .map_err(|e| failed("the signature config cannot be pushed", e))?;
        oci.push_manifest_raw(
            &target,
            manifest.clone(),
            http::HeaderValue::from_static(layout::MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| failed("the signature manifest cannot be pushed", e))?;
        Ok(sha256_digest(&manifest))
    }

    async fn push_unbounded(
        &self,
        reference: &OciRef,
        component: &[u8],
    ) -> Result<String, OciError> {
        let oci = self.oci(reference)?;
        let auth = credentials();
        let failed = |what: &str, e: oci_client::errors::OciDistributionError| {
            registry_error(reference, what, e)
        };
        oci.auth(reference.inner(), &auth, RegistryOperation::Push)
            .await
            .map_err(|e| failed("the registry cannot be reached", e))?;
        let (config, manifest) = layout::artifact(component);
        oci.push_blob(
            reference.inner(),
            component.to_vec(),
            &sha256_digest(component),
        )
        .await
        .map_err(|e| failed("the component layer cannot be pushed", e))?;
        let config_digest = sha256_digest(&config);
        oci.push_blob(reference.inner(), config, &config_digest)
            .await
            .map_err(|e| failed("the config cannot be pushed", e))?;
        oci.push_manifest_raw(
            reference.inner(),
            manifest.clone(),
            http::HeaderValue::from_static(layout::MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| failed("the manifest cannot be pushed", e))?;
        Ok(sha256_digest(&manifest))
    }
}

fn is_sha256(digest: &str) -> bool {
    digest
        .strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Anonymous, or basic credentials from the environment.
fn credentials() -> RegistryAuth {
    match (
        std::env::var(USERNAME_ENV).ok().filter(|v| !v.is_empty()),
        std::env::var(PASSWORD_ENV).ok(),
    ) {
        (Some(u), Some(p)) => RegistryAuth::Basic(u, p),
        _ => RegistryAuth::Anonymous,
    }
}

fn registry_error(
    reference: &OciRef,
    what: &str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> OciError {
    let mut detail = e.to_string();
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.source();
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    OciError::Registry {
        reference: reference.to_string(),
        what: format!("{what}: {detail}"),
        source: Some(Box::new(e)),
    }
}
