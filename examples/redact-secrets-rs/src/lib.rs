//! A finalizer that redacts secrets from every result the model sees: API
//! keys and tokens of the common providers, private-key blocks, and
//! `Authorization: Bearer …` values. It runs once per final result, after
//! every post-execute hook, and changes only content (text blocks and
//! embedded text resources; images and audio pass untouched). Results
//! without a secret are left as they are (it answers `none`, so nothing is
//! copied back).
//!
//! Recognised (each replaced by `[REDACTED:<kind>]`):
//! * AWS access key ids (`AKIA…`/`ASIA…`, 20 characters);
//! * GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`);
//! * OpenAI and Anthropic keys (`sk-…`, `sk-proj-…`, `sk-ant-…`);
//! * Slack tokens (`xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`);
//! * Google API keys (`AIza` + 35 characters);
//! * Stripe keys (`sk_live_`, `rk_live_`);
//! * PEM private keys (`-----BEGIN … PRIVATE KEY-----` to its `END` line);
//! * bearer tokens after `Bearer `.
//!
//! No state, no settings, no seam: it imports only the contract's types and
//! runs on the host's synchronous path.

use toolgate_sdk::{Call, ContentBlock, EmbeddedResource, Finalizer, Outcome, ResourceContents};

/// Token prefixes, the kind named in the replacement, and the shortest
/// run of token characters after the prefix that counts as a secret.
const PREFIXES: &[(&str, &str, usize)] = &[
    ("github_pat_", "github-token", 20),
    ("ghp_", "github-token", 20),
    ("gho_", "github-token", 20),
    ("ghu_", "github-token", 20),
    ("ghs_", "github-token", 20),
    ("ghr_", "github-token", 20),
    ("sk-ant-", "anthropic-key", 20),
    ("sk-proj-", "openai-key", 20),
    ("sk-", "openai-key", 20),
    ("sk_live_", "stripe-key", 16),
    ("rk_live_", "stripe-key", 16),
    ("xoxb-", "slack-token", 10),
    ("xoxp-", "slack-token", 10),
    ("xoxa-", "slack-token", 10),
    ("xoxr-", "slack-token", 10),
    ("xoxs-", "slack-token", 10),
];

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// The end of the token run starting at `i`.
fn run_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && token_char(b[i]) {
        i += 1;
    }
    i
}

/// `text` with every secret replaced, or `None` if it has none.
pub fn redact(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0; // bytes of `text` already in `out`
    let mut i = 0;
    let mut found = false;
    while i < b.len() {
        // Only at the start of a word: `task-…` is not an `sk-` key, nor
        // is `ïsk-…` (the letter before may be any script's).
        let at_word_start = text.is_char_boundary(i)
            && text[..i]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
        let hit = if at_word_start {
            secret_at(text, i)
        } else {
            None
        };
        match hit {
            Some((end, kind)) => {
                found = true;
                out.push_str(&text[copied..i]);
                out.push_str("[REDACTED:");
                out.push_str(kind);
                out.push(']');
                copied = end;
                i = end;
            }
            None => i += 1,
        }
    }
    if !found {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// A secret starting at byte `i`: where it ends and its kind.
fn secret_at(text: &str, i: usize) -> Option<(usize, &'static str)> {
    let b = text.as_bytes();
    let rest = &text[i..];
    for (prefix, kind, min) in PREFIXES {
        if rest.starts_with(prefix) {
            let end = run_end(b, i + prefix.len());
            if end - (i + prefix.len()) >= *min {
                return Some((end, kind));
            }
        }
    }
    if (rest.starts_with("AKIA") || rest.starts_with("ASIA")) && rest.len() >= 20 {
        let id = &b[i..i + 20];
        if id
            .iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && (i + 20 == b.len() || !token_char(b[i + 20]))
        {
            return Some((i + 20, "aws-access-key-id"));
        }
    }
    if rest.starts_with("AIza") {
        let end = run_end(b, i);
        if end - i == 39 {
            return Some((end, "google-api-key"));
        }
    }
    if rest.starts_with("-----BEGIN ") {
        let line_end = rest.find('\n').unwrap_or(rest.len());
        if rest[..line_end].contains("PRIVATE KEY-----") {
            // To the end of the matching END line, or the end of the text.
            let end = match rest.find("-----END ") {
                Some(e) => {
                    let after = &rest[e..];
                    let close = after[9..]
                        .find("-----")
                        .map(|c| e + 9 + c + 5)
                        .unwrap_or(rest.len());
                    i + close
                }
                None => text.len(),
            };
            return Some((end, "private-key"));
        }
    }
    if rest.len() > 7 && rest[..7].eq_ignore_ascii_case("bearer ") {
        let start = i + 7;
        let end = b[start..]
            .iter()
            .position(|c| !(token_char(*c) || matches!(c, b'.' | b'=' | b'+' | b'/' | b'~')))
            .map(|p| start + p)
            .unwrap_or(b.len());
        if end - start >= 16 {
            return Some((end, "bearer-token"));
        }
    }
    None
}

struct RedactSecrets;

impl Finalizer for RedactSecrets {
    fn finalize_content(_call: &Call, result: &Outcome) -> Option<Vec<ContentBlock>> {
        // Cheap first look: only the text, no images copied.
        redact(result.text())?;
        let mut changed = false;
        let blocks = result
            .content()
            .iter()
            .cloned()
            .map(|block| match block {
                ContentBlock::Text(t) => match redact(&t) {
                    Some(r) => {
                        changed = true;
                        ContentBlock::Text(r)
                    }
                    None => ContentBlock::Text(t),
                },
                ContentBlock::Resource(EmbeddedResource {
                    uri,
                    mime_type,
                    contents: ResourceContents::Text(t),
                }) => {
                    let t = match redact(&t) {
                        Some(r) => {
                            changed = true;
                            r
                        }
                        None => t,
                    };
                    ContentBlock::Resource(EmbeddedResource {
                        uri,
                        mime_type,
                        contents: ResourceContents::Text(t),
                    })
                }
                ContentBlock::Json(j) => match redact(&j) {
                    // A key inside a JSON string stays valid JSON: the
                    // replacement has no quote or backslash.
                    Some(r) => {
                        changed = true;
                        ContentBlock::Json(r)
                    }
                    None => ContentBlock::Json(j),
                },
                other => other,
            })
            .collect();
        changed.then_some(blocks)
    }
}

toolgate_sdk::export! { finalizer: RedactSecrets }

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redacts_each_kind() {
        let cases = [
            (
                "key AKIAIOSFODNN7EXAMPLE end",
                "key [REDACTED:aws-access-key-id] end",
            ),
            (
                "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "token=[REDACTED:github-token]",
            ),
            (
                "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx",
                "OPENAI_API_KEY=[REDACTED:openai-key]",
            ),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
                "[REDACTED:anthropic-key]",
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
                "Authorization: [REDACTED:bearer-token]",
            ),
            (
                "a\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----\nz",
                "a\n[REDACTED:private-key]\nz",
            ),
            (
                "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
                "[REDACTED:google-api-key]",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input).as_deref(), Some(want), "{input}");
        }
    }

    #[test]
    fn leaves_ordinary_text() {
        for s in [
            "ask-me-anything",
            "task-1234567890abcdefghijkl",
            "sk-short",
            "AKIA lowercase",
            "Bearer short",
            "plain text, no secrets",
            "-----BEGIN CERTIFICATE-----",
            "naïve ïsk-abcdefghijklmnopqrstuvwxyz 🎉",
        ] {
            assert_eq!(redact(s), None, "{s}");
        }
    }
}
