//! OpenAI's Chat Completions format: `POST {base}/chat/completions`, the
//! answer whole or as `data:` chunks ending in `data: [DONE]`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Attempt, Message, ModelConfig, Reply, Request, ToolUse, Usage, cut, sse};

/// The URL, the format's own headers, and the body of one turn.
pub fn request(c: &ModelConfig, r: &Request<'_>) -> (String, Vec<(&'static str, String)>, Value) {
    let mut messages = Vec::with_capacity(r.messages.len() + 1);
    if !r.system.is_empty() {
        messages.push(json!({"role": "system", "content": r.system}));
    }
    for m in r.messages {
        match m {
            Message::User(text) => messages.push(json!({"role": "user", "content": text})),
            Message::Assistant { text, calls } => {
                let mut m = json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { json!(text) },
                });
                if !calls.is_empty() {
                    m["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {
                                    "name": c.name,
                                    "arguments": match &c.arguments {
                                        Value::String(raw) => raw.clone(),
                                        v => v.to_string(),
                                    },
                                },
                            })
                        })
                        .collect();
                }
                messages.push(m);
            }
            Message::ToolResults(results) => {
                for t in results {
                    messages.push(json!({
                        "role": "tool",
                        "tool_call_id": t.id,
                        "content": t.text,
                    }));
                }
            }
        }
    }
    let mut body = json!({
        "model": c.model,
        "max_tokens": c.max_tokens(),
        "messages": messages,
    });
    if !r.tools.is_empty() {
        body["tools"] = r
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
    }
    if c.stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    (c.base().at("/chat/completions"), Vec::new(), body)
}

/// A provider's error body's message (`{"error": {"message": …}}`), or
/// the start of the body.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
                .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
        })
        .unwrap_or_else(|| cut(&text, 300).to_string())
}

fn malformed(why: impl Into<String>) -> Attempt {
    Attempt::Retry {
        why: format!("the answer is not a chat completion: {}", why.into()),
        wait: None,
    }
}

fn usage(v: &Value) -> Usage {
    Usage {
        input_tokens: v.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: v
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    }
}

/// What the model wrote as a call's arguments: the object, or the text.
fn arguments(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v) => v,
        Err(_) if raw.trim().is_empty() => json!({}),
        Err(_) => Value::String(raw.to_string()),
    }
}

/// A whole answer.
pub fn read(body: &[u8]) -> Result<Reply, Attempt> {
    let v: Value = serde_json::from_slice(body).map_err(|e| malformed(e.to_string()))?;
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| malformed("no `choices`"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| malformed("no `choices[0].message`"))?;
    let mut calls = Vec::new();
    for (i, c) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = c
            .pointer("/function/name")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed(format!("tool call {i} has no name")))?;
        calls.push(ToolUse {
            id: c
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{i}"), str::to_string),
            name: name.to_string(),
            arguments: arguments(
                c.pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
        });
    }
    Ok(Reply {
        text: message
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        calls,
        usage: v.get("usage").map(usage).unwrap_or_default(),
        stop: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    })
}

/// A streamed answer: the deltas put together. A stream without its
/// `[DONE]` (or at least a `finish_reason`) was cut.
pub fn read_stream(body: &[u8]) -> Result<Reply, Attempt> {
    let text = String::from_utf8_lossy(body);
    let mut reply = Reply::default();
    // Tool calls by index: id, name, arguments text.
    let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
    let mut done = false;
    for e in sse::events(&text) {
        if e.data.trim() == "[DONE]" {
            done = true;
            break;
        }
        let v: Value = serde_json::from_str(&e.data)
            .map_err(|err| malformed(format!("a stream event is not JSON ({err})")))?;
        if let Some(err) = v.get("error") {
            return Err(Attempt::Retry {
                why: format!("the stream reported an error: {err}"),
                wait: None,
            });
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            reply.usage = usage(u);
        }
        let Some(choice) = v.pointer("/choices/0") else {
            continue;
        };
        if let Some(s) = choice.get("finish_reason").and_then(Value::as_str) {
            reply.stop = s.to_string();
        }
        let Some(delta) = choice.get("delta") else {
            continue;
        };
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            reply.text.push_str(t);
        }
        for c in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(0);
            let entry = calls.entry(index).or_default();
            if let Some(id) = c.get("id").and_then(Value::as_str) {
                entry.0 = id.to_string();
            }
            if let Some(n) = c.pointer("/function/name").and_then(Value::as_str) {
                entry.1.push_str(n);
            }
            if let Some(a) = c.pointer("/function/arguments").and_then(Value::as_str) {
                entry.2.push_str(a);
            }
        }
    }
    if !done && reply.stop.is_empty() {
        return Err(Attempt::Retry {
            why: "the stream ended before its end (no `[DONE]`)".into(),
            wait: None,
        });
    }
    for (index, (id, name, args)) in calls {
        if name.is_empty() {
            return Err(malformed(format!("streamed tool call {index} has no name")));
        }
        reply.calls.push(ToolUse {
            id: if id.is_empty() {
                format!("call_{index}")
            } else {
                id
            },
            name,
            arguments: arguments(&args),
        });
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(stream: bool) -> ModelConfig {
        serde_json::from_value(json!({
            "api": "chat-completions",
            "base_url": "http://127.0.0.1:9/v1/",
            "model": "m",
            "stream": stream,
        }))
        .unwrap()
    }

    #[test]
    fn a_conversation_in_the_format() {
        let (messages, tools) = crate::models::sample_conversation();
        let (url, _, body) = request(
            &config(true),
            &Request {
                system: "sys",
                messages: &messages,
                tools: &tools,
            },
        );
        assert_eq!(url, "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"a\"}"
        );
        assert_eq!(
            body["messages"][3],
            json!({"role": "tool", "tool_call_id": "u1", "content": "A"})
        );
        assert_eq!(body["tools"][0]["function"]["name"], "read");
        assert_eq!(body["stream"], true);
    }

    #[test]
    fn whole_and_streamed_answers_read_the_same() {
        let whole = json!({
            "choices": [{"message": {"content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"x\"}"}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}
        });
        let streamed = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n\
             data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"x\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n\
             data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\n\
             data: [DONE]\n\n";
        let a = read(whole.to_string().as_bytes()).unwrap();
        let b = read_stream(streamed.as_bytes()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.calls[0].arguments, json!({"path": "x"}));
        assert_eq!(a.usage.total(), 15);
    }

    #[test]
    fn a_cut_stream_and_a_wrong_body_are_tried_again() {
        let cut = "data: {\"choices\":[{\"delta\":{\"content\":\"hel\"}}]}\n\n";
        assert!(matches!(
            read_stream(cut.as_bytes()),
            Err(Attempt::Retry { .. })
        ));
        assert!(matches!(read(b"{not json"), Err(Attempt::Retry { .. })));
        assert!(matches!(read(b"{}"), Err(Attempt::Retry { .. })));
        assert_eq!(
            error_message(br#"{"error":{"message":"bad key"}}"#),
            "bad key"
        );
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_as_text() {
        assert_eq!(arguments("{oops"), json!("{oops"));
        assert_eq!(arguments(""), json!({}));
    }
}
