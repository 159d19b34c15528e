//! Egress by name: which destinations what the host runs may connect to,
//! decided per connection, and the proxy that enforces it for sandboxed
//! processes.
//!
//! Why a proxy: Landlock filters TCP by *port* (a spawn granted 443 reaches
//! every host on 443), and a component's `network` grant is an address
//! resolved once at load. Egress decides by *name*, per connection, after
//! resolving, and ties each connection to the call that made it:
//!
//! 1. [`addr`]: a host is read the way `inet_aton` reads it (every
//!    encoding of an IP literal is the address it means) and an address is
//!    checked against the classes no tool should reach — loopback, private,
//!    link-local (the cloud metadata address), CGNAT, multicast,
//!    unspecified, broadcast, documentation, reserved — unless
//!    `[egress] allow_private` names its block;
//! 2. [`rules`]: `egress = ["*.example.org", "example.com:443",
//!    "GET pypi.org/simple/*"]` in a grant; `[egress] deny` is checked
//!    first;
//! 3. [`Policy::open`] puts them together: the name (deny, then allow),
//!    then every address it resolves to, then a connection to exactly the
//!    address that was checked — never a second resolution, so a name that
//!    answers differently the second time (DNS rebinding) changes nothing;
//! 4. [`proxy`]: HTTP (`CONNECT` and absolute-form) and SOCKS5 on a
//!    listener the sandbox hands over (one per spawn), every connection
//!    logged and recorded with its call, plugin and scope;
//! 5. [`component`]: the same decisions for components' own `wasi:http`
//!    requests and `wasi:sockets` connects, next to the older `network`
//!    grant;
//! 6. [`target`]: what a plain HTTP request asks for, in one form — the
//!    path normalised before any rule matches it (and sent as matched),
//!    `Host` set from the allowed name — for the proxy and `wasi:http`
//!    alike;
//! 7. [`ask`]: with `[egress] ask = true`, a destination no rule allows
//!    (and no deny rule names, at an address no class refuses) is a
//!    question to the call's approver, answered once per destination per
//!    call — or, for a bridged MCP server's connections (which no single
//!    call owns), to the host's approver on the server's behalf.

pub mod addr;
pub mod ask;
pub mod component;
pub mod config;
pub mod proxy;
pub mod rules;
pub mod target;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpStream;

pub use addr::{Cidr, Class, Host, parse_host};
pub use config::EgressConfig;
pub use rules::{Destination, Rule};
pub use target::{NormalTarget, TargetError};

use crate::budgets::EGRESS_CONNECT_TIMEOUT;

/// The port the proxy listens on inside a sandbox's network namespace
/// (a fresh namespace: nothing else can hold it). `HTTP_PROXY` and
/// friends point there.
pub const SANDBOX_PROXY_PORT: u16 = 3128;

/// The variables that point a process at its proxy (each also in lower
/// case): most tools (`curl`, `pip`, `npm`, `cargo`, `git`) read them.
pub const PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"];

/// The environment of a process behind the proxy for `policy`:
/// `HTTP_PROXY` and `HTTPS_PROXY` (HTTP, `CONNECT` for TLS), `ALL_PROXY`
/// (SOCKS5 with names resolved by the proxy: `socks5h`), `NO_PROXY` (the
/// namespace's own loopback, for a server the process starts itself),
/// upper and lower case. A loopback spelling a rule of `policy` allows
/// (`localhost:8080` with `[egress] allow_private`: the host's own
/// service) is left out of `NO_PROXY`, or the process would look for it
/// in its empty namespace instead of asking the proxy.
pub fn proxy_env(policy: &Policy) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{SANDBOX_PROXY_PORT}");
    let socks = format!("socks5h://127.0.0.1:{SANDBOX_PROXY_PORT}");
    let granted = |spelling: &str| {
        policy.allow.iter().any(|r| match &r.host {
            rules::HostPattern::Exact(name) => name.eq_ignore_ascii_case(spelling),
            rules::HostPattern::Ip(ip) => spelling.parse::<std::net::IpAddr>() == Ok(*ip),
            _ => false,
        })
    };
    let local = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .filter(|s| !granted(s))
        .collect::<Vec<_>>()
        .join(",");
    let mut env = Vec::new();
    for (k, v) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &local),
    ] {
        if v.is_empty() {
            continue;
        }
        env.push((k.to_string(), v.clone()));
        env.push((k.to_ascii_lowercase(), v.clone()));
    }
    env
}

