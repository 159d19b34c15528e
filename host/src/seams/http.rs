//! Outgoing HTTP(S) through `wasi:http`, under the plugin's egress.
//!
//! A component that imports `wasi:http/outgoing-handler` loads whatever it
//! was granted: with no `network` or `egress` grant every request is
//! refused, so a fetch tool can be installed before the operator decides
//! where it may go. Each request — and so each redirect, which `wasi:http`
//! never follows by itself: the guest sends a new request — is decided by
//! [`ComponentEgress::open`] (`[egress] deny`, the `network` grant, the
//! `egress` rules, address classes), which connects to the address it
//! checked; the host then speaks HTTP/1.1 (over TLS for `https`, the
//! webpki roots) on that connection, never resolving the name again, with
//! the path in the normal form the rules matched (see
//! [`crate::egress::target`]) and `Host` from the allowed name. A
//! refusal reaches the guest as `internal-error` with the host's message
//! ("toolgate egress: …", naming the rule to add), which `web_fetch`
//! returns as `PERMISSION_DENIED`. The request's own connect, first-byte
//! and between-bytes timeouts apply, each at most [`MAX_TIMEOUT`]; the
//! call's deadline bounds the whole exchange.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpHooks};

use crate::egress::component::ComponentEgress;
use crate::egress::target::host_header;
use crate::egress::{Host, OpenError, parse_host};

/// The longest connect, first-byte or between-bytes timeout a request may
/// ask for; also the default of each.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// The `wasi:http` state of one instance: the context and the egress hook.
pub struct HttpState {
    pub ctx: WasiHttpCtx,
    pub hooks: EgressHooks,
}

impl HttpState {
    /// The state of an instance whose connections `egress` decides.
    pub fn new(egress: Arc<ComponentEgress>) -> Self {
        HttpState {
            ctx: WasiHttpCtx::new(),
            hooks: EgressHooks { egress },
        }
    }
}

/// Sends each request through the instance's egress.
pub struct EgressHooks {
    egress: Arc<ComponentEgress>,
}

type SendResult = wasmtime_wasi_http::Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
)>;

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        let _ = fut;
        let cap = |d: Option<Duration>| d.unwrap_or(MAX_TIMEOUT).min(MAX_TIMEOUT);
        let options = options.unwrap_or_default();
        let timeouts = Timeouts {
            connect: cap(options.connect_timeout),
            first_byte: cap(options.first_byte_timeout),
            between_bytes: cap(options.between_bytes_timeout),
        };
        Box::new(send(self.egress.clone(), request, timeouts))
    }
}

#[derive(Clone, Copy)]
struct Timeouts {
    connect: Duration,
    first_byte: Duration,
    between_bytes: Duration,
}

