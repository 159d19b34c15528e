"""A scripted model for the agent harnesses' end-to-end tests
(tests/tests/all/harness.rs): a local HTTP server speaking the Anthropic
Messages API (Claude Code) and the OpenAI Responses API (Codex), streamed,
answering with tool calls from a script, and logging what the model was
shown.

    python model_server.py SCRIPT LOG

SCRIPT is JSON: {"prefix": "mcp__toolgate__", "steps": [{"tool": NAME,
"input": {...}}, ...], "final": TEXT}. A request is the main conversation
when it offers a tool whose name starts with `prefix` (Codex groups an MCP
server's tools in a `namespace` tool, `mcp__toolgate`: its tools count as
`mcp__toolgate__NAME`, and are called by name within it); its step is the
number of tool results in it (so a retried request gets the same answer):
step k < len(steps) is answered with a call of steps[k], the last with
`final`. Any other request (a harness's side queries: titles, summaries)
gets a short text, and is appended to LOG.side. Every main request is
appended to LOG (JSON lines): its step, the tools offered, and each tool
result the model was shown, as the harness sent it (a Responses API
`function_call_output` as a `tool_result` block). Prints `listening PORT` once ready; serves until killed. Nothing is
asserted here: the Rust test decides.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = json.load(open(sys.argv[1]))
LOG = sys.argv[2]
LOCK = threading.Lock()


def tool_results(messages):
    out = []
    for m in messages:
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    out.append(block)
    return out


def tool_names(body):
    """The tools offered: Messages (`name`), Responses and Chat Completions
    (`name`, or `function.name`)."""
    out = []
    for t in body.get("tools") or []:
        # Gemini: `functionDeclarations` lists the functions.
        for f in t.get("functionDeclarations") or []:
            out.append(f.get("name", ""))
        if t.get("functionDeclarations") is not None:
            continue
        if t.get("type") == "namespace":
            # Codex groups an MCP server's tools: `mcp__SERVER` holding each.
            out.extend(f"{t['name']}__{sub.get('name', '')}" for sub in t.get("tools") or [])
        else:
            out.append(t.get("name") or (t.get("function") or {}).get("name") or "")
    return out


def responses_results(items):
    """A Responses API request's tool outputs, as `tool_result` blocks."""
    out = []
    for item in items if isinstance(items, list) else []:
        if item.get("type") == "function_call_output":
            output = item.get("output")
            out.append({"type": "tool_result", "tool_use_id": item.get("call_id"), "content": output})
    return out


def chat_results(messages):
    """A Chat Completions request's tool messages, as `tool_result` blocks."""
    out = []
    for m in messages if isinstance(messages, list) else []:
        if m.get("role") == "tool":
            out.append({"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                        "content": m.get("content")})
    return out


def gemini_results(contents):
    """A Gemini request's function responses, as `tool_result` blocks."""
    out = []
    for c in contents if isinstance(contents, list) else []:
        for part in c.get("parts") or []:
            r = part.get("functionResponse")
            if r is not None:
                out.append({"type": "tool_result", "tool_use_id": r.get("id") or r.get("name"),
                            "content": json.dumps(r.get("response"))})
    return out


def answer(body):
    """The blocks to answer with, and the stop reason."""
    tools = tool_names(body)
    if not any(t.startswith(SCRIPT["prefix"]) for t in tools):
        with LOCK, open(LOG + ".side", "a") as f:
            f.write(json.dumps(body) + "\n")
        return [{"type": "text", "text": "ok"}], "end_turn"
    results = (tool_results(body.get("messages", [])) + chat_results(body.get("messages"))
               + responses_results(body.get("input")) + gemini_results(body.get("contents")))
    step = len(results)
    with LOCK, open(LOG, "a") as f:
        f.write(json.dumps({"step": step, "tools": tools, "results": results}) + "\n")
    steps = SCRIPT["steps"]
    if step < len(steps):
        s = steps[step]
        return [{"type": "tool_use", "id": f"toolu_{step:02d}", "name": SCRIPT["prefix"] + s["tool"],
                 "input": s["input"]}], "tool_use"
    return [{"type": "text", "text": SCRIPT["final"]}], "end_turn"


def message(blocks, stop, model):
    return {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self.send(200, {"input_tokens": 10})
        if ":countTokens" in path:
            return self.send(200, {"totalTokens": 10})
        if ":generateContent" in path or ":streamGenerateContent" in path:
            return self.respond_gemini(body, ":streamGenerateContent" in path)
        if path.endswith("/chat/completions"):
            return self.respond_chat(body)
        if path.endswith("/responses"):
            return self.respond_responses(body)
        if not path.endswith("/v1/messages"):
            return self.send(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})
        blocks, stop = answer(body)
        model = body.get("model", "scripted")
        if not body.get("stream"):
            return self.send(200, message(blocks, stop, model))
        events = []

        def event(kind, data):
            events.append((kind, data))

        start = message([], None, model)
        event("message_start", {"type": "message_start", "message": start})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                event("content_block_start", {"type": "content_block_start", "index": i,
                                              "content_block": {"type": "text", "text": ""}})
                event("content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "text_delta", "text": b["text"]}})
            else:
                event("content_block_start", {"type": "content_block_start", "index": i,
                                              "content_block": {"type": "tool_use", "id": b["id"],
                                                                "name": b["name"], "input": {}}})
                event("content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json": json.dumps(b["input"])}})
            event("content_block_stop", {"type": "content_block_stop", "index": i})
        event("message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": 5}})
        event("message_stop", {"type": "message_stop"})
        sse(self, events)


