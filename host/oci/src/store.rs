//! The local, digest-addressed store of pulled artifacts.
//!
//! `STATE/oci/blobs/sha256/HEX` holds each manifest and component by its
//! digest; `STATE/oci/refs/KEY` maps a reference (a tag, or a pinned
//! digest) to its manifest digest, where `KEY` is the SHA-256 of the
//! reference's text. It lives in the state directory — authority no grant
//! reaches (the host's state directory) — created `0700`, every file `0600`,
//! written to a temporary name and renamed into place.
//!
//! Nothing read from it is trusted because it was written by us: a read
//! checks the manifest's bytes against its digest, the manifest's layout
//! ([`super::layout::component_layer`]), and the component's bytes against
//! the layer's digest and size. A blob changed on disk is refused, naming
//! the file and both digests; `toolgate pull` fetches it again.
//!
//! The signatures fetched with a manifest (see [`super::signature`]) are
//! kept as one JSON blob, by its digest, named by `STATE/oci/sigs/HEX`
//! (`HEX` the manifest's): they are verified against the trust policy at
//! every load, offline, so a change of `[trust]` applies without a pull.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use oci_client::manifest::OciImageManifest;

use super::{OciError, OciRef, layout, sha256_digest};

/// The store's subdirectory of the state directory.
pub const STORE_DIR: &str = "oci";

/// The local store.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

/// A component the store holds, verified as it was read.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The reference it was asked for.
    pub reference: OciRef,
    /// The manifest's digest (`sha256:…`): what runs and is recorded.
    pub digest: String,
    /// The component layer's digest.
    pub layer_digest: String,
    /// The component.
    pub bytes: Arc<[u8]>,
    /// The signatures fetched with it (checked against their digests, not
    /// verified: the trust policy decides).
    pub signatures: Vec<super::signature::Signature>,
}

