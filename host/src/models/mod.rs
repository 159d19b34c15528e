//! Language models, as the host asks them for a sub-agent's turn (see
//! [`crate::delegation`]): `[models.NAME]`, two wire formats, and the
//! retries between them and a provider's bad moment.
//!
//! Why here, and why two formats: every server people run speaks one of
//! two APIs — OpenAI's Chat Completions (vLLM, llama.cpp's server, Ollama,
//! LM Studio, OpenAI itself) and Anthropic's Messages. One conversation
//! type ([`Message`]) is written in either ([`chat`], [`messages`]), and
//! either's answer, whole or streamed as server-sent events ([`sse`]), is
//! read back into one [`Reply`].
//!
//! The module makes no connection. [`Model::complete`] hands each attempt
//! to a [`Transport`] — the host's is its egress (`[egress] deny`, the
//! address classes, the record), see `host/start/delegation.rs` — and
//! decides from what came back whether to try again ([`retry`]): a 429
//! (after its `retry-after`), a 5xx, an overloaded provider, a stream cut
//! before its end and an answer that is not the format are retried with
//! backoff, within the attempts and the time the caller has; a refusal
//! (egress, 4xx) is reported at once. Nothing waits without a deadline.
//!
//! The models are shared ([`Models`]) by the delegation family and the
//! `model` seam, which lets a component granted `models = ["NAME"]` ask
//! them (`crate::seams::model`): one count of each client's tokens.
//!
//! The API key is read once at start from `api_key_file`, a path the
//! configuration types as a secret: what the host runs cannot read it
//! (see `crate::authority`), and it never enters a component.

pub mod chat;
pub mod config;
pub mod messages;
pub mod retry;
pub mod sampling;
pub mod shared;
pub mod sse;

use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use config::{Api, ModelConfig};
pub use shared::{Connect, Models};

use crate::tool::ModelTool;

/// The longest answer read from a provider (8 MiB): a stream of a long
/// answer with its events fits many times over; an endless one is cut.
pub const MAX_ANSWER_BYTES: usize = 8 << 20;

/// One message of a conversation, in neither format.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// The user's (the prompt, or a message sent to a running agent).
    User(String),
    /// The model's: its text and the tool calls it made.
    Assistant { text: String, calls: Vec<ToolUse> },
    /// The results of the tool calls of the previous assistant message,
    /// in its order.
    ToolResults(Vec<ToolResult>),
}

/// A tool call a model made.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolUse {
    /// The provider's id for it (answered with the result).
    pub id: String,
    pub name: String,
    /// Its arguments as the model wrote them: an object, or — when what
    /// it wrote is not JSON — the text itself (the pipeline refuses it as
    /// `INVALID_ARGS`, and the model reads why).
    pub arguments: Value,
}

/// What became of one [`ToolUse`].
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    pub id: String,
    pub text: String,
    pub is_error: bool,
}

/// One turn's question.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ModelTool],
}

/// Tokens, as the provider counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// One turn's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    pub text: String,
    pub calls: Vec<ToolUse>,
    pub usage: Usage,
    /// Why the model stopped, as the provider says it (`stop`,
    /// `tool_calls`, `end_turn`, `max_tokens`, …).
    pub stop: String,
}

/// One HTTP exchange a [`Model`] asks its [`Transport`] for.
#[derive(Clone, Debug)]
pub struct WireRequest {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// The whole exchange, connect to last byte.
    pub timeout: Duration,
    pub max_body: usize,
}

/// What came back.
#[derive(Clone, Debug)]
pub struct WireResponse {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: Vec<u8>,
}

/// Why nothing came back.
#[derive(Clone, Debug, thiserror::Error)]
pub enum TransportError {
    /// Egress refused the destination (the message names the rule).
    #[error("{0}")]
    Refused(String),
    /// It could not be sent, or not in time, or was cut, or too long.
    #[error("{0}")]
    Failed(String),
}

/// Sends a model's requests (the host: through its egress).
#[async_trait]
pub trait Transport: Send + Sync {
    async fn send(&self, request: WireRequest) -> Result<WireResponse, TransportError>;
}

