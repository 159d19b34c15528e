//! `serve --http` as an OAuth 2.1 resource server (`[auth]`): the MCP
//! authorization specification's server side.
//!
//! * **Discovery** — `/.well-known/oauth-protected-resource` (and the same
//!   path suffixed with the endpoint's path, RFC 9728 §3.1) serves the
//!   Protected Resource Metadata: this resource, its authorization server,
//!   the scopes. A request without a valid token gets 401 with
//!   `WWW-Authenticate: Bearer resource_metadata="…"`, so a client finds
//!   the authorization server from nothing but the endpoint's URL. The
//!   metadata's URL is built from the configured `resource`, never from a
//!   request's `Host`.
//! * **JWT access tokens** — verified with `jsonwebtoken` against the
//!   issuer's key set (its `jwks_uri`, discovered from its metadata unless
//!   configured), fetched, cached ([`AUTH_KEYS_TTL`]) and fetched again
//!   when a token names a key the set lacks (a rotation; at most every
//!   [`AUTH_KEYS_REFETCH_INTERVAL`]). `iss` must be the issuer, `aud` this
//!   resource (RFC 8707: a token for another resource is refused), `exp`
//!   and `nbf` hold within the leeway, and the header's `alg` must be on the
//!   allow-list *and* match the key's family: asymmetric only, so neither
//!   `none` nor an HMAC over the public key can pass.
//! * **Opaque tokens** — asked of the introspection endpoint (RFC 7662) on
//!   every request: a revoked token stops at once.
//! * **Scopes** — `[auth] required_scopes` for any access (403
//!   `insufficient_scope` naming them); the rest is for policies, which
//!   see the caller with every call.
//!
//! Every answer from the authorization server is bounded in size
//! ([`AUTH_MAX_DOCUMENT_BYTES`]) and time ([`AUTH_FETCH_TIMEOUT`]), and
//! redirects are not followed. When the keys cannot be had the server fails
//! closed with 503, saying so (not 401: the client's token may be fine).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};
use toolgate::budgets::{
    AUTH_FETCH_TIMEOUT, AUTH_KEYS_REFETCH_INTERVAL, AUTH_KEYS_TTL, AUTH_MAX_DOCUMENT_BYTES,
    AUTH_MAX_TOKEN_BYTES,
};
use toolgate::identity::{AuthConfig, Caller, TokenAlgorithm, bounded_claim};

/// The well-known path of the Protected Resource Metadata (RFC 9728).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Why `[auth]` could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("`[auth] introspection.client_secret_file` {path}: {message}")]
    Secret { path: String, message: String },
    #[error("`[auth]`: the HTTP client could not be built: {0}")]
    Client(String),
}

/// Why a request's token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token that is not valid here (`invalid_token`), and why.
    Invalid(String),
    /// A valid token without the scopes `/mcp` needs.
    InsufficientScope(Vec<String>),
    /// The token could not be checked: the authorization server's keys or
    /// introspection endpoint could not be reached.
    Unavailable(String),
}

/// The resource server: the configuration, the cached keys, the client.
pub struct OAuth {
    config: AuthConfig,
    algorithms: Vec<Algorithm>,
    http: reqwest::Client,
    /// The introspection client's secret, read at start.
    introspection_secret: Option<String>,
    /// The metadata document's URL (RFC 9728 §3.1: the well-known path,
    /// then the resource's own path).
    metadata_url: String,
    /// `metadata_url`'s path: the metadata is served there too.
    metadata_path: String,
    keys: tokio::sync::Mutex<Keys>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("issuer", &self.config.issuer)
            .field("resource", &self.config.resource)
            .finish_non_exhaustive()
    }
}

/// The issuer's key set as last fetched.
#[derive(Default)]
struct Keys {
    /// The usable keys: signing keys of a known family, with their ids.
    set: Arc<Vec<Key>>,
    fetched: Option<Instant>,
    /// The last fetch tried (success or not): the refetch interval counts
    /// from it.
    tried: Option<Instant>,
    /// Where the keys are (discovered once).
    jwks_uri: Option<String>,
}

