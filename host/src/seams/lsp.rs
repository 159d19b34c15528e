//! The `lsp` seam: a component's questions to the language servers the
//! host runs ([`crate::lsp`]) about files in its preopened grants.
//!
//! What the component may reach is what it could read itself: the file is
//! opened beneath its grant (as `bulk-read` opens it: no `..`, no symlink
//! out, the host's secrets refused), the project root is looked for no
//! higher than that grant, and the server sees the project read-only. It
//! may only *ask*: the methods are a fixed list of queries (no
//! `workspace/executeCommand`, no `shutdown`), a rename's edit comes back
//! as data, and a server asking the host to apply an edit is refused.
//!
//! Paths cross here: the component names files by guest path, the server
//! by host `file://` URI. [`to_host`] turns the guest paths in `params`
//! into URIs (refusing one outside the grants), [`to_guest`] the URIs of
//! an answer into guest paths.
//!
//! The seam as a unit (see [`crate::seams`]): granted with a preopened
//! `fs` grant (as `bulk-read`), host-wide state the [`LspService`] (in
//! [`super::HostSeams::lsp`], set at start), the 0.2 `lsp` interface on
//! [`LspView`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use wasmtime::component::HasData;

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::lsp as wit;
use crate::grants::{Capability, FsGrant, Grants};
use crate::lsp::server::file_uri;
use crate::lsp::{LspError, LspService, ServerError, find_root};

/// The methods a component may send: queries only.
pub const METHODS: &[&str] = &[
    "textDocument/definition",
    "textDocument/declaration",
    "textDocument/typeDefinition",
    "textDocument/implementation",
    "textDocument/references",
    "textDocument/hover",
    "textDocument/documentSymbol",
    "textDocument/documentHighlight",
    "textDocument/signatureHelp",
    "textDocument/prepareRename",
    "textDocument/rename",
    "textDocument/prepareCallHierarchy",
    "callHierarchy/incomingCalls",
    "callHierarchy/outgoingCalls",
    "workspace/symbol",
];

/// The largest `params`: 1 MiB.
pub const MAX_PARAMS_BYTES: usize = 1 << 20;
/// The largest answer returned: 16 MiB.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;
/// The largest file sent to a server: 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// A request's wait when the component gives none: 30 s.
pub const DEFAULT_REQUEST_MS: u32 = 30_000;
/// `diagnostics`' wait when the component gives none: 10 s.
pub const DEFAULT_DIAGNOSTICS_MS: u32 = 10_000;
/// The longest wait of either: 120 s (a cold server indexing included).
pub const MAX_WAIT_MS: u32 = 120_000;

/// The `lsp` seam: granted with a preopened `fs` grant.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "lsp",
        // Questions about files the component can read.
        capability: Capability::FileSystem,
        sync: false,
        granted: super::files::preopen_granted,
        link: |linker| {
            wit::add_to_linker::<T, LspView<'static>>(linker, |t| LspView::new(t.seams()))
        },
    }
}

/// Where the service is set at start, once.
pub type LspSlot = Arc<OnceLock<Arc<LspService>>>;

/// What the `lsp` interface sees of a store: the plugin's grants and the
/// service.
pub struct LspView<'a> {
    plugin: &'a str,
    grants: &'a Grants,
    service: Option<&'a Arc<LspService>>,
}

impl<'a> LspView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        LspView {
            plugin: ctx.plugin,
            grants: ctx.grants,
            service: ctx.shared.lsp.get(),
        }
    }
}

impl HasData for LspView<'static> {
    type Data<'a> = LspView<'a>;
}

impl From<LspError> for wit::LspError {
    fn from(e: LspError) -> Self {
        match e {
            LspError::NotConfigured(m) => wit::LspError::NotConfigured(m),
            LspError::Refused(m) => wit::LspError::Refused(m),
            LspError::Server(m) => wit::LspError::Server(m),
            LspError::Timeout(m) => wit::LspError::Timeout(m),
            LspError::InvalidRequest(m) => wit::LspError::InvalidRequest(m),
        }
    }
}

fn server_error(name: &str, e: ServerError) -> LspError {
    match e {
        ServerError::Timeout(ms) => LspError::Timeout(format!(
            "the language server `{name}` did not answer within {ms} ms"
        )),
        other => LspError::Server(format!("language server `{name}`: {other}")),
    }
}

/// A file a question is about: where it is, what it holds now, its
/// server and project.
struct Asked {
    uri: String,
    server: Arc<crate::lsp::Server>,
    name: Arc<str>,
    /// Diagnostics published for it before it was synced; whether it was.
    published: (u64, bool),
}

