//! The audit record: one line per call, written by the host itself before
//! the call's result is returned, hash-chained and signed.
//!
//! Why in the host and not an observer plugin: an observer's lines go
//! through the guest log seam, which is rate-limited (a busy agent loses
//! exactly the lines that matter) and plain text anyone with write access
//! could edit unseen. Here:
//!
//! * **Never drops.** A call's record is written (to the file, in the
//!   kernel) before its result leaves the host; callers that commit at once
//!   share one `write(2)` (group commit, see [`writer`]). If it cannot be
//!   written the call fails closed (`INTERNAL`), and so does every call
//!   after it until the host restarts — unless the operator set
//!   `on_failure = "continue"`.
//! * **Tamper-evident.** Each line carries the SHA-256 of the line before
//!   ([`chain`]); every `checkpoint_every` records and at shutdown a
//!   checkpoint is signed with Ed25519 ([`key`]). `toolgate audit verify`
//!   ([`verify`]) finds an edited, deleted, reordered or cut record and
//!   names the first one.
//! * **Durable as configured.** `sync = "batch"` (default): written before
//!   the result returns, `fdatasync` every `sync_interval_ms` (200): a
//!   killed host loses nothing, a power loss or kernel crash at most that
//!   interval. `"always"`: synced before the result returns (callers share
//!   the `fdatasync`). `"none"`: the kernel syncs when it likes (and at
//!   shutdown).
//!
//! The format (JSON Lines, `v` = [`SCHEMA_VERSION`]) is documented in
//! `docs/audit.md`.

pub mod chain;
pub mod key;
pub mod verify;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::content::Content;
use crate::outcome::{CallError, CallRecord, ErrorCode, Stage};
use crate::pipeline::Finished;
use crate::registry::Generation;

pub use key::CheckpointKey;

/// The version of the record format (`v` in every line).
pub const SCHEMA_VERSION: u32 = 1;
/// The record's file in the state directory.
pub const DEFAULT_FILE: &str = "audit.jsonl";
/// The checkpoint key's file in the state directory, made on first use.
pub const DEFAULT_KEY_FILE: &str = "audit.key";
/// Records between two signed checkpoints: what a cut tail can take away
/// unsigned (a checkpoint costs one signature, about 20 µs).
pub const DEFAULT_CHECKPOINT_EVERY: u64 = 1000;
/// Size at which the file is rotated (the chain goes on in the next file).
pub const DEFAULT_ROTATE_MB: u64 = 64;
/// `sync = "batch"`: the most time a written record waits for `fdatasync`.
pub const DEFAULT_SYNC_INTERVAL_MS: u64 = 200;

// The `[audit]` keys are configuration types (in `config`, which names
// nothing of the audit); their resolution is here.
pub use crate::config::{ArgumentsMode, AuditConfig, OnFailure, SyncMode};

/// `[audit]` resolved.
#[derive(Clone, Debug)]
pub struct AuditSettings {
    pub path: PathBuf,
    pub sync: SyncMode,
    pub sync_interval: Duration,
    pub checkpoint_every: u64,
    pub rotate_bytes: u64,
    pub signing_key: PathBuf,
    pub on_failure: OnFailure,
    pub arguments: ArgumentsMode,
}

impl AuditConfig {
    /// The settings, or `None` when the record is off: `enabled = false`,
    /// or nothing enables it (`on_by_default` is the binary's choice; an
    /// embedder turns it on with `[audit]`). `state` is the state
    /// directory, where the file and key are by default.
    pub fn resolve(
        &self,
        on_by_default: bool,
        state: Option<&Path>,
    ) -> Result<Option<AuditSettings>, AuditError> {
        let on = self
            .enabled
            .unwrap_or(on_by_default || self.path.is_some() || *self != AuditConfig::default());
        if !on {
            return Ok(None);
        }
        let in_state = |file: &str| {
            state
                .map(|s| s.join(file))
                .ok_or_else(|| AuditError::NoPath {
                    what: file.to_string(),
                })
        };
        let path = match &self.path {
            Some(p) => p.clone(),
            None => in_state(DEFAULT_FILE)?,
        };
        let signing_key = match &self.signing_key {
            Some(p) => p.clone(),
            None => in_state(DEFAULT_KEY_FILE).unwrap_or_else(|_| path.with_extension("key")),
        };
        Ok(Some(AuditSettings {
            path,
            sync: self.sync.unwrap_or_default(),
            sync_interval: Duration::from_millis(
                self.sync_interval_ms
                    .unwrap_or(DEFAULT_SYNC_INTERVAL_MS)
                    .max(1),
            ),
            checkpoint_every: self
                .checkpoint_every
                .unwrap_or(DEFAULT_CHECKPOINT_EVERY)
                .max(1),
            rotate_bytes: self.rotate_mb.unwrap_or(DEFAULT_ROTATE_MB).max(1) << 20,
            signing_key,
            on_failure: self.on_failure.unwrap_or_default(),
            arguments: self.arguments.unwrap_or_default(),
        }))
    }
}

