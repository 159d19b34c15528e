//! What a plain HTTP request asks for, in the one form the rules match and
//! the origin gets: the path in its normal form ([`NormalTarget`]) and
//! `Host` set from the allowed name ([`host_header`]).
//!
//! The proxy (a sandboxed process's `http://` requests) and the component
//! path (`wasi:http`) both come through here, and a `METHOD HOST/PATH`
//! rule matches only a [`NormalTarget`] ([`super::Destination`] holds one,
//! and only [`NormalTarget::parse`] makes one), so no raw path is ever
//! matched, and what is sent is exactly what was matched.
//!
//! Why: origins resolve `/public/../secret.txt` — or `%2e%2e`, `..;`
//! (Tomcat, Jetty), `..\` (IIS), `..%2f` — each in its own way, to a file
//! a `GET host/public/*` rule never named. So the path is brought to the
//! normal form of RFC 3986 (6.2.2.2: percent-encoded unreserved characters
//! decoded — `%2e` and `%2E` are `.`; 6.2.2.1: the hex digits of the other
//! escapes in upper case; 5.2.4: dot segments removed), and a path that has
//! no form every origin reads alike is refused: an encoded `/` (`%2F`), a
//! `\` (or `%5C`), an encoded NUL (`%00`), a `%` not followed by two hex
//! digits, a dot segment with parameters (`..;x`), a `..` above the root,
//! or a character that may not stand unescaped in a request target
//! (controls, space, `#`, anything not ASCII). The query is kept as
//! written (checked for the same characters, `\` allowed): its meaning is
//! the origin's, and a rule's `*` matches it as written.
//!
//! Hand-written (no crate normalises *and* refuses this way), so
//! property-tested below besides the unit cases.

use std::fmt;
use std::fmt::Write as _;

use super::addr::Host;

/// A request's path (and query), normalised: what the rules match and
/// what the origin gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NormalTarget(String);

/// Why a request's path has no normal form egress accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("a request path must start with `/`")]
    NotAbsolute,
    #[error("it holds an encoded `/` (%2F), which origins disagree on as a separator")]
    EncodedSlash,
    #[error("it holds a `\\` (or %5C), which some origins read as `/`")]
    Backslash,
    #[error("it holds an encoded NUL (%00)")]
    Nul,
    #[error("it holds a `%` not followed by two hex digits")]
    BadPercent,
    #[error(
        "it holds a dot segment with parameters (`.;` or `..;`), which some origins read as `.` or `..`"
    )]
    DotParameters,
    #[error("its `..` climbs above the root")]
    AboveRoot,
    #[error("it holds {0:?}, which may not stand unescaped in a request target")]
    Character(char),
}

impl NormalTarget {
    /// The normal form of `target`, a path with its query (`/a/b?q`); an
    /// empty path is `/` (RFC 3986 6.2.3), so `""` and `"?q"` are read as
    /// `/` and `/?q`.
    pub fn parse(target: &str) -> Result<NormalTarget, TargetError> {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        if let Some(c) = query.and_then(|q| q.chars().find(|c| !c.is_ascii_graphic() || *c == '#'))
        {
            return Err(TargetError::Character(c));
        }
        let path = match path {
            "" => "/",
            p if p.starts_with('/') => p,
            _ => return Err(TargetError::NotAbsolute),
        };
        let mut out = remove_dot_segments(&decode_unreserved(path)?)?;
        if let Some(q) = query {
            out.push('?');
            out.push_str(q);
        }
        Ok(NormalTarget(out))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NormalTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `Host` of a request egress sends to `host:port`: the name the rules
/// read (or the address), with the port unless it is the scheme's default.
/// Never the client's own `Host` (RFC 9112 3.2.2: a proxy replaces it with
/// the target's authority), so an allowed name is not a way to every
/// virtual host behind the same address.
pub fn host_header(host: &Host, port: u16, default_port: u16) -> String {
    if port == default_port {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

/// RFC 3986 2.3.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `path` with unreserved characters decoded and every other escape in
/// upper case; refuses what has no safe reading (see the module docs).
fn decode_unreserved(path: &str) -> Result<String, TargetError> {
    let b = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = |j: usize| b.get(j).and_then(|&c| (c as char).to_digit(16));
                let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
                    return Err(TargetError::BadPercent);
                };
                match (hi * 16 + lo) as u8 {
                    b'/' => return Err(TargetError::EncodedSlash),
                    b'\\' => return Err(TargetError::Backslash),
                    0 => return Err(TargetError::Nul),
                    c if is_unreserved(c) => out.push(c as char),
                    c => {
                        let _ = write!(out, "%{c:02X}");
                    }
                }
                i += 3;
            }
            b'\\' => return Err(TargetError::Backslash),
            c if c.is_ascii_graphic() && c != b'#' => {
                out.push(c as char);
                i += 1;
            }
            // Every byte before `i` is ASCII: `i` starts a character.
            _ => {
                let c = path[i..]
                    .chars()
                    .next()
                    .unwrap_or(char::REPLACEMENT_CHARACTER);
                return Err(TargetError::Character(c));
            }
        }
    }
    Ok(out)
}