struct Key {
    id: Option<String>,
    /// The algorithm the key set pins for it, if it says.
    alg: Option<Algorithm>,
    decoding: DecodingKey,
}

impl OAuth {
    /// The resource server `config` describes; secrets relative to
    /// `workdir`. Fetches nothing yet ([`OAuth::warm`] does).
    pub fn new(config: &AuthConfig, workdir: &std::path::Path) -> Result<OAuth, AuthError> {
        let introspection_secret = match &config.introspection {
            None => None,
            Some(i) => {
                let path = workdir.join(&*i.client_secret_file);
                let text = std::fs::read_to_string(&path).map_err(|e| AuthError::Secret {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
                let secret = text.trim().to_string();
                if secret.is_empty() {
                    return Err(AuthError::Secret {
                        path: path.display().to_string(),
                        message: "the file is empty".into(),
                    });
                }
                Some(secret)
            }
        };
        toolgate::tls::ensure();
        let http = reqwest::Client::builder()
            .timeout(AUTH_FETCH_TIMEOUT)
            .connect_timeout(AUTH_FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| AuthError::Client(e.to_string()))?;
        let algorithms = config
            .algorithms()
            .into_iter()
            .map(jose_algorithm)
            .collect();
        let metadata_url = metadata_url(&config.resource);
        let metadata_path = url::Url::parse(&metadata_url)
            .map(|u| u.path().to_string())
            .unwrap_or_else(|_| METADATA_PATH.to_string());
        Ok(OAuth {
            metadata_url,
            metadata_path,
            algorithms,
            http,
            introspection_secret,
            keys: tokio::sync::Mutex::new(Keys {
                jwks_uri: config.jwks_uri.clone(),
                ..Keys::default()
            }),
            config: config.clone(),
        })
    }

    /// Fetch the issuer's keys now, so that a wrong `issuer` or `jwks_uri`
    /// shows at start. Without introspection alone, a failure is returned
    /// (the caller logs it; requests then retry the fetch).
    pub async fn warm(&self) -> Result<usize, String> {
        let mut keys = self.keys.lock().await;
        self.fetch(&mut keys).await?;
        Ok(keys.set.len())
    }

    /// The Protected Resource Metadata's URL, for `WWW-Authenticate`.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// Whether `path` is where the metadata is served.
    pub fn is_metadata_path(&self, path: &str) -> bool {
        path == METADATA_PATH || path == self.metadata_path
    }

    /// The Protected Resource Metadata document (RFC 9728 §2).
    pub fn metadata(&self) -> Value {
        let mut doc = json!({
            "resource": self.config.resource,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "toolgate",
        });
        let scopes = self.config.scopes_supported();
        if !scopes.is_empty() {
            doc["scopes_supported"] = json!(scopes);
        }
        doc
    }

    /// The `WWW-Authenticate` value for a refusal (RFC 6750 §3, RFC 9728
    /// §5.1).
    pub fn challenge(&self, refusal: &Refusal) -> String {
        let quoted = |s: &str| s.replace(['"', '\\'], "'");
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        match refusal {
            Refusal::Missing | Refusal::Unavailable(_) => {}
            Refusal::Invalid(why) => {
                value.push_str(&format!(
                    ", error=\"invalid_token\", error_description=\"{}\"",
                    quoted(why)
                ));
            }
            Refusal::InsufficientScope(scopes) => {
                value.push_str(&format!(
                    ", error=\"insufficient_scope\", scope=\"{}\"",
                    quoted(&scopes.join(" "))
                ));
            }
        }
        if let Some(scopes) = (!self.config.required_scopes.is_empty())
            .then(|| self.config.required_scopes.join(" "))
            .filter(|_| !matches!(refusal, Refusal::InsufficientScope(_)))
        {
            value.push_str(&format!(", scope=\"{}\"", quoted(&scopes)));
        }
        value
    }

    /// The caller a request's `Authorization` header names, validated.
    pub async fn authenticate(&self, header: Option<&[u8]>) -> Result<Caller, Refusal> {
        let Some(header) = header else {
            return Err(Refusal::Missing);
        };
        let Some(token) = header
            .strip_prefix(b"Bearer ")
            .or_else(|| header.strip_prefix(b"bearer "))
        else {
            return Err(Refusal::Invalid(
                "the Authorization header is not `Bearer <token>`".into(),
            ));
        };
        if token.len() > AUTH_MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(format!(
                "the token is longer than {AUTH_MAX_TOKEN_BYTES} bytes"
            )));
        }
        let Ok(token) = std::str::from_utf8(token) else {
            return Err(Refusal::Invalid("the token is not text".into()));
        };
        let token = token.trim();
        let claims = if token.split('.').count() == 3 {
            self.verify_jwt(token).await?
        } else if self.config.introspection.is_some() {
            self.introspect(token).await?
        } else {
            return Err(Refusal::Invalid(
                "the token is not a JWT, and this server has no introspection endpoint ([auth.introspection])".into(),
            ));
        };
        let caller = self.caller(&claims)?;
        let missing: Vec<String> = self
            .config
            .required_scopes
            .iter()
            .filter(|s| !caller.has_scope(s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::InsufficientScope(missing));
        }
        Ok(caller)
    }

