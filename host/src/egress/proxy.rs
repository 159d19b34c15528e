//! The egress proxy: HTTP (`CONNECT` and absolute-form requests) and
//! SOCKS5 (`CONNECT` with an address or a name: resolution happens here)
//! on one listener, for one sandboxed spawn.
//!
//! One listener per spawn is what ties a connection to its call: the
//! listener is the only network a sandboxed process has (see
//! `toolgate_sandbox::EgressProxy`), and the host serves it with the
//! call's [`Attribution`]. Each connection is decided by [`Policy::open`]
//! (name, then resolved address, then a connection to that address),
//! refused with a message naming the rule to add — in an HTTP 403's reason
//! phrase and body, where `curl`, `pip`, `npm` and `cargo` show it; as a
//! SOCKS5 reply code (2: "not allowed by ruleset") and a log line — and
//! logged and recorded when it ends, with its bytes each way.
//!
//! Bounded ([`crate::budgets`]): a request head of
//! [`EGRESS_MAX_HEAD_BYTES`] and [`EGRESS_MAX_HEADERS`] fields read within
//! [`EGRESS_HEAD_TIMEOUT`],
//! [`EGRESS_MAX_CONNECTIONS`] open connections per spawn, closed after
//! [`EGRESS_IDLE_TIMEOUT`] without a byte either way.
//!
//! A request head is parsed by httparse (hyper's parser), never split by
//! hand, and refused (400, recorded) where httparse is lenient or an
//! origin could read the same bytes otherwise: a bare LF or bare CR
//! anywhere in the head (httparse ends a line at a bare LF; an origin that
//! does too would see a request hidden in a header — how a second request
//! once passed the rules), a folded header line, a control character in a
//! value, an invalid header name, more than [`EGRESS_MAX_HEADERS`] fields
//! (431).
//!
//! A plain `http://` request is forwarded alone, and its head rebuilt from
//! the parsed parts (no byte of the client's head is forwarded as it
//! came): origin form, with the path in the normal form the rules matched
//! ([`super::target::NormalTarget`]: dot segments removed, unreserved
//! characters decoded; a path without a safe normal form refused, 400), so
//! the origin gets exactly what was matched; `Host` set from the allowed
//! name (RFC 9112 3.2.2; the client's dropped), so an allowed name does
//! not reach every virtual host behind its address; `Connection: close`.
//! Its body goes by its one `Content-Length` (a `Transfer-Encoding` alone
//! is refused, 411; with a length, two lengths, or a length that is not
//! digits, 400), and nothing the client sends after it reaches the server
//! — so a second, pipelined request cannot slip past the method and path
//! rules that allowed the first. A `CONNECT` tunnel's bytes are the
//! client's own: nothing in them is read or changed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::addr::{Host, parse_host};
use super::ask::Asker;
use super::rules::Destination;
use super::target::{NormalTarget, TargetError, host_header};
use super::{Asking, OpenError, Opened, Policy};
use crate::budgets::{
    EGRESS_HEAD_TIMEOUT, EGRESS_IDLE_TIMEOUT, EGRESS_MAX_CONNECTIONS, EGRESS_MAX_HEAD_BYTES,
    EGRESS_MAX_HEADERS,
};

/// Who a spawn's connections belong to.
#[derive(Clone, Debug, Default)]
pub struct Attribution {
    pub call_id: String,
    pub plugin: String,
    pub scope: String,
}

/// One connection, as logged and recorded when it ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionRecord {
    /// `connect` (HTTP tunnel), `http` (a plain request) or `socks5`.
    pub via: &'static str,
    /// The destination as the client named it (normalised).
    pub name: String,
    /// The address connected to (or refused), if it got that far.
    pub address: Option<IpAddr>,
    pub port: u16,
    pub allowed: bool,
    /// The rule that allowed it, or the `[egress] deny` rule / address
    /// class that refused it.
    pub rule: Option<String>,
    /// Why it was refused or failed.
    pub reason: Option<String>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Who answered the approval asked for it (`[egress] ask`; `rule` is
    /// then `approval`): the approver, the approval entry and who decided
    /// it, or the grant and who made it — approving it if `allowed`, else
    /// refusing it.
    pub approval: Option<String>,
}

/// Where records go besides the log (the audit record, a test's list).
pub type RecordSink = Arc<dyn Fn(&Attribution, &ConnectionRecord) + Send + Sync>;

/// The most refusals of one spawn told to its caller ([`Refusals`]).
pub const REFUSALS_TOLD: usize = 8;
/// The longest refusal told, in characters (the rest is in the log and
/// the audit record).
const REFUSAL_TOLD_CHARS: usize = 400;

/// The refusals of one spawn's proxy, told to whoever ran it: a client
/// reports a refused tunnel only as "CONNECT tunnel failed, response 403",
/// which says nothing of why or of the rule to add, so the host appends
/// them to the process's stderr (see `seams::process`).
#[derive(Clone, Default)]
pub struct Refusals(Arc<std::sync::Mutex<(Vec<String>, usize)>>);

impl Refusals {
    /// A sink that gives `inner` every record and keeps the refusals.
    pub fn sink(&self, inner: Option<RecordSink>) -> RecordSink {
        let this = self.clone();
        Arc::new(move |who, r| {
            if let Some(inner) = &inner {
                inner(who, r);
            }
            if !r.allowed {
                this.push(r);
            }
        })
    }

    fn push(&self, r: &ConnectionRecord) {
        let mut line = format!(
            "{}:{}: {}",
            r.name,
            r.port,
            r.reason.as_deref().unwrap_or("refused")
        );
        if line.chars().count() > REFUSAL_TOLD_CHARS {
            line = line.chars().take(REFUSAL_TOLD_CHARS).collect::<String>() + "…";
        }
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.1 += 1;
        if kept.0.len() < REFUSALS_TOLD && !kept.0.contains(&line) {
            kept.0.push(line);
        }
    }

    /// What to append to the process's stderr, if anything was refused.
    pub fn note(&self) -> Option<String> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.1 == 0 {
            return None;
        }
        let mut note = String::from("\n[toolgate] the egress proxy refused:\n");
        for line in &kept.0 {
            note.push_str("  ");
            note.push_str(line);
            note.push('\n');
        }
        let told = kept.0.len();
        if kept.1 > told {
            note.push_str(&format!(
                "  ({} more refusal(s) in the log and the audit record)\n",
                kept.1 - told
            ));
        }
        Some(note)
    }
}

impl ConnectionRecord {
    /// The log line of this connection (the audit record gets it through
    /// the sink): allowed at info, refused at warn with the reason.
    pub fn log(&self, who: &Attribution) {
        let r = self;
        if r.allowed {
            tracing::info!(
                call_id = %who.call_id, plugin = %who.plugin, scope = %who.scope,
                via = r.via, name = %r.name, address = ?r.address, port = r.port,
                rule = r.rule.as_deref().unwrap_or(""), bytes_up = r.bytes_up,
                bytes_down = r.bytes_down, approval = r.approval.as_deref().unwrap_or(""),
                "egress connection"
            );
        } else {
            crate::metrics::egress_refused();
            tracing::warn!(
                call_id = %who.call_id, plugin = %who.plugin, scope = %who.scope,
                via = r.via, name = %r.name, address = ?r.address, port = r.port,
                rule = r.rule.as_deref().unwrap_or(""),
                approval = r.approval.as_deref().unwrap_or(""),
                "egress refused: {}", r.reason.as_deref().unwrap_or("")
            );
        }
    }

