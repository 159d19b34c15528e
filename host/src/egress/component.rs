//! Components under the same rules: a component's own `wasi:http`
//! requests (the `web_fetch` tool's included) and `wasi:sockets` TCP
//! connects are decided by the egress policy the proxy uses — `[egress]
//! deny` first, the grant's rules, address classes — attributed to the
//! call being served, logged and recorded (audit kind `egress`).
//!
//! Two grants reach the network from a component, and they coexist:
//!
//! * `network = ["host:port"]` (the older, exact grant): the name is
//!   resolved once, at load, and a connection to it goes to one of *those*
//!   addresses (no second resolution). The operator named the exact
//!   `host:port`, so its addresses are not refused by class (a
//!   `network = ["127.0.0.1:8080"]` keeps working); `[egress] deny` still
//!   applies, by name and by address.
//! * `egress = [...]` (rules by name): resolved at each request, every
//!   address checked (deny blocks, then classes unless `[egress]
//!   allow_private` holds it), the connection made to the address that was
//!   checked.
//!
//! A destination is allowed by either: `[egress] deny`, then `network`,
//! then `egress`. A refusal names the `egress` rule to add. With `[egress]
//! ask = true` a `wasi:http` request to a destination neither allows is
//! asked about as a spawn's connection is (see [`super::ask`]), with the
//! call's asking that [`ComponentEgress::set_call`] installs; so is a
//! `wasi:sockets` connect ([`ComponentEgress::connect_check`]), whose
//! question names an address and port only (the guest looked up no name)
//! and says so — a deny rule or an address class refuses it before any
//! question, and it counts toward the call's bound of questions.
//!
//! `wasi:http`: the host makes every request itself
//! ([`crate::seams::http`]), so it sees method and path even for `https` —
//! `METHOD HOST/PATH` rules apply to a component's requests of either
//! scheme. The path is matched in the normal form the proxy uses
//! ([`super::target`]), and the request is sent with that form (and `Host`
//! from the allowed name): what the origin gets is what was matched. A redirect is a new request the
//! guest makes (`wasi:http` never follows one), checked again.
//! `wasi:sockets`: the guest connects to an *address* (it has no name
//! lookup), so only `network` addresses and `egress` rules naming an
//! address (`"203.0.113.7:5432"`) can allow it; classes and deny blocks
//! apply as to any address. Bytes are counted for `wasi:http` connections;
//! a socket's connect is recorded when it is decided.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::addr::{Host, parse_host};
use super::ask::CallAsk;
use super::proxy::{Attribution, ConnectionRecord, RecordSink};
use super::rules::Destination;
use super::target::NormalTarget;
use super::{APPROVAL_RULE, Asking, Global, OpenError, Opened, Policy, Refusal};

/// An entry of the `network` grant: the name as written and the addresses
/// it resolved to at load.
#[derive(Clone, Debug)]
pub struct Pinned {
    pub host: Host,
    pub port: u16,
    pub addrs: Vec<SocketAddr>,
}

/// One plugin instance's egress: its rules, its `network` grant, where its
/// connections are recorded, and the call they belong to.
pub struct ComponentEgress {
    plugin: Arc<str>,
    policy: Policy,
    pinned: Vec<Pinned>,
    sink: Arc<OnceLock<RecordSink>>,
    who: Mutex<Attribution>,
    /// The asking of the call being served (`[egress] ask`), if any.
    ask: Mutex<Option<Arc<CallAsk>>>,
}

