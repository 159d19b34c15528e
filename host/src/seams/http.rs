//! Outgoing HTTP(S) through `wasi:http`, allowed only to the plugin's
//! network grant.
//!
//! A component that imports `wasi:http/outgoing-handler` loads whatever it
//! was granted: with no `network` grant every request is refused
//! (`HTTP-request-denied`), so a fetch tool can be installed before the
//! operator decides where it may go. Each request — and so each redirect,
//! which `wasi:http` never follows by itself: the guest sends a new request
//! — is checked here against the grant as the operator wrote it
//! (`host:port`, the port defaulting to 443 for `https` and 80 for
//! `http`), by name, before any connection. The request's own connect,
//! first-byte and between-bytes timeouts apply, each at most
//! [`MAX_TIMEOUT`]; the call's deadline bounds the whole exchange.

use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpHooks};

/// The longest connect, first-byte or between-bytes timeout a request may
/// ask for; also the default of each.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// The `wasi:http` state of one instance: the context and the grant check.
pub struct HttpState {
    pub ctx: WasiHttpCtx,
    pub hooks: GrantedHosts,
}

impl HttpState {
    /// The state for `plugin`, allowed `granted` (`host:port` strings, as
    /// the operator wrote them).
    pub fn new(plugin: Arc<str>, granted: &[String]) -> Self {
        HttpState {
            ctx: WasiHttpCtx::new(),
            hooks: GrantedHosts {
                plugin,
                allowed: granted.iter().filter_map(|g| split_host_port(g)).collect(),
            },
        }
    }
}

/// `host:port` (or `[v6]:port`) → (host lowercase, port).
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_ascii_lowercase(), port.parse().ok()?))
}

/// The hosts a plugin's requests may go to.
pub struct GrantedHosts {
    plugin: Arc<str>,
    allowed: Vec<(String, u16)>,
}

impl GrantedHosts {
    /// Whether `uri` may be requested; `Err` names the grant line to add.
    pub fn check(&self, uri: &http::Uri) -> Result<(), String> {
        let host = uri
            .host()
            .ok_or("the URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some("http") => 80,
            _ => 443,
        });
        if self.allowed.iter().any(|(h, p)| *h == host && *p == port) {
            return Ok(());
        }
        let shown = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Err(format!(
            "plugin `{}` may not connect to `{shown}`; to allow it, add \"{shown}\" to `network = [...]` under [plugins.{}.grants] in toolgate.toml",
            self.plugin, self.plugin
        ))
    }
}

impl WasiHttpHooks for GrantedHosts {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = wasmtime_wasi_http::Result<(
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                )>,
            > + Send,
    > {
        let _ = fut;
        if let Err(why) = self.check(request.uri()) {
            tracing::warn!(plugin = %self.plugin, uri = %request.uri(), "outgoing HTTP refused: {why}");
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        tracing::info!(plugin = %self.plugin, uri = %request.uri(), "outgoing HTTP");
        let cap = |d: Option<Duration>| Some(d.unwrap_or(MAX_TIMEOUT).min(MAX_TIMEOUT));
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: cap(options.connect_timeout),
            first_byte_timeout: cap(options.first_byte_timeout),
            between_bytes_timeout: cap(options.between_bytes_timeout),
        };
        Box::new(async move {
            use http_body_util::BodyExt;
            let (res, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            Ok((
                res.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_checked_by_name_and_port() {
        let g = HttpState::new(
            "web".into(),
            &["Example.com:443".into(), "127.0.0.1:8080".into()],
        )
        .hooks;
        assert!(g.check(&"https://example.com/x".parse().unwrap()).is_ok());
        assert!(g.check(&"http://127.0.0.1:8080/".parse().unwrap()).is_ok());
        let e = g
            .check(&"http://example.com/".parse().unwrap())
            .unwrap_err();
        assert!(
            e.contains("\"example.com:80\"") && e.contains("[plugins.web.grants]"),
            "{e}"
        );
        assert!(g.check(&"https://evil.com/".parse().unwrap()).is_err());
        assert!(
            g.check(&"https://example.com.evil.com/".parse().unwrap())
                .is_err()
        );
    }
}