    /// The claims of a JWT access token whose signature, issuer, audience
    /// and times hold.
    async fn verify_jwt(&self, token: &str) -> Result<Value, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("the token's header: {e}")))?;
        if !self.algorithms.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "the token is signed with {:?}, which `[auth] algorithms` does not allow",
                header.alg
            )));
        }
        let keys = self.keys_for(header.kid.as_deref()).await?;
        let candidates: Vec<&Key> = keys
            .iter()
            .filter(|k| header.kid.is_none() || k.id == header.kid)
            .filter(|k| k.alg.is_none_or(|a| a == header.alg))
            .filter(|k| k.decoding.family() == header.alg.family())
            .collect();
        let key = match (candidates.as_slice(), &header.kid) {
            ([key], _) => *key,
            ([], Some(kid)) => {
                return Err(Refusal::Invalid(format!(
                    "the token's key {kid:?} is not one of the issuer's keys for {:?}",
                    header.alg
                )));
            }
            ([], None) => {
                return Err(Refusal::Invalid(format!(
                    "the issuer has no key for {:?}",
                    header.alg
                )));
            }
            (_, _) => {
                return Err(Refusal::Invalid(
                    "the token names no key (`kid`) and the issuer has several".into(),
                ));
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = self.config.leeway_seconds();
        validation.validate_nbf = true;
        let data = jsonwebtoken::decode::<Value>(token, &key.decoding, &validation)
            .map_err(|e| Refusal::Invalid(describe(&e)))?;
        Ok(data.claims)
    }

    /// The keys to check a token naming `kid` with: the cached set, fetched
    /// first when it is stale or lacks `kid` (at most every
    /// [`AUTH_KEYS_REFETCH_INTERVAL`]).
    async fn keys_for(&self, kid: Option<&str>) -> Result<Arc<Vec<Key>>, Refusal> {
        let mut keys = self.keys.lock().await;
        let stale = keys.fetched.is_none_or(|t| t.elapsed() >= AUTH_KEYS_TTL);
        let lacks = kid.is_some_and(|kid| !keys.set.iter().any(|k| k.id.as_deref() == Some(kid)));
        let may_try = keys
            .tried
            .is_none_or(|t| t.elapsed() >= AUTH_KEYS_REFETCH_INTERVAL);
        if (stale || lacks) && (may_try || keys.fetched.is_none() && keys.tried.is_none()) {
            if let Err(e) = self.fetch(&mut keys).await {
                if keys.fetched.is_none() {
                    return Err(Refusal::Unavailable(e));
                }
                tracing::warn!(error = %e, "the issuer's keys could not be fetched again; using the ones held");
            }
        } else if keys.fetched.is_none() {
            return Err(Refusal::Unavailable(
                "the issuer's keys could not be fetched (tried moments ago)".into(),
            ));
        }
        Ok(keys.set.clone())
    }

    /// Fetch the key set (discovering where it is first, if needed).
    async fn fetch(&self, keys: &mut Keys) -> Result<(), String> {
        keys.tried = Some(Instant::now());
        let jwks_uri = match &keys.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover_jwks_uri().await?;
                keys.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let doc = self.get_json(&jwks_uri).await?;
        let Some(list) = doc.get("keys").and_then(Value::as_array) else {
            return Err(format!("{jwks_uri}: not a key set (no `keys` array)"));
        };
        let mut set = Vec::new();
        for (i, raw) in list.iter().enumerate() {
            match usable_key(raw) {
                Ok(Some(key)) => set.push(key),
                Ok(None) => {}
                Err(e) => tracing::debug!(index = i, error = %e, "a key of the set is not used"),
            }
        }
        tracing::debug!(jwks_uri = %jwks_uri, keys = set.len(), "the issuer's keys fetched");
        keys.set = Arc::new(set);
        keys.fetched = Some(Instant::now());
        Ok(())
    }

    /// The issuer's `jwks_uri`, from its metadata: RFC 8414's well-known
    /// place first, then OpenID Connect discovery's. The document's
    /// `issuer` must be the configured one, exactly.
    async fn discover_jwks_uri(&self) -> Result<String, String> {
        let issuer = &self.config.issuer;
        let mut tried = Vec::new();
        for url in metadata_candidates(issuer) {
            match self.get_json(&url).await {
                Ok(doc) => {
                    if doc.get("issuer").and_then(Value::as_str) != Some(issuer.as_str()) {
                        return Err(format!(
                            "{url} names the issuer {}, not {issuer:?} (`[auth] issuer`)",
                            doc.get("issuer").unwrap_or(&Value::Null)
                        ));
                    }
                    return doc
                        .get("jwks_uri")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| format!("{url} has no `jwks_uri` (set `[auth] jwks_uri`)"));
                }
                Err(e) => tried.push(e),
            }
        }
        Err(format!(
            "the issuer's metadata could not be read: {}",
            tried.join("; ")
        ))
    }

    /// The claims of an opaque token, as the introspection endpoint
    /// answers for it: it must be `active`, for this resource (when the
    /// answer names an audience), from the issuer (when it names one).
    async fn introspect(&self, token: &str) -> Result<Value, Refusal> {
        let config = self
            .config
            .introspection
            .as_ref()
            .expect("checked by the caller");
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let request = self
            .http
            .post(&config.url)
            .basic_auth(&config.client_id, self.introspection_secret.as_deref())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body);
        let claims = read_json(&config.url, request.send().await)
            .await
            .map_err(Refusal::Unavailable)?;
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(Refusal::Invalid(
                "the token is not active (introspection)".into(),
            ));
        }
        if let Some(iss) = claims.get("iss")
            && iss.as_str() != Some(self.config.issuer.as_str())
        {
            return Err(Refusal::Invalid(format!("the token's issuer is {iss}")));
        }
        let aud = claims.get("aud");
        let ours = match aud {
            Some(Value::String(a)) => a == &self.config.resource,
            Some(Value::Array(list)) => list
                .iter()
                .any(|a| a.as_str() == Some(self.config.resource.as_str())),
            _ => false,
        };
        if !ours {
            return Err(Refusal::Invalid(format!(
                "the token is not for this resource ({}): its audience is {}",
                self.config.resource,
                aud.unwrap_or(&Value::Null)
            )));
        }
        let now = jsonwebtoken::get_current_timestamp();
        let leeway = self.config.leeway_seconds();
        if let Some(exp) = claims.get("exp").and_then(Value::as_u64)
            && exp + leeway < now
        {
            return Err(Refusal::Invalid("the token has expired".into()));
        }
        Ok(claims)
    }

    /// The caller valid claims describe.
    fn caller(&self, claims: &Value) -> Result<Caller, Refusal> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_string);
        // A client's own token (client credentials) may name no `sub` in
        // an introspection answer: the client is then the subject (as the
        // JWT profile, RFC 9068, has it).
        let subject = text("sub")
            .or_else(|| text("client_id"))
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                Refusal::Invalid("the token names no subject (`sub` or `client_id`)".into())
            })?;
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s.split_whitespace().map(str::to_string).collect(),
            (_, Some(Value::Array(list))) => list
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            (_, Some(Value::String(s))) => s.split_whitespace().map(str::to_string).collect(),
            _ => Vec::new(),
        };
        let mut named = BTreeMap::new();
        for name in &self.config.claims {
            if let Some(value) = claims.get(name) {
                match bounded_claim(value) {
                    Some(v) => {
                        named.insert(name.clone(), v);
                    }
                    None => {
                        tracing::warn!(claim = %name, subject = %subject, "a claim too large to pass on; left out")
                    }
                }
            }
        }
        Ok(Caller {
            subject,
            issuer: text("iss").unwrap_or_else(|| self.config.issuer.clone()),
            client_id: text("client_id").or_else(|| text("azp")),
            scopes,
            claims: named,
            session: None,
        })
    }

    /// GET a JSON document, bounded.
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let request = self.http.get(url).header("accept", "application/json");
        read_json(url, request.send().await).await
    }
}