/// Why the record cannot be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(
        "cannot {what} the audit record {path}: {source} (set [audit] path, or fix the file system)"
    )]
    Io {
        path: PathBuf,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] key::KeyError),
    #[error(
        "no state directory for the audit record's {what}: set [audit] path and signing_key, or TOOLGATE_STATE_DIR"
    )]
    NoPath { what: String },
    /// A write failed earlier (sticky), or the record is closed.
    #[error("the audit record cannot be written: {0}")]
    Failed(String),
}

impl From<AuditError> for crate::error::HostError {
    fn from(e: AuditError) -> Self {
        crate::error::HostError::Audit(Box::new(e))
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A plugin as the record names it: its digest and contract version.
#[derive(Clone, Debug)]
struct PluginId {
    sha256: Option<String>,
    version: String,
}

type PluginIds = Arc<std::collections::HashMap<String, PluginId>>;

/// The host's audit record (cheap to clone).
#[derive(Clone)]
pub struct Audit {
    writer: Arc<writer::Writer>,
    settings: Arc<AuditSettings>,
    /// Plugin digests by name, for the generation last seen.
    plugins: Arc<Mutex<(u64, PluginIds)>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("path", &self.settings.path)
            .field("sync", &self.settings.sync)
            .finish()
    }
}

impl Audit {
    /// Open the record (creating the file and, by default, the key) and
    /// write the `start` record, continuing the file's chain.
    pub fn open(settings: AuditSettings) -> Result<Audit, AuditError> {
        let key = CheckpointKey::load_or_create(&settings.signing_key)?;
        let instance = {
            let mut b = [0u8; 8];
            b.copy_from_slice(
                &chain::sha256(
                    format!(
                        "{}-{}-{:?}",
                        std::process::id(),
                        now_ms(),
                        std::thread::current().id()
                    )
                    .as_bytes(),
                )[..8],
            );
            chain::hex(&b)
        };
        let start = json!({
            "v": SCHEMA_VERSION,
            "kind": "start",
            "ts": now_ms(),
            "inst": instance,
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "key": key.public_hex(),
            "sync": format!("{:?}", settings.sync).to_lowercase(),
        });
        let writer = writer::Writer::open(settings.clone(), key, instance, start)?;
        Ok(Audit {
            writer,
            settings: Arc::new(settings),
            plugins: Arc::new(Mutex::new((u64::MAX, Arc::default()))),
        })
    }

    /// Where the record is written.
    pub fn path(&self) -> &Path {
        &self.settings.path
    }

    /// The public key of its checkpoints (hex).
    pub fn public_key(&self) -> String {
        self.writer.public_key()
    }

    /// Record a committed call, before its result is returned. When the
    /// record cannot be written the call's result becomes an `INTERNAL`
    /// failure (unless `on_failure = "continue"`).
    ///
    /// `digests` lists the plugins' SHA-256 by name; it is asked only when
    /// `generation` is not the one last recorded.
    pub fn commit(
        &self,
        finished: &mut Finished,
        generation: &Generation,
        digests: &dyn Fn() -> Vec<(String, Option<String>)>,
    ) {
        let body = self.call_body(finished, generation, digests);
        if let Err(e) = self.writer.append(body, false) {
            match self.settings.on_failure {
                OnFailure::Continue => {
                    tracing::error!(error = %e, tool = %finished.record.name, "call not recorded (on_failure = \"continue\")")
                }
                OnFailure::FailClosed => {
                    finished.record = unrecorded(&finished.record, &e);
                }
            }
        }
    }

    /// Record a host event (`kind` and its fields).
    pub fn event(&self, kind: &str, fields: Value) -> Result<(), AuditError> {
        let mut body = json!({
            "v": SCHEMA_VERSION,
            "kind": kind,
            "ts": now_ms(),
            "inst": self.writer.instance(),
        });
        if let (Some(o), Value::Object(extra)) = (body.as_object_mut(), fields) {
            o.extend(extra);
        }
        self.writer.append(body.to_string(), false)
    }

    /// Write the signed `shutdown` checkpoint and sync; later calls are
    /// not recorded (and fail closed). Also done when the last clone is
    /// dropped.
    pub fn close(&self) -> Result<(), AuditError> {
        self.writer.close()
    }

