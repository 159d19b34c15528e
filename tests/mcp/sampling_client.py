"""A client whose "model" is a script, answering toolgate's sampling
requests with tools (MCP 2025-11-25), driving `toolgate serve` (stdio) with
the official Python SDK (PyPI `mcp`). It calls `subagent` with
`model: "client"`: each of the sub-agent's turns comes back to this client
as `sampling/createMessage`. The script reads `hello.txt` with the `read`
tool, then answers with what the tool returned. Prints one JSON report:
the call's text and error flag, and what each sampling request held.

    python sampling_client.py [--no-tools] -- TOOLGATE_COMMAND...

`--no-tools`: a client that declares sampling without `tools`.
"""

import json
import os
import sys
import warnings

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(command, with_tools):
    warnings.filterwarnings("ignore")
    report = {"asked": [], "call": None}

    async def sampling(context, params):
        last = params.messages[-1]
        blocks = last.content if isinstance(last.content, list) else [last.content]
        results = [b for b in blocks if getattr(b, "type", "") == "tool_result"]
        report["asked"].append(
            {
                "tools": sorted(t.name for t in (params.tools or [])),
                "system": params.system_prompt or "",
                "messages": len(params.messages),
                "results": [c.text for r in results for c in r.content if c.type == "text"],
            }
        )
        if not results:
            return types.CreateMessageResultWithTools(
                role="assistant",
                content=[types.ToolUseContent(type="tool_use", id="use-1", name="read", input={"path": "hello.txt"})],
                model="scripted",
                stop_reason="toolUse",
            )
        text = results[0].content[0].text
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="the file says: " + text.strip()),
            model="scripted",
            stop_reason="endTurn",
        )

    caps = types.SamplingCapability(tools=types.SamplingToolsCapability()) if with_tools else types.SamplingCapability()
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, sampling_callback=sampling, sampling_capabilities=caps) as s:
            await s.initialize()
            try:
                r = await s.call_tool(
                    "subagent",
                    {"description": "read hello", "prompt": "What does hello.txt say?", "model": "client"},
                )
                report["call"] = {
                    "isError": r.is_error,
                    "text": "\n".join(c.text for c in r.content if c.type == "text"),
                }
            except Exception as e:  # noqa: BLE001 - the report says what failed
                report["call"] = {"error": str(e)}
    print(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    args = sys.argv[1:]
    with_tools = "--no-tools" not in args
    command = args[args.index("--") + 1 :]
    anyio.run(main, command, with_tools)
