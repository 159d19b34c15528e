//! A call as the model makes it, and as policies see it.
//!
//! This module is the domain's bottom layer: it names no WIT type and
//! depends on nothing else of the host. The contract modules
//! (`plugin::contract`) convert to and from it.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

macro_rules! flag_set {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $flag:ident = $bit:expr, $label:literal;)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name(u8);

        impl $name {
            $($(#[$fdoc])* pub const $flag: $name = $name(1 << $bit);)*
            /// Every flag, with its name.
            pub const ALL: &'static [($name, &'static str)] = &[$(($name::$flag, $label)),*];

            /// No flag set.
            pub const fn empty() -> Self {
                $name(0)
            }
            /// Whether every flag of `other` is set.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }
            /// Set the flags of `other`.
            pub fn insert(&mut self, other: $name) {
                self.0 |= other.0;
            }
            /// No flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
            /// The names of the flags set, in declaration order.
            pub fn names(self) -> Vec<&'static str> {
                Self::ALL
                    .iter()
                    .filter(|(f, _)| self.contains(*f))
                    .map(|(_, n)| *n)
                    .collect()
            }
            /// The raw bits (for conversions).
            pub const fn bits(self) -> u8 {
                self.0
            }
            /// From raw bits; unknown bits are dropped.
            pub const fn from_bits_truncate(bits: u8) -> Self {
                let mut all = 0;
                $(all |= 1 << $bit;)*
                $name(bits & all)
            }
        }

        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }
        }

        impl std::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, other: $name) {
                self.0 |= other.0;
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), self.names().join(" | "))
            }
        }
    };
}

flag_set! {
    /// Hints about a tool's behaviour, for policies (the MCP tool annotations).
    Annotations {
        /// The tool does not change its environment.
        READ_ONLY = 0, "read-only";
        /// The tool may destroy or overwrite data.
        DESTRUCTIVE = 1, "destructive";
        /// Calling it twice with the same arguments has no further effect.
        IDEMPOTENT = 2, "idempotent";
        /// The tool talks to the world outside the host.
        OPEN_WORLD = 3, "open-world";
    }
}

flag_set! {
    /// The optional parts of a tool that its implementation provides.
    Features {
        /// Classifies calls (`is-concurrency-safe`); without it every call is exclusive.
        CLASSIFIER = 0, "classifier";
        /// Adjusts the final content once per result.
        FINALIZER = 1, "finalizer";
        /// Renders a card for the call.
        PRESENT_CALL = 2, "present-call";
        /// Renders a card for the result.
        PRESENT_RESULT = 3, "present-result";
    }
}

/// Host metadata of a tool; none of it is shown to the model.
#[derive(Clone, Debug)]
pub struct ToolMeta {
    /// The plugin (or MCP server) providing the tool.
    pub provider: String,
    /// Cooperative time budget of one call (read by the timeout policy).
    pub timeout_ms: Option<u32>,
    pub annotations: Annotations,
    pub features: Features,
    /// A call of it may change something outside the host (see
    /// `Grants::may_have_effects`: a component's grant says; a bridged or
    /// native tool always may). Such a call is declared started in the
    /// audit record before its body runs.
    pub effects: bool,
}

impl ToolMeta {
    /// Metadata for a name that resolved to no tool.
    pub fn unknown() -> Self {
        ToolMeta {
            provider: String::new(),
            timeout_ms: None,
            annotations: Annotations::empty(),
            features: Features::empty(),
            effects: true,
        }
    }
}

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

/// The client behind a turn, as the audit record keeps it (its `client`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Client {
    /// How it is connected: `stdio`, `http`.
    pub transport: String,
    /// Its session: the `Mcp-Session-Id` over HTTP (none for a stateless
    /// request); over stdio, none — one process serves one client (the
    /// record's `inst` tells processes apart).
    pub session: Option<String>,
    /// Its `clientInfo` (the request's `_meta` on the stateless revision,
    /// else its `initialize`): name and version.
    pub name: Option<String>,
    pub version: Option<String>,
    /// Who is calling, as its validated access token says (`[auth]`);
    /// absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<Arc<crate::identity::Caller>>,
    /// The W3C trace context the request carried in its `_meta`
    /// (`traceparent`, `tracestate`: SEP-414), when well-formed; passed on
    /// to bridged servers with the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<Arc<TraceContext>>,
    /// Arguments its harness adds to every call, which the operator
    /// accepted and which were removed before validation, with their
    /// values (`serve --accept-harness-arguments`); absent when none.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub stripped: serde_json::Map<String, Value>,
}

/// A W3C trace context (`traceparent`, and `tracestate` if any), checked.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceContext {
    pub traceparent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// `traceparent` (and `tracestate`) as a client sent them, if the
    /// `traceparent` is well-formed (version `00`-`fe`, a non-zero trace
    /// and span id, lowercase hex) and the `tracestate` at most 512 bytes
    /// (else it is dropped). Anything else: `None`.
    ///
    /// ```
    /// use toolgate::call::TraceContext;
    /// let t = TraceContext::parse("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01", None);
    /// assert!(t.is_some());
    /// assert!(TraceContext::parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None).is_none());
    /// assert!(TraceContext::parse("not a trace", None).is_none());
    /// ```
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let parts: Vec<&str> = traceparent.split('-').collect();
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let zero = |s: &str| s.bytes().all(|b| b == b'0');
        let ok = parts.len() == 4
            && hex(parts[0], 2)
            && parts[0] != "ff"
            && hex(parts[1], 32)
            && !zero(parts[1])
            && hex(parts[2], 16)
            && !zero(parts[2])
            && hex(parts[3], 2);
        ok.then(|| TraceContext {
            traceparent: traceparent.to_string(),
            tracestate: tracestate
                .filter(|s| s.len() <= 512 && s.is_ascii())
                .map(str::to_string),
        })
    }
}

