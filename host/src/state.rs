//! The host's state directory, and reading authority that a sandboxed run
//! may have planted.
//!
//! Some of what the host keeps between runs is authority of its own: the
//! key that authenticates compiled native code in the compile cache, and
//! the journal of protected paths that sandboxed runs expose (see
//! `toolgate_sandbox`'s `protect` module). Neither may live where anything
//! the host runs can reach — the cache directory included, since a grant
//! may cover it on some start — so they live here: `$TOOLGATE_STATE_DIR`,
//! else `$XDG_STATE_HOME/toolgate`, else `~/.local/state/toolgate`, created
//! `0700`, owned by the host's user, every ancestor checked like the
//! cache's. The directory is authority (no grant may write it; see
//! [`crate::grants::Authority`]).
//!
//! # Authority that does not exist yet
//!
//! A mount can keep an *existing* configuration file from being changed by
//! a sandboxed command, but nothing can keep a command with write access
//! to the working directory from *creating* `./toolgate.toml` when there is
//! none. The sandbox records every such absent path in the journal before
//! its child starts, and moves whatever appeared there aside after the run
//! (or, if the host died first, at the next start). [`read_authority`] is
//! how the host reads a configuration file at start and at every reload:
//! it finishes the checks of dead hosts first, then refuses a file that a
//! live sandboxed run could have created — so a planted configuration is
//! never obeyed, neither by hot reload while the command runs, nor by
//! another toolgate starting meanwhile, nor by the next start after a
//! crash. The order of its steps is what makes it race-free; see the
//! function.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Environment variable naming the state directory.
pub const STATE_DIR_ENV: &str = "TOOLGATE_STATE_DIR";
/// The journal's subdirectory.
const JOURNAL_DIR: &str = "watch";

/// `$TOOLGATE_STATE_DIR`, else `$XDG_STATE_HOME/toolgate`, else
/// `~/.local/state/toolgate`; `None` when none can be named.
pub fn default_dir() -> Option<PathBuf> {
    std::env::var_os(STATE_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(xdg_dir)
}

/// Every place a start of this user's host could keep its state (the
/// variable's, the XDG one, the home one): all of them are authority,
/// whichever this run uses.
pub fn candidate_dirs() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let env = std::env::var_os(STATE_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| Path::new(&h).join(".local/state/toolgate"));
    for d in [env, xdg_dir(), home].into_iter().flatten() {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

fn xdg_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| Path::new(&h).join(".local/state"))
        })
        .map(|d| d.join("toolgate"))
}

/// A state directory that passed its checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateDir {
    path: PathBuf,
}

/// Why the state directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "cannot create the state directory {path}: {source} (set {STATE_DIR_ENV} to a directory this user owns)"
    )]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the state directory {path} is not safe: {why} (fix it, or set {STATE_DIR_ENV} to a directory only this user can write)"
    )]
    Unsafe { path: PathBuf, why: String },
}

impl StateDir {
    /// Opens `path`, creating it (and its journal) `0700` if needed. The
    /// directory must be a real directory (no symlink), owned by this
    /// user, not writable by group or others; so must its journal.
    pub fn open(path: impl Into<PathBuf>) -> Result<StateDir, StateError> {
        let path = path.into();
        let path = if path.is_absolute() {
            path
        } else {
            std::env::current_dir().unwrap_or_default().join(path)
        };
        let create = |p: &Path| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(p)
                .map_err(|source| StateError::Create {
                    path: p.to_path_buf(),
                    source,
                })
        };
        create(&path)?;
        check_private(&path)?;
        let journal = path.join(JOURNAL_DIR);
        create(&journal)?;
        check_private(&journal)?;
        let path = path.canonicalize().map_err(|source| StateError::Create {
            path: path.clone(),
            source,
        })?;
        Ok(StateDir { path })
    }

    /// The directory (absolute, canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The journal of protected paths exposed by live sandboxed runs
    /// ([`toolgate_sandbox::SandboxPolicy::watch_journal`]).
    pub fn journal(&self) -> PathBuf {
        self.path.join(JOURNAL_DIR)
    }
}

