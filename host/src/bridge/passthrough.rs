//! Bridged servers' resources and prompts, passed through by `toolgate serve`.
//!
//! Gateways people run in front of their MCP servers pass more than tools
//! through; so does this one: `resources/list`, `resources/templates/list`,
//! `resources/read`, `prompts/list` and `prompts/get` of every connected
//! server that offers them, asked live (a listing here is the server's own,
//! not a generation: resources come and go on the server's schedule and no
//! call keeps one).
//!
//! * **Names.** Prompts are named as tools are (`mcp__NAME__PROMPT`,
//!   sanitized the same way); resource URIs become
//!   `toolgate-mcp://NAME/RAW` with the raw URI verbatim, and templates get
//!   the same literal prefix, so an expanded template is a namespaced URI
//!   too ([`super::names`]). A server with `namespace = false` keeps its
//!   own names; a request for a name that is not namespaced goes to the one
//!   such server whose last listing has it.
//! * **Who sees what.** The caller passes which servers its scope may see
//!   (`visible`): `toolgate serve` shows a scope the servers of the tools
//!   it sees (`toolgate_mcp::server`). A server not visible is not listed,
//!   and its names are "not found", as if it were not configured.
//! * **Bounds.** A listing is read page by page under the same bounds as
//!   `tools/list` ([`Budgets::max_listing_pages`], its items under
//!   [`Budgets::max_listing_tools`] and [`Budgets::max_listing_bytes`]); a
//!   server past one is left out of the answer (logged), the others are
//!   served. A read or a prompt is refused when its contents or messages
//!   exceed [`Budgets::max_content_blocks`] or, as JSON,
//!   [`Budgets::max_content_bytes`]. Every request has the server's call
//!   deadline (`timeout_ms`, else `default_tool_timeout_ms`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    Cursor, GetPromptRequestParams, GetPromptResponse, GetPromptResult, JsonObject,
    PaginatedRequestParams, Prompt, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use rmcp::service::{Peer, RoleClient, ServiceError};

use super::names::{self, name_in, raw_of, resource_uri, split_resource_uri};
use super::{Bridge, Server};
use crate::budgets::Budgets;

/// Why a pass-through request failed.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// No visible server has that resource or prompt.
    #[error("{0}")]
    NotFound(String),
    /// The server is not connected, did not answer in time, or the
    /// connection failed.
    #[error("{0}")]
    Server(String),
    /// The server answered with a JSON-RPC error: passed on with its code.
    #[error("{message}")]
    Refused {
        code: rmcp::model::ErrorCode,
        message: String,
    },
    /// The answer was larger than the host accepts.
    #[error("{0}")]
    TooLarge(String),
}

/// What a server listed last: how requests for names that are not
/// namespaced, or were sanitized, find their server and raw name.
#[derive(Default)]
pub(super) struct Offers {
    /// Raw resource URIs.
    resources: Vec<String>,
    /// The literal prefix of each raw template (up to its first `{`).
    templates: Vec<String>,
    /// Prompts: (public name, raw name).
    prompts: Vec<(String, String)>,
}

/// Which servers a caller may see, by name.
pub type Visible<'a> = &'a (dyn Fn(&str) -> bool + Sync);

impl Server {
    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .filter(|s| !s.closed.is_cancelled())
            .map(|s| s.peer.clone())
    }

    fn offers(&self) -> std::sync::MutexGuard<'_, Offers> {
        self.offers.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn namespaced(&self) -> bool {
        self.config.is_namespaced()
    }

    fn deadline(&self) -> Duration {
        self.config
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into()))
            .unwrap_or(self.context.budgets.default_tool_timeout)
    }

    /// The peer if connected and offering resources (or prompts).
    fn offering(&self, prompts: bool) -> Option<Peer<RoleClient>> {
        let peer = self.peer()?;
        let caps = peer.peer_info()?.capabilities.clone();
        let offers = if prompts {
            caps.prompts.is_some()
        } else {
            caps.resources.is_some()
        };
        offers.then_some(peer)
    }

    /// `f` within the server's call deadline.
    async fn within<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, String>>,
    ) -> Result<T, String> {
        let deadline = self.deadline();
        tokio::time::timeout(deadline, f).await.unwrap_or_else(|_| {
            Err(format!(
                "the MCP server `{}` did not answer {what} within {} ms",
                self.name,
                deadline.as_millis()
            ))
        })
    }

    /// One request to the server, within its call deadline. A JSON-RPC
    /// error it answers keeps its code ([`PassError::Refused`]).
    async fn ask<T>(
        &self,
        what: &str,
        f: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, PassError> {
        let deadline = self.deadline();
        match tokio::time::timeout(deadline, f).await {
            Err(_) => Err(PassError::Server(format!(
                "the MCP server `{}` did not answer {what} within {} ms",
                self.name,
                deadline.as_millis()
            ))),
            Ok(Err(ServiceError::McpError(e))) => Err(PassError::Refused {
                code: e.code,
                message: format!("the MCP server `{}`: {}", self.name, e.message),
            }),
            Ok(Err(e)) => Err(PassError::Server(format!(
                "the MCP server `{}` failed {what}: {e}",
                self.name
            ))),
            Ok(Ok(t)) => Ok(t),
        }
    }
}

