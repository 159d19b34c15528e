//! The `model` seam: a conversation a component sends to one of the models
//! of `[models]` (see [`crate::models`]), asked by the host.
//!
//! Why the host asks: the model's key stays in the host (it never enters
//! the component, and what the host runs cannot read its file), and every
//! request passes what a sub-agent's does — the models' egress (the
//! model's `base_url` allowed, `[egress] deny` and the address classes
//! held), the retries with backoff, the calling client's token budget
//! (`[delegation] max_session_tokens`, one count with its sub-agents:
//! [`Models`]), and the record (a `model-request` note on the call).
//!
//! Granted by `models = ["NAME", …]`: a component may ask those models
//! only; one importing the seam without the grant does not load. Every
//! size the guest gives is capped before anything is sent
//! ([`MAX_MESSAGES`], [`MAX_TOOLS`], [`MAX_REQUEST_BYTES`]); the answer is
//! read up to [`crate::models::MAX_ANSWER_BYTES`]. A request is made for a
//! call only (its deadline bounds it, its cancellation stops it), never
//! from `list-tools`.
//!
//! The seam as a unit (see [`crate::seams`]): granted by `models`,
//! host-wide state the shared [`Models`] (in [`super::HostSeams::models`],
//! set at start), the 0.2 `model` interface implemented on [`ModelView`].

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmtime::component::HasData;

use super::{Seam, SeamCtx, SeamHost};
use crate::bindings::v0_2::toolgate::plugin::model as wit;
use crate::call::{CallInfo, CallSignal, Client, Misuse};
use crate::grants::Capability;
use crate::history::Viewer;
use crate::models::{Message, ModelError, Models, Request, ToolResult, ToolUse};
use crate::tool::ModelTool;

/// Messages one request may hold, at most.
pub const MAX_MESSAGES: usize = 1024;
/// Tools one request may offer, at most.
pub const MAX_TOOLS: usize = 128;
/// The request's text, all its strings together, at most (4 MiB).
pub const MAX_REQUEST_BYTES: usize = 4 << 20;
/// How long a request may take when the call has no deadline (10 min).
pub const NO_DEADLINE_WAIT: Duration = Duration::from_secs(600);

/// Where the models are set at start (`[models]`), once.
pub type ModelsSlot = Arc<OnceLock<Arc<Models>>>;

/// The `model` seam: granted by `models = ["NAME"]`.
pub fn seam<T: SeamHost>() -> Seam<T> {
    Seam {
        interface: "model",
        capability: Capability::Models,
        sync: false,
        granted: |g| {
            if g.models.is_empty() {
                Err("models = [\"NAME\"]")
            } else {
                Ok(())
            }
        },
        link: |linker| {
            wit::add_to_linker::<T, ModelView<'static>>(linker, |t| ModelView::new(t.seams()))
        },
    }
}

/// What the `model` interface sees of a store: the grant, the models, and
/// the call being served (its id, scope, client, caller and signal).
pub struct ModelView<'a> {
    plugin: &'a str,
    granted: &'a [String],
    models: Option<&'a Arc<Models>>,
    call: Option<&'a CallInfo>,
    client: Option<Arc<Client>>,
    signal: Option<&'a CallSignal>,
}

impl<'a> ModelView<'a> {
    pub fn new(ctx: SeamCtx<'a>) -> Self {
        ModelView {
            plugin: ctx.plugin,
            granted: &ctx.grants.models,
            models: ctx.shared.models.get(),
            call: ctx.call,
            client: ctx.extensions.get::<Arc<Client>>().cloned(),
            signal: ctx.signal,
        }
    }
}

impl HasData for ModelView<'static> {
    type Data<'a> = ModelView<'a>;
}

fn invalid(m: String) -> wit::ModelError {
    wit::ModelError::InvalidRequest(m)
}

