//! The host side of the capability seams a tool may import.
//!
//! * file system: WASI preopens of exactly the granted directories (see
//!   [`crate::plugin::grants`]);
//! * [`process`]: the `shell` and `subprocess` seams, every spawn sandboxed.

pub mod process;
