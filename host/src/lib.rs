//! toolgate: a host for AI-agent tool calls in which every tool and every
//! policy is a WebAssembly component.
//!
//! A call from the model passes nine points — materialize, pre-execute,
//! approval, guard, execute (around), body, post-execute, finalize, result —
//! each a place where policies (components or native Rust) decide. See
//! [`pipeline`] for the rules, [`plugin`] for how components are loaded and
//! run, and [`Toolgate`] for the entry point.

#![recursion_limit = "256"]

pub mod approval;
pub mod audit;
pub mod authority;
pub(crate) mod bindings;
pub mod bridge;
pub mod budgets;
pub mod call;
pub mod cause;
pub mod clock;
pub mod codemode;
pub mod delegation;
pub use toolgate_config as config;
pub mod content;
pub mod egress;
pub(crate) mod error;
pub mod goals;
pub mod grants;
pub mod history;
pub mod host;
pub(crate) mod host_config;
pub mod identity;
pub mod lifecycle;
pub mod lsp;
pub mod metrics;
pub mod models;
#[cfg(feature = "oci")]
pub use toolgate_oci as oci;
pub mod outcome;
pub mod pipeline;
pub mod plugin;
pub mod policy;
pub mod registry;
pub mod scheduler;
pub(crate) mod seams;
pub mod search;
pub mod skills;
pub mod state;
pub mod store;
pub mod tls;
pub mod tool;
pub mod turn;

/// The log target of the start and end of steps that can take seconds (a
/// first compile, a bridged server connecting, a call waiting for
/// approval): the CLI shows it by default (`RUST_LOG` unset), so a slow
/// step is never silent.
pub const PROGRESS: &str = "toolgate::progress";

pub use call::{CallInfo, CallSignal, ToolCall};
pub use cause::Cause;
pub use content::Content;
pub use error::HostError;
pub use host::{Toolgate, ToolgateBuilder};
pub use host_config::HostConfig;
pub use lifecycle::ReloadEvent;
pub use outcome::{CallError, CallRecord, ErrorCode, Outcome, Stage};
pub use policy::{PolicyError, PostDecision, PreDecision, Role};
pub use registry::{Generation, PluginState, PluginStatus, Registry};
pub use tool::ModelTool;
pub use turn::TurnOptions;