/// The rustls client configuration: the webpki roots, the process's
/// provider (ring, see [`crate::tls`]).
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            crate::tls::ensure();
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            Arc::new(
                rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        })
        .clone()
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// One request on a connection egress opened (to the address it checked).
async fn send(
    egress: Arc<ComponentEgress>,
    mut req: http::Request<WasiBody>,
    t: Timeouts,
) -> SendResult {
    let uri = req.uri().clone();
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(Error::HttpRequestUriInvalid),
    };
    let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?;
    let host = parse_host(host.trim_start_matches('[').trim_end_matches(']'))
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let default_port = if tls { 443 } else { 80 };
    let port = uri.port_u16().unwrap_or(default_port);
    let method = req.method().as_str().to_string();
    let target = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let opened = tokio::time::timeout(t.connect, egress.open(&host, port, &method, target))
        .await
        .map_err(|_| Error::ConnectionTimeout)?;
    let (stream, path) = match opened {
        Ok(s) => s,
        Err(OpenError::Refused(r)) => return Err(Error::InternalError(Some(r.message))),
        Err(OpenError::Unreachable(why)) => {
            tracing::info!(plugin = %egress.plugin(), %uri, "outgoing HTTP failed: {why}");
            return Err(Error::Connect(std::io::Error::other(why)));
        }
    };
    let stream: Box<dyn Stream> = if tls {
        let name = match &host {
            Host::Ip(ip) => rustls::pki_types::ServerName::from(*ip),
            Host::Name(n) => rustls::pki_types::ServerName::try_from(n.clone())?,
        };
        let connector = tokio_rustls::TlsConnector::from(tls_config());
        let s = tokio::time::timeout(t.connect, connector.connect(name, stream))
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Tls)?;
        Box::new(s)
    } else {
        Box::new(stream)
    };
    let (mut sender, conn) = tokio::time::timeout(
        t.connect,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;
    // Origin form on the wire (the connection is the server's, not a
    // proxy's), with the path the rules matched; `Host` is the allowed
    // name (wasmtime sets it from the authority, which may carry userinfo
    // or another spelling of the address).
    *req.uri_mut() = http::Uri::builder()
        .path_and_query(path.as_str())
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let host_value = http::HeaderValue::from_str(&host_header(&host, port, default_port))
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    req.headers_mut().insert(http::header::HOST, host_value);
    // The connection runs on its own task until the response body is read
    // (or dropped); its end is what the guest's future waits for.
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let r = conn.await;
        let _ = done_tx.send(r);
    });
    let res = tokio::time::timeout(t.first_byte, sender.send_request(req))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)??;
    let between = t.between_bytes.max(Duration::from_nanos(1));
    let res = res.map(|incoming| {
        let mut timeout = tokio::time::interval(between);
        timeout.reset();
        BetweenBytes { incoming, timeout }.boxed_unsync()
    });
    let io = async move {
        match done_rx.await {
            Ok(Ok(())) | Err(_) => Ok(()),
            Ok(Err(e)) if e.is_timeout() => Err(Error::HttpResponseTimeout),
            Ok(Err(e)) => Err(Error::from(e)),
        }
    };
    Ok((res, Box::new(io)))
}

/// A request the host makes for a seam (not for a component's own
/// `wasi:http`), through `egress` as a component's request would go.
pub(crate) struct HostRequest<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub headers: &'a [(&'a str, String)],
    pub body: Option<Vec<u8>>,
    /// The whole exchange, connect to the last byte.
    pub timeout: Duration,
    /// Bytes of the response body read at most.
    pub max_body: usize,
}

/// What a [`HostRequest`] got back.
pub(crate) struct HostResponse {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: Vec<u8>,
}

/// Why a [`HostRequest`] got nothing.
#[derive(Debug)]
pub(crate) enum HostRequestError {
    /// Egress refused it (the message names the rule to add).
    Refused(String),
    /// It could not be sent, or not in time, or its answer was too long.
    Failed(String),
}

/// Sends `r` through `egress` (its deny rules, grants, address classes and
/// record, attributed to the call being served) and reads the answer.
pub(crate) async fn host_request(
    egress: Arc<ComponentEgress>,
    r: HostRequest<'_>,
) -> Result<HostResponse, HostRequestError> {
    let failed = |why: String| HostRequestError::Failed(why);
    let mut builder = http::Request::builder().method(r.method).uri(r.url);
    if let Ok(uri) = r.url.parse::<http::Uri>()
        && let Some(a) = uri.authority()
    {
        builder = builder.header(http::header::HOST, a.as_str());
    }
    for (name, value) in r.headers {
        builder = builder.header(*name, value);
    }
    let body = http_body_util::Full::new(Bytes::from(r.body.unwrap_or_default()))
        .map_err(|never| match never {})
        .boxed_unsync();
    let req = builder
        .body(body)
        .map_err(|e| failed(format!("the request to {} is malformed: {e}", r.url)))?;
    let t = Timeouts {
        connect: r.timeout.min(MAX_TIMEOUT),
        first_byte: r.timeout.min(MAX_TIMEOUT),
        between_bytes: r.timeout.min(MAX_TIMEOUT),
    };
    let late = || failed(format!("no answer within {} ms", r.timeout.as_millis()));
    let exchange = async {
        let (res, _io) = send(egress, req, t).await.map_err(|e| match e {
            Error::InternalError(Some(refused)) => HostRequestError::Refused(refused),
            // The connect and first-byte timeouts are the exchange's.
            Error::ConnectionTimeout
            | Error::ConnectionReadTimeout
            | Error::HttpResponseTimeout => late(),
            other => failed(other.to_string()),
        })?;
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = res.into_body();
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| failed(e.to_string()))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > r.max_body {
                    return Err(failed(format!(
                        "the answer is longer than {} bytes",
                        r.max_body
                    )));
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(HostResponse {
            status,
            retry_after,
            body: bytes,
        })
    };
    tokio::time::timeout(r.timeout, exchange)
        .await
        .map_err(|_| late())?
}

