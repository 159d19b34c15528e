//! A guard that denies calls whose arguments point at secrets: key files,
//! credential stores, `.env` files, shadow passwords, cloud credentials.
//!
//! It inspects every string argument of every tool (a path for `read`,
//! `grep`, `glob`, `write` or `edit`, a command line for `bash`), so it
//! protects tools written later too — except the arguments of the built-in
//! file tools that are data, not names (what `write` writes, what `edit`
//! replaces, what `grep` looks for). Like every guard it can only deny; no
//! hook can overrule it.

use toolgate_sdk::{Call, Guard};

/// Path components that name secret stores wherever they appear.
const SECRET_DIRS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".docker",
    ".kube",
    ".password-store",
];

/// File names that hold secrets.
const SECRET_FILES: &[&str] = &[
    ".env",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    "credentials.json",
    "shadow",
    "gshadow",
];

/// File name endings that hold secrets.
const SECRET_SUFFIXES: &[&str] = &[".pem", ".key", ".p12", ".pfx", ".keystore"];

/// Why `s` mentions a secret, if it does.
fn secret_in(s: &str) -> Option<String> {
    for token in s.split(|c: char| c.is_whitespace() || "\"'`=;|&<>()".contains(c)) {
        let parts: Vec<&str> = token.split('/').filter(|p| !p.is_empty()).collect();
        for part in &parts {
            if SECRET_DIRS.contains(part) {
                return Some(format!(
                    "`{token}` is inside `{part}`, a store of credentials"
                ));
            }
        }
        if let Some(name) = parts.last() {
            let lower = name.to_ascii_lowercase();
            if SECRET_FILES.contains(&lower.as_str()) || lower.starts_with(".env.") {
                return Some(format!(
                    "`{token}` names `{name}`, a file that holds secrets"
                ));
            }
            if let Some(suffix) = SECRET_SUFFIXES.iter().find(|x| lower.ends_with(*x)) {
                return Some(format!(
                    "`{token}` is a `{suffix}` file, which usually holds a private key"
                ));
            }
        }
    }
    None
}

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

struct SecretsGuard;

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
    use super::secret_in;

    #[test]
    fn spots_secrets() {
        assert!(secret_in(".env").is_some());
        assert!(secret_in("config/.env.production").is_some());
        assert!(secret_in("cat ~/.ssh/config").is_some());
        assert!(secret_in("certs/server.KEY").is_some());
        assert!(secret_in("/etc/shadow").is_some());
        assert!(secret_in("src/main.rs").is_none());
        assert!(secret_in("README.md").is_none());
        assert!(secret_in("environment.md").is_none());
    }
}