/// `base` with a proxy of its own for one spawn: the spawn gets a network
/// namespace whose only reachable service is a [`proxy::Proxy`] for
/// `policy`, attributing every connection to `who`.
pub fn sandbox_policy(
    base: &toolgate_sandbox::SandboxPolicy,
    policy: &Arc<Policy>,
    who: proxy::Attribution,
    sink: Option<proxy::RecordSink>,
    ask: Option<Arc<dyn ask::Asker>>,
) -> toolgate_sandbox::SandboxPolicy {
    let policy = policy.clone();
    let serve = move |listener: std::net::TcpListener| -> Box<dyn Send> {
        let proxy = proxy::Proxy {
            policy: policy.clone(),
            who: who.clone(),
            sink: sink.clone(),
            ask: ask.clone(),
        };
        match proxy.serve(listener) {
            Ok(guard) => Box::new(guard),
            Err(e) => {
                // The process then reaches nothing at all: fail closed.
                tracing::error!(plugin = %who.plugin, call_id = %who.call_id, "egress proxy not served: {e}");
                Box::new(())
            }
        }
    };
    toolgate_sandbox::SandboxPolicy {
        egress_proxy: Some(toolgate_sandbox::EgressProxy {
            port: SANDBOX_PROXY_PORT,
            serve: Arc::new(serve),
        }),
        ..base.clone()
    }
}

/// `[egress]`: the rules every grant shares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Global {
    /// Checked before any grant's rules: names, `*.domains`, addresses
    /// and blocks (`10.0.0.0/8`).
    pub deny: Vec<Rule>,
    /// Blocks whose addresses may be reached although a refused class
    /// holds them.
    pub allow_private: Vec<Cidr>,
    /// `[egress] ask`: a destination no rule allows is asked about (see
    /// [`ask`]) instead of refused.
    pub ask: bool,
}

impl Global {
    /// Parses `[egress] deny` and `allow_private`; errors name the entry.
    pub fn parse(deny: &[String], allow_private: &[String]) -> Result<Global, String> {
        Ok(Global {
            deny: deny
                .iter()
                .map(|d| Rule::parse(d, true))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("[egress] deny: {e}"))?,
            allow_private: allow_private
                .iter()
                .map(|c| Cidr::parse(c))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("[egress] allow_private: {e}"))?,
            ask: false,
        })
    }
}

/// One grant's egress: its rules, the shared `[egress]` rules, and where
/// to add a rule (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub allow: Vec<Rule>,
    pub global: Arc<Global>,
    /// The table a rule is added to: `[plugins.bash.grants]`.
    pub grant_table: String,
}

/// Why a connection was refused: the message (which names the rule to
/// add) and the rule or class that refused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
    /// The `[egress] deny` rule that matched, if one did.
    pub deny_rule: Option<String>,
    /// The address class that refused it, if one did.
    pub class: Option<Class>,
    /// The address that was refused, if it got that far.
    pub address: Option<IpAddr>,
    /// Who refused the approval asked for it (`[egress] ask`), if one was.
    pub refused_by: Option<String>,
}

impl Refusal {
    fn plain(message: String) -> Refusal {
        Refusal {
            message,
            deny_rule: None,
            class: None,
            address: None,
            refused_by: None,
        }
    }

    /// This refusal of a destination no rule allows, after `by` refused
    /// the approval asked for it (`[egress] ask`).
    fn asked(self, by: String, reason: String, address: Option<IpAddr>) -> Refusal {
        Refusal {
            message: format!(
                "{} (an approval was asked for it, and {by} refused: {reason})",
                self.message
            ),
            deny_rule: None,
            class: None,
            address,
            refused_by: Some(by),
        }
    }

    /// The `rule` of its record: the `[egress] deny` rule, `class:NAME`,
    /// or [`APPROVAL_RULE`] when an approval refused it.
    pub fn record_rule(&self) -> Option<String> {
        self.deny_rule
            .clone()
            .or_else(|| self.class.map(|c| format!("class:{}", c.name())))
            .or_else(|| self.refused_by.as_ref().map(|_| APPROVAL_RULE.to_string()))
    }
}

/// A connection egress allowed and made.
#[derive(Debug)]
pub struct Opened {
    pub stream: TcpStream,
    /// The address connected to: the one that was checked.
    pub address: SocketAddr,
    /// The rule that allowed it ([`APPROVAL_RULE`] when an approval did).
    pub rule: String,
    /// The approval that allowed it (`[egress] ask`): who approved, or
    /// the approval entry or grant and who made it.
    pub approved_by: Option<String>,
}