/// What [`Bridge::list_each`] lists: the method, its words in a log
/// line, one page of it from a peer, what the server offers (kept for
/// routing), and the item under its public name.
struct Listing<P, K, R> {
    method: &'static str,
    what: &'static str,
    page: P,
    keep: K,
    rename: R,
}

/// Every page of a listing, bounded as `tools/list` is (see the module
/// documentation); `what` names it in errors.
async fn list_bounded<T, F, Fut>(what: &str, budgets: &Budgets, page: F) -> Result<Vec<T>, String>
where
    T: serde::Serialize,
    F: Fn(Option<PaginatedRequestParams>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<Cursor>), ServiceError>>,
{
    let mut items = Vec::new();
    let mut bytes = 0usize;
    let mut cursor: Option<Cursor> = None;
    for n in 1.. {
        if n > budgets.max_listing_pages {
            return Err(format!(
                "{what} was cut off: more than {} pages (`max_listing_pages`)",
                budgets.max_listing_pages
            ));
        }
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let (got, next) = page(params)
            .await
            .map_err(|e| format!("{what} failed: {e}"))?;
        for item in got {
            bytes = bytes.saturating_add(serde_json::to_vec(&item).map_or(usize::MAX, |v| v.len()));
            if bytes > budgets.max_listing_bytes || items.len() >= budgets.max_listing_tools {
                return Err(format!(
                    "{what} was cut off: more than {} items or {} bytes (`max_listing_tools`, \
                     `max_listing_bytes`)",
                    budgets.max_listing_tools, budgets.max_listing_bytes
                ));
            }
            items.push(item);
        }
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    Ok(items)
}

/// The literal prefix of a URI template (what every expansion starts with).
fn literal_prefix(template: &str) -> &str {
    template.split('{').next().unwrap_or("")
}

/// Refuse what exceeds the content budgets: `count` items, `value` as JSON.
fn bounded<T: serde::Serialize>(
    what: &str,
    count: usize,
    value: &T,
    budgets: &Budgets,
) -> Result<(), PassError> {
    if count > budgets.max_content_blocks {
        return Err(PassError::TooLarge(format!(
            "{what} has {count} parts, more than the host passes on ({}, `[limits] max_content_blocks`)",
            budgets.max_content_blocks
        )));
    }
    let bytes = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
    if bytes > budgets.max_content_bytes {
        return Err(PassError::TooLarge(format!(
            "{what} is {bytes} bytes, more than the host passes on ({}, `[limits] max_content_bytes`)",
            budgets.max_content_bytes
        )));
    }
    Ok(())
}

/// A resource read: what was asked, of whom, and the answer (its contents'
/// URIs in their public form).
pub struct Read {
    pub server: String,
    /// The URI as the server knows it.
    pub raw_uri: String,
    pub result: ReadResourceResult,
    /// Bytes of the contents (text as UTF-8, blobs as base64).
    pub bytes: usize,
}

impl Bridge {
    fn visible_servers<'a>(
        &'a self,
        visible: Visible<'a>,
    ) -> impl Iterator<Item = &'a Arc<Server>> + 'a {
        self.servers.iter().filter(move |s| visible(&s.name))
    }

    /// Whether any configured server may offer resources or prompts.
    pub fn passes_through(&self) -> bool {
        !self.servers.is_empty()
    }

    /// `resources/list` of every visible server, namespaced.
    pub async fn resources(&self, visible: Visible<'_>) -> Vec<Resource> {
        self.list_each(
            visible,
            Listing {
                method: "resources/list",
                what: "resources",
                page: |peer: Peer<RoleClient>, p| async move {
                    let r = peer.list_resources(p).await?;
                    Ok((r.resources, r.next_cursor))
                },
                keep: |offers: &mut Offers, listed: &[Resource]| {
                    offers.resources = listed.iter().map(|r| r.uri.clone()).collect();
                },
                rename: |server: &str, ns: bool, mut r: Resource| {
                    r.uri = resource_uri(server, &r.uri, ns);
                    r
                },
            },
        )
        .await
    }

    /// `resources/templates/list` of every visible server, namespaced.
    pub async fn resource_templates(&self, visible: Visible<'_>) -> Vec<ResourceTemplate> {
        self.list_each(
            visible,
            Listing {
                method: "resources/templates/list",
                what: "resource templates",
                page: |peer: Peer<RoleClient>, p| async move {
                    let r = peer.list_resource_templates(p).await?;
                    Ok((r.resource_templates, r.next_cursor))
                },
                keep: |offers: &mut Offers, listed: &[ResourceTemplate]| {
                    offers.templates = listed
                        .iter()
                        .map(|t| literal_prefix(&t.uri_template).to_string())
                        .collect();
                },
                rename: |server: &str, ns: bool, mut t: ResourceTemplate| {
                    t.uri_template = resource_uri(server, &t.uri_template, ns);
                    t
                },
            },
        )
        .await
    }

    /// One listing of every visible server that offers resources, each
    /// bounded and under its deadline; a server that fails is left out
    /// (and logged).
    async fn list_each<T, P, Fut, K, R>(
        &self,
        visible: Visible<'_>,
        listing: Listing<P, K, R>,
    ) -> Vec<T>
    where
        T: serde::Serialize,
        P: Fn(Peer<RoleClient>, Option<PaginatedRequestParams>) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, Option<Cursor>), ServiceError>>,
        K: Fn(&mut Offers, &[T]),
        R: Fn(&str, bool, T) -> T,
    {
        let listing = &listing;
        let all = self.visible_servers(visible).map(|s| async move {
            let peer = s.offering(false)?;
            let budgets = &s.context.budgets;
            let listed = s
                .within(
                    listing.method,
                    list_bounded(listing.method, budgets, |p| (listing.page)(peer.clone(), p)),
                )
                .await;
            let listed = match listed {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(server = %s.name, "{} are not passed on: {}", listing.what, crate::plugin::log::escape(&e));
                    return None;
                }
            };
            (listing.keep)(&mut s.offers(), &listed);
            let ns = s.namespaced();
            Some(
                listed
                    .into_iter()
                    .map(|item| (listing.rename)(&s.name, ns, item))
                    .collect::<Vec<_>>(),
            )
        });
        futures::future::join_all(all)
            .await
            .into_iter()
            .flatten()
            .flatten()
            .collect()
    }

    /// The server a public URI belongs to, and the URI as it knows it.
    fn route_uri<'a>(
        &'a self,
        uri: &'a str,
        visible: Visible<'_>,
    ) -> Option<(&'a Arc<Server>, &'a str)> {
        if let Some((server, raw)) = split_resource_uri(uri) {
            return self
                .servers
                .iter()
                .find(|s| s.name == server && s.namespaced() && visible(&s.name))
                .map(|s| (s, raw))
                .or_else(|| {
                    // A kept URI that starts with the scheme is namespaced
                    // even for a server with `namespace = false`.
                    self.servers
                        .iter()
                        .find(|s| s.name == server && visible(&s.name))
                        .filter(|_| raw.starts_with(names::RESOURCE_SCHEME))
                        .map(|s| (s, raw))
                });
        }
        self.servers
            .iter()
            .filter(|s| !s.namespaced() && visible(&s.name))
            .find(|s| {
                let o = s.offers();
                o.resources.iter().any(|r| r == uri)
                    || o.templates
                        .iter()
                        .any(|p| !p.is_empty() && uri.starts_with(p.as_str()))
            })
            .map(|s| (s, uri))
    }

    /// `resources/read` of a public URI.
    pub async fn read_resource(&self, uri: &str, visible: Visible<'_>) -> Result<Read, PassError> {
        let not_found = || PassError::NotFound(format!("no MCP server offers the resource {uri}"));
        if self.route_uri(uri, visible).is_none() && split_resource_uri(uri).is_none() {
            // A kept URI not listed yet: list, then look again.
            futures::future::join(self.resources(visible), self.resource_templates(visible)).await;
        }
        let (server, raw) = self.route_uri(uri, visible).ok_or_else(not_found)?;
        let peer = server.offering(false).ok_or_else(|| {
            PassError::Server(format!(
                "the MCP server `{}` is not connected, or offers no resources",
                server.name
            ))
        })?;
        let params = ReadResourceRequestParams::new(raw);
        let response = server
            .ask("resources/read", peer.read_resource_once(params))
            .await?;
        let ReadResourceResponse::Complete(mut result) = response else {
            return Err(PassError::Server(format!(
                "the MCP server `{}` asked for input to read {uri}, which the host does not pass on",
                server.name
            )));
        };
        let budgets = &server.context.budgets;
        bounded(
            &format!("the resource {uri}"),
            result.contents.len(),
            &result,
            budgets,
        )?;
        let ns = server.namespaced();
        let mut bytes = 0usize;
        for c in &mut result.contents {
            let (u, len) = match c {
                ResourceContents::TextResourceContents { uri, text, .. } => (uri, text.len()),
                ResourceContents::BlobResourceContents { uri, blob, .. } => (uri, blob.len()),
                _ => continue,
            };
            bytes = bytes.saturating_add(len);
            *u = resource_uri(&server.name, u, ns);
        }
        Ok(Read {
            server: server.name.clone(),
            raw_uri: raw.to_string(),
            result,
            bytes,
        })
    }

    /// `prompts/list` of every visible server, named as tools are.
    pub async fn prompts(&self, visible: Visible<'_>) -> Vec<Prompt> {
        let all = self.visible_servers(visible).map(|s| async move {
            let peer = s.offering(true)?;
            let budgets = &s.context.budgets;
            let listed = s
                .within(
                    "prompts/list",
                    list_bounded("prompts/list", budgets, |p| {
                        let peer = peer.clone();
                        async move {
                            let r = peer.list_prompts(p).await?;
                            Ok((r.prompts, r.next_cursor))
                        }
                    }),
                )
                .await;
            let listed = match listed {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(server = %s.name, "prompts are not passed on: {}", crate::plugin::log::escape(&e));
                    return None;
                }
            };
            let ns = s.namespaced();
            let mut seen = std::collections::HashSet::new();
            let mut named = Vec::new();
            let mut out = Vec::new();
            for mut p in listed {
                let (public, _) = name_in(&s.name, &p.name, ns);
                if !seen.insert(public.clone()) {
                    tracing::warn!(server = %s.name, prompt = %crate::plugin::log::escape(&p.name), "a prompt whose public name is taken is not passed on");
                    continue;
                }
                named.push((public.clone(), std::mem::replace(&mut p.name, public)));
                out.push(p);
            }
            s.offers().prompts = named;
            Some(out)
        });
        futures::future::join_all(all)
            .await
            .into_iter()
            .flatten()
            .flatten()
            .collect()
    }

    /// The server a public prompt name belongs to, and the name it knows.
    fn route_prompt(&self, name: &str, visible: Visible<'_>) -> Option<(&Arc<Server>, String)> {
        for s in self.servers.iter().filter(|s| visible(&s.name)) {
            if let Some((_, raw)) = s.offers().prompts.iter().find(|(p, _)| p == name) {
                return Some((s, raw.clone()));
            }
            if s.namespaced()
                && let Some(raw) = raw_of(&s.name, name)
            {
                return Some((s, raw.to_string()));
            }
        }
        None
    }

    /// `prompts/get` of a public prompt name.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        visible: Visible<'_>,
    ) -> Result<GetPromptResult, PassError> {
        let not_found = || PassError::NotFound(format!("no MCP server offers the prompt `{name}`"));
        let mut route = self.route_prompt(name, visible);
        if route.is_none() {
            // A sanitized or kept name not listed yet: list, then look again.
            self.prompts(visible).await;
            route = self.route_prompt(name, visible);
        }
        let (server, raw) = route.ok_or_else(not_found)?;
        let peer = server.offering(true).ok_or_else(|| {
            PassError::Server(format!(
                "the MCP server `{}` is not connected, or offers no prompts",
                server.name
            ))
        })?;
        let mut params = GetPromptRequestParams::new(raw);
        params.arguments = arguments;
        let response = server
            .ask("prompts/get", peer.get_prompt_once(params))
            .await?;
        let GetPromptResponse::Complete(result) = response else {
            return Err(PassError::Server(format!(
                "the MCP server `{}` asked for input to get the prompt `{name}`, which the host does not pass on",
                server.name
            )));
        };
        bounded(
            &format!("the prompt `{name}`"),
            result.messages.len(),
            &result,
            &server.context.budgets,
        )?;
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_expands_under_its_literal_prefix() {
        assert_eq!(
            literal_prefix("test://template/{id}/data"),
            "test://template/"
        );
        assert_eq!(literal_prefix("{+path}"), "");
        assert_eq!(literal_prefix("plain://x"), "plain://x");
        let public = resource_uri("srv", "test://template/{id}/data", true);
        let expanded = public.replace("{id}", "123");
        assert_eq!(
            split_resource_uri(&expanded),
            Some(("srv", "test://template/123/data"))
        );
    }

    #[test]
    fn oversized_answers_are_refused_naming_the_limit() {
        let budgets = Budgets {
            max_content_blocks: 2,
            max_content_bytes: 64,
            ..Budgets::default()
        };
        let e = bounded("x", 3, &"", &budgets).unwrap_err().to_string();
        assert!(e.contains("max_content_blocks"), "{e}");
        let e = bounded("x", 1, &"y".repeat(100), &budgets)
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_content_bytes"), "{e}");
        assert!(bounded("x", 1, &"y", &budgets).is_ok());
    }
}
