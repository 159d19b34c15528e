//! The audit record: one line per call, written by the host itself before
//! the call's result is returned, hash-chained and signed.
//!
//! Why in the host and not an observer plugin: an observer's lines go
//! through the guest log seam, which is rate-limited (a busy agent loses
//! exactly the lines that matter) and plain text anyone with write access
//! could edit unseen. Here:
//!
//! * **Started, then finished.** A call the policies let through is
//!   declared started — a `started` record, its *intent* — before anything
//!   of it runs ([`crate::pipeline::intent`]); its final `call` record
//!   names that intent. A host killed while a body runs leaves an intent
//!   without a final record, which `toolgate audit verify` reports as a
//!   call started and never finished.
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
//! * **Sensitive values stay out.** `[audit] sensitive` values are kept as
//!   digests in the arguments and replaced wherever a record's text quotes
//!   them (a policy's reason): see [`redact`].
//!
//! The format (JSON Lines, `v` = [`SCHEMA_VERSION`]) is documented in
//! `docs/operators/audit.md`.

pub mod chain;
pub mod config;
pub mod key;
mod redact;
pub mod verify;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::budgets::{AUDIT_CUT_REASON_BYTES, AUDIT_MAX_ARGUMENT_BYTES, AUDIT_MAX_RECORD_BYTES};
use crate::content::Content;
use crate::outcome::{CallError, CallRecord, ErrorCode, Stage};
use crate::pipeline::Finished;
use crate::registry::Generation;
use crate::turn::Client;

pub use key::CheckpointKey;

/// `client.transport` of a call made through the library (no MCP client)
/// that names its caller.
pub const EMBEDDED: &str = "embedded";
/// The version of the record format (`v` in every line).
pub const SCHEMA_VERSION: u32 = 1;
/// The record's file in the state directory.
pub const DEFAULT_FILE: &str = "audit.jsonl";
/// The checkpoint key's file in the state directory, made on first use.
pub const DEFAULT_KEY_FILE: &str = "audit.key";
// The limits, named once in `budgets`.
pub use crate::budgets::{
    AUDIT_CHECKPOINT_EVERY as DEFAULT_CHECKPOINT_EVERY, AUDIT_ROTATE_MB as DEFAULT_ROTATE_MB,
    AUDIT_SYNC_INTERVAL_MS as DEFAULT_SYNC_INTERVAL_MS,
};

pub use config::{ArgumentsMode, AuditConfig, OnFailure, SyncMode};

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
    /// Tool (`"*"`: every tool) → JSON pointers kept as digests.
    pub sensitive: std::collections::BTreeMap<String, Vec<String>>,
}

impl AuditConfig {
    /// The settings, or `None` when the record is off: `enabled = false`,
    /// or nothing enables it (`on_by_default` is the binary's choice; an
    /// embedder turns it on with `[audit]`). `state` is the state
    /// directory, where the file and key are by default; a relative path
    /// set is relative to the host's working directory `workdir` (where
    /// the protected set puts it too).
    pub fn resolve(
        &self,
        on_by_default: bool,
        state: Option<&Path>,
        workdir: &Path,
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
            Some(p) => workdir.join(p),
            None => in_state(DEFAULT_FILE)?,
        };
        let signing_key = match &self.signing_key {
            Some(p) => workdir.join(p),
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
            sensitive: self.sensitive.clone(),
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
        crate::error::HostError::Feature(Box::new(e))
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
    /// `replica` names this host among the replicas of a deployment (each
    /// keeps its own chain): every record carries it.
    pub fn open(settings: AuditSettings, replica: &str) -> Result<Audit, AuditError> {
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
            "replica": replica,
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "key": key.public_hex(),
            "sync": format!("{:?}", settings.sync).to_lowercase(),
        });
        let writer =
            writer::Writer::open(settings.clone(), key, instance, replica.to_string(), start)?;
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

    /// This process's id in the record (every record's `inst`).
    pub fn instance(&self) -> &str {
        self.writer.instance()
    }

    /// `on_failure = "continue"`: a record that cannot be written does not
    /// stop what it records.
    pub fn continues_on_failure(&self) -> bool {
        self.settings.on_failure == OnFailure::Continue
    }

    /// The public key of its checkpoints (hex).
    pub fn public_key(&self) -> String {
        self.writer.public_key()
    }

