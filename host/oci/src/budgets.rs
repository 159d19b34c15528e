//! Every limit on what a registry, a signature or a bundle may make this
//! crate read, named once (the host's `budgets` lists them with the rest,
//! and docs/operators/oci.md states the same numbers).

/// Bytes of an OCI manifest read from a registry (the registry client): the
/// body is read in pieces and the pull stops at this size, before any of it
/// is parsed. Threat: a registry answering a manifest of gigabytes. 4 MiB
/// (what the distribution specification asks registries to accept).
pub const OCI_MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Layers an OCI manifest may list: a component is one `application/wasm`
/// layer; more is refused before any layer is fetched. Threat: a manifest
/// of 10,000 layers. 16.
pub const OCI_MAX_LAYERS: usize = 16;
/// Bytes of the component layer of an OCI artifact: a larger declared size
/// is refused before the fetch, and the fetch stops at the declared size.
/// Threat: a registry streaming without end. 256 MiB.
pub const OCI_MAX_LAYER_BYTES: u64 = 256 << 20;
/// Redirects one registry request may follow (blob downloads are often
/// redirected to storage); a loop ends at this count. 10 (reqwest's own
/// default, which the OCI client's blob requests use too).
pub const OCI_MAX_REDIRECTS: usize = 10;
/// Time one pull or push may take in all (manifest, blobs, redirects,
/// authentication). Threat: a registry that drips a byte a second.
/// Default 120 s; `[oci] timeout_ms`.
pub const OCI_TIMEOUT_MS: u64 = 120_000;
/// Time a registry may stay silent while connecting or answering (between
/// two reads). 30 s.
pub const OCI_READ_TIMEOUT_MS: u64 = 30_000;
/// Bytes of a signature manifest (the `sha256-HEX.sig` tag cosign writes,
/// [`crate::signature`]), read like a component's manifest. Threat: a
/// registry answering a huge signature manifest. 256 KiB (a key-based
/// signature layer is about 300 bytes, a keyless one, with its
/// certificates and log entry in annotations, about 10 KB: 16 of them fit).
pub const OCI_MAX_SIGNATURE_MANIFEST_BYTES: usize = 256 << 10;
/// Layers of a signature manifest: one per signature; more is refused
/// before any payload is fetched. Threat: 10,000 signature layers, each a
/// fetch and a verification. 16.
pub const OCI_MAX_SIGNATURE_LAYERS: usize = 16;
/// Bytes of one signature payload (the simple-signing JSON): a larger
/// declared size is refused before the fetch, and the fetch stops at the
/// declared size. Threat: a gigabyte "payload". 16 KiB (cosign's is about
/// 250 bytes).
pub const OCI_MAX_SIGNATURE_PAYLOAD_BYTES: usize = 16 << 10;

/// Sigstore bundles attached to one manifest as OCI referrers
/// ([`crate::referrers`]) that are read. Threat: a repository where
/// anyone may push has a manifest's referrers grow without bound, each a
/// fetch and a verification at every load. 16 (cosign attaches one per
/// signing).
pub const OCI_MAX_REFERRERS: usize = 16;
/// Bytes of the referrers index (the referrers API's answer or the
/// `sha256-HEX` tag's index). 256 KiB (an entry is about 300 bytes).
pub const OCI_MAX_REFERRERS_INDEX_BYTES: usize = 256 << 10;
/// Bytes of one referrer's manifest. 64 KiB (cosign's is under 1 KB).
pub const OCI_MAX_REFERRER_MANIFEST_BYTES: usize = 64 << 10;

// Keyless signatures ([`crate::keyless`], docs/operators/oci.md,
// "Keyless signatures", which states the same numbers). What they bound
// comes from a registry or a bundle file, and the operator's trusted root.

/// Bytes of a Sigstore bundle (a `--bundle` file) and of each keyless
/// annotation of a cosign signature layer (certificate, chain, bundle).
/// Threat: a gigabyte "bundle" read whole into memory and parsed. 64 KiB
/// (a bundle is 5 to 10 KB).
pub const KEYLESS_MAX_BUNDLE_BYTES: usize = 64 << 10;
/// Bytes of the in-toto statement of a DSSE bundle (its decoded
/// payload), parsed as JSON. A `cosign sign` statement is about 300
/// bytes. 32 KiB.
pub const KEYLESS_MAX_STATEMENT_BYTES: usize = 32 << 10;
/// Subjects of an in-toto statement examined for the artifact's digest.
/// Threat: a statement of thousands of subjects compared one by one. 64
/// (cosign names one).
pub const KEYLESS_MAX_STATEMENT_SUBJECTS: usize = 64;
/// Bytes of the trusted root file (`[trust] trusted_root`). 1 MiB
/// (Sigstore's production root is about 7 KB).
pub const KEYLESS_MAX_TRUSTED_ROOT_BYTES: usize = 1 << 20;
/// Certificates in one CA's or TSA's chain in the trusted root, in a
/// bundle's `x509CertificateChain`, and embedded in an RFC 3161
/// timestamp. Threat: a path search over hundreds of certificates. 8
/// (Fulcio's is 2).
pub const KEYLESS_MAX_CA_CHAIN: usize = 8;
/// Entries of each list of the trusted root (certificate authorities,
/// transparency logs…). 64.
pub const KEYLESS_MAX_ROOT_ENTRIES: usize = 64;
/// Hashes of an inclusion proof: a Merkle tree of 2^64 entries needs 64.
/// Threat: a proof of millions of hashes. 64.
pub const KEYLESS_MAX_PROOF_HASHES: usize = 64;
/// Signature lines of a checkpoint examined (a witnessed checkpoint has a
/// few). 16.
pub const KEYLESS_MAX_CHECKPOINT_SIGNATURES: usize = 16;
/// Bytes of the SCT list a signing certificate embeds (extension
/// 1.3.6.1.4.1.11129.2.4.2). Threat: a certificate whose list is most of
/// its size, parsed SCT by SCT. 4096 (an SCT is about 120 bytes).
pub const KEYLESS_MAX_SCT_LIST_BYTES: usize = 4096;
/// SCTs of that list examined. Threat: a list of hundreds of SCTs, each a
/// signature check. 8 (Fulcio embeds one).
pub const KEYLESS_MAX_SCTS: usize = 8;
/// Bytes of one SCT's `extensions` (signed with it; a Static CT log puts
/// the entry's index there, 8 bytes). 256.
pub const KEYLESS_MAX_SCT_EXTENSIONS_BYTES: usize = 256;
/// RFC 3161 timestamps of one bundle (`timestampVerificationData`), each
/// a CMS signature and a certificate path to check. Threat: a bundle of
/// hundreds of timestamps. 32 (sigstore-go's and sigstore-python's
/// bound; a signer asks one TSA).
pub const KEYLESS_MAX_TIMESTAMPS: usize = 32;
/// How far in the future a log entry's `integratedTime`, or a timestamp's
/// `genTime`, may be (clock skew between this machine and the log or the
/// TSA). 300 s.
pub const KEYLESS_CLOCK_SKEW_SECS: i64 = 300;
