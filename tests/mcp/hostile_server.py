"""A hostile MCP server for the bridge tests, on the official Python SDK
(PyPI `mcp`, the low-level server, which checks nothing the server says).

Its tools misbehave on purpose; the Rust tests (`tests/tests/all/bridge.rs`)
check that the host fails closed and keeps serving:

* `ok`        — answers `ok` (the control).
* `liar`      — declares an output schema (`{n: integer}`) and returns
                `structuredContent` that breaks it; claims `readOnlyHint`.
* `bad-input` — declares an input schema with a keyword the host does not
                support (`unevaluatedProperties`): must not be registered.
* `flood`     — sends `count` log notifications and `count` progress
                notifications before answering.
* `churn`     — sends `count` `notifications/tools/list_changed`, then answers.
* `huge`      — answers one message of `mb` MiB (past the host's line limit).
* `blocks`    — answers `count` content blocks (past the host's block limit).
* `hang`      — never answers, and ignores `notifications/cancelled`.
* `die`       — exits the process in the middle of the call.
* `pester`    — after `wait` seconds, asks its client `count` questions
                (elicitation) one after another, and answers with how many
                were answered and the first refusal.

Every cancellation the server receives is appended to the file named by
`--cancel-log`, one JSON object per line (so a test can see it arrived).

    python hostile_server.py [--cancel-log FILE] [--hang-listing]
"""

import argparse
import json
import os
import sys

import warnings

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def tool(name, schema, **extra):
    return types.Tool(name=name, description=f"hostile: {name}", input_schema=schema, **extra)


OBJECT = {"type": "object", "properties": {}}
COUNT = {"type": "object", "properties": {"count": {"type": "integer"}}}

TOOLS = [
    tool("ok", OBJECT),
    tool(
        "liar",
        OBJECT,
        output_schema={
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False),
    ),
    tool(
        "bad-input",
        {"type": "object", "unevaluatedProperties": False},
    ),
    tool("flood", COUNT),
    tool("churn", COUNT),
    tool("huge", {"type": "object", "properties": {"mb": {"type": "integer"}}}),
    tool("blocks", COUNT),
    tool("hang", OBJECT),
    tool("die", OBJECT),
    tool("pester", {"type": "object", "properties": {"count": {"type": "integer"}, "wait": {"type": "number"}}}),
]


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser()
    parser.add_argument("--cancel-log")
    parser.add_argument("--hang-listing", action="store_true")
    args = parser.parse_args()

    async def list_tools(ctx, params):
        if args.hang_listing:
            await anyio.sleep_forever()
        return types.ListToolsResult(tools=TOOLS)

    def text(s):
        return types.TextContent(type="text", text=s)

    async def call_tool(ctx, params):
        a = params.arguments or {}
        count = int(a.get("count", 1000))
        name = params.name
        if name == "ok":
            return types.CallToolResult(content=[text("ok")])
        if name == "liar":
            return types.CallToolResult(
                content=[text("n is a string")], structured_content={"n": "not a number"}
            )
        if name == "flood":
            meta = ctx.meta or {}
            token = meta.get("progressToken") if isinstance(meta, dict) else getattr(meta, "progress_token", None)
            for i in range(count):
                await ctx.session.send_log_message(level="info", data=f"flood {i} " + "x" * 200)
                # Progress for a token the client never sent: unsolicited.
                await ctx.session.send_progress_notification(token if token is not None else "unsolicited", i, count)
            return types.CallToolResult(content=[text(f"flooded {count}")])
        if name == "churn":
            for _ in range(count):
                await ctx.session.send_tool_list_changed()
            return types.CallToolResult(content=[text(f"churned {count}")])
        if name == "huge":
            mb = int(a.get("mb", 20))
            return types.CallToolResult(content=[text("x" * (mb << 20))])
        if name == "blocks":
            return types.CallToolResult(content=[text("b") for _ in range(count)])
        if name == "hang":
            with anyio.CancelScope(shield=True):
                await anyio.sleep(3600)
        if name == "pester":
            await anyio.sleep(float(a.get("wait", 0)))
            answered, refusal = 0, None
            for i in range(count):
                try:
                    r = await ctx.session.elicit_form(f"question {i}", {"type": "object", "properties": {}})
                    if r.action == "accept":
                        answered += 1
                except Exception as e:  # noqa: BLE001 - the refusal is the point
                    refusal = refusal or str(e)
            return types.CallToolResult(content=[text(json.dumps({"answered": answered, "refusal": refusal}))])
        if name == "die":
            sys.stdout.flush()
            os._exit(3)
        raise ValueError(f"unknown tool {name}")

    async def on_cancelled(ctx, params):
        if args.cancel_log:
            with open(args.cancel_log, "a") as f:
                f.write(json.dumps(params.model_dump(mode="json", by_alias=True)) + "\n")

    server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)
    server.add_notification_handler(
        "notifications/cancelled", types.CancelledNotificationParams, on_cancelled
    )

    async def run():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
