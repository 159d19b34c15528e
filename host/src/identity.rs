//! Who is calling: the authenticated caller of a call, and `[auth]`, the
//! OAuth 2.1 authorization server whose access tokens `serve --http`
//! accepts.
//!
//! The server edge (`toolgate_mcp::oauth`) validates a request's access
//! token against `[auth]` and turns it into a [`Caller`]; from there the
//! caller travels with the turn ([`crate::turn::TurnOptions::client`]) into
//! every call's [`crate::CallInfo`] — where policies read it through the
//! call resource's `caller` — and into the audit record's `client.caller`.
//! The host itself decides nothing by identity: who may do what is a
//! policy, as everything else is.
//!
//! A caller is only ever made from a token the server validated: the
//! subject is the token's `sub`, never a name the client chose for itself
//! (its `clientInfo` stays in `client.name`, marked as the client's own
//! word).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_schema::derive::Schema;

use crate::budgets::{AUTH_MAX_CLAIM_BYTES, AUTH_MAX_LEEWAY_SECONDS};
use crate::config::path::Secret;

/// The authenticated caller of a call: what its access token says,
/// validated. Read back from the audit record's `client.caller` by
/// `toolgate replay`, so that policies decide a replayed call for the same
/// caller.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Caller {
    /// The token's `sub`: who the authorization server says is calling.
    pub subject: String,
    /// The token's issuer (`iss`).
    pub issuer: String,
    /// The OAuth client the token was issued to (`client_id`, else
    /// `azp`), if it says.
    pub client_id: Option<String>,
    /// The token's scopes (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
    /// The claims the operator names in `[auth] claims`, as the token has
    /// them (each at most [`AUTH_MAX_CLAIM_BYTES`] of JSON; a larger one is
    /// left out and the fact logged).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub claims: BTreeMap<String, Value>,
    /// The MCP session of the request (`Mcp-Session-Id`), if it is in one:
    /// for policies (the record keeps it as `client.session`).
    #[serde(skip)]
    pub session: Option<String>,
}

impl Caller {
    /// The claims as one JSON object's text (what a policy reads).
    pub fn claims_json(&self) -> String {
        serde_json::to_string(&self.claims).unwrap_or_else(|_| "{}".into())
    }

    /// Whether the caller holds `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

/// The JWS algorithms an access token may be signed with. Asymmetric only:
/// an HMAC algorithm would let anyone holding the authorization server's
/// *public* key mint tokens (the classic key-confusion attack), and `none`
/// signs nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[schema(crate = "toolgate_schema::derive")]
pub enum TokenAlgorithm {
    RS256,
    RS384,
    RS512,
    PS256,
    PS384,
    PS512,
    ES256,
    ES384,
    EdDSA,
}

impl TokenAlgorithm {
    /// The default allow-list: what authorization servers sign with.
    pub const DEFAULT: [TokenAlgorithm; 4] = [
        TokenAlgorithm::RS256,
        TokenAlgorithm::PS256,
        TokenAlgorithm::ES256,
        TokenAlgorithm::EdDSA,
    ];

    /// Its JOSE name.
    pub fn name(self) -> &'static str {
        match self {
            TokenAlgorithm::RS256 => "RS256",
            TokenAlgorithm::RS384 => "RS384",
            TokenAlgorithm::RS512 => "RS512",
            TokenAlgorithm::PS256 => "PS256",
            TokenAlgorithm::PS384 => "PS384",
            TokenAlgorithm::PS512 => "PS512",
            TokenAlgorithm::ES256 => "ES256",
            TokenAlgorithm::ES384 => "ES384",
            TokenAlgorithm::EdDSA => "EdDSA",
        }
    }
}