/// Owned by us, a directory and not a symlink, no group/other write.
fn check_private(path: &Path) -> Result<(), StateError> {
    let unsafe_ = |why: String| StateError::Unsafe {
        path: path.to_path_buf(),
        why,
    };
    let m = std::fs::symlink_metadata(path).map_err(|e| unsafe_(e.to_string()))?;
    if !m.file_type().is_dir() {
        return Err(unsafe_(
            "it is not a directory (a symlink is refused)".into(),
        ));
    }
    // SAFETY: no arguments, cannot fail.
    let uid = unsafe { libc::geteuid() };
    if m.uid() != uid {
        return Err(unsafe_(format!(
            "it is owned by uid {}, not {uid}",
            m.uid()
        )));
    }
    if m.mode() & 0o022 != 0 {
        return Err(unsafe_(format!(
            "it is writable by group or others (mode {:o})",
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Why an authority file was not read.
#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the journal of protected paths {journal}: {source}")]
    Journal {
        journal: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} appeared while a sandboxed command could create it (it did not exist when that command started); it is not obeyed. It is moved aside when the command ends; if you wrote it yourself, restore it then"
    )]
    Exposed { path: PathBuf },
    #[error("{path} changed while it was being read; not obeyed (try again)")]
    Changed { path: PathBuf },
}

/// Reads the authority file `path`: `Ok(None)` when it does not exist.
/// With a `journal` (the state directory's), refuses a file that a live
/// sandboxed run could have created, after finishing the post-run checks
/// of runs whose host died (which moves what they planted aside).
///
/// The order is what makes this race-free: (1) finish dead runs' checks;
/// (2) read the file and note its identity; (3) list the paths live runs
/// expose — a spawn records its paths *before* its child exists and
/// retires the record only *after* moving a planted file aside; (4) check
/// that the path still names what was read. A planted file read in (2) is
/// either still exposed in (3) or was moved aside before (3), and then (4)
/// sees the change.
pub fn read_authority(
    path: &Path,
    journal: Option<&Path>,
) -> Result<Option<String>, AuthorityError> {
    let recover = |j: &Path| {
        toolgate_sandbox::recover_watch_journal(j).map_err(|source| AuthorityError::Journal {
            journal: j.to_path_buf(),
            source,
        })
    };
    if let Some(j) = journal {
        recover(j)?;
    }
    let read_err = |source| AuthorityError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let before = file.metadata().map_err(read_err)?;
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(read_err)?;
    let Some(j) = journal else {
        return Ok(Some(text));
    };
    let exposed = recover(j)?.exposed;
    let canonical = canonical_name(path);
    // An exposed directory exposes everything below it (`.agents/skills`
    // made by a run that is still going exposes each `SKILL.md` in it).
    if exposed.iter().any(|e| canonical.starts_with(e)) {
        return Err(AuthorityError::Exposed {
            path: path.to_path_buf(),
        });
    }
    match std::fs::metadata(path) {
        Ok(now) if now.dev() == before.dev() && now.ino() == before.ino() => Ok(Some(text)),
        _ => Err(AuthorityError::Changed {
            path: path.to_path_buf(),
        }),
    }
}

/// The protected paths that live sandboxed runs may be creating right now
/// (see [`toolgate_sandbox::recover_watch_journal`]): whatever stands at or
/// below one of them must not be read as authority yet. Finishes the check
/// of runs whose host died, as [`read_authority`] does.
pub fn exposed_now(journal: &Path) -> Result<Vec<PathBuf>, AuthorityError> {
    toolgate_sandbox::recover_watch_journal(journal)
        .map(|r| r.exposed)
        .map_err(|source| AuthorityError::Journal {
            journal: journal.to_path_buf(),
            source,
        })
}

/// `path` absolute, with its parent canonical (as the sandbox records it).
fn canonical_name(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    match (
        abs.parent().and_then(|p| p.canonicalize().ok()),
        abs.file_name(),
    ) {
        (Some(parent), Some(name)) => parent.join(name),
        _ => abs,
    }
}

/// Why a bearer token could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "no place for the HTTP bearer token: none of TOOLGATE_STATE_DIR, XDG_STATE_HOME, HOME \
         is set; give one with --token-file FILE"
    )]
    NoStateDir,
    #[error("the token file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the token in {path} must be one line of at least {MIN_TOKEN_LEN} characters without spaces"
    )]
    Malformed { path: PathBuf },
    #[error(
        "the token file {path} is readable or writable by other users (mode {mode:o}); `chmod 600` it"
    )]
    Loose { path: PathBuf, mode: u32 },
    #[error(
        "the token file {path} belongs to uid {owner}, not to this user ({me}): \
         another user could read or change it"
    )]
    Owner { path: PathBuf, owner: u32, me: u32 },
    #[error("cannot make a random token: {0}")]
    Random(#[source] std::io::Error),
}

