//! Paths the configuration names, each typed by what it is to the host.
//!
//! The host must keep what it treats as authority out of reach of
//! everything it runs. A list of "the paths to protect" kept by hand
//! misses the next feature's path — it did, three times: the trust keys,
//! the webhook's HMAC key and the audit record's rotated files were each
//! reachable from `bash` because nobody listed them. So here a path-valued
//! key of `toolgate.toml` cannot be declared without saying what it is:
//! its type is one of the classes below, and the protected set is computed
//! by walking the resolved configuration ([`classified`]), so a new key is
//! protected the day it exists. The schema says the class too (each type's
//! schema carries a `title` such as `"path: secret"`), and a test walks the
//! configuration schema and fails on a string key that is neither
//! classified nor listed as not a path.
//!
//! | type | class | relative to |
//! | --- | --- | --- |
//! | [`TrustFile`] | authority: read-only to everything the host runs | the configuration file's directory |
//! | [`PluginDir`] | authority | the configuration file's directory |
//! | [`SkillDir`] | authority | the host's working directory |
//! | [`Program`] | authority when it is a path (not a name looked up in `PATH`) | the host's working directory |
//! | [`Secret`] | secret: not even readable | the host's working directory |
//! | [`HostData`] | host-written data: neither readable nor writable, and never inside a grant | the host's working directory |
//! | [`GrantDir`] | granted (what a grant gives; not protected) | the host's working directory |
//! | [`WorkDir`] | a working directory (not protected) | the host's working directory |
//!
//! Why host-written data may not lie inside a grant at all, when a secret
//! may (it is masked): the host makes new files beside it while processes
//! run — the record's rotations, SQLite's journals — and a mask is made when
//! a process starts; a file made later is not masked from it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_schema::derive::Schema;

/// What the host does with a path the configuration names, and so what
/// nothing it runs may do to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Read by the host as authority (keys and roots it trusts, plugin
    /// directories, programs it starts): read-only to everything it runs.
    Authority,
    /// A credential (a token, an HMAC or API key, a private key): not even
    /// readable by anything the host runs.
    Secret,
    /// A file the host writes, with every file it makes beside it (the
    /// record's rotations, SQLite's journals): neither readable nor
    /// writable, and never inside a grant.
    HostData,
    /// A directory a grant gives: what the grant says, nothing more.
    Granted,
    /// The working directory of a process the host starts.
    WorkDir,
}

impl Class {
    /// The class in the schema's `title` (`"path: secret"`).
    pub fn title(self) -> &'static str {
        match self {
            Class::Authority => "path: authority",
            Class::Secret => "path: secret",
            Class::HostData => "path: host-written data",
            Class::Granted => "path: granted",
            Class::WorkDir => "path: working directory",
        }
    }

    /// The class a schema `title` names, if any.
    pub fn from_title(title: &str) -> Option<Class> {
        [
            Class::Authority,
            Class::Secret,
            Class::HostData,
            Class::Granted,
            Class::WorkDir,
        ]
        .into_iter()
        .find(|c| c.title() == title || title == PROGRAM_TITLE && *c == Class::Authority)
    }

    /// Whether nothing the host runs may change it.
    pub fn protected(self) -> bool {
        matches!(self, Class::Authority | Class::Secret | Class::HostData)
    }

    /// Whether nothing the host runs may read it.
    pub fn hidden(self) -> bool {
        matches!(self, Class::Secret | Class::HostData)
    }
}

/// The schema title of a [`Program`]: authority when it is a path.
const PROGRAM_TITLE: &str = "program: authority when a path";

/// What a relative path is relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Base {
    /// The directory of the configuration file.
    Config,
    /// The host's working directory.
    Work,
}

/// Where relative paths start, for [`classified`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bases {
    /// The configuration file's directory.
    pub config: PathBuf,
    /// The host's working directory.
    pub work: PathBuf,
}

impl Bases {
    /// `path` resolved against `base` (an absolute path stays as it is).
    pub fn resolve(&self, path: &Path, base: Base) -> PathBuf {
        match base {
            Base::Config => self.config.join(path),
            Base::Work => self.work.join(path),
        }
    }
}

/// The member that marks a classified path in the configuration's
/// serialized form (see [`classified`]).
const MARK: &str = "$toolgate-path";

macro_rules! typed_path {
    ($(#[$doc:meta])* $name:ident, $class:expr, $base:expr, $title:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(PathBuf);

        impl $name {
            /// The class of every path of this type.
            pub const CLASS: Class = $class;
            /// What a relative path of this type is relative to.
            pub const BASE: Base = $base;

            /// The path as written (relative to [`Self::BASE`]).
            pub fn as_written(&self) -> &Path {
                &self.0
            }

            /// The path resolved against `bases`.
            pub fn resolve(&self, bases: &Bases) -> PathBuf {
                bases.resolve(&self.0, Self::BASE)
            }
        }

        impl From<PathBuf> for $name {
            fn from(path: PathBuf) -> Self {
                $name(path)
            }
        }

        impl From<&str> for $name {
            fn from(path: &str) -> Self {
                $name(PathBuf::from(path))
            }
        }

        impl AsRef<Path> for $name {
            fn as_ref(&self) -> &Path {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = Path;
            fn deref(&self) -> &Path {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                if s.is_empty() {
                    return Err(serde::de::Error::custom(
                        "expected a path, got an empty string",
                    ));
                }
                if s.contains('\0') {
                    return Err(serde::de::Error::custom("a path cannot hold a NUL byte"));
                }
                Ok($name(PathBuf::from(s)))
            }
        }

        /// The classified form: what [`classified`] walks.
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                mark(&self.0, self.class(), Self::BASE).serialize(s)
            }
        }

        impl Schema for $name {
            fn schema() -> Value {
                json!({ "type": "string", "title": $title })
            }
        }
    };
}