    /// Record a committed call, before its result is returned: the
    /// record is built here, on the caller's thread; the returned future
    /// waits (without holding the thread) until it is written. When the
    /// record cannot be written the call's result becomes an `INTERNAL`
    /// failure (unless `on_failure = "continue"`).
    ///
    /// `digests` lists the plugins' SHA-256 by name; it is asked only when
    /// `generation` is not the one last recorded. `client` is who made the
    /// call (an MCP client's transport, session and name), if known.
    pub fn commit<'a>(
        &'a self,
        finished: &'a mut Finished,
        generation: &Generation,
        client: Option<&Client>,
        digests: &dyn Fn() -> Vec<(String, Option<String>)>,
    ) -> impl Future<Output = ()> + Send + use<'a> {
        let body = self.call_body(finished, generation, client, digests);
        async move {
            if let Err(e) = self.writer.append_async(body).await {
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
    }

    /// Record a call refused before the pipeline (a malformed call of a
    /// batch, a batch that is not one): `call_id` and `tool` as far as
    /// they could be read (`None`: the whole input was refused), the agent
    /// scope, where it came from (`input`: a file, standard input) and why.
    /// `raw` is what was refused; the record keeps its SHA-256 and length.
    pub fn rejected(
        &self,
        call_id: Option<&str>,
        tool: Option<&str>,
        scope: &str,
        input: &str,
        raw: &[u8],
        reason: &str,
    ) -> Result<(), AuditError> {
        self.event(
            "rejected",
            json!({
                "callId": call_id,
                "tool": tool,
                "scope": scope,
                "input": input,
                "sha256": chain::hex(&chain::sha256(raw)),
                "bytes": raw.len(),
                "reason": crate::budgets::cut(reason.to_string(), AUDIT_CUT_REASON_BYTES * 16),
            }),
        )
    }

    /// Record a host event (`kind` and its fields).
    pub fn event(&self, kind: &str, fields: Value) -> Result<(), AuditError> {
        let mut body = json!({
            "v": SCHEMA_VERSION,
            "kind": kind,
            "ts": now_ms(),
            "inst": self.writer.instance(),
            "replica": self.writer.replica(),
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

    /// The arguments as the record keeps them (in a call's record and in
    /// its intent alike): whole, or with the values at the tool's sensitive
    /// pointers (and every tool's, `"*"`) replaced by their marker, or
    /// omitted (`arguments = "digest"`, or over the cap); and, with `text`,
    /// what the record's text (reasons) must not quote.
    fn keep(&self, info: &crate::call::CallInfo, text: bool) -> Kept {
        let arguments_json = info.arguments_json();
        let digest_only = self.settings.arguments == ArgumentsMode::Digest;
        let omitted = if digest_only {
            Some("digest")
        } else if arguments_json.len() > AUDIT_MAX_ARGUMENT_BYTES {
            Some("size")
        } else {
            None
        };
        let mut kept = Kept {
            redacted: None,
            sensitive: Vec::new(),
            omitted,
            sha256: chain::hex(&chain::sha256(arguments_json.as_bytes())),
            text: redact::Redaction::default(),
        };
        let s = &self.settings.sensitive;
        if !s.is_empty() {
            let pointers = s
                .get(&info.tool_name)
                .into_iter()
                .chain(s.get("*"))
                .flatten();
            for p in pointers {
                if kept.sensitive.contains(p) {
                    continue;
                }
                let Some(value) = info.arguments.pointer(p) else {
                    continue;
                };
                if text {
                    kept.text.add(value);
                }
                if omitted.is_none() {
                    // A copy of the arguments, only when a pointer is present.
                    let copy = kept
                        .redacted
                        .get_or_insert_with(|| (*info.arguments).clone());
                    if let Some(v) = copy.pointer_mut(p) {
                        *v = redact::marker(v);
                    }
                }
                kept.sensitive.push(p.clone());
            }
            if omitted.is_some() {
                // Not kept: nothing replaced in them.
                kept.sensitive.clear();
            }
        }
        if text && digest_only {
            kept.text.add_all(&info.arguments);
        }
        kept.text = std::mem::take(&mut kept.text).ready();
        kept
    }

    fn call_body(
        &self,
        f: &Finished,
        generation: &Generation,
        client: Option<&Client>,
        digests: &dyn Fn() -> Vec<(String, Option<String>)>,
    ) -> String {
        let info = &f.info;
        let record = &f.record;
        let ids = self.plugin_ids(generation, digests);
        // The record's text is searched for sensitive values only when it
        // has some: the reasons of its decisions.
        let has_text = f.decisions.iter().any(|d| d.reason.is_some());
        let kept = self.keep(info, has_text);
        // The result's digest, serialised straight into the hasher; and
        // the digest of its content blocks alone, which is what every MCP
        // client is given (the tool's value only with `--structured-content`):
        // whoever holds the text the model read can recompute it.
        let mut hasher = HashWriter(sha2::Sha256::default());
        let _ = serde_json::to_writer(&mut hasher, record);
        let mut content_hasher = HashWriter(sha2::Sha256::default());
        let _ = serde_json::to_writer(&mut content_hasher, &record.content);
        let error = record.error.as_ref();
        let mut body = CallBody {
            head: self.head("call", info, generation, client),
            intent: f.intent,
            arguments: kept.body(info),
            replayable: kept.omitted.is_none() && kept.sensitive.is_empty(),
            decisions: f
                .decisions
                .iter()
                .map(|d| {
                    let id = d.plugin.as_ref().and_then(|p| ids.get(p));
                    let reason = d.reason.as_deref().and_then(|r| kept.text.apply(r));
                    DecisionBody {
                        decision: match reason {
                            // A sensitive value quoted: a copy without it.
                            Some(reason) => std::borrow::Cow::Owned(crate::pipeline::Decision {
                                reason: Some(reason),
                                ..d.clone()
                            }),
                            None => std::borrow::Cow::Borrowed(d),
                        },
                        plugin_sha256: id.and_then(|i| i.sha256.as_deref()),
                        plugin_version: id.map(|i| i.version.as_str()),
                    }
                })
                .collect(),
            notes: &f.notes,
            result: ResultBody {
                is_error: record.is_error,
                code: error.map(|e| e.code.as_str()),
                stage: error.map(|e| e.stage.as_str()),
                decided_by: error.and_then(|e| e.decided_by.as_deref()),
                sha256: chain::hex(&sha2::Digest::finalize(hasher.0)),
                content_sha256: chain::hex(&sha2::Digest::finalize(content_hasher.0)),
            },
            elapsed_us: f.elapsed_us,
        };
        // Sized once: the arguments and about as much again for the rest.
        let mut text = Vec::with_capacity(info.arguments_json().len() + 1024);
        let _ = serde_json::to_writer(&mut text, &body);
        let text = String::from_utf8(text).unwrap_or_default();
        if text.len() <= AUDIT_MAX_RECORD_BYTES {
            return text;
        }
        // Only long guest reasons can bring a record here: cut them.
        for d in &mut body.decisions {
            if let Some(reason) = &d.decision.reason
                && reason.len() > AUDIT_CUT_REASON_BYTES
            {
                let cut = crate::budgets::cut(reason.clone(), AUDIT_CUT_REASON_BYTES);
                d.decision.to_mut().reason = Some(cut);
            }
        }
        serde_json::to_string(&body).unwrap_or_default()
    }

    /// What a call's records begin with.
    fn head<'a>(
        &'a self,
        kind: &'static str,
        info: &'a crate::call::CallInfo,
        generation: &Generation,
        client: Option<&'a Client>,
    ) -> CallHead<'a> {
        CallHead {
            v: SCHEMA_VERSION,
            kind,
            ts: now_ms(),
            inst: self.writer.instance(),
            replica: self.writer.replica(),
            token: info.token,
            call_id: &info.call_id,
            tool: &info.tool_name,
            provider: &info.tool.provider,
            scope: &info.agent_scope,
            client: match client {
                Some(c) => Some(std::borrow::Cow::Borrowed(c)),
                // An embedder's call that names its caller and no client:
                // the caller is recorded all the same (policies decided by
                // it; `toolgate replay` and the history read it back).
                None => info.caller.as_ref().map(|caller| {
                    std::borrow::Cow::Owned(Client {
                        transport: EMBEDDED.into(),
                        caller: Some(caller.clone()),
                        ..Default::default()
                    })
                }),
            },
            parent: info.parent_id.as_deref(),
            code_mode: info.code_mode,
            generation: generation.number,
        }
    }

    /// A call's intent (`started`): what the call is, before it runs.
    fn intent_body(
        &self,
        info: &crate::call::CallInfo,
        generation: &Generation,
        client: Option<&Client>,
    ) -> String {
        let kept = self.keep(info, false);
        let body = IntentBody {
            head: self.head("started", info, generation, client),
            arguments: kept.body(info),
        };
        let mut text = Vec::with_capacity(info.arguments_json().len() + 512);
        let _ = serde_json::to_writer(&mut text, &body);
        String::from_utf8(text).unwrap_or_default()
    }
}

/// The call's intent, written before its body runs (see
/// [`crate::pipeline::intent`]). It reaches the kernel (`write(2)`; and
/// the disk first with `sync = "always"`) before the call goes on; when it
/// cannot be written the call does not run (`on_failure = "fail-closed"`),
/// or runs unrecorded (`"continue"`, logged).
impl crate::pipeline::Intents for Audit {
    fn started<'a>(
        &'a self,
        call: &'a crate::call::CallInfo,
        generation: &'a Generation,
        client: Option<&'a Client>,
    ) -> futures::future::BoxFuture<'a, Result<Option<u64>, CallError>> {
        let body = self.intent_body(call, generation, client);
        Box::pin(async move {
            match self.writer.append_async_seq(body).await {
                Ok(seq) => Ok(Some(seq)),
                Err(e) => match self.settings.on_failure {
                    OnFailure::Continue => {
                        tracing::error!(error = %e, tool = %call.tool_name, "call's intent not recorded (on_failure = \"continue\")");
                        Ok(None)
                    }
                    OnFailure::FailClosed => Err(not_started(&call.tool_name, &e)),
                },
            }
        })
    }
}