    fn plugin_ids(
        &self,
        generation: &Generation,
        digests: &dyn Fn() -> Vec<(String, Option<String>)>,
    ) -> PluginIds {
        let mut cached = self.plugins.lock().unwrap_or_else(|p| p.into_inner());
        if cached.0 != generation.number {
            let mut map = std::collections::HashMap::new();
            for p in &generation.plugins {
                map.insert(
                    p.name.clone(),
                    PluginId {
                        sha256: None,
                        version: p.wit_version.clone(),
                    },
                );
            }
            for (name, sha256) in digests() {
                if let Some(id) = map.get_mut(&name) {
                    id.sha256 = sha256;
                }
            }
            *cached = (generation.number, Arc::new(map));
        }
        cached.1.clone()
    }

    fn call_body(
        &self,
        f: &Finished,
        generation: &Generation,
        digests: &dyn Fn() -> Vec<(String, Option<String>)>,
    ) -> String {
        let info = &f.info;
        let record = &f.record;
        let ids = self.plugin_ids(generation, digests);
        let full = self.settings.arguments == ArgumentsMode::Full;
        // The result's digest, serialised straight into the hasher.
        let mut hasher = HashWriter(sha2::Sha256::default());
        let _ = serde_json::to_writer(&mut hasher, record);
        let error = record.error.as_ref();
        let body = CallBody {
            v: SCHEMA_VERSION,
            kind: "call",
            ts: now_ms(),
            inst: self.writer.instance(),
            token: info.token,
            call_id: &info.call_id,
            tool: &info.tool_name,
            provider: &info.tool.provider,
            scope: &info.agent_scope,
            parent: info.parent_id.as_deref(),
            code_mode: info.code_mode,
            generation: generation.number,
            arguments: full.then_some(&*info.arguments),
            arguments_sha256: chain::hex(&chain::sha256(info.arguments_json().as_bytes())),
            replayable: full,
            decisions: f
                .decisions
                .iter()
                .map(|d| {
                    let id = d.plugin.as_ref().and_then(|p| ids.get(p));
                    DecisionBody {
                        decision: d,
                        plugin_sha256: id.and_then(|i| i.sha256.as_deref()),
                        plugin_version: id.map(|i| i.version.as_str()),
                    }
                })
                .collect(),
            result: ResultBody {
                is_error: record.is_error,
                code: error.map(|e| e.code.as_str()),
                stage: error.map(|e| e.stage.as_str()),
                decided_by: error.and_then(|e| e.decided_by.as_deref()),
                sha256: chain::hex(&sha2::Digest::finalize(hasher.0)),
            },
            elapsed_us: f.elapsed_us,
        };
        serde_json::to_string(&body).unwrap_or_default()
    }
}

/// Feeds what is written into a SHA-256.
struct HashWriter(sha2::Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(&mut self.0, buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `call` record's body (see docs/audit.md), serialised without an
/// intermediate JSON tree.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CallBody<'a> {
    v: u32,
    kind: &'static str,
    ts: u64,
    inst: &'a str,
    token: u64,
    call_id: &'a str,
    tool: &'a str,
    provider: &'a str,
    scope: &'a str,
    parent: Option<&'a str>,
    code_mode: bool,
    generation: u64,
    arguments: Option<&'a Value>,
    arguments_sha256: String,
    replayable: bool,
    decisions: Vec<DecisionBody<'a>>,
    result: ResultBody<'a>,
    elapsed_us: u64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DecisionBody<'a> {
    #[serde(flatten)]
    decision: &'a crate::pipeline::Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin_sha256: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin_version: Option<&'a str>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ResultBody<'a> {
    is_error: bool,
    code: Option<&'a str>,
    stage: Option<&'a str>,
    decided_by: Option<&'a str>,
    sha256: String,
}

/// The result of a call whose record could not be written.
fn unrecorded(record: &CallRecord, e: &AuditError) -> CallRecord {
    let message = format!(
        "`{}` ran, but its audit record could not be written ({e}), so its result is withheld: \
         the host fails calls closed until the record can be written again (restart it once \
         the cause is fixed). Its effects, if any, have taken place.",
        record.name
    );
    CallRecord {
        id: record.id.clone(),
        name: record.name.clone(),
        is_error: true,
        content: vec![Content::Text(message.clone())],
        error: Some(
            CallError::new(ErrorCode::Internal, Stage::Result, message).decided_by("audit"),
        ),
        meta: None,
        structured_content: None,
        additional_contexts: Vec::new(),
    }
}
