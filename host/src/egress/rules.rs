//! Egress rules as the operator writes them, and how a destination matches.
//!
//! A rule is `[METHOD ]HOST[:PORT][/PATH]`:
//!
//! * `HOST` is a name (`pypi.org`), a wildcard for every subdomain
//!   (`*.example.org` matches `a.example.org` and `a.b.example.org`, not
//!   `example.org` itself: write both for both), or an IP literal (read like
//!   any host, see [`super::addr::parse_host`]);
//! * `:PORT` is optional (no port: any port);
//! * `METHOD` and `/PATH` (a glob where `*` matches any run of characters)
//!   make a rule for *plain* HTTP only: the proxy sees the method and path
//!   of an `http://` request, never those inside a `CONNECT` tunnel or a
//!   SOCKS connection, so such a rule never allows a tunnel. `METHOD` may be
//!   `*`. The path is matched in its normal form
//!   ([`super::target::NormalTarget`]: dot segments removed, unreserved
//!   characters decoded), the only form a request's path is ever matched
//!   in, so a rule's path must be in that form too: one that is not (it
//!   could never match) is refused with the form to write.
//!
//! Names are compared after normalisation (lowercase, no trailing dot); a
//! rule is never matched against the text of an IP literal, only against
//! the address it means.

use std::fmt;
use std::net::IpAddr;

use super::addr::{Cidr, Host, parse_host};
use super::target::NormalTarget;

/// The host part of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this name.
    Exact(String),
    /// Any name ending in `.SUFFIX` (the suffix itself excluded).
    Subdomains(String),
    /// This address (any spelling of it).
    Ip(IpAddr),
    /// Any address in this block (`[egress] deny` only).
    Block(Cidr),
}

/// One rule: a host pattern, an optional port, an optional method and path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub host: HostPattern,
    pub port: Option<u16>,
    /// `(METHOD, PATH glob)`: plain HTTP only.
    pub http: Option<(String, String)>,
    /// As written, for messages and the audit record.
    pub text: String,
}

/// What a connection asks for, as the rules see it.
#[derive(Clone, Copy, Debug)]
pub struct Destination<'a> {
    pub host: &'a Host,
    pub port: u16,
    /// `(METHOD, PATH)` of a plain HTTP request, the path normalised;
    /// `None` for a tunnel.
    pub http: Option<(&'a str, &'a NormalTarget)>,
}

impl Rule {
    /// Parses one rule; `blocks`: CIDR blocks are allowed (deny lists).
    pub fn parse(text: &str, blocks: bool) -> Result<Rule, String> {
        let t = text.trim();
        let bad = |why: &str| {
            format!(
                "egress rule {text:?}: {why} (expected `HOST`, `*.DOMAIN`, `HOST:PORT` or \
                 `METHOD HOST[:PORT]/PATH`)"
            )
        };
        if t.is_empty() {
            return Err(bad("it is empty"));
        }
        let (method, rest) = match t.split_once(char::is_whitespace) {
            Some((m, r)) => {
                let m = m.to_ascii_uppercase();
                if m != "*" && !m.bytes().all(|b| b.is_ascii_uppercase()) {
                    return Err(bad("the method must be letters or `*`"));
                }
                (Some(m), r.trim())
            }
            None => (None, t),
        };
        let (authority, path) = match (&method, rest.find('/')) {
            (Some(_), Some(i)) => {
                let path = &rest[i..];
                match NormalTarget::parse(path) {
                    Ok(n) if n.as_str() == path => {}
                    Ok(n) => {
                        return Err(bad(&format!(
                            "requests are matched with their path in normal form: write `{n}`"
                        )));
                    }
                    Err(e) => return Err(bad(&format!("no request path can match it: {e}"))),
                }
                (&rest[..i], Some(path.to_string()))
            }
            (Some(_), None) => return Err(bad("a method needs a path")),
            (None, Some(_)) if blocks => {
                let cidr = Cidr::parse(rest).map_err(|e| bad(&e))?;
                return Ok(Rule {
                    host: HostPattern::Block(cidr),
                    port: None,
                    http: None,
                    text: t.to_string(),
                });
            }
            (None, Some(_)) => {
                return Err(bad(
                    "a path needs a method; an address block is for `[egress] deny` only",
                ));
            }
            (None, None) => (rest, None),
        };
        let (host, port) = split_port(authority).map_err(|e| bad(&e))?;
        let host = if let Some(suffix) = host.strip_prefix("*.") {
            match parse_host(suffix).map_err(|e| bad(&e.to_string()))? {
                Host::Name(n) => HostPattern::Subdomains(n),
                Host::Ip(_) => return Err(bad("a wildcard needs a domain, not an address")),
            }
        } else if host.contains('*') {
            return Err(bad(
                "`*` is allowed only as the first label (`*.example.org`)",
            ));
        } else {
            match parse_host(host).map_err(|e| bad(&e.to_string()))? {
                Host::Name(n) => HostPattern::Exact(n),
                Host::Ip(a) => HostPattern::Ip(super::addr::canonical(a)),
            }
        };
        Ok(Rule {
            host,
            port,
            http: method.zip(path),
            text: t.to_string(),
        })
    }

