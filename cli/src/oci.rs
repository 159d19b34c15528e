//! `toolgate pull`, `toolgate push` (`--sign-key`), `toolgate verify` and
//! `toolgate keygen sign`: components in OCI registries and their cosign
//! signatures (see `toolgate::oci` and docs/operators/oci.md, "Plugins from OCI
//! registries" and "Signatures and trust").

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::GlobalArgs;
use toolgate::oci::signature::{self, SigningKey};
use toolgate::oci::{Client, OciRef, Store, keyless, trust};

#[derive(Args, Debug)]
pub struct PullArgs {
    /// oci://REGISTRY/REPOSITORY:TAG or …@sha256:HEX (the oci:// may be left
    /// out). The tag is resolved to a digest now; the component goes into the
    /// local store (STATE/oci), from which `[plugins.NAME] source = "…"`
    /// starts without the network.
    #[arg(value_name = "REF")]
    reference: String,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// oci://REGISTRY/REPOSITORY:TAG to push to (the oci:// may be left out).
    #[arg(value_name = "REF")]
    reference: String,
    /// The component (.wasm) to push, as the one application/wasm layer of a
    /// Wasm OCI artifact (the layout `wkg oci push` writes).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Sign what is pushed with this private key (PEM PKCS#8, ECDSA P-256 or
    /// Ed25519; `toolgate keygen sign` makes one): a cosign signature of the
    /// pushed digest, under the tag sha256-HEX.sig (`cosign verify --key`
    /// accepts it).
    #[arg(long, value_name = "KEY.pem")]
    sign_key: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// oci://REGISTRY/REPOSITORY:TAG or …@sha256:HEX (the oci:// may be left
    /// out). It is pulled (the tag resolved to a digest, the component and
    /// its signatures into the local store); when the registry cannot be
    /// reached, what the store holds is verified.
    #[arg(value_name = "REF")]
    reference: String,
    /// A trusted public key (PEM, P-256 or Ed25519). Repeatable. Default: the
    /// keys the configuration's `[trust]` names for this reference.
    #[arg(long = "key", value_name = "PUB.pem")]
    keys: Vec<PathBuf>,
    /// Verify a local component (REF is then a .wasm file) with this
    /// Sigstore bundle (`cosign sign-blob --bundle`, `sigstore sign`),
    /// offline. Keyless: against --trusted-root and the identity flags
    /// (default: the configuration's [trust] trusted_root and identities).
    /// Key-based (a bundle with a public key hint): with --key (default:
    /// [trust] keys), and its log entry against the trusted root when one
    /// is named.
    #[arg(long, value_name = "FILE")]
    bundle: Option<PathBuf>,
    /// The Sigstore trusted root (trusted_root.json) keyless signatures are
    /// verified against. Default: the configuration's [trust] trusted_root.
    #[arg(long, value_name = "FILE")]
    trusted_root: Option<PathBuf>,
    /// The OIDC issuer of an accepted keyless signer (with
    /// --certificate-identity or --certificate-identity-glob).
    #[arg(long, value_name = "URL")]
    certificate_oidc_issuer: Option<String>,
    /// The accepted keyless signer's SAN (an e-mail address or URI), exactly.
    #[arg(
        long,
        value_name = "SAN",
        requires = "certificate_oidc_issuer",
        conflicts_with = "certificate_identity_glob"
    )]
    certificate_identity: Option<String>,
    /// A glob over the accepted signer's SAN (`*` does not cross `/`).
    #[arg(long, value_name = "GLOB", requires = "certificate_oidc_issuer")]
    certificate_identity_glob: Option<String>,
}

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the private key (PEM PKCS#8, mode 0600; an existing
    /// file is not overwritten). The public key goes next to it, with the
    /// extension .pub: that is the file `[trust] keys` names.
    #[arg(value_name = "KEY.pem")]
    out: PathBuf,
    /// The algorithm (p256: cosign's default).
    #[arg(long, value_enum, default_value_t = KeyAlgorithm::P256)]
    algorithm: KeyAlgorithm,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyAlgorithm {
    P256,
    Ed25519,
}

/// `toolgate pull REF`: prints the digest the reference resolved to.
pub async fn pull(global: &GlobalArgs, args: PullArgs) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let reference = OciRef::parse(&args.reference)?;
    let dir = toolgate::state::default_dir()
        .context("no state directory to keep pulled components in (set TOOLGATE_STATE_DIR)")?;
    let store = Store::open(toolgate::state::StateDir::open(dir)?.path())?;
    let stored = Client::new(&config.oci).pull(&reference, &store).await?;
    println!(
        "{reference}: {} ({} bytes, component {})",
        stored.digest,
        stored.bytes.len(),
        stored.layer_digest
    );
    Ok(ExitCode::SUCCESS)
}