def sse(handler, events):
    """A server-sent event stream of `(kind, data)`, then the connection
    closed: `kind` None writes a bare `data:` line (Gemini, Chat
    Completions), `data` a string is written as it is (`[DONE]`)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for kind, data in events:
        line = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {kind}\n" if kind else ""
        handler.wfile.write(f"{head}data: {line}\n\n".encode())
    handler.wfile.flush()
    handler.close_connection = True


def respond_responses(self, body):
    """The OpenAI Responses API (Codex), streamed."""
    blocks, _ = answer(body)
    items = []
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            items.append({"type": "message", "id": f"msg_{i}", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": b["text"], "annotations": []}]})
        else:
            item = {"type": "function_call", "id": f"fc_{b['id']}", "call_id": b["id"],
                    "name": b["name"], "arguments": json.dumps(b["input"]), "status": "completed"}
            for t in body.get("tools") or []:
                if t.get("type") == "namespace" and b["name"].startswith(t["name"] + "__"):
                    item["namespace"] = t["name"]
                    item["name"] = b["name"][len(t["name"]) + 2:]
            items.append(item)
    resp = {"id": "resp_scripted", "object": "response", "status": "in_progress", "model": body.get("model"),
            "output": []}
    events = [("response.created", {"type": "response.created", "response": resp})]
    for i, item in enumerate(items):
        events.append(("response.output_item.added", {"type": "response.output_item.added",
                                                      "output_index": i, "item": item}))
        events.append(("response.output_item.done", {"type": "response.output_item.done",
                                                     "output_index": i, "item": item}))
    done = dict(resp, status="completed", output=items,
                usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                       "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens_details": {"reasoning_tokens": 0}})
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    sse(self, events)


Handler.respond_responses = respond_responses


def example(schema):
    """A value of a JSON schema (Gemini's upper-case types too), for side
    queries that ask for JSON (Gemini CLI's router)."""
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {k: example(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return (schema.get("enum") or ["scripted"])[0]


def respond_gemini(self, body, stream):
    """The Gemini API (Gemini CLI): one candidate, streamed as one event."""
    blocks, _ = answer(body)
    schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
    if schema and blocks == [{"type": "text", "text": "ok"}]:
        blocks = [{"type": "text", "text": json.dumps(example(schema))}]
    parts = []
    for b in blocks:
        if b["type"] == "text":
            parts.append({"text": b["text"]})
        else:
            parts.append({"functionCall": {"name": b["name"], "args": b["input"]}})
    chunk = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                             "index": 0}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
             "modelVersion": "scripted"}
    if not stream:
        return self.send(200, chunk)
    sse(self, [(None, chunk)])


Handler.respond_gemini = respond_gemini


def respond_chat(self, body):
    """The OpenAI Chat Completions API (opencode, through the AI SDK's
    OpenAI-compatible provider), streamed."""
    blocks, _ = answer(body)
    model = body.get("model", "scripted")
    calls = [b for b in blocks if b["type"] == "tool_use"]
    if calls:
        delta = {"role": "assistant", "tool_calls": [
            {"index": i, "id": b["id"], "type": "function",
             "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
            for i, b in enumerate(calls)]}
        finish = "tool_calls"
    else:
        delta = {"role": "assistant", "content": "".join(b["text"] for b in blocks)}
        finish = "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if not body.get("stream"):
        message = {k: v for k, v in delta.items()}
        message.setdefault("content", None)
        return self.send(200, {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0,
                               "model": model, "choices": [{"index": 0, "message": message,
                                                            "finish_reason": finish}],
                               "usage": usage})
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": model}
    sse(self, [(None, dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}])),
               (None, dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}],
                           usage=usage)),
               (None, "[DONE]")])


Handler.respond_chat = respond_chat

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