    /// The audit event's fields (kind `egress`).
    pub fn audit_fields(&self, who: &Attribution) -> serde_json::Value {
        json!({
            "callId": who.call_id,
            "plugin": who.plugin,
            "scope": who.scope,
            "via": self.via,
            "name": self.name,
            "address": self.address.map(|a| a.to_string()),
            "port": self.port,
            "allowed": self.allowed,
            "rule": self.rule,
            "reason": self.reason,
            "bytesUp": self.bytes_up,
            "bytesDown": self.bytes_down,
            "approval": self.approval,
        })
    }
}

/// What serves one spawn's proxy.
pub struct Proxy {
    pub policy: Arc<Policy>,
    pub who: Attribution,
    pub sink: Option<RecordSink>,
    /// Who is asked about a destination the rules leave open (`[egress]
    /// ask = true`): the call's asking, or a bridged server's; `None`:
    /// refused.
    pub ask: Option<Arc<dyn Asker>>,
}

/// Serving a listener; dropping it stops the proxy and every connection
/// through it.
pub struct ProxyGuard {
    task: JoinHandle<()>,
}

impl Drop for ProxyGuard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    fn record(&self, r: &ConnectionRecord) {
        let who = &self.who;
        r.log(who);
        if let Some(sink) = &self.sink {
            sink(who, r);
        }
    }

    /// Serves `listener` until the guard is dropped.
    pub fn serve(self, listener: std::net::TcpListener) -> std::io::Result<ProxyGuard> {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let this = Arc::new(self);
        let task = tokio::spawn(async move {
            let slots = Arc::new(Semaphore::new(EGRESS_MAX_CONNECTIONS));
            let mut conns = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let _ = stream.set_nodelay(true);
                        let this = this.clone();
                        match slots.clone().try_acquire_owned() {
                            Ok(permit) => {
                                conns.spawn(async move {
                                    this.handle(stream).await;
                                    drop(permit);
                                });
                            }
                            Err(_) => {
                                conns.spawn(async move { this.over_limit(stream).await });
                            }
                        }
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(ProxyGuard { task })
    }

    async fn over_limit(&self, mut stream: TcpStream) {
        let why = format!(
            "toolgate egress: more than {EGRESS_MAX_CONNECTIONS} connections open through \
             the proxy at once; close some first"
        );
        self.record(&ConnectionRecord {
            via: "connect",
            name: String::new(),
            address: None,
            port: 0,
            allowed: false,
            rule: None,
            reason: Some(why.clone()),
            bytes_up: 0,
            bytes_down: 0,
            approval: None,
        });
        let mut first = [0u8; 1];
        let socks = matches!(
            tokio::time::timeout(Duration::from_millis(200), stream.peek(&mut first)).await,
            Ok(Ok(1)) if first[0] == 5
        );
        if socks {
            let _ = stream.write_all(&[5, 0xff]).await;
        } else {
            let _ = stream
                .write_all(http_error(503, "Service Unavailable", &why).as_bytes())
                .await;
        }
    }

    async fn handle(&self, stream: TcpStream) {
        let mut first = [0u8; 1];
        match tokio::time::timeout(EGRESS_HEAD_TIMEOUT, stream.peek(&mut first)).await {
            Ok(Ok(1)) => {}
            _ => return,
        }
        if first[0] == 5 {
            self.socks5(stream).await
        } else {
            self.http(stream).await
        }
    }

    /// Decides and connects; on refusal records it and returns `Err`
    /// with the message.
    async fn open(
        &self,
        via: &'static str,
        host: &Host,
        port: u16,
        http: Option<(&str, &NormalTarget)>,
    ) -> Result<Opened, (bool, String)> {
        let d = Destination { host, port, http };
        let asking = self.ask.as_deref().map(|ask| Asking {
            ask,
            plugin: &self.who.plugin,
            via,
        });
        match self.policy.open_asking(&d, asking).await {
            Ok(o) => Ok(o),
            Err(e) => {
                let (refused, reason, rule, address, approval) = match e {
                    OpenError::Refused(r) => (
                        true,
                        r.message.clone(),
                        r.record_rule(),
                        r.address,
                        r.refused_by,
                    ),
                    OpenError::Unreachable(m) => (false, m, None, None, None),
                };
                self.record(&ConnectionRecord {
                    via,
                    name: host.to_string(),
                    address,
                    port,
                    allowed: false,
                    rule,
                    reason: Some(reason.clone()),
                    bytes_up: 0,
                    bytes_down: 0,
                    approval,
                });
                Err((refused, reason))
            }
        }
    }

    async fn socks5(&self, mut c: TcpStream) {
        let greeting = tokio::time::timeout(EGRESS_HEAD_TIMEOUT, socks5_request(&mut c)).await;
        let (host, port) = match greeting {
            Ok(Ok(Some(dest))) => dest,
            Ok(Ok(None)) => return, // answered already (unsupported)
            Ok(Err(bad)) => {
                tracing::warn!(plugin = %self.who.plugin, call_id = %self.who.call_id, "egress: bad SOCKS5 request: {bad}");
                let _ = c.write_all(&[5, 1, 0, 1, 0, 0, 0, 0, 0, 0]).await;
                return;
            }
            Err(_) => return,
        };
        let host = match host {
            Ok(h) => h,
            Err(bad) => {
                self.record(&ConnectionRecord {
                    via: "socks5",
                    name: bad.clone(),
                    address: None,
                    port,
                    allowed: false,
                    rule: None,
                    reason: Some(format!("toolgate egress: {bad}")),
                    bytes_up: 0,
                    bytes_down: 0,
                    approval: None,
                });
                let _ = c.write_all(&[5, 2, 0, 1, 0, 0, 0, 0, 0, 0]).await;
                return;
            }
        };
        match self.open("socks5", &host, port, None).await {
            Ok(o) => {
                if c.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await.is_err() {
                    return;
                }
                self.relay("socks5", &host, port, o, c, Vec::new()).await;
            }
            Err((refused, _)) => {
                // 2: connection not allowed by ruleset; 4: host unreachable.
                let code = if refused { 2 } else { 4 };
                let _ = c.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]).await;
            }
        }
    }

    async fn http(&self, mut c: TcpStream) {
        let (buf, head_len) =
            match tokio::time::timeout(EGRESS_HEAD_TIMEOUT, read_head(&mut c)).await {
                Ok(Ok(h)) => h,
                Ok(Err(HeadError::Refused(bad))) => return self.refuse_head(c, "", 0, bad).await,
                _ => return,
            };
        let req = match parse_head(&buf[..head_len]) {
            Ok(r) => r,
            Err(bad) => return self.refuse_head(c, "", 0, bad).await,
        };
        let extra = &buf[head_len..];
        let (method, target) = (req.method, req.target);

        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = match split_authority(target, None) {
                Ok(hp) => hp,
                Err(e) => return self.refuse_http(c, "connect", target, 0, e).await,
            };
            match self.open("connect", &host, port, None).await {
                Ok(o) => {
                    if c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        .await
                        .is_err()
                    {
                        return;
                    }
                    self.relay("connect", &host, port, o, c, extra.to_vec())
                        .await;
                }
                Err((refused, why)) => self.answer_refusal(c, refused, &why).await,
            }
            return;
        }

        // Absolute form: http://host[:port]/path
        let Some(rest) = target
            .strip_prefix("http://")
            .or_else(|| target.strip_prefix("HTTP://"))
        else {
            let why = if target.starts_with("https://") {
                "toolgate egress: send https:// through CONNECT (set HTTPS_PROXY)".to_string()
            } else {
                format!(
                    "toolgate egress: this is a proxy; ask for an absolute URL \
                     (http://HOST/PATH), not {target:?}"
                )
            };
            let _ = c
                .write_all(http_error(400, "Bad Request", &why).as_bytes())
                .await;
            return;
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = match split_authority(authority, Some(80)) {
            Ok(hp) => hp,
            Err(e) => return self.refuse_http(c, "http", authority, 80, e).await,
        };
        let name = host.to_string();
        // The rules match the normal form, and the origin gets it.
        let path = match NormalTarget::parse(path) {
            Ok(p) => p,
            Err(why) => {
                let path = path.to_string();
                return self
                    .refuse_head(c, &name, port, BadHead::Path { path, why })
                    .await;
            }
        };
        let body_len = match body_length(&req.headers) {
            Ok(n) => n,
            Err(bad) => return self.refuse_head(c, &name, port, bad).await,
        };
        match self.open("http", &host, port, Some((method, &path))).await {
            Ok(o) => {
                // Rebuilt from the parsed parts, never the client's bytes:
                // `Host` from the allowed name (RFC 9112 3.2.2), hop-by-hop
                // fields dropped, `Connection: close`.
                let mut out = Vec::with_capacity(head_len + 64);
                out.extend_from_slice(
                    format!(
                        "{method} {path} HTTP/1.{}\r\nHost: {}\r\n",
                        req.minor,
                        host_header(&host, port, 80)
                    )
                    .as_bytes(),
                );
                for h in &req.headers {
                    if !DROPPED.iter().any(|d| h.name.eq_ignore_ascii_case(d)) {
                        out.extend_from_slice(h.name.as_bytes());
                        out.extend_from_slice(b": ");
                        out.extend_from_slice(h.value);
                        out.extend_from_slice(b"\r\n");
                    }
                }
                out.extend_from_slice(b"Connection: close\r\n\r\n");
                let body_now = (body_len as usize).min(extra.len());
                out.extend_from_slice(&extra[..body_now]);
                let remaining = body_len - body_now as u64;
                self.relay_request(&host, port, o, c, out, remaining).await;
            }
            Err((refused, why)) => self.answer_refusal(c, refused, &why).await,
        }
    }

    /// Refuses a request whose head (or, once the destination is known,
    /// path or body framing) no rule may read: recorded and logged like
    /// every refusal, answered with the status that says what is wrong
    /// (400, 411, 431) and the reason in its status line and body.
    async fn refuse_head(&self, mut c: TcpStream, name: &str, port: u16, bad: BadHead) {
        let why = format!("toolgate egress: {bad}");
        self.record(&ConnectionRecord {
            via: "http",
            name: name.to_string(),
            address: None,
            port,
            allowed: false,
            rule: None,
            reason: Some(why.clone()),
            bytes_up: 0,
            bytes_down: 0,
            approval: None,
        });
        let (code, text) = bad.status();
        let resp = http_error(code, &reason_phrase(text, &why), &why);
        let _ = c.write_all(resp.as_bytes()).await;
        let _ = c.shutdown().await;
    }

    async fn refuse_http(
        &self,
        c: TcpStream,
        via: &'static str,
        name: &str,
        port: u16,
        why: String,
    ) {
        self.record(&ConnectionRecord {
            via,
            name: name.to_string(),
            address: None,
            port,
            allowed: false,
            rule: None,
            reason: Some(why.clone()),
            bytes_up: 0,
            bytes_down: 0,
            approval: None,
        });
        self.answer_refusal(c, true, &why).await
    }

    async fn answer_refusal(&self, mut c: TcpStream, refused: bool, why: &str) {
        let resp = if refused {
            // The message is the reason phrase too: clients that show only
            // the status line (pip: "Tunnel connection failed: 403 ...")
            // still show what to add.
            http_error(403, &reason_phrase("Forbidden", why), why)
        } else {
            http_error(502, "Bad Gateway", &format!("toolgate egress: {why}"))
        };
        let _ = c.write_all(resp.as_bytes()).await;
        let _ = c.shutdown().await;
    }

    /// A tunnel: both ways until both end, or the idle timeout.
    async fn relay(
        &self,
        via: &'static str,
        host: &Host,
        port: u16,
        o: Opened,
        client: TcpStream,
        early: Vec<u8>,
    ) {
        let (cr, cw) = client.into_split();
        let (sr, mut sw) = o.stream.into_split();
        let up = AtomicU64::new(early.len() as u64);
        if !early.is_empty() && sw.write_all(&early).await.is_err() {
            return;
        }
        let down = AtomicU64::new(0);
        pump_both(cr, sw, sr, cw, &up, &down).await;
        self.record(&ConnectionRecord {
            via,
            name: host.to_string(),
            address: Some(o.address.ip()),
            port,
            allowed: true,
            rule: Some(o.rule),
            reason: None,
            bytes_up: up.load(Ordering::Relaxed),
            bytes_down: down.load(Ordering::Relaxed),
            approval: o.approved_by,
        });
    }

    /// One plain request: its head and `remaining` body bytes up, then the
    /// response down until the server closes.
    async fn relay_request(
        &self,
        host: &Host,
        port: u16,
        o: Opened,
        client: TcpStream,
        prefix: Vec<u8>,
        remaining: u64,
    ) {
        let (mut cr, mut cw) = client.into_split();
        let (mut sr, mut sw) = o.stream.into_split();
        let up = AtomicU64::new(0);
        let down = AtomicU64::new(0);
        let last = Activity::new();
        let send = async {
            sw.write_all(&prefix).await?;
            up.fetch_add(prefix.len() as u64, Ordering::Relaxed);
            let mut body = (&mut cr).take(remaining);
            copy_counted(&mut body, &mut sw, &up, &last).await?;
            Ok::<_, std::io::Error>(())
        };
        let ok = tokio::select! {
            r = send => r.is_ok(),
            _ = last.idle() => false,
        };
        if ok {
            // The response, until the server closes (it was asked to) or
            // nothing moves for the idle timeout. A client half-closing
            // after its request must still get the whole response, so its
            // end is not watched; what else it sends is never forwarded.
            tokio::select! {
                _ = copy_counted(&mut sr, &mut cw, &down, &last) => {}
                _ = last.idle() => {}
            }
        }
        let _ = cw.shutdown().await;
        self.record(&ConnectionRecord {
            via: "http",
            name: host.to_string(),
            address: Some(o.address.ip()),
            port,
            allowed: true,
            rule: Some(o.rule),
            reason: None,
            bytes_up: up.load(Ordering::Relaxed),
            bytes_down: down.load(Ordering::Relaxed),
            approval: o.approved_by,
        });
    }
}

