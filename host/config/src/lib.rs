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
