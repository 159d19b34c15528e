//! Plugins: WebAssembly components that provide tools and policies.
//!
//! * [`runtime`] — the engine, the linkers and the epoch ticker (one per process);
//! * [`loader`] — reading and checking components from files or the binary;
//! * [`contract`] — the WIT contract by version: shapes, imports,
//!   conversions, components behind the policy and tool traits;
//! * [`component`] — a loaded plugin, its instances and its call path;
//! * [`store`] — what one instance's store holds;
//! * [`sync_wasi`] — the WASI of the synchronous path (nothing waits);
//! * [`memory`], [`log`], [`pipe`] — the instance memory budget, guest log
//!   lines, guest stdout/stderr;
//! * [`manifest`] — what the plugin asks (what the operator grants is
//!   [`crate::grants`]);
//! * [`cache`] — compiled components on disk;
//! * [`codegen`] — the settings that shape compiled code (shared with the
//!   build script, which precompiles the built-ins);
//! * [`builtin`] — the first-party plugins embedded in the binary;
//! * [`precompiled`] — their machine code, compiled with the binary.
//!
//! Dependencies point one way: `store` ← `component` ← `contract` ←
//! `runtime`, `loader`; none of them reaches back.

pub mod builtin;
pub mod cache;
pub mod codegen;
pub mod component;
pub mod config;
pub mod contract;
pub mod fs_hint;
pub mod inline_fs;
pub mod loader;
pub mod log;
pub mod manifest;
pub mod memory;
pub mod pipe;
pub mod precompiled;
pub mod runtime;
pub mod store;
pub mod sync_wasi;
pub mod ungranted;

pub use component::{CallPath, ComponentPlugin, ContractVersion, InstanceMode, Origin};
pub use config::{PluginConfig, ToolConfig};
pub use loader::{LoadError, LoadErrorKind, LoadSettings, Loaded, LoadedTool, PluginSource};
pub use manifest::Manifest;
pub use runtime::{Runtime, RuntimeOptions};
