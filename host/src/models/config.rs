//! `[models.NAME]` in the configuration: a model a sub-agent may run on.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate_schema::derive::Schema;

use crate::config::path::Secret;
use crate::search::BaseUrl;

/// Output tokens asked for per turn unless `max_tokens` says otherwise.
pub const MAX_TOKENS: u32 = 4096;
/// One attempt's time unless `timeout_ms` says otherwise (120 s).
pub const TIMEOUT_MS: u64 = 120_000;
/// Attempts after the first unless `retries` says otherwise.
pub const RETRIES: u32 = 3;
/// The most `retries` may be.
pub const MAX_RETRIES: u32 = 10;

/// `[models.NAME]`: one model behind one of the two APIs.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, Schema)]
#[serde(deny_unknown_fields)]
#[schema(crate = "toolgate_schema::derive")]
pub struct ModelConfig {
    /// `"chat-completions"` (OpenAI's format, which vLLM, llama.cpp's
    /// server, Ollama and LM Studio speak: `POST {base_url}/chat/completions`)
    /// or `"messages"` (Anthropic's: `POST {base_url}/messages`).
    pub api: Api,
    /// `http(s)://host[:port][/path]`, e.g. `https://api.openai.com/v1`,
    /// `http://127.0.0.1:8080/v1`, `https://api.anthropic.com/v1`. The
    /// request goes through the host's egress: `[egress] deny` and the
    /// address classes apply (a loopback or private server needs
    /// `[egress] allow_private`).
    pub base_url: String,
    /// The provider's name for the model (`gpt-4.1-mini`, `claude-sonnet-4-5`, …).
    pub model: String,
    /// The file holding the API key (one line); absent: no key is sent. A
    /// secret: read by the host only, hidden from everything it runs.
    pub api_key_file: Option<Secret>,
    /// Output tokens asked for per turn (default 4096).
    pub max_tokens: Option<u32>,
    /// One attempt's time in ms, connect to last byte (default 120000).
    pub timeout_ms: Option<u64>,
    /// Attempts after the first on a 429, a 5xx, a cut stream or an answer
    /// not in the format (default 3, at most 10).
    pub retries: Option<u32>,
    /// Ask for the answer as a stream of server-sent events (default
    /// false). A stream cut before its end is retried.
    #[serde(default)]
    pub stream: bool,
}

/// `[models.NAME] api`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Schema)]
#[schema(crate = "toolgate_schema::derive")]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// OpenAI Chat Completions.
    ChatCompletions,
    /// Anthropic Messages.
    Messages,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::ChatCompletions => "chat-completions",
            Api::Messages => "messages",
        }
    }
}

impl ModelConfig {
    /// The problems of `[models.NAME]`.
    pub fn check(&self, name: &str, problems: &mut Vec<String>) {
        let at = format!("/models/{name}");
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            problems.push(format!(
                "{at}: a model's name is letters, digits, `-`, `_` and `.`"
            ));
        }
        if let Err(e) = BaseUrl::parse(&self.base_url) {
            problems.push(format!("{at}/base_url: {e}"));
        }
        if self.model.trim().is_empty() {
            problems.push(format!(
                "{at}/model: empty; the provider's name for the model"
            ));
        }
        crate::config::positive(
            &format!("{at}/max_tokens"),
            self.max_tokens.map(u64::from),
            problems,
        );
        crate::config::positive(&format!("{at}/timeout_ms"), self.timeout_ms, problems);
        if self.retries.is_some_and(|r| r > MAX_RETRIES) {
            problems.push(format!("{at}/retries: at most {MAX_RETRIES}"));
        }
    }

    /// The base URL, checked ([`ModelConfig::check`] said why not).
    pub fn base(&self) -> BaseUrl {
        BaseUrl::parse(&self.base_url)
            .unwrap_or_else(|_| BaseUrl::parse("http://invalid").expect("a constant URL parses"))
    }

    /// `host:port` of the base URL: what the host's egress is asked for.
    pub fn destination(&self) -> Option<String> {
        let uri: http::Uri = self.base_url.parse().ok()?;
        let host = uri.host()?;
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some("http") => 80,
            _ => 443,
        });
        Some(format!("{host}:{port}"))
    }

    pub fn max_tokens(&self) -> u32 {
        self.max_tokens.unwrap_or(MAX_TOKENS)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(TIMEOUT_MS))
    }

    pub fn retries(&self) -> u32 {
        self.retries.unwrap_or(RETRIES).min(MAX_RETRIES)
    }
}

/// Why a model's key could not be read at start.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("[models.{model}] api_key_file {path}: cannot be read")]
    Read {
        model: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("[models.{model}] api_key_file {path}: empty; put the API key in it (one line)")]
    Empty { model: String, path: String },
}

impl ModelConfig {
    /// The API key, read from `api_key_file` (relative to `workdir`), if
    /// one is named.
    pub fn read_key(
        &self,
        model: &str,
        workdir: &std::path::Path,
    ) -> Result<Option<String>, KeyError> {
        let Some(file) = &self.api_key_file else {
            return Ok(None);
        };
        let path = workdir.join(file);
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| KeyError::Read {
            model: model.to_string(),
            path: shown.clone(),
            source,
        })?;
        let key = text.trim();
        if key.is_empty() {
            return Err(KeyError::Empty {
                model: model.to_string(),
                path: shown,
            });
        }
        Ok(Some(key.to_string()))
    }
}