typed_path!(
    /// A file the host reads as a trust anchor: a public key of `[trust]`,
    /// a Sigstore trusted root. Authority, relative to the configuration
    /// file's directory.
    TrustFile,
    Class::Authority,
    Base::Config,
    Class::Authority.title()
);

typed_path!(
    /// A directory of plugins (components and manifests). Authority,
    /// relative to the configuration file's directory.
    PluginDir,
    Class::Authority,
    Base::Config,
    Class::Authority.title()
);

typed_path!(
    /// A directory of skills (`NAME/SKILL.md` and its resources):
    /// instructions the host hands the model, so authority (a skill that
    /// anything the host runs could write would be a prompt it plants for
    /// every later session). Relative to the host's working directory.
    SkillDir,
    Class::Authority,
    Base::Work,
    Class::Authority.title()
);

typed_path!(
    /// A credential: a token file, an HMAC or signing key. Hidden from and
    /// read-only to everything the host runs, relative to the host's
    /// working directory.
    Secret,
    Class::Secret,
    Base::Work,
    Class::Secret.title()
);

typed_path!(
    /// A file the host writes and makes files beside (the audit record
    /// and its rotations, an SQLite store and its journals). Hidden,
    /// read-only, and refused inside any grant; relative to the host's
    /// working directory.
    HostData,
    Class::HostData,
    Base::Work,
    Class::HostData.title()
);

typed_path!(
    /// A directory a grant gives a plugin or an MCP server, relative to
    /// the host's working directory.
    GrantDir,
    Class::Granted,
    Base::Work,
    Class::Granted.title()
);

typed_path!(
    /// The working directory of a process the host starts, relative to
    /// the host's.
    WorkDir,
    Class::WorkDir,
    Base::Work,
    Class::WorkDir.title()
);

typed_path!(
    /// A program the host starts: a name looked up in `PATH`, or a path
    /// (one with a `/`), which is then authority: whoever could replace it
    /// would run their code with what the host gives that program.
    Program,
    Class::Authority,
    Base::Work,
    PROGRAM_TITLE
);

/// The class of one path of these types.
trait Classify {
    fn class(&self) -> Class;
}

macro_rules! fixed_class {
    ($($name:ident),*) => {$(
        impl Classify for $name {
            fn class(&self) -> Class {
                Self::CLASS
            }
        }
    )*};
}
fixed_class!(
    TrustFile, PluginDir, SkillDir, Secret, HostData, GrantDir, WorkDir
);

impl Classify for Program {
    /// A name looked up in `PATH` is no file of the host's; a path is.
    fn class(&self) -> Class {
        if self.is_path() {
            Class::Authority
        } else {
            Class::WorkDir
        }
    }
}

impl Program {
    /// Whether it names a file (has a `/`) rather than a program to look
    /// up in `PATH`.
    pub fn is_path(&self) -> bool {
        self.0.as_os_str().as_encoded_bytes().contains(&b'/')
    }
}

fn mark(path: &Path, class: Class, base: Base) -> Value {
    json!({ MARK: { "path": path, "class": class, "base": base } })
}

/// One path of the configuration, classified and resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigPath {
    /// Where it is in the configuration, as a JSON pointer
    /// (`/trust/keys/0`).
    pub pointer: String,
    pub class: Class,
    /// The path as written.
    pub written: PathBuf,
    /// The path resolved against its base (not canonicalized).
    pub path: PathBuf,
}

impl ConfigPath {
    /// The key, for messages: `[trust] keys[0]`-like, from the pointer.
    pub fn key(&self) -> String {
        let mut parts: Vec<&str> = self.pointer.split('/').skip(1).collect();
        let Some(last) = parts.pop() else {
            return self.pointer.clone();
        };
        let (leaf, index) = match last.parse::<usize>() {
            Ok(i) => (parts.pop().unwrap_or_default(), Some(i)),
            Err(_) => (last, None),
        };
        let table = if parts.is_empty() {
            String::new()
        } else {
            format!("[{}] ", parts.join("."))
        };
        match index {
            Some(i) => format!("{table}{leaf}[{i}]"),
            None => format!("{table}{leaf}"),
        }
    }
}