/// Shortest bearer token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// Where the token is generated when `--token-file` is not given:
/// `serve-token` in the host's state directory ([`crate::state`]:
/// `$TOOLGATE_STATE_DIR`, else `$XDG_STATE_HOME/toolgate`, else
/// `~/.local/state/toolgate`), which is hidden from everything the host
/// runs.
pub fn default_token_path() -> Result<PathBuf, TokenError> {
    let state = default_dir()
        .filter(|p| p.is_absolute())
        .ok_or(TokenError::NoStateDir)?;
    Ok(state.join("serve-token"))
}

/// The token in `path`, or a new one written there if there is no file
/// (`true`: it was made now). The file must be this user's and not
/// readable or writable by anyone else; a new one is made with mode 600
/// (its directory, when made, 700), never through a symlink.
pub fn load_or_create_token(path: &Path) -> Result<(String, bool), TokenError> {
    use std::io::{Read, Write};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let io = |source| TokenError::Io {
        path: path.to_path_buf(),
        source,
    };
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
            }
            let mut bytes = [0u8; 32];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut r| r.read_exact(&mut bytes))
                .map_err(TokenError::Random)?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut file = match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
            {
                Ok(file) => file,
                // Another server made it meanwhile: use that one.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    return load_or_create_token(path);
                }
                Err(e) => return Err(io(e)),
            };
            file.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
            return Ok((token, true));
        }
        Err(e) => return Err(io(e)),
    };
    // The opened file's own metadata: no window between check and read.
    let meta = file.metadata().map_err(io)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(TokenError::Owner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(TokenError::Loose {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o777,
        });
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).map_err(io)?;
    let token = text.trim();
    if token.len() < MIN_TOKEN_LEN || token.contains(char::is_whitespace) {
        return Err(TokenError::Malformed {
            path: path.to_path_buf(),
        });
    }
    Ok((token.to_string(), false))
}

/// Make sure `path` is a private file of this user, creating it (mode 600,
/// its directory 700 when made) if it does not exist, never through a
/// symlink: for stores SQLite opens afterwards, which would create a file
/// with the umask's mode. The error says what is wrong and what to do.
pub fn private_file(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create its directory: {e}"))?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot open it (it must be a regular file, not a symlink): {e}"))?;
    // The opened file's own metadata: no window between check and use.
    let meta = file.metadata().map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.uid() != me {
        return Err(format!(
            "it is owned by uid {}, not this user (uid {me})",
            meta.uid()
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "its mode is {:o}: others may read or write it; make it owner-only (chmod 600)",
            meta.permissions().mode() & 0o777
        ));
    }
    Ok(())
}

/// The replica id's file in the state directory, made at the first start
/// when neither `--replica-id` nor `[state] replica_id` names one.
pub const REPLICA_ID_FILE: &str = "replica-id";
/// The longest replica id: 64 bytes.
pub const MAX_REPLICA_ID_LEN: usize = 64;

/// Why the replica id cannot be used or made.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaIdError {
    #[error(
        "the replica id `{id}` is not one: it must be 1 to {MAX_REPLICA_ID_LEN} of the characters A-Z a-z 0-9 . _ - (it is part of job ids and audit records)"
    )]
    Malformed { id: String },
    #[error("the replica id file {path}: {source} (or name the replica with --replica-id)")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Refuse an id that could not be printed inside a job id (`job-3@ID`)
/// or a log line as it is.
pub fn check_replica_id(id: &str) -> Result<(), ReplicaIdError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_REPLICA_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ReplicaIdError::Malformed { id: id.to_string() })
    }
}

/// This host's replica id: what names it among the replicas of one
/// deployment, in its background jobs' ids (`job-3@ID`) and its audit
/// records. `configured` (`--replica-id`, else `[state] replica_id`) wins;
/// else the id kept in `replica-id` in the state directory, made at the
/// first start as `HOSTNAME-RANDOM` — stable across restarts, and unique
/// per state directory (replicas on one machine each have their own:
/// they must, for their audit record and approval queue too). Without a
/// state directory: `HOSTNAME-RANDOM`, new at every start.
pub fn replica_id(
    configured: Option<&str>,
    state: Option<&Path>,
) -> Result<String, ReplicaIdError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(id) = configured {
        check_replica_id(id)?;
        return Ok(id.to_string());
    }
    let suffix = random_hex(3).unwrap_or_else(|_| {
        // No randomness: the time and the process tell starts apart.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            ^ std::process::id();
        format!("{:06x}", t & 0xff_ffff)
    });
    let made = format!("{}-{suffix}", hostname());
    let Some(dir) = state else {
        return Ok(made);
    };
    let path = dir.join(REPLICA_ID_FILE);
    let io = |source| ReplicaIdError::Io {
        path: path.clone(),
        source,
    };
    loop {
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(file) => {
                let mut text = String::new();
                file.take(256).read_to_string(&mut text).map_err(io)?;
                let id = text.trim();
                check_replica_id(id)?;
                return Ok(id.to_string());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(format!("{made}\n").as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(io)?;
                return Ok(made);
            }
            // Another start made it meanwhile: read that one (once it is
            // written).
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(io(e)),
        }
    }
}