/// The last time a byte moved, shared by both directions of a connection.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Completes once nothing moved for [`EGRESS_IDLE_TIMEOUT`].
    async fn idle(&self) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let quiet = self.start.elapsed().saturating_sub(last);
            if quiet >= EGRESS_IDLE_TIMEOUT {
                return;
            }
            tokio::time::sleep(EGRESS_IDLE_TIMEOUT - quiet).await;
        }
    }
}

const PUMP_BUFFER: usize = 256 << 10;

async fn copy_counted<R, W>(
    r: &mut R,
    w: &mut W,
    n: &AtomicU64,
    last: &Activity,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; PUMP_BUFFER];
    loop {
        let k = r.read(&mut buf).await?;
        if k == 0 {
            return Ok(());
        }
        last.touch();
        w.write_all(&buf[..k]).await?;
        n.fetch_add(k as u64, Ordering::Relaxed);
    }
}

/// Both directions of a tunnel, each half-closing the other side at its
/// end, until both end or nothing moves for the idle timeout.
async fn pump_both<R1, W1, R2, W2>(
    mut cr: R1,
    mut sw: W1,
    mut sr: R2,
    mut cw: W2,
    up: &AtomicU64,
    down: &AtomicU64,
) where
    R1: AsyncRead + Unpin,
    W1: AsyncWrite + Unpin,
    R2: AsyncRead + Unpin,
    W2: AsyncWrite + Unpin,
{
    let last = Activity::new();
    let a = async {
        let _ = copy_counted(&mut cr, &mut sw, up, &last).await;
        let _ = sw.shutdown().await;
    };
    let b = async {
        let _ = copy_counted(&mut sr, &mut cw, down, &last).await;
        let _ = cw.shutdown().await;
    };
    tokio::select! {
        _ = async { tokio::join!(a, b) } => {}
        _ = last.idle() => {}
    }
}