/// Why a turn got no answer.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ModelError {
    /// Egress refused the provider's address.
    #[error("the request to model `{model}` was refused: {message}")]
    Refused { model: String, message: String },
    /// The provider refused the request (a 4xx but 429): not retried.
    #[error("model `{model}` refused the request (HTTP {status}): {message}")]
    Rejected {
        model: String,
        status: u16,
        message: String,
    },
    /// Every attempt failed, each in a way worth another.
    #[error("model `{model}` gave no answer after {attempts} attempt(s): {last}")]
    Exhausted {
        model: String,
        attempts: u32,
        last: String,
    },
    /// The client's model (MCP sampling) could not be asked, or answered
    /// with something that is not a message.
    #[error("the client's model: {0}")]
    Client(String),
    /// The caller's time ended (or it cancelled) before an answer.
    #[error("model `{model}`: {why}")]
    Stopped { model: String, why: String },
}

/// What went wrong with one attempt, and whether another may help.
#[derive(Clone, Debug, PartialEq)]
pub enum Attempt {
    /// Worth another, after at least `wait` (the provider's `retry-after`).
    Retry { why: String, wait: Option<Duration> },
    /// Not worth another.
    Fail { status: u16, why: String },
}

/// A configured model, its key read.
pub struct Model {
    pub name: String,
    config: ModelConfig,
    key: Option<String>,
}

/// A turn's answer and what it cost to get.
#[derive(Clone, Debug)]
pub struct Completion {
    pub reply: Reply,
    pub attempts: u32,
    /// The request body's and the answer's digests (`sha256:…`), for the
    /// record.
    pub prompt_digest: String,
    pub answer_digest: String,
    pub elapsed: Duration,
}

impl Completion {
    /// What the record keeps of this request (`model` answered it over
    /// `api`): tokens, digests, attempts, time, why the model stopped —
    /// never the text.
    pub fn record(&self, model: &str, api: &str) -> Value {
        serde_json::json!({
            "model": model,
            "api": api,
            "inputTokens": self.reply.usage.input_tokens,
            "outputTokens": self.reply.usage.output_tokens,
            "prompt": self.prompt_digest,
            "answer": self.answer_digest,
            "attempts": self.attempts,
            "ms": self.elapsed.as_millis() as u64,
            "stop": self.reply.stop,
        })
    }
}