/// The `rule` of a connection an approval allowed (`[egress] ask`).
pub const APPROVAL_RULE: &str = "approval";

/// Who may be asked about a destination the rules leave open: the call's
/// asking, and what to tell it (the plugin, and how it connects).
#[derive(Clone, Copy)]
pub struct Asking<'a> {
    pub ask: &'a dyn ask::Asker,
    pub plugin: &'a str,
    /// `connect`, `http`, `socks5`, `wasi:http`, `wasi:sockets`.
    pub via: &'a str,
}

/// Why a connection did not happen.
#[derive(Debug)]
pub enum OpenError {
    /// Egress refused it.
    Refused(Refusal),
    /// Allowed, but resolving or connecting failed.
    Unreachable(String),
}

impl Policy {
    /// The policy of a grant with `rules` (as written), under `global`.
    pub fn parse(
        rules: &[String],
        global: Arc<Global>,
        grant_table: String,
    ) -> Result<Policy, String> {
        Ok(Policy {
            allow: rules
                .iter()
                .map(|r| Rule::parse(r, false))
                .collect::<Result<_, _>>()?,
            global,
            grant_table,
        })
    }

    /// The rule to suggest for `host:port`.
    fn suggestion(host: &Host, port: u16) -> String {
        match port {
            80 | 443 => host.to_string(),
            p => format!("{host}:{p}"),
        }
    }

    /// By name (or literal) and port, and for plain HTTP method and path:
    /// `[egress] deny` first, then this grant's rules. `Ok`: the allowing
    /// rule.
    pub fn check_name(&self, d: &Destination<'_>) -> Result<&Rule, Refusal> {
        let shown = match d.host {
            Host::Ip(IpAddr::V6(a)) => format!("[{a}]:{}", d.port),
            h => format!("{h}:{}", d.port),
        };
        if let Some(r) = self.global.deny.iter().find(|r| r.matches(d)) {
            return Err(Refusal {
                deny_rule: Some(r.text.clone()),
                ..Refusal::plain(format!(
                    "toolgate egress: {shown} is denied by the rule \"{r}\" in `[egress] deny`; \
                     remove it there to allow it"
                ))
            });
        }
        if let Some(r) = self.allow.iter().find(|r| r.matches(d)) {
            return Ok(r);
        }
        let tunnel_only_http_rule = d.http.is_none()
            && self.allow.iter().any(|r| {
                r.http.is_some()
                    && Rule {
                        http: None,
                        ..r.clone()
                    }
                    .matches(d)
            });
        let hint = if tunnel_only_http_rule {
            " (a `METHOD HOST/PATH` rule allows plain http:// requests only, never a tunnel)"
        } else {
            ""
        };
        Err(Refusal::plain(format!(
            "toolgate egress: {shown} is not allowed{hint}; to allow it, add \"{}\" to \
             `egress = [...]` under {} in toolgate.toml",
            Self::suggestion(d.host, d.port),
            self.grant_table
        )))
    }

    /// An address `host` stands for (itself, or one it resolved to):
    /// refused by an `[egress] deny` address or block, or by its class
    /// unless `[egress] allow_private` holds it.
    pub fn check_address(&self, host: &Host, ip: IpAddr) -> Result<(), Refusal> {
        let ip = addr::canonical(ip);
        let via = match host {
            Host::Name(n) => format!("{n} resolves to {ip}, which"),
            Host::Ip(_) => format!("{ip}"),
        };
        if let Some(r) = self.global.deny.iter().find(|r| r.blocks_address(ip)) {
            return Err(Refusal {
                deny_rule: Some(r.text.clone()),
                address: Some(ip),
                ..Refusal::plain(format!(
                    "toolgate egress: {via} is denied by the rule \"{r}\" in `[egress] deny`"
                ))
            });
        }
        if let Some(class) = addr::refused_class(ip)
            && !self.global.allow_private.iter().any(|c| c.contains(ip))
        {
            let block = match ip {
                IpAddr::V4(_) => format!("{ip}/32"),
                IpAddr::V6(_) => format!("{ip}/128"),
            };
            return Err(Refusal {
                class: Some(class),
                address: Some(ip),
                ..Refusal::plain(format!(
                    "toolgate egress: {via} is a {class} address, which egress refuses; \
                     to allow it, add \"{block}\" to `allow_private = [...]` under [egress] \
                     in toolgate.toml"
                ))
            });
        }
        Ok(())
    }

