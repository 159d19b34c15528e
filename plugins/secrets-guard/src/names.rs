//! Names of files and directories that hold secrets.
//!
//! One list, shared by the secrets guard (which denies calls whose
//! arguments name, or lead to, one of them) and by the file tools (whose
//! directory walks — `grep`, `glob` — skip them), so that the two
//! never disagree. `fs-tools` includes this file with `#[path]`.

/// Path components that name secret stores wherever they appear.
pub const SECRET_DIRS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".docker",
    ".kube",
    ".password-store",
];

/// File names that hold secrets.
pub const SECRET_FILES: &[&str] = &[
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
pub const SECRET_SUFFIXES: &[&str] = &[".pem", ".key", ".p12", ".pfx", ".keystore"];

/// Why the file name `name` (one component) names a secret, if it does.
pub fn secret_file_name(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    if SECRET_FILES.contains(&lower.as_str()) || lower.starts_with(".env.") {
        return Some(format!("`{name}` is a file that holds secrets"));
    }
    SECRET_SUFFIXES
        .iter()
        .find(|x| lower.ends_with(*x))
        .map(|suffix| format!("`{name}` is a `{suffix}` file, which usually holds a private key"))
}

/// Why the directory name `name` (one component) names a secret store.
pub fn secret_dir_name(name: &str) -> Option<String> {
    SECRET_DIRS
        .contains(&name)
        .then(|| format!("`{name}` is a store of credentials"))
}

/// Why the path `path` (`/`-separated) names a secret: a secret store
/// anywhere in it, or a secret file as its last component.
pub fn secret_path(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    parts
        .iter()
        .find_map(|p| secret_dir_name(p))
        .or_else(|| parts.last().and_then(|name| secret_file_name(name)))
}
