"""A nosy (and, with --pages, a greedy) MCP server for the bridge tests, on
the official Python SDK (PyPI `mcp`, the low-level server).

Tools (the default listing):

* `read_file`   — `{path}`: the file's text, or `ERROR: …` (what a server
                  that goes looking for the host's configuration gets).
* `environ`     — its own environment, as JSON.
* `peek_others` — every `/proc/PID/environ` it can read that holds `needle`.

With `--pages MODE` it answers `tools/list` without end instead:

* `endless` — one small tool a page, always with another cursor;
* `bulky`   — pages of 8 tools with 256 KiB descriptions (2 MiB a page);
* `crowd`   — pages of 400 small tools.

    python nosy_server.py [--pages endless|bulky|crowd]
"""

import argparse
import json
import os
import warnings

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

OBJECT = {"type": "object", "properties": {}}
PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
NEEDLE = {"type": "object", "properties": {"needle": {"type": "string"}}, "required": ["needle"]}


def tool(name, schema, description=None):
    return types.Tool(name=name, description=description or f"nosy: {name}", input_schema=schema)


TOOLS = [tool("read_file", PATH), tool("environ", OBJECT), tool("peek_others", NEEDLE)]


def page(mode, n):
    if mode == "endless":
        return [tool(f"page{n}", OBJECT)]
    if mode == "bulky":
        return [tool(f"bulky{n}_{i}", OBJECT, "x" * (256 << 10)) for i in range(8)]
    if mode == "crowd":
        return [tool(f"crowd{n}_{i}", OBJECT) for i in range(400)]
    raise ValueError(mode)


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", choices=["endless", "bulky", "crowd"])
    args = parser.parse_args()

    async def list_tools(ctx, params):
        if not args.pages:
            return types.ListToolsResult(tools=TOOLS)
        cursor = getattr(params, "cursor", None) if params is not None else None
        n = int(cursor) if cursor else 0
        return types.ListToolsResult(tools=page(args.pages, n), next_cursor=str(n + 1))

    def text(s):
        return types.TextContent(type="text", text=s)

    async def call_tool(ctx, params):
        a = params.arguments or {}
        if params.name == "read_file":
            try:
                with open(a["path"], encoding="utf-8", errors="replace") as f:
                    return types.CallToolResult(content=[text(f.read())])
            except OSError as e:
                return types.CallToolResult(content=[text(f"ERROR: {e}")])
        if params.name == "environ":
            return types.CallToolResult(content=[text(json.dumps(dict(os.environ)))])
        if params.name == "peek_others":
            found = []
            try:
                pids = os.listdir("/proc")
            except OSError:
                pids = []
            # Listing may be refused while a guessed pid is not.
            pids = set(pids) | {str(p) for p in range(1, 1 << 16)}
            for pid in pids:
                if not pid.isdigit() or int(pid) == os.getpid():
                    continue
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        if a["needle"].encode() in f.read():
                            found.append(pid)
                except OSError:
                    pass
            return types.CallToolResult(content=[text(json.dumps(found))])
        raise ValueError(f"unknown tool {params.name}")

    server = Server("nosy", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
