//! The host side of the WIT contract, one module per supported version:
//! every `bindgen!` output lives here, so the rest of the host refers to one
//! set of generated types per version (and the domain modules to none).
//!
//! * [`v0_2`] — `toolgate:plugin@0.2.x`, the current contract (`wit/`):
//!   the call and the result are resources ([`CallHandle`],
//!   [`ResultHandle`]) that a guest reads field by field. Only the imports
//!   are bound here; the exports are looked up by hand
//!   (`plugin::contract::v0_2`), because each is called either without a
//!   fiber (`call`) or on one (`call_async`), depending on the component.
//!   Imports that never block are synchronous; the waterfalls' `next` and
//!   the process seams are `async` (they run the rest of a chain, or wait
//!   for a process).
//! * [`code_mode`] — the `run_code` interpreter's world (Code Mode), in
//!   the same package: a `tool-calls` import and a `code-runner` export.
//! * [`v0_1`] — `toolgate:plugin@0.1.0`, frozen in `wit/v0.1.0/` for the
//!   components third parties built against it. Everything async, as it
//!   always was.

use std::sync::Arc;

use crate::call::CallInfo;
use crate::outcome::{CallRecord, Outcome};

/// What a guest's `call` handle stands for: the frozen call (`None` between
/// calls: an instance keeps one handle and the host refills it per call).
pub struct CallHandle(pub Option<Arc<CallInfo>>);

/// What a guest's `call-result` handle stands for.
pub enum ResultHandle {
    /// A result in the pipeline, lent to a policy (not copied).
    Outcome(Arc<Outcome>),
    /// What `execute-chain.next` returned: a wrapper that hands this handle
    /// back passes the result on exactly as it was.
    Chain(Arc<Outcome>),
    /// A frozen record, lent to an observer.
    Record(Arc<CallRecord>),
    /// A result a wrapper built (`call-result` constructor); checked when
    /// the wrapper returns it.
    New(Box<v0_2::wit::ToolResult>),
    /// Nothing (an instance's lent handle between calls).
    Vacant,
}

/// What a guest's `bulk-read.batch` handle stands for: a batch of reads
/// running on a blocking thread (`seams::files`), or its results once
/// taken.
pub struct PendingRead(pub Option<tokio::task::JoinHandle<ReadResults>>);

/// What a batch read: per path, the file's bytes or a sentence for the
/// guest.
pub type ReadResults = Vec<Result<Vec<u8>, String>>;

impl PendingRead {
    /// Its results (empty after the first time).
    pub async fn wait(&mut self) -> Result<ReadResults, tokio::task::JoinError> {
        match self.0.take() {
            Some(handle) => handle.await,
            None => Ok(Vec::new()),
        }
    }
}

/// `toolgate:plugin@0.2.x` (the WIT in `wit/` is 0.2.8; 0.2.0 to 0.2.7 guests are
/// served by the linker's semver matching).
pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "sdk-imports",
        path: "../wit",
        imports: {
            default: trappable,
            "toolgate:plugin/pre-execute-chain.next": async | trappable,
            "toolgate:plugin/execute-chain.next": async | trappable,
            "toolgate:plugin/post-execute-chain.next": async | trappable,
            "toolgate:plugin/shell.run": async | trappable,
            "toolgate:plugin/subprocess.run": async | trappable,
            "toolgate:plugin/jobs.kill": async | trappable,
            "toolgate:plugin/terminals.open": async | trappable,
            "toolgate:plugin/terminals.write": async | trappable,
            "toolgate:plugin/terminals.read": async | trappable,
            "toolgate:plugin/terminals.close": async | trappable,
            "toolgate:plugin/web-search.search": async | trappable,
            "toolgate:plugin/lsp.request": async | trappable,
            "toolgate:plugin/lsp.diagnostics": async | trappable,
            "toolgate:plugin/questions.ask": async | trappable,
            "toolgate:plugin/history.list-sessions": async | trappable,
            "toolgate:plugin/history.read-session": async | trappable,
            "toolgate:plugin/history.search": async | trappable,
            "toolgate:plugin/model.models": async | trappable,
            "toolgate:plugin/model.complete": async | trappable,
            "toolgate:plugin/bulk-read.read": async | trappable,
            "toolgate:plugin/bulk-read.[static]batch.start": async | trappable,
            "toolgate:plugin/bulk-read.[method]batch.wait": async | trappable,
        },
        with: {
            "toolgate:plugin/types.call": super::CallHandle,
            "toolgate:plugin/types.call-result": super::ResultHandle,
            "toolgate:plugin/bulk-read.batch": super::PendingRead,
        },
        additional_derives: [PartialEq],
    });

    pub use self::toolgate::plugin::types as wit;
}

/// The `run_code` interpreter's world (`code-interpreter` in
/// `wit/code-mode.wit`): not a plugin role, so no plugin linker sees it.
/// Everything on a fiber: `call-batch` waits for the nested calls.
pub mod code_mode {
    wasmtime::component::bindgen!({
        world: "code-interpreter",
        path: "../wit",
        imports: { default: async | trappable },
        exports: { default: async },
    });
}

/// `toolgate:plugin@0.1.0` (frozen), an adapter of 0.2. The `process`
/// interface, the same in both, *is* 0.2's (`with:`), so the 0.1 `shell`
/// and `subprocess` take and return 0.2's types. The other interfaces are
/// generated: their names carry the version the linker matches (a
/// remapped interface is linked under its own, 0.2 name), and bindgen
/// remaps single types only when they are resources, which 0.1 has none
/// of. Their host methods call the 0.2 ones, converting by `From`
/// (`plugin::contract::v0_1`).
pub mod v0_1 {
    wasmtime::component::bindgen!({
        world: "host",
        path: "../wit/v0.1.0",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "toolgate:plugin/process": super::v0_2::toolgate::plugin::process,
        },
        additional_derives: [PartialEq],
    });

    pub use self::toolgate::plugin::types as wit;
}