/// The guest's request in the host's terms, every size checked.
fn convert(r: wit::Request) -> Result<(Vec<Message>, Vec<ModelTool>, String), wit::ModelError> {
    if r.messages.is_empty() {
        return Err(invalid(
            "`messages` is empty: start with a user message".into(),
        ));
    }
    if r.messages.len() > MAX_MESSAGES {
        return Err(invalid(format!(
            "{} messages, at most {MAX_MESSAGES}",
            r.messages.len()
        )));
    }
    if r.tools.len() > MAX_TOOLS {
        return Err(invalid(format!(
            "{} tools, at most {MAX_TOOLS}",
            r.tools.len()
        )));
    }
    if !matches!(r.messages[0], wit::Message::User(_)) {
        return Err(invalid("the first message must be the user's".into()));
    }
    let mut bytes = r.system.len();
    let mut count = |s: &str| -> Result<(), wit::ModelError> {
        bytes += s.len();
        if bytes > MAX_REQUEST_BYTES {
            Err(invalid(format!(
                "the request's text is more than {MAX_REQUEST_BYTES} bytes"
            )))
        } else {
            Ok(())
        }
    };
    let mut tools = Vec::with_capacity(r.tools.len());
    for (i, t) in r.tools.into_iter().enumerate() {
        count(&t.name)?;
        count(&t.description)?;
        count(&t.input_schema)?;
        if t.name.is_empty() {
            return Err(invalid(format!("tools[{i}]: the name is empty")));
        }
        let parameters: Value = serde_json::from_str(&t.input_schema)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| {
                invalid(format!(
                    "tools[{i}] `{}`: `input-schema` is not a JSON object",
                    t.name
                ))
            })?;
        tools.push(ModelTool {
            name: t.name,
            description: t.description,
            parameters,
        });
    }
    let mut messages = Vec::with_capacity(r.messages.len());
    for m in r.messages {
        messages.push(match m {
            wit::Message::User(text) => {
                count(&text)?;
                Message::User(text)
            }
            wit::Message::Assistant((text, calls)) => {
                count(&text)?;
                let mut uses = Vec::with_capacity(calls.len());
                for c in calls {
                    count(&c.id)?;
                    count(&c.name)?;
                    count(&c.arguments)?;
                    let arguments =
                        serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments));
                    uses.push(ToolUse {
                        id: c.id,
                        name: c.name,
                        arguments,
                    });
                }
                Message::Assistant { text, calls: uses }
            }
            wit::Message::ToolResults(results) => {
                let mut out = Vec::with_capacity(results.len());
                for r in results {
                    count(&r.id)?;
                    count(&r.text)?;
                    out.push(ToolResult {
                        id: r.id,
                        text: r.text,
                        is_error: r.is_error,
                    });
                }
                Message::ToolResults(out)
            }
        });
    }
    Ok((messages, tools, r.system))
}

fn tool_use(c: ToolUse) -> wit::ToolUse {
    wit::ToolUse {
        id: c.id,
        name: c.name,
        arguments: c.arguments.to_string(),
    }
}

impl From<ModelError> for wit::ModelError {
    fn from(e: ModelError) -> Self {
        match &e {
            ModelError::Refused { .. } => wit::ModelError::Refused(e.to_string()),
            ModelError::Rejected {
                status, message, ..
            } => wit::ModelError::Rejected((*status, message.clone())),
            _ => wit::ModelError::Unavailable(e.to_string()),
        }
    }
}

impl ModelView<'_> {
    fn check_granted(&self) -> wasmtime::Result<()> {
        if self.granted.is_empty() {
            return Err(Misuse(format!(
                "plugin `{}` is not granted the model seam (`models = [\"NAME\"]` in its grants)",
                self.plugin
            ))
            .into());
        }
        Ok(())
    }

    /// What the record keeps of one request (`fields`: what
    /// [`crate::models::Completion::record`] says, or the error).
    fn note(&self, mut fields: Value) {
        if let Some(call) = self.call {
            fields["kind"] = json!("model-request");
            fields["plugin"] = json!(self.plugin);
            call.notes.push(fields);
        }
    }
}