/// `[auth]` in the configuration: `serve --http` as an OAuth 2.1 resource
/// server (the MCP authorization specification). Absent, the static
/// bearer token of `--token-file` guards `/mcp`, as for one user.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct AuthConfig {
    /// The authorization server's issuer identifier (its `iss`), an
    /// `https://` URL (`http://` only on a loopback address).
    pub issuer: String,
    /// This server's MCP endpoint as its clients reach it (e.g.
    /// `https://tools.example.com/mcp`): the `resource` of its Protected
    /// Resource Metadata, and the audience every token must name (RFC 8707).
    pub resource: String,
    /// Where the issuer's signing keys are. Default: the `jwks_uri` of the
    /// issuer's metadata (RFC 8414, else OpenID Connect discovery).
    pub jwks_uri: Option<String>,
    /// The algorithms a token may be signed with (default `RS256`, `PS256`,
    /// `ES256`, `EdDSA`). Asymmetric only: `HS*` and `none` do not exist here.
    #[serde(default)]
    pub algorithms: Vec<TokenAlgorithm>,
    /// Clock skew allowed on `exp` and `nbf`, in seconds (default 60, at
    /// most [`AUTH_MAX_LEEWAY_SECONDS`]).
    pub leeway_seconds: Option<u64>,
    /// Scopes every token must carry to reach `/mcp` at all (default none);
    /// a token without them gets 403 `insufficient_scope`.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Scopes the metadata document lists for clients to ask for (default:
    /// `required_scopes`).
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Claims of the token passed on to policies and the audit record with
    /// the caller (e.g. `["groups", "email"]`); others are not.
    #[serde(default)]
    pub claims: Vec<String>,
    /// Token introspection (RFC 7662) for tokens that are not JWTs: asked
    /// on every request, so a revoked token stops at once.
    pub introspection: Option<IntrospectionConfig>,
}

/// `[auth.introspection]`: where opaque tokens are checked.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct IntrospectionConfig {
    /// The introspection endpoint (an `https://` URL; `http://` only on a
    /// loopback address).
    pub url: String,
    /// This server's client id at the authorization server.
    pub client_id: String,
    /// The file holding its client secret (sent with HTTP Basic).
    pub client_secret_file: Secret,
}

impl AuthConfig {
    /// The algorithms allowed, the default when none are named.
    pub fn algorithms(&self) -> Vec<TokenAlgorithm> {
        if self.algorithms.is_empty() {
            TokenAlgorithm::DEFAULT.to_vec()
        } else {
            self.algorithms.clone()
        }
    }

    /// `leeway_seconds`, or the default.
    pub fn leeway_seconds(&self) -> u64 {
        self.leeway_seconds
            .unwrap_or(crate::budgets::AUTH_DEFAULT_LEEWAY_SECONDS)
    }

    /// The scopes the metadata lists.
    pub fn scopes_supported(&self) -> &[String] {
        if self.scopes_supported.is_empty() {
            &self.required_scopes
        } else {
            &self.scopes_supported
        }
    }

    /// Problems, each with its key.
    pub fn check(&self, problems: &mut Vec<String>) {
        check_url("/auth/issuer", &self.issuer, problems);
        check_url("/auth/resource", &self.resource, problems);
        if let Ok(url) = url::Url::parse(&self.resource)
            && url.fragment().is_some()
        {
            problems.push(format!(
                "/auth/resource: {:?} has a fragment, which a resource identifier may not (RFC 8707)",
                self.resource
            ));
        }
        if let Some(jwks) = &self.jwks_uri {
            check_url("/auth/jwks_uri", jwks, problems);
        }
        if let Some(i) = &self.introspection {
            check_url("/auth/introspection/url", &i.url, problems);
        }
        if self.leeway_seconds() > AUTH_MAX_LEEWAY_SECONDS {
            problems.push(format!(
                "/auth/leeway_seconds: {} is more than {AUTH_MAX_LEEWAY_SECONDS} seconds of clock skew",
                self.leeway_seconds()
            ));
        }
        for (i, c) in self.claims.iter().enumerate() {
            if c.is_empty() {
                problems.push(format!("/auth/claims/{i}: an empty claim name"));
            }
        }
    }
}