impl LspView<'_> {
    fn service(&self) -> Result<&Arc<LspService>, LspError> {
        self.service.ok_or_else(|| {
            LspError::NotConfigured("this host runs no language servers (it was built without the `lsp` seam's service)".into())
        })
    }

    /// Read `file` beneath the grant, start (or find) its server, send it
    /// the file as it is now.
    async fn open(&self, file: &str, deadline: Instant) -> Result<Asked, LspError> {
        let service = self.service()?;
        let (grant, host) =
            super::files::readable_host_path(&self.grants.fs, file).map_err(LspError::Refused)?;
        let (spec, language) = service.spec_for(&host)?;
        let fs = self.grants.fs.clone();
        let hidden = self.grants.sandbox.hidden.clone();
        let path = file.to_string();
        let mut read = tokio::task::spawn_blocking(move || {
            super::files::read(&fs, &hidden, &[path], MAX_FILE_BYTES, MAX_FILE_BYTES)
        })
        .await
        .map_err(|e| LspError::Server(format!("reading `{file}`: {e}")))?;
        let bytes = read
            .pop()
            .expect("one path, one result")
            .map_err(LspError::Refused)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| LspError::InvalidRequest(format!("`{file}` is not UTF-8 text")))?;
        let root = find_root(&host, &grant.host, &spec.root_markers);
        let root = root.canonicalize().unwrap_or(root);
        if !root.starts_with(&grant.host) {
            return Err(LspError::Refused(format!(
                "`{file}`'s project leads out of the grant"
            )));
        }
        let uri = file_uri(&host)
            .ok_or_else(|| LspError::InvalidRequest(format!("`{file}` has no file URI")))?;
        let name = spec.name.clone();
        let server = service.server(spec, &root, deadline).await?;
        let published = server
            .sync(&uri, &language, text)
            .await
            .map_err(|e| server_error(&name, e))?;
        tracing::debug!(plugin = %self.plugin, server = %name, root = %root.display(), file, "lsp: file synced");
        Ok(Asked {
            uri,
            server,
            name,
            published,
        })
    }
}

fn deadline(ms: u32, default: u32) -> Instant {
    let ms = if ms == 0 {
        default
    } else {
        ms.min(MAX_WAIT_MS)
    };
    Instant::now() + Duration::from_millis(ms.into())
}

impl wit::Host for LspView<'_> {
    async fn request(
        &mut self,
        file: String,
        method: String,
        params: String,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<String, wit::LspError>> {
        Ok(self
            .ask(&file, &method, &params, timeout_ms)
            .await
            .map_err(Into::into))
    }

    async fn diagnostics(
        &mut self,
        file: String,
        wait_ms: u32,
    ) -> wasmtime::Result<Result<String, wit::LspError>> {
        let deadline = deadline(wait_ms, DEFAULT_DIAGNOSTICS_MS);
        let found = async {
            let asked = self.open(&file, deadline).await?;
            let (before, sent) = asked.published;
            // Unchanged since the last question: what it published is
            // current, if it published anything.
            let after = if sent {
                before
            } else {
                before.saturating_sub(1)
            };
            let found = asked.server.diagnostics(&asked.uri, after, deadline).await;
            if let Some(why) = asked.server.ended() {
                // Ended while waiting: what it had published is not an
                // answer about the file as it is.
                return Err(LspError::Server(format!(
                    "language server `{}`: {why}",
                    asked.name
                )));
            }
            let found = to_guest(found, &self.grants.fs);
            Ok::<_, LspError>(found.to_string())
        }
        .await;
        Ok(found.map_err(Into::into))
    }
}

impl LspView<'_> {
    async fn ask(
        &self,
        file: &str,
        method: &str,
        params: &str,
        timeout_ms: u32,
    ) -> Result<String, LspError> {
        if !METHODS.contains(&method) {
            return Err(LspError::Refused(format!(
                "`{method}` is not a method a component may send; these are: {}",
                METHODS.join(", ")
            )));
        }
        if params.len() > MAX_PARAMS_BYTES {
            return Err(LspError::InvalidRequest(format!(
                "`params` holds {} bytes, more than {MAX_PARAMS_BYTES}",
                params.len()
            )));
        }
        let params: Value = if params.trim().is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_str(params)
                .map_err(|e| LspError::InvalidRequest(format!("`params` is not JSON: {e}")))?
        };
        if !params.is_object() {
            return Err(LspError::InvalidRequest(
                "`params` must be a JSON object".into(),
            ));
        }
        let mut params = to_host(params, &self.grants.fs).map_err(LspError::Refused)?;
        let deadline = deadline(timeout_ms, DEFAULT_REQUEST_MS);
        let asked = self.open(file, deadline).await?;
        if method.starts_with("textDocument/") {
            params["textDocument"] = serde_json::json!({ "uri": asked.uri });
        }
        // A server still loading the project answers "nothing found":
        // wait (within the deadline) until it says it is done.
        asked.server.settled(deadline).await;
        let answer = asked
            .server
            .request(method, params, deadline)
            .await
            .map_err(|e| server_error(&asked.name, e))?;
        let answer = to_guest(answer, &self.grants.fs).to_string();
        if answer.len() > MAX_ANSWER_BYTES {
            return Err(LspError::Server(format!(
                "the answer holds {} bytes, more than {MAX_ANSWER_BYTES}; ask about less",
                answer.len()
            )));
        }
        tracing::debug!(plugin = %self.plugin, server = %asked.name, method, bytes = answer.len(), "lsp: answered");
        Ok(answer)
    }
}

