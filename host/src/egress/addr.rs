//! Addresses: every spelling of an IP literal read to one address, and the
//! classes of address egress refuses after resolution.
//!
//! Why both: a rule or a class check on the *text* of a host is bypassed by
//! spelling the same address another way. `inet_aton`, which `getaddrinfo`,
//! `curl` and most HTTP clients use, reads `2130706433`, `0177.0.0.1`,
//! `0x7f.1` and `127.1` all as 127.0.0.1; and `::ffff:127.0.0.1` reaches
//! the loopback through an IPv6 socket. So a host is first read the way
//! `inet_aton` would ([`parse_host`]): an IP literal in any encoding becomes
//! the address, a name stays a name (lowercase, without a trailing dot), and
//! something that looks numeric but is no valid address is refused rather
//! than handed to a resolver that may read it differently. Then every
//! address the connection would use — a literal, or each address a name
//! resolved to — is checked against the refused classes ([`refused_class`]),
//! IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4)
//! by the address they embed.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host as a connection names it, read once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// An IP literal (any encoding), as the address it means.
    Ip(IpAddr),
    /// A DNS name: lowercase ASCII, no trailing dot.
    Name(String),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            Host::Ip(a) => write!(f, "{a}"),
            Host::Name(n) => f.write_str(n),
        }
    }
}

/// Why a host string is not one egress accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("the host is empty")]
    Empty,
    #[error("`{0}` looks like an IP address but is not a valid one")]
    BadNumeric(String),
    #[error("`{0}` is not a valid host name (letters, digits, `-`, `.`, `_`; 253 bytes at most)")]
    BadName(String),
}

/// Reads `host` the way `inet_aton` and the URL standard do: brackets
/// around IPv6, IPv4 in one to four parts, each decimal, octal (leading
/// `0`) or hex (`0x`), the last part filling the remaining bytes; an IPv6
/// zone (`%eth0`) is refused. A name is lowercased and loses one trailing
/// dot. A host whose last label is numeric (as the URL standard decides)
/// must be a valid IPv4 address: it is never resolved as a name.
pub fn parse_host(host: &str) -> Result<Host, HostError> {
    let host = host.trim();
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .map(|a| Host::Ip(IpAddr::V6(a)))
            .map_err(|_| HostError::BadNumeric(host.to_string()));
    }
    if host.contains(':') {
        return host
            .parse::<Ipv6Addr>()
            .map(|a| Host::Ip(IpAddr::V6(a)))
            .map_err(|_| HostError::BadNumeric(host.to_string()));
    }
    let lower = host.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    // The URL standard's "ends in a number": then it is IPv4 or nothing.
    let last = name.rsplit('.').next().unwrap_or(name);
    if !last.is_empty() && (last.bytes().all(|b| b.is_ascii_digit()) || number(last).is_some()) {
        return parse_ipv4_any(name)
            .map(|a| Host::Ip(IpAddr::V4(a)))
            .ok_or_else(|| HostError::BadNumeric(host.to_string()));
    }
    let valid = name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return Err(HostError::BadName(host.to_string()));
    }
    Ok(Host::Name(name.to_string()))
}

/// One part of an `inet_aton` address: decimal, `0`-prefixed octal or
/// `0x`-prefixed hex.
fn number(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) =
        if let Some(h) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (h, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        // "0x" alone is 0 for the URL standard.
        return (radix == 16).then_some(0);
    }
    if digits.len() > 32 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// `inet_aton`: `a`, `a.b`, `a.b.c`, `a.b.c.d`.
fn parse_ipv4_any(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let nums: Vec<u64> = parts.iter().map(|p| number(p)).collect::<Option<_>>()?;
    let (head, last) = nums.split_at(nums.len() - 1);
    if head.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 8 * (4 - head.len() as u32);
    if last[0] >= 1u64 << room {
        return None;
    }
    let mut v: u64 = 0;
    for (i, &n) in head.iter().enumerate() {
        v |= n << (24 - 8 * i as u32);
    }
    v |= last[0];
    Some(Ipv4Addr::from(v as u32))
}

/// A CIDR block, `10.1.0.0/16` or `fd00::/8`; a bare address is `/32` or
/// `/128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// Parses `ADDR[/PREFIX]` (IPv4 in dotted decimal, IPv6 as usual).
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| format!("`{s}` is not a CIDR block (like 10.1.0.0/16 or fd00::/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("`{s}`: the prefix length must be 0 to {max}"))?,
            None => max,
        };
        Ok(Cidr { addr, prefix })
    }

    /// Whether `ip` lies in the block. An IPv4 block also holds the
    /// IPv4-mapped IPv6 forms of its addresses.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => prefix_eq(&net.octets(), &a.octets(), self.prefix),
            (IpAddr::V6(net), IpAddr::V6(a)) => prefix_eq(&net.octets(), &a.octets(), self.prefix),
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn prefix_eq(a: &[u8], b: &[u8], prefix: u8) -> bool {
    let full = (prefix / 8) as usize;
    if a[..full] != b[..full] {
        return false;
    }
    let rest = prefix % 8;
    rest == 0 || (a[full] ^ b[full]) >> (8 - rest) == 0
}