/// `value` is an absolute `https://` URL, or `http://` on a loopback
/// address (a token or its keys in clear text cross nothing else).
fn check_url(at: &str, value: &str, problems: &mut Vec<String>) {
    match url::Url::parse(value) {
        Err(e) => problems.push(format!("{at}: {value:?} is not a URL: {e}")),
        Ok(url) if url.scheme() == "https" => {}
        Ok(url) if url.scheme() == "http" && is_loopback(&url) => {}
        Ok(_) => problems.push(format!(
            "{at}: {value:?} must be https:// (http:// only on a loopback address: tokens and keys would cross the network in clear text)"
        )),
    }
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    }
}

/// `[[access]]` in the configuration: which callers may see and call
/// which tools. A tool no rule names is everyone's; a tool some rule names
/// is for the callers one of those rules lets in, and for no one else —
/// not a call without a caller (stdio, the static token, `run`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct AccessRule {
    /// The tools it covers: names or globs (`terminal_*`, `mcp__github__*`).
    pub tools: Vec<String>,
    /// Callers with one of these subjects (`sub`) are let in.
    #[serde(default)]
    pub subjects: Vec<String>,
    /// Callers holding one of these scopes are let in.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Callers with one of these claims are let in: a claim whose value is
    /// this string, or a list holding it (`{ groups = "ops" }`). The claim
    /// must be one `[auth] claims` passes on.
    #[serde(default)]
    pub claims: BTreeMap<String, String>,
}

/// The `[[access]]` rules, compiled.
#[derive(Clone, Debug, Default)]
pub struct Access {
    rules: Vec<(globset::GlobSet, AccessRule)>,
}

impl Access {
    /// Compile `rules` (checked by [`check_access`] first).
    pub fn new(rules: &[AccessRule]) -> Access {
        Access {
            rules: rules
                .iter()
                .filter_map(|r| Some((glob_set(&r.tools).ok()?, r.clone())))
                .collect(),
        }
    }

    /// Whether there are rules at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// May `caller` see and call `tool`?
    ///
    /// ```
    /// use toolgate::identity::{Access, AccessRule, Caller};
    /// let access = Access::new(&[AccessRule {
    ///     tools: vec!["bash".into()],
    ///     scopes: vec!["ops".into()],
    ///     ..Default::default()
    /// }]);
    /// let ops = Caller { subject: "a".into(), scopes: vec!["ops".into()], ..Default::default() };
    /// let other = Caller { subject: "b".into(), ..Default::default() };
    /// assert!(access.allows("bash", Some(&ops)));
    /// assert!(!access.allows("bash", Some(&other)));
    /// assert!(!access.allows("bash", None));
    /// assert!(access.allows("read", None));
    /// ```
    pub fn allows(&self, tool: &str, caller: Option<&Caller>) -> bool {
        let mut named = false;
        for (tools, rule) in &self.rules {
            if !tools.is_match(tool) {
                continue;
            }
            named = true;
            if caller.is_some_and(|c| rule.lets_in(c)) {
                return true;
            }
        }
        !named
    }
}

impl AccessRule {
    fn lets_in(&self, caller: &Caller) -> bool {
        self.subjects.contains(&caller.subject)
            || self.scopes.iter().any(|s| caller.has_scope(s))
            || self
                .claims
                .iter()
                .any(|(name, want)| match caller.claims.get(name) {
                    Some(Value::String(v)) => v == want,
                    Some(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some(want)),
                    _ => false,
                })
    }
}

fn glob_set(patterns: &[String]) -> Result<globset::GlobSet, String> {
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        if p.is_empty() {
            return Err("an empty pattern matches no tool".into());
        }
        set.add(globset::Glob::new(p).map_err(|e| format!("`{p}` is not a glob: {e}"))?);
    }
    set.build().map_err(|e| e.to_string())
}

