//! A guard that denies calls whose arguments point at secrets: key files,
//! credential stores, `.env` files, shadow passwords, cloud credentials.
//!
//! It inspects every string argument of every tool (a path for `read`,
//! `grep`, `glob`, `write` or `edit`, a command line for `bash`), so it
//! protects tools written later too — except the arguments of the built-in
//! file tools that are data, not names (what `write` writes, what `edit`
//! replaces, what `grep` looks for). Like every guard it can only deny; no
//! hook can overrule it.
//!
//! Names alone are easy to dodge, so the guard also looks at the file
//! system it is granted (read-only, by default the working directory as
//! `.` and under its absolute path):
//!
//! * **symlinks** — every word that names an existing path is resolved
//!   component by component; each link target on the way is judged like
//!   the word itself (`link -> .env`, `notes -> ../.ssh/id_rsa`);
//! * **globs** — a word with `*`, `?` or `[…]` is expanded as a shell
//!   would (a leading `.` must be matched explicitly) and every match is
//!   judged and resolved (`cat .e?v`, `cat *.pem`);
//! * **shell quoting** — quotes and backslashes are removed from a word
//!   before it is judged, as the shell removes them (`cat .e""nv`).
//!
//! What it cannot see is documented in its README: a shell is a
//! programming language, and a name can be computed.

use std::collections::VecDeque;
use std::path::{Component, Path, PathBuf};

use toolgate_sdk::{Call, Guard};

mod names;
use names::secret_path;

/// Most symlinks followed while resolving one word (as the kernel's 40).
const MAX_HOPS: usize = 40;
/// Most paths a glob may expand to before the guard stops expanding (and
/// judges what it found so far).
const MAX_GLOB_PATHS: usize = 2_000;
/// Most directory entries read while expanding the globs of one word.
const MAX_GLOB_ENTRIES: usize = 20_000;

/// Characters that end a word on a shell command line (besides whitespace).
const SHELL_OPERATORS: &str = ";|&<>()`";

/// Why `s` reaches a secret, if it does.
fn secret_in(s: &str) -> Option<String> {
    for word in words(s) {
        if let Some(why) = judge_word(&word) {
            return Some(why);
        }
    }
    None
}

/// The words of `s`: split at whitespace, shell operators and `=` (so that
/// `--file=.env` and `A=.env` show their value), each both as written
/// (quotes splitting it further) and with the shell's quote removal.
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in s.split(|c: char| c.is_whitespace() || SHELL_OPERATORS.contains(c) || c == '=') {
        if raw.is_empty() {
            continue;
        }
        for piece in raw.split(['"', '\'']) {
            if !piece.is_empty() {
                out.push(piece.to_string());
            }
        }
        let unquoted: String = raw.chars().filter(|c| !"\"'\\".contains(*c)).collect();
        if !unquoted.is_empty() {
            out.push(unquoted);
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|w| seen.insert(w.clone()));
    out
}

fn judge_word(word: &str) -> Option<String> {
    if let Some(why) = secret_path(word) {
        return Some(format!("`{word}`: {why}"));
    }
    // Not worth a look at the file system (each look is a host call): a
    // flag, a number, or a word the shell computes (which no look could
    // predict; see the README).
    if word.starts_with('-') || word.contains('$') || word.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let candidates = if has_glob(word) {
        expand(word)
    } else {
        vec![word.to_string()]
    };
    for path in candidates {
        if path != word
            && let Some(why) = secret_path(&path)
        {
            return Some(format!("`{word}` matches `{path}`: {why}"));
        }
        for step in resolve(&path) {
            if let Some(why) = secret_path(&step) {
                return Some(format!(
                    "`{word}` leads to `{step}` (through a symlink): {why}"
                ));
            }
        }
    }
    None
}

/// The link targets met while resolving `path` component by component,
/// and the path it resolves to (only when a link was followed). Components
/// that cannot be looked at (outside the guard's grant, or absent) are kept
/// as written.
fn resolve(path: &str) -> Vec<String> {
    let mut queue: VecDeque<PathBuf> = components(Path::new(path));
    let mut cur = if path.starts_with('/') {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    };
    let mut met = Vec::new();
    let mut hops = 0;
    while let Some(c) = queue.pop_front() {
        if c.as_os_str() == ".." {
            if matches!(cur.components().next_back(), Some(Component::Normal(_))) {
                cur.pop();
            } else if !cur.has_root() {
                cur.push("..");
            }
            continue;
        }
        cur.push(&c);
        let is_link = std::fs::symlink_metadata(&cur).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            continue;
        }
        hops += 1;
        let Ok(target) = std::fs::read_link(&cur) else {
            continue;
        };
        met.push(target.to_string_lossy().into_owned());
        if hops > MAX_HOPS {
            break;
        }
        cur.pop();
        if target.is_absolute() {
            cur = PathBuf::from("/");
        }
        for (i, t) in components(&target).into_iter().enumerate() {
            queue.insert(i, t);
        }
    }
    if hops > 0 {
        met.push(cur.to_string_lossy().into_owned());
    }
    met
}

