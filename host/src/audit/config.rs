//! `[audit]` in the configuration (resolved by [`super::AuditConfig::resolve`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::{HostData, Secret};

/// When records reach the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[schema(crate = "toolgate_schema::derive")]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// Synced before the result returns.
    Always,
    /// Written before the result returns, synced every interval.
    #[default]
    Batch,
    /// Written before the result returns, synced by the kernel.
    None,
}

/// What a call does when its record cannot be written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[schema(crate = "toolgate_schema::derive")]
#[serde(rename_all = "kebab-case")]
pub enum OnFailure {
    /// The call fails (`INTERNAL`), and every later one.
    #[default]
    FailClosed,
    /// The call's result is returned; the failure is logged.
    Continue,
}

/// How a call's arguments are kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[schema(crate = "toolgate_schema::derive")]
#[serde(rename_all = "kebab-case")]
pub enum ArgumentsMode {
    /// The arguments themselves.
    #[default]
    Full,
    /// Only their SHA-256 (the record says the call is not replayable).
    Digest,
}

/// `[audit]` in the configuration (resolved by [`crate::audit`]).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct AuditConfig {
    /// `false`: no record. Default: on for the `toolgate` binary.
    pub enabled: Option<bool>,
    /// The file (default: `audit.jsonl` in the state directory).
    pub path: Option<HostData>,
    /// When records reach the disk: `always`, `batch` (default) or `none`.
    pub sync: Option<SyncMode>,
    /// `batch`: the longest a written record waits for `fdatasync`, in ms.
    pub sync_interval_ms: Option<u64>,
    /// Records between signed checkpoints.
    pub checkpoint_every: Option<u64>,
    /// The file moves aside at this size, in MiB; the chain goes on.
    pub rotate_mb: Option<u64>,
    /// The Ed25519 key file (default: `audit.key` in the state directory).
    pub signing_key: Option<Secret>,
    /// `fail-closed` (default) or `continue`: a call whose record cannot
    /// be written still returns.
    pub on_failure: Option<OnFailure>,
    /// `full` (default) or `digest`: only the arguments' SHA-256.
    pub arguments: Option<ArgumentsMode>,
    /// Sensitive arguments: tool name (`"*"`: every tool) → JSON pointers
    /// (RFC 6901) whose values the record keeps as their SHA-256 only
    /// (such a call is not replayable).
    #[serde(default)]
    pub sensitive: BTreeMap<String, Vec<String>>,
}

impl AuditConfig {
    /// The problems of `[audit]`.
    pub fn check(&self, problems: &mut Vec<String>) {
        for (key, value) in [
            ("sync_interval_ms", self.sync_interval_ms),
            ("checkpoint_every", self.checkpoint_every),
            ("rotate_mb", self.rotate_mb),
        ] {
            crate::config::positive(&format!("/audit/{key}"), value, problems);
        }
        for (tool, pointers) in &self.sensitive {
            for p in pointers
                .iter()
                .filter(|p| !p.is_empty() && !p.starts_with('/'))
            {
                problems.push(format!(
                    "/audit/sensitive/{tool}: {p:?} is not a JSON pointer (write \"/{p}\", or \"\" for all the arguments)"
                ));
            }
        }
    }
}