/// Problems of the `[[access]]` rules, each with its key.
pub fn check_access(rules: &[AccessRule], auth: Option<&AuthConfig>, problems: &mut Vec<String>) {
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("/access/{i}");
        if rule.tools.is_empty() {
            problems.push(format!("{at}/tools: name at least one tool (or glob)"));
        }
        if let Err(e) = glob_set(&rule.tools) {
            problems.push(format!("{at}/tools: {e}"));
        }
        if rule.subjects.is_empty() && rule.scopes.is_empty() && rule.claims.is_empty() {
            problems.push(format!(
                "{at}: lets no caller in (name `subjects`, `scopes` or `claims`); to hide tools from everyone, disable them instead"
            ));
        }
        for name in rule.claims.keys() {
            if !auth.is_some_and(|a| a.claims.iter().any(|c| c == name)) {
                problems.push(format!(
                    "{at}/claims/{name}: `[auth] claims` does not pass `{name}` on, so no caller would have it"
                ));
            }
        }
    }
}

/// A claim's value if it is small enough to pass on.
pub fn bounded_claim(value: &Value) -> Option<Value> {
    let len = serde_json::to_string(value)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    (len <= AUTH_MAX_CLAIM_BYTES).then(|| value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<crate::host_config::HostConfig, String> {
        crate::host_config::HostConfig::parse(text, "toolgate.toml").map_err(|e| e.to_string())
    }

    #[test]
    fn auth_is_checked_with_its_keys() {
        let ok = parse(
            "[auth]\nissuer = \"https://id.example.com\"\nresource = \"https://tools.example.com/mcp\"\n",
        )
        .unwrap();
        let auth = ok.auth.unwrap();
        assert_eq!(auth.algorithms(), TokenAlgorithm::DEFAULT.to_vec());
        assert_eq!(auth.leeway_seconds(), 60);

        let e = parse(
            "[auth]\nissuer = \"http://id.example.com\"\nresource = \"https://t/mcp#x\"\nleeway_seconds = 3600\n",
        )
        .unwrap_err();
        assert!(
            e.contains("/auth/issuer") && e.contains("must be https://"),
            "{e}"
        );
        assert!(
            e.contains("/auth/resource") && e.contains("fragment"),
            "{e}"
        );
        assert!(e.contains("/auth/leeway_seconds"), "{e}");

        // HS256 and none are not algorithms here.
        for alg in ["HS256", "none"] {
            let e = parse(&format!(
                "[auth]\nissuer = \"https://i\"\nresource = \"https://r/mcp\"\nalgorithms = [\"{alg}\"]\n"
            ))
            .unwrap_err();
            assert!(e.contains("/auth/algorithms/0"), "{alg}: {e}");
        }
        // `[[access]]` rules that could never let anyone in are errors.
        let e = parse(
            "[auth]\nissuer = \"https://i\"\nresource = \"https://r/mcp\"\nclaims = [\"groups\"]\n\
             [[access]]\ntools = [\"bash\"]\n\
             [[access]]\ntools = [\"a[\"]\nsubjects = [\"x\"]\n\
             [[access]]\ntools = [\"b\"]\nclaims = { team = \"x\" }\n\
             [[access]]\ntools = []\nscopes = [\"s\"]\n",
        )
        .unwrap_err();
        assert!(e.contains("/access/0: lets no caller in"), "{e}");
        assert!(e.contains("/access/1/tools: `a[` is not a glob"), "{e}");
        assert!(
            e.contains("/access/2/claims/team: `[auth] claims` does not pass `team` on"),
            "{e}"
        );
        assert!(e.contains("/access/3/tools: name at least one tool"), "{e}");
        // Loopback may be http.
        parse("[auth]\nissuer = \"http://127.0.0.1:9\"\nresource = \"http://localhost:8/mcp\"\n")
            .unwrap();
    }
}
