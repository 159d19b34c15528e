//! One running language server: its process (sandboxed, see
//! [`super::LspService`]), the JSON-RPC conversation with it, the
//! documents it was sent and what it published.
//!
//! A reader task reads the server's messages ([`super::framing`]): answers
//! go to the request waiting for them; the server's own requests are
//! answered here (its configuration from `settings`, progress tokens
//! accepted, capability registrations accepted, `workspace/applyEdit`
//! *refused*: the host applies no edit a server asks for); its
//! notifications are kept (diagnostics per document, work in progress,
//! rust-analyzer's "quiescent"). When the process ends — crashed, idle,
//! killed — every waiting request gets that reason, and the service starts
//! a new one for the next question.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::framing::{read_message, write_message};

/// Bytes of a server's stderr kept for the message when it ends: 4 KiB.
const STDERR_TAIL: usize = 4 << 10;

/// How long a new server that has said nothing is waited for to say it
/// is busy, before the first question: 2 s.
pub const FIRST_WORD: Duration = Duration::from_secs(2);

/// LSP's "content modified" and "server cancelled": asked again.
const RETRIED_CODES: [i64; 2] = [-32801, -32802];

/// What went wrong talking to a server.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ServerError {
    /// It ended (or could not be written to): why, with its stderr's tail.
    #[error("{0}")]
    Ended(String),
    /// It answered with an error.
    #[error("the server answered error {code}: {message}")]
    Answered { code: i64, message: String },
    /// No answer in time.
    #[error("no answer within {0} ms")]
    Timeout(u128),
}

type Reply = Result<Value, ServerError>;

/// A document as last sent to the server: its digest, not its text (a
/// question's file may be 16 MiB).
struct Doc {
    version: i32,
    digest: [u8; 32],
    /// When it was last sent (a count): the oldest is closed first.
    sent: u64,
}

/// Documents one server holds open: 256. Opening one more closes the one
/// sent longest ago (`didClose`).
pub const MAX_OPEN_DOCUMENTS: usize = 256;
/// Documents whose published diagnostics are kept: 4096 (a server
/// publishing for more has the rest ignored, unless opened here).
pub const MAX_HEARD_DOCUMENTS: usize = 4096;
/// Work-done progress tokens followed at once: 1024 (past that a begin is
/// ignored).
pub const MAX_PROGRESS_TOKENS: usize = 1024;