/// A reason phrase from a status's text and a message: visible ASCII and
/// spaces only.
fn reason_phrase(status: &str, msg: &str) -> String {
    let s: String = msg
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                ' '
            }
        })
        .collect();
    format!("{status} ({s})")
}

fn http_error(code: u16, reason: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         X-Toolgate-Egress: refused\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
        body.len() + 1
    )
}

/// Header fields the forwarded head never carries from the client: the
/// hop-by-hop ones (the proxy's own connection), and `Host`, which is set
/// from the allowed name.
const DROPPED: [&str; 5] = [
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "host",
];

/// Why a request is refused before (or, for its path and framing, beside)
/// the rules.
#[derive(Debug, thiserror::Error)]
enum BadHead {
    #[error("the request head is over {EGRESS_MAX_HEAD_BYTES} bytes")]
    TooLarge,
    #[error("the request head has more than {EGRESS_MAX_HEADERS} header fields")]
    TooManyHeaders,
    #[error(
        "a bare LF in the request head: its lines end with CRLF only (RFC 9112 2.2); \
         an origin that ends a line at a bare LF would read another request"
    )]
    BareLf,
    #[error("a bare CR in the request head: its lines end with CRLF only (RFC 9112 2.2)")]
    BareCr,
    #[error("a folded header line (obs-fold, RFC 9112 5.2)")]
    ObsFold,
    #[error("a control character in a header value")]
    HeaderValue,
    #[error("an invalid header name")]
    HeaderName,
    #[error("not an HTTP/1 request")]
    NotHttp1,
    #[error("more than one Content-Length")]
    ContentLengths,
    #[error("a Content-Length together with a Transfer-Encoding")]
    LengthAndEncoding,
    #[error("a Content-Length that is not a number")]
    BadLength,
    #[error("a plain http:// request body must have a Content-Length, not a Transfer-Encoding")]
    Chunked,
    #[error("the request path {path:?} is refused: {why}")]
    Path { path: String, why: TargetError },
}

impl BadHead {
    /// The status it is answered with.
    fn status(&self) -> (u16, &'static str) {
        match self {
            BadHead::TooLarge | BadHead::TooManyHeaders => (431, "Request Header Fields Too Large"),
            BadHead::Chunked => (411, "Length Required"),
            _ => (400, "Bad Request"),
        }
    }
}

enum HeadError {
    Refused(BadHead),
    Io,
}

/// Reads until httparse finds a whole request head: the bytes read, and
/// how many of them are the head (the rest came early: a body, or bytes
/// for a tunnel).
async fn read_head(c: &mut TcpStream) -> Result<(Vec<u8>, usize), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = c.read(&mut chunk).await.map_err(|_| HeadError::Io)?;
        if n == 0 {
            return Err(HeadError::Io);
        }
        buf.extend_from_slice(&chunk[..n]);
        // A head ends at a line end: parse again only when one came.
        if chunk[..n].contains(&b'\n') {
            let mut headers = [httparse::EMPTY_HEADER; EGRESS_MAX_HEADERS];
            match httparse::Request::new(&mut headers).parse(&buf) {
                Ok(httparse::Status::Complete(len)) if len > EGRESS_MAX_HEAD_BYTES => {
                    return Err(HeadError::Refused(BadHead::TooLarge));
                }
                Ok(httparse::Status::Complete(len)) => return Ok((buf, len)),
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(HeadError::Refused(refusal(&buf, e))),
            }
        }
        if buf.len() > EGRESS_MAX_HEAD_BYTES {
            return Err(HeadError::Refused(BadHead::TooLarge));
        }
    }
}

/// A request head, parsed (httparse: a token for the method and every
/// header name, no control character in a value) and checked for what
/// httparse lets through that an origin may read otherwise.
struct Parsed<'a> {
    method: &'a str,
    target: &'a str,
    /// `HTTP/1.minor`.
    minor: u8,
    headers: Vec<httparse::Header<'a>>,
}

fn parse_head(head: &[u8]) -> Result<Parsed<'_>, BadHead> {
    line_ends(head)?;
    let mut headers = [httparse::EMPTY_HEADER; EGRESS_MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(BadHead::NotHttp1),
        Err(e) => return Err(refusal(head, e)),
    }
    Ok(Parsed {
        method: req.method.unwrap_or_default(),
        target: req.path.unwrap_or_default(),
        minor: req.version.unwrap_or(1),
        headers: req.headers.to_vec(),
    })
}

/// Line ends in a request head: CRLF only, and no line folded onto the
/// one before. httparse ends a line at a bare LF (RFC 9112 2.2 lets a
/// recipient); an origin may or may not, and then the two read different
/// requests from the same bytes — the smuggling this refuses.
fn line_ends(head: &[u8]) -> Result<(), BadHead> {
    for (i, &b) in head.iter().enumerate() {
        match b {
            b'\n' if i == 0 || head[i - 1] != b'\r' => return Err(BadHead::BareLf),
            b'\n' if matches!(head.get(i + 1), Some(b' ' | b'\t')) => {
                return Err(BadHead::ObsFold);
            }
            // A CR last may be the start of a CRLF not read yet.
            b'\r' if head.get(i + 1).is_some_and(|&n| n != b'\n') => {
                return Err(BadHead::BareCr);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Why httparse refused `buf`, said as precisely as the bytes allow.
fn refusal(buf: &[u8], e: httparse::Error) -> BadHead {
    if let Err(bad) = line_ends(buf) {
        return bad;
    }
    match e {
        httparse::Error::HeaderName => BadHead::HeaderName,
        httparse::Error::HeaderValue => BadHead::HeaderValue,
        httparse::Error::TooManyHeaders => BadHead::TooManyHeaders,
        _ => BadHead::NotHttp1,
    }
}

/// The body's length, by its one `Content-Length` (none: no body). Any
/// other framing is refused: a `Transfer-Encoding` (411 alone, 400 with a
/// length), two lengths, a length that is not digits (`+5` parses as a
/// number in Rust) — each a way for the proxy and the origin to disagree
/// on where the body ends and the next request begins.
fn body_length(headers: &[httparse::Header<'_>]) -> Result<u64, BadHead> {
    let named = |n: &'static str| {
        headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(n))
    };
    let lengths: Vec<&[u8]> = named("content-length").map(|h| h.value).collect();
    match (
        lengths.as_slice(),
        named("transfer-encoding").next().is_some(),
    ) {
        ([], true) => Err(BadHead::Chunked),
        (_, true) => Err(BadHead::LengthAndEncoding),
        ([], false) => Ok(0),
        ([one], false) if !one.is_empty() && one.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(one)
                .ok()
                .and_then(|n| n.parse().ok())
                .ok_or(BadHead::BadLength)
        }
        ([_], false) => Err(BadHead::BadLength),
        _ => Err(BadHead::ContentLengths),
    }
}

/// `host:port`, `[v6]:port`, or (with a default port) `host`.
fn split_authority(s: &str, default_port: Option<u16>) -> Result<(Host, u16), String> {
    let s = s.rsplit_once('@').map_or(s, |(_, h)| h);
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or_else(|| format!("toolgate egress: bad address {s:?}"))?;
        let after = &rest[end + 1..];
        (
            &s[..end + 2],
            after.strip_prefix(':').map(|p| p.to_string()),
        )
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p.to_string())),
            None => (s, None),
        }
    };
    let port = match (port, default_port) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("toolgate egress: bad port in {s:?}"))?,
        (None, Some(d)) => d,
        (None, None) => return Err(format!("toolgate egress: {s:?} has no port")),
    };
    let host = parse_host(host).map_err(|e| format!("toolgate egress: {e}"))?;
    Ok((host, port))
}

