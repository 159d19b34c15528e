//! The webhook delegate (`[approval] webhook = URL`): each new pending
//! approval is POSTed there as JSON, so chat-ops (a bot, a pager) can show
//! it to a person; the decision comes back through the console's API
//! (`POST /console/api/decide` with the console token).
//!
//! **Signed.** The receiver must be able to tell toolgate's posts from
//! anyone else's, and an old post from a new one: every request carries
//! `X-Toolgate-Timestamp: <unix seconds>` and
//! `X-Toolgate-Signature: sha256=<hex>`, the HMAC-SHA256 with the key in
//! `[approval] webhook_key_file` (made, owner-only, at the first start when
//! absent) over `<timestamp>.<body>`. A receiver recomputes it, compares
//! in constant time, and refuses a timestamp older than a few minutes (a
//! replayed post). `X-Toolgate-Delivery` is the entry's id.
//!
//! **Never in the call's way.** The webhook reads the queue's event feed
//! ([`ApprovalQueue::subscribe`]) from its own task: a call becomes
//! pending whether or not the post succeeds. Posts wait in a bounded
//! backlog ([`APPROVAL_WEBHOOK_BACKLOG`]; beyond it the newest are dropped
//! and logged), go out one at a time, each bounded by
//! [`APPROVAL_WEBHOOK_TIMEOUT`], with a body of at most
//! [`APPROVAL_WEBHOOK_MAX_BODY_BYTES`] (larger: the arguments and card are
//! replaced by a note — the console shows them), no redirect followed (a
//! redirect could point the signed post anywhere). A failure is logged; the
//! entry stays pending, decidable in the console or the CLI.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::queue::{ApprovalQueue, Event};
use super::store::Entry;
use crate::budgets::{
    APPROVAL_WEBHOOK_BACKLOG, APPROVAL_WEBHOOK_MAX_BODY_BYTES, APPROVAL_WEBHOOK_TIMEOUT,
};

/// The header with the signature.
pub const SIGNATURE_HEADER: &str = "x-toolgate-signature";
/// The header with the time signed (unix seconds).
pub const TIMESTAMP_HEADER: &str = "x-toolgate-timestamp";
/// The header with the entry's id.
pub const DELIVERY_HEADER: &str = "x-toolgate-delivery";
/// The key file's name in the state directory when none is configured.
pub const DEFAULT_KEY_FILE: &str = "approval-webhook-key";

impl From<WebhookError> for crate::error::HostError {
    fn from(e: WebhookError) -> Self {
        crate::error::HostError::Feature(Box::new(e))
    }
}

/// A webhook that cannot be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(
        "`[approval] webhook = {url:?}`: {message} (an http:// or https:// URL the host can reach)"
    )]
    Url { url: String, message: String },
    #[error("`[approval] webhook_key_file` {path}: {message}")]
    Key { path: PathBuf, message: String },
    #[error(
        "`[approval] webhook` needs a key: set `[approval] webhook_key_file` (or TOOLGATE_STATE_DIR, where `{DEFAULT_KEY_FILE}` is made)"
    )]
    NoKeyFile,
    #[error("`[approval] webhook`: the HTTP client cannot be made: {0}")]
    Client(String),
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| -> [u8; BLOCK] { std::array::from_fn(|i| k[i] ^ byte) };
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `X-Toolgate-Signature` value for `body` sent at `timestamp`.
pub fn signature(key: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut signed = format!("{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    format!("sha256={}", hex(&hmac_sha256(key, &signed)))
}

/// What is posted for `entry`: `{"type": "approval.pending", "entry":
/// {...}}` with the entry as the console's API lists it, cut to the cap.
pub fn payload(entry: &Entry) -> Vec<u8> {
    let mut entry_json = entry.to_json();
    let body = |e: &Value| json!({ "type": "approval.pending", "entry": e }).to_string();
    let mut text = body(&entry_json);
    if text.len() > APPROVAL_WEBHOOK_MAX_BODY_BYTES {
        let size = text.len();
        entry_json["arguments"] = json!({
            "toolgate": format!("{size} bytes: too large for the webhook; see the console")
        });
        entry_json["card"] = Value::Null;
        entry_json["reason"] = Value::String(entry.reason.chars().take(512).collect());
        text = body(&entry_json);
    }
    text.into_bytes()
}

/// The webhook as configured: where, and the key.
#[derive(Clone)]
pub struct Webhook {
    url: reqwest::Url,
    key: Arc<[u8]>,
    client: reqwest::Client,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.url.as_str())
            .finish()
    }
}