impl wit::Host for ModelView<'_> {
    async fn models(&mut self) -> wasmtime::Result<Vec<String>> {
        self.check_granted()?;
        Ok(self
            .granted
            .iter()
            .filter(|n| self.models.is_some_and(|m| m.get(n).is_some()))
            .cloned()
            .collect())
    }

    async fn complete(
        &mut self,
        request: wit::Request,
    ) -> wasmtime::Result<Result<wit::Reply, wit::ModelError>> {
        self.check_granted()?;
        let name = request.model.clone();
        let Some(model) = self
            .granted
            .contains(&name)
            .then(|| self.models.and_then(|m| m.get(&name)))
            .flatten()
            .cloned()
        else {
            return Ok(Err(wit::ModelError::NotGranted(format!(
                "plugin `{}` may ask {} (its `models` grant); not {:?}",
                self.plugin,
                self.granted
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                crate::models::cut(&name, 64),
            ))));
        };
        let models = self.models.expect("a model was found").clone();
        let Some(call) = self.call else {
            return Ok(Err(invalid(
                "a model is asked for a call, and none is being served (not from list-tools)"
                    .into(),
            )));
        };
        let (messages, tools, system) = match convert(request) {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        let owner = match Viewer::of(call.caller.as_deref(), self.client.as_deref()) {
            Ok(v) => v,
            Err(e) => {
                return Ok(Err(wit::ModelError::Budget(format!(
                    "no client to count the tokens against: {e}"
                ))));
            }
        };
        let spent = models.spent(&owner);
        if spent >= models.max_session_tokens() {
            return Ok(Err(wit::ModelError::Budget(format!(
                "this client has used {spent} tokens of its models, the budget is {} ([delegation] max_session_tokens)",
                models.max_session_tokens()
            ))));
        }
        let Some(connect) = models.connect() else {
            return Ok(Err(wit::ModelError::Unavailable(
                "the host is not ready to reach its models yet".into(),
            )));
        };
        let transport = connect.transport(&call.call_id, &call.agent_scope);
        let (cancel, deadline) = match self.signal {
            Some(s) => (
                s.token().clone(),
                s.deadline()
                    .unwrap_or_else(|| Instant::now() + NO_DEADLINE_WAIT),
            ),
            None => (Default::default(), Instant::now() + NO_DEADLINE_WAIT),
        };
        let asked = model
            .complete(
                &*transport,
                &Request {
                    system: &system,
                    messages: &messages,
                    tools: &tools,
                },
                deadline,
                &cancel,
            )
            .await;
        match asked {
            Ok(done) => {
                models.spend(&owner, done.reply.usage.total());
                self.note(done.record(&name, model.config().api.name()));
                let r = done.reply;
                Ok(Ok(wit::Reply {
                    text: r.text,
                    calls: r.calls.into_iter().map(tool_use).collect(),
                    usage: wit::Usage {
                        input_tokens: r.usage.input_tokens,
                        output_tokens: r.usage.output_tokens,
                    },
                    stop: r.stop,
                    attempts: done.attempts,
                }))
            }
            Err(e) => {
                self.note(json!({"model": name, "error": e.to_string()}));
                Ok(Err(e.into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: Vec<wit::Message>, tools: Vec<wit::ToolSpec>) -> wit::Request {
        wit::Request {
            model: "m".into(),
            system: String::new(),
            messages,
            tools,
        }
    }

    fn refused(r: wit::Request) -> String {
        match convert(r) {
            Err(wit::ModelError::InvalidRequest(m)) => m,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn every_size_the_guest_gives_is_capped() {
        assert!(refused(request(vec![], vec![])).contains("empty"));
        let many = vec![wit::Message::User("x".into()); MAX_MESSAGES + 1];
        assert!(refused(request(many, vec![])).contains("1025 messages"));
        let tool = wit::ToolSpec {
            name: "t".into(),
            description: String::new(),
            input_schema: "{}".into(),
        };
        let tools = vec![tool.clone(); MAX_TOOLS + 1];
        assert!(
            refused(request(vec![wit::Message::User("x".into())], tools)).contains("129 tools")
        );
        let big = "x".repeat(MAX_REQUEST_BYTES / 2 + 1);
        let two = vec![wit::Message::User(big.clone()), wit::Message::User(big)];
        assert!(refused(request(two, vec![])).contains("4194304 bytes"));
        let bad = wit::ToolSpec {
            input_schema: "[1]".into(),
            ..tool
        };
        assert!(
            refused(request(vec![wit::Message::User("x".into())], vec![bad]))
                .contains("not a JSON object")
        );
        let assistant_first = vec![wit::Message::Assistant(("hi".into(), vec![]))];
        assert!(refused(request(assistant_first, vec![])).contains("user's"));
    }

    #[test]
    fn a_conversation_converts_with_its_tool_calls() {
        let (messages, tools, _) = convert(request(
            vec![
                wit::Message::User("go".into()),
                wit::Message::Assistant((
                    String::new(),
                    vec![wit::ToolUse {
                        id: "c1".into(),
                        name: "read".into(),
                        arguments: r#"{"path":"a"}"#.into(),
                    }],
                )),
                wit::Message::ToolResults(vec![wit::ToolResult {
                    id: "c1".into(),
                    text: "A".into(),
                    is_error: false,
                }]),
            ],
            vec![wit::ToolSpec {
                name: "read".into(),
                description: "reads".into(),
                input_schema: r#"{"type":"object"}"#.into(),
            }],
        ))
        .unwrap();
        assert_eq!(messages.len(), 3);
        let Message::Assistant { calls, .. } = &messages[1] else {
            panic!("{messages:?}")
        };
        assert_eq!(calls[0].arguments, json!({"path": "a"}));
        assert_eq!(tools[0].parameters, json!({"type": "object"}));
    }
}