impl ComponentEgress {
    /// The egress of `plugin`: `egress` rules (or none) under `global`,
    /// and the `network` grant (each entry as written, with the addresses
    /// it resolved to at load).
    pub fn new(
        plugin: Arc<str>,
        egress: Option<&Policy>,
        global: Arc<Global>,
        network: &[(String, Vec<SocketAddr>)],
        sink: Arc<OnceLock<RecordSink>>,
    ) -> ComponentEgress {
        let policy = match egress {
            Some(p) => p.clone(),
            None => Policy {
                allow: Vec::new(),
                global,
                grant_table: format!("[plugins.{plugin}.grants]"),
            },
        };
        let pinned = network
            .iter()
            .filter_map(|(written, addrs)| {
                let (host, port) = split_host_port(written)?;
                Some(Pinned {
                    host: parse_host(&host).ok()?,
                    port,
                    addrs: addrs.clone(),
                })
            })
            .collect();
        ComponentEgress {
            who: Mutex::new(Attribution {
                plugin: plugin.to_string(),
                ..Default::default()
            }),
            plugin,
            policy,
            pinned,
            sink,
            ask: Mutex::new(None),
        }
    }

    /// The call the next connections belong to (`None` between calls),
    /// and who its connections ask (`[egress] ask`).
    pub fn set_call(&self, call_id: Option<(&str, &str)>, ask: Option<Arc<CallAsk>>) {
        let mut who = self.who.lock().unwrap_or_else(|p| p.into_inner());
        let (id, scope) = call_id.unwrap_or(("", ""));
        if who.call_id != id || who.scope != scope {
            who.call_id = id.to_string();
            who.scope = scope.to_string();
        }
        *self.ask.lock().unwrap_or_else(|p| p.into_inner()) = ask;
    }

