"""A client that can answer what a bridged server asks, driving `toolgate
serve` (stdio) with the official Python SDK (PyPI `mcp`): its "user"
accepts an elicitation with a name, its "model" answers a sampling request
with a fixed text, and it asks for progress. It calls the tools of the
bridged `@modelcontextprotocol/server-everything` that ask, and prints one
JSON report: each call's text, what the client was asked, and the progress
it received.

    python asking_client.py [--no-answers] -- TOOLGATE_COMMAND...

`--no-answers`: a client that declares neither elicitation nor sampling.
"""

import json
import os
import sys
import warnings

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PREFIX = "mcp__everything__"


async def main(command, answers):
    warnings.filterwarnings("ignore")
    report = {"asked": [], "progress": [], "calls": {}}

    async def elicitation(context, params):
        report["asked"].append({"elicitation": params.message})
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def sampling(context, params):
        report["asked"].append({"sampling": [m.content.text for m in params.messages]})
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="the model's answer, from the client"),
            model="scripted",
            stop_reason="endTurn",
        )

    async def progress(progress, total, message):
        report["progress"].append([progress, total])

    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    kwargs = {"elicitation_callback": elicitation, "sampling_callback": sampling} if answers else {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **kwargs) as s:
            await s.initialize()
            tools = [t.name for t in (await s.list_tools()).tools]
            report["tools"] = sorted(t for t in tools if t.startswith(PREFIX))
            for name, args in [
                ("trigger-elicitation-request", {}),
                ("trigger-sampling-request", {"prompt": "say hi", "maxTokens": 20}),
                ("trigger-long-running-operation", {"duration": 0.4, "steps": 4}),
            ]:
                try:
                    r = await s.call_tool(
                        PREFIX + name,
                        args,
                        progress_callback=progress if "long" in name else None,
                    )
                    report["calls"][name] = {
                        "isError": r.is_error,
                        "text": "\n".join(c.text for c in r.content if c.type == "text"),
                    }
                except Exception as e:  # noqa: BLE001 - the report says what failed
                    report["calls"][name] = {"error": str(e)}
    print(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    args = sys.argv[1:]
    answers = "--no-answers" not in args
    command = args[args.index("--") + 1 :]
    anyio.run(main, command, answers)
