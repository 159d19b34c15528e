"""Bridged resources and prompts through `toolgate serve`, driven by the
official Python SDK (PyPI `mcp`) as its users would: the test starts
`toolgate serve` (stdio) bridging `@modelcontextprotocol/server-everything`
and checks the JSON report this prints.

    python passthrough.py -- TOOLGATE_COMMAND...

Every step catches its own error, so one failure does not hide the rest;
the report holds what each step saw (or `error`).
"""

import json
import os
import sys
import warnings

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def dump(x):
    return json.loads(x.model_dump_json(by_alias=True, exclude_none=True))


async def step(report, name, f):
    try:
        report[name] = await f()
    except Exception as e:  # noqa: BLE001 - the report says what failed
        report[name] = {"error": str(e), "code": getattr(getattr(e, "error", None), "code", None)}


async def main(command):
    warnings.filterwarnings("ignore")
    report = {}
    # The whole environment (the SDK passes a few variables only): the test
    # sets where toolgate keeps its cache and state.
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            report["capabilities"] = dump(init.capabilities)

            async def resources():
                return [dump(r) for r in (await s.list_resources()).resources]

            async def templates():
                return [dump(t) for t in (await s.list_resource_templates()).resource_templates]

            async def prompts():
                return [dump(p) for p in (await s.list_prompts()).prompts]

            await step(report, "resources", resources)
            await step(report, "templates", templates)
            await step(report, "prompts", prompts)
            listed = report.get("resources")
            if isinstance(listed, list) and listed:
                uri = listed[0]["uri"]

                async def read():
                    return dump(await s.read_resource(uri))

                await step(report, "read", read)
            listed = report.get("templates")
            if isinstance(listed, list) and listed:
                text = next((t for t in listed if "text" in t["uriTemplate"]), listed[0])
                expanded = text["uriTemplate"].replace("{resourceId}", "7")

                async def read_template():
                    return dump(await s.read_resource(expanded))

                await step(report, "read_template", read_template)

            async def read_unknown():
                return dump(await s.read_resource("toolgate-mcp://everything/demo://no/such/thing"))

            async def read_unrouted():
                return dump(await s.read_resource("demo://resource/static/document/features.md"))

            await step(report, "read_unknown", read_unknown)
            await step(report, "read_unrouted", read_unrouted)

            async def get_args():
                return dump(await s.get_prompt("mcp__everything__args-prompt", {"city": "Lyon", "state": "ARA"}))

            async def get_unknown():
                return dump(await s.get_prompt("mcp__everything__no-such-prompt", {}))

            await step(report, "get_args", get_args)
            await step(report, "get_unknown", get_unknown)
    print(json.dumps(report))


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    anyio.run(main, argv)
