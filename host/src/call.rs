//! A call as the model makes it, and as policies see it.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::bindings::wit;
use crate::pipeline::Approver;
use crate::tool::ToolMeta;

/// One tool call from the model.
#[derive(Clone, Debug, PartialEq, Deserialize, serde::Serialize)]
pub struct ToolCall {
    /// The model's id for the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments (an object).
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// Per-turn options: who is calling, and how the turn can be cancelled.
#[derive(Clone, Default)]
pub struct TurnOptions {
    /// The agent scope the calls come from (`""` = global).
    pub agent_scope: String,
    /// Code Mode: direct calls to anything but `run_code` are refused.
    pub code_mode: bool,
    /// Cancels the whole turn.
    pub cancel: CancellationToken,
    /// Who answers an `ask` for the calls of this turn, instead of the
    /// host's approver: a server with several clients asks each client
    /// about its own calls (`toolgate serve`: an MCP elicitation).
    pub approver: Option<Arc<dyn Approver>>,
}

impl std::fmt::Debug for TurnOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnOptions")
            .field("agent_scope", &self.agent_scope)
            .field("code_mode", &self.code_mode)
            .field("cancelled", &self.cancel.is_cancelled())
            .field(
                "approver",
                &self.approver.as_ref().map(|a| a.name().to_string()),
            )
            .finish()
    }
}

/// The call as every policy sees it: validated, frozen arguments and the
/// tool's host metadata. Shared (`Arc`) and immutable from materialize on.
#[derive(Debug)]
pub struct CallInfo {
    /// A host-unique token for this call (also in traces).
    pub token: u64,
    pub call_id: String,
    pub tool_name: String,
    pub arguments: Arc<Value>,
    pub agent_scope: String,
    pub code_mode: bool,
    pub tool: ToolMeta,
    /// The WIT view of this call (without a deadline), built on first use
    /// and then shared: every component policy receives it, and building it
    /// per invocation would copy every string each time, while a call that
    /// meets no component never needs it.
    wit: OnceLock<Arc<wit::CallInfo>>,
}

impl CallInfo {
    /// A call's view, frozen from now on.
    pub fn new(
        token: u64,
        call_id: String,
        tool_name: String,
        arguments: Value,
        agent_scope: String,
        code_mode: bool,
        tool: ToolMeta,
    ) -> Self {
        CallInfo {
            token,
            call_id,
            tool_name,
            arguments: Arc::new(arguments),
            agent_scope,
            code_mode,
            tool,
            wit: OnceLock::new(),
        }
    }

    /// The WIT view, with the deadline as seen right now.
    pub(crate) fn to_wit(&self, signal: &CallSignal) -> Arc<wit::CallInfo> {
        let view = self.wit.get_or_init(|| {
            Arc::new(wit::CallInfo {
                call_id: self.call_id.clone(),
                tool_name: self.tool_name.clone(),
                provider: self.tool.provider.clone(),
                arguments: self.arguments.to_string(),
                agent_scope: self.agent_scope.clone(),
                deadline_ms: None,
                code_mode: self.code_mode,
                tool_timeout_ms: self.tool.timeout_ms,
                tool_annotations: self.tool.annotations,
            })
        });
        match signal.remaining() {
            None => view.clone(),
            Some(left) => Arc::new(wit::CallInfo {
                deadline_ms: Some(left.as_millis() as u64),
                ..(**view).clone()
            }),
        }
    }
}

/// Why a call's signal fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// The caller cancelled.
    Cancelled,
    /// The deadline passed.
    DeadlineExceeded,
}

/// The caller's cancellation fused with every deadline set on the way in.
///
/// A wrapper can [`shorten`](CallSignal::shorten) the deadline; there is no
/// way to drop the caller's token, so nothing can detach a body from the
/// caller's cancellation.
#[derive(Clone, Debug)]
pub struct CallSignal {
    cancel: CancellationToken,
    deadline: Option<Instant>,
}

impl CallSignal {
    pub fn new(cancel: CancellationToken, deadline: Option<Instant>) -> Self {
        CallSignal { cancel, deadline }
    }

    /// The same signal with a deadline no later than `deadline`.
    pub fn shorten(&self, deadline: Instant) -> Self {
        CallSignal {
            cancel: self.cancel.clone(),
            deadline: Some(match self.deadline {
                Some(d) => d.min(deadline),
                None => deadline,
            }),
        }
    }

    /// The same signal with a deadline at most `timeout` from now.
    pub fn shorten_by(&self, timeout: Duration) -> Self {
        self.shorten(Instant::now() + timeout)
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    pub fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Time left until the deadline (zero once passed).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Whether the signal has fired, and why.
    pub fn fired(&self) -> Option<Interrupt> {
        if self.cancel.is_cancelled() {
            Some(Interrupt::Cancelled)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Interrupt::DeadlineExceeded)
        } else {
            None
        }
    }

    /// Resolves when the signal fires.
    pub async fn wait(&self) -> Interrupt {
        match self.deadline {
            Some(d) => tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Interrupt::Cancelled,
                _ = tokio::time::sleep_until(d.into()) => Interrupt::DeadlineExceeded,
            },
            None => {
                self.cancel.cancelled().await;
                Interrupt::Cancelled
            }
        }
    }

    /// Run `fut` unless the signal fires first.
    pub async fn guard<F: std::future::Future>(&self, fut: F) -> Result<F::Output, Interrupt> {
        if let Some(i) = self.fired() {
            return Err(i);
        }
        tokio::select! {
            biased;
            out = fut => Ok(out),
            i = self.wait() => Err(i),
        }
    }
}