impl Store {
    /// The store in the state directory `state` (which the host has
    /// checked), created if needed (`0700`, owned by this user, not a
    /// symlink).
    pub fn open(state: &Path) -> Result<Store, OciError> {
        let root = state.join(STORE_DIR);
        for dir in [
            root.clone(),
            root.join("blobs/sha256"),
            root.join("refs"),
            root.join("sigs"),
        ] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|e| store_error(&dir, "cannot be created", e))?;
        }
        for dir in [
            root.clone(),
            root.join("blobs"),
            root.join("blobs/sha256"),
            root.join("refs"),
            root.join("sigs"),
        ] {
            check_private(&dir, true)?;
        }
        Ok(Store { root })
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The directory of references (a pull writes there: what a watcher
    /// watches to reload after `toolgate pull`).
    pub fn refs_dir(&self) -> PathBuf {
        self.root.join("refs")
    }

    /// The manifest digest `reference` resolves to here: its own digest,
    /// or the one its tag was resolved to at the last pull.
    pub fn resolve(&self, reference: &OciRef) -> Result<Option<String>, OciError> {
        let path = self.ref_path(reference);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                check_private(&path, false)?;
                let digest = text.trim().to_string();
                if !is_sha256(&digest) {
                    return Err(OciError::Store {
                        path,
                        what: format!("holds {digest:?}, not a digest (pull the reference again)"),
                        source: None,
                    });
                }
                Ok(Some(digest))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(store_error(&path, "cannot be read", e)),
        }
    }

    /// The component `reference` names, verified; `Ok(None)` when it was
    /// never pulled.
    pub fn load(&self, reference: &OciRef) -> Result<Option<Stored>, OciError> {
        let Some(digest) = self.resolve(reference)? else {
            return Ok(None);
        };
        let manifest_bytes = self.read_blob(&digest)?;
        let path = self.blob_path(&digest);
        let manifest: OciImageManifest =
            serde_json::from_slice(&manifest_bytes).map_err(|e| OciError::Store {
                path: path.clone(),
                what: format!("is not a manifest: {e}"),
                source: None,
            })?;
        let (layer_digest, size) =
            layout::component_layer(&manifest).map_err(|what| OciError::Store {
                path: path.clone(),
                what,
                source: None,
            })?;
        let bytes = self.read_blob(&layer_digest)?;
        if bytes.len() as u64 != size {
            return Err(OciError::Store {
                path: self.blob_path(&layer_digest),
                what: format!(
                    "is {} bytes, the manifest says {size} (pull the reference again)",
                    bytes.len()
                ),
                source: None,
            });
        }
        let signatures = self.signatures(&digest)?;
        Ok(Some(Stored {
            reference: reference.clone(),
            digest,
            layer_digest,
            bytes: bytes.into(),
            signatures,
        }))
    }

    /// The signatures kept for the manifest `digest` (none if none were).
    pub fn signatures(&self, digest: &str) -> Result<Vec<super::signature::Signature>, OciError> {
        let path = self.sigs_path(digest);
        let blob = match std::fs::read_to_string(&path) {
            Ok(text) => {
                check_private(&path, false)?;
                text.trim().to_string()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(store_error(&path, "cannot be read", e)),
        };
        if !is_sha256(&blob) {
            return Err(OciError::Store {
                path,
                what: format!("holds {blob:?}, not a digest (pull the reference again)"),
                source: None,
            });
        }
        let bytes = self.read_blob(&blob)?;
        serde_json::from_slice(&bytes).map_err(|e| OciError::Store {
            path: self.blob_path(&blob),
            what: format!("is not a list of signatures: {e}"),
            source: None,
        })
    }

    /// Keep the signatures fetched for the manifest `digest` (replacing
    /// those kept before; none removes them).
    pub fn put_signatures(
        &self,
        digest: &str,
        signatures: &[super::signature::Signature],
    ) -> Result<(), OciError> {
        let path = self.sigs_path(digest);
        if signatures.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(store_error(&path, "cannot be removed", e))
                }
                _ => Ok(()),
            };
        }
        let bytes = serde_json::to_vec(signatures).expect("signatures serialize");
        let blob = sha256_digest(&bytes);
        self.write_blob(&blob, &bytes)?;
        self.write_file(&path, blob.as_bytes())
    }

    /// Keep a pulled artifact: its blobs, then the reference (so a reader
    /// never finds a reference whose blobs are missing). The caller checked
    /// both against their digests.
    pub fn put(
        &self,
        reference: &OciRef,
        digest: &str,
        manifest: &[u8],
        layer_digest: &str,
        layer: &[u8],
    ) -> Result<(), OciError> {
        self.write_blob(layer_digest, layer)?;
        self.write_blob(digest, manifest)?;
        self.write_file(&self.ref_path(reference), digest.as_bytes())?;
        // A digest-pinned reference of the same artifact resolves too.
        self.write_file(
            &self.ref_path(&reference.at_digest(digest)),
            digest.as_bytes(),
        )
    }

    /// Read a blob and check it against its name.
    fn read_blob(&self, digest: &str) -> Result<Vec<u8>, OciError> {
        let path = self.blob_path(digest);
        let bytes = std::fs::read(&path)
            .map_err(|e| store_error(&path, "cannot be read (pull the reference again)", e))?;
        check_private(&path, false)?;
        let actual = sha256_digest(&bytes);
        if actual != digest {
            return Err(OciError::Store {
                path,
                what: format!(
                    "was changed on disk: its digest is {actual}, its name says {digest}; it is not used (pull the reference again)"
                ),
                source: None,
            });
        }
        Ok(bytes)
    }

    fn write_blob(&self, digest: &str, bytes: &[u8]) -> Result<(), OciError> {
        self.write_file(&self.blob_path(digest), bytes)
    }

    fn write_file(&self, path: &Path, bytes: &[u8]) -> Result<(), OciError> {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            store_error(path, "cannot be written", e)
        })
    }

    fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.root.join("blobs/sha256").join(hex)
    }

    fn sigs_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.root.join("sigs").join(hex)
    }

    fn ref_path(&self, reference: &OciRef) -> PathBuf {
        let key = sha256_digest(reference.to_string().as_bytes());
        self.root
            .join("refs")
            .join(key.trim_start_matches("sha256:"))
    }
}

