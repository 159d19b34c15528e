use std::cell::OnceCell;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::toolgate::plugin::{cancellation, deferred_context, types};

/// Who is calling (see [`Call::caller`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    /// The token's subject (`sub`).
    pub subject: String,
    /// The token's issuer (`iss`).
    pub issuer: String,
    /// The OAuth client the token was issued to, if it says.
    pub client_id: Option<String>,
    /// The token's scopes.
    pub scopes: Vec<String>,
    /// The claims the operator passes on (`[auth] claims`): an object.
    pub claims: Value,
    /// How it is connected (`http`).
    pub transport: String,
    /// Its MCP session, if the request is in one.
    pub session: Option<String>,
}

impl Caller {
    /// Whether the token carries `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// Whether claim `name` is `value`, or a list holding it (`groups`).
    pub fn claim_has(&self, name: &str, value: &str) -> bool {
        match &self.claims[name] {
            Value::String(s) => s == value,
            Value::Array(items) => items.iter().any(|i| i.as_str() == Some(value)),
            _ => false,
        }
    }
}

/// A call, as a tool body or a policy sees it.
///
/// The call lives in the host; this is a handle to it. Each field is fetched
/// from the host the first time it is asked for, then kept: a guard that
/// reads only the tool's name copies only the name, however large the
/// arguments are.
pub struct Call<'a> {
    handle: &'a types::Call,
    id: OnceCell<String>,
    tool: OnceCell<String>,
    provider: OnceCell<String>,
    scope: OnceCell<String>,
    arguments_json: OnceCell<String>,
    arguments: OnceCell<Value>,
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("id", &self.id())
            .field("tool", &self.tool())
            .finish()
    }
}

impl<'a> Call<'a> {
    pub(crate) fn new(handle: &'a types::Call) -> Self {
        Call {
            handle,
            id: OnceCell::new(),
            tool: OnceCell::new(),
            provider: OnceCell::new(),
            scope: OnceCell::new(),
            arguments_json: OnceCell::new(),
            arguments: OnceCell::new(),
        }
    }

    /// The model's id for the call.
    pub fn id(&self) -> &str {
        self.id.get_or_init(|| self.handle.id())
    }

    /// The tool being called.
    pub fn tool(&self) -> &str {
        self.tool.get_or_init(|| self.handle.tool_name())
    }

    /// The plugin (or MCP server) that provides the tool.
    pub fn provider(&self) -> &str {
        self.provider.get_or_init(|| self.handle.provider())
    }

    /// The validated arguments, as JSON text.
    pub fn arguments_json(&self) -> &str {
        self.arguments_json.get_or_init(|| self.handle.arguments())
    }

    /// The validated arguments.
    pub fn arguments(&self) -> &Value {
        self.arguments
            .get_or_init(|| serde_json::from_str(self.arguments_json()).unwrap_or(Value::Null))
    }

    /// The arguments as a Rust type.
    pub fn arguments_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.arguments_json())
    }

    /// One value of the arguments, by JSON pointer (`/path`,
    /// `/files/0/name`), copied alone from the host.
    pub fn argument(&self, pointer: &str) -> Option<Value> {
        if let Some(all) = self.arguments.get() {
            return all.pointer(pointer).cloned();
        }
        self.handle
            .argument(pointer)
            .and_then(|text| serde_json::from_str(&text).ok())
    }

    /// One string of the arguments, by JSON pointer.
    pub fn argument_str(&self, pointer: &str) -> Option<String> {
        match self.argument(pointer)? {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Every string in the arguments, with its JSON pointer: what a guard
    /// usually wants to inspect.
    pub fn argument_strings(&self) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, &Value)> = vec![(String::new(), self.arguments())];
        while let Some((path, v)) = stack.pop() {
            match v {
                Value::String(s) => out.push((path, s.as_str())),
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push((format!("{path}/{i}"), item));
                    }
                }
                Value::Object(map) => {
                    for (k, item) in map.iter().rev() {
                        let k = k.replace('~', "~0").replace('/', "~1");
                        stack.push((format!("{path}/{k}"), item));
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The agent scope the call came from (`/`-separated; `""` is global).
    pub fn agent_scope(&self) -> &str {
        self.scope.get_or_init(|| self.handle.scope())
    }

    /// The call whose program made this one (Code Mode), if any.
    pub fn parent_id(&self) -> Option<String> {
        self.handle.parent_id()
    }

    /// Code Mode is on for this call.
    pub fn code_mode(&self) -> bool {
        self.handle.code_mode()
    }

    /// The tool's declared time budget.
    pub fn tool_timeout(&self) -> Option<Duration> {
        self.handle
            .tool_timeout_ms()
            .map(|ms| Duration::from_millis(ms.into()))
    }

    /// The tool's annotations (read-only, destructive, ...).
    pub fn annotations(&self) -> types::ToolAnnotations {
        self.handle.annotations()
    }

    /// Who is calling (contract 0.2.6): the subject, issuer, client,
    /// scopes and the claims the operator passes on, as the access token
    /// `serve --http` validated under `[auth]` says. `None` without
    /// `[auth]`. A guard deciding by person decides on this, never on
    /// anything in the arguments.
    pub fn caller(&self) -> Option<Caller> {
        self.handle.caller().map(|c| Caller {
            claims: serde_json::from_str(&c.claims).unwrap_or(Value::Null),
            subject: c.subject,
            issuer: c.issuer,
            client_id: c.client_id,
            scopes: c.scopes,
            transport: c.transport,
            session: c.session,
        })
    }

    /// Time left until the call's deadline, now.
    pub fn deadline(&self) -> Option<Duration> {
        self.handle.deadline_ms().map(Duration::from_millis)
    }

    /// Time left now (asks the host).
    pub fn remaining(&self) -> Option<Duration> {
        cancellation::remaining_ms().map(Duration::from_millis)
    }

    /// The caller cancelled or the deadline passed: stop soon. Long loops
    /// should check this; the host stops guests that don't, at their
    /// deadline.
    pub fn is_cancelled(&self) -> bool {
        cancellation::is_cancelled()
    }

    /// Add context for the model's next turn (the result's
    /// `additionalContexts`). Only while a tool body runs.
    pub fn defer_context(&self, context: impl AsRef<str>) {
        deferred_context::add(context.as_ref());
    }

    /// The raw handle.
    pub fn handle(&self) -> &types::Call {
        self.handle
    }
}
