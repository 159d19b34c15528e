//! The key that signs checkpoints: Ed25519 (`ed25519-dalek`).
//!
//! A key file holds the 32-byte secret seed as 64 hexadecimal digits on one
//! line, and must be readable by its owner only (`0600`): whoever reads it
//! can sign a rewritten record. `toolgate keygen audit FILE` makes one (and
//! `FILE.pub`, the public key, the same way); without `[audit] signing_key`
//! the host makes `audit.key` in its state directory on first use. Pin the
//! public key when verifying (`toolgate audit verify --key`): the record
//! names the key of each checkpoint, but a forger would name their own.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};

use super::chain::{hex, unhex};

/// Why a key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the audit signing key {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the audit signing key {path} is not 64 hexadecimal digits (make one with `toolgate keygen audit FILE`)"
    )]
    Format { path: PathBuf },
    #[error(
        "the audit signing key {path} may be read by others (mode {mode:o}): `chmod 600 {path}`"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("cannot write the audit signing key {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot get random bytes for a new key: {0}")]
    Random(#[source] std::io::Error),
}

/// The signing key of checkpoints.
pub struct CheckpointKey {
    key: SigningKey,
}

impl std::fmt::Debug for CheckpointKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointKey")
            .field("public", &self.public_hex())
            .finish()
    }
}

impl CheckpointKey {
    /// Read the key at `path` (see the module docs for the format).
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let meta = std::fs::metadata(path).map_err(|source| KeyError::Read {
            path: path.into(),
            source,
        })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Exposed {
                path: path.into(),
                mode,
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
            path: path.into(),
            source,
        })?;
        let seed = unhex::<32>(&text).ok_or_else(|| KeyError::Format { path: path.into() })?;
        Ok(CheckpointKey {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Read the key at `path`, making a new one there first if there is
    /// no file. Hosts starting at once agree on one key: it is put in
    /// place whole, by a link that fails when another host's is there.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        if !path.exists() {
            match Self::generate(path) {
                Ok(key) => return Ok(key),
                Err(KeyError::Write { source, .. })
                    if source.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Self::load(path)
    }

    /// Make a new key at `path` (refusing to overwrite a file) and its
    /// public key at `path.pub`; returns it.
    pub fn generate(path: &Path) -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom(&mut seed).map_err(KeyError::Random)?;
        let key = CheckpointKey {
            key: SigningKey::from_bytes(&seed),
        };
        // Written aside, then linked into place: nobody ever reads half a key.
        let write = |p: &Path, text: String, mode: u32| -> std::io::Result<()> {
            let aside = PathBuf::from(format!("{}.{}.tmp", p.display(), std::process::id()));
            let _ = std::fs::remove_file(&aside);
            let written = (|| {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&aside)?;
                f.write_all(text.as_bytes())?;
                // `mode` is masked by the umask at creation: set it exactly.
                std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(mode))?;
                f.sync_all()?;
                std::fs::hard_link(&aside, p)
            })();
            let _ = std::fs::remove_file(&aside);
            written
        };
        write(path, format!("{}\n", hex(&seed)), 0o600).map_err(|source| KeyError::Write {
            path: path.into(),
            source,
        })?;
        let public = public_path(path);
        let _ = std::fs::remove_file(&public);
        write(&public, format!("{}\n", key.public_hex()), 0o644).map_err(|source| {
            KeyError::Write {
                path: public.clone(),
                source,
            }
        })?;
        Ok(key)
    }

    /// The public key, hex.
    pub fn public_hex(&self) -> String {
        hex(self.key.verifying_key().as_bytes())
    }

    /// Sign `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }
}

/// `path` with `.pub` appended.
pub fn public_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// Whether `sig` is `public`'s signature of `message` (strict: no
/// malleable encodings).
pub fn verify(public: &[u8; 32], message: &[u8], sig: &[u8; 64]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(public) else {
        return false;
    };
    let sig = ed25519_dalek::Signature::from_bytes(sig);
    key.verify_strict(message, &sig).is_ok()
}

/// A public key given on the command line: 64 hex digits, or a file
/// holding them (a `.pub` file).
pub fn parse_public(text: &str) -> Result<[u8; 32], String> {
    if let Some(k) = unhex::<32>(text) {
        return Ok(k);
    }
    let content = std::fs::read_to_string(text)
        .map_err(|e| format!("`{text}` is neither 64 hex digits nor a readable file ({e})"))?;
    unhex::<32>(&content).ok_or_else(|| format!("{text} does not hold 64 hex digits"))
}

fn getrandom(buf: &mut [u8]) -> std::io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the pointer and length describe the unfilled part of `buf`.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_signs_what_its_public_key_verifies() {
        let dir = std::env::temp_dir().join(format!("tg-audit-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k");
        let key = CheckpointKey::generate(&path).unwrap();
        assert!(CheckpointKey::generate(&path).is_err(), "never overwrites");
        let again = CheckpointKey::load(&path).unwrap();
        assert_eq!(key.public_hex(), again.public_hex());
        let public = parse_public(public_path(&path).to_str().unwrap()).unwrap();
        let sig = key.sign(b"m");
        assert!(verify(&public, b"m", &sig));
        assert!(!verify(&public, b"n", &sig));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            CheckpointKey::load(&path),
            Err(KeyError::Exposed { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