/// A response's JSON body: a 2xx status, at most
/// [`AUTH_MAX_DOCUMENT_BYTES`].
async fn read_json(
    url: &str,
    response: Result<reqwest::Response, reqwest::Error>,
) -> Result<Value, String> {
    let mut response = response.map_err(|e| format!("{url}: {}", chain(&e)))?;
    if !response.status().is_success() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
        if body.len() + chunk.len() > AUTH_MAX_DOCUMENT_BYTES {
            return Err(format!(
                "{url}: the answer is larger than {AUTH_MAX_DOCUMENT_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
}

/// An error and its causes, `: `-separated (reqwest's own message names
/// none of them).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// A key of a JWKS this server may verify with: a public signing key of a
/// known family. `Ok(None)` for one that is not for signing (`use: enc`)
/// or is symmetric (`kty: oct`: a shared secret has no place in a public
/// key set, and would make HMAC forgeries possible).
fn usable_key(raw: &Value) -> Result<Option<Key>, String> {
    if raw.get("kty").and_then(Value::as_str) == Some("oct") {
        return Ok(None);
    }
    let jwk: Jwk = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return Ok(None);
    }
    let alg = match &jwk.common.key_algorithm {
        None => None,
        Some(a) => Some(
            a.to_string()
                .parse::<Algorithm>()
                .map_err(|_| format!("the key's algorithm {a:?} is not for signatures"))?,
        ),
    };
    let decoding = DecodingKey::from_jwk(&jwk).map_err(|e| e.to_string())?;
    Ok(Some(Key {
        id: jwk.common.key_id.clone(),
        alg,
        decoding,
    }))
}

/// The JOSE algorithm of an allowed one.
fn jose_algorithm(a: TokenAlgorithm) -> Algorithm {
    a.name()
        .parse()
        .expect("every TokenAlgorithm is a JOSE one")
}

/// What went wrong with a token, in words a client's developer can act on.
fn describe(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "the token has expired".into(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        K::InvalidAudience => "the token is not for this resource (aud)".into(),
        K::InvalidIssuer => "the token is from another issuer (iss)".into(),
        K::InvalidSignature => "the token's signature does not verify".into(),
        K::InvalidAlgorithm => "the token's algorithm does not match its key".into(),
        K::MissingRequiredClaim(c) => format!("the token has no `{c}` claim"),
        other => format!("the token is not valid: {other:?}"),
    }
}

/// The Protected Resource Metadata's URL for `resource` (RFC 9728 §3.1:
/// the well-known path inserted before the resource's path).
fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(url) => {
            let path = url.path().trim_end_matches('/');
            format!(
                "{}{METADATA_PATH}{path}",
                url.origin().ascii_serialization()
            )
        }
        Err(_) => METADATA_PATH.into(),
    }
}

