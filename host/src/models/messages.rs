//! Anthropic's Messages format: `POST {base}/messages` with
//! `anthropic-version`, the answer whole or as typed events
//! (`message_start`, `content_block_*`, `message_delta`, `message_stop`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Attempt, ModelConfig, Reply, Request, ToolUse, Usage, cut, sse};

/// The API version sent (`anthropic-version`).
pub const VERSION: &str = "2023-06-01";

/// The URL, the format's own headers, and the body of one turn. Messages
/// alternate: a user message that follows tool results joins them.
pub fn request(c: &ModelConfig, r: &Request<'_>) -> (String, Vec<(&'static str, String)>, Value) {
    let messages = super::block_messages(r.messages, |t| {
        json!({
            "type": "tool_result",
            "tool_use_id": t.id,
            "content": t.text,
            "is_error": t.is_error,
        })
    });
    let mut body = json!({
        "model": c.model,
        "max_tokens": c.max_tokens(),
        "messages": messages,
    });
    if !r.system.is_empty() {
        body["system"] = json!(r.system);
    }
    if !r.tools.is_empty() {
        body["tools"] = r
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
    }
    if c.stream {
        body["stream"] = json!(true);
    }
    (
        c.base().at("/messages"),
        vec![("anthropic-version", VERSION.to_string())],
        body,
    )
}

/// A provider's error body's message (`{"type": "error", "error":
/// {"type": …, "message": …}}`), or the start of the body.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            let e = v.get("error")?;
            Some(match (e.get("type"), e.get("message")) {
                (Some(t), Some(m)) => format!(
                    "{}: {}",
                    t.as_str().unwrap_or_default(),
                    m.as_str().unwrap_or_default()
                ),
                _ => e.to_string(),
            })
        })
        .unwrap_or_else(|| cut(&text, 300).to_string())
}

fn malformed(why: impl Into<String>) -> Attempt {
    Attempt::Retry {
        why: format!("the answer is not a message: {}", why.into()),
        wait: None,
    }
}

fn usage(v: &Value, into: &mut Usage) {
    if let Some(n) = v.get("input_tokens").and_then(Value::as_u64) {
        into.input_tokens = n;
    }
    if let Some(n) = v.get("output_tokens").and_then(Value::as_u64) {
        into.output_tokens = n;
    }
}

/// A whole answer.
pub fn read(body: &[u8]) -> Result<Reply, Attempt> {
    let v: Value = serde_json::from_slice(body).map_err(|e| malformed(e.to_string()))?;
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("no `content`"))?;
    let mut reply = Reply::default();
    for (i, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                reply
                    .text
                    .push_str(block.get("text").and_then(Value::as_str).unwrap_or(""));
            }
            Some("tool_use") => reply.calls.push(ToolUse {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("toolu_{i}"), str::to_string),
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed(format!("tool_use block {i} has no name")))?
                    .to_string(),
                arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
            }),
            // Thinking and other blocks are not the answer.
            _ => {}
        }
    }
    if let Some(u) = v.get("usage") {
        usage(u, &mut reply.usage);
    }
    reply.stop = v
        .get("stop_reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(reply)
}

/// One content block of a stream, as its deltas arrive.
#[derive(Default)]
struct Block {
    kind: String,
    id: String,
    name: String,
    text: String,
    json: String,
}