impl Webhook {
    /// The webhook at `url`, signing with the key in `key_file` (made,
    /// owner-only, when absent).
    pub fn new(url: &str, key_file: &Path) -> Result<Webhook, WebhookError> {
        let bad = |message: String| WebhookError::Url {
            url: url.to_string(),
            message,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(bad("not an http:// or https:// URL with a host".into()));
        }
        let (key, made) =
            crate::state::load_or_create_token(key_file).map_err(|e| WebhookError::Key {
                path: key_file.to_path_buf(),
                message: e.to_string(),
            })?;
        if key.len() < 16 {
            return Err(WebhookError::Key {
                path: key_file.to_path_buf(),
                message: format!(
                    "the key is {} bytes; use at least 16 (or delete the file: a random one is made)",
                    key.len()
                ),
            });
        }
        if made {
            tracing::warn!(path = %key_file.display(), "made the approval webhook's signing key; give it to the receiver");
        }
        crate::tls::ensure();
        let client = reqwest::Client::builder()
            .timeout(APPROVAL_WEBHOOK_TIMEOUT)
            .connect_timeout(APPROVAL_WEBHOOK_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| WebhookError::Client(e.to_string()))?;
        Ok(Webhook {
            url: parsed,
            key: Arc::from(key.into_bytes()),
            client,
        })
    }

    /// Posts every new pending entry of `queue` from now on, in tasks of
    /// their own (they end with the queue's event feed).
    pub fn start(self, queue: &Arc<ApprovalQueue>) {
        let mut events = queue.subscribe();
        // Replicas sharing the queue all hear of every entry; only the one
        // that asked posts it, so the webhook gets each entry once.
        let own = Arc::downgrade(queue);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Entry>(APPROVAL_WEBHOOK_BACKLOG);
        // The feed's reader: never waits on the network.
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(Event::Pending(entry)) => {
                        match own.upgrade() {
                            Some(q) if !q.asked_here(&entry) => continue,
                            None => break,
                            Some(_) => {}
                        }
                        let id = entry.id.clone();
                        if tx.try_send(entry).is_err() {
                            tracing::warn!(
                                id,
                                backlog = APPROVAL_WEBHOOK_BACKLOG,
                                "the approval webhook is behind; this entry is not posted (decide it in the console)"
                            );
                        }
                    }
                    Ok(Event::Ended(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(
                            missed = n,
                            "the approval webhook missed entries (decide them in the console)"
                        );
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        // The poster: one at a time, each bounded.
        tokio::spawn(async move {
            while let Some(entry) = rx.recv().await {
                self.post(&entry).await;
            }
        });
    }

    async fn post(&self, entry: &Entry) {
        let body = payload(entry);
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let sent = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, signature(&self.key, timestamp, &body))
            .header(DELIVERY_HEADER, entry.id.as_str())
            .body(body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {
                tracing::debug!(id = %entry.id, status = %r.status(), "approval posted to the webhook");
            }
            Ok(r) => tracing::warn!(
                id = %entry.id,
                url = %self.url,
                status = %r.status(),
                "the approval webhook refused the post; the entry stays pending"
            ),
            Err(e) => tracing::warn!(
                id = %entry.id,
                url = %self.url,
                error = %e,
                "the approval webhook could not be reached; the entry stays pending"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1, 2 and 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn the_signature_covers_the_timestamp_and_the_body() {
        let s = signature(b"k", 100, b"{}");
        assert!(s.starts_with("sha256=") && s.len() == 7 + 64);
        assert_ne!(s, signature(b"k", 101, b"{}"), "a replay with a new time");
        assert_ne!(s, signature(b"k", 100, b"{ }"), "another body");
        assert_ne!(s, signature(b"l", 100, b"{}"), "another key");
    }

    #[test]
    fn a_huge_entry_is_cut_to_the_cap() {
        let entry = Entry {
            id: "a-1".into(),
            since_ms: 1,
            expires_ms: 2,
            scope: String::new(),
            client: None,
            session: None,
            caller: None,
            tool: "bash".into(),
            arguments: json!({ "command": "x".repeat(APPROVAL_WEBHOOK_MAX_BODY_BYTES) }),
            card: None,
            asked_by: "h".into(),
            reason: "r".repeat(10_000),
            state: super::super::store::EntryState::Pending,
            decided: None,
            replica: None,
            retry: None,
            egress: None,
            questions: None,
        };
        let body = payload(&entry);
        assert!(
            body.len() <= APPROVAL_WEBHOOK_MAX_BODY_BYTES,
            "{}",
            body.len()
        );
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["entry"]["id"], "a-1");
        assert!(
            v["entry"]["arguments"]["toolgate"]
                .as_str()
                .unwrap()
                .contains("too large")
        );
    }

    #[test]
    fn only_http_urls_and_real_keys() {
        let dir = std::env::temp_dir().join(format!("toolgate-webhook-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key");
        assert!(matches!(
            Webhook::new("file:///etc/passwd", &key),
            Err(WebhookError::Url { .. })
        ));
        assert!(matches!(
            Webhook::new("not a url", &key),
            Err(WebhookError::Url { .. })
        ));
        Webhook::new("http://127.0.0.1:9/hook", &key).unwrap();
        let made = std::fs::read_to_string(&key).unwrap();
        assert!(made.trim().len() >= 32, "a random key is made: {made:?}");
        let short = dir.join("short");
        std::fs::write(&short, "abc").unwrap();
        std::fs::set_permissions(&short, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        assert!(matches!(
            Webhook::new("http://127.0.0.1:9/hook", &short),
            Err(WebhookError::Key { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