/// Every classified path in `config` (a configuration section, or the
/// whole configuration), resolved against `bases`: the walk the protected
/// set is computed from. Serializing the configuration gives each typed
/// path in its classified form, and nothing else produces that form (a
/// value the operator writes is a string, never an object with the mark).
///
/// ```
/// use toolgate_config::path::{Bases, Class, Secret, classified};
/// #[derive(serde::Serialize)]
/// struct Section { token_file: Option<Secret>, name: String }
/// let s = Section { token_file: Some("token".into()), name: "x".into() };
/// let bases = Bases { config: "/etc/tg".into(), work: "/srv".into() };
/// let found = classified(&s, &bases);
/// assert_eq!(found.len(), 1);
/// assert_eq!(found[0].pointer, "/token_file");
/// assert_eq!(found[0].class, Class::Secret);
/// assert_eq!(found[0].path, std::path::Path::new("/srv/token"));
/// ```
pub fn classified(config: &impl Serialize, bases: &Bases) -> Vec<ConfigPath> {
    let Ok(value) = serde_json::to_value(config) else {
        // The configuration's types serialize infallibly (strings, numbers,
        // maps with string keys); nothing to walk otherwise.
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut todo = vec![(String::new(), &value)];
    while let Some((pointer, v)) = todo.pop() {
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(m)) = map.get(MARK) {
                    let class = m.get("class").cloned().map(serde_json::from_value::<Class>);
                    let base = m.get("base").cloned().map(serde_json::from_value::<Base>);
                    let written = m.get("path").and_then(Value::as_str).map(PathBuf::from);
                    if let (Some(Ok(class)), Some(Ok(base)), Some(written)) = (class, base, written)
                    {
                        out.push(ConfigPath {
                            path: bases.resolve(&written, base),
                            pointer,
                            class,
                            written,
                        });
                    }
                    continue;
                }
                for (k, v) in map {
                    let key = k.replace('~', "~0").replace('/', "~1");
                    todo.push((format!("{pointer}/{key}"), v));
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    todo.push((format!("{pointer}/{i}"), v));
                }
            }
            _ => {}
        }
    }
    out.sort_by(|a, b| a.pointer.cmp(&b.pointer));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Nested {
        keys: Vec<TrustFile>,
        record: HostData,
        servers: std::collections::BTreeMap<String, Server>,
    }

    #[derive(Serialize)]
    struct Server {
        command: Program,
        cwd: Option<WorkDir>,
    }

    #[test]
    fn every_typed_path_is_found_with_its_pointer_class_and_base() {
        let mut servers = std::collections::BTreeMap::new();
        servers.insert(
            "a/b".to_string(),
            Server {
                command: "./server.py".into(),
                cwd: Some("srv".into()),
            },
        );
        servers.insert(
            "t".to_string(),
            Server {
                command: "mcp-server-time".into(),
                cwd: None,
            },
        );
        let n = Nested {
            keys: vec!["k.pub".into(), "/abs/k2.pub".into()],
            record: "audit.jsonl".into(),
            servers,
        };
        let bases = Bases {
            config: "/etc/tg".into(),
            work: "/srv/w".into(),
        };
        let found: Vec<(String, Class, PathBuf)> = classified(&n, &bases)
            .into_iter()
            .map(|p| (p.pointer, p.class, p.path))
            .collect();
        assert_eq!(
            found,
            vec![
                ("/keys/0".into(), Class::Authority, "/etc/tg/k.pub".into()),
                ("/keys/1".into(), Class::Authority, "/abs/k2.pub".into()),
                (
                    "/record".into(),
                    Class::HostData,
                    "/srv/w/audit.jsonl".into()
                ),
                (
                    "/servers/a~1b/command".into(),
                    Class::Authority,
                    "/srv/w/./server.py".into()
                ),
                (
                    "/servers/a~1b/cwd".into(),
                    Class::WorkDir,
                    "/srv/w/srv".into()
                ),
                (
                    "/servers/t/command".into(),
                    Class::WorkDir,
                    "/srv/w/mcp-server-time".into()
                ),
            ]
        );
    }

    #[test]
    fn an_empty_or_nul_path_is_refused_when_read() {
        assert!(serde_json::from_value::<Secret>(json!("")).is_err());
        assert!(serde_json::from_value::<Secret>(json!("a\u{0}b")).is_err());
        assert_eq!(
            serde_json::from_value::<Secret>(json!("t")).unwrap(),
            Secret::from("t")
        );
    }

    #[test]
    fn schemas_say_the_class() {
        assert_eq!(Secret::schema()["title"], "path: secret");
        assert_eq!(
            Class::from_title(Program::schema()["title"].as_str().unwrap()),
            Some(Class::Authority)
        );
        assert_eq!(Class::from_title("path: granted"), Some(Class::Granted));
        assert_eq!(Class::from_title("a path"), None);
    }

    #[test]
    fn keys_read_like_toml() {
        let p = |pointer: &str| ConfigPath {
            pointer: pointer.into(),
            class: Class::Secret,
            written: PathBuf::new(),
            path: PathBuf::new(),
        };
        assert_eq!(p("/trust/keys/0").key(), "[trust] keys[0]");
        assert_eq!(p("/audit/path").key(), "[audit] path");
        assert_eq!(
            p("/mcp/servers/t/bearer_token_file").key(),
            "[mcp.servers.t] bearer_token_file"
        );
    }
}