    fn attribution(&self) -> Attribution {
        self.who.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Logs `r` and hands it to the sink (the audit record).
    pub fn record(&self, who: &Attribution, r: &ConnectionRecord) {
        r.log(who);
        if let Some(sink) = self.sink.get() {
            sink(who, r);
        }
    }

    /// Records `r`, a refused connection to `name` (`address` when the
    /// refusal names none) for `who`.
    fn refused(
        &self,
        who: &Attribution,
        via: &'static str,
        name: String,
        address: Option<IpAddr>,
        port: u16,
        r: &Refusal,
    ) {
        self.record(
            who,
            &ConnectionRecord {
                via,
                name,
                address: r.address.or(address),
                port,
                allowed: false,
                rule: r.record_rule(),
                reason: Some(r.message.clone()),
                bytes_up: 0,
                bytes_down: 0,
                approval: r.refused_by.clone(),
            },
        );
    }

    /// A `[egress] deny` rule refusing `host:port` by name, if one does.
    fn denied_by_name(&self, d: &Destination<'_>) -> Option<Refusal> {
        self.policy
            .global
            .deny
            .iter()
            .any(|r| r.matches(d))
            .then(|| self.policy.check_name(d).err())
            .flatten()
    }

    /// Decides and connects one `wasi:http` request's connection: its
    /// path (with its query) normalised — refused when it has no normal
    /// form —, then deny, then the `network` grant (to its load-time
    /// addresses), then the `egress` rules (resolved now, every address
    /// checked). Returns the connection and the path the request must be
    /// sent with: the normal form the rules matched. Refusals are recorded
    /// here; an allowed connection is recorded when it closes.
    pub async fn open(
        self: &Arc<Self>,
        host: &Host,
        port: u16,
        method: &str,
        target: &str,
    ) -> Result<(Counted, NormalTarget), OpenError> {
        let name = host.to_string();
        let path = match NormalTarget::parse(target) {
            Ok(p) => p,
            Err(e) => {
                let r = Refusal::plain(format!(
                    "toolgate egress: the request path {target:?} is refused: {e}"
                ));
                self.refused(&self.attribution(), "wasi:http", name, None, port, &r);
                return Err(OpenError::Refused(r));
            }
        };
        let d = Destination {
            host,
            port,
            http: Some((method, &path)),
        };
        if let Some(r) = self.denied_by_name(&d) {
            self.refused(&self.attribution(), "wasi:http", name, None, port, &r);
            return Err(OpenError::Refused(r));
        }
        let ask = self.ask.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let opened = match self
            .pinned
            .iter()
            .find(|p| p.host == *host && p.port == port)
        {
            Some(p) => self.open_pinned(p).await,
            None => {
                let asking = ask.as_deref().map(|ask| Asking {
                    ask,
                    plugin: &self.plugin,
                    via: "wasi:http",
                });
                self.policy.open_asking(&d, asking).await
            }
        };
        match opened {
            Ok(o) => Ok((
                Counted::new(self.clone(), self.attribution(), name, o),
                path,
            )),
            Err(OpenError::Refused(r)) => {
                self.refused(&self.attribution(), "wasi:http", name, None, port, &r);
                Err(OpenError::Refused(r))
            }
            Err(e) => Err(e),
        }
    }

    /// A `network` entry: one of its load-time addresses (deny blocks
    /// still apply; classes do not: the operator named it exactly).
    async fn open_pinned(&self, p: &Pinned) -> Result<Opened, OpenError> {
        let rule = format!("network: {}", shown(&p.host, p.port));
        let mut last = None;
        for a in &p.addrs {
            if let Some(r) = self.deny_address(&p.host, a.ip()) {
                last.get_or_insert(OpenError::Refused(r));
                continue;
            }
            match tokio::time::timeout(
                crate::budgets::EGRESS_CONNECT_TIMEOUT,
                tokio::net::TcpStream::connect(a),
            )
            .await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Opened {
                        stream,
                        address: *a,
                        rule,
                        approved_by: None,
                    });
                }
                Ok(Err(e)) => {
                    last = Some(OpenError::Unreachable(format!("connecting to {a}: {e}")))
                }
                Err(_) => {
                    last = Some(OpenError::Unreachable(format!(
                        "connecting to {a} timed out"
                    )))
                }
            }
        }
        Err(last.unwrap_or_else(|| {
            OpenError::Unreachable(format!("{} had no address at load", p.host))
        }))
    }

    /// A `[egress] deny` address or block holding `ip`, if one does.
    fn deny_address(&self, host: &Host, ip: IpAddr) -> Option<Refusal> {
        if !self.policy.global.deny.iter().any(|r| r.blocks_address(ip)) {
            return None;
        }
        self.policy.check_address(host, ip).err()
    }

    /// A `wasi:sockets` TCP connect to `addr` before any question: deny,
    /// then the `network` grant's addresses, then `egress` rules naming
    /// the address, then its class — all before an ask, so that an ask
    /// never opens what a deny rule or a class closes.
    fn decide_connect(&self, ip: IpAddr, port: u16) -> Connect {
        let host = Host::Ip(ip);
        let d = Destination {
            host: &host,
            port,
            http: None,
        };
        if let Some(r) = self.denied_by_name(&d) {
            return Connect::Refused(r);
        }
        if let Some(r) = self.deny_address(&host, ip) {
            return Connect::Refused(r);
        }
        if let Some(p) = self.pinned.iter().find(|p| {
            p.addrs
                .iter()
                .any(|a| canonical_sa(*a) == SocketAddr::new(ip, port))
        }) {
            return Connect::Allowed(format!("network: {}", shown(&p.host, p.port)));
        }
        match self.policy.check_name(&d) {
            Ok(rule) => match self.policy.check_address(&host, ip) {
                Ok(()) => Connect::Allowed(rule.text.clone()),
                Err(r) => Connect::Refused(r),
            },
            Err(not_allowed) => match self.policy.check_address(&host, ip) {
                Err(r) => Connect::Refused(r),
                Ok(()) => Connect::Ask(not_allowed),
            },
        }
    }

    fn connected(
        &self,
        who: &Attribution,
        ip: IpAddr,
        port: u16,
        rule: String,
        by: Option<String>,
    ) {
        self.record(
            who,
            &ConnectionRecord {
                via: "wasi:sockets",
                name: ip.to_string(),
                address: Some(ip),
                port,
                allowed: true,
                rule: Some(rule),
                reason: None,
                bytes_up: 0,
                bytes_down: 0,
                approval: by,
            },
        );
    }

    fn refused_as(&self, who: &Attribution, ip: IpAddr, port: u16, r: &Refusal) {
        self.refused(who, "wasi:sockets", ip.to_string(), Some(ip), port, r);
    }

    /// A `wasi:sockets` TCP connect to `addr`, decided without asking:
    /// deny, then the `network` grant's addresses, then `egress` rules
    /// naming the address (and its class). Recorded either way.
    pub fn check_connect(&self, addr: SocketAddr) -> bool {
        let ip = super::addr::canonical(addr.ip());
        let who = self.attribution();
        match self.decide_connect(ip, addr.port()) {
            Connect::Allowed(rule) => {
                self.connected(&who, ip, addr.port(), rule, None);
                true
            }
            Connect::Refused(r) | Connect::Ask(r) => {
                self.refused_as(&who, ip, addr.port(), &r);
                false
            }
        }
    }

    /// [`check_connect`](Self::check_connect), and with `[egress] ask =
    /// true` and a call being served, an address no rule allows (that no
    /// deny rule or class refuses) is asked about through the call's
    /// asking — one question per address and port per call, within the
    /// call's bound of questions — while the guest's connect waits.
    /// Approved, it connects (recorded with `rule = approval` and who
    /// approved); refused, it is refused saying by whom and naming the
    /// rule to add.
    ///
    /// The check `wasmtime-wasi` takes is an async closure whose future
    /// must be `Sync`; an approver's future is not, so the question runs
    /// on a task of its own (aborted if the guest drops the connect) and
    /// the check waits for its handle.
    pub fn connect_check(
        self: &Arc<Self>,
        addr: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + Sync>> {
        let ip = super::addr::canonical(addr.ip());
        let port = addr.port();
        let who = self.attribution();
        let not_allowed = match self.decide_connect(ip, port) {
            Connect::Allowed(rule) => {
                self.connected(&who, ip, port, rule, None);
                return Box::pin(std::future::ready(true));
            }
            Connect::Refused(r) => {
                self.refused_as(&who, ip, port, &r);
                return Box::pin(std::future::ready(false));
            }
            Connect::Ask(r) => r,
        };
        let ask = self.ask.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let (Some(ask), true, Ok(runtime)) = (
            ask,
            self.policy.global.ask,
            tokio::runtime::Handle::try_current(),
        ) else {
            self.refused_as(&who, ip, port, &not_allowed);
            return Box::pin(std::future::ready(false));
        };
        let this = self.clone();
        let task = runtime.spawn(async move {
            let answer = ask
                .ask(&this.plugin, "wasi:sockets", &ip.to_string(), port, ip)
                .await;
            match answer {
                super::ask::Answer::Approved(by) => {
                    this.connected(&who, ip, port, APPROVAL_RULE.into(), Some(by));
                    true
                }
                super::ask::Answer::Refused { by, reason } => {
                    let r = not_allowed.asked(by, reason, Some(ip));
                    this.refused_as(&who, ip, port, &r);
                    false
                }
            }
        });
        Box::pin(Asked(task))
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }
}

