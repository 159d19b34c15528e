"""MCP clients (the official Python SDK, 2025 sessions over streamable
HTTP, one per command) that call `bash` with each command given, all at
once, and print
what came back: the approval tests (tests/tests/all/approvals.rs) decide
the calls meanwhile through `toolgate approvals`.

Any elicitation is recorded (and declined): with `--approve queue` the
server must never ask the client.
"""

import argparse
import json
import sys

import anyio
import httpx2 as httpx  # the SDK's HTTP client
import mcp_types as types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument(
        "--cancel-after",
        type=float,
        help="give up on each call after this many seconds (the SDK sends notifications/cancelled)",
    )
    parser.add_argument("commands", nargs="+")
    args = parser.parse_args()
    questions = []

    async def elicit(context, params):
        questions.append(params.message)
        return types.ElicitResult(action="decline")

    results = [None] * len(args.commands)

    # One session per command: a session's calls pass their policies (the
    # approval among them) one at a time, in arrival order, so two calls
    # wait in the queue together only from two sessions.
    async def call(i, command):
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {args.token}"})
        async with Client(
            streamable_http_client(args.http, http_client=http),
            mode="legacy",
            elicitation_callback=elicit,
            read_timeout_seconds=120,
        ) as client:
            if args.cancel_after is None:
                r = await client.call_tool("bash", {"command": command})
                results[i] = r.model_dump(mode="json", by_alias=True, exclude_none=True)
                return
            with anyio.move_on_after(args.cancel_after) as scope:
                r = await client.call_tool("bash", {"command": command})
                results[i] = r.model_dump(mode="json", by_alias=True, exclude_none=True)
            if scope.cancelled_caught:
                results[i] = {"cancelled": True}
                # Time for the cancellation to reach the server.
                await anyio.sleep(0.5)

    async with anyio.create_task_group() as tg:
        for i, command in enumerate(args.commands):
            tg.start_soon(call, i, command)

    print(json.dumps({"results": results, "questions": questions}))
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