/// Where a call comes from: its turn's agent scope, mode, parent and
/// cancellation (see [`crate::turn::TurnOptions::origin`]).
#[derive(Clone, Debug, Default)]
pub struct CallOrigin {
    /// The agent scope (`""` = global).
    pub agent_scope: String,
    /// Code Mode is on.
    pub code_mode: bool,
    /// The call whose program made this one (Code Mode), if any.
    pub parent_id: Option<String>,
    /// The turn's cancellation.
    pub cancel: CancellationToken,
    /// Who is calling (see [`crate::identity`]).
    pub caller: Option<Arc<crate::identity::Caller>>,
    /// The client's trace context, passed on to bridged servers.
    pub trace: Option<Arc<TraceContext>>,
    /// The MCP client, for what a bridged server asks of it during the
    /// call (see [`ClientLink`]).
    pub link: Option<Arc<dyn ClientLink>>,
}

/// The MCP client a call came from, for what a bridged server asks of it
/// while the call runs — its user (elicitation), its model (sampling) —
/// and the progress the server reports. Set by `toolgate serve` for the
/// calls of a session whose client can be sent requests; what may be
/// forwarded is the operator's to say per server (`crate::bridge`). The
/// messages are MCP's own JSON, as the bridged server sent them.
#[async_trait::async_trait]
pub trait ClientLink: Send + Sync + std::fmt::Debug {
    /// `elicitation/create` params → the client's `ElicitResult`. `Err`:
    /// why the client cannot be asked.
    async fn elicit(&self, params: Value) -> Result<Value, String>;
    /// `sampling/createMessage` params → the client's
    /// `CreateMessageResult`. `Err`: why its model cannot be asked.
    async fn sample(&self, params: Value) -> Result<Value, String>;
    /// The call's progress (sent only if the client asked for progress).
    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>);
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
    /// The call whose program made this one (Code Mode), if any.
    pub parent_id: Option<String>,
    pub tool: ToolMeta,
    /// The turn's cancellation: every guest call made for this call stops
    /// when it fires (policies included).
    pub cancel: CancellationToken,
    /// Who is calling, validated (see [`crate::identity`]); `None` without
    /// `[auth]` (stdio, the static token, `run`).
    pub caller: Option<Arc<crate::identity::Caller>>,
    /// The client's W3C trace context, if it sent one (see
    /// [`Client::trace`]).
    pub trace: Option<Arc<TraceContext>>,
    /// The MCP client, for what a bridged server asks of it (see
    /// [`ClientLink`]).
    pub link: Option<Arc<dyn ClientLink>>,
    /// The arguments as JSON text, made on first use and then shared: every
    /// guest that asks for the arguments receives this text, and a call that
    /// meets no guest never serialises them.
    arguments_json: OnceLock<Arc<str>>,
    /// What its body told the person or heard from them (the audit
    /// record's `notes`): in the call itself, so a call that notes nothing
    /// allocates nothing for it.
    pub notes: Notes,
    /// Questions its body asked (see `crate::approval::questions`).
    pub asks: std::sync::atomic::AtomicUsize,
}

impl CallInfo {
    /// A call's view, frozen from now on.
    pub fn new(
        token: u64,
        call_id: String,
        tool_name: String,
        arguments: Value,
        origin: CallOrigin,
        tool: ToolMeta,
    ) -> Self {
        CallInfo {
            token,
            call_id,
            tool_name,
            arguments: Arc::new(arguments),
            agent_scope: origin.agent_scope,
            code_mode: origin.code_mode,
            parent_id: origin.parent_id,
            tool,
            cancel: origin.cancel,
            caller: origin.caller,
            trace: origin.trace,
            link: origin.link,
            arguments_json: OnceLock::new(),
            notes: Notes::default(),
            asks: Default::default(),
        }
    }

    /// The arguments as compact JSON text.
    pub fn arguments_json(&self) -> &Arc<str> {
        self.arguments_json
            .get_or_init(|| self.arguments.to_string().into())
    }

    /// One value of the arguments, by JSON pointer (RFC 6901).
    pub fn argument(&self, pointer: &str) -> Option<&Value> {
        self.arguments.pointer(pointer)
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

/// A guest called a host function where the contract does not allow it
/// (a chain's `next` outside its hook, a handle outside its call), or a
/// seam it was not granted: the call traps with this message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Misuse(pub String);

/// What features attach to one call, by type, for its body and the seams
/// it reaches (the egress question a spawn's proxy asks, …): each feature
/// inserts and reads its own type, so the call's plumbing names none of
/// them.
pub type Extensions = http::Extensions;

/// What a call's body told the person or heard from them, for its audit
/// record's `notes` (an answer to `ask_user_question`, the digest of a
/// skill loaded): seams push ([`CallInfo::notes`]), the pipeline takes
/// them when the body ends.
#[derive(Debug, Default)]
pub struct Notes(std::sync::Mutex<Vec<Value>>);

impl Notes {
    /// Notes one call keeps, at most (more are dropped, the last saying so).
    pub const MAX: usize = 16;

    pub fn push(&self, note: Value) {
        let mut notes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match notes.len() {
            n if n < Self::MAX - 1 => notes.push(note),
            n if n == Self::MAX - 1 => notes.push(
                serde_json::json!({"kind": "dropped", "why": "a call keeps at most 16 notes"}),
            ),
            _ => {}
        }
    }

    pub fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}
