//! MCP sampling as a sub-agent's model (`[delegation] sampling = true`,
//! `model: "client"`): each turn is a `sampling/createMessage` request to
//! the client whose call started the agent, with the tools
//! (2025-11-25: `tools` in the request, `tool_use` and `tool_result`
//! content blocks). Opt-in, never the default: sampling is deprecated in
//! the 2026-07-28 revision, and only a client that declared `sampling`
//! with `tools` can be asked (the link refuses the others at once).
//!
//! The client's model reports no tokens: a sampled turn counts against
//! the agent's turns and time, not its tokens.

use serde_json::{Value, json};

use super::{Attempt, Reply, Request, ToolUse};

/// The `sampling/createMessage` params of one turn.
pub fn request(r: &Request<'_>, max_tokens: u32) -> Value {
    let messages = super::block_messages(r.messages, |t| {
        json!({
            "type": "tool_result",
            "toolUseId": t.id,
            "content": [{"type": "text", "text": t.text}],
            "isError": t.is_error,
        })
    });
    let mut params = json!({
        "messages": messages,
        "maxTokens": max_tokens,
        "tools": r.tools.iter().map(|t| json!({
            "name": t.name,
            "description": t.description,
            "inputSchema": t.parameters,
        })).collect::<Vec<_>>(),
        "toolChoice": {"mode": "auto"},
    });
    if !r.system.is_empty() {
        params["systemPrompt"] = json!(r.system);
    }
    params
}

/// The client's `CreateMessageResult`.
pub fn read(result: &Value) -> Result<Reply, Attempt> {
    let bad = |why: &str| Attempt::Fail {
        status: 0,
        why: format!("the client's sampling result is not a message: {why}"),
    };
    if result.get("role").and_then(Value::as_str) != Some("assistant") {
        return Err(bad("its role is not `assistant`"));
    }
    let blocks: Vec<&Value> = match result.get("content") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(v @ Value::Object(_)) => vec![v],
        _ => return Err(bad("no `content`")),
    };
    let mut reply = Reply {
        stop: result
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        ..Reply::default()
    };
    for (i, b) in blocks.into_iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => reply
                .text
                .push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => reply.calls.push(ToolUse {
                id: b
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("use_{i}"), str::to_string),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("a tool_use without a name"))?
                    .to_string(),
                arguments: b.get("input").cloned().unwrap_or_else(|| json!({})),
            }),
            _ => {}
        }
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_as_a_sampling_request_and_its_result() {
        let (messages, tools) = crate::models::sample_conversation();
        let p = request(
            &Request {
                system: "sys",
                messages: &messages,
                tools: &tools,
            },
            100,
        );
        assert_eq!(p["systemPrompt"], "sys");
        assert_eq!(p["maxTokens"], 100);
        assert_eq!(p["tools"][0]["inputSchema"], json!({"type": "object"}));
        assert_eq!(p["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(p["messages"][2]["content"][0]["toolUseId"], "u1");
        let r = read(&json!({
            "role": "assistant",
            "model": "m",
            "stopReason": "toolUse",
            "content": [{"type": "tool_use", "id": "x", "name": "read", "input": {"path": "b"}}]
        }))
        .unwrap();
        assert_eq!(r.calls[0].arguments, json!({"path": "b"}));
        let r = read(
            &json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": "hi"}}),
        )
        .unwrap();
        assert_eq!(r.text, "hi");
        assert!(read(&json!({"role": "user", "content": []})).is_err());
    }
}