/// The host name, cut to what a replica id may hold (`host` if none).
fn hostname() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_REPLICA_ID_LEN - 8)
        .collect();
    if name.is_empty() { "host".into() } else { name }
}

/// `n` bytes from the kernel's random source, in hex: unguessable, or
/// the error (each caller says what it does without: a session fails
/// closed, an id falls back to what keeps it unique).
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom").and_then(|mut r| r.read_exact(&mut bytes))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolgate-state-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_state_directory_is_created_private_and_an_unsafe_one_refused() {
        let d = scratch("open");
        let s = StateDir::open(d.join("a/state")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(s.path()), 0o700);
        assert_eq!(mode(&s.journal()), 0o700);
        std::fs::create_dir(d.join("open")).unwrap();
        std::fs::set_permissions(
            d.join("open"),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        )
        .unwrap();
        let e = StateDir::open(d.join("open")).unwrap_err();
        assert!(e.to_string().contains("writable by group or others"), "{e}");
        std::os::unix::fs::symlink(d.join("a/state"), d.join("link")).unwrap();
        let e = StateDir::open(d.join("link")).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_private_file_is_made_owner_only_and_a_shared_or_linked_one_refused() {
        let d = scratch("private");
        let made = d.join("new/store.sqlite");
        private_file(&made).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&made), 0o600);
        assert_eq!(mode(&d.join("new")), 0o700);
        // Already there and private: accepted as it is.
        private_file(&made).unwrap();
        std::fs::set_permissions(&made, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let e = private_file(&made).unwrap_err();
        assert!(
            e.contains("its mode is 644") && e.contains("chmod 600"),
            "{e}"
        );
        std::os::unix::fs::symlink(&made, d.join("link")).unwrap();
        let e = private_file(&d.join("link")).unwrap_err();
        assert!(e.contains("not a symlink"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_absent_authority_file_reads_as_none_and_a_present_one_as_its_text() {
        let d = scratch("read");
        let s = StateDir::open(d.join("state")).unwrap();
        let cfg = d.join("toolgate.toml");
        assert!(read_authority(&cfg, Some(&s.journal())).unwrap().is_none());
        std::fs::write(&cfg, "max_parallel_tool_calls = 2\n").unwrap();
        assert_eq!(
            read_authority(&cfg, Some(&s.journal())).unwrap().as_deref(),
            Some("max_parallel_tool_calls = 2\n")
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_replica_id_is_checked_made_once_and_kept() {
        assert!(check_replica_id("r1").is_ok());
        assert!(check_replica_id("web-3.eu_west").is_ok());
        for bad in ["", "a@b", "a b", "ä", "a/b", &"x".repeat(65)] {
            assert!(check_replica_id(bad).is_err(), "{bad}");
        }
        assert_eq!(replica_id(Some("r7"), None).unwrap(), "r7");
        assert!(replica_id(Some("r@7"), None).is_err());
        let dir = std::env::temp_dir().join(format!("toolgate-replica-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let made = replica_id(None, Some(&dir)).unwrap();
        check_replica_id(&made).unwrap();
        assert_eq!(replica_id(None, Some(&dir)).unwrap(), made, "stable");
        // Configured wins over the file.
        assert_eq!(replica_id(Some("r2"), Some(&dir)).unwrap(), "r2");
        // A file someone wrote nonsense into is refused, not used.
        std::fs::write(dir.join(REPLICA_ID_FILE), "a@b\n").unwrap();
        assert!(replica_id(None, Some(&dir)).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
        // Two hosts without a state directory differ.
        assert_ne!(
            replica_id(None, None).unwrap(),
            replica_id(None, None).unwrap()
        );
    }
}
