//! The step between stage B and stage C: a call that its policies let
//! through is declared *started* before anything of it runs (the execute
//! wrappers, the body).
//!
//! Why here and not at commit: a call's final record is written when it
//! ends, so a host killed (SIGKILL, a power loss) while a body runs would
//! otherwise leave no trace of a call whose effects may have happened. The
//! audit record implements [`Intents`] (its `started` record, see
//! `crate::audit`); the pipeline names no feature, it only waits for the
//! answer before dispatching — so no path that runs a body can skip it:
//! every one goes through [`super::complete`].

use futures::future::BoxFuture;

use crate::call::{CallInfo, Client};
use crate::outcome::CallError;
use crate::registry::Generation;

/// Declares a call started before its body runs.
pub trait Intents: Send + Sync {
    /// Record that `call` is about to run, and return when that is done
    /// (as durable as the record's final records are). `Ok(Some(id))`:
    /// the intent's id, which the call's final record names; `Ok(None)`:
    /// not recorded, and the call may run anyway (the operator chose so);
    /// `Err`: the call must not run — it ends with this error.
    fn started<'a>(
        &'a self,
        call: &'a CallInfo,
        generation: &'a Generation,
        client: Option<&'a Client>,
    ) -> BoxFuture<'a, Result<Option<u64>, CallError>>;
}
