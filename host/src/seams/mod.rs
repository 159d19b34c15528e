//! The host side of the capability seams a component may import. Each seam
//! is its domain logic here — what a request may do under the plugin's
//! grant — while the contract modules (`plugin::contract`) translate the
//! WIT calls of each contract version into these functions.
//!
//! * file system: WASI preopens of exactly the granted directories (see
//!   [`crate::plugin::grants`]);
//! * [`process`]: the `shell` and `subprocess` seams, every spawn sandboxed;
//! * [`kv`]: a small key-value store per plugin and agent scope;
//! * [`jobs`]: background shell jobs, in a host-wide job table;
//! * [`http`]: outgoing `wasi:http` requests, to the network grant only;
//! * [`files`]: whole-file writes by the host, never into protected paths
//!   (`files`), and batched whole-file reads of the preopened grants
//!   (`bulk-read`).

pub mod files;
pub mod http;
pub mod jobs;
pub mod kv;
pub mod process;