/// An IPv4-mapped IPv6 address as the IPv4 address it reaches; any other
/// address unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// A class of addresses egress refuses unless `[egress] allow_private`
/// names a block holding the address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Unspecified,
    Loopback,
    /// RFC 1918 (IPv4) or unique local fc00::/7 (IPv6), or the deprecated
    /// site-local fec0::/10.
    Private,
    /// 169.254.0.0/16 (the cloud metadata address among them) or fe80::/10.
    LinkLocal,
    /// 100.64.0.0/10, carrier-grade NAT.
    SharedCgnat,
    Multicast,
    Broadcast,
    /// 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32.
    Documentation,
    /// 240.0.0.0/4, 192.0.0.0/24, 198.18.0.0/15 (benchmarking): reserved
    /// or special-purpose, never a public destination.
    Reserved,
}

impl Class {
    /// How messages and the audit record name it.
    pub fn name(self) -> &'static str {
        match self {
            Class::Unspecified => "unspecified",
            Class::Loopback => "loopback",
            Class::Private => "private",
            Class::LinkLocal => "link-local",
            Class::SharedCgnat => "carrier-grade NAT",
            Class::Multicast => "multicast",
            Class::Broadcast => "broadcast",
            Class::Documentation => "documentation",
            Class::Reserved => "reserved",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The refused class `ip` falls in, `None` for a public address. IPv6
/// addresses that embed an IPv4 address — mapped `::ffff:a.b.c.d`,
/// compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`
/// — are judged by the IPv4 address they embed.
pub fn refused_class(ip: IpAddr) -> Option<Class> {
    match ip {
        IpAddr::V4(a) => v4_class(a),
        IpAddr::V6(a) => v6_class(a),
    }
}

fn v4_class(a: Ipv4Addr) -> Option<Class> {
    let o = a.octets();
    let in_block = |net: [u8; 4], prefix: u8| prefix_eq(&net, &o, prefix);
    Some(if in_block([0, 0, 0, 0], 8) {
        Class::Unspecified
    } else if in_block([127, 0, 0, 0], 8) {
        Class::Loopback
    } else if in_block([10, 0, 0, 0], 8)
        || in_block([172, 16, 0, 0], 12)
        || in_block([192, 168, 0, 0], 16)
    {
        Class::Private
    } else if in_block([169, 254, 0, 0], 16) {
        Class::LinkLocal
    } else if in_block([100, 64, 0, 0], 10) {
        Class::SharedCgnat
    } else if in_block([224, 0, 0, 0], 4) {
        Class::Multicast
    } else if o == [255, 255, 255, 255] {
        Class::Broadcast
    } else if in_block([192, 0, 2, 0], 24)
        || in_block([198, 51, 100, 0], 24)
        || in_block([203, 0, 113, 0], 24)
    {
        Class::Documentation
    } else if in_block([240, 0, 0, 0], 4)
        || in_block([192, 0, 0, 0], 24)
        || in_block([198, 18, 0, 0], 15)
    {
        Class::Reserved
    } else {
        return None;
    })
}

fn v6_class(a: Ipv6Addr) -> Option<Class> {
    let o = a.octets();
    let seg = a.segments();
    let in_block = |net: [u8; 16], prefix: u8| prefix_eq(&net, &o, prefix);
    let embedded = |from: usize| Ipv4Addr::new(o[from], o[from + 1], o[from + 2], o[from + 3]);
    if a.is_unspecified() {
        return Some(Class::Unspecified);
    }
    if a.is_loopback() {
        return Some(Class::Loopback);
    }
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated).
    if seg[..5] == [0; 5] && (seg[5] == 0xffff || seg[5] == 0) {
        return v4_class(embedded(12)).or(Some(Class::Reserved).filter(|_| seg[5] == 0));
    }
    // NAT64 64:ff9b::/96 and the local-use 64:ff9b:1::/48.
    if seg[0] == 0x64 && seg[1] == 0xff9b {
        return v4_class(embedded(12));
    }
    // 6to4: 2002:AABB:CCDD::/48 reaches AA.BB.CC.DD.
    if seg[0] == 0x2002 {
        return v4_class(embedded(2));
    }
    let mut net = [0u8; 16];
    net[0] = 0xfc;
    if in_block(net, 7) {
        return Some(Class::Private);
    }
    net[0] = 0xfe;
    net[1] = 0xc0;
    if in_block(net, 10) {
        return Some(Class::Private);
    }
    net[1] = 0x80;
    if in_block(net, 10) {
        return Some(Class::LinkLocal);
    }
    if o[0] == 0xff {
        return Some(Class::Multicast);
    }
    if seg[0] == 0x2001 && seg[1] == 0x0db8 {
        return Some(Class::Documentation);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        match parse_host(s).unwrap() {
            Host::Ip(a) => a,
            other => panic!("{s} read as {other:?}"),
        }
    }

    #[test]
    fn every_spelling_of_loopback_is_read_as_loopback() {
        for s in [
            "127.0.0.1",
            "2130706433",
            "0177.0.0.1",
            "0x7f.1",
            "0x7f000001",
            "127.1",
            "127.0.1",
            "0x7F.0.0.1",
            "017700000001",
            "127.0.0.1.",
            "[::1]",
            "::1",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "[0:0:0:0:0:ffff:127.0.0.1]",
            "[::127.0.0.1]",
            "[64:ff9b::127.0.0.1]",
            "[2002:7f00:1::]",
        ] {
            assert_eq!(
                refused_class(ip(s)),
                Some(Class::Loopback),
                "{s} is loopback"
            );
        }
    }

    #[test]
    fn the_metadata_address_in_every_encoding_is_link_local() {
        for s in [
            "169.254.169.254",
            "2852039166",
            "0xa9fea9fe",
            "0251.0376.0251.0376",
            "0xa9.0xfe.0xa9.0xfe",
            "169.254.43518",
            "[::ffff:169.254.169.254]",
            "[::ffff:a9fe:a9fe]",
            "[fe80::1]",
        ] {
            assert_eq!(refused_class(ip(s)), Some(Class::LinkLocal), "{s}");
        }
    }

    #[test]
    fn each_class_is_refused_and_public_addresses_are_not() {
        let cases = [
            ("0.0.0.0", Class::Unspecified),
            ("0", Class::Unspecified),
            ("[::]", Class::Unspecified),
            ("10.1.2.3", Class::Private),
            ("172.16.0.1", Class::Private),
            ("172.31.255.255", Class::Private),
            ("192.168.1.1", Class::Private),
            ("[fd12::1]", Class::Private),
            ("[fc00::1]", Class::Private),
            ("[fec0::1]", Class::Private),
            ("[::ffff:10.0.0.1]", Class::Private),
            ("100.64.0.1", Class::SharedCgnat),
            ("100.127.255.255", Class::SharedCgnat),
            ("224.0.0.1", Class::Multicast),
            ("239.255.255.250", Class::Multicast),
            ("[ff02::1]", Class::Multicast),
            ("255.255.255.255", Class::Broadcast),
            ("192.0.2.1", Class::Documentation),
            ("198.51.100.7", Class::Documentation),
            ("203.0.113.9", Class::Documentation),
            ("[2001:db8::1]", Class::Documentation),
            ("240.0.0.1", Class::Reserved),
            ("198.18.0.1", Class::Reserved),
            ("192.0.0.8", Class::Reserved),
        ];
        for (s, class) in cases {
            assert_eq!(refused_class(ip(s)), Some(class), "{s}");
        }
        for s in [
            "93.184.215.14",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "[2606:4700::1111]",
            "[::ffff:8.8.8.8]",
            "[64:ff9b::8.8.8.8]",
        ] {
            assert_eq!(refused_class(ip(s)), None, "{s} is public");
        }
    }

    #[test]
    fn names_are_normalised_and_numeric_garbage_is_refused() {
        assert_eq!(
            parse_host("PyPI.org.").unwrap(),
            Host::Name("pypi.org".into())
        );
        assert_eq!(
            parse_host("files.pythonhosted.org").unwrap(),
            Host::Name("files.pythonhosted.org".into())
        );
        // Names that end in a number-like label are addresses or nothing.
        for s in [
            "1.2.3.4.5",
            "256.1.1.1",
            "1.0xfffffff",
            "example.123",
            "1.2.3.0x100",
            "4294967296",
            "08.0.0.1",
            "[::1",
            "[::1%eth0]",
        ] {
            assert!(
                matches!(parse_host(s), Err(HostError::BadNumeric(_))),
                "{s}: {:?}",
                parse_host(s)
            );
        }
        // "0x1g" is a name (the URL standard), never an address.
        assert_eq!(parse_host("0x1g").unwrap(), Host::Name("0x1g".into()));
        for s in ["ex ample.com", "a..b", "-x.com\0"] {
            assert!(parse_host(s).is_err(), "{s}");
        }
        assert_eq!(parse_host(""), Err(HostError::Empty));
        // A label that merely starts with digits is a name.
        assert_eq!(
            parse_host("1password.com").unwrap(),
            Host::Name("1password.com".into())
        );
    }

    #[test]
    fn cidr_blocks_hold_their_addresses_and_mapped_forms() {
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains(ip("10.1.200.3")));
        assert!(c.contains(ip("[::ffff:10.1.0.9]")));
        assert!(!c.contains(ip("10.2.0.1")));
        let one = Cidr::parse("127.0.0.1").unwrap();
        assert!(one.contains(ip("2130706433")));
        assert!(!one.contains(ip("127.0.0.2")));
        let v6 = Cidr::parse("fd00::/8").unwrap();
        assert!(v6.contains(ip("[fd12::1]")));
        assert!(Cidr::parse("10.0.0.0/33").is_err());
        assert!(Cidr::parse("example.com/8").is_err());
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
    }
}