/// RFC 3986 5.2.4 on an absolute path, segment by segment, except that a
/// `..` with nothing left to remove is refused rather than dropped, and a
/// dot segment with parameters is refused.
fn remove_dot_segments(path: &str) -> Result<String, TargetError> {
    let rest = path.strip_prefix('/').ok_or(TargetError::NotAbsolute)?;
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, s) in segments.iter().enumerate() {
        let bare = s.split(';').next().unwrap_or(s);
        if bare.len() != s.len() && (bare == "." || bare == "..") {
            return Err(TargetError::DotParameters);
        }
        match *s {
            "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(TargetError::AboveRoot);
                }
            }
            segment => {
                out.push(segment);
                continue;
            }
        }
        // A dot segment last leaves a directory: `/a/b/..` is `/a/`.
        if i == last {
            out.push("");
        }
    }
    Ok(format!("/{}", out.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn norm(s: &str) -> Result<String, TargetError> {
        NormalTarget::parse(s).map(|n| n.0)
    }

    #[test]
    fn dot_segments_are_removed_and_unreserved_characters_decoded() {
        for (given, normal) in [
            ("/public/a.txt", "/public/a.txt"),
            ("/public/./a.txt", "/public/a.txt"),
            ("/public/b/../a.txt", "/public/a.txt"),
            ("/public/%2e/a.txt", "/public/a.txt"),
            ("/public/%2E%2e/public/a.txt", "/public/a.txt"),
            ("/public/%61%2D%7e.txt", "/public/a-~.txt"),
            ("/a/b/c/./../../g", "/a/g"),
            ("/mid/content=5/../6", "/mid/6"),
            ("/a/b/..", "/a/"),
            ("/a/.", "/a/"),
            ("/a//../b", "/a/b"),
            ("/a/%c3%a9", "/a/%C3%A9"),
            ("/a/%20b", "/a/%20b"),
            ("/a;v=1/b", "/a;v=1/b"),
            ("/a/.hidden/..x/x..", "/a/.hidden/..x/x.."),
            ("", "/"),
            ("?q", "/?q"),
            ("/p/../q?x=%2F../..\\&y", "/q?x=%2F../..\\&y"),
        ] {
            assert_eq!(norm(given).as_deref(), Ok(normal), "{given}");
        }
    }

    #[test]
    fn paths_without_a_safe_reading_are_refused() {
        use TargetError::*;
        for (given, why) in [
            ("/public/..%2fsecret", EncodedSlash),
            ("/public/..%2Fsecret", EncodedSlash),
            ("/public/..\\secret", Backslash),
            ("/public/..%5csecret", Backslash),
            ("/public/%00", Nul),
            ("/public/%zz", BadPercent),
            ("/public/%2", BadPercent),
            ("/public/%", BadPercent),
            ("/public/..;/secret", DotParameters),
            ("/public/%2e;x/secret", DotParameters),
            ("/..", AboveRoot),
            ("/public/../../secret", AboveRoot),
            ("/%2e%2e/secret", AboveRoot),
            ("/a b", Character(' ')),
            ("/a#b", Character('#')),
            ("/a?b#c", Character('#')),
            ("/é", Character('é')),
            ("/a\u{1}", Character('\u{1}')),
            ("a/b", NotAbsolute),
            ("http://x/", NotAbsolute),
        ] {
            assert_eq!(norm(given), Err(why), "{given}");
        }
    }

    #[test]
    fn host_is_the_allowed_name_with_a_port_unless_the_default() {
        let h = |s: &str| crate::egress::parse_host(s).unwrap();
        assert_eq!(host_header(&h("Example.ORG."), 80, 80), "example.org");
        assert_eq!(host_header(&h("example.org"), 8080, 80), "example.org:8080");
        assert_eq!(host_header(&h("2130706433"), 443, 443), "127.0.0.1");
        assert_eq!(host_header(&h("::1"), 8443, 443), "[::1]:8443");
    }

    /// Segments an attacker would try, and ordinary ones.
    fn segment() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-zA-Z0-9._~-]{0,4}",
            2 => Just(".".to_string()),
            2 => Just("..".to_string()),
            1 => Just("%2e".to_string()),
            1 => Just("%2E%2e".to_string()),
            1 => Just(".%2E".to_string()),
            1 => Just("%41%7a".to_string()),
            1 => Just("%c3%A9".to_string()),
            1 => Just("%2f".to_string()),
            1 => Just("%5C".to_string()),
            1 => Just("..;x".to_string()),
            1 => Just("%".to_string()),
            1 => "[!$&'()*+,;=:@]{1,3}",
        ]
    }

    fn path() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(segment(), 0..8),
            prop::option::of("[a-z=&%./]{0,6}"),
        )
            .prop_map(|(segs, q)| {
                let mut p = format!("/{}", segs.join("/"));
                if let Some(q) = q {
                    p.push('?');
                    p.push_str(&q);
                }
                p
            })
    }

    /// Segments with no dot segment, escape or parameter in them.
    fn plain() -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec("[a-z0-9_~-][a-z0-9._~-]{0,3}", 1..6)
    }

    proptest! {
        /// Whatever comes in, what goes out has no dot segment, no encoded
        /// unreserved character (`.` above all), no lower-case escape, no
        /// encoded `/` or `\`; and it is its own normal form.
        #[test]
        fn the_normal_form_has_no_dots_and_is_idempotent(p in path()) {
            if let Ok(n) = NormalTarget::parse(&p) {
                let s = n.as_str();
                prop_assert!(s.starts_with('/'));
                let path = s.split('?').next().unwrap_or(s);
                for seg in path.split('/') {
                    let bare = seg.split(';').next().unwrap_or(seg);
                    prop_assert!(bare != "." && bare != "..", "{p} -> {s}");
                }
                let b = path.as_bytes();
                for (i, _) in path.match_indices('%') {
                    let esc = &path[i + 1..i + 3];
                    prop_assert_eq!(esc, esc.to_ascii_uppercase(), "{} -> {}", p, s);
                    let byte = u8::from_str_radix(esc, 16).unwrap_or(b'.');
                    prop_assert!(!is_unreserved(byte) && byte != b'/' && byte != b'\\',
                        "{} -> {}", p, s);
                }
                prop_assert!(!b.contains(&b'\\'));
                prop_assert_eq!(NormalTarget::parse(s), Ok(n.clone()), "{} -> {}", p, s);
            }
        }

        /// `x/..` before a segment, or `./`, changes nothing: the result is
        /// the path's meaning, not its spelling.
        #[test]
        fn a_detour_changes_nothing(segs in plain(), at in 0usize..6, detour in prop_oneof![
            Just("zz/.."), Just("./"), Just("%2E/"), Just("zz/%2e%2E"), Just("zz/./.."),
        ]) {
            let at = at % segs.len();
            let plain = format!("/{}", segs.join("/"));
            let mut with = segs.clone();
            let detour = if detour.ends_with('/') {
                detour.to_string()
            } else {
                format!("{detour}/")
            };
            with[at] = format!("{detour}{}", with[at]);
            let with = format!("/{}", with.join("/"));
            prop_assert_eq!(norm(&with), norm(&plain), "{}", with);
        }

        /// An unreserved character escaped (either case of hex) is that
        /// character.
        #[test]
        fn escaping_an_unreserved_character_changes_nothing(
            segs in plain(), pick in any::<prop::sample::Index>(), upper in any::<bool>(),
        ) {
            let plain = format!("/{}", segs.join("/"));
            let spots: Vec<usize> = plain.bytes().enumerate()
                .filter(|(_, b)| *b != b'/')
                .map(|(i, _)| i)
                .collect();
            let i = spots[pick.index(spots.len())];
            let esc = if upper {
                format!("%{:02X}", plain.as_bytes()[i])
            } else {
                format!("%{:02x}", plain.as_bytes()[i])
            };
            let with = format!("{}{esc}{}", &plain[..i], &plain[i + 1..]);
            prop_assert_eq!(norm(&with), norm(&plain), "{}", with);
        }
    }
}