/// The guest path of a host path in one of the preopened `grants`.
fn guest_path(host: &Path, grants: &[FsGrant]) -> Option<String> {
    let (g, rest) = grants
        .iter()
        .filter(|g| g.preopen)
        .find_map(|g| host.strip_prefix(&g.host).ok().map(|r| (g, r)))?;
    Some(if g.guest.is_empty() || g.guest == "." {
        rest.to_string_lossy().into_owned()
    } else {
        Path::new(&g.guest)
            .join(rest)
            .to_string_lossy()
            .into_owned()
    })
}

/// `file://` URIs (values and keys) lying in a preopened grant, as the
/// guest paths the component would open; other URIs as they were.
pub fn to_guest(value: Value, grants: &[FsGrant]) -> Value {
    let convert = |s: String| -> String {
        if !s.starts_with("file://") {
            return s;
        }
        url::Url::parse(&s)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .and_then(|p| guest_path(&p, grants))
            .unwrap_or(s)
    };
    match value {
        Value::String(s) => Value::String(convert(s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| to_guest(v, grants)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (convert(k), to_guest(v, grants)))
                .collect(),
        ),
        other => other,
    }
}

/// The guest paths of `params` (strings under `uri` or `…Uri` keys) as
/// the server's `file://` URIs; `Err` names a path outside the preopened
/// grants. A `file://` URI there (handed back from an answer) must lie in
/// them too; any other URI is refused.
fn host_uri(s: &str, grants: &[FsGrant]) -> Result<String, String> {
    if s.contains("://") {
        let inside = s.starts_with("file://")
            && url::Url::parse(s)
                .ok()
                .and_then(|u| u.to_file_path().ok())
                .is_some_and(|p| {
                    !p.components().any(|c| c == std::path::Component::ParentDir)
                        && guest_path(&p, grants).is_some()
                });
        return if inside {
            Ok(s.to_string())
        } else {
            Err(format!(
                "`{s}` is not a file in this plugin's preopened grants"
            ))
        };
    }
    let (_, host): (_, PathBuf) = super::files::readable_host_path(grants, s)?;
    file_uri(&host).ok_or_else(|| format!("`{s}` has no file URI"))
}

/// The guest paths of `params` (see [`host_uri`]).
pub fn to_host(value: Value, grants: &[FsGrant]) -> Result<Value, String> {
    match value {
        Value::Array(a) => a
            .into_iter()
            .map(|v| to_host(v, grants))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, v) in o {
                let v = match v {
                    Value::String(s) if k == "uri" || k.ends_with("Uri") => {
                        Value::String(host_uri(&s, grants)?)
                    }
                    v => to_host(v, grants)?,
                };
                out.insert(k, v);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grants() -> Vec<FsGrant> {
        vec![
            FsGrant {
                host: "/host/proj".into(),
                guest: ".".into(),
                writable: false,
                preopen: true,
            },
            FsGrant {
                host: "/host/lib".into(),
                guest: "/lib".into(),
                writable: false,
                preopen: true,
            },
            FsGrant {
                host: "/host/hidden".into(),
                guest: "/spawn".into(),
                writable: true,
                preopen: false,
            },
        ]
    }

    #[test]
    fn uris_of_an_answer_become_guest_paths_in_values_and_keys() {
        let answer = json!({
            "changes": {
                "file:///host/proj/src/a.rs": [{"newText": "x"}],
                "file:///host/lib/b%20c.rs": [],
            },
            "uri": "file:///host/hidden/secret.rs",
            "other": "file:///usr/lib/rustlib/src/lib.rs",
            "text": "not a uri",
        });
        let got = to_guest(answer, &grants());
        assert_eq!(got["changes"]["src/a.rs"][0]["newText"], "x");
        assert!(got["changes"].get("/lib/b c.rs").is_some(), "{got}");
        // Not preopened: not the component's, left as the server wrote it.
        assert_eq!(got["uri"], "file:///host/hidden/secret.rs");
        assert_eq!(got["other"], "file:///usr/lib/rustlib/src/lib.rs");
        assert_eq!(got["text"], "not a uri");
    }

    #[test]
    fn guest_paths_in_params_become_uris_and_paths_outside_are_refused() {
        let params =
            json!({"item": {"uri": "src/a.rs", "targetUri": "/lib/x.rs", "name": "src/a.rs"}});
        let got = to_host(params, &grants()).unwrap();
        assert_eq!(got["item"]["uri"], "file:///host/proj/src/a.rs");
        assert_eq!(got["item"]["targetUri"], "file:///host/lib/x.rs");
        assert_eq!(got["item"]["name"], "src/a.rs");
        let back = to_host(json!({"uri": "file:///host/proj/src/a.rs"}), &grants()).unwrap();
        assert_eq!(back["uri"], "file:///host/proj/src/a.rs");
        for bad in [
            "../etc/passwd",
            "/spawn/x.rs",
            "/etc/passwd",
            "file:///etc/passwd",
            "file:///host/hidden/x.rs",
            "https://example.com/",
        ] {
            let e = to_host(json!({"uri": bad}), &grants()).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
    }
}