/// A response body that fails when no frame comes within the between-bytes
/// timeout.
struct BetweenBytes {
    incoming: hyper::body::Incoming,
    timeout: tokio::time::Interval,
}

impl http_body::Body for BetweenBytes {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(if e.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                Error::from(e)
            }))),
            Poll::Ready(Some(Ok(frame))) => {
                self.timeout.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => match self.timeout.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Err(Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.incoming.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::proxy::{Attribution, ConnectionRecord, RecordSink};
    use crate::egress::{Global, Policy};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An origin answering each connection's request with its request
    /// line and `Host` as the body; counts connections.
    async fn echo() -> (u16, Arc<AtomicUsize>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                h.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    let line = head.lines().next().unwrap_or("");
                    let host = head
                        .lines()
                        .find_map(|l| l.strip_prefix("host: "))
                        .unwrap_or("(none)");
                    let body = format!("{line}\n{host}");
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        (port, hits)
    }

    /// A GET of `url` as `wasi:http` hands it over (`Host` from the
    /// authority), sent through `egress`: the response body.
    async fn get(egress: &Arc<ComponentEgress>, url: &str) -> Result<String, Error> {
        let uri: http::Uri = url.parse().unwrap();
        let authority = uri.authority().unwrap().to_string();
        let req = http::Request::builder()
            .method("GET")
            .uri(uri)
            .header(http::header::HOST, authority)
            .body(
                http_body_util::Empty::<Bytes>::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap();
        let t = Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(5),
            between_bytes: Duration::from_secs(5),
        };
        let (res, _io) = send(egress.clone(), req, t).await?;
        let body = res.into_body().collect().await?.to_bytes();
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Issue 40, case 5, for components: a `wasi:http` request's path is
    /// matched in the normal form the proxy uses and sent in that form; a
    /// dotted way out of the allowed path is refused (and recorded), never
    /// sent. The twins reach the origin as `/public/a.txt`.
    #[tokio::test]
    async fn a_component_s_path_is_matched_and_sent_in_normal_form() {
        let (port, hits) = echo().await;
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let global = Arc::new(Global::parse(&[], &s(&["127.0.0.1/32"])).unwrap());
        let policy = Policy::parse(
            &s(&["GET 127.0.0.1/public/*"]),
            global.clone(),
            "[plugins.p.grants]".into(),
        )
        .unwrap();
        let kept: Arc<Mutex<Vec<ConnectionRecord>>> = Default::default();
        let k = kept.clone();
        let sink: RecordSink = Arc::new(move |_: &Attribution, r: &ConnectionRecord| {
            k.lock().unwrap().push(r.clone())
        });
        let cell = Arc::new(OnceLock::new());
        let _ = cell.set(sink);
        let e = Arc::new(ComponentEgress::new(
            "p".into(),
            Some(&policy),
            global,
            &[],
            cell,
        ));
        let refused = [
            "/public/../secret.txt",
            "/public/%2e%2e/secret.txt",
            "/public/%2E%2E/secret.txt",
            "/public/..%2Fsecret.txt",
            "/public/../../secret.txt",
        ];
        for path in refused {
            match get(&e, &format!("http://127.0.0.1:{port}{path}")).await {
                Err(Error::InternalError(Some(m))) => {
                    assert!(m.starts_with("toolgate egress"), "{path}: {m}")
                }
                other => panic!("{path}: {other:?}"),
            }
        }
        assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing reached the origin");
        for path in [
            "/public/a.txt",
            "/public/./a.txt",
            "/public/%2E/b/../%61.txt",
        ] {
            let body = get(&e, &format!("http://127.0.0.1:{port}{path}"))
                .await
                .unwrap();
            assert_eq!(
                body,
                format!("GET /public/a.txt HTTP/1.1\n127.0.0.1:{port}"),
                "{path}"
            );
        }
        let kept = kept.lock().unwrap();
        assert_eq!(kept.iter().filter(|r| !r.allowed).count(), refused.len());
        assert_eq!(kept.iter().filter(|r| r.allowed).count(), 3);
    }
}