    /// Whether the rule matches the destination by name (or literal
    /// address) and port, and, for an HTTP rule, method and path.
    pub fn matches(&self, d: &Destination<'_>) -> bool {
        if self.port.is_some_and(|p| p != d.port) {
            return false;
        }
        let host = match (&self.host, d.host) {
            (HostPattern::Exact(r), Host::Name(n)) => r == n,
            (HostPattern::Subdomains(s), Host::Name(n)) => n
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(r), Host::Ip(a)) => *r == super::addr::canonical(*a),
            (HostPattern::Block(b), Host::Ip(a)) => b.contains(*a),
            _ => false,
        };
        if !host {
            return false;
        }
        match (&self.http, d.http) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some((m, p)), Some((method, path))) => {
                (m == "*" || m.eq_ignore_ascii_case(method)) && glob(p, path.as_str())
            }
        }
    }

    /// Whether a deny rule that is a CIDR block holds `ip` (a name's
    /// resolved address).
    pub fn blocks_address(&self, ip: IpAddr) -> bool {
        matches!(&self.host, HostPattern::Block(b) if b.contains(ip))
            || matches!(&self.host, HostPattern::Ip(a) if *a == super::addr::canonical(ip))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`.
fn split_port(s: &str) -> Result<(&str, Option<u16>), String> {
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("`{p}` is not a port (1–65535)"))
    };
    if s.starts_with('[') {
        let end = s.find(']').ok_or("an unclosed `[`")?;
        let host = &s[..=end];
        return match &s[end + 1..] {
            "" => Ok((host, None)),
            rest => match rest.strip_prefix(':') {
                Some(p) => Ok((host, Some(port(p)?))),
                None => Err(format!("unexpected `{rest}` after the address")),
            },
        };
    }
    if s.matches(':').count() > 1 {
        return Ok((s, None)); // a bare IPv6 address
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Ok((h, Some(port(p)?))),
        None => Ok((s, None)),
    }
}

/// `*` matches any run of characters (`/` included); everything else
/// itself. The query string is part of the path.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dest(host: &str, port: u16) -> (Host, u16) {
        (parse_host(host).unwrap(), port)
    }

    fn hits(rule: &str, host: &str, port: u16, http: Option<(&str, &str)>) -> bool {
        let r = Rule::parse(rule, false).unwrap();
        let (h, p) = dest(host, port);
        let path = http.map(|(_, path)| NormalTarget::parse(path).unwrap());
        r.matches(&Destination {
            host: &h,
            port: p,
            http: http.zip(path.as_ref()).map(|((m, _), p)| (m, p)),
        })
    }

    #[test]
    fn names_ports_and_wildcards() {
        assert!(hits("pypi.org", "pypi.org", 443, None));
        assert!(hits("pypi.org", "PyPI.org.", 80, None));
        assert!(!hits("pypi.org", "evil-pypi.org", 443, None));
        assert!(!hits("pypi.org", "pypi.org.evil.com", 443, None));
        assert!(hits("example.com:443", "example.com", 443, None));
        assert!(!hits("example.com:443", "example.com", 80, None));
        assert!(hits("*.example.org", "a.example.org", 443, None));
        assert!(hits("*.example.org", "a.b.example.org", 443, None));
        assert!(!hits("*.example.org", "example.org", 443, None));
        assert!(!hits("*.example.org", "badexample.org", 443, None));
        assert!(hits("*.example.org:8443", "x.example.org", 8443, None));
        assert!(!hits("*.example.org:8443", "x.example.org", 443, None));
    }

    #[test]
    fn literal_rules_match_every_spelling_of_their_address() {
        assert!(hits("127.0.0.1:8080", "2130706433", 8080, None));
        assert!(hits("127.0.0.1", "[::ffff:127.0.0.1]", 1, None));
        assert!(!hits("127.0.0.1", "localhost", 1, None));
        assert!(hits("[::1]:80", "::1", 80, None));
    }

    #[test]
    fn method_and_path_rules_are_for_plain_http_only() {
        let r = "GET pypi.org/simple/*";
        assert!(hits(r, "pypi.org", 80, Some(("GET", "/simple/requests/"))));
        assert!(hits(r, "pypi.org", 80, Some(("get", "/simple/x"))));
        assert!(!hits(r, "pypi.org", 80, Some(("POST", "/simple/x"))));
        assert!(!hits(r, "pypi.org", 80, Some(("GET", "/admin"))));
        // A tunnel shows no path: the rule does not allow it.
        assert!(!hits(r, "pypi.org", 443, None));
        assert!(hits(
            "* example.com/a*/b",
            "example.com",
            80,
            Some(("PUT", "/ax/y/b"))
        ));
        // Matched in normal form: a dotted way out of the path is not in it.
        assert!(!hits(r, "pypi.org", 80, Some(("GET", "/simple/../admin"))));
        assert!(hits(r, "pypi.org", 80, Some(("GET", "/simple/%2E/x"))));
    }

    #[test]
    fn a_rule_path_not_in_normal_form_is_refused_with_the_form_to_write() {
        for (rule, says) in [
            ("GET example.com/a/../b/*", "write `/b/*`"),
            ("GET example.com/%7euser/*", "write `/~user/*`"),
            ("GET example.com/a%2fb", "encoded `/`"),
            ("GET example.com/../x", "above the root"),
        ] {
            let e = Rule::parse(rule, true).unwrap_err();
            assert!(e.contains(says), "{rule}: {e}");
        }
        assert!(Rule::parse("GET example.com/a/%C3%A9/*?q=*", false).is_ok());
    }

    #[test]
    fn malformed_rules_say_what_is_wrong() {
        for bad in [
            "",
            "foo.*.com",
            "*.127.0.0.1",
            "example.com:0",
            "example.com:99999",
            "GET example.com",
            "example.com/path",
            "G3T example.com/x",
            "1.2.3.4.5",
            "[::1",
        ] {
            let e = Rule::parse(bad, false).unwrap_err();
            assert!(e.contains("egress rule"), "{bad}: {e}");
        }
        // Blocks only in deny lists.
        assert!(Rule::parse("10.0.0.0/8", false).is_err());
        let b = Rule::parse("10.0.0.0/8", true).unwrap();
        assert!(b.blocks_address("10.9.9.9".parse().unwrap()));
        assert!(b.blocks_address("::ffff:10.9.9.9".parse().unwrap()));
        assert!(!b.blocks_address("11.0.0.1".parse().unwrap()));
    }

    #[test]
    fn globs() {
        assert!(glob("/simple/*", "/simple/"));
        assert!(glob("/simple/*", "/simple/a/b?c=d"));
        assert!(!glob("/simple/*", "/simpl"));
        assert!(glob("*", ""));
        assert!(glob("/a*b*c", "/aXbYc"));
        assert!(!glob("/a*b*c", "/aXbY"));
    }
}
