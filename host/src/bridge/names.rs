//! Public names of bridged tools: `mcp__<server>__<tool>`.
//!
//! A model-facing tool name must be 1–64 characters of `[A-Za-z0-9_-]`
//! (what every model API accepts). An MCP server may list any string as a
//! tool name — long, with dots or spaces, in any script, even empty — so the
//! raw name cannot always be used as is. The rules:
//!
//! * `mcp__<server>__<raw>` is used unchanged when it fits: at most 64
//!   characters, only `[A-Za-z0-9_-]`, and not ending in what looks like a
//!   digest suffix (`_` and 8 hexadecimal digits).
//! * Otherwise every character outside `[A-Za-z0-9_-]` becomes `_`, the
//!   result is cut so that the whole name fits in 64 characters, and `_`
//!   plus the first 8 hexadecimal digits of the SHA-256 of the *raw* name
//!   are appended.
//!
//! So the same raw name always maps to the same public name; an unchanged
//! name never ends in a digest suffix and a sanitized one always does, so
//! the two kinds never meet; two sanitized names meet only if their
//! digests agree in 32 bits — and the bridge checks every listing for
//! that and refuses the second tool, naming both raw names
//! ([`crate::bridge::convert`]). Server names are checked when the
//! configuration is read ([`valid_server_name`]): no `__` in them, so
//! `mcp__a__b__c` cannot be read two ways.
//!
//! A server configured with `namespace = false` keeps its own names
//! ([`name_in`]): a gateway in front of one server, whose clients expect
//! that server's names (the official conformance suite is one). Only a raw
//! name that is a valid public name as it is — and does not start with
//! `mcp__`, which would pass it off as another server's — is kept; any
//! other gets the namespaced name above, so a name still never reads two
//! ways. A kept name that another tool already has is not registered (the
//! host's tools win: [`crate::bridge::merge`]).
//!
//! Resource URIs are namespaced by [`resource_uri`]: `toolgate-mcp://SERVER/`
//! followed by the raw URI, verbatim — any string round-trips
//! ([`split_resource_uri`]), and a server name holds no `/`.

use sha2::{Digest, Sha256};