/// The arguments as a record keeps them ([`Audit::keep`]).
struct Kept {
    /// A copy with sensitive values replaced, when one was present.
    redacted: Option<Value>,
    /// The pointers replaced.
    sensitive: Vec<String>,
    omitted: Option<&'static str>,
    /// SHA-256 of the arguments' compact JSON (as given).
    sha256: String,
    /// What the record's text must not quote.
    text: redact::Redaction,
}

impl Kept {
    /// The arguments' part of a call's record.
    fn body<'a>(&'a self, info: &'a crate::call::CallInfo) -> ArgumentsBody<'a> {
        ArgumentsBody {
            arguments: self.arguments(info),
            arguments_sha256: &self.sha256,
            arguments_omitted: self.omitted,
            sensitive: &self.sensitive,
        }
    }

    fn arguments<'a>(&'a self, info: &'a crate::call::CallInfo) -> Option<&'a Value> {
        match (self.omitted, &self.redacted) {
            (Some(_), _) => None,
            (None, Some(r)) => Some(r),
            (None, None) => Some(&*info.arguments),
        }
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

/// What a call's records begin with: which call, where, in which
/// generation (a `started` record and its `call` record alike).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CallHead<'a> {
    v: u32,
    kind: &'static str,
    ts: u64,
    inst: &'a str,
    replica: &'a str,
    token: u64,
    call_id: &'a str,
    tool: &'a str,
    provider: &'a str,
    scope: &'a str,
    client: Option<std::borrow::Cow<'a, Client>>,
    parent: Option<&'a str>,
    code_mode: bool,
    generation: u64,
}

/// The arguments as a call's records keep them ([`Audit::keep`]).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ArgumentsBody<'a> {
    arguments: Option<&'a Value>,
    arguments_sha256: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments_omitted: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    sensitive: &'a [String],
}