/// `path` as a queue of normal and `..` components (`.` and `/` dropped).
fn components(path: &Path) -> VecDeque<PathBuf> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(PathBuf::from(n)),
            Component::ParentDir => Some(PathBuf::from("..")),
            _ => None,
        })
        .collect()
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The existing paths a shell glob matches (bounded; see
/// [`MAX_GLOB_PATHS`]). As in the shell, `*` and `?` do not match a leading
/// `.`; a component without glob characters is taken as written.
fn expand(word: &str) -> Vec<String> {
    let absolute = word.starts_with('/');
    let mut paths: Vec<PathBuf> = vec![if absolute {
        PathBuf::from("/")
    } else {
        PathBuf::from(".")
    }];
    let mut read = 0usize;
    for comp in word.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if !has_glob(comp) {
            for p in &mut paths {
                p.push(comp);
            }
            continue;
        }
        let mut next = Vec::new();
        'dirs: for p in &paths {
            let Ok(entries) = std::fs::read_dir(p) else {
                continue;
            };
            for e in entries.flatten() {
                read += 1;
                if read > MAX_GLOB_ENTRIES || next.len() >= MAX_GLOB_PATHS {
                    break 'dirs;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') && !comp.starts_with('.') {
                    continue;
                }
                if glob_match(comp.as_bytes(), name.as_bytes()) {
                    next.push(p.join(&name));
                }
            }
        }
        paths = next;
    }
    paths
        .into_iter()
        .map(|p| {
            let s = p.to_string_lossy().into_owned();
            s.strip_prefix("./").map(str::to_string).unwrap_or(s)
        })
        .collect()
}

/// Shell pattern matching within one component: `*`, `?`, `[abc]`,
/// `[a-z]`, `[!…]`/`[^…]`.
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        let step = if pi < p.len() {
            match p[pi] {
                b'*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                b'?' => Some(pi + 1),
                b'[' => class(p, pi, s[si]),
                c => (c == s[si]).then_some(pi + 1),
            }
        } else {
            None
        };
        match step {
            Some(next) => {
                pi = next;
                si += 1;
            }
            None => match star {
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// Matches `c` against the bracket expression at `p[at]`; the index after
/// it on a match. An unterminated `[` is a literal.
fn class(p: &[u8], at: usize, c: u8) -> Option<usize> {
    let mut i = at + 1;
    let negate = i < p.len() && (p[i] == b'!' || p[i] == b'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() && (first || p[i] != b']') {
        first = false;
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            matched |= p[i] <= c && c <= p[i + 2];
            i += 3;
        } else {
            matched |= p[i] == c;
            i += 1;
        }
    }
    if i >= p.len() {
        return (c == b'[').then_some(at + 1);
    }
    (matched != negate).then_some(i + 1)
}

struct SecretsGuard;

/// Arguments of the built-in file tools that carry data, not names: the
/// text `write` writes and `edit` replaces, the regular expression `grep`
/// looks for inside files. A `.gitignore` that lists `.env` is not a
/// reach for `.env`. Only for the built-in providers: a tool of another
/// plugin that happens to share a name is judged whole.
fn is_data(provider: &str, tool: &str, pointer: &str) -> bool {
    matches!(
        (provider, tool, pointer),
        ("fs-write", "write", "/content")
            | ("fs-write", "edit", "/old_string" | "/new_string")
            | ("fs-tools", "grep", "/pattern")
    )
}

impl Guard for SecretsGuard {
    fn check(call: &Call) -> Option<String> {
        call.argument_strings().into_iter().find_map(|(path, s)| {
            if is_data(call.provider(), call.tool(), &path) {
                return None;
            }
            secret_in(s).map(|why| {
                format!(
                    "`{}` may not touch secrets: argument {} — {why}",
                    call.tool(),
                    if path.is_empty() {
                        "(root)".to_string()
                    } else {
                        path
                    }
                )
            })
        })
    }
}

toolgate_sdk::export! { guard: SecretsGuard }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spots_secret_names() {
        assert!(secret_in(".env").is_some());
        assert!(secret_in("config/.env.production").is_some());
        assert!(secret_in("cat ~/.ssh/config").is_some());
        assert!(secret_in("certs/server.KEY").is_some());
        assert!(secret_in("/etc/shadow").is_some());
        assert!(secret_in("base64 < .env").is_some());
        assert!(secret_in("cat .e\"\"nv").is_some());
        assert!(secret_in("cat .e\\nv").is_some());
        assert!(secret_in("tool --file=.env").is_some());
        assert!(secret_in("src/main.rs").is_none());
        assert!(secret_in("README.md").is_none());
        assert!(secret_in("environment.md").is_none());
    }

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob_match(b".e?v", b".env"));
        assert!(glob_match(b"*.pem", b"server.pem"));
        assert!(glob_match(b".[e]nv", b".env"));
        assert!(glob_match(b".[a-f]n[!x]", b".env"));
        assert!(!glob_match(b".[!e]nv", b".env"));
        assert!(glob_match(b"a*b*c", b"aXXbYYc"));
        assert!(!glob_match(b"a*b", b"ac"));
        assert!(glob_match(b"[", b"["));
    }

    #[test]
    fn resolve_keeps_unreachable_components_as_written() {
        // Nothing here exists in the test's file system view: no link met.
        assert!(resolve("no/such/path").is_empty());
    }
}