fn is_sha256(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn store_error(path: &Path, what: &str, e: std::io::Error) -> OciError {
    OciError::Store {
        path: path.to_path_buf(),
        what: format!("{what}: {e}"),
        source: Some(e),
    }
}

/// Owned by this user, not a symlink, no group/other access.
fn check_private(path: &Path, dir: bool) -> Result<(), OciError> {
    let refuse = |what: String| OciError::Store {
        path: path.to_path_buf(),
        what,
        source: None,
    };
    let m = std::fs::symlink_metadata(path).map_err(|e| store_error(path, "cannot be read", e))?;
    if m.file_type().is_symlink() || m.is_dir() != dir {
        return Err(refuse(format!(
            "is not a {} (a symlink is refused)",
            if dir { "directory" } else { "regular file" }
        )));
    }
    // SAFETY: no arguments, cannot fail.
    let uid = unsafe { libc::geteuid() };
    if m.uid() != uid {
        return Err(refuse(format!("is owned by uid {}, not {uid}", m.uid())));
    }
    if m.mode() & 0o077 != 0 {
        return Err(refuse(format!(
            "is open to group or others (mode {:o}); the store is owner-only",
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh store in its own state directory (`tag` keeps tests apart).
    fn store(tag: &str) -> Store {
        let dir = std::env::temp_dir().join(format!("toolgate-oci-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Store::open(&dir.join("state")).unwrap()
    }

    fn put(store: &Store, r: &OciRef, component: &[u8]) -> String {
        let (_, manifest) = layout::artifact(component);
        let digest = sha256_digest(&manifest);
        store
            .put(r, &digest, &manifest, &sha256_digest(component), component)
            .unwrap();
        digest
    }

    #[test]
    fn what_was_put_loads_by_tag_and_by_digest_owner_only() {
        let store = store("load");
        let r = OciRef::parse("oci://127.0.0.1:5000/acme/x:1").unwrap();
        assert!(store.load(&r).unwrap().is_none());
        let digest = put(&store, &r, b"component bytes");
        let s = store.load(&r).unwrap().unwrap();
        assert_eq!(s.digest, digest);
        assert_eq!(&*s.bytes, b"component bytes");
        let pinned = store.load(&r.at_digest(&digest)).unwrap().unwrap();
        assert_eq!(pinned.digest, digest);
        let mode = std::fs::metadata(store.blob_path(&s.layer_digest))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(store.path()).unwrap().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn signatures_are_kept_by_manifest_digest_and_checked_on_read() {
        use crate::signature::Signature;
        let store = store("sigs");
        let r = OciRef::parse("oci://127.0.0.1:5000/acme/x:1").unwrap();
        let digest = put(&store, &r, b"component bytes");
        assert!(store.load(&r).unwrap().unwrap().signatures.is_empty());
        let sigs = vec![Signature::keyed("cGF5bG9hZA==".into(), "c2ln".into())];
        store.put_signatures(&digest, &sigs).unwrap();
        assert_eq!(store.load(&r).unwrap().unwrap().signatures, sigs);
        // Changed on disk: refused, not read as "unsigned".
        let blob = store.blob_path(&std::fs::read_to_string(store.sigs_path(&digest)).unwrap());
        std::fs::write(&blob, b"[]").unwrap();
        let e = store.load(&r).unwrap_err().to_string();
        assert!(e.contains("was changed on disk"), "{e}");
        // A pull that found none removes them.
        store.put_signatures(&digest, &[]).unwrap();
        assert!(store.load(&r).unwrap().unwrap().signatures.is_empty());
    }

    #[test]
    fn a_blob_changed_on_disk_is_refused() {
        let store = store("tamper");
        let r = OciRef::parse("oci://127.0.0.1:5000/acme/x:1").unwrap();
        put(&store, &r, b"component bytes");
        let layer = store.blob_path(&sha256_digest(b"component bytes"));
        std::fs::write(&layer, b"component bytez").unwrap();
        let e = store.load(&r).unwrap_err().to_string();
        assert!(e.contains("was changed on disk"), "{e}");
        assert!(e.contains(&layer.display().to_string()), "{e}");
        // Opened to others: refused even with the right bytes.
        std::fs::write(&layer, b"component bytes").unwrap();
        std::fs::set_permissions(&layer, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let e = store.load(&r).unwrap_err().to_string();
        assert!(e.contains("owner-only"), "{e}");
    }
}