/// A `call` record's body (see docs/operators/audit.md), serialised without an
/// intermediate JSON tree.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CallBody<'a> {
    #[serde(flatten)]
    head: CallHead<'a>,
    /// The seq of the call's `started` record (its body was dispatched).
    #[serde(skip_serializing_if = "Option::is_none")]
    intent: Option<u64>,
    #[serde(flatten)]
    arguments: ArgumentsBody<'a>,
    replayable: bool,
    decisions: Vec<DecisionBody<'a>>,
    /// What the body told the person or heard from them (see
    /// `crate::call::Notes`).
    #[serde(skip_serializing_if = "<[Value]>::is_empty")]
    notes: &'a [Value],
    result: ResultBody<'a>,
    elapsed_us: u64,
}

/// A `started` record's body: a call about to run (see docs/operators/audit.md).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct IntentBody<'a> {
    #[serde(flatten)]
    head: CallHead<'a>,
    #[serde(flatten)]
    arguments: ArgumentsBody<'a>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct DecisionBody<'a> {
    #[serde(flatten)]
    decision: std::borrow::Cow<'a, crate::pipeline::Decision>,
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
    /// The SHA-256 of the content blocks' compact JSON.
    content_sha256: String,
}

/// Why a call did not run: its intent could not be written.
fn not_started(tool: &str, e: &AuditError) -> CallError {
    CallError::new(
        ErrorCode::Internal,
        Stage::Execute,
        format!(
            "`{tool}` was not run: its audit record could not be written ({e}). The host fails \
             calls closed until the record can be written again (restart it once the cause is fixed)."
        ),
    )
    .decided_by("audit")
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
