//! A replica's id: what tells the replicas sharing a store apart.
//!
//! The approval queue records it in every entry a replica asks (so that,
//! restarted, a replica ends only the waits that were its own, not those
//! of the replicas still running). It must be unique among the replicas
//! sharing a store and stable across a replica's restarts: `[state]
//! replica_id` when set; else made once, `HOSTNAME-RANDOM`, and kept in
//! the state directory (`replica-id`, owner-only), so a replica restarted
//! with the same state directory is the same replica; else (no state
//! directory) made afresh for the process.

use std::path::Path;

use super::OpenError;

/// The file in the state directory.
pub const FILE: &str = "replica-id";

/// The longest id: 64 bytes.
pub const MAX_BYTES: usize = 64;

/// Whether `id` is one: 1 to [`MAX_BYTES`] bytes of ASCII letters,
/// digits, `.`, `_` and `-`.
pub fn valid(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// This replica's id (see the module docs).
pub fn id(configured: Option<&str>, state_dir: Option<&Path>) -> Result<String, OpenError> {
    if let Some(id) = configured {
        if !valid(id) {
            return Err(OpenError::ReplicaId(format!(
                "`[state] replica_id` = `{id}`: write 1 to {MAX_BYTES} letters, digits, `.`, `_` or `-`"
            )));
        }
        return Ok(id.to_string());
    }
    let Some(dir) = state_dir else {
        return Ok(fresh());
    };
    let path = dir.join(FILE);
    let fail = |message: String| OpenError::File {
        path: path.display().to_string(),
        message,
    };
    crate::state::private_file(&path).map_err(fail)?;
    let kept = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
    let kept = kept.trim();
    if valid(kept) {
        return Ok(kept.to_string());
    }
    if !kept.is_empty() {
        return Err(fail(format!(
            "it holds `{kept}`, not a replica id (1 to {MAX_BYTES} letters, digits, `.`, `_` or `-`); delete it to make a new one"
        )));
    }
    let id = fresh();
    std::fs::write(&path, format!("{id}\n")).map_err(|e| fail(e.to_string()))?;
    Ok(id)
}

/// `HOSTNAME-RANDOM`: readable in logs, unique even for two replicas on
/// one machine.
fn fresh() -> String {
    let host: String = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(40)
        .collect();
    let random = random_hex();
    if host.is_empty() {
        format!("replica-{random}")
    } else {
        format!("{host}-{random}")
    }
}

/// 8 random hex digits (time and the process id when there is no
/// randomness).
fn random_hex() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        bytes = (t ^ std::process::id().rotate_left(16)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_kept_in_the_state_directory_and_checked() {
        let dir = std::env::temp_dir().join(format!(
            "toolgate-replica-id-{}-{}",
            std::process::id(),
            random_hex()
        ));
        let first = id(None, Some(&dir)).unwrap();
        assert!(valid(&first), "{first}");
        assert_eq!(id(None, Some(&dir)).unwrap(), first, "stable");
        assert_ne!(id(None, None).unwrap(), first);
        assert_eq!(id(Some("r-1"), Some(&dir)).unwrap(), "r-1");
        for bad in ["", "a b", "a/b", &"x".repeat(65)] {
            assert!(id(Some(bad), None).is_err(), "{bad:?}");
        }
        std::fs::write(dir.join(FILE), "not an id!\n").unwrap();
        assert!(id(None, Some(&dir)).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
