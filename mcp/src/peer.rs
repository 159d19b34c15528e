//! Who is on the other end of an HTTP connection, for per-client shares.
//!
//! Over the network a client is its address. On loopback every local user
//! has the same address (`127.0.0.1`), so there the client is the local
//! **user** that owns the peer socket: the kernel knows it, and says so
//! through `sock_diag` (the `NETLINK_SOCK_DIAG` lookup `ss -e` uses) for the
//! socket's exact 4-tuple. One user's connections and sessions then count
//! against that user's share, whatever the others do. Two clients of the
//! same user share a share: a user can already signal, trace and read the
//! other's processes, so they are one principal.
//!
//! When the lookup fails (no netlink, a socket already gone) the client is
//! its address, which on loopback is one bucket for every local user — the
//! shares still bound the total, they just do not tell users apart.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// One client, for the per-client shares of connections and sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    /// A local user (a loopback peer whose socket owner the kernel named).
    User(u32),
    /// A peer address (non-loopback; or loopback when the owner is unknown).
    Addr(IpAddr),
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Client::User(uid) => write!(f, "local uid {uid}"),
            Client::Addr(ip) => write!(f, "{ip}"),
        }
    }
}

/// The client behind the connection from `peer` to `local`.
pub fn identify(peer: SocketAddr, local: SocketAddr) -> Client {
    let ip = canonical(peer.ip());
    if ip.is_loopback()
        && let Some(uid) = socket_owner(peer, local)
    {
        return Client::User(uid);
    }
    Client::Addr(ip)
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

// <linux/sock_diag.h>, <linux/inet_diag.h>, <linux/netlink.h>.
const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_HDR: usize = 16;
/// `inet_diag_req_v2`: family, protocol, ext, pad, states, then the
/// 48-byte `inet_diag_sockid`.
const REQ_LEN: usize = 8 + 48;
/// Offset of `idiag_uid` in `inet_diag_msg` (4 bytes of family/state/…,
/// the 48-byte sockid, expires, rqueue, wqueue).
const MSG_UID: usize = 4 + 48 + 12;

/// The uid owning the socket at `peer` that is connected to `local`
/// (the client's end of an accepted loopback connection).
fn socket_owner(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    // An IPv4 client of a dual-stack listener is an AF_INET socket.
    let peer = SocketAddr::new(canonical(peer.ip()), peer.port());
    let local = SocketAddr::new(canonical(local.ip()), local.port());
    // The client's socket: its source is `peer`, its destination `local`.
    let (family, src, dst) = match (peer, local) {
        (SocketAddr::V4(p), SocketAddr::V4(l)) => {
            (libc::AF_INET as u8, v4_words(p.ip()), v4_words(l.ip()))
        }
        (SocketAddr::V6(p), SocketAddr::V6(l)) => {
            (libc::AF_INET6 as u8, p.ip().octets(), l.ip().octets())
        }
        _ => return None,
    };
    let mut req = [0u8; NLMSG_HDR + REQ_LEN];
    req[0..4].copy_from_slice(&((NLMSG_HDR + REQ_LEN) as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes()); // sequence
    let body = &mut req[NLMSG_HDR..];
    body[0] = family;
    body[1] = libc::IPPROTO_TCP as u8;
    body[4..8].copy_from_slice(&u32::MAX.to_ne_bytes()); // every state
    let id = &mut body[8..];
    id[0..2].copy_from_slice(&peer.port().to_be_bytes());
    id[2..4].copy_from_slice(&local.port().to_be_bytes());
    id[4..20].copy_from_slice(&src);
    id[20..36].copy_from_slice(&dst);
    // idiag_if = 0; idiag_cookie = INET_DIAG_NOCOOKIE (all ones).
    id[40..48].copy_from_slice(&[0xff; 8]);

    // SAFETY: plain socket calls on a descriptor we own and close; the
    // buffers outlive the calls and their lengths are passed.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        );
        if fd < 0 {
            return None;
        }
        let fd = <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd);
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let timeout = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let sent = libc::sendto(
            raw,
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        );
        if sent != req.len() as isize {
            return None;
        }
        let mut reply = [0u8; 512];
        let n = libc::recv(raw, reply.as_mut_ptr().cast(), reply.len(), 0);
        if n < (NLMSG_HDR + MSG_UID + 4) as isize {
            return None;
        }
        let kind = u16::from_ne_bytes([reply[4], reply[5]]);
        if kind == NLMSG_ERROR || kind != SOCK_DIAG_BY_FAMILY {
            return None;
        }
        let at = NLMSG_HDR + MSG_UID;
        Some(u32::from_ne_bytes(reply[at..at + 4].try_into().ok()?))
    }
}

/// An IPv4 address as `idiag_src`/`idiag_dst` hold it (the first word).
fn v4_words(ip: &std::net::Ipv4Addr) -> [u8; 16] {
    let mut words = [0u8; 16];
    words[..4].copy_from_slice(&ip.octets());
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_peer_is_its_user() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server_side, peer) = listener.accept().unwrap();
        let local = server_side.local_addr().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert_eq!(identify(peer, local), Client::User(me));
        // A 4-tuple nobody has: not a user.
        let nobody: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(identify(nobody, local), Client::Addr(nobody.ip()));
        // The same client seen through a dual-stack listener.
        let mapped = |a: SocketAddr| match a {
            SocketAddr::V4(v4) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
            v6 => v6,
        };
        assert_eq!(identify(mapped(peer), mapped(local)), Client::User(me));
        let remote: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        assert_eq!(identify(remote, local), Client::Addr(remote.ip()));
    }
}