/// Reads a SOCKS5 greeting and request. `Ok(None)`: the client was
/// answered already (no acceptable method, or a command other than
/// CONNECT). The host is `Err` with its text when it is no host egress
/// reads.
async fn socks5_request(c: &mut TcpStream) -> Result<Option<(Result<Host, String>, u16)>, String> {
    let io = |e: std::io::Error| e.to_string();
    let mut hdr = [0u8; 2];
    c.read_exact(&mut hdr).await.map_err(io)?;
    let mut methods = vec![0u8; hdr[1] as usize];
    c.read_exact(&mut methods).await.map_err(io)?;
    if !methods.contains(&0) {
        let _ = c.write_all(&[5, 0xff]).await;
        return Ok(None);
    }
    c.write_all(&[5, 0]).await.map_err(io)?;
    let mut req = [0u8; 4];
    c.read_exact(&mut req).await.map_err(io)?;
    if req[0] != 5 {
        return Err(format!("version {}", req[0]));
    }
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a).await.map_err(io)?;
            Ok(Host::Ip(IpAddr::V4(Ipv4Addr::from(a))))
        }
        4 => {
            let mut a = [0u8; 16];
            c.read_exact(&mut a).await.map_err(io)?;
            Ok(Host::Ip(IpAddr::V6(Ipv6Addr::from(a))))
        }
        3 => {
            let mut len = [0u8; 1];
            c.read_exact(&mut len).await.map_err(io)?;
            let mut name = vec![0u8; len[0] as usize];
            c.read_exact(&mut name).await.map_err(io)?;
            let name = String::from_utf8_lossy(&name).into_owned();
            parse_host(&name).map_err(|e| e.to_string())
        }
        t => return Err(format!("address type {t}")),
    };
    let mut port = [0u8; 2];
    c.read_exact(&mut port).await.map_err(io)?;
    if req[1] != 1 {
        // 7: command not supported (BIND, UDP ASSOCIATE).
        let _ = c.write_all(&[5, 7, 0, 1, 0, 0, 0, 0, 0, 0]).await;
        return Ok(None);
    }
    Ok(Some((host, u16::from_be_bytes(port))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::Global;
    use std::sync::Mutex;

    /// A proxy for `allow` (and `allow_private`), its address, and the
    /// records it made.
    async fn proxy(
        allow: &[&str],
        private: &[&str],
    ) -> (
        std::net::SocketAddr,
        ProxyGuard,
        Arc<Mutex<Vec<ConnectionRecord>>>,
    ) {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let policy = Policy::parse(
            &s(allow),
            Arc::new(Global::parse(&[], &s(private)).unwrap()),
            "[plugins.bash.grants]".into(),
        )
        .unwrap();
        let records = Arc::new(Mutex::new(Vec::new()));
        let r2 = records.clone();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let guard = Proxy {
            policy: Arc::new(policy),
            who: Attribution {
                call_id: "call-1".into(),
                plugin: "bash".into(),
                scope: "".into(),
            },
            sink: Some(Arc::new(move |_, r| r2.lock().unwrap().push(r.clone()))),
            ask: None,
        }
        .serve(l)
        .unwrap();
        (at, guard, records)
    }

    /// An HTTP server answering every request it reads with `body`,
    /// echoing each request's line (`X-Request-Line`) and `Host` headers
    /// (`X-Host`, `(none)` without one). It reads a connection the way a
    /// lenient origin does — httparse, which takes a bare LF for a line end
    /// — and answers every request it finds there, so a request smuggled
    /// inside another's head shows as a second answer. It closes after a
    /// request asking to close, on a head it cannot parse (a 400 with
    /// `X-Origin-Error`), or after half a second without a byte.
    async fn origin(body: &'static str) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = vec![0u8; 8192];
                    loop {
                        let mut headers = [httparse::EMPTY_HEADER; 64];
                        let mut req = httparse::Request::new(&mut headers);
                        match req.parse(&buf) {
                            Ok(httparse::Status::Complete(n)) => {
                                let line = format!(
                                    "{} {} HTTP/1.{}",
                                    req.method.unwrap_or(""),
                                    req.path.unwrap_or(""),
                                    req.version.unwrap_or(1)
                                );
                                let value = |name: &str| {
                                    req.headers
                                        .iter()
                                        .filter(|h| h.name.eq_ignore_ascii_case(name))
                                        .map(|h| String::from_utf8_lossy(h.value).into_owned())
                                        .collect::<Vec<_>>()
                                };
                                let hosts = value("host");
                                let host = if hosts.is_empty() {
                                    "(none)".to_string()
                                } else {
                                    hosts.join(", ")
                                };
                                let close = value("connection").iter().any(|v| v == "close");
                                let len = value("content-length")
                                    .first()
                                    .and_then(|v| v.parse::<usize>().ok())
                                    .unwrap_or(0);
                                buf.drain(..(n + len).min(buf.len()));
                                let resp = format!(
                                    "HTTP/1.1 200 OK\r\nX-Request-Line: {line}\r\nX-Host: {host}\r\n\
                                     Content-Length: {}\r\n\r\n{body}",
                                    body.len()
                                );
                                let _ = s.write_all(resp.as_bytes()).await;
                                if close {
                                    return;
                                }
                                continue;
                            }
                            Ok(httparse::Status::Partial) => {}
                            Err(e) => {
                                let resp = format!(
                                    "HTTP/1.1 400 Bad Request\r\nX-Origin-Error: {e}\r\n\
                                     Content-Length: 0\r\n\r\n"
                                );
                                let _ = s.write_all(resp.as_bytes()).await;
                                return;
                            }
                        }
                        match tokio::time::timeout(Duration::from_millis(500), s.read(&mut chunk))
                            .await
                        {
                            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                    }
                });
            }
        });
        port
    }

    async fn exchange(at: std::net::SocketAddr, bytes: &[u8]) -> Vec<u8> {
        let mut c = TcpStream::connect(at).await.unwrap();
        c.write_all(bytes).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await;
        out
    }

    #[tokio::test]
    async fn plain_http_is_forwarded_in_origin_form_and_recorded() {
        let port = origin("hello").await;
        let (at, _g, records) = proxy(&["127.0.0.1"], &["127.0.0.1/32"]).await;
        let req = format!(
            "GET http://127.0.0.1:{port}/simple/x?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Connection: keep-alive\r\n\r\n"
        );
        let out = String::from_utf8(exchange(at, req.as_bytes()).await).unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(
            out.contains("X-Request-Line: GET /simple/x?q=1 HTTP/1.1"),
            "{out}"
        );
        assert!(out.ends_with("hello"), "{out}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = records.lock().unwrap();
        assert_eq!(r.len(), 1);
        assert!(r[0].allowed && r[0].via == "http" && r[0].rule.as_deref() == Some("127.0.0.1"));
        assert!(r[0].bytes_down > 5 && r[0].bytes_up > 20, "{:?}", r[0]);
    }

    #[tokio::test]
    async fn connect_tunnels_and_refusals_say_what_to_add() {
        let port = origin("tunnelled").await;
        let (at, _g, records) = proxy(&["localhost"], &["127.0.0.1/32"]).await;
        let req = format!(
            "CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost\r\n\r\nGET / HTTP/1.1\r\n\r\n"
        );
        let out = String::from_utf8(exchange(at, req.as_bytes()).await).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK"),
            "{out}"
        );
        assert!(out.ends_with("tunnelled"), "{out}");

        // Not granted: 403 with the line to add, in the status and the body.
        let out = String::from_utf8(exchange(at, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n").await)
            .unwrap();
        assert!(
            out.starts_with("HTTP/1.1 403 Forbidden (toolgate egress"),
            "{out}"
        );
        assert!(
            out.contains("add \"pypi.org\" to `egress = [...]` under [plugins.bash.grants]"),
            "{out}"
        );
        // Loopback by another name: refused by class, after resolution.
        let (at2, _g2, rec2) = proxy(&["localhost", "2130706433"], &[]).await;
        for target in ["localhost", "2130706433", "[::ffff:127.0.0.1]"] {
            let out = String::from_utf8(
                exchange(
                    at2,
                    format!("CONNECT {target}:{port} HTTP/1.1\r\n\r\n").as_bytes(),
                )
                .await,
            )
            .unwrap();
            assert!(out.starts_with("HTTP/1.1 403"), "{target}: {out}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = rec2.lock().unwrap();
        assert!(r.iter().all(|r| !r.allowed));
        assert_eq!(r[0].rule.as_deref(), Some("class:loopback"));
        assert!(r[0].reason.as_deref().unwrap().contains("allow_private"));
        let ok = records.lock().unwrap();
        assert!(
            ok.iter()
                .any(|r| r.allowed && r.via == "connect" && r.bytes_down > 0)
        );
    }

    #[tokio::test]
    async fn socks5_resolves_names_in_the_proxy_and_refuses_by_ruleset() {
        let port = origin("socks").await;
        let (at, _g, records) = proxy(&["localhost"], &["127.0.0.1/32"]).await;
        let mut req = vec![5, 1, 0, 5, 1, 0, 3, 9];
        req.extend_from_slice(b"localhost");
        req.extend_from_slice(&port.to_be_bytes());
        req.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let out = exchange(at, &req).await;
        assert_eq!(&out[..2], &[5, 0]);
        assert_eq!(&out[2..4], &[5, 0], "{out:?}");
        assert!(String::from_utf8_lossy(&out[12..]).ends_with("socks"));
        // An IP not granted (and private): reply 2, recorded.
        let mut req = vec![5, 1, 0, 5, 1, 0, 1, 169, 254, 169, 254];
        req.extend_from_slice(&80u16.to_be_bytes());
        let out = exchange(at, &req).await;
        assert_eq!(&out[2..4], &[5, 2]);
        // UDP ASSOCIATE: not supported.
        let mut req = vec![5, 1, 0, 5, 3, 0, 1, 8, 8, 8, 8, 0, 53];
        req.truncate(13);
        let out = exchange(at, &req).await;
        assert_eq!(&out[2..4], &[5, 7]);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = records.lock().unwrap();
        assert!(
            r.iter()
                .any(|r| r.allowed && r.via == "socks5" && r.name == "localhost")
        );
        assert!(r.iter().any(|r| !r.allowed && r.name == "169.254.169.254"));
    }

    #[tokio::test]
    async fn hostile_clients_are_bounded() {
        let (at, _g, _r) = proxy(&[], &[]).await;
        // A head that never ends: 431 once over the cap.
        let mut c = TcpStream::connect(at).await.unwrap();
        let junk = vec![b'a'; EGRESS_MAX_HEAD_BYTES + 10];
        let _ = c.write_all(b"GET http://x/ HTTP/1.1\r\nX: ").await;
        let _ = c.write_all(&junk).await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await;
        assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 431"));
        // Origin form, https in plain, chunked bodies: refused with a reason.
        let out = exchange(at, b"GET / HTTP/1.1\r\n\r\n").await;
        assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 400"));
        let out = exchange(at, b"GET https://x/ HTTP/1.1\r\n\r\n").await;
        assert!(String::from_utf8_lossy(&out).contains("CONNECT"));
        let out = exchange(
            at,
            b"POST http://x/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .await;
        assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 411"));
        // Garbage: no answer beyond a 400, no panic.
        let out = exchange(at, b"\x00\x01\x02\r\n\r\n").await;
        assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 400"));
        // More connections than the cap: the one over it is refused.
        let mut held = Vec::new();
        for _ in 0..EGRESS_MAX_CONNECTIONS {
            held.push(TcpStream::connect(at).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let out = exchange(at, b"CONNECT a:1 HTTP/1.1\r\n\r\n").await;
        assert!(
            String::from_utf8_lossy(&out).starts_with("HTTP/1.1 503"),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    #[tokio::test]
    async fn a_pipelined_second_request_never_reaches_the_server() {
        let port = origin("first").await;
        let (at, _g, _r) = proxy(&["GET 127.0.0.1/public/*"], &["127.0.0.1/32"]).await;
        let req = format!(
            "GET http://127.0.0.1:{port}/public/a HTTP/1.1\r\n\r\nGET /admin HTTP/1.1\r\n\r\n"
        );
        let out = String::from_utf8(exchange(at, req.as_bytes()).await).unwrap();
        assert!(out.contains("X-Request-Line: GET /public/a"), "{out}");
        assert_eq!(out.matches("HTTP/1.1 200").count(), 1, "{out}");
        let out = String::from_utf8(
            exchange(
                at,
                format!("GET http://127.0.0.1:{port}/admin HTTP/1.1\r\n\r\n").as_bytes(),
            )
            .await,
        )
        .unwrap();
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    }

    /// What the origin answered, read as text.
    async fn sent(at: std::net::SocketAddr, req: &str) -> String {
        String::from_utf8_lossy(&exchange(at, req.as_bytes()).await).into_owned()
    }

    /// Issue 40, case 4: a head a lenient origin reads otherwise than the
    /// rules did — a second request behind a bare LF, a bare CR, a folded
    /// line, a control character, two lengths, an invalid name — is
    /// refused with a 400 saying why, recorded, and never reaches the
    /// origin. The twins, the same requests well formed, pass alone.
    #[tokio::test]
    async fn a_head_read_two_ways_is_refused_and_never_forwarded() {
        let port = origin("public").await;
        let (at, _g, records) = proxy(&["* 127.0.0.1/public/*"], &["127.0.0.1/32"]).await;
        let url = format!("http://127.0.0.1:{port}/public/a.txt");
        let cases = [
            // As reported: a second request behind a bare LF, in a header.
            (
                format!(
                    "GET {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Smuggle: a\n\nGET /secret.txt \
                     HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                ),
                "bare LF",
            ),
            (
                format!("GET {url} HTTP/1.1\nHost: 127.0.0.1\n\n"),
                "bare LF",
            ),
            (
                format!("GET {url} HTTP/1.1\r\nX-A: a\rGET /secret.txt HTTP/1.1\r\n\r\n"),
                "bare CR",
            ),
            (
                format!("GET {url} HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n"),
                "folded",
            ),
            (
                format!("GET {url} HTTP/1.1\r\nX-A: a\x01b\r\n\r\n"),
                "control character",
            ),
            (
                format!(
                    "POST {url} HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 41\r\n\r\n\
                     GET /secret.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                ),
                "more than one Content-Length",
            ),
            (
                format!(
                    "POST {url} HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n\
                     0\r\n\r\n"
                ),
                "Transfer-Encoding",
            ),
            (
                format!("POST {url} HTTP/1.1\r\nContent-Length: +4\r\n\r\nabcd"),
                "Content-Length",
            ),
            (
                format!("GET {url} HTTP/1.1\r\nContent-Length : 0\r\n\r\n"),
                "header name",
            ),
            (
                format!("GET {url} HTTP/1.1\r\nX A: b\r\n\r\n"),
                "header name",
            ),
        ];
        for (req, why) in &cases {
            let out = sent(at, req).await;
            assert!(out.starts_with("HTTP/1.1 400"), "{req:?}: {out}");
            assert!(out.contains(why), "{req:?} should say {why:?}: {out}");
            assert!(
                !out.contains("X-Request-Line") && !out.contains("X-Origin-Error"),
                "{req:?} reached the origin: {out}"
            );
        }
        // The twins: one request, well formed (a tab in a value, a body by
        // Content-Length), reaches the origin once.
        for (req, line) in [
            (
                format!("GET {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\tb\r\n\r\n"),
                "GET /public/a.txt HTTP/1.1",
            ),
            (
                format!("POST {url} HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
                "POST /public/a.txt HTTP/1.1",
            ),
        ] {
            let out = sent(at, &req).await;
            assert!(out.starts_with("HTTP/1.1 200 OK"), "{req:?}: {out}");
            assert_eq!(out.matches("X-Request-Line").count(), 1, "{out}");
            assert!(
                out.contains(&format!("X-Request-Line: {line}\r\n")),
                "{out}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = records.lock().unwrap();
        let refused: Vec<_> = r.iter().filter(|r| !r.allowed).collect();
        assert_eq!(refused.len(), cases.len(), "{r:?}");
        assert!(
            refused.iter().all(|r| r.via == "http"
                && r.reason
                    .as_deref()
                    .is_some_and(|m| m.contains("toolgate egress"))),
            "{refused:?}"
        );
        assert_eq!(r.iter().filter(|r| r.allowed).count(), 2);
    }

    /// Issue 40, case 5: the rules match the path in its normal form (dot
    /// segments removed, unreserved characters decoded: `.` in any case),
    /// and the origin gets that form; a path without a safe one (an
    /// encoded `/`, a `\`, a NUL, a bad `%`, `..;`, above the root) is
    /// refused with a 400. The twins: `/public/a.txt` and its dotted and
    /// encoded spellings reach the origin as `/public/a.txt`.
    #[tokio::test]
    async fn dot_segments_never_leave_the_allowed_path() {
        let port = origin("public").await;
        let (at, _g, records) = proxy(&["GET 127.0.0.1/public/*"], &["127.0.0.1/32"]).await;
        let get = |path: &str| format!("GET http://127.0.0.1:{port}{path} HTTP/1.1\r\n\r\n");
        let refused = [
            ("/public/../secret.txt", 403),
            ("/public/%2e%2e/secret.txt", 403),
            ("/public/%2E%2E/secret.txt", 403),
            ("/public/.%2e/secret.txt", 403),
            ("/public/a/../../secret.txt", 403),
            ("/public/..%2fsecret.txt", 400),
            ("/public/..%2Fsecret.txt", 400),
            ("/public/..\\secret.txt", 400),
            ("/public/..%5csecret.txt", 400),
            ("/public/..;/secret.txt", 400),
            ("/public/%00", 400),
            ("/public/%zz", 400),
            ("/public/%2", 400),
            ("/public/../../secret.txt", 400),
        ];
        for (path, status) in refused {
            let out = sent(at, &get(path)).await;
            assert!(
                out.starts_with(&format!("HTTP/1.1 {status} ")),
                "{path}: {out}"
            );
            assert!(
                !out.contains("X-Request-Line"),
                "{path} reached the origin: {out}"
            );
        }
        for (path, seen) in [
            ("/public/a.txt", "/public/a.txt"),
            ("/public/./a.txt", "/public/a.txt"),
            ("/public/b/../a.txt", "/public/a.txt"),
            ("/public/%61.txt", "/public/a.txt"),
            ("/public/%2E/a.txt", "/public/a.txt"),
            ("/public/a%20b.txt?x=%2F..", "/public/a%20b.txt?x=%2F.."),
            ("/public/%c3%a9", "/public/%C3%A9"),
        ] {
            let out = sent(at, &get(path)).await;
            assert!(out.starts_with("HTTP/1.1 200 OK"), "{path}: {out}");
            assert!(
                out.contains(&format!("X-Request-Line: GET {seen} HTTP/1.1\r\n")),
                "{path}: {out}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = records.lock().unwrap();
        assert_eq!(r.iter().filter(|r| !r.allowed).count(), refused.len());
        assert!(
            r.iter()
                .filter(|r| !r.allowed)
                .all(|r| r.name == "127.0.0.1" && r.port == port),
            "{r:?}"
        );
    }

    /// Issue 40, case 7: the origin gets `Host` from the name the rules
    /// allowed (RFC 9112 3.2.2: the absolute form's authority), never the
    /// client's, so an allowed address is no way to every virtual host
    /// behind it. The twins: no `Host`, or the matching one, work; a
    /// tunnel's bytes are untouched.
    #[tokio::test]
    async fn host_is_the_allowed_name_never_the_client_s() {
        let port = origin("vhost").await;
        let (at, _g, _r) = proxy(&["localhost", "127.0.0.1"], &["127.0.0.1/32"]).await;
        let ip = format!("127.0.0.1:{port}");
        let name = format!("localhost:{port}");
        for (authority, headers, seen) in [
            (&ip, "Host: admin.internal\r\n".to_string(), &ip),
            (
                &ip,
                "Host: 127.0.0.1\r\nHost: admin.internal\r\n".into(),
                &ip,
            ),
            (
                &format!("LocalHost.:{port}"),
                "Host: admin.internal\r\n".into(),
                &name,
            ),
            (&format!("user:pw@127.0.0.1:{port}"), String::new(), &ip),
            // The twins.
            (&ip, String::new(), &ip),
            (&ip, format!("Host: {ip}\r\n"), &ip),
            (&name, format!("host: {name}\r\n"), &name),
        ] {
            let req = format!("GET http://{authority}/x HTTP/1.1\r\n{headers}\r\n");
            let out = sent(at, &req).await;
            assert!(out.starts_with("HTTP/1.1 200 OK"), "{req:?}: {out}");
            assert!(
                out.contains(&format!("X-Host: {seen}\r\n")),
                "{req:?}: {out}"
            );
        }
        // CONNECT: what goes through the tunnel is the client's own.
        let out = sent(
            at,
            &format!(
                "CONNECT {ip} HTTP/1.1\r\nHost: {ip}\r\n\r\nGET /x HTTP/1.1\r\nHost: inner.example\r\n\
                 Connection: close\r\n\r\n"
            ),
        )
        .await;
        assert!(out.contains("X-Host: inner.example\r\n"), "{out}");
    }

    /// The figures in BENCHMARKS.md ("Egress proxy"): a 100 MiB download
    /// from a local server through a CONNECT tunnel vs direct, unpaced and
    /// over links of 1, 4 and 10 Gbit/s (the origin paced), connection
    /// setup overhead, and the CPU the proxy takes at 100 connections/s.
    /// `cargo test -p toolgate --lib [--release] egress::proxy::tests::bench -- --ignored --nocapture`
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a benchmark: run it with --ignored --nocapture"]
    async fn bench() {
        const MIB: usize = 1 << 20;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let block = Arc::new(vec![7u8; MIB]);
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let block = block.clone();
                tokio::spawn(async move {
                    let mut head = vec![0u8; 1024];
                    let n = s.read(&mut head).await.unwrap_or(0);
                    let big = head[..n].starts_with(b"GET /big");
                    // `GET /paced/N`: 100 MiB at N MB/s, as a link of that
                    // speed delivers it (64 KiB at a time, on schedule).
                    let paced = std::str::from_utf8(&head[..n])
                        .ok()
                        .and_then(|h| h.strip_prefix("GET /paced/"))
                        .and_then(|h| h.split(' ').next())
                        .and_then(|r| r.parse::<f64>().ok());
                    if let Some(mb_per_s) = paced {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
                        let start = tokio::time::Instant::now();
                        let chunk = 64 << 10;
                        for i in 0..(100 * MIB / chunk) {
                            let due = (i * chunk) as f64 / (mb_per_s * 1e6);
                            tokio::time::sleep_until(start + Duration::from_secs_f64(due)).await;
                            if s.write_all(&block[..chunk]).await.is_err() {
                                return;
                            }
                        }
                    } else if big {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await;
                        for _ in 0..100 {
                            if s.write_all(&block).await.is_err() {
                                return;
                            }
                        }
                    } else {
                        let _ = s
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .await;
                    }
                });
            }
        });
        let (at, _g, _r) = proxy(&["127.0.0.1"], &["127.0.0.1/32"]).await;
        async fn fetch(
            via: Option<std::net::SocketAddr>,
            port: u16,
            path: &str,
        ) -> (usize, Duration) {
            let t0 = Instant::now();
            let mut c = match via {
                Some(p) => {
                    let mut c = TcpStream::connect(p).await.unwrap();
                    c.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
                        .await
                        .unwrap();
                    let mut b = [0u8; 39];
                    c.read_exact(&mut b).await.unwrap();
                    assert!(b.starts_with(b"HTTP/1.1 200"));
                    c
                }
                None => TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
            };
            c.set_nodelay(true).unwrap();
            c.write_all(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut buf = vec![0u8; 256 << 10];
            let mut total = 0;
            loop {
                let n = c.read(&mut buf).await.unwrap();
                let bulk = path == "/big" || path.starts_with("/paced/");
                if n == 0 || (!bulk && total + n >= 40) {
                    total += n;
                    break;
                }
                total += n;
            }
            (total, t0.elapsed())
        }
        fn median(mut v: Vec<Duration>) -> Duration {
            v.sort();
            v[v.len() / 2]
        }
        // 100 MiB, five rounds each, alternating.
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let (n, d) = fetch(None, port, "/big").await;
            assert!(n >= 100 * MIB);
            direct.push(d);
            let (n, d) = fetch(Some(at), port, "/big").await;
            assert!(n >= 100 * MIB);
            proxied.push(d);
        }
        let (d, p) = (median(direct), median(proxied));
        println!(
            "100 MiB: direct {:.1} ms, through the proxy {:.1} ms: {:.2}x",
            d.as_secs_f64() * 1e3,
            p.as_secs_f64() * 1e3,
            p.as_secs_f64() / d.as_secs_f64()
        );
        // The same 100 MiB over links of a given speed (the origin paced):
        // what the relay costs where the network, not the loopback's
        // memory copy, sets the pace. 125 MB/s is 1 Gbit/s.
        for mb_per_s in [125.0, 500.0, 1250.0] {
            let path = format!("/paced/{mb_per_s}");
            let (mut direct, mut proxied) = (Vec::new(), Vec::new());
            for _ in 0..3 {
                let (n, d) = fetch(None, port, &path).await;
                assert!(n >= 100 * MIB);
                direct.push(d);
                let (n, d) = fetch(Some(at), port, &path).await;
                assert!(n >= 100 * MIB);
                proxied.push(d);
            }
            let (d, p) = (median(direct), median(proxied));
            println!(
                "100 MiB at {:.0} Gbit/s: direct {:.0} ms, through the proxy {:.0} ms: {:.3}x",
                mb_per_s * 8.0 / 1000.0,
                d.as_secs_f64() * 1e3,
                p.as_secs_f64() * 1e3,
                p.as_secs_f64() / d.as_secs_f64()
            );
        }
        // Setup: connect + (CONNECT) + a 2-byte response, 300 each.
        let (mut direct, mut proxied) = (Vec::new(), Vec::new());
        for _ in 0..300 {
            direct.push(fetch(None, port, "/small").await.1);
            proxied.push(fetch(Some(at), port, "/small").await.1);
        }
        let (d, p) = (median(direct), median(proxied));
        println!(
            "small request: direct {:.0} us, through the proxy {:.0} us (median): +{:.0} us per connection",
            d.as_secs_f64() * 1e6,
            p.as_secs_f64() * 1e6,
            (p.as_secs_f64() - d.as_secs_f64()) * 1e6
        );
        // CPU at 100 connections/s for 5 s, minus the same load direct.
        fn cpu() -> Duration {
            let mut u: libc::rusage = unsafe { std::mem::zeroed() };
            unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
            let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
            tv(u.ru_utime) + tv(u.ru_stime)
        }
        let mut used = Vec::new();
        for via in [None, Some(at)] {
            let c0 = cpu();
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut tasks = Vec::new();
            for _ in 0..500 {
                tick.tick().await;
                tasks.push(tokio::spawn(fetch(via, port, "/small")));
            }
            for t in tasks {
                t.await.unwrap();
            }
            used.push(cpu() - c0);
        }
        println!(
            "100 connections/s for 5 s: CPU direct {:.0} ms, through the proxy {:.0} ms: the proxy {:.1} % of one core",
            used[0].as_secs_f64() * 1e3,
            used[1].as_secs_f64() * 1e3,
            (used[1].as_secs_f64() - used[0].as_secs_f64()) / 5.0 * 100.0
        );
    }
}