/// `toolgate push REF FILE`: prints the digest of what was pushed.
pub async fn push(global: &GlobalArgs, args: PushArgs) -> anyhow::Result<ExitCode> {
    let config = global.load_config()?;
    let reference = OciRef::parse(&args.reference)?;
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    if !toolgate::oci::layout::is_component(&bytes) {
        anyhow::bail!(
            "{} is not a WebAssembly component (build it for wasm32-wasip2, or `wasm-tools component new` a module)",
            args.file.display()
        );
    }
    // Read the key before pushing anything: a bad key pushes nothing.
    let key = match &args.sign_key {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--sign-key: cannot read {}", path.display()))?;
            Some(SigningKey::from_pem(&path.display().to_string(), &text)?)
        }
    };
    let client = Client::new(&config.oci);
    let digest = client.push(&reference, &bytes).await?;
    println!("{reference}: pushed {digest} ({} bytes)", bytes.len());
    if let Some(key) = key {
        client.sign(&reference, &digest, &key).await?;
        println!(
            "{reference}: signed {digest} with {} ({}), tag {}",
            key.public().fingerprint(),
            key.public().name,
            signature::signature_tag(&digest)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `toolgate verify REF`: exit 0 when a trusted key signed the digest the
/// reference resolves to, 1 when not, 2 when it cannot be told (no key, no
/// such reference, a registry error with nothing in the store).
pub async fn verify(global: &GlobalArgs, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    match verify_inner(global, args).await {
        Ok(true) => Ok(ExitCode::SUCCESS),
        Ok(false) => Ok(ExitCode::from(1)),
        Err(e) => {
            eprintln!("toolgate: {e:#}");
            Ok(ExitCode::from(2))
        }
    }
}

/// The keyless policy the flags name, else the configuration's `[trust]`
/// (`None` when neither names a trusted root). `need_identities`: no
/// accepted identity is an error (else a root alone is a policy: it
/// checks key-based bundles' log entries).
fn keyless_policy(
    config: &toolgate::HostConfig,
    args: &VerifyArgs,
    need_identities: bool,
) -> anyhow::Result<Option<signature::KeylessPolicy>> {
    let top = config.trust.as_ref().map(|t| t.rule()).unwrap_or_default();
    let (base, root_path) = match &args.trusted_root {
        Some(p) => (std::path::PathBuf::new(), Some(p.clone())),
        None => (
            config.trust_base(),
            top.trusted_root.as_ref().map(|p| p.to_path_buf()),
        ),
    };
    let Some(root_path) = root_path else {
        return Ok(None);
    };
    let root = trust::read_trusted_root(&base, &root_path)
        .map_err(|e| anyhow::anyhow!("the trusted root: {e}"))?;
    let identities = match &args.certificate_oidc_issuer {
        Some(issuer) => {
            let identity = keyless::Identity {
                issuer: issuer.clone(),
                subject: args.certificate_identity.clone(),
                subject_glob: args.certificate_identity_glob.clone(),
            };
            if let Some(why) = identity.problem() {
                anyhow::bail!(
                    "the accepted identity {why} (pass --certificate-identity or --certificate-identity-glob)"
                );
            }
            vec![identity]
        }
        None => top.identities.clone().unwrap_or_default(),
    };
    if identities.is_empty() && need_identities {
        anyhow::bail!(
            "no keyless identity is accepted: pass --certificate-oidc-issuer with --certificate-identity (or -glob), or set [trust] identities"
        );
    }
    Ok(Some(signature::KeylessPolicy { root, identities }))
}

/// `toolgate verify FILE.wasm --bundle B`: a local component and its
/// Sigstore bundle — keyless (against the trusted root and identities) or
/// key-based (with --key, its log entry against the trusted root if one is
/// named).
fn verify_file(
    config: &toolgate::HostConfig,
    args: &VerifyArgs,
    bundle: &std::path::Path,
) -> anyhow::Result<bool> {
    let artifact = std::fs::read(&args.reference)
        .with_context(|| format!("cannot read {}", args.reference))?;
    let digest = toolgate::oci::sha256_digest(&artifact);
    let bytes = trust::read_bounded(bundle, toolgate::budgets::KEYLESS_MAX_BUNDLE_BYTES)
        .map_err(|e| anyhow::anyhow!("--bundle {e}"))?;
    let verdict = match keyless::Bundle::from_json(&bytes) {
        Err(why) => Err(keyless::Error::from(why)),
        Ok(b) if b.leaf().is_none() => {
            let keys = file_keys(config, args)?;
            let policy = keyless_policy(config, args, false)?;
            keyless::verify_keyed(
                &b,
                keyless::Artifact::Bytes(&artifact),
                &keys,
                policy.as_ref().map(|p| &p.root),
                keyless::now(),
            )
            .map(|k| {
                let log = match k.logged {
                    Some((index, time)) => {
                        format!("log index {index} at {}", toolgate::clock::rfc3339(time))
                    }
                    None => "its log entry not checked: no trusted root".into(),
                };
                format!(
                    "{} ({}, {}; {log})",
                    k.key.fingerprint(),
                    k.key.name,
                    k.key.algorithm.name()
                )
            })
        }
        Ok(b) => {
            let policy = keyless_policy(config, args, true)?.context(
                "no trusted root to verify the bundle against: pass --trusted-root FILE, or set [trust] trusted_root",
            )?;
            keyless::verify(
                &b,
                &artifact,
                &policy.root,
                &policy.identities,
                keyless::now(),
            )
            .map(|signer| signer.to_string())
        }
    };
    match verdict {
        Ok(signer) => {
            println!("{} ({digest}) is signed by {signer}", args.reference);
            Ok(true)
        }
        Err(why) => {
            println!("{} ({digest}) is NOT verified: {why}", args.reference);
            Ok(false)
        }
    }
}

/// The keys a key-based bundle of a local file is checked with: --key,
/// else the configuration's `[trust] keys`.
fn file_keys(
    config: &toolgate::HostConfig,
    args: &VerifyArgs,
) -> anyhow::Result<Vec<signature::PublicKey>> {
    let (base, paths) = if args.keys.is_empty() {
        let top = config.trust.as_ref().map(|t| t.rule()).unwrap_or_default();
        let keys = top.keys.unwrap_or_default();
        (
            config.trust_base(),
            keys.iter().map(|k| k.to_path_buf()).collect(),
        )
    } else {
        (std::path::PathBuf::new(), args.keys.clone())
    };
    if paths.is_empty() {
        anyhow::bail!(
            "the bundle is signed with a key: pass --key PUB.pem, or name keys in the configuration's [trust] keys"
        );
    }
    let what = if args.keys.is_empty() {
        "[trust] keys"
    } else {
        "--key"
    };
    paths
        .iter()
        .map(|p| trust::read_key(&base, p).map_err(|e| anyhow::anyhow!("{what}: {e}")))
        .collect()
}

async fn verify_inner(global: &GlobalArgs, args: VerifyArgs) -> anyhow::Result<bool> {
    let config = global.load_config()?;
    if let Some(bundle) = &args.bundle {
        return verify_file(&config, &args, bundle);
    }
    let reference = OciRef::parse(&args.reference)?;
    let dir = toolgate::state::default_dir()
        .context("no state directory to keep pulled components in (set TOOLGATE_STATE_DIR)")?;
    let store = Store::open(toolgate::state::StateDir::open(dir)?.path())?;
    let stored = match Client::new(&config.oci).pull(&reference, &store).await {
        Ok(s) => s,
        Err(e @ toolgate::oci::OciError::Registry { .. }) => {
            let Some(s) = store.load(&reference)? else {
                return Err(e.into());
            };
            eprintln!("toolgate: {e}; verifying what the local store holds");
            s
        }
        Err(e) => return Err(e.into()),
    };
    let flags_name_keyless = args.trusted_root.is_some() || args.certificate_oidc_issuer.is_some();
    let check = if args.keys.is_empty() && !flags_name_keyless {
        let plugin = config
            .plugins
            .values()
            .find(|p| {
                p.source
                    .as_deref()
                    .and_then(|s| OciRef::parse(s).ok())
                    .as_ref()
                    == Some(&reference)
            })
            .and_then(|p| p.trust.as_ref());
        trust::check(
            config.trust.as_ref(),
            plugin,
            &config.trust_base(),
            &reference,
            &stored.digest,
            &stored.signatures,
        )
        .map(|c| c.signer)
        .context("no key to verify with: pass --key PUB.pem (or --trusted-root and an identity), or name keys in the configuration's [trust]")?
    } else {
        let mut keys = Vec::new();
        for path in &args.keys {
            keys.push(
                trust::read_key(std::path::Path::new(""), path)
                    .map_err(|e| anyhow::anyhow!("--key {e}"))?,
            );
        }
        let keyless = if flags_name_keyless {
            // With --key, a root alone checks a key-based bundle's log entry.
            keyless_policy(&config, &args, args.keys.is_empty())?
        } else {
            None
        };
        signature::verify_with(&stored.signatures, &stored.digest, &keys, keyless.as_ref())
            .map_err(|e| e.0)
    };
    match check {
        Ok(signer) => {
            let how = if signer.docker_reference.is_empty() {
                "in a Sigstore bundle attached as an OCI referrer".to_string()
            } else {
                format!("as {}", signer.docker_reference)
            };
            println!(
                "{reference}: {} is signed by {signer}, {how}",
                stored.digest
            );
            Ok(true)
        }
        Err(why) => {
            println!(
                "{reference}: {} is NOT verified: {why} ({} signature(s) found)",
                stored.digest,
                stored.signatures.len()
            );
            Ok(false)
        }
    }
}

/// `toolgate keygen sign KEY.pem` (and its old spelling `toolgate
/// sign-keygen KEY.pem`): a signing key and its public key.
pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let algorithm = match args.algorithm {
        KeyAlgorithm::P256 => signature::Algorithm::P256,
        KeyAlgorithm::Ed25519 => signature::Algorithm::Ed25519,
    };
    let private = SigningKey::generate_pem(algorithm);
    let key = SigningKey::from_pem(&args.out.display().to_string(), &private)?;
    let public_path = args.out.with_extension("pub");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&args.out)
        .with_context(|| {
            format!(
                "cannot create {} (an existing key is not overwritten)",
                args.out.display()
            )
        })?;
    f.write_all(private.as_bytes())
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    std::fs::write(&public_path, key.public().to_pem())
        .with_context(|| format!("cannot write {}", public_path.display()))?;
    println!(
        "{}: private key (keep it secret); {}: public key {} (name it in [trust] keys)",
        args.out.display(),
        public_path.display(),
        key.public().fingerprint()
    );
    Ok(ExitCode::SUCCESS)
}