/// A `wasi:sockets` connect before any question.
enum Connect {
    /// By this rule (`network: …`, an `egress` rule).
    Allowed(String),
    /// By a deny rule or a class: final.
    Refused(Refusal),
    /// No rule allows it: refused, or asked about with `[egress] ask`.
    Ask(Refusal),
}

/// A connect's question, on a task of its own: aborted when the guest
/// drops the connect; a task that failed is a refusal.
struct Asked(tokio::task::JoinHandle<bool>);

impl Future for Asked {
    type Output = bool;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        Pin::new(&mut self.0).poll(cx).map(|r| r.unwrap_or(false))
    }
}

impl Drop for Asked {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn canonical_sa(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(super::addr::canonical(a.ip()), a.port())
}

fn shown(host: &Host, port: u16) -> String {
    match host {
        Host::Ip(IpAddr::V6(a)) => format!("[{a}]:{port}"),
        h => format!("{h}:{port}"),
    }
}

/// `host:port` (or `[v6]:port`) → (host, port).
fn split_host_port(s: &str) -> Option<(String, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port.parse().ok()?))
}

/// An allowed connection, counting bytes each way; recorded when dropped.
pub struct Counted {
    stream: tokio::net::TcpStream,
    egress: Arc<ComponentEgress>,
    who: Attribution,
    name: String,
    address: SocketAddr,
    rule: String,
    approved_by: Option<String>,
    up: u64,
    down: u64,
}

