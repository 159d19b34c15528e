//! Plugins: WebAssembly components that provide tools and policies.
//!
//! * [`runtime`] — the engine, linker and epoch ticker (one per process);
//! * [`loader`] — reading and checking components from files or the binary;
//! * [`roles`] — what a component exports and imports, and version checks;
//! * [`component`] — a loaded plugin and its instances;
//! * [`store`] — per-instance state and the host side of every import;
//! * [`adapters`] — components behind the policy and tool traits;
//! * [`grants`], [`manifest`] — what the operator grants, what the plugin asks;
//! * [`cache`] — compiled components on disk;
//! * [`builtin`] — the first-party plugins embedded in the binary.

pub mod adapters;
pub mod builtin;
pub mod cache;
pub mod component;
pub mod grants;
pub mod loader;
pub mod manifest;
pub mod roles;
pub mod runtime;
pub mod store;

pub use component::{ComponentPlugin, InstanceMode, Origin};
pub use grants::{FsGrant, Grants};
pub use loader::{LoadError, LoadSettings, Loaded, LoadedTool, PluginSource};
pub use manifest::Manifest;
pub use runtime::{Runtime, RuntimeOptions};
