//! Bridged servers that cannot change under you: each tool's definition is
//! pinned the first time it is seen (trust on first use), and a later
//! change of it — its description, schemas, annotations, title — is a
//! refused update until the operator accepts it.
//!
//! Why: a bridged server is third-party code that can change its tools'
//! descriptions at any listing (a "rug pull"), and a description is what
//! the model reads as instructions ("tool poisoning"). The host does not
//! serve a definition the operator never saw: a changed tool is *withheld*
//! — not listed, not callable — its siblings go on, and the reason is in
//! the server's status (`toolgate plugins`) and the log.
//!
//! The pins are in the state store ([`crate::store`]: the embedded file, or
//! Redis shared by replicas), in a namespace no plugin can name
//! ([`NAMESPACE`]; plugin names have no `:`), one key per tool: the SHA-256
//! of its definition's JSON as the server sent it. `toolgate bridge accept
//! SERVER [TOOL…]` removes pins ([`accept`]): the running host sees the
//! removal within [`RECHECK`] and pins what the server lists now.
//! `[mcp.servers.NAME] pin = false` turns pinning off for one server.
//!
//! Pins can also be written in the configuration (`[mcp.servers.NAME.pins]
//! TOOL = "SHA256"`, reviewed once and kept with the deployment): such a
//! tool is served only with that definition ([`Verdict`] from
//! [`check_configured`]), and `toolgate bridge accept` cannot change that —
//! the configuration is the authority.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::store::{KvBackend, KvError};

/// The state store's namespace of the pins.
pub const NAMESPACE: &str = "toolgate:bridge-pins";

/// How often a server with withheld tools is listed again, to see whether
/// the operator accepted them.
pub const RECHECK: Duration = Duration::from_secs(2);

/// The digest a tool's definition is pinned by: SHA-256 (hex) of its JSON.
pub fn digest(tool: &rmcp::model::Tool) -> String {
    let json = serde_json::to_vec(tool).unwrap_or_default();
    hex(&Sha256::digest(&json))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the pin says about a tool's definition now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Seen for the first time: pinned now.
    Pinned,
    /// As pinned.
    Same,
    /// Not as pinned: withheld until accepted.
    Changed { pinned: String },
}

/// Check `tool` of `server` (digest `now`) against its pin, pinning it if
/// it has none.
pub async fn check(
    store: &dyn KvBackend,
    server: &str,
    tool: &str,
    now: &str,
) -> Result<Verdict, KvError> {
    match store.get(NAMESPACE, server, tool).await? {
        None => {
            store.set(NAMESPACE, server, tool, now.as_bytes()).await?;
            Ok(Verdict::Pinned)
        }
        Some(pinned) if pinned == now.as_bytes() => Ok(Verdict::Same),
        Some(pinned) => Ok(Verdict::Changed {
            pinned: String::from_utf8_lossy(&pinned).into_owned(),
        }),
    }
}

/// Check a definition (digest `now`) against the pin the configuration
/// writes for it.
pub fn check_configured(pinned: &str, now: &str) -> Verdict {
    if pinned == now {
        Verdict::Same
    } else {
        Verdict::Changed {
            pinned: pinned.to_string(),
        }
    }
}

/// The pins `server` has in the state store: tool → digest.
pub async fn pinned(
    store: &dyn KvBackend,
    server: &str,
) -> Result<std::collections::BTreeMap<String, String>, KvError> {
    let mut out = std::collections::BTreeMap::new();
    for name in store.keys(NAMESPACE, server, "").await? {
        if let Some(digest) = store.get(NAMESPACE, server, &name).await? {
            out.insert(name, String::from_utf8_lossy(&digest).into_owned());
        }
    }
    Ok(out)
}

/// Remove the pins of `tools` of `server` (all its pins when `tools` is
/// empty): their next listing is pinned as it is. The number removed.
pub async fn accept(
    store: &dyn KvBackend,
    server: &str,
    tools: &[String],
) -> Result<usize, KvError> {
    let names = if tools.is_empty() {
        store.keys(NAMESPACE, server, "").await?
    } else {
        tools.to_vec()
    };
    let mut removed = 0;
    for name in names {
        if store.get(NAMESPACE, server, &name).await?.is_some() {
            store.delete(NAMESPACE, server, &name).await?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_use_pins_a_change_is_held_until_accepted() {
        let store = crate::store::sqlite::SqliteKv::memory();
        assert_eq!(
            check(&store, "s", "t", "aa").await.unwrap(),
            Verdict::Pinned
        );
        assert_eq!(check(&store, "s", "t", "aa").await.unwrap(), Verdict::Same);
        assert_eq!(
            check(&store, "s", "t", "bb").await.unwrap(),
            Verdict::Changed {
                pinned: "aa".into()
            }
        );
        // Another server's tool of the same name is its own.
        assert_eq!(
            check(&store, "o", "t", "bb").await.unwrap(),
            Verdict::Pinned
        );
        assert_eq!(accept(&store, "s", &[]).await.unwrap(), 1);
        assert_eq!(
            check(&store, "s", "t", "bb").await.unwrap(),
            Verdict::Pinned
        );
        assert_eq!(accept(&store, "s", &["nope".into()]).await.unwrap(), 0);
    }
}