/// The longest public tool name.
pub const MAX_NAME: usize = 64;
/// The longest server name (leaving at least 37 characters for the tool).
pub use super::config::{MAX_SERVER_NAME, valid_server_name};
/// Hexadecimal digits of the digest suffix.
const DIGEST_DIGITS: usize = 8;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn ends_like_digest(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > DIGEST_DIGITS
        && b[b.len() - DIGEST_DIGITS - 1] == b'_'
        && b[b.len() - DIGEST_DIGITS..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// The public name of the tool `raw` of server `server` (a valid server
/// name), and whether it had to be sanitized.
pub fn public_name(server: &str, raw: &str) -> (String, bool) {
    let prefix = format!("mcp__{server}__");
    let plain = format!("{prefix}{raw}");
    if !raw.is_empty()
        && plain.len() <= MAX_NAME
        && raw.chars().all(allowed)
        && !ends_like_digest(&plain)
    {
        return (plain, false);
    }
    let digest = Sha256::digest(raw.as_bytes());
    let hex: String = digest
        .iter()
        .take(DIGEST_DIGITS / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let room = MAX_NAME - prefix.len() - 1 - DIGEST_DIGITS;
    let body: String = raw
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .take(room)
        .collect();
    (format!("{prefix}{body}_{hex}"), true)
}

/// The prefix of every namespaced name of `server`'s tools and prompts.
pub fn prefix(server: &str) -> String {
    format!("mcp__{server}__")
}

/// The public name of `raw` of `server`: [`public_name`] when `namespaced`,
/// else `raw` itself when it is a valid public name not starting with
/// `mcp__` (and [`public_name`] when not).
pub fn name_in(server: &str, raw: &str, namespaced: bool) -> (String, bool) {
    if !namespaced
        && !raw.is_empty()
        && raw.len() <= MAX_NAME
        && raw.chars().all(allowed)
        && !ends_like_digest(raw)
        && !raw.starts_with("mcp__")
    {
        return (raw.to_string(), false);
    }
    public_name(server, raw)
}

/// The public name's raw name without a listing, when it can be read off:
/// a namespaced name of `server` that was not sanitized (`None` for a
/// sanitized one: its raw name is found by listing again).
pub fn raw_of<'a>(server: &str, public: &'a str) -> Option<&'a str> {
    let rest = public.strip_prefix("mcp__")?.strip_prefix(server)?;
    let rest = rest.strip_prefix("__")?;
    (!rest.is_empty() && !ends_like_digest(public)).then_some(rest)
}

/// The scheme of namespaced resource URIs.
pub const RESOURCE_SCHEME: &str = "toolgate-mcp://";

/// The public URI of `server`'s resource `raw` (or a URI template's prefix).
pub fn resource_uri(server: &str, raw: &str, namespaced: bool) -> String {
    if namespaced || raw.starts_with(RESOURCE_SCHEME) {
        format!("{RESOURCE_SCHEME}{server}/{raw}")
    } else {
        raw.to_string()
    }
}

/// A namespaced URI's server and raw URI (`None`: not namespaced).
pub fn split_resource_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(RESOURCE_SCHEME)?.split_once('/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn valid(name: &str) -> bool {
        !name.is_empty() && name.len() <= MAX_NAME && name.chars().all(allowed)
    }

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(
            public_name("time", "get_current_time"),
            ("mcp__time__get_current_time".into(), false)
        );
        assert_eq!(
            public_name("everything", "get-sum").0,
            "mcp__everything__get-sum"
        );
    }

    #[test]
    fn unicode_spaces_and_dots_are_sanitized_with_a_digest() {
        for raw in [
            "récupérer",
            "天气",
            "a.b",
            "has space",
            "emoji🙂",
            "tab\there",
        ] {
            let (name, changed) = public_name("s", raw);
            assert!(changed, "{raw}");
            assert!(valid(&name), "{raw} -> {name}");
            assert!(ends_like_digest(&name), "{name}");
            // Deterministic.
            assert_eq!(public_name("s", raw).0, name);
        }
        assert_eq!(public_name("s", "a.b").0.len(), "mcp__s__a_b_".len() + 8);
    }

    #[test]
    fn the_empty_name_gets_a_digest() {
        let (name, changed) = public_name("s", "");
        assert!(changed);
        assert!(valid(&name) && ends_like_digest(&name), "{name}");
    }

    #[test]
    fn very_long_names_are_cut_to_64_and_stay_distinct() {
        let a = "x".repeat(500);
        let b = format!("{}y", "x".repeat(499));
        let (na, _) = public_name("everything", &a);
        let (nb, _) = public_name("everything", &b);
        assert_eq!(na.len(), MAX_NAME);
        assert_eq!(nb.len(), MAX_NAME);
        assert_ne!(na, nb, "same prefix after the cut, different digests");
        // Exactly at the limit is kept; one more is cut.
        let fits = "f".repeat(MAX_NAME - "mcp__s__".len());
        assert_eq!(public_name("s", &fits), (format!("mcp__s__{fits}"), false));
        let over = format!("{fits}g");
        assert!(public_name("s", &over).1);
    }

    #[test]
    fn collisions_between_sanitized_and_plain_names_cannot_happen() {
        // "a.b" sanitizes to "a_b_<digest>"; a server naming a tool exactly
        // that is sanitized too (it ends like a digest), so it gets another name.
        let (sanitized, _) = public_name("s", "a.b");
        let lookalike = sanitized.trim_start_matches("mcp__s__").to_string();
        let (other, changed) = public_name("s", &lookalike);
        assert!(changed);
        assert_ne!(other, sanitized);
        // A raw name that is only hex digits is kept only if the whole name
        // does not end like a digest.
        assert!(public_name("s", "deadbeef").1);
        assert!(!public_name("s", "deadbeefx").1);
    }

    #[test]
    fn many_names_that_sanitize_alike_never_collide() {
        let mut seen: HashMap<String, String> = HashMap::new();
        let raws: Vec<String> = (0..5000)
            .flat_map(|i| {
                [
                    format!("t.{i}"),
                    format!("t {i}"),
                    format!("t/{i}"),
                    format!("t_{i}"),
                ]
            })
            .collect();
        for raw in raws {
            let (name, _) = public_name("srv", &raw);
            assert!(valid(&name), "{name}");
            if let Some(prev) = seen.insert(name.clone(), raw.clone()) {
                panic!("{prev:?} and {raw:?} both map to {name}");
            }
        }
    }

    #[test]
    fn server_names() {
        for ok in ["time", "everything", "a-b", "a_b", "x1"] {
            assert!(valid_server_name(ok), "{ok}");
        }
        for bad in ["", "a__b", "_a", "a_", "a.b", "ünï", &"s".repeat(21)] {
            assert!(!valid_server_name(bad), "{bad}");
        }
    }

    #[test]
    fn kept_names_never_pass_for_another_servers() {
        assert_eq!(name_in("s", "read", false), ("read".to_string(), false));
        assert_eq!(name_in("s", "read", true).0, "mcp__s__read");
        // What would read as another server's tool, or a sanitized name,
        // is namespaced; so is what is not a valid name.
        assert_eq!(name_in("s", "mcp__t__x", false).0, "mcp__s__mcp__t__x");
        assert_eq!(
            name_in("s", "a_0123abcd", false).0,
            public_name("s", "a_0123abcd").0
        );
        assert!(name_in("s", "a b", false).1);
        assert!(name_in("s", &"x".repeat(65), false).1);
    }

    #[test]
    fn plain_names_read_back_and_sanitized_ones_need_a_listing() {
        let (p, _) = public_name("srv", "get-sum");
        assert_eq!(raw_of("srv", &p), Some("get-sum"));
        assert_eq!(raw_of("sr", &p), None);
        assert_eq!(raw_of("srv", "mcp__srv__"), None);
        let (p, sanitized) = public_name("srv", "a.b");
        assert!(sanitized);
        assert_eq!(raw_of("srv", &p), None);
    }

    #[test]
    fn resource_uris_round_trip_whatever_the_raw_uri() {
        for raw in [
            "test://static-text",
            "file:///etc/x y",
            "",
            "/",
            "toolgate-mcp://other/x",
            "ünï://ç/?#",
        ] {
            let uri = resource_uri("srv", raw, true);
            assert_eq!(split_resource_uri(&uri), Some(("srv", raw)), "{uri}");
        }
        assert_eq!(resource_uri("srv", "test://a", false), "test://a");
        // A kept URI never passes for a namespaced one.
        let uri = resource_uri("srv", "toolgate-mcp://other/x", false);
        assert_eq!(
            split_resource_uri(&uri),
            Some(("srv", "toolgate-mcp://other/x"))
        );
        assert_eq!(split_resource_uri("test://a"), None);
    }
}
