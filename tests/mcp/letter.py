"""The letter of the protocol, seen by the official MCP Python SDK.

Used by `tests/tests/all/serve.rs` (the `letter_*` tests); prints one JSON
report on its last stdout line, asserts nothing.

    python letter.py close --http URL [--token T]
        open a session (legacy mode), list the tools, close; the SDK's
        warnings (a DELETE it did not like: "Session termination failed").
    python letter.py listen (--http URL [--token T] | --stdio CMD ARG...)
        a 2026-07-28 connection opens `subscriptions/listen` for tool list
        changes, prints `listening`, and reports the first event (or none
        within 60 s).
"""

import argparse
import json
import logging
import sys

import anyio
import mcp.client.session
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters


# `auto` falls back to the 2025 handshake when `server/discover` is not
# answered within the SDK's 10 s; what is negotiated is checked here, not
# how fast a server starts on loaded cores: wait as long as for any answer.
mcp.client.session.DISCOVER_TIMEOUT_SECONDS = 60.0


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def target(args):
    if args.stdio:
        env = dict(item.split("=", 1) for item in args.env)
        return StdioServerParameters(command=args.stdio[0], args=args.stdio[1:], cwd=args.cwd, env=env)
    if args.token:
        import httpx2 as httpx

        from mcp.client.streamable_http import streamable_http_client

        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {args.token}"})
        return streamable_http_client(args.http, http_client=http)
    return args.http


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["close", "listen"])
    parser.add_argument("--http")
    parser.add_argument("--token")
    parser.add_argument("--cwd")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--stdio", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    out = {}
    warnings = Collect()
    logging.getLogger().addHandler(warnings)

    if args.what == "close":
        async with Client(target(args), mode="legacy", read_timeout_seconds=60) as client:
            out["protocol"] = client.protocol_version
            out["tools"] = len((await client.list_tools()).tools)
        out["warnings"] = warnings.messages
    else:
        async with Client(target(args), mode="auto", read_timeout_seconds=60) as client:
            out["protocol"] = client.protocol_version
            async with client.listen(tools_list_changed=True) as sub:
                out["honored"] = sub.honored.model_dump(mode="json", by_alias=True, exclude_none=True)
                print("listening", flush=True)
                with anyio.move_on_after(60):
                    async for event in sub:
                        out["event"] = type(event).__name__
                        break
            out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    anyio.run(main)
