"""Drive `toolgate serve` with the official MCP Python SDK (PyPI `mcp`).

Used by the Rust integration tests (`tests/tests/all/serve.rs`): each step
talks to the server through the SDK as any MCP client would, and the
outcome of every step is printed as one JSON object on stdout for the Rust
side to check. Nothing is asserted here: the test decides.

    python client.py (--stdio CMD ARG... | --http URL) --mode legacy|auto \
        [--token TOKEN] [--marker TEXT]

The server is expected to serve the `tools` fixture, a guard that denies
`crash`, a pre-execute hook that asks about every call, and the built-in
`bash` tool. The elicitation callback accepts every question except one
about the `defer` tool, which it declines.
"""

import argparse
import json
import sys

import time

import anyio
import mcp.client.session
import mcp_types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

# `auto` probes with `server/discover` and falls back to the 2025 handshake
# when no answer comes within the SDK's 10 s. These tests check what is
# negotiated, not how fast a server starts on two loaded cores (the serve
# tests bound that themselves): wait as long as for any other answer.
mcp.client.session.DISCOVER_TIMEOUT_SECONDS = 60.0


def content_json(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http")
    parser.add_argument("--token")
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--marker", default="31.7")
    parser.add_argument("--cwd", help="the stdio server's working directory")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the stdio server")
    parser.add_argument("--stdio", nargs=argparse.REMAINDER)
    args = parser.parse_args()

    out = {}
    questions = []
    logs = []

    async def elicit(context, params):
        questions.append(params.message)
        if "about defer" in params.message:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={})

    async def on_log(params):
        logs.append(params.model_dump(mode="json", by_alias=True))

    if args.http:
        server = args.http
        if args.token:
            import httpx2 as httpx  # the SDK's HTTP client

            from mcp.client.streamable_http import streamable_http_client

            client_http = httpx.AsyncClient(headers={"Authorization": f"Bearer {args.token}"})
            server = streamable_http_client(args.http, http_client=client_http)
    else:
        env = dict(item.split("=", 1) for item in args.env)
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:], cwd=args.cwd, env=env)

    started = time.monotonic()
    async with Client(
        server,
        mode=args.mode,
        elicitation_callback=elicit,
        logging_callback=on_log,
        log_level="info" if args.mode != "legacy" else None,
        read_timeout_seconds=60,
    ) as client:
        out["protocol"] = client.protocol_version
        out["connect_s"] = round(time.monotonic() - started, 3)
        info = client.server_info
        out["server"] = info.name if info else None
        if args.mode == "legacy":
            await client.set_logging_level("info")

        listed = await client.list_tools()
        out["tools"] = {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools}

        progress = []

        async def on_progress(done, total, message):
            progress.append([done, total, message])

        echo = await client.call_tool("echo", {"text": "hi"}, progress_callback=on_progress)
        out["echo"] = content_json(echo)
        out["progress"] = progress

        out["invalid"] = content_json(await client.call_tool("echo", {"text": 5, "extra": 1}))
        out["denied"] = content_json(await client.call_tool("crash", {}))
        out["accepted"] = content_json(await client.call_tool("value", {"mode": "valid"}))
        out["declined"] = content_json(await client.call_tool("defer", {"text": "x"}))

        # A long call cancelled by the client: a Wasm body (wait_cancel loops
        # until it sees the cancellation) and a process (bash sleeping).
        for name, tool, arguments in [
            ("cancel_wasm", "wait_cancel", {}),
            ("cancel_bash", "bash", {"command": f"sleep {args.marker}; echo done"}),
        ]:
            with anyio.move_on_after(1.5) as scope:
                await client.call_tool(tool, arguments)
            out[name] = {"cancelled": scope.cancelled_caught}

        # The session still serves after the cancellations.
        out["after"] = content_json(await client.call_tool("echo", {"text": "still here"}))
        out["questions"] = questions
        out["logs"] = logs

    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
