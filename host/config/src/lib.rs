//! What every section of toolgate's configuration is made of: the error,
//! the checked parse, and typed paths ([`path`]). The host re-exports it
//! as `toolgate::config`.
//!
//! A leaf crate: it names no feature. Each feature owns its section of
//! `toolgate.toml` (`audit::config`, `egress::config`, `approval::config`,
//! the OCI crate's `trust`, …): the section's type derives its parsing
//! (serde) *and* its schema (`#[derive(Schema)]`, the same derive tools use
//! for their arguments), checks itself, and types every path it names.
//! `toolgate::HostConfig` composes the sections.
//!
//! The file is an untrusted boundary like any other: it is parsed, checked
//! against the schema derived from its types with the same compiler and
//! validator that check tool arguments, and every problem is reported with
//! its path — then, and only then, deserialized.

pub mod path;

use std::path::PathBuf;

use toolgate_schema::derive::Schema;

/// A problem with the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML: {message}")]
    Syntax { path: String, message: String },
    #[error("{path} has {} problem(s):\n{}", .problems.len(), .problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid { path: String, problems: Vec<String> },
}

/// Parse TOML text as `T`, checked first against `T`'s derived schema,
/// reporting every problem with its path; used for the host configuration
/// and plugin manifests. `origin` names the text in errors.
pub fn parse_checked<T: serde::de::DeserializeOwned + Schema>(
    text: &str,
    origin: &str,
) -> Result<T, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        path: origin.to_string(),
        message: e.to_string().trim().to_string(),
    })?;
    let value = serde_json::to_value(&table).map_err(|e| ConfigError::Syntax {
        path: origin.to_string(),
        message: e.to_string(),
    })?;
    let schema = T::schema();
    let compiled = toolgate_schema::Schema::compile(&schema).map_err(|e| ConfigError::Invalid {
        path: origin.to_string(),
        problems: vec![format!("the built-in schema does not compile: {e}")],
    })?;
    if let Err(violations) = compiled.validate(&value) {
        return Err(ConfigError::Invalid {
            path: origin.to_string(),
            problems: violations.iter().map(|v| v.to_string()).collect(),
        });
    }
    serde_json::from_value(value).map_err(|e| ConfigError::Invalid {
        path: origin.to_string(),
        problems: vec![e.to_string()],
    })
}

/// `Some(0)` where 1 or more is needed, as a problem at `at`.
pub fn positive(at: &str, value: Option<u64>, problems: &mut Vec<String>) {
    if value == Some(0) {
        problems.push(format!("{at}: expected 1 or more, got 0"));
    }
}

/// A configuration section (or key) of a feature this build does not have
/// (a cargo feature left out): it parses as anything, so that the file is
/// read, and [`NotBuilt::check`] refuses it by name when it is set —
/// never ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotBuilt {
    set: bool,
}

impl NotBuilt {
    /// Whether the configuration wrote it.
    pub fn is_set(&self) -> bool {
        self.set
    }

    /// A problem at `at` when it is set: the build lacks `feature`.
    pub fn check(&self, at: &str, feature: &str, problems: &mut Vec<String>) {
        if self.set {
            problems.push(format!(
                "{at}: this toolgate was built without the cargo feature `{feature}`; rebuild it with `--features {feature}`, or remove {at}"
            ));
        }
    }
}

impl<'de> serde::Deserialize<'de> for NotBuilt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(NotBuilt { set: true })
    }
}

impl serde::Serialize for NotBuilt {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

impl Schema for NotBuilt {
    fn schema() -> serde_json::Value {
        serde_json::json!({})
    }
}
