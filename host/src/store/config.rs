//! `[state]` in the configuration: where host-kept state lives.

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::HostData;

/// `[state]` in the configuration: the state store behind the `kv` seam
/// (see [`crate::store`]). Read when the host starts; a change takes a
/// restart.
///
/// ```
/// use toolgate::HostConfig;
/// let c = HostConfig::parse(
///     "[state]\nurl = \"redis://127.0.0.1:6379/0\"\ntimeout_ms = 500\n",
///     "toolgate.toml",
/// )
/// .unwrap();
/// assert_eq!(c.state.url.as_deref(), Some("redis://127.0.0.1:6379/0"));
/// assert!(HostConfig::parse("[state]\nurl = 1\n", "toolgate.toml").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct StateConfig {
    /// The shared store, for replicas: `redis://[user:password@]HOST:PORT/DB`,
    /// `rediss://…` (TLS) or `valkey://…`. Unset: the embedded store.
    pub url: Option<String>,
    /// The embedded store's SQLite file (default: `kv.sqlite` in the state
    /// directory). Ignored with `url`.
    pub path: Option<HostData>,
    /// What every key in the shared store starts with (default
    /// `toolgate`): deployments sharing one server keep apart.
    pub prefix: Option<String>,
    /// How long one operation on the shared store may take, reconnecting
    /// included, before it fails closed (default 1000 ms:
    /// [`crate::budgets::STATE_OP_TIMEOUT`]).
    pub timeout_ms: Option<u64>,
    /// This replica's id among those sharing the store (`--replica-id`
    /// wins): in its approval entries, its background jobs' ids and its
    /// audit records. Default: made once and kept in the state directory.
    pub replica_id: Option<String>,
}