impl Counted {
    fn new(egress: Arc<ComponentEgress>, who: Attribution, name: String, o: Opened) -> Counted {
        Counted {
            stream: o.stream,
            egress,
            who,
            name,
            address: o.address,
            rule: o.rule,
            approved_by: o.approved_by,
            up: 0,
            down: 0,
        }
    }

    /// The address connected to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted")
            .field("name", &self.name)
            .field("address", &self.address)
            .field("rule", &self.rule)
            .finish()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.egress.record(
            &self.who,
            &ConnectionRecord {
                via: "wasi:http",
                name: std::mem::take(&mut self.name),
                address: Some(self.address.ip()),
                port: self.address.port(),
                allowed: true,
                rule: Some(std::mem::take(&mut self.rule)),
                reason: None,
                bytes_up: self.up,
                bytes_down: self.down,
                approval: self.approved_by.take(),
            },
        );
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.stream).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.down += n;
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.up += n as u64;
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Kept = Arc<Mutex<Vec<ConnectionRecord>>>;

    fn egress(allow: &[&str], deny: &[&str], network: &[(&str, &str)]) -> (ComponentEgress, Kept) {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let global = Arc::new(Global::parse(&s(deny), &[]).unwrap());
        let policy = (!allow.is_empty()).then(|| {
            Policy::parse(&s(allow), global.clone(), "[plugins.p.grants]".into()).unwrap()
        });
        let network: Vec<(String, Vec<SocketAddr>)> = network
            .iter()
            .map(|(w, a)| (w.to_string(), vec![a.parse().unwrap()]))
            .collect();
        let kept: Kept = Default::default();
        let k = kept.clone();
        let sink: RecordSink = Arc::new(move |_, r| k.lock().unwrap().push(r.clone()));
        let cell = Arc::new(OnceLock::new());
        let _ = cell.set(sink);
        let e = ComponentEgress::new("p".into(), policy.as_ref(), global, &network, cell);
        e.set_call(Some(("call-1", "team")), None);
        (e, kept)
    }

    #[test]
    fn socket_connects_follow_network_then_rules_then_classes() {
        let (e, kept) = egress(
            &["127.0.0.1", "203.0.113.7:5432", "*.example.org"],
            &["198.51.100.0/24"],
            &[
                ("db.internal:5432", "10.9.9.9:5432"),
                ("blocked:80", "198.51.100.1:80"),
            ],
        );
        // The network grant's load-time address: allowed, class or not.
        assert!(e.check_connect("10.9.9.9:5432".parse().unwrap()));
        assert!(!e.check_connect("10.9.9.9:5433".parse().unwrap()));
        // An address rule: allowed unless its class refuses it.
        assert!(!e.check_connect("127.0.0.1:80".parse().unwrap()));
        assert!(!e.check_connect("[::ffff:127.0.0.1]:80".parse().unwrap()));
        // Documentation block, named exactly: its class still refuses it.
        assert!(!e.check_connect("203.0.113.7:5432".parse().unwrap()));
        // Deny beats the network grant.
        assert!(!e.check_connect("198.51.100.1:80".parse().unwrap()));
        let kept = kept.lock().unwrap();
        assert_eq!(kept.len(), 6);
        assert_eq!(kept[0].rule.as_deref(), Some("network: db.internal:5432"));
        assert!(kept[0].allowed && kept[0].via == "wasi:sockets");
        assert_eq!(kept[2].rule.as_deref(), Some("class:loopback"));
        assert_eq!(kept[3].name, "127.0.0.1", "the mapped form, canonical");
        assert_eq!(kept[5].rule.as_deref(), Some("198.51.100.0/24"));
    }

    #[tokio::test]
    async fn http_connections_go_to_the_load_time_address_and_are_counted() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).await.unwrap();
            s.write_all(b"pong!").await.unwrap();
        });
        // The name as written never resolves: the connection uses the
        // address the grant resolved at load.
        let written = format!("never-resolved.invalid:{}", addr.port());
        let (e, kept) = egress(&[], &["*.denied.test"], &[(&written, &addr.to_string())]);
        let e = Arc::new(e);
        let host = parse_host("never-resolved.invalid").unwrap();
        let (mut c, path) = e.open(&host, addr.port(), "GET", "").await.unwrap();
        assert_eq!(path.as_str(), "/");
        assert_eq!(c.address(), addr);
        c.write_all(b"ping").await.unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"pong!");
        drop(c);
        let denied = parse_host("a.denied.test").unwrap();
        match e.open(&denied, 443, "GET", "/").await {
            Err(OpenError::Refused(r)) => assert_eq!(r.deny_rule.as_deref(), Some("*.denied.test")),
            other => panic!("{other:?}"),
        }
        let kept = kept.lock().unwrap();
        assert_eq!(kept[0].via, "wasi:http");
        assert_eq!((kept[0].bytes_up, kept[0].bytes_down), (4, 5));
        assert!(!kept[1].allowed);
    }

    /// `[egress] ask = true`: a socket connect to an address no rule
    /// allows waits for the call's approver (once per address and port);
    /// a class or a deny block refuses before any question.
    #[tokio::test]
    async fn socket_connects_ask_after_deny_and_the_classes() {
        use crate::egress::ask::tests::{Counting, call};
        use std::sync::atomic::Ordering;
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut global = Global::parse(&s(&["198.51.100.0/24"]), &s(&["127.0.0.1/32"])).unwrap();
        global.ask = true;
        let global = Arc::new(global);
        let policy = Policy::parse(
            &s(&["example.org"]),
            global.clone(),
            "[plugins.p.grants]".into(),
        )
        .unwrap();
        let kept: Kept = Default::default();
        let k = kept.clone();
        let cell = Arc::new(OnceLock::new());
        let _ = cell.set(Arc::new(move |_: &Attribution, r: &ConnectionRecord| {
            k.lock().unwrap().push(r.clone())
        }) as RecordSink);
        let e = Arc::new(ComponentEgress::new(
            "p".into(),
            Some(&policy),
            global,
            &[],
            cell,
        ));
        let approver = Counting::new(true);
        e.set_call(
            Some(("c1", "team")),
            Some(crate::egress::ask::CallAsk::new(
                approver.clone(),
                call(),
                None,
            )),
        );
        assert!(e.connect_check("127.0.0.1:5432".parse().unwrap()).await);
        assert!(e.connect_check("127.0.0.1:5432".parse().unwrap()).await);
        assert_eq!(approver.egress.load(Ordering::SeqCst), 1, "once per call");
        let (prompt, asked) = approver.last.lock().unwrap().clone().unwrap();
        assert!(prompt.contains("an address, no name"), "{prompt}");
        assert_eq!(asked.via, "wasi:sockets");
        // Loopback outside allow_private, link-local, a deny block: never asked.
        for a in ["127.0.0.2:80", "169.254.169.254:80", "198.51.100.1:80"] {
            assert!(!e.connect_check(a.parse().unwrap()).await, "{a}");
        }
        assert_eq!(approver.egress.load(Ordering::SeqCst), 1);
        let kept = kept.lock().unwrap();
        assert_eq!(kept[0].rule.as_deref(), Some(APPROVAL_RULE));
        assert_eq!(kept[0].approval.as_deref(), Some("counting"));
        assert_eq!(kept[2].rule.as_deref(), Some("class:loopback"));
        assert_eq!(kept[4].rule.as_deref(), Some("198.51.100.0/24"));
    }
}