fn digest(text: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// What the server told us, kept between questions.
#[derive(Default)]
struct Heard {
    /// Per document URI: how many times diagnostics were published, and
    /// the latest.
    diagnostics: HashMap<String, (u64, Value)>,
    /// Work-done progress begun and not ended.
    progress: HashSet<String>,
    /// rust-analyzer's `experimental/serverStatus`: `quiescent`.
    quiescent: Option<bool>,
}

/// One server process and the conversation with it.
pub struct Server {
    pub name: Arc<str>,
    pub root: PathBuf,
    writer: tokio::sync::Mutex<tokio::process::ChildStdin>,
    pending: Mutex<HashMap<i64, oneshot::Sender<Reply>>>,
    next_id: AtomicI64,
    docs: tokio::sync::Mutex<HashMap<String, Doc>>,
    /// Counts syncs (for [`Doc::sent`]).
    syncs: std::sync::atomic::AtomicU64,
    heard: Mutex<Heard>,
    /// Bumped whenever something is heard (diagnostics, progress, status).
    news: watch::Sender<u64>,
    /// `Some(why)` once the process ended.
    ended: watch::Sender<Option<String>>,
    settings: Value,
    started: Instant,
    touched: Mutex<Instant>,
    /// Kills the process when the server is dropped.
    _kill: DropGuard,
    kill: CancellationToken,
}

impl Server {
    /// Start the conversation over a spawned process's pipes: the reader
    /// and the waiter run in the background; `initialize` is not sent yet.
    pub(super) fn attach(
        name: Arc<str>,
        root: PathBuf,
        mut child: toolgate_sandbox::SandboxedChild,
        settings: Value,
    ) -> Result<Arc<Server>, String> {
        let stdout = child.stdout.take().ok_or("the server has no stdout")?;
        let stdin = child.stdin.take().ok_or("the server has no stdin")?;
        let stderr = child.stderr.take();
        let kill = CancellationToken::new();
        let server = Arc::new(Server {
            name,
            root,
            writer: tokio::sync::Mutex::new(stdin),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            docs: tokio::sync::Mutex::new(HashMap::new()),
            syncs: Default::default(),
            heard: Mutex::new(Heard::default()),
            news: watch::Sender::new(0),
            ended: watch::Sender::new(None),
            settings,
            started: Instant::now(),
            touched: Mutex::new(Instant::now()),
            _kill: kill.clone().drop_guard(),
            kill: kill.clone(),
        });
        let tail = Arc::new(Mutex::new(String::new()));
        let stderr =
            stderr.map(|pipe| tokio::spawn(keep_stderr(server.name.clone(), pipe, tail.clone())));
        // The waiter holds the server weakly: dropping the last handle
        // kills the process (the drop guard), and the waiter reaps it.
        let weak = Arc::downgrade(&server);
        tokio::spawn(async move {
            let status = tokio::select! {
                s = child.wait() => s,
                _ = kill.cancelled() => {
                    child.kill();
                    child.wait().await
                }
            };
            // Its last words are read before they are quoted.
            if let Some(stderr) = stderr {
                let _ = tokio::time::timeout(Duration::from_secs(1), stderr).await;
            }
            let why = match status {
                Ok(s) => format!("the language server ended ({s})"),
                Err(e) => format!("the language server could not be waited for: {e}"),
            };
            let tail = tail.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let why = if tail.trim().is_empty() {
                why
            } else {
                format!("{why}; its last words: {}", tail.trim())
            };
            if let Some(server) = weak.upgrade() {
                server.end(why);
            }
        });
        let weak = Arc::downgrade(&server);
        tokio::spawn(read_loop(weak, stdout));
        Ok(server)
    }

    /// Why it ended, if it did.
    pub fn ended(&self) -> Option<String> {
        self.ended.borrow().clone()
    }

    /// Wait until it has ended.
    pub async fn wait_ended(&self) {
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(Option::is_some).await;
    }

    /// Since when it has not been asked anything.
    pub fn idle_for(&self) -> Duration {
        self.touched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    fn touch(&self) {
        *self.touched.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Kill its process (it ends; the service starts another when asked).
    pub fn stop(&self) {
        self.kill.cancel();
    }

    fn end(&self, why: String) {
        self.ended.send_if_modified(|e| {
            if e.is_none() {
                *e = Some(why.clone());
                true
            } else {
                false
            }
        });
        let waiting: Vec<_> = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (_, tx) in waiting {
            let _ = tx.send(Err(ServerError::Ended(why.clone())));
        }
        self.kill.cancel();
    }

    async fn send(&self, message: Value) -> Result<(), ServerError> {
        if let Some(why) = self.ended() {
            return Err(ServerError::Ended(why));
        }
        let mut w = self.writer.lock().await;
        write_message(&mut *w, &message)
            .await
            .map_err(|e| ServerError::Ended(format!("the language server stopped reading: {e}")))
    }

    /// Send a notification.
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), ServerError> {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Send a request and wait for its answer until `deadline`; asked again
    /// while the server says its content changed or it cancelled.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
    ) -> Result<Value, ServerError> {
        self.touch();
        let started = Instant::now();
        loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, tx);
            let sent = self
                .send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
                .await;
            let answer = match sent {
                Err(e) => Err(e),
                Ok(()) => match tokio::time::timeout_at(deadline.into(), rx).await {
                    Ok(Ok(reply)) => reply,
                    Ok(Err(_)) => Err(ServerError::Ended(
                        self.ended()
                            .unwrap_or_else(|| "the language server ended".into()),
                    )),
                    Err(_) => {
                        self.pending
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .remove(&id);
                        // Tell the server it need not finish.
                        let _ = self.notify("$/cancelRequest", json!({"id": id})).await;
                        Err(ServerError::Timeout(started.elapsed().as_millis()))
                    }
                },
            };
            match answer {
                Err(ServerError::Answered { code, .. })
                    if RETRIED_CODES.contains(&code) && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => {
                    self.touch();
                    return other;
                }
            }
        }
    }

    /// The LSP handshake: `initialize`, then `initialized`.
    pub(super) async fn initialize(
        &self,
        options: Value,
        deadline: Instant,
    ) -> Result<(), ServerError> {
        let root = url::Url::from_directory_path(&self.root)
            .map(|u| u.to_string())
            .unwrap_or_default();
        #[allow(deprecated)] // `root_uri`: older servers read only it
        let params = lsp_types::InitializeParams {
            // No process id: servers built on vscode-languageserver
            // (typescript-language-server, pyright) poll `kill(pid, 0)`
            // on it every 3 s and exit with status 1 when that fails —
            // and it always fails here, since Landlock scopes the
            // server's signals to its own domain. The host ends the
            // server itself (the drop guard), so it needs no watchdog.
            process_id: None,
            root_uri: root.parse().ok(),
            initialization_options: Some(options),
            capabilities: capabilities(),
            workspace_folders: Some(vec![lsp_types::WorkspaceFolder {
                uri: root.parse().expect("a directory URL"),
                name: self
                    .root
                    .file_name()
                    .map_or("root".into(), |n| n.to_string_lossy().into_owned()),
            }]),
            client_info: Some(lsp_types::ClientInfo {
                name: "toolgate".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            ..Default::default()
        };
        let params = serde_json::to_value(params).expect("initialize params serialize");
        self.request("initialize", params, deadline).await?;
        self.notify("initialized", json!({})).await
    }

    /// Send the document at `uri` as `text` (opened the first time, its
    /// whole text again when it changed). Returns the count of diagnostics
    /// published for it before this (see [`Server::diagnostics`]) and
    /// whether it was sent.
    pub async fn sync(
        &self,
        uri: &str,
        language: &str,
        text: String,
    ) -> Result<(u64, bool), ServerError> {
        let mut docs = self.docs.lock().await;
        let before = self.published(uri).0;
        let now = self.syncs.fetch_add(1, Ordering::Relaxed);
        let digest = digest(&text);
        match docs.get_mut(uri) {
            Some(doc) if doc.digest == digest => {
                doc.sent = now;
                Ok((before, false))
            }
            Some(doc) => {
                doc.version += 1;
                doc.digest = digest;
                doc.sent = now;
                let version = doc.version;
                self.notify(
                    "textDocument/didChange",
                    json!({
                        "textDocument": {"uri": uri, "version": version},
                        "contentChanges": [{"text": text}],
                    }),
                )
                .await?;
                self.notify(
                    "textDocument/didSave",
                    json!({"textDocument": {"uri": uri}}),
                )
                .await?;
                Ok((before, true))
            }
            None => {
                if docs.len() >= MAX_OPEN_DOCUMENTS
                    && let Some(oldest) = docs
                        .iter()
                        .min_by_key(|(_, d)| d.sent)
                        .map(|(u, _)| u.clone())
                {
                    docs.remove(&oldest);
                    self.heard
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .diagnostics
                        .remove(&oldest);
                    self.notify(
                        "textDocument/didClose",
                        json!({"textDocument": {"uri": oldest}}),
                    )
                    .await?;
                }
                docs.insert(
                    uri.to_string(),
                    Doc {
                        version: 1,
                        digest,
                        sent: now,
                    },
                );
                self.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {
                        "uri": uri, "languageId": language, "version": 1, "text": text,
                    }}),
                )
                .await?;
                Ok((before, true))
            }
        }
    }

    fn published(&self, uri: &str) -> (u64, Value) {
        let heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        heard
            .diagnostics
            .get(uri)
            .cloned()
            .unwrap_or((0, Value::Array(Vec::new())))
    }

    /// The diagnostics of `uri`: the first published after `after`
    /// publications, waiting until `deadline`; else the latest (or `[]`).
    pub async fn diagnostics(&self, uri: &str, after: u64, deadline: Instant) -> Value {
        self.touch();
        let mut news = self.news.subscribe();
        loop {
            let (count, latest) = self.published(uri);
            if count > after || self.ended().is_some() {
                return latest;
            }
            if tokio::time::timeout_at(deadline.into(), news.changed())
                .await
                .is_err()
            {
                return latest;
            }
        }
    }

    /// Wait until the server says it is not working on anything (no
    /// work-done progress open, not "not quiescent"), or `deadline`. A
    /// server started less than [`FIRST_WORD`] ago that has said nothing
    /// yet is given that long to say it is busy (loading a project).
    pub async fn settled(&self, deadline: Instant) {
        let mut news = self.news.subscribe();
        loop {
            {
                let heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
                let silent = heard.quiescent.is_none() && *news.borrow() == 0;
                let young = self.started.elapsed() < FIRST_WORD;
                if heard.progress.is_empty() && heard.quiescent != Some(false) && !(silent && young)
                {
                    return;
                }
            }
            let deadline = if *news.borrow() == 0 {
                deadline.min(self.started + FIRST_WORD)
            } else {
                deadline
            };
            if self.ended().is_some()
                || tokio::time::timeout_at(deadline.into(), news.changed())
                    .await
                    .is_err()
            {
                return;
            }
        }
    }

    /// What `workspace/configuration` answers for `section`.
    fn setting(&self, section: Option<&str>) -> Value {
        let Some(section) = section.filter(|s| !s.is_empty()) else {
            return self.settings.clone();
        };
        section
            .split('.')
            .try_fold(&self.settings, |v, k| v.get(k))
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// The answer to one of the server's own requests.
    fn answer(&self, method: &str, params: &Value) -> Result<Value, (i64, String)> {
        match method {
            "workspace/configuration" => Ok(Value::Array(
                params["items"]
                    .as_array()
                    .map(|items| {
                        items
                            .iter()
                            .map(|i| self.setting(i["section"].as_str()))
                            .collect()
                    })
                    .unwrap_or_default(),
            )),
            "window/workDoneProgress/create"
            | "client/registerCapability"
            | "client/unregisterCapability"
            | "window/showMessageRequest"
            | "workspace/diagnostic/refresh"
            | "workspace/semanticTokens/refresh"
            | "workspace/inlayHint/refresh"
            | "workspace/codeLens/refresh" => Ok(Value::Null),
            "workspace/workspaceFolders" => {
                let uri = url::Url::from_directory_path(&self.root)
                    .map(|u| u.to_string())
                    .unwrap_or_default();
                Ok(json!([{"uri": uri, "name": "root"}]))
            }
            // The host applies no edit a server asks for: a rename comes
            // back to the model as a diff, applied through `edit`.
            "workspace/applyEdit" => Ok(json!({
                "applied": false,
                "failureReason": "toolgate applies no edits a language server asks for",
            })),
            _ => Err((-32601, format!("toolgate does not handle `{method}`"))),
        }
    }

    /// Keep what a notification says.
    fn heard(&self, method: &str, params: Value) {
        let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        match method {
            "textDocument/publishDiagnostics" => {
                let Some(uri) = params["uri"].as_str() else {
                    return;
                };
                if heard.diagnostics.len() >= MAX_HEARD_DOCUMENTS
                    && !heard.diagnostics.contains_key(uri)
                {
                    return;
                }
                let entry = heard
                    .diagnostics
                    .entry(uri.to_string())
                    .or_insert((0, Value::Array(Vec::new())));
                entry.0 += 1;
                entry.1 = params
                    .get("diagnostics")
                    .cloned()
                    .unwrap_or(Value::Array(Vec::new()));
            }
            "$/progress" => {
                let token = match &params["token"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                match params["value"]["kind"].as_str() {
                    Some("begin") if heard.progress.len() < MAX_PROGRESS_TOKENS => {
                        heard.progress.insert(token);
                    }
                    Some("end") => {
                        heard.progress.remove(&token);
                    }
                    _ => return,
                }
            }
            "experimental/serverStatus" => {
                heard.quiescent = params["quiescent"].as_bool();
            }
            "window/logMessage" | "window/showMessage" => {
                tracing::debug!(server = %self.name, "language server: {}", params["message"]);
                return;
            }
            _ => return,
        }
        drop(heard);
        self.news.send_modify(|n| *n += 1);
    }
}

/// What toolgate tells servers it can do: the queries the `lsp` seam
/// forwards, pushed diagnostics, work-done progress, and rust-analyzer's
/// server status.
fn capabilities() -> lsp_types::ClientCapabilities {
    use lsp_types::*;
    let dynamic = Some(false);
    let markup = Some(vec![MarkupKind::Markdown, MarkupKind::PlainText]);
    ClientCapabilities {
        workspace: Some(WorkspaceClientCapabilities {
            configuration: Some(true),
            workspace_folders: Some(true),
            symbol: Some(WorkspaceSymbolClientCapabilities::default()),
            ..Default::default()
        }),
        text_document: Some(TextDocumentClientCapabilities {
            synchronization: Some(TextDocumentSyncClientCapabilities {
                did_save: Some(true),
                dynamic_registration: dynamic,
                ..Default::default()
            }),
            hover: Some(HoverClientCapabilities {
                content_format: markup,
                dynamic_registration: dynamic,
            }),
            definition: Some(GotoCapability {
                link_support: Some(true),
                dynamic_registration: dynamic,
            }),
            declaration: Some(GotoCapability {
                link_support: Some(true),
                dynamic_registration: dynamic,
            }),
            type_definition: Some(GotoCapability {
                link_support: Some(true),
                dynamic_registration: dynamic,
            }),
            implementation: Some(GotoCapability {
                link_support: Some(true),
                dynamic_registration: dynamic,
            }),
            references: Some(DynamicRegistrationClientCapabilities {
                dynamic_registration: dynamic,
            }),
            document_symbol: Some(DocumentSymbolClientCapabilities {
                hierarchical_document_symbol_support: Some(true),
                ..Default::default()
            }),
            rename: Some(RenameClientCapabilities {
                prepare_support: Some(true),
                ..Default::default()
            }),
            call_hierarchy: Some(CallHierarchyClientCapabilities {
                dynamic_registration: dynamic,
            }),
            publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                related_information: Some(true),
                version_support: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }),
        window: Some(WindowClientCapabilities {
            work_done_progress: Some(true),
            ..Default::default()
        }),
        experimental: Some(json!({"serverStatusNotification": true})),
        ..Default::default()
    }
}

/// Read the server's messages until its output ends.
async fn read_loop(server: Weak<Server>, stdout: tokio::process::ChildStdout) {
    let mut reader = tokio::io::BufReader::new(stdout);
    let why = loop {
        let message = match read_message(&mut reader).await {
            Ok(Some(m)) => m,
            Ok(None) => {
                // Most likely it is exiting: let the waiter say how (its
                // status, its stderr), else end it here.
                let Some(server) = server.upgrade() else {
                    return;
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), server.wait_ended()).await;
                break "the language server closed its output".to_string();
            }
            Err(e) => break e.to_string(),
        };
        let Some(server) = server.upgrade() else {
            return;
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").filter(|id| !id.is_null()).cloned();
        match (method, id) {
            (None, Some(id)) => {
                let Some(id) = id.as_i64() else { continue };
                let tx = server
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                if let Some(tx) = tx {
                    let reply = match message.get("error") {
                        Some(e) => Err(ServerError::Answered {
                            code: e["code"].as_i64().unwrap_or(0),
                            message: e["message"].as_str().unwrap_or("").to_string(),
                        }),
                        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                    };
                    let _ = tx.send(reply);
                }
            }
            (Some(method), Some(id)) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                let reply = match server.answer(method, &params) {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err((code, text)) => json!({
                        "jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text},
                    }),
                };
                let _ = server.send(reply).await;
            }
            (Some(method), None) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                server.heard(method, params);
            }
            (None, None) => {}
        }
    };
    if let Some(server) = server.upgrade() {
        tracing::info!(server = %server.name, root = %server.root.display(), "language server stopped: {why}");
        server.end(why);
    }
}

/// Keep the tail of a server's stderr (logged at debug level).
async fn keep_stderr(
    name: Arc<str>,
    mut pipe: tokio::process::ChildStderr,
    tail: Arc<Mutex<String>>,
) {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 4096];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        tracing::debug!(server = %name, "language server stderr: {}", text.trim_end());
        let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
        t.push_str(&text);
        if t.len() > STDERR_TAIL {
            let mut cut = t.len() - STDERR_TAIL;
            while !t.is_char_boundary(cut) {
                cut += 1;
            }
            t.drain(..cut);
        }
    }
}

/// `file://` URL of a path.
pub fn file_uri(path: &Path) -> Option<String> {
    url::Url::from_file_path(path).ok().map(|u| u.to_string())
}