/// Where an issuer's metadata may be: RFC 8414 (the well-known path before
/// the issuer's path), then OpenID Connect (after it).
fn metadata_candidates(issuer: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(issuer) else {
        return vec![];
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};

    /// A P-256 key made for these tests, and its public half as a JWK.
    const PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1Mru7cgS/MO3pRCr
CPbvf3I0AzJBW1SoVxmaVAfnmrWhRANCAARl6G95G0NwuM5rldsnoc0pxwzxIEhV
lUj21rhlogw/mLoHuV4/p0m3TimZF9jquceYnD5JDSrZOQHa/VMG244I
-----END PRIVATE KEY-----
";
    fn public() -> Value {
        json!({"kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig",
               "x": "ZehveRtDcLjOa5XbJ6HNKccM8SBIVZVI9ta4ZaIMP5g",
               "y": "uge5Xj-nSbdOKZkX2Oq5x5icPkkNKtk5Adr9Uwbbjgg"})
    }

    const ISSUER: &str = "https://id.example.com";
    const RESOURCE: &str = "https://tools.example.com/mcp";

    /// A server for `[auth]` with `extra` TOML, holding the test key.
    async fn server(extra: &str) -> OAuth {
        let config = toolgate::HostConfig::parse(
            &format!("[auth]\nissuer = \"{ISSUER}\"\nresource = \"{RESOURCE}\"\n{extra}"),
            "test",
        )
        .unwrap()
        .auth
        .unwrap();
        let oauth = OAuth::new(&config, std::path::Path::new(".")).unwrap();
        {
            let mut keys = oauth.keys.lock().await;
            keys.set = Arc::new(vec![usable_key(&public()).unwrap().unwrap()]);
            keys.fetched = Some(Instant::now());
            keys.tried = keys.fetched;
        }
        oauth
    }

    /// `claims` signed ES256 with the test key (`kid` as given).
    fn signed(claims: Value, kid: Option<&str>) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = kid.map(str::to_string);
        let key = EncodingKey::from_ec_pem(PRIVATE.as_bytes()).unwrap();
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }

    fn good() -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        json!({"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "exp": now + 300,
               "iat": now, "scope": "tools ops", "groups": ["ops"], "email": "a@x"})
    }

    fn with(mut claims: Value, key: &str, value: Value) -> Value {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(key);
        } else {
            claims[key] = value;
        }
        claims
    }

    async fn check(oauth: &OAuth, token: &str) -> Result<Caller, Refusal> {
        oauth
            .authenticate(Some(format!("Bearer {token}").as_bytes()))
            .await
    }

    #[tokio::test]
    async fn claims_are_checked_one_by_one() {
        let oauth =
            server("claims = [\"groups\"]\nrequired_scopes = [\"tools\"]\nleeway_seconds = 5")
                .await;
        let caller = check(&oauth, &signed(good(), Some("k1"))).await.unwrap();
        assert_eq!(caller.subject, "alice");
        assert_eq!(caller.scopes, ["tools", "ops"]);
        // Only the claims the operator named.
        assert_eq!(caller.claims.keys().collect::<Vec<_>>(), ["groups"]);
        // No `kid` and one key: that key.
        check(&oauth, &signed(good(), None)).await.unwrap();

        let now = jsonwebtoken::get_current_timestamp();
        let refused = |claims: Value, why: &'static str| {
            let oauth = &oauth;
            async move {
                match check(oauth, &signed(claims, Some("k1"))).await {
                    Err(Refusal::Invalid(e)) => assert!(e.contains(why), "{why}: {e}"),
                    other => panic!("{why}: {other:?}"),
                }
            }
        };
        refused(
            with(good(), "iss", json!("https://evil.example.com")),
            "another issuer",
        )
        .await;
        refused(with(good(), "iss", Value::Null), "no `iss`").await;
        refused(
            with(good(), "aud", json!("https://other.example.com/mcp")),
            "not for this resource",
        )
        .await;
        refused(with(good(), "aud", Value::Null), "no `aud`").await;
        refused(with(good(), "sub", Value::Null), "no `sub`").await;
        refused(with(good(), "exp", Value::Null), "no `exp`").await;
        refused(with(good(), "exp", json!(now - 10)), "expired").await;
        refused(with(good(), "nbf", json!(now + 60)), "not valid yet").await;
        // Within the leeway: accepted.
        check(
            &oauth,
            &signed(with(good(), "exp", json!(now - 2)), Some("k1")),
        )
        .await
        .unwrap();
        // An audience list naming this resource among others is for it.
        check(
            &oauth,
            &signed(with(good(), "aud", json!(["x", RESOURCE])), Some("k1")),
        )
        .await
        .unwrap();
        // A key id the set lacks (the set was fetched just now: no fetch).
        match check(&oauth, &signed(good(), Some("k2"))).await {
            Err(Refusal::Invalid(e)) => assert!(e.contains("\"k2\" is not one of"), "{e}"),
            other => panic!("{other:?}"),
        }
        // Valid, but without the scope `/mcp` requires.
        match check(
            &oauth,
            &signed(with(good(), "scope", json!("ops")), Some("k1")),
        )
        .await
        {
            Err(Refusal::InsufficientScope(s)) => assert_eq!(s, ["tools"]),
            other => panic!("{other:?}"),
        }
        // A header that is not `Bearer`, and an oversized token.
        assert!(matches!(
            oauth.authenticate(Some(b"Basic eDp5")).await,
            Err(Refusal::Invalid(_))
        ));
        let long = "a".repeat(AUTH_MAX_TOKEN_BYTES + 1);
        assert!(
            matches!(check(&oauth, &long).await, Err(Refusal::Invalid(e)) if e.contains("longer"))
        );
        assert_eq!(oauth.authenticate(None).await, Err(Refusal::Missing));
    }

    #[tokio::test]
    async fn only_the_allowed_algorithms_pass() {
        let oauth = server("algorithms = [\"RS256\"]").await;
        match check(&oauth, &signed(good(), Some("k1"))).await {
            Err(Refusal::Invalid(e)) => assert!(e.contains("does not allow"), "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn well_known_places() {
        assert_eq!(
            metadata_url("https://tools.example.com/mcp"),
            "https://tools.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8765/"),
            "http://127.0.0.1:8765/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_candidates("https://id.example.com/tenant1"),
            [
                "https://id.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://id.example.com/tenant1/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn symmetric_and_encryption_keys_are_not_used() {
        assert!(
            usable_key(&json!({"kty": "oct", "k": "c2VjcmV0"}))
                .unwrap()
                .is_none()
        );
        let enc = json!({"kty": "EC", "crv": "P-256", "use": "enc",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
        assert!(usable_key(&enc).unwrap().is_none());
        let sig = json!({"kty": "EC", "crv": "P-256", "kid": "a",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
        let key = usable_key(&sig).unwrap().unwrap();
        assert_eq!(key.id.as_deref(), Some("a"));
    }
}