    /// Decides and connects: the name, then each address it resolves to
    /// (in order; refused ones skipped), connecting to the first allowed
    /// one that answers — the address that was checked, with no second
    /// resolution.
    pub async fn open(&self, d: &Destination<'_>) -> Result<Opened, OpenError> {
        self.open_asking(d, None).await
    }

    /// [`open`](Self::open), and with `[egress] ask = true` and someone to
    /// ask, a destination no rule allows (and no deny rule names) is
    /// resolved, its addresses checked (deny blocks, classes), and then
    /// asked about with the first address it would connect to; approved,
    /// it connects like an allowed one (to the checked addresses), and
    /// refused, the refusal says by whom and still names the rule to add.
    pub async fn open_asking(
        &self,
        d: &Destination<'_>,
        asking: Option<Asking<'_>>,
    ) -> Result<Opened, OpenError> {
        let (mut rule, unknown) = match self.check_name(d) {
            Ok(r) => (r.text.clone(), None),
            Err(r) => match asking {
                Some(a) if self.global.ask && r.deny_rule.is_none() => {
                    // Refused already, or past the bound: not even resolved.
                    if let Some(ask::Answer::Refused { by, reason }) =
                        a.ask.before_resolving(&d.host.to_string(), d.port)
                    {
                        return Err(OpenError::Refused(r.asked(by, reason, None)));
                    }
                    (String::new(), Some((a, r)))
                }
                _ => return Err(OpenError::Refused(r)),
            },
        };
        let addrs: Vec<IpAddr> = match d.host {
            Host::Ip(a) => vec![*a],
            Host::Name(n) => {
                let found = tokio::time::timeout(
                    EGRESS_CONNECT_TIMEOUT,
                    tokio::net::lookup_host((n.as_str(), d.port)),
                )
                .await
                .map_err(|_| OpenError::Unreachable(format!("resolving {n} timed out")))?
                .map_err(|e| OpenError::Unreachable(format!("resolving {n}: {e}")))?;
                let mut v: Vec<IpAddr> = found.map(|s| s.ip()).collect();
                v.dedup();
                v
            }
        };
        let mut first_refusal = None;
        let mut last_error = None;
        let mut allowed = Vec::with_capacity(addrs.len());
        for ip in addrs {
            match self.check_address(d.host, ip) {
                Ok(()) => allowed.push(ip),
                Err(r) => {
                    first_refusal.get_or_insert(r);
                }
            }
        }
        let mut approved_by = None;
        if let Some((a, not_allowed)) = unknown {
            // Nothing to ask about when no address may be reached: an ask
            // never opens a refused class.
            let Some(first) = allowed.first() else {
                return Err(match first_refusal {
                    Some(r) => OpenError::Refused(r),
                    None => OpenError::Unreachable(format!("{} has no address", d.host)),
                });
            };
            let name = d.host.to_string();
            match a.ask.ask(a.plugin, a.via, &name, d.port, *first).await {
                ask::Answer::Approved(by) => {
                    rule = APPROVAL_RULE.to_string();
                    approved_by = Some(by);
                }
                ask::Answer::Refused { by, reason } => {
                    return Err(OpenError::Refused(not_allowed.asked(
                        by,
                        reason,
                        Some(*first),
                    )));
                }
            }
        }
        for ip in allowed {
            let to = SocketAddr::new(ip, d.port);
            match tokio::time::timeout(EGRESS_CONNECT_TIMEOUT, TcpStream::connect(to)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Opened {
                        stream,
                        address: to,
                        rule,
                        approved_by,
                    });
                }
                Ok(Err(e)) => last_error = Some(format!("connecting to {to}: {e}")),
                Err(_) => last_error = Some(format!("connecting to {to} timed out")),
            }
        }
        Err(match (last_error, first_refusal) {
            (Some(e), _) => OpenError::Unreachable(e),
            (None, Some(r)) => OpenError::Refused(r),
            (None, None) => OpenError::Unreachable(format!("{} has no address", d.host)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str], private: &[&str]) -> Policy {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Policy::parse(
            &s(allow),
            Arc::new(Global::parse(&s(deny), &s(private)).unwrap()),
            "[plugins.bash.grants]".into(),
        )
        .unwrap()
    }

    /// Issue 44: `NO_PROXY=localhost,127.0.0.1` sent a granted localhost
    /// destination to the namespace's own (empty) loopback.
    #[test]
    fn a_granted_loopback_spelling_goes_through_the_proxy() {
        let no_proxy = |p: &Policy| {
            proxy_env(p)
                .into_iter()
                .find(|(k, _)| k == "NO_PROXY")
                .map(|(_, v)| v)
        };
        let plain = policy(&["example.com"], &[], &[]);
        assert_eq!(no_proxy(&plain).as_deref(), Some("localhost,127.0.0.1,::1"));
        let local = policy(&["localhost:8080"], &[], &["127.0.0.0/8"]);
        assert_eq!(no_proxy(&local).as_deref(), Some("127.0.0.1,::1"));
        let all = policy(
            &["localhost", "127.0.0.1", "[::1]:80"],
            &[],
            &["127.0.0.0/8"],
        );
        assert_eq!(no_proxy(&all), None, "no NO_PROXY at all");
        assert!(proxy_env(&all).iter().any(|(k, _)| k == "https_proxy"));
    }

    fn name(p: &Policy, host: &str, port: u16) -> Result<String, Refusal> {
        let h = parse_host(host).unwrap();
        p.check_name(&Destination {
            host: &h,
            port,
            http: None,
        })
        .map(|r| r.text.clone())
    }

    #[test]
    fn deny_is_checked_before_allow() {
        let p = policy(&["*.example.org"], &["evil.example.org"], &[]);
        assert_eq!(name(&p, "a.example.org", 443).unwrap(), "*.example.org");
        let r = name(&p, "evil.example.org", 443).unwrap_err();
        assert_eq!(r.deny_rule.as_deref(), Some("evil.example.org"));
        assert!(r.message.contains("[egress] deny"), "{}", r.message);
    }

    #[test]
    fn an_unknown_destination_names_the_rule_to_add() {
        let p = policy(&["pypi.org"], &[], &[]);
        let r = name(&p, "crates.io", 443).unwrap_err();
        assert!(
            r.message
                .contains("add \"crates.io\" to `egress = [...]` under [plugins.bash.grants]"),
            "{}",
            r.message
        );
        let r = name(&p, "crates.io", 8443).unwrap_err();
        assert!(r.message.contains("\"crates.io:8443\""), "{}", r.message);
    }

    #[test]
    fn private_addresses_are_refused_unless_allowed_by_block() {
        let p = policy(&[], &[], &["10.1.0.0/16"]);
        let local = Host::Name("localhost".into());
        let r = p
            .check_address(&local, "127.0.0.1".parse().unwrap())
            .unwrap_err();
        assert_eq!(r.class, Some(Class::Loopback));
        assert!(
            r.message.contains("localhost resolves to 127.0.0.1")
                && r.message.contains("\"127.0.0.1/32\" to `allow_private"),
            "{}",
            r.message
        );
        assert!(p.check_address(&local, "10.1.2.3".parse().unwrap()).is_ok());
        assert!(
            p.check_address(&local, "::ffff:10.1.2.3".parse().unwrap())
                .is_ok()
        );
        assert!(
            p.check_address(&local, "10.2.0.1".parse().unwrap())
                .is_err()
        );
        assert!(p.check_address(&local, "8.8.8.8".parse().unwrap()).is_ok());
        let md = p
            .check_address(&local, "::ffff:169.254.169.254".parse().unwrap())
            .unwrap_err();
        assert_eq!(md.class, Some(Class::LinkLocal));
    }

    #[test]
    fn deny_blocks_apply_to_resolved_addresses() {
        let p = policy(&["example.com"], &["93.184.0.0/16"], &[]);
        let h = Host::Name("example.com".into());
        let r = p
            .check_address(&h, "93.184.215.14".parse().unwrap())
            .unwrap_err();
        assert_eq!(r.deny_rule.as_deref(), Some("93.184.0.0/16"));
    }

    #[tokio::test]
    async fn open_refuses_loopback_reached_by_name_and_in_any_encoding() {
        // Something to connect to, so that only the policy can refuse.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let p = policy(&["localhost", "2130706433", "0x7f.1"], &[], &[]);
        for host in ["localhost", "2130706433", "0x7f.1"] {
            let h = parse_host(host).unwrap();
            let d = Destination {
                host: &h,
                port,
                http: None,
            };
            match p.open(&d).await {
                Err(OpenError::Refused(r)) => {
                    assert_eq!(r.class, Some(Class::Loopback), "{host}")
                }
                other => panic!("{host}: {other:?}"),
            }
        }
        // allow_private opens exactly that address.
        let p = policy(&["localhost"], &[], &["127.0.0.1/32"]);
        let h = parse_host("localhost").unwrap();
        let o = p
            .open(&Destination {
                host: &h,
                port,
                http: None,
            })
            .await
            .unwrap();
        assert_eq!(o.address, SocketAddr::from(([127, 0, 0, 1], port)));
        assert_eq!(o.rule, "localhost");
    }

    /// `[egress] ask = true`: what the rules leave open is asked about,
    /// after deny and the address classes; approved, it connects and says
    /// who approved; refused, the message still names the rule to add.
    #[tokio::test]
    async fn ask_comes_after_deny_and_the_classes() {
        use crate::egress::ask::{CallAsk, tests::Counting};
        use std::sync::atomic::Ordering;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let with_ask = |deny: &[&str], private: &[&str]| {
            let mut p = policy(&["example.org"], deny, private);
            let mut g = (*p.global).clone();
            g.ask = true;
            p.global = Arc::new(g);
            p
        };
        let localhost = parse_host("localhost").unwrap();
        let d = Destination {
            host: &localhost,
            port,
            http: None,
        };
        let open = |p: Policy, approver: Arc<Counting>| async move {
            let ask = CallAsk::new(approver, ask::tests::call(), None);
            let asking = Asking {
                ask: &*ask,
                plugin: "bash",
                via: "connect",
            };
            p.open_asking(&d, Some(asking)).await
        };
        // Approved: connected to the checked address, the approver named.
        let yes = Counting::new(true);
        let o = open(with_ask(&[], &["127.0.0.1/32"]), yes.clone())
            .await
            .unwrap();
        assert_eq!(o.address, SocketAddr::from(([127, 0, 0, 1], port)));
        assert_eq!(o.rule, APPROVAL_RULE);
        assert_eq!(o.approved_by.as_deref(), Some("counting"));
        assert_eq!(yes.egress.load(Ordering::SeqCst), 1);
        // Refused: the rule to add, and who refused.
        let no = Counting::new(false);
        match open(with_ask(&[], &["127.0.0.1/32"]), no.clone()).await {
            Err(OpenError::Refused(r)) => {
                assert!(
                    r.message
                        .contains(&format!("add \"localhost:{port}\" to `egress = [...]`"))
                        && r.message.contains("counting refused: not there"),
                    "{}",
                    r.message
                );
                assert_eq!(r.refused_by.as_deref(), Some("counting"));
                assert_eq!(r.record_rule().as_deref(), Some(APPROVAL_RULE));
            }
            other => panic!("{other:?}"),
        }
        // A loopback name without allow_private: refused by class, and
        // nobody is asked — an ask never opens a private address.
        let yes = Counting::new(true);
        match open(with_ask(&[], &[]), yes.clone()).await {
            Err(OpenError::Refused(r)) => assert_eq!(r.class, Some(Class::Loopback)),
            other => panic!("{other:?}"),
        }
        assert_eq!(yes.egress.load(Ordering::SeqCst), 0);
        // A deny rule by name is final: not asked.
        match open(with_ask(&["localhost"], &["127.0.0.1/32"]), yes.clone()).await {
            Err(OpenError::Refused(r)) => assert_eq!(r.deny_rule.as_deref(), Some("localhost")),
            other => panic!("{other:?}"),
        }
        // Nor is a deny block holding the address.
        match open(with_ask(&["127.0.0.0/8"], &["127.0.0.1/32"]), yes.clone()).await {
            Err(OpenError::Refused(r)) => assert_eq!(r.deny_rule.as_deref(), Some("127.0.0.0/8")),
            other => panic!("{other:?}"),
        }
        assert_eq!(yes.egress.load(Ordering::SeqCst), 0);
        // `ask = false`: refused as before, not asked.
        match open(
            policy(&["example.org"], &[], &["127.0.0.1/32"]),
            yes.clone(),
        )
        .await
        {
            Err(OpenError::Refused(r)) => assert!(r.refused_by.is_none()),
            other => panic!("{other:?}"),
        }
        assert_eq!(yes.egress.load(Ordering::SeqCst), 0);
    }
}