/// A streamed answer. A stream without `message_stop` was cut; an `error`
/// event (`overloaded_error`, …) is tried again.
pub fn read_stream(body: &[u8]) -> Result<Reply, Attempt> {
    let text = String::from_utf8_lossy(body);
    let mut reply = Reply::default();
    let mut blocks: BTreeMap<u64, Block> = BTreeMap::new();
    let mut stopped = false;
    for e in sse::events(&text) {
        let v: Value = serde_json::from_str(&e.data)
            .map_err(|err| malformed(format!("a stream event is not JSON ({err})")))?;
        let kind = e
            .event
            .clone()
            .or_else(|| v.get("type").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_default();
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind.as_str() {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    usage(u, &mut reply.usage);
                }
            }
            "content_block_start" => {
                let b = v.get("content_block").cloned().unwrap_or_default();
                let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                blocks.insert(
                    index,
                    Block {
                        kind: s("type"),
                        id: s("id"),
                        name: s("name"),
                        text: s("text"),
                        json: String::new(),
                    },
                );
            }
            "content_block_delta" => {
                let b = blocks.entry(index).or_default();
                let d = v.get("delta").cloned().unwrap_or_default();
                if let Some(t) = d.get("text").and_then(Value::as_str) {
                    b.text.push_str(t);
                }
                if let Some(j) = d.get("partial_json").and_then(Value::as_str) {
                    b.json.push_str(j);
                }
            }
            "message_delta" => {
                if let Some(s) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    reply.stop = s.to_string();
                }
                if let Some(u) = v.get("usage") {
                    usage(u, &mut reply.usage);
                }
            }
            "message_stop" => {
                stopped = true;
                break;
            }
            "error" => {
                return Err(Attempt::Retry {
                    why: format!(
                        "the stream reported an error: {}",
                        error_message(e.data.as_bytes())
                    ),
                    wait: None,
                });
            }
            _ => {}
        }
    }
    if !stopped {
        return Err(Attempt::Retry {
            why: "the stream ended before its end (no `message_stop`)".into(),
            wait: None,
        });
    }
    for (index, b) in blocks {
        match b.kind.as_str() {
            "text" => reply.text.push_str(&b.text),
            "tool_use" => {
                if b.name.is_empty() {
                    return Err(malformed(format!("streamed tool_use {index} has no name")));
                }
                reply.calls.push(ToolUse {
                    id: if b.id.is_empty() {
                        format!("toolu_{index}")
                    } else {
                        b.id
                    },
                    name: b.name,
                    arguments: if b.json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&b.json).unwrap_or(Value::String(b.json))
                    },
                });
            }
            _ => {}
        }
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{Message, ToolResult};

    fn config() -> ModelConfig {
        serde_json::from_value(json!({
            "api": "messages",
            "base_url": "https://api.anthropic.com/v1",
            "model": "claude",
        }))
        .unwrap()
    }

    #[test]
    fn tool_results_and_a_following_user_message_are_one_user_turn() {
        let messages = vec![
            Message::User("go".into()),
            Message::Assistant {
                text: "reading".into(),
                calls: vec![ToolUse {
                    id: "t1".into(),
                    name: "read".into(),
                    arguments: json!({"path": "a"}),
                }],
            },
            Message::ToolResults(vec![ToolResult {
                id: "t1".into(),
                text: "A".into(),
                is_error: true,
            }]),
            Message::User("also this".into()),
        ];
        let (url, headers, body) = request(
            &config(),
            &Request {
                system: "sys",
                messages: &messages,
                tools: &[],
            },
        );
        assert_eq!(url, "https://api.anthropic.com/v1/messages");
        assert!(headers.contains(&("anthropic-version", VERSION.into())));
        assert_eq!(body["system"], "sys");
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[2]["content"][0]["type"], "tool_result");
        assert_eq!(m[2]["content"][0]["is_error"], true);
        assert_eq!(m[2]["content"][1]["text"], "also this");
    }

    #[test]
    fn whole_and_streamed_answers_read_the_same() {
        let whole = json!({
            "content": [
                {"type": "text", "text": "Let me read."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "x"}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 12, "output_tokens": 7}
        });
        let streamed = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n\
            event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
            event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me read.\"}}\n\n\
            event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"read\",\"input\":{}}}\n\n\
            event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\"}}\n\n\
            event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"x\\\"}\"}}\n\n\
            event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n\
            event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        assert_eq!(
            read(whole.to_string().as_bytes()).unwrap(),
            read_stream(streamed.as_bytes()).unwrap()
        );
    }

    #[test]
    fn overloaded_and_cut_streams_are_tried_again() {
        let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        match read_stream(overloaded.as_bytes()) {
            Err(Attempt::Retry { why, .. }) => assert!(why.contains("overloaded_error"), "{why}"),
            other => panic!("{other:?}"),
        }
        let cut = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n";
        assert!(matches!(
            read_stream(cut.as_bytes()),
            Err(Attempt::Retry { .. })
        ));
    }
}