impl Model {
    pub fn new(name: impl Into<String>, config: ModelConfig, key: Option<String>) -> Model {
        Model {
            name: name.into(),
            config,
            key,
        }
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The request of one attempt, in the model's format.
    pub fn wire(&self, request: &Request<'_>, timeout: Duration) -> WireRequest {
        let c = &self.config;
        let (url, mut headers, body) = match c.api {
            Api::ChatCompletions => chat::request(c, request),
            Api::Messages => messages::request(c, request),
        };
        headers.push(("content-type", "application/json".into()));
        if let Some(key) = &self.key {
            match c.api {
                Api::ChatCompletions => headers.push(("authorization", format!("Bearer {key}"))),
                Api::Messages => headers.push(("x-api-key", key.clone())),
            }
        }
        WireRequest {
            url,
            headers,
            body: body.to_string().into_bytes(),
            timeout,
            max_body: MAX_ANSWER_BYTES,
        }
    }

    /// Reads one attempt's answer.
    pub fn read(&self, answer: &WireResponse) -> Result<Reply, Attempt> {
        if let Some(attempt) = retry::judge_status(answer) {
            let why = match self.config.api {
                Api::ChatCompletions => chat::error_message(&answer.body),
                Api::Messages => messages::error_message(&answer.body),
            };
            return Err(match attempt {
                Attempt::Retry { wait, .. } => Attempt::Retry { why, wait },
                Attempt::Fail { status, .. } => Attempt::Fail { status, why },
            });
        }
        let streamed = self.config.stream;
        match self.config.api {
            Api::ChatCompletions if streamed => chat::read_stream(&answer.body),
            Api::ChatCompletions => chat::read(&answer.body),
            Api::Messages if streamed => messages::read_stream(&answer.body),
            Api::Messages => messages::read(&answer.body),
        }
    }

    /// Asks for one turn: attempts and backoff within `deadline`, stopped
    /// by `cancel`.
    pub async fn complete(
        &self,
        transport: &dyn Transport,
        request: &Request<'_>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Completion, ModelError> {
        let started = Instant::now();
        let policy = retry::Policy::from(&self.config);
        let stopped = |why: String| ModelError::Stopped {
            model: self.name.clone(),
            why,
        };
        let mut last = String::new();
        let mut attempts = 0;
        while attempts < policy.attempts {
            attempts += 1;
            let now = Instant::now();
            if now >= deadline {
                return Err(stopped(format!(
                    "no time was left for attempt {attempts} (the agent's time ended){}",
                    if last.is_empty() {
                        String::new()
                    } else {
                        format!("; the last attempt: {last}")
                    }
                )));
            }
            let timeout = policy.timeout.min(deadline - now);
            let wire = self.wire(request, timeout);
            let prompt_digest = digest(&wire.body);
            let sent = tokio::select! {
                r = transport.send(wire) => r,
                _ = cancel.cancelled() => return Err(stopped("interrupted".into())),
            };
            let wait = match sent {
                Err(TransportError::Refused(message)) => {
                    return Err(ModelError::Refused {
                        model: self.name.clone(),
                        message,
                    });
                }
                Err(TransportError::Failed(why)) => {
                    last = why;
                    None
                }
                Ok(answer) => match self.read(&answer) {
                    Ok(reply) => {
                        return Ok(Completion {
                            reply,
                            attempts,
                            prompt_digest,
                            answer_digest: digest(&answer.body),
                            elapsed: started.elapsed(),
                        });
                    }
                    Err(Attempt::Fail { status, why }) => {
                        return Err(ModelError::Rejected {
                            model: self.name.clone(),
                            status,
                            message: why,
                        });
                    }
                    Err(Attempt::Retry { why, wait }) => {
                        last = why;
                        wait
                    }
                },
            };
            if attempts >= policy.attempts {
                break;
            }
            let pause = policy.pause(attempts, wait);
            if Instant::now() + pause >= deadline {
                return Err(stopped(format!(
                    "attempt {attempts} failed ({last}) and the next would wait {} ms, past the agent's time",
                    pause.as_millis()
                )));
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = cancel.cancelled() => return Err(stopped("interrupted".into())),
            }
        }
        Err(ModelError::Exhausted {
            model: self.name.clone(),
            attempts,
            last,
        })
    }
}

/// A conversation as alternating `user` and `assistant` messages of
/// content blocks — the shape Anthropic's Messages and MCP sampling share:
/// text, `tool_use` blocks (the arguments as an object: what was not one
/// is sent as the text it was, under `input`), and the tool results as
/// `result(…)` blocks of a user message that a following user message
/// joins.
pub(crate) fn block_messages(
    messages: &[Message],
    result: impl Fn(&ToolResult) -> Value,
) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    let mut push = |role: &str, blocks: Vec<Value>| {
        if let Some(last) = out.last_mut()
            && last["role"] == role
            && let Some(content) = last["content"].as_array_mut()
        {
            content.extend(blocks);
            return;
        }
        out.push(serde_json::json!({"role": role, "content": blocks}));
    };
    for m in messages {
        match m {
            Message::User(text) => {
                push(
                    "user",
                    vec![serde_json::json!({"type": "text", "text": text})],
                );
            }
            Message::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(serde_json::json!({"type": "text", "text": text}));
                }
                for c in calls {
                    blocks.push(serde_json::json!({
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": if c.arguments.is_object() {
                            c.arguments.clone()
                        } else {
                            serde_json::json!({"input": c.arguments})
                        },
                    }));
                }
                push("assistant", blocks);
            }
            Message::ToolResults(results) => push("user", results.iter().map(&result).collect()),
        }
    }
    out
}

/// A conversation the format tests write in each format: a prompt, a
/// `read` call, its result.
#[cfg(test)]
pub(crate) fn sample_conversation() -> (Vec<Message>, Vec<ModelTool>) {
    (
        vec![
            Message::User("go".into()),
            Message::Assistant {
                text: String::new(),
                calls: vec![ToolUse {
                    id: "u1".into(),
                    name: "read".into(),
                    arguments: serde_json::json!({"path": "a"}),
                }],
            },
            Message::ToolResults(vec![ToolResult {
                id: "u1".into(),
                text: "A".into(),
                is_error: false,
            }]),
        ],
        vec![ModelTool {
            name: "read".into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
        }],
    )
}

/// `sha256:` and the hex digest of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// `text` cut to at most `max` bytes, on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_cuts() {
        assert_eq!(
            digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("hi", 10), "hi");
    }
}
