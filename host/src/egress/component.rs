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
//! call's asking that [`ComponentEgress::set_call`] installs; a
//! `wasi:sockets` connect is not (it is decided synchronously, and names
//! an address only): it is refused.
//!
//! `wasi:http`: the host makes every request itself ([`send`]), so it sees
//! method and path even for `https` — `METHOD HOST/PATH` rules apply to a
//! component's requests of either scheme. A redirect is a new request the
//! guest makes (`wasi:http` never follows one), checked again.
//! `wasi:sockets`: the guest connects to an *address* (it has no name
//! lookup), so only `network` addresses and `egress` rules naming an
//! address (`"203.0.113.7:5432"`) can allow it; classes and deny blocks
//! apply as to any address. Bytes are counted for `wasi:http` connections;
//! a socket's connect is recorded when it is decided.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::addr::{Host, parse_host};
use super::ask::CallAsk;
use super::proxy::{Attribution, ConnectionRecord, RecordSink};
use super::rules::Destination;
use super::{Asking, Global, OpenError, Opened, Policy, Refusal};

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

    fn refused(&self, via: &'static str, name: String, port: u16, r: &Refusal) {
        self.record(
            &self.attribution(),
            &ConnectionRecord {
                via,
                name,
                address: r.address,
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

    /// Decides and connects one `wasi:http` request's connection: deny,
    /// then the `network` grant (to its load-time addresses), then the
    /// `egress` rules (resolved now, every address checked). Refusals are
    /// recorded here; an allowed connection is recorded when it closes.
    pub async fn open(
        self: &Arc<Self>,
        host: &Host,
        port: u16,
        http: Option<(&str, &str)>,
    ) -> Result<Counted, OpenError> {
        let d = Destination { host, port, http };
        let name = host.to_string();
        if let Some(r) = self.denied_by_name(&d) {
            self.refused("wasi:http", name, port, &r);
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
            Ok(o) => Ok(Counted::new(self.clone(), self.attribution(), name, o)),
            Err(OpenError::Refused(r)) => {
                self.refused("wasi:http", name, port, &r);
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

    /// A `wasi:sockets` TCP connect to `addr`: deny, then the `network`
    /// grant's addresses, then `egress` rules naming the address (and its
    /// class). Recorded either way.
    pub fn check_connect(&self, addr: SocketAddr) -> bool {
        let ip = super::addr::canonical(addr.ip());
        let host = Host::Ip(ip);
        let d = Destination {
            host: &host,
            port: addr.port(),
            http: None,
        };
        let who = self.attribution();
        let decided: Result<String, Refusal> = if let Some(r) = self.denied_by_name(&d) {
            Err(r)
        } else if let Some(r) = self.deny_address(&host, ip) {
            Err(r)
        } else if let Some(p) = self.pinned.iter().find(|p| {
            p.addrs
                .iter()
                .any(|a| canonical_sa(*a) == SocketAddr::new(ip, addr.port()))
        }) {
            Ok(format!("network: {}", shown(&p.host, p.port)))
        } else {
            self.policy
                .check_name(&d)
                .map(|r| r.text.clone())
                .and_then(|rule| self.policy.check_address(&host, ip).map(|()| rule))
        };
        let allowed = decided.is_ok();
        match decided {
            Ok(rule) => self.record(
                &who,
                &ConnectionRecord {
                    via: "wasi:sockets",
                    name: ip.to_string(),
                    address: Some(ip),
                    port: addr.port(),
                    allowed: true,
                    rule: Some(rule),
                    reason: None,
                    bytes_up: 0,
                    bytes_down: 0,
                    approval: None,
                },
            ),
            Err(r) => self.refused("wasi:sockets", ip.to_string(), addr.port(), &r),
        }
        allowed
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
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
        let mut c = e.open(&host, addr.port(), None).await.unwrap();
        assert_eq!(c.address(), addr);
        c.write_all(b"ping").await.unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"pong!");
        drop(c);
        let denied = parse_host("a.denied.test").unwrap();
        match e.open(&denied, 443, None).await {
            Err(OpenError::Refused(r)) => assert_eq!(r.deny_rule.as_deref(), Some("*.denied.test")),
            other => panic!("{other:?}"),
        }
        let kept = kept.lock().unwrap();
        assert_eq!(kept[0].via, "wasi:http");
        assert_eq!((kept[0].bytes_up, kept[0].bytes_down), (4, 5));
        assert!(!kept[1].allowed);
    }
}
